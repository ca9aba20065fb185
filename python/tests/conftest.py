"""Shared pieces of the o2o Python tests: a small IQL config and a dataset collected in
Gymnasium's InvertedPendulum-v5 by a noisy PD controller (what a user would hand over)."""

import math
import signal

import numpy as np
import pytest

# IQL with small networks on InvertedPendulum-v5; the data comes from `Run.dataset`.
IQL_CONFIG = """
algo = "iql"
env = "InvertedPendulum-v5"
[dataset]
in_memory = true
reward = "none"
transitions = "corrected"
[train]
batch_size = 64
log_every = 50
[eval]
every = 100
episodes = 2
[checkpoint]
every = 100
[agent]
expectile = 0.7
beta = 3.0
actor_lr_decay_steps = 0
critic = { hidden = [32, 32] }
value = { hidden = [32, 32] }
actor = { mlp = { hidden = [32, 32] } }
"""

# Keys of metrics.jsonl that depend on the clock.
def without_timing(records):
    return [{k: v for k, v in r.items() if k != "wall_s" and not k.startswith("perf/")} for r in records]


def all_finite(record):
    return all(math.isfinite(v) for v in record.values() if isinstance(v, (int, float)) and not isinstance(v, bool))


def pd_controller_arrays(episodes=10, max_steps=200, seed=0):
    """Columns of `episodes` episodes of a noisy PD controller on the pole, cut at `max_steps`."""
    import gymnasium as gym

    env = gym.make("InvertedPendulum-v5")
    rng = np.random.default_rng(seed)
    obs_l, act_l, rew_l, term_l, trunc_l = [], [], [], [], []
    for ep in range(episodes):
        obs, _ = env.reset(seed=ep)
        for k in range(max_steps):
            a = float(np.clip(0.5 * obs[0] + 10 * obs[1] + obs[2] + 2 * obs[3] + rng.normal(), -3, 3))
            nxt, r, terminated, truncated, _ = env.step(np.array([a], dtype=np.float32))
            obs_l.append(obs)
            act_l.append([a])
            rew_l.append(r)
            term_l.append(terminated)
            trunc_l.append((truncated or k == max_steps - 1) and not terminated)
            obs = nxt
            if terminated or truncated:
                break
    env.close()
    return dict(
        observations=np.asarray(obs_l, dtype=np.float64),
        actions=np.asarray(act_l, dtype=np.float32),
        rewards=np.asarray(rew_l),
        terminals=np.asarray(term_l),
        timeouts=np.asarray(trunc_l),
    )


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in every test, however the suite was started: a background
    job of a non-interactive shell inherits SIGINT ignored, Python then leaves it ignored, and
    `_thread.interrupt_main()` (the Ctrl-C tests' key press) does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def arrays():
    return pd_controller_arrays()


@pytest.fixture(scope="session")
def dataset(arrays):
    import o2o

    return o2o.Dataset.from_arrays(**arrays)


@pytest.fixture
def iql(dataset, tmp_path):
    """A quiet CPU run of IQL_CONFIG on `dataset`, its run directory under tmp_path."""
    import o2o

    return (
        o2o.Run.from_toml("iql-pendulum", IQL_CONFIG)
        .dataset(dataset)
        .runs_dir(tmp_path / "runs")
        .device("cpu")
        .threads(1)
        .rerun("off")
        .progress("off")
    )
