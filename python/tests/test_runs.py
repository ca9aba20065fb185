"""Runs from Python: offline from NumPy arrays, the run directory, exact resume after Ctrl-C,
callbacks, the GIL, and the trained policy as a callable and as TorchScript."""

import _thread
import json
import threading
import time

import numpy as np
import pytest

import o2o
from conftest import all_finite, without_timing


def test_offline_run_from_arrays_writes_a_self_describing_run(iql, dataset):
    # A thread counting while the run trains: it only gets to count if the GIL is released.
    counted, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        done = iql.seed(3).fit(300)
    finally:
        stop.set()
        counter.join()
    assert counted[0] > 1000, "the GIL was held while the run trained"

    s = done.summary
    assert s["finished"] is True and done.reused is False
    assert (s["steps"], s["grad_steps"], s["env_steps"]) == (300, 300, 0)
    assert s["final_eval"]["step"] == 300 and np.isfinite(s["final_eval"]["mean_return"])
    assert s["final_eval"]["mean_return"] > 0  # InvertedPendulum pays 1 per step balanced

    records = done.metrics
    assert records and all(all_finite(r) for r in records)
    train = [r for r in records if "train/critic_loss" in r]
    assert [r["grad_step"] for r in train] == [50, 100, 150, 200, 250, 300]
    for key in ["train/actor_loss", "train/value_loss", "train/q_mean"]:
        assert all(key in r for r in train), key
    assert [r["grad_step"] for r in records if "eval/return" in r] == [100, 200, 300]
    columns = done.metrics_arrays()
    assert all(len(v) == len(records) for v in columns.values())
    assert np.array_equal(columns["grad_step"], [r["grad_step"] for r in records])
    assert np.isnan(columns["eval/return"]).sum() == len(records) - 3

    # The run directory describes itself: the resolved config, the data's hash, the summary.
    d = done.dir
    try:
        import tomllib  # Python 3.11+

        config = tomllib.loads((d / "config.toml").read_text())
    except ModuleNotFoundError:  # 3.10: read back through o2o
        config = o2o.Run.resume(d).config()
    assert (config["algo"], config["env"], config["seed"]) == ("iql", "InvertedPendulum-v5", 3)
    assert config["dataset"]["in_memory"] is True and config["train"]["offline_steps"] == 300
    assert config["agent"]["critic"]["hidden"] == [32, 32]
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["dataset"]["sha256"] == dataset.sha256
    assert manifest["seeds"]["run"] == 3 and manifest["torch_threads"] == 1
    assert json.loads((d / "summary.json").read_text()) == s
    assert (d / s["checkpoint"] / "agent.ot").is_file()
    assert sum(1 for line in (d / "metrics.jsonl").read_text().splitlines() if line) == len(records)


def test_ctrl_c_stops_after_a_checkpoint_and_resume_gives_the_same_metrics(iql, dataset):
    whole = iql.fit(600)
    assert whole.summary["finished"]

    # Ctrl-C (SIGINT, as Python sees it) while the run is at its first checkpoint.
    seen = []

    def press_ctrl_c(folder, state):
        if not seen:
            seen.append((folder, state["step"]))
            _thread.interrupt_main()
            time.sleep(1.0)  # the calling thread notices within o2o's 50 ms poll

    with pytest.raises(KeyboardInterrupt) as stop:
        iql.on_checkpoint(press_ctrl_c).fit(600)
    assert seen and seen[0][1] == 100
    message = str(stop.value)
    assert "o2o.Run.resume(" in message and "with a checkpoint" in message, message
    stopped = seen[0][0].parent.parent
    assert not (stopped / "summary.json").exists()
    step = int(message.split("stopped at step ")[1].split()[0])
    assert 100 < step < 600

    # Resumed from its directory alone (and the same data): the uninterrupted run's metrics.
    resumed = o2o.Run.resume(stopped).dataset(dataset).rerun("off").progress("off").run()
    assert resumed.summary["finished"] and resumed.summary["grad_steps"] == 600
    assert without_timing(resumed.metrics) == without_timing(whole.metrics)
    assert resumed.summary["final_eval"] == whole.summary["final_eval"]
    # A finished run resumed again runs nothing.
    assert o2o.Run.resume(stopped).dataset(dataset).run().reused is True


class Enough(Exception):
    pass


def test_a_callback_exception_stops_the_run_and_is_raised(iql, dataset, tmp_path):
    evals = []

    def stop_at_second_eval(result, state):
        evals.append((result["step"], state["step"]))
        if len(evals) == 2:
            raise Enough(f"stop at {result['step']}")

    with pytest.raises(Enough, match="stop at 200"):
        iql.on_eval(stop_at_second_eval).fit(400)
    assert evals == [(100, 100), (200, 200)]
    (stopped,) = (tmp_path / "runs").iterdir()
    assert not (stopped / "summary.json").exists()
    with pytest.raises(ValueError, match="resumed with the config it started with"):
        o2o.Run.resume(stopped).set("train.offline_steps=10")
    done = o2o.Run.resume(stopped).dataset(dataset).rerun("off").progress("off").run()
    assert done.summary["finished"] and done.summary["grad_steps"] == 400 and done.dir == stopped


def test_the_policy_acts_like_its_torchscript_export(iql):
    done = iql.fit(200)
    policy = o2o.load_policy(done.dir)
    assert (policy.obs_dim, policy.act_dim, policy.env, policy.algo) == (4, 1, "InvertedPendulum-v5", "iql")
    assert policy.step == 200 and policy.checkpoint.name == "step-0000000200"
    low, high = policy.action_bounds
    assert low.tolist() == [-3.0] and high.tolist() == [3.0]

    obs = np.random.default_rng(1).normal(scale=0.5, size=(64, 4))
    actions = policy(obs)
    assert actions.shape == (64, 1) and actions.dtype == np.float32
    assert np.all(actions >= low) and np.all(actions <= high)
    assert np.unique(actions).size > 1
    one = policy(obs[5])
    assert one.shape == (1,) and np.allclose(one, actions[5], atol=1e-6)
    with pytest.raises(ValueError, match=r"takes \(4,\) or \(B, 4\)"):
        policy(np.zeros(5))

    # The exported TorchScript module (o2o export) gives the same actions without o2o.
    import torch

    path = o2o.export(done.dir)
    assert path == done.dir / "export" / "policy.pt" and path.with_suffix(".json").is_file()
    module = torch.jit.load(str(path))
    with torch.no_grad():
        exported = module(torch.as_tensor(obs, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(actions, exported, rtol=0, atol=1e-5)

    # An older checkpoint by name.
    first = o2o.load_policy(done.dir, checkpoint="step-0000000100")
    assert first.step == 100
    with pytest.raises(o2o.Error, match="step-0000000999"):
        o2o.load_policy(done.dir, checkpoint="step-0000000999")


def test_each_kind_of_error_has_its_class_and_stays_an_o2o_error(iql, tmp_path):
    """Issue 48 item 4: `except o2o.DamagedCheckpoint` (or `BadConfig`, `BadDataset`, `RunDir`)
    picks one kind out; every one is still an `o2o.Error`, and `BadConfig` a `ValueError`."""
    for kind in [o2o.BadConfig, o2o.BadDataset, o2o.DamagedCheckpoint, o2o.RunDir, o2o.RunInUse]:
        assert issubclass(kind, o2o.Error) and issubclass(kind, RuntimeError), kind
    assert issubclass(o2o.BadConfig, ValueError)
    with pytest.raises(o2o.BadConfig, match="no-such-preset"):
        o2o.Run.preset("no-such-preset")
    with pytest.raises(o2o.BadConfig, match="no_such_key"):
        iql.set({"train.no_such_key": 1})
    with pytest.raises(o2o.RunDir, match="is not a run directory"):
        o2o.Run.resume(tmp_path / "nowhere")
    needs_data = o2o.Run.from_toml("needs-data", 'algo = "iql"\nenv = "InvertedPendulum-v5"\n[dataset]\nin_memory = true\n')
    with pytest.raises(o2o.BadDataset, match="no dataset was given"):
        needs_data.runs_dir(tmp_path).rerun("off").fit(10)
    # A truncated agent file: the checkpoint is named, and the message is the CLI's.
    done = iql.fit(100)
    agent = done.dir / "checkpoints" / "step-0000000100" / "agent.ot"
    agent.write_bytes(agent.read_bytes()[:100])
    with pytest.raises(o2o.DamagedCheckpoint, match="step-0000000100") as caught:
        o2o.load_policy(done.dir)
    assert "frame #" not in str(caught.value)
