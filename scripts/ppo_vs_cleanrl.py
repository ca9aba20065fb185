"""Our PPO at CleanRL's settings against CleanRL's published PPO returns (issue 43).

Reads the run directories of `o2o run --preset ppo-<task> --seeds 0..5` (the `ppo-*` presets are
CleanRL's `ppo_continuous_action.py` defaults: 1 env x 2048 steps, 10 epochs of minibatches of
64, reward normalization and clipping, 1M env steps) and prints, per task, the mean training
episode return over each run's last 100k env steps (the stochastic policy, as CleanRL's curves
log `charts/episodic_return`) and the final deterministic evaluation, as mean +- std over seeds,
beside CleanRL's figure.

CleanRL's figures: docs/rl-algorithms/ppo.md of vwxyzjn/cleanrl, table "ppo_continuous_action
({'tag': ['pr-424']})", MuJoCo v4 envs, 1M steps: HalfCheetah-v4 1442.64 +- 46.03, Hopper-v4
2382.86 +- 271.74, Walker2d-v4 2287.95 +- 571.78. Ours run on the v5 envs (same XML and
reward as v4 for these tasks up to v5's defaults; see docs/envs.md).

    python scripts/ppo_vs_cleanrl.py experiments/results/ppo-cleanrl-check
"""

import json
import statistics
import sys
from pathlib import Path

CLEANRL = {"hopper": (2382.86, 271.74), "halfcheetah": (1442.64, 46.03), "walker2d": (2287.95, 571.78)}
LAST_STEPS = 100_000


def run_figures(run: Path):
    """(mean training episode return over the last LAST_STEPS env steps, final eval return)."""
    summary = json.loads((run / "summary.json").read_text())
    if not summary.get("finished"):
        return None
    end = summary["env_steps"]
    returns = []
    with open(run / "metrics.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if "train/episode_return" in r and r.get("env_step", 0) > end - LAST_STEPS:
                returns.append(r["train/episode_return"])
    return statistics.mean(returns), summary["final_eval"]["mean_return"]


def pm(xs):
    return f"{statistics.mean(xs):.0f} ± {statistics.stdev(xs):.0f}" if len(xs) > 1 else f"{xs[0]:.0f}"


def main(root: Path):
    print("| task | seeds | ours: training return, last 100k steps | ours: final deterministic eval | CleanRL (pr-424, v4) |")
    print("|---|---|---|---|---|")
    for task_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        figures = [f for f in (run_figures(s.parent) for s in sorted(task_dir.glob("*/summary.json"))) if f]
        if not figures:
            continue
        train, final = [f[0] for f in figures], [f[1] for f in figures]
        ref = CLEANRL.get(task_dir.name)
        ref_text = f"{ref[0]:.0f} ± {ref[1]:.0f}" if ref else "—"
        print(f"| {task_dir.name} | {len(figures)} | {pm(train)} | {pm(final)} | {ref_text} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/results/ppo-cleanrl-check"))
