#!/usr/bin/env bash
# Result hashes for refactors that must not change results (issue 48): a fixed set of short runs,
# at least one per agent family, each hashed over its metrics.jsonl with the timing keys
# (`wall_s`, `perf/*`) left out. Run it before and after a change on the same machine and diff
# the two files; every line must be equal.
#
#   scripts/result_hashes.sh OUT_FILE [O2O_BINARY]
#
# One torch thread, the CPU, seed 0; about 10 minutes on one core. The binary defaults to
# target/release/o2o (build it first). Floating-point results depend on the CPU (the AVX-512
# paths), so compare files made on the same machine only.
#
# RESULT_HASHES_IGNORE=a,b leaves out every metric whose key contains a or b: for a change that
# adds metrics and must leave every other value as it was (hash the old binary the same way).
set -euo pipefail
out="${1:?usage: scripts/result_hashes.sh OUT_FILE [O2O_BINARY]}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
o2o="$(realpath "${2:-$repo/target/release/o2o}")"
[ -x "$o2o" ] || { echo "result_hashes: $o2o is not an executable (cargo build --release first)" >&2; exit 1; }
work="$(mktemp -d /tmp/o2o-hashes.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$repo"
hopper=(--set 'dataset.path="data/hopper-small/hopper-medium-v2.hdf5"')
short=(--set eval.every=500 --set eval.episodes=2)
: > "$out.tmp"

# NAME PRESET ARGS…: one run into $work/NAME, its hash appended to the output.
run() {
    local name="$1" preset="$2"; shift 2
    local t0=$SECONDS
    if ! "$o2o" run --preset "$preset" --seed 0 --threads 1 --device cpu --rerun=off --progress off \
        --runs-dir "$work/$name" "$@" > "$work/$name.log" 2>&1; then
        echo "result_hashes: $name failed; its log:" >&2; tail -20 "$work/$name.log" >&2; exit 1
    fi
    local metrics; metrics=$(ls "$work/$name"/*/metrics.jsonl)
    local hash; hash=$(python3 - "$metrics" <<'EOF'
import hashlib, json, os, sys
ignore = [t for t in os.environ.get("RESULT_HASHES_IGNORE", "").split(",") if t]
h = hashlib.sha256()
for line in open(sys.argv[1]):
    row = {k: v for k, v in json.loads(line).items()
           if k != "wall_s" and not k.startswith("perf/") and not any(t in k for t in ignore)}
    h.update(json.dumps(row, sort_keys=True).encode())
print(h.hexdigest())
EOF
)
    printf '%-14s %s\n' "$name" "$hash" >> "$out.tmp"
    printf '%-14s %s  (%d s)\n' "$name" "$hash" $((SECONDS - t0)) >&2
}

run sac sac-halfcheetah --set train.random_steps=300 --set train.online_steps=700 "${short[@]}"
run sac-her sac-her-fetch-reach --set train.random_steps=200 --set train.online_steps=600 "${short[@]}"
run iql iql-hopper-medium "${hopper[@]}" --set train.offline_steps=800 --set train.online_steps=500 "${short[@]}"
run cql cql-hopper-medium "${hopper[@]}" --set train.offline_steps=600 --set train.online_steps=400 "${short[@]}"
run calql calql-hopper-medium "${hopper[@]}" --set train.offline_steps=600 --set train.online_steps=400 "${short[@]}"
run rlpd rlpd-hopper-medium "${hopper[@]}" --set train.random_steps=100 --set train.online_steps=150 "${short[@]}"
run wsrl wsrl-hopper-small --set train.offline_steps=600 --set train.warmup_steps=300 --set train.online_steps=600 "${short[@]}"
run sera-calql sera-calql-hopper-small --set train.offline_steps=600 --set train.online_steps=600 "${short[@]}"
run famo2o-cql famo2o-cql-hopper-small --set train.offline_steps=600 --set train.online_steps=600 "${short[@]}"
run famo2o-iql famo2o-iql-hopper-small --set train.offline_steps=600 --set train.online_steps=600 "${short[@]}"
run bc bc-imaginebench-mujoco-real --set train.offline_steps=600 "${short[@]}"
run td3bc td3bc-imaginebench-mujoco-real --set train.offline_steps=600 "${short[@]}"
run ppo ppo-hopper --set rollout.steps=512 --set train.online_steps=2048 --set eval.every=1024 --set eval.episodes=2
run unio4 unio4-halfcheetah-small --set agent.critic.steps=300 --set agent.dynamics.max_epochs=2 \
    --set agent.policy.bc_steps=200 --set agent.policy.bppo_steps=40 --set agent.ope.eval_step=20 \
    --set agent.value_refit.steps=200 --set rollout.steps=512 --set train.online_steps=1024 \
    --set eval.every=512 --set eval.episodes=2

# Dopamine: scripted demos and a progress model, then RLPD with potential-based shaping.
"$o2o" reward demos --task FetchPush-v4 --episodes 4 --out "$work/push-demos.hdf5" > "$work/demos.log" 2>&1
"$o2o" reward train --demos "$work/push-demos.hdf5" --view goal=3:6 --view object=9:12 --steps 200 \
    --out "$work/push-progress.pt" > "$work/progress.log" 2>&1
printf '%-14s %s\n' progress-model "$(sha256sum "$work/push-progress.pt" | cut -d' ' -f1)" >> "$out.tmp"
run dopamine rlpd-fetch-push-dopamine --set "dataset.path=\"$work/push-demos.hdf5\"" \
    --set "shaping.model=\"$work/push-progress.pt\"" --set train.online_steps=100 --set agent.critic_steps=2 \
    --set train.batch_size=256 "${short[@]}"

mv "$out.tmp" "$out"
echo "result_hashes: $(wc -l < "$out") hashes in $out" >&2
