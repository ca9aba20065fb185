#!/usr/bin/env bash
# The GPU check (issue 49), run on the GPU machine from the bundle `scripts/gpu/bundle.sh` makes:
#
#   tar -xzf gpu-bundle.tar.gz && gpu-bundle/scripts/gpu/check.sh "$OUT"     # [SECTIONS...]
#
# SECTIONS (default: all, in the order below, each with its own time limit, all within BUDGET_S;
# summary.md is rewritten after every section, so a run cut off from outside still leaves one):
#   system    nvidia-smi, the libraries the binary resolves, python/torch/JAX versions
#   doctor    `o2o doctor`: libtorch 2.11, the CUDA backend loaded, one device seen
#   update    `o2o bench update --device cuda` (o2o vs PyTorch eager on the same GPU) for SAC,
#             the 10-critic LayerNorm ensemble, IQL, CQL and RLPD at UTD 20
#   smoke     every agent family's short run on the device (finishes, finite metrics)
#   py        the same updates in PyTorch `torch.compile` and JAX `jit` (bench_update_py.py)
#   sac       online SAC env steps/s at one update per step (HalfCheetah; LeanRL's bar: 725/s on
#             an H100 with compile + CUDA graphs)
#   demo      `make demo`'s preset (wsrl-halfcheetah-small) on the device, timed, stopped at a
#             checkpoint by --max-time if the budget runs out (then resumable)
# Everything goes under OUT (default $OUT, else ./gpu-check): one folder or log per section and
# summary.md. Nothing here fails the whole check: a section that fails says so in summary.md.
#
# Environment: O2O_PYTHON (the python with torch 2.11 and JAX; default /opt/torch/.venv/bin/python3,
# else python3), DEVICE (cuda; `cpu` runs the same check on a CPU-only machine, which is how
# bundle.sh's output is tried before a GPU is lent), BUDGET_S (420: an 8-minute slot less the
# unpacking and a margin).
set -uo pipefail
bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(realpath -m "${1:-${OUT:-gpu-check}}")"
shift || true
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(system doctor update smoke py sac demo)
device="${DEVICE:-cuda}"
budget="${BUDGET_S:-420}"
start=$SECONDS
if [ -z "${O2O_PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python3 ]; then export O2O_PYTHON=/opt/torch/.venv/bin/python3; fi
mkdir -p "$out"
# shellcheck source=/dev/null
. "$bundle/env.sh" || { echo "check: env.sh failed (no torch for $O2O_PYTHON?)" | tee "$out/summary.md"; exit 1; }
o2o="$bundle/bin/o2o"
py="$O2O_PYTHON"
data="$bundle/data/halfcheetah-small/halfcheetah-medium-v2.hdf5"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
status="$out/status.tsv"
: > "$status"

left() { echo $((budget - (SECONDS - start))); }
# NAME SECONDS CMD...: run CMD with at most SECONDS (less if the whole budget has less), its output
# in OUT/NAME.log, one line `name rc wall_s` in status.tsv.
timed() {
    local name="$1" want="$2"; shift 2
    local have; have=$(left)
    [ "$want" -lt "$have" ] || want=$have
    if [ "$want" -lt 5 ]; then
        printf '%s\tskipped\t0\n' "$name" >> "$status"; return 0
    fi
    local t0=$SECONDS
    timeout --kill-after=10 "$want" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) >> "$status"
    echo "check: $name rc=$rc in $((SECONDS - t0)) s (budget left $(left) s)" >&2
    return $rc
}

run_o2o() {  # NAME SECONDS PRESET ARGS...: a short run on the device into OUT/runs/NAME
    local name="$1" want="$2" preset="$3"; shift 3
    timed "run-$name" "$want" "$o2o" run --preset "$preset" --seed 0 --device "$device" --threads 1 \
        --rerun=off --progress off --runs-dir "$out/runs/$name" "$@"
}

short=(--set eval.every=500 --set eval.episodes=2)
hc=(--set "dataset.path=\"$data\"")

# summary.md: each section's outcome and its figures.
summarize() {
"$py" - "$out" "$device" "$((SECONDS - start))" <<'EOF' > "$out/summary.md.tmp" && mv "$out/summary.md.tmp" "$out/summary.md"
import glob, json, os, sys
out, device, wall = sys.argv[1], sys.argv[2], sys.argv[3]
def last_json(path):
    try:
        lines = [l for l in open(path) if l.strip().startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
print(f"# GPU check on {device}: {wall} s\n")
print("| section | rc | wall s |\n|---|---|---|")
for line in open(os.path.join(out, "status.tsv")):
    name, rc, w = line.rstrip("\n").split("\t")
    print(f"| {name} | {rc} | {w} |")
doctor = os.path.join(out, "doctor.log")
if os.path.exists(doctor):
    print("\n## doctor\n\n```\n" + open(doctor).read().strip() + "\n```")
upd = last_json(os.path.join(out, "update.log"))
py = {b: last_json(os.path.join(out, f"py-{b}.log")) for b in ("jax", "compile")}
if upd or any(py.values()):
    print("\n## Updates per second (same device)\n")
    print("| update | o2o | PyTorch eager | torch.compile | JAX jit | o2o / eager | o2o / compile | o2o / JAX |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for r in (upd or {}).get("results", []):
        rows[r["algo"]] = r
    names = list(rows)
    for b in ("jax", "compile"):
        names += [n for n in ((py.get(b) or {}).get("variants") or {}) if n not in names]
    for n in names:
        r = rows.get(n, {})
        ours, eager = r.get("ours_updates_per_s"), r.get("pytorch_updates_per_s")
        comp = ((py.get("compile") or {}).get("variants") or {}).get(n, {}).get("updates_per_s")
        jx = ((py.get("jax") or {}).get("variants") or {}).get(n, {}).get("updates_per_s")
        f = lambda v: "–" if v is None else f"{v:.1f}"
        q = lambda a, b: "–" if a is None or not b else f"{a / b:.2f}×"
        print(f"| {n} | {f(ours)} | {f(eager)} | {f(comp)} | {f(jx)} | {q(ours, eager)} | {q(ours, comp)} | {q(ours, jx)} |")
    print("\n(o2o's and eager's figures from `o2o bench update --json`; its full table is in update.log)")
def rows_of(path):
    """The JSON rows of a metrics.jsonl, a torn last line (a run killed mid-write) skipped."""
    rows = []
    for line in open(path):
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows
runs = sorted(d for d in glob.glob(os.path.join(out, "runs", "*", "*")) if os.path.isdir(d))
if runs:
    print("\n## Runs on the device\n\n| run | finished | env steps | grad steps | wall s | final score | steps/s |\n|---|---|---|---|---|---|---|")
    g = lambda v: "–" if v is None else (f"{v:.0f}" if isinstance(v, (int, float)) and float(v).is_integer()
                                         else f"{v:.1f}" if isinstance(v, (int, float)) else str(v))
    for d in runs:
        name = d.split(os.sep)[-2]
        metrics = os.path.join(d, "metrics.jsonl")
        rows = rows_of(metrics) if os.path.exists(metrics) else []
        rate = next((r["perf/steps_per_s"] for r in reversed(rows) if "perf/steps_per_s" in r), None)
        score = next((r.get("eval/normalized_score", r.get("eval/return")) for r in reversed(rows)
                      if "eval/return" in r), None)
        last = rows[-1] if rows else {}
        try:
            j = json.load(open(os.path.join(d, "summary.json")))
        except (OSError, ValueError):
            j = None  # stopped by --max-time or the section's limit (resumable), or failed: see its log
        print(f"| {name} | {j is not None and j.get('finished')} | {g(last.get('env_step'))} | {g(last.get('grad_step'))} "
              f"| {g(j.get('wall_s') if j else last.get('wall_s'))} | {g(score)} | {g(rate)} |")
EOF
}

for section in "${sections[@]}"; do
    case "$section" in
    system)
        timed system 30 bash -c "
            nvidia-smi || true
            echo; echo '# ldd bin/o2o'; ldd '$o2o'
            echo; echo '# glibc'; ldd --version | head -1
            echo; '$py' -c 'import sys, torch; print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())'
            '$py' -c 'import jax; print(\"jax\", jax.__version__, jax.devices())' || true
            cat '$bundle/REVISION'"
        ;;
    doctor)
        timed doctor 30 "$o2o" doctor
        ;;
    update)
        timed update 150 "$o2o" bench update --device "$device" --json --rounds 2 --updates 100 --warmup 10 \
            --only sac,sac_ens10_ln,iql,cql,rlpd
        ;;
    py)
        timed py-jax 75 "$py" "$bundle/scripts/gpu/bench_update_py.py" --backend jax --device "$device" \
            --updates 100 --warmup 10
        timed py-compile 90 "$py" "$bundle/scripts/gpu/bench_update_py.py" --backend torch-compile \
            --device "$device" --updates 100 --warmup 10
        ;;
    smoke)
        run_o2o sac 30 sac-halfcheetah --set train.random_steps=300 --set train.online_steps=500 "${short[@]}"
        run_o2o iql 30 iql-halfcheetah-medium "${hc[@]}" --set train.offline_steps=400 --set train.online_steps=300 "${short[@]}"
        run_o2o cql 30 cql-halfcheetah-medium "${hc[@]}" --set train.offline_steps=400 --set train.online_steps=300 "${short[@]}"
        run_o2o calql 30 calql-halfcheetah-medium "${hc[@]}" --set train.offline_steps=400 --set train.online_steps=300 "${short[@]}"
        # RLPD's online batches are half offline: 300 random + 300 online rows fill a 512-row batch.
        run_o2o rlpd 30 rlpd-halfcheetah-medium "${hc[@]}" --set train.batch_size=512 --set train.random_steps=300 --set train.online_steps=300 "${short[@]}"
        # A 256-row online batch, so the online (no retention) updates run within 400 env steps.
        run_o2o wsrl 30 wsrl-halfcheetah-small "${hc[@]}" --set train.offline_steps=400 --set train.warmup_steps=100 --set train.online_steps=300 --set train.online_batch_size=256 "${short[@]}"
        run_o2o sera-calql 30 sera-calql-halfcheetah-small "${hc[@]}" --set train.offline_steps=400 --set train.online_steps=300 "${short[@]}"
        run_o2o famo2o-cql 45 famo2o-cql-halfcheetah-medium "${hc[@]}" --set train.offline_steps=300 --set train.online_steps=200 "${short[@]}"
        run_o2o famo2o-iql 30 famo2o-iql-halfcheetah-mixed-small "${hc[@]}" --set train.offline_steps=400 --set train.online_steps=300 "${short[@]}"
        run_o2o ppo 30 ppo-halfcheetah --set rollout.steps=512 --set train.online_steps=1024 --set eval.every=512 --set eval.episodes=2
        run_o2o unio4 60 unio4-halfcheetah-small "${hc[@]}" --set agent.critic.steps=300 --set agent.dynamics.max_epochs=2 \
            --set agent.policy.bc_steps=200 --set agent.policy.bppo_steps=40 --set agent.ope.eval_step=20 \
            --set agent.value_refit.steps=200 --set rollout.steps=512 --set train.online_steps=1024 \
            --set eval.every=512 --set eval.episodes=2
        run_o2o sac-her 30 sac-her-fetch-reach --set train.random_steps=200 --set train.online_steps=400 "${short[@]}"
        # BC and TD3+BC have presets on the ImagineBench data only; it travels with the working tree.
        if [ -f data/imaginebench-mujoco-small/mujoco-small.hdf5 ]; then
            run_o2o bc 30 bc-imaginebench-mujoco-real --set train.offline_steps=400 "${short[@]}"
            run_o2o td3bc 30 td3bc-imaginebench-mujoco-real --set train.offline_steps=400 "${short[@]}"
        else
            printf 'run-bc\tskipped (no data/imaginebench-mujoco-small here)\t0\nrun-td3bc\tskipped\t0\n' >> "$status"
        fi
        ;;
    sac)
        run_o2o sac-rate 70 sac-halfcheetah --set train.random_steps=1000 --set train.online_steps=30000 \
            --set eval.every=100000 --set checkpoint.every=100000 --max-time 60s
        ;;
    demo)
        have=$(left)
        run_o2o demo "$have" wsrl-halfcheetah-small "${hc[@]}" --max-time "$((have > 30 ? have - 25 : 5))s"
        ;;
    *)
        echo "check: unknown section $section (system doctor update smoke py sac demo)" >&2
        ;;
    esac
    summarize
done

cat "$out/summary.md"
