"""`Dataset.from_arrays`: the checks a D4RL file gets, refusals naming the key, row and column."""

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
