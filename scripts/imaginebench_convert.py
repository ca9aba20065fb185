#!/usr/bin/env python3
"""Convert ImagineBench's released pickled-numpy datasets to o2o's ImagineBench HDF5 layout.

ImagineBench (LAMDA-RL/ImagineBench, arXiv 2505.10010) ships its Mujoco, BabyAI and Libero data
as `.npy` files holding a pickled dict with keys `observations (N, T, D)`, `actions (N, T, A)`
(or `(N, T)` for discrete envs), `rewards (N, T, 1)`, `masks (N, T, 1)` (1 = valid step,
0 = padding) and `instructions` (`instructions[n][0]` is trajectory n's sentence). The
instruction encodings are a separate pickled dict `{sentence: vector}` (e.g.
`mujoco_encode.npy`). Real and imaginary (LLM-generated) rollouts are separate files.

Output (documented in docs/datasets.md, read by `o2o_datasets::imaginebench`):

    /observations            (M, D)  float32   env observation (without the instruction encoding)
    /actions                 (M, A)  float32
    /rewards                 (M,)    float32
    /next_observations       (M, D)  float32   observations[t + 1]; at a trajectory's last step, s_t
    /terminals               (M,)    bool      1 on each trajectory's last valid step
    /source                  (M,)    uint8     0 = real, 1 = imaginary
    /trajectory              (M,)    int32     trajectory index within its source file
    /instruction_id          (M,)    int32     row of /instructions/*
    /instructions/text       (K,)    UTF-8 strings
    /instructions/embedding  (K, E)  float32   (zeros, E = 0 columns, when no encodings given)
    attrs: format = "o2o-imaginebench-v1", real_files, imaginary_files

Each trajectory is flattened to its mask = 1 steps. Its last step is marked terminal, as the
released d3rlpy loader does. Usage:

    python scripts/imaginebench_convert.py --real mujoco_real.npy \
        --imaginary mujoco_imaginary_easy.npy --encodings mujoco_encode.npy --out mujoco_easy.hdf5

With `--encodings` alone (no data files) it writes only the table (`instructions/*`), for
`[imaginebench] embeddings = "<that file>"` in a run's config:

    python scripts/imaginebench_convert.py --encodings mujoco_encode.npy --out mujoco_encode.hdf5
"""
import argparse
import os
import sys

import h5py
import numpy as np


def load_pickled_dict(path):
    obj = np.load(path, allow_pickle=True)
    if isinstance(obj, np.ndarray) and obj.dtype == object and obj.shape == ():
        obj = obj.item()
    if not isinstance(obj, dict):
        sys.exit(f"{path}: expected a pickled dict, found {type(obj).__name__}")
    return obj


def sentence(instr):
    """`instructions[n]` is a sentence or a sequence whose first element is the sentence."""
    while isinstance(instr, (list, tuple, np.ndarray)) and len(instr) > 0 and not isinstance(instr, str):
        instr = instr[0]
    if isinstance(instr, bytes):
        instr = instr.decode()
    return str(instr)


def flatten(path, data, source, texts):
    for key in ("observations", "actions", "rewards", "masks"):
        if key not in data:
            sys.exit(f"{path}: missing key `{key}` (found {sorted(data)})")
    obs = np.asarray(data["observations"], dtype=np.float32)
    act = np.asarray(data["actions"], dtype=np.float32)
    if act.ndim == 2:
        act = act[..., None]
    rew = np.asarray(data["rewards"], dtype=np.float32).reshape(obs.shape[0], obs.shape[1])
    mask = np.asarray(data["masks"]).reshape(obs.shape[0], obs.shape[1]) > 0
    if obs.ndim != 3 or act.shape[:2] != obs.shape[:2]:
        sys.exit(f"{path}: observations {obs.shape} and actions {act.shape} must be (N, T, ·) with equal N, T")
    instr = data.get("instructions")
    rows = {k: [] for k in ("obs", "act", "rew", "next", "term", "traj", "iid")}
    for n in range(obs.shape[0]):
        steps = np.nonzero(mask[n])[0]
        if len(steps) == 0:
            continue
        text = sentence(instr[n]) if instr is not None else ""
        iid = texts.setdefault(text, len(texts))
        o = obs[n, steps]
        nxt = np.concatenate([o[1:], o[-1:]], axis=0)
        if "next_observations" in data:
            nxt = np.asarray(data["next_observations"], dtype=np.float32)[n, steps]
        term = np.zeros(len(steps), dtype=bool)
        term[-1] = True
        rows["obs"].append(o)
        rows["act"].append(act[n, steps])
        rows["rew"].append(rew[n, steps])
        rows["next"].append(nxt)
        rows["term"].append(term)
        rows["traj"].append(np.full(len(steps), n, dtype=np.int32))
        rows["iid"].append(np.full(len(steps), iid, dtype=np.int32))
    out = {k: np.concatenate(v) for k, v in rows.items()}
    out["src"] = np.full(len(out["rew"]), source, dtype=np.uint8)
    return out


def write_table_only(encodings, out):
    """The {sentence: vector} table alone (what `[imaginebench] embeddings = "<file>"` reads)."""
    enc = load_pickled_dict(encodings)
    order = sorted(enc)
    emb = np.stack([np.asarray(enc[t], dtype=np.float32).reshape(-1) for t in order])
    tmp = out + f".tmp-{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("instructions/text", data=np.array(order, dtype=object), dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("instructions/embedding", data=emb)
        f.attrs["format"] = "o2o-imaginebench-encodings-v1"
        f.attrs["encodings_file"] = os.path.basename(encodings)
    os.replace(tmp, out)
    print(f"{out}: {len(order)} instruction vectors of {emb.shape[1]} numbers")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--real", action="append", default=[], help="real-rollout .npy (repeatable)")
    p.add_argument("--imaginary", action="append", default=[], help="imaginary-rollout .npy (repeatable)")
    p.add_argument("--encodings", help="pickled {sentence: vector} .npy")
    p.add_argument("--out", required=True, help="output .hdf5")
    a = p.parse_args()
    if not a.real and not a.imaginary:
        if not a.encodings:
            sys.exit("give at least one --real or --imaginary file, or --encodings alone for a table-only file")
        write_table_only(a.encodings, a.out)
        return
    texts = {}
    parts = [flatten(f, load_pickled_dict(f), 0, texts) for f in a.real]
    parts += [flatten(f, load_pickled_dict(f), 1, texts) for f in a.imaginary]
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = sorted(texts, key=texts.get)
    if a.encodings:
        enc = load_pickled_dict(a.encodings)
        missing = [t for t in order if t not in enc]
        if missing:
            sys.exit(f"{a.encodings}: no encoding for instruction(s) {missing[:3]}")
        emb = np.stack([np.asarray(enc[t], dtype=np.float32).reshape(-1) for t in order])
    else:
        emb = np.zeros((len(order), 0), dtype=np.float32)
    tmp = a.out + f".tmp-{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("observations", data=cols["obs"])
        f.create_dataset("actions", data=cols["act"])
        f.create_dataset("rewards", data=cols["rew"])
        f.create_dataset("next_observations", data=cols["next"])
        f.create_dataset("terminals", data=cols["term"])
        f.create_dataset("source", data=cols["src"])
        f.create_dataset("trajectory", data=cols["traj"])
        f.create_dataset("instruction_id", data=cols["iid"])
        f.create_dataset("instructions/text", data=np.array(order, dtype=object), dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("instructions/embedding", data=emb)
        f.attrs["format"] = "o2o-imaginebench-v1"
        f.attrs["real_files"] = ";".join(os.path.basename(x) for x in a.real)
        f.attrs["imaginary_files"] = ";".join(os.path.basename(x) for x in a.imaginary)
    os.replace(tmp, a.out)
    n_real = int((cols["src"] == 0).sum())
    print(f"{a.out}: {len(cols['rew'])} transitions ({n_real} real, {len(cols['rew']) - n_real} imaginary), "
          f"{len(order)} instructions, obs {cols['obs'].shape[1]}, act {cols['act'].shape[1]}, embedding {emb.shape[1]}")


if __name__ == "__main__":
    main()
