#!/usr/bin/env python3
"""Reference for `o2o bench data`: h5py reading a D4RL-format file's keys into numpy, and
numpy uniform sampling of batches from it (the way Python replay buffers gather rows).

Usage: bench_h5py.py FILE [--repeats N] [--batch B] [--batches K]
Prints one JSON line: {"load_s": best load time, "rows": N, "sample_transitions_per_s": ...}.
"""
import argparse
import json
import time

import h5py
import numpy as np

KEYS = ["observations", "actions", "rewards", "terminals", "timeouts", "next_observations"]


def load(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][:] for k in KEYS if k in f}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batches", type=int, default=2000)
    a = p.parse_args()
    best = float("inf")
    for _ in range(a.repeats):
        t = time.perf_counter()
        data = load(a.file)
        best = min(best, time.perf_counter() - t)
    n = len(data["rewards"])
    obs, act, rew, nxt = data["observations"], data["actions"], data["rewards"], data["next_observations"]
    term = data["terminals"].astype(np.float32)
    rng = np.random.default_rng(0)
    if a.batches == 0:
        print(json.dumps({"load_s": best, "rows": n}))
        return
    t = time.perf_counter()
    for _ in range(a.batches):
        idx = rng.integers(0, n, a.batch)
        _ = (obs[idx], act[idx], rew[idx], nxt[idx], term[idx])
    sample_s = time.perf_counter() - t
    print(json.dumps({"load_s": best, "rows": n, "sample_transitions_per_s": a.batch * a.batches / sample_s}))


if __name__ == "__main__":
    main()
