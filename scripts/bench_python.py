"""Speed of o2o through Python (issue 45, item 6), as ratios measured in one process, interleaved.

1. Offline IQL updates/s: the same run (preset iql-hopper-medium on the shipped
   data/hopper-small/hopper-medium-v2.hdf5, one torch thread, CPU) started by `o2o train` in a
   subprocess and by `o2o.Run(...).fit(n)` in this process, alternating A B B A … Two rates:
   the run's own `perf/steps_per_s` (wall clock, logged every `log_every` steps, the first
   interval left out as warm-up), and updates per CPU-second: the CPU time of a run of `n`
   updates minus that of a run of `n/10` (start-up, data loading and the final evaluation
   cancel), for the subprocess from `getrusage(RUSAGE_CHILDREN)`, in this process from
   `time.process_time()`. On a machine shared with other jobs the CPU-time rate is the steadier.
2. Per-step cost of an env written in Python: the run's random-action phase (no updates) on
   Hopper-v5 made by o2o in Rust, on Gymnasium's Hopper-v5 handed over as a Python env (stepped
   from the Rust loop, the GIL taken per call), and Gymnasium's env stepped by a plain Python
   loop (`env.step(a)`, the actions drawn beforehand), alternating.
3. `fit_online` SAC on Gymnasium's Hopper-v5 (a Python env) against d3rlpy's `fit_online` on
   the same env, one torch thread each, the same SAC (2×256, batch 256, LRs 3e-4, 2 critics,
   α₀ 1, one update per env step after 1000 random steps): the wall time of a run of `--online`
   env steps minus that of a run of half as many (start-up and the random steps cancel),
   alternating. Needs d3rlpy importable (kept out of the venv: install it with
   `pip install --no-deps --target DIR d3rlpy==2.8.1 …` and put DIR on PYTHONPATH); skipped
   otherwise.

    python scripts/bench_python.py --o2o target/release/o2o [--rounds 5] [--updates 3000] [--steps 20000]
        [--online 3000] [--part 1|2|3]

The load average is printed before and after each measurement.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import o2o

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "hopper-small" / "hopper-medium-v2.hdf5"


def load():
    return "load %.2f" % os.getloadavg()[0]


def rate(run_dir):
    """Mean `perf/steps_per_s` of a run's metrics, the first logged interval left out."""
    records = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line]
    rates = [r["perf/steps_per_s"] for r in records if "perf/steps_per_s" in r]
    return statistics.fmean(rates[1:] or rates)


def offline_overrides(updates):
    return {
        "dataset.path": str(DATA),
        "train.offline_steps": updates,
        "train.online_steps": 0,
        "train.log_every": 250,
        "eval.every": 0,
        "eval.episodes": 1,
        "checkpoint.every": updates,
    }


def cli_run(o2o_bin, updates, runs):
    """(run directory, CPU seconds) of `o2o train` making `updates` updates."""
    sets = []
    for k, v in offline_overrides(updates).items():
        sets += ["--set", f"{k}={v}"]
    cmd = [o2o_bin, "train", "--preset", "iql-hopper-medium", *sets, "--runs-dir", str(runs),
           "--device", "cpu", "--threads", "1", "--rerun", "off", "--progress", "off"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next(x for x in out.stderr.splitlines() if x.startswith("run directory: "))
    return line.split(": ", 1)[1], (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def python_run(updates, runs):
    """(run directory, CPU seconds) of `o2o.Run(...).fit(updates)` in this process."""
    run = (o2o.Run.preset("iql-hopper-medium").set(offline_overrides(updates)).runs_dir(runs)
           .device("cpu").threads(1).rerun("off").progress("off"))
    before = time.process_time()
    done = run.fit(updates)
    return done.dir, time.process_time() - before


def offline(side, updates, runs):
    """(wall-clock updates/s, updates per CPU-second) of one side."""
    short_dir, short_cpu = side(updates // 10, runs)
    run_dir, cpu = side(updates, runs)
    return rate(run_dir), (updates - updates // 10) / (cpu - short_cpu)


def random_phase(env, steps, runs):
    run = (o2o.Run.preset("sac-hopper").set({"train.random_steps": steps, "train.log_every": 2000,
                                            "eval.every": 0, "eval.episodes": 1, "checkpoint.every": steps})
           .env(env).runs_dir(runs).device("cpu").threads(1).rerun("off").progress("off"))
    return rate(run.fit_online(0).dir)


def python_loop(steps):
    """Gymnasium's env stepped by a Python loop, the random actions drawn beforehand."""
    env = gym.make("Hopper-v5")
    env.reset(seed=0)
    low, high = env.action_space.low, env.action_space.high
    actions = np.random.default_rng(0).uniform(low, high, size=(steps, len(low))).astype(np.float32)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--o2o", default=str(REPO / "target" / "release" / "o2o"), help="the o2o binary")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--updates", type=int, default=3000)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--online", type=int, default=3000, help="env steps of part 3's longer runs")
    p.add_argument("--part", type=int, choices=[1, 2, 3], help="only this part")
    a = p.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="o2o-bench-python-"))
    if a.part in (None, 1):
        offline_part(a, runs)
    if a.part in (None, 2):
        env_part(a, runs)
    if a.part in (None, 3):
        d3rlpy_part(a, runs)


def offline_part(a, runs):
    print(f"1. offline IQL updates/s, iql-hopper-medium on {DATA.name}, {a.updates} updates, 1 thread")
    cli, py = [], []
    sides = [("cli", cli, lambda u, r: cli_run(a.o2o, u, r)), ("python", py, python_run)]
    for k in range(a.rounds):
        for name, into, side in sides[:: 1 if k % 2 == 0 else -1]:
            before = load()
            into.append(offline(side, a.updates, runs))
            wall, per_cpu = into[-1]
            print(f"   round {k + 1} {name:6s} {wall:7.1f} updates/s, {per_cpu:7.1f} per CPU-s  ({before} → {load()})")
    for i, what in [(0, "wall clock"), (1, "CPU time")]:
        ratios = [q[i] / c[i] for q, c in zip(py, cli)]
        each = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"   Python / CLI ({what}): median {statistics.median(ratios):.3f} (rounds {each})")


def env_part(a, runs):
    print(f"2. env steps/s of the random-action phase, Hopper-v5, {a.steps} steps")
    rust, pyenv, loop = [], [], []
    for k in range(a.rounds):
        for name, into, measure in [
            ("rust env", rust, lambda: random_phase("Hopper-v5", a.steps, runs)),
            ("python env", pyenv, lambda: random_phase(gym.make("Hopper-v5"), a.steps, runs)),
            ("python loop", loop, lambda: python_loop(a.steps)),
        ][:: 1 if k % 2 == 0 else -1]:
            before = load()
            into.append(measure())
            print(f"   round {k + 1} {name:11s} {into[-1]:8.0f} steps/s  ({before} → {load()})")
    us = lambda xs: 1e6 / statistics.fmean(xs)
    print(f"   µs/step: o2o loop + Rust env {us(rust):.1f}, o2o loop + Python env {us(pyenv):.1f}, "
          f"Python loop + Python env {us(loop):.1f}")
    print(f"   Python env in the o2o loop vs the Rust env: {us(pyenv) / us(rust):.2f}× the time per step; "
          f"vs the same env in a Python loop: {us(pyenv) - us(loop):+.1f} µs/step "
          "(the boundary, less the Python loop's own work, plus the o2o loop's: replay rows, random actions)")



RANDOM = 1000


def o2o_sac_seconds(steps, runs):
    """Wall seconds of o2o's SAC making `steps` env steps (the first RANDOM random) on
    Gymnasium's Hopper-v5."""
    sac = o2o.SAC(random_steps=RANDOM, device="cpu", threads=1, runs_dir=runs, progress="off", rerun="off",
                  set={"eval.every": 0, "eval.episodes": 1, "eval.at_phase_end": False,
                       "checkpoint.every": steps})
    start = time.perf_counter()
    sac.fit_online(gym.make("Hopper-v5"), steps - RANDOM)
    return time.perf_counter() - start


def d3rlpy_sac_seconds(steps):
    """The same with d3rlpy's SAC (its defaults are these settings)."""
    import logging

    import d3rlpy
    import structlog
    import torch

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    torch.set_num_threads(1)
    env = gym.make("Hopper-v5")
    sac = d3rlpy.algos.SACConfig(batch_size=256, actor_learning_rate=3e-4, critic_learning_rate=3e-4,
                                 temp_learning_rate=3e-4, gamma=0.99, tau=0.005, n_critics=2,
                                 initial_temperature=1.0).create(device="cpu:0")
    buffer = d3rlpy.dataset.create_fifo_replay_buffer(limit=1_000_000, env=env)
    start = time.perf_counter()
    sac.fit_online(env, buffer, n_steps=steps, n_steps_per_epoch=steps, random_steps=RANDOM,
                   update_start_step=RANDOM, show_progress=False,
                   logger_adapter=d3rlpy.logging.NoopAdapterFactory())
    return time.perf_counter() - start


def d3rlpy_part(a, runs):
    try:
        import d3rlpy  # noqa: F401
    except ImportError:
        print("3. skipped: d3rlpy is not importable")
        return
    long, short = a.online, (a.online + RANDOM) // 2
    print(f"3. fit_online SAC on Gymnasium's Hopper-v5, 1 thread: {long} vs {short} env steps, "
          f"{RANDOM} random")
    per = {"o2o": [], "d3rlpy": []}
    for k in range(a.rounds):
        sides = [("o2o", lambda n: o2o_sac_seconds(n, runs)), ("d3rlpy", d3rlpy_sac_seconds)]
        for name, seconds in sides[:: 1 if k % 2 == 0 else -1]:
            before = load()
            per[name].append((seconds(long) - seconds(short)) / (long - short))
            print(f"   round {k + 1} {name:6s} {1e3 * per[name][-1]:6.2f} ms per env step with its update "
                  f"({before} → {load()})")
    ratios = [d / o for d, o in zip(per["d3rlpy"], per["o2o"])]
    each = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"   o2o's speed / d3rlpy's: median {statistics.median(ratios):.2f}× (rounds {each})")


if __name__ == "__main__":
    main()
