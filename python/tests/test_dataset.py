"""`Dataset.from_arrays`: the checks a D4RL file gets, refusals naming the key, row and column;
`Dataset.from_d4rl` and `Dataset.from_minari`: o2o's readers, the same data as the arrays."""

from pathlib import Path

import numpy as np
import pytest

import o2o


def test_arrays_become_a_dataset(arrays):
    data = o2o.Dataset.from_arrays(**arrays)
    n = len(arrays["rewards"])
    assert len(data) == n
    assert (data.obs_dim, data.act_dim) == (4, 1)
    assert data.episodes == 10
    assert len(data.sha256) == 64
    # The same values in other dtypes (bool flags as numbers, float32 observations) are the same data.
    same = o2o.Dataset.from_arrays(
        observations=arrays["observations"].astype(np.float32),
        actions=arrays["actions"].astype(np.float64),
        rewards=arrays["rewards"].astype(np.float32).reshape(n, 1),
        terminals=arrays["terminals"].astype(np.float32),
        timeouts=arrays["timeouts"].astype(np.int8),
    )
    assert same.sha256 == data.sha256
    changed = dict(arrays, rewards=arrays["rewards"] * 2.0)
    assert o2o.Dataset.from_arrays(**changed).sha256 != data.sha256


def refused(arrays, **change):
    with pytest.raises(ValueError) as e:
        o2o.Dataset.from_arrays(**dict(arrays, **change))
    return str(e.value)


def test_a_non_finite_value_is_refused_naming_key_row_and_column(arrays):
    obs = arrays["observations"].copy()
    obs[3, 1] = np.nan
    msg = refused(arrays, observations=obs)
    assert "`observations`" in msg and "row 3, column 1" in msg, msg
    act = arrays["actions"].copy()
    act[17, 0] = np.inf
    msg = refused(arrays, actions=act)
    assert "`actions`" in msg and "row 17, column 0" in msg, msg
    rew = arrays["rewards"].astype(np.float64)
    rew[5] = -np.inf
    msg = refused(arrays, rewards=rew)
    assert "`rewards`" in msg and "row 5" in msg, msg
    flags = arrays["timeouts"].astype(np.float64)
    flags[9] = np.nan
    msg = refused(arrays, timeouts=flags)
    assert "`timeouts`" in msg and "row 9" in msg, msg


def test_wrong_rows_shapes_and_dtypes_are_refused_naming_the_key(arrays):
    msg = refused(arrays, actions=arrays["actions"][:-1])
    assert "`actions`" in msg and "one row per reward" in msg, msg
    msg = refused(arrays, terminals=arrays["terminals"][:-2])
    assert "`terminals`" in msg and "rows, expected" in msg, msg
    msg = refused(arrays, observations=arrays["observations"].ravel())
    assert "`observations`" in msg and "rank 2" in msg, msg
    msg = refused(arrays, rewards=np.ones((len(arrays["rewards"]), 2)))
    assert "`rewards`" in msg and "rank 1" in msg, msg
    msg = refused(arrays, observations=arrays["observations"].astype(str))
    assert "`observations`" in msg and "dtype" in msg, msg
    msg = refused(arrays, terminals=np.array(["yes"] * len(arrays["rewards"])))
    assert "`terminals`" in msg and "dtype" in msg, msg
    msg = refused(arrays, observations=np.zeros((len(arrays["rewards"]), 0)))
    assert "obs_dim" in msg, msg
    with pytest.raises(TypeError):
        o2o.Dataset.from_arrays(arrays["observations"])  # keyword-only: no silent column swap


REPO = Path(__file__).resolve().parents[2]
HOPPER = REPO / "data" / "hopper-small" / "hopper-medium-v2.hdf5"


def test_a_d4rl_file_is_read_by_o2o(tmp_path):
    import h5py

    data = o2o.Dataset.from_d4rl(HOPPER)
    with h5py.File(HOPPER, "r") as f:
        columns = {k: f[k][()] for k in ["observations", "actions", "rewards", "terminals", "timeouts",
                                          "next_observations"]}
    assert len(data) == len(columns["rewards"]) and (data.obs_dim, data.act_dim) == (11, 3)
    # The file's name is a registry dataset's: the env is known.
    assert data.env == "hopper-v2" and data.source == HOPPER
    # The same columns handed over as arrays are the same data.
    assert o2o.Dataset.from_arrays(**columns).sha256 == data.sha256

    with pytest.raises(FileNotFoundError, match="nowhere.hdf5"):
        o2o.Dataset.from_d4rl(tmp_path / "nowhere.hdf5")
    with h5py.File(tmp_path / "other.hdf5", "w") as f:
        f["observations"] = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"other.hdf5: missing key `actions`"):
        o2o.Dataset.from_d4rl(tmp_path / "other.hdf5")


def write_minari(folder, arrays, env_id):
    """`arrays` (rows of whole episodes) as a Minari dataset folder, as minari 0.5 writes one."""
    import json

    import h5py

    data = folder / "data"
    data.mkdir(parents=True)
    ends = np.flatnonzero(arrays["terminals"] | arrays["timeouts"])
    spec = {"id": env_id, "entry_point": None, "max_episode_steps": 1000}
    box = lambda n: {"type": "Box", "dtype": "float64", "shape": [n], "low": [-1e9] * n, "high": [1e9] * n}
    meta = {"dataset_id": "pendulum/pd-v0", "total_episodes": len(ends), "total_steps": int(ends[-1] + 1),
            "env_spec": json.dumps(spec), "observation_space": json.dumps(box(4)),
            "action_space": json.dumps(box(1)), "minari_version": "0.5.3", "data_format": "hdf5"}
    (data / "metadata.json").write_text(json.dumps(meta))
    with h5py.File(data / "main_data.hdf5", "w") as f:
        start = 0
        for k, end in enumerate(ends):
            rows = slice(start, end + 1)
            g = f.create_group(f"episode_{k}")
            g.attrs["id"] = k
            final = arrays["next_observations"][end]
            g["observations"] = np.vstack([arrays["observations"][rows], final[None]])
            for key, name in [("actions", "actions"), ("rewards", "rewards"), ("terminals", "terminations"),
                              ("timeouts", "truncations")]:
                g[name] = arrays[key][rows]
            start = end + 1


def test_a_minari_folder_is_read_by_o2o(arrays, tmp_path):
    # Next observations of the PD-controller data: the next row, or (at an episode's end) a
    # state of our own.
    n = len(arrays["rewards"])
    nxt = np.vstack([arrays["observations"][1:], arrays["observations"][-1:]])
    ends = np.flatnonzero(arrays["terminals"] | arrays["timeouts"])
    nxt[ends] = arrays["observations"][ends] + 0.5
    columns = dict(arrays, next_observations=nxt)
    write_minari(tmp_path / "pendulum", columns, "InvertedPendulum-v5")

    data = o2o.Dataset.from_minari(tmp_path / "pendulum")
    assert (len(data), data.obs_dim, data.act_dim, data.episodes) == (n, 4, 1, 10)
    assert data.env == "InvertedPendulum-v5" and data.source == tmp_path / "pendulum"
    assert data.sha256 == o2o.Dataset.from_arrays(**columns).sha256
    with pytest.raises(FileNotFoundError):
        o2o.Dataset.from_minari(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="metadata.json"):
        o2o.Dataset.from_minari(tmp_path / "empty")
