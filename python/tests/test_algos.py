"""The d3rlpy-style classes: the configs they build are the presets', their keywords reach the
config, and fit / fit_online / predict / save_policy run through o2o.Run."""

import json
import os

import numpy as np
import pytest

import o2o

CLASSES = [o2o.SAC, o2o.IQL, o2o.CQL, o2o.CalQL, o2o.RLPD, o2o.WSRL]


def preset_env_and_data(cls):
    config = o2o.Run.preset(cls.preset).config()
    return config, config["env"], (config.get("dataset") or {}).get("id")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_class_with_its_defaults_is_its_preset(cls):
    preset, env, data = preset_env_and_data(cls)
    config = cls().config(env, data)
    assert config["algo"] == cls.algo == preset["algo"]
    assert config["preset"] == cls.algo
    assert {k: v for k, v in config.items() if k != "preset"} == {k: v for k, v in preset.items() if k != "preset"}


def test_keywords_reach_the_config():
    c = o2o.IQL(expectile=0.9, beta=1.0, max_weight=50.0, hidden=(32, 32), batch_size=64, reward="none",
                value_lr=1e-4, seed=5).config("hopper-v2", "hopper-medium-v2")
    a = c["agent"]
    assert (a["expectile"], a["beta"], a["max_weight"], a["value_lr"]) == (0.9, 1.0, 50.0, 1e-4)
    assert a["critic"]["hidden"] == a["value"]["hidden"] == a["actor"]["mlp"]["hidden"] == [32, 32]
    assert (c["train"]["batch_size"], c["dataset"]["reward"], c["seed"]) == (64, "none", 5)

    c = o2o.RLPD(batch_size=128, utd=10, n_critics=4, offline_ratio=0.25).config("hopper-v2", "hopper-medium-v2")
    assert (c["train"]["batch_size"], c["agent"]["critic_steps"], c["agent"]["num_critics"]) == (1280, 10, 4)
    assert c["train"]["offline_ratio"] == 0.25
    c = o2o.WSRL(utd=2, warmup_steps=100, cql_alpha=1.0).config("hopper-v2", "hopper-medium-v2")
    assert (c["train"]["online_batch_size"], c["agent"]["online_critic_steps"]) == (512, 2)
    assert (c["train"]["warmup_steps"], c["agent"]["cql_alpha"]) == (100, 1.0)
    c = o2o.CalQL(calibrate_online=False, cql_n_actions=4).config("hopper-v2", "hopper-medium-v2")
    assert (c["agent"]["calibrate_online"], c["agent"]["cql_n_actions"]) == (False, 4)
    c = o2o.SAC(n_critics=3, utd=2, random_steps=10, set={"eval.episodes": 3}).config("InvertedPendulum-v5")
    assert (c["agent"]["num_critics"], c["agent"]["target_subset"], c["train"]["updates_per_step"]) == (3, 3, 2)
    assert (c["train"]["random_steps"], c["eval"]["episodes"], c["env"]) == (10, 3, "InvertedPendulum-v5")
    iql = o2o.IQL()
    assert "expectile=0.7" in repr(iql).replace("agent.", "") and iql.expectile == 0.7
    iql.expectile = 0.8  # an attribute set is the keyword of the next run
    assert iql.config("hopper-v2", "hopper-medium-v2")["agent"]["expectile"] == 0.8
    with pytest.raises(AttributeError):
        _ = iql.expectle


def test_bad_keywords_are_refused_naming_the_key():
    with pytest.raises(ValueError, match="expectile"):
        o2o.IQL(expectile="high").config("hopper-v2", "hopper-medium-v2")
    with pytest.raises(ValueError, match="no_such_key"):
        o2o.SAC(set={"agent.no_such_key": 1}).config("Hopper-v5")
    with pytest.raises(TypeError):
        o2o.IQL(expectil=0.8)
    with pytest.raises(ValueError, match="which env"):
        o2o.SAC().config()


def test_fit_predict_save_policy_then_fit_online_from_the_fitted_agent(dataset, tmp_path):
    small = dict(hidden=(32, 32), batch_size=64, reward="none", device="cpu", threads=1,
                 runs_dir=tmp_path / "runs", progress="off", rerun="off")
    iql = o2o.IQL(**small)
    with pytest.raises(ValueError, match="which env"):
        iql.fit(dataset, 100)  # arrays do not say which env they come from
    with pytest.raises(RuntimeError, match="nothing trained yet"):
        iql.predict(np.zeros(4))
    offline = iql.fit(dataset, 200, env="InvertedPendulum-v5", eval_every=100, eval_episodes=2)
    assert iql.outcome is offline and offline.summary["grad_steps"] == 200
    config = o2o.Run.resume(offline.dir).config()
    assert config["agent"]["actor_lr_decay_steps"] == 200 and config["train"]["offline_steps"] == 200

    obs = np.random.default_rng(2).normal(scale=0.3, size=(8, 4))
    actions = iql.predict(obs)
    assert actions.shape == (8, 1) and np.all(np.abs(actions) <= 3.0)
    np.testing.assert_array_equal(iql.predict(obs[3]), actions[3])

    import torch

    path = iql.save_policy(tmp_path / "iql.pt")
    assert path == tmp_path / "iql.pt" and (tmp_path / "iql.json").is_file()
    with torch.no_grad():
        scripted = torch.jit.load(str(path))(torch.as_tensor(obs, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(scripted, actions, rtol=0, atol=1e-5)
    # ONNX by the file's extension, as d3rlpy's save_policy: the same actions in onnxruntime.
    path = iql.save_policy(tmp_path / "iql.onnx")
    assert path == tmp_path / "iql.onnx"
    assert json.loads((tmp_path / "iql.json").read_text())["module_format"] == "onnx"
    try:
        import onnxruntime
    except ImportError:
        if os.environ.get("CI"):
            raise  # scripts/requirements.txt installs it; under CI its absence is a failure
        onnxruntime = None
    if onnxruntime is not None:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (from_onnx,) = session.run(None, {"observation": obs.astype(np.float32)})
        np.testing.assert_allclose(from_onnx, actions, rtol=0, atol=1e-5)

    # Online from the fitted agent (its whole state), in the env of the fit, with its data.
    online = iql.fit_online("InvertedPendulum-v5", 100, eval_every=100, eval_episodes=2)
    config = o2o.Run.resume(online.dir).config()
    assert config["parent"]["run_dir"] == str(offline.dir.resolve())
    assert config["agent"]["actor_lr_decay_steps"] == 0 and config["train"]["random_steps"] == 0
    assert config["dataset"]["in_memory"] is True
    start = online.summary["phase_evals"][0]
    # Its evaluation at the start is the fitted agent's final one (the same evaluation seeds).
    assert start["phase"] == "start" and start["eval"]["step"] == 0
    assert start["eval"]["mean_return"] == offline.summary["final_eval"]["mean_return"]
    assert online.summary["env_steps"] == 100 and iql.outcome is online
