#!/usr/bin/env bash
# SAC's initialization on Hopper-v5 (issue 20 item 3): o2o's SAC with its orthogonal default and
# with `fan_in_uniform` (PyTorch's nn.Linear rule), and scripts/sac_reference.py with PyTorch's
# own default, SEEDS seeds each, STEPS env steps (5k uniformly random, then one update per step),
# 10-episode deterministic evaluations every 5k steps, one torch thread per run, JOBS runs at a
# time.
#
#   scripts/sac_init_study.sh [OUT]          # default OUT: experiments-out/sac-init-hopper
#   SEEDS=5 STEPS=100000 JOBS=2 scripts/sac_init_study.sh
#   VARIANTS=reference-torch FIRST_SEED=1 SEEDS=4 JOBS=1 scripts/sac_init_study.sh   # a subset
#   o2o report OUT --metric eval/return --x env_step --split-by agent.critic.init --out OUT/report
#
# Resumable: a finished run (a summary.json under OUT/<variant>/seed-<s>) is skipped, an o2o run that was stopped is continued with
# `o2o resume` from its last checkpoint (every 10k steps), and a stopped reference run (it keeps
# no checkpoint) starts over. Each run's directory holds config.toml and metrics.jsonl, and
# summary.json once finished, which is what `o2o report` reads.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-experiments-out/sac-init-hopper}
SEEDS=${SEEDS:-5}
STEPS=${STEPS:-100000}
JOBS=${JOBS:-2}
FIRST_SEED=${FIRST_SEED:-0}
VARIANTS=${VARIANTS:-reference-torch o2o-orthogonal o2o-fan-in-uniform}
O2O=${O2O:-target/release/o2o}
PY=${PY:-$HOME/.cache/o2o/venv/bin/python}
mkdir -p "$OUT/logs"

one() { # variant seed
    local variant=$1 seed=$2 dir="$OUT/$1/seed-$2" log="$OUT/logs/$1-seed-$2.log"
    if [[ -n $(find "$dir" -maxdepth 2 -name summary.json 2>/dev/null) ]]; then
        echo "$variant seed $seed: finished run in $dir, skipped"
        return
    fi
    case $variant in
    reference-torch)
        "$PY" scripts/sac_reference.py --env Hopper-v5 --steps "$STEPS" --seed "$seed" --eval-every 5000 \
            --eval-episodes 10 --threads 1 --out "$dir" >"$log" 2>&1 ;;
    o2o-orthogonal | o2o-fan-in-uniform)
        local stopped
        stopped=$(find "$dir" -mindepth 1 -maxdepth 1 -type d ! -exec test -e '{}/summary.json' \; -print 2>/dev/null | sort | tail -n 1)
        if [[ -n $stopped && -n $(ls "$stopped"/checkpoints 2>/dev/null) ]]; then
            "$O2O" resume "$stopped" --threads 1 >>"$log" 2>&1
            return
        fi
        local init=()
        if [[ $variant == o2o-fan-in-uniform ]]; then
            init=(--set 'agent.critic.init="fan_in_uniform"' --set 'agent.actor.mlp.init="fan_in_uniform"')
        fi
        "$O2O" run --preset sac-hopper --seed "$seed" --threads 1 --runs-dir "$dir" --reuse \
            --set train.online_steps=$((STEPS - 5000)) --set eval.every=5000 --set eval.episodes=10 \
            --set checkpoint.every=10000 "${init[@]}" >"$log" 2>&1 ;;
    esac
    echo "$(date +%H:%M:%S) $variant seed $seed done"
}
export -f one
export OUT STEPS O2O PY

for ((s = FIRST_SEED; s < SEEDS; s++)); do
    for v in $VARIANTS; do echo "$v $s"; done
done | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"'
