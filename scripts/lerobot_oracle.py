"""The real `lerobot` package as the oracle of o2o's LeRobotDataset reader and writer.

Run with the lerobot venv's python ($O2O_HOME/lerobot-venv, made by scripts/setup.sh), never the
main venv (lerobot needs torch<2.11). Used by experiments/tests/lerobot_interop.rs:

  write-v30 ROOT JSON    LeRobotDataset.create / add_frame / save_episode / finalize: three
                         episodes with a state, an action, HIL-SERL's next.reward and next.done,
                         complementary_info.is_intervention and a small image stream; JSON gets
                         the values written.
  write-v21 ROOT JSON    the same frames in the v2.1 layout (lerobot 0.4.4 writes v3.0 only, so
                         the files are made here from the documented layout: one Parquet file per
                         episode written by Hugging Face `datasets`, meta/episodes.jsonl,
                         tasks.jsonl, episodes_stats.jsonl).
  convert PARENT NAME    lerobot's own v2.1 -> v3.0 converter on PARENT/NAME, offline, with a
                         tiny file budget so the v3.0 data spans several files.
  read ROOT JSON         LeRobotDataset(repo_id, root=ROOT) offline: every frame, the metadata
                         and the stats, as JSON.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402

STATE, ACTION = 3, 2
LENGTHS = [5, 4, 3]
# Episode 0 terminates (next.done on its last frame); 1 and 2 end without it (time limits).
TERMINATED = [True, False, False]
TASK = "reach the cube"


def features(with_image=True):
    f = {
        "observation.state": {"dtype": "float32", "shape": (STATE,), "names": ["x", "y", "z"]},
        "action": {"dtype": "float32", "shape": (ACTION,), "names": ["dx", "dy"]},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
        "next.done": {"dtype": "bool", "shape": (1,), "names": None},
        "complementary_info.is_intervention": {"dtype": "float32", "shape": (1,), "names": None},
    }
    if with_image:
        f["observation.images.wrist"] = {"dtype": "image", "shape": (8, 8, 3), "names": ["height", "width", "channels"]}
    return f


def episodes():
    """The frames, deterministic: a list of episodes, each a list of frame dicts."""
    rng = np.random.default_rng(46)
    out = []
    for e, n in enumerate(LENGTHS):
        ep = []
        for i in range(n):
            ep.append(
                {
                    "observation.state": rng.standard_normal(STATE).astype(np.float32),
                    "action": rng.uniform(-1, 1, ACTION).astype(np.float32),
                    "next.reward": np.array([rng.standard_normal()], dtype=np.float32),
                    "next.done": np.array([TERMINATED[e] and i == n - 1], dtype=bool),
                    "complementary_info.is_intervention": np.array([float(i % 2 == 1 and e == 1)], dtype=np.float32),
                    "observation.images.wrist": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8),
                }
            )
        out.append(ep)
    return out


def as_json(eps):
    """What a reader must find: per frame, the numeric features as float lists."""
    rows = []
    for e, ep in enumerate(eps):
        for i, fr in enumerate(ep):
            rows.append(
                {
                    "episode_index": e,
                    "frame_index": i,
                    "observation.state": [float(x) for x in fr["observation.state"]],
                    "action": [float(x) for x in fr["action"]],
                    "next.reward": float(fr["next.reward"][0]),
                    "next.done": bool(fr["next.done"][0]),
                    "complementary_info.is_intervention": float(fr["complementary_info.is_intervention"][0]),
                }
            )
    return {"rows": rows, "lengths": LENGTHS, "task": TASK}


def write_v30(root, out):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset.create("o2o/interop", fps=20, features=features(), root=root, use_videos=False)
    eps = episodes()
    for ep in eps:
        for fr in ep:
            ds.add_frame({**fr, "task": TASK})
        ds.save_episode()
    ds.finalize()
    json.dump(as_json(eps), open(out, "w"))


def write_v21(root, out):
    import datasets
    from lerobot.datasets.compute_stats import compute_episode_stats
    from lerobot.datasets.utils import DEFAULT_FEATURES, get_hf_features_from_features, serialize_dict

    feats = {**features(with_image=False), **DEFAULT_FEATURES}
    hf = get_hf_features_from_features(feats)
    eps = episodes()
    os.makedirs(os.path.join(root, "meta"))
    index = 0
    lines, stats_lines = [], []
    for e, ep in enumerate(eps):
        n = len(ep)
        cols = {k: np.stack([fr[k] for fr in ep]) for k in features(with_image=False)}
        cols = {k: (v[:, 0] if v.shape[1] == 1 else v) for k, v in cols.items()}
        cols["timestamp"] = np.arange(n, dtype=np.float32) / 20
        cols["frame_index"] = np.arange(n)
        cols["episode_index"] = np.full(n, e)
        cols["index"] = np.arange(index, index + n)
        cols["task_index"] = np.zeros(n, dtype=np.int64)
        index += n
        path = os.path.join(root, f"data/chunk-000/episode_{e:06d}.parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        datasets.Dataset.from_dict({k: list(v) for k, v in cols.items()}, features=hf).to_parquet(path)
        lines.append(json.dumps({"episode_index": e, "tasks": [TASK], "length": n}))
        stats_input = {k: (v if v.ndim > 1 else v[:, None]) for k, v in cols.items()}
        stats = compute_episode_stats(stats_input, feats)
        stats_lines.append(json.dumps({"episode_index": e, "stats": serialize_dict(stats)}))
    info = {
        "codebase_version": "v2.1",
        "robot_type": "toy",
        "total_episodes": len(eps),
        "total_frames": index,
        "total_tasks": 1,
        "total_videos": 0,
        "total_chunks": 1,
        "chunks_size": 1000,
        "fps": 20,
        "splits": {"train": f"0:{len(eps)}"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": None,
        "features": {k: {**v, "shape": list(v["shape"])} for k, v in feats.items()},
    }
    json.dump(info, open(os.path.join(root, "meta/info.json"), "w"), indent=4)
    open(os.path.join(root, "meta/episodes.jsonl"), "w").write("\n".join(lines) + "\n")
    open(os.path.join(root, "meta/episodes_stats.jsonl"), "w").write("\n".join(stats_lines) + "\n")
    open(os.path.join(root, "meta/tasks.jsonl"), "w").write(json.dumps({"task_index": 0, "task": TASK}) + "\n")
    json.dump(as_json(eps), open(out, "w"))


def convert(parent, name):
    from lerobot.datasets.v30.convert_dataset_v21_to_v30 import convert_dataset

    # A budget below one episode's file puts the episodes in separate v3.0 data files.
    convert_dataset(name, root=parent, push_to_hub=False, data_file_size_in_mb=1e-6)


def read(root, out):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("o2o/from-o2o", root=root)
    rows = []
    for i in range(len(ds)):
        item = ds[i]
        row = {k: v.tolist() for k, v in item.items() if hasattr(v, "tolist")}
        row["task"] = item["task"]
        rows.append(row)
    stats = {k: {s: np.asarray(v).tolist() for s, v in st.items()} for k, st in ds.meta.stats.items()}
    meta = {
        "fps": ds.fps,
        "num_episodes": ds.num_episodes,
        "num_frames": ds.num_frames,
        "lengths": [int(x) for x in ds.meta.episodes["length"]],
        "data_files": sorted({str(ds.meta.get_data_file_path(e)) for e in range(ds.num_episodes)}),
        "features": sorted(ds.features),
    }
    json.dump({"rows": rows, "stats": stats, "meta": meta}, open(out, "w"))


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"write-v30": write_v30, "write-v21": write_v21, "convert": convert, "read": read}[cmd](*args)
