#!/usr/bin/env python3
"""Does the whole training loop keep up with the bare update? (issue 27 item 3)

For each thread count, in one process after another on the same machine:

1. `o2o bench update --json --only ALGO`, right before and right after each run below, gives
   the bare update rate (updates per wall second, batch 256, obs 17, act 6: HalfCheetah's
   shapes); the run is compared with the mean of the two, since this kind of host drifts by
   several percent between minutes.
2. Offline runs of the same algorithms and shapes on the shipped HalfCheetah data
   (`iql-halfcheetah-medium`, `cql-halfcheetah-medium`, `--dataset data/halfcheetah-small/...`)
   give the loop's rate, sampling, logging and the presets' periodic evaluations included: the
   total steps over the total time of every `perf/steps_per_s` window after the first (the first
   holds start-up).
3. An online `sac-halfcheetah` run (1k random steps, then one update per env step) gives the
   online loop's rate over its windows with updates; its per-step overhead (env step, replay
   insert, action sampling, logging, evaluation) is `1/loop − 1/bench`.
4. Each run's own `perf/update_s` and `perf/sample_s` give the share of its loop's seconds in
   the updates and in drawing batches: the loop's cost beside the update, free of the drift
   between the run and the benches.

    scripts/loop_overhead.py [--threads 2 1] [--steps 10000] [--cql-steps 4000] [--algos iql,cql,sac] [--repeat N] [--o2o target/release/o2o] [--out DIR]

Prints a Markdown table and writes it with the raw figures (`loop_overhead.json`) to DIR.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

DATA = "data/halfcheetah-small/halfcheetah-medium-v2.hdf5"
OFFLINE = [("iql", "iql-halfcheetah-medium"), ("cql", "cql-halfcheetah-medium")]


def bench(o2o, threads, only):
    cmd = [o2o, "bench", "update", "--json", "--threads", str(threads), "--only", only, "--rounds", "2", "--updates", "100", "--warmup", "10"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    last = json.loads(out.strip().splitlines()[-1])
    return {r["algo"]: r["ours_updates_per_s"] for r in last["results"]}, last


def loop_rate(run_dir, key="grad_step", from_step=0, without_evaluations=False):
    """Total steps over total seconds of the windows after the first (and ending after
    `from_step`), steps counted in `key`; `without_evaluations` leaves out the windows that
    hold a periodic evaluation (the window after each `eval/return` line). Returns the rate
    and the share of those seconds the run spent in its updates and in drawing batches (its
    own `perf/update_s` and `perf/sample_s`: measured in the same seconds, so the host's drift
    does not bias them)."""
    steps = secs = update_s = sample_s = 0.0
    prev = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    evaluated = {row[key] for row in lines if "eval/return" in row and key in row}
    rows = [row for row in lines if "perf/steps_per_s" in row]
    for row in rows:
        step = row[key]
        if without_evaluations and prev in evaluated:
            prev = step
            continue
        if prev is not None and step > from_step:
            n = step - prev
            if n > 0:
                steps += n
                secs += n / row["perf/steps_per_s"]
                update_s += row.get("perf/update_s", float("nan"))
                sample_s += row.get("perf/sample_s", float("nan"))
        prev = step
    if secs == 0:
        sys.exit(f"{run_dir}/metrics.jsonl: no perf/steps_per_s windows to measure")
    return steps / secs, update_s / secs, sample_s / secs


def train(o2o, threads, out, preset, sets):
    runs = os.path.join(out, f"{preset}-t{threads}")
    cmd = [o2o, "train", "--preset", preset, "--threads", str(threads), "--runs-dir", runs, "--set", "checkpoint.every=1000000000"] + [a for s in sets for a in ("--set", s)]
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.time() - t0
    dirs = sorted(glob.glob(os.path.join(runs, "*", "metrics.jsonl")), key=os.path.getmtime)
    if not dirs:
        sys.exit(f"{runs}: the run wrote no metrics.jsonl")
    return os.path.dirname(dirs[-1]), wall


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    p.add_argument("--steps", type=int, default=10000, help="IQL's offline updates, and online env steps after the random ones")
    p.add_argument("--cql-steps", type=int, default=4000, help="CQL's offline updates (its update is about 10x IQL's)")
    p.add_argument("--algos", default="iql,cql,sac", help="which of iql, cql (offline) and sac (online) to run")
    p.add_argument("--o2o", default="target/release/o2o")
    p.add_argument("--out", default="experiments-out/loop-overhead")
    p.add_argument("--repeat", type=int, default=1, help="run each bench-run-bench triple this many times (the host drifts: compare the medians)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    rows, raw = [], {"load_average_before": load, "steps": a.steps, "cql_steps": a.cql_steps, "runs": []}
    for t in a.threads:
        jobs = [(algo, preset, f"offline `{preset}`", [f"train.offline_steps={a.cql_steps if algo == 'cql' else a.steps}", f'dataset.path="{DATA}"'], "grad_step", 0) for algo, preset in OFFLINE]
        random = 1000
        jobs.append(("sac", "sac-halfcheetah", "online `sac-halfcheetah`", [f"train.random_steps={random}", f"train.online_steps={a.steps}"], "env_step", random + 1000))
        for algo, preset, what, sets, key, from_step in [j for j in jobs if j[0] in a.algos.split(",")]:
            for _ in range(a.repeat):
                # The bench right before and right after the run: this host's speed drifts by
                # several percent between minutes, so the run is compared with both.
                before, full_before = bench(a.o2o, t, algo)
                run, wall = train(a.o2o, t, a.out, preset, sets)
                after, full_after = bench(a.o2o, t, algo)
                r, in_update, in_sample = loop_rate(run, key=key, from_step=from_step)
                r_quiet = loop_rate(run, key=key, from_step=from_step, without_evaluations=True)[0]
                ref = (before[algo] + after[algo]) / 2
                rows.append((t, algo, what, before[algo], after[algo], r, r / ref, 1e6 / r - 1e6 / ref, r_quiet / ref, in_update, in_sample))
                raw["runs"].append({"threads": t, "preset": preset, "run": run, "loop_steps_per_s": r, "loop_steps_per_s_without_evaluations": r_quiet, "share_in_updates": in_update, "share_sampling": in_sample, "bench_before": full_before, "bench_after": full_after, "wall_s": wall})
                print(f"{t} thread(s) {preset}: loop {r:.1f} steps/s ({100 * in_update:.1f}% of it in updates, {100 * in_sample:.1f}% sampling), bench {before[algo]:.1f} before, {after[algo]:.1f} after (updates/s)", flush=True)
    raw["load_average_after"] = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    lines = [
        "| threads | algo | loop | bench updates/s (before / after) | loop steps/s | loop / bench | overhead per step (µs) | loop / bench without the evaluation windows | the loop's time in updates / sampling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {t} | {algo} | {what} | {b0:.1f} / {b1:.1f} | {r:.1f} | {ratio:.3f} | {over:.0f} | {quiet:.3f} | {100 * upd:.1f}% / {100 * smp:.1f}% |" for t, algo, what, b0, b1, r, ratio, over, quiet, upd, smp in rows]
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "loop_overhead.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(a.out, "loop_overhead.json"), "w") as f:
        json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
