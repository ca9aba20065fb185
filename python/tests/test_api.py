"""The module's surface: import (with and without torch first), presets, the Run builder's
checks, and o2o's errors as Python exceptions."""

import subprocess
import sys
import textwrap

import pytest

import o2o


def test_list_presets_names_the_embedded_presets():
    names = o2o.list_presets()
    assert len(names) > 50
    for known in ["sac-inverted-pendulum", "sac-hopper", "iql-hopper-medium", "wsrl-halfcheetah-small"]:
        assert known in names
    assert len(set(names)) == len(names)


# A tiny offline run, so that o2o's libtorch really works in the process.
TINY_RUN = textwrap.dedent(
    """
    import numpy as np
    n = 200
    rng = np.random.default_rng(0)
    data = o2o.Dataset.from_arrays(
        observations=rng.normal(size=(n, 4)), actions=rng.uniform(-3, 3, size=(n, 1)),
        rewards=np.ones(n), terminals=(np.arange(n) % 50 == 49), timeouts=np.zeros(n, dtype=bool))
    config = 'algo = "iql"\\nenv = "InvertedPendulum-v5"\\n[dataset]\\nin_memory = true\\n'
    done = (o2o.Run.from_toml("tiny", config).set({"train.batch_size": 32, "eval.episodes": 1,
            "eval.every": 20, "checkpoint.every": 20, "agent.critic.hidden": [16, 16],
            "agent.value.hidden": [16, 16], "agent.actor.mlp.hidden": [16, 16]})
            .dataset(data).runs_dir(RUNS).device("cpu").threads(1).rerun("off").progress("off").fit(20))
    assert done.summary["finished"] and done.summary["grad_steps"] == 20, done.summary
    assert float(torch.ones(3).sum()) == 3.0
    print("ok", torch.__version__)
    """
)


@pytest.mark.parametrize("order", ["import torch\nimport o2o", "import o2o\nimport torch"])
def test_import_works_with_and_without_torch_first(order, tmp_path):
    code = f"RUNS = {str(tmp_path)!r}\n{order}\n{TINY_RUN}"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("ok 2.13.0"), p.stdout


def test_set_takes_strings_dicts_and_lists_and_reaches_the_config():
    run = (
        o2o.Run.preset("sac-inverted-pendulum")
        .set("train.online_steps=1234")
        .set({"train.batch_size": 64, "agent.actor_lr": 1e-4, "eval.at_start": True, "agent.critic.hidden": [48, 48]})
        .set(["eval.episodes=3", "checkpoint.every=700"])
        .seed(7)
    )
    c = run.config()
    assert c["seed"] == 7
    assert c["train"]["online_steps"] == 1234
    assert c["train"]["batch_size"] == 64
    assert c["agent"]["actor_lr"] == pytest.approx(1e-4)
    assert c["agent"]["critic"]["hidden"] == [48, 48]
    assert c["eval"]["at_start"] is True and c["eval"]["episodes"] == 3
    assert c["checkpoint"]["every"] == 700
    # Each call returns a new Run; the first one is unchanged.
    base = o2o.Run.preset("sac-inverted-pendulum")
    seed = base.config()["seed"]
    assert base.seed(seed + 1).config()["seed"] == seed + 1
    assert base.config()["seed"] == seed
    assert "sac-inverted-pendulum" in repr(run) and "train.online_steps=1234" in repr(run)


def test_a_preset_file_is_taken_by_path(tmp_path):
    path = tmp_path / "my-pendulum.toml"
    path.write_text('algo = "sac"\nenv = "InvertedPendulum-v5"\n[train]\nonline_steps = 321\n')
    for given in [path, str(path)]:
        c = o2o.Run.preset(given).config()
        assert (c["preset"], c["algo"], c["train"]["online_steps"]) == ("my-pendulum", "sac", 321)


def test_a_bad_override_is_a_value_error_naming_the_key():
    run = o2o.Run.preset("sac-inverted-pendulum")
    with pytest.raises(ValueError, match=r"unknown field `no_such_key`(.|\n)*in `train`"):
        run.set({"train.no_such_key": 1})
    with pytest.raises(ValueError, match="batch_size"):
        run.set("train.batch_size=many")
    with pytest.raises(ValueError, match="key=value"):
        run.set("train.batch_size")
    with pytest.raises(ValueError, match="not a config value"):
        run.set({"train.batch_size": None})


def test_device_threads_rerun_and_progress_are_checked():
    run = o2o.Run.preset("sac-inverted-pendulum")
    with pytest.raises(ValueError, match="tpu"):
        run.device("tpu")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            run.device("cuda")
    with pytest.raises(ValueError, match="at least 1"):
        run.threads(0)
    with pytest.raises(ValueError):
        run.rerun("sometimes")
    with pytest.raises(ValueError, match="auto, bar, plain, notebook, off or a callable"):
        run.progress("loud")
    run.device("cpu").threads(2).rerun("off").progress("plain", every=5.0)


def test_o2o_errors_are_python_exceptions_with_the_cli_message(tmp_path):
    with pytest.raises(o2o.Error, match="no-such-preset"):
        o2o.Run.preset("no-such-preset")
    assert issubclass(o2o.Error, RuntimeError)
    with pytest.raises(o2o.Error, match="is not a run directory"):
        o2o.Run.resume(tmp_path / "nowhere")
    with pytest.raises(o2o.Error, match="is not a run directory"):
        o2o.load_policy(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="not valid TOML"):
        o2o.Run.from_toml("broken", "algo = ")
    # A run whose config says the data is in memory, started without it.
    run = o2o.Run.from_toml("needs-data", 'algo = "iql"\nenv = "InvertedPendulum-v5"\n[dataset]\nin_memory = true\n')
    with pytest.raises(o2o.Error, match="no dataset was given"):
        run.runs_dir(tmp_path).rerun("off").fit(10)
