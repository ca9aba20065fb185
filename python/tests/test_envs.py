"""Envs from Python (`Run.env`): a Gymnasium env written in Python trained online, envs and
factories, o2o env ids, exceptions raised inside the env, and exact resume of a Python env's run."""

import _thread
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import o2o
from conftest import without_timing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from point_mass import PointMass, sac  # noqa: E402  (the example's env is the one tested)


def quiet(run, tmp_path):
    return run.runs_dir(tmp_path / "runs").device("cpu").threads(1).rerun("off").progress("off")


# The untrained SAC policy's return on the point mass is about -47 (it barely moves; measured
# by the run's evaluation at step 0); an agent that has learned to head for the goal keeps its
# summed distance under half that.
LEARNED_RETURN = -25.0


def test_a_python_point_mass_learns_online_with_sac(tmp_path):
    agent = sac(device="cpu", threads=1, runs_dir=tmp_path / "runs", progress="off", rerun="off",
                set={"eval.at_start": True})
    done = agent.fit_online(PointMass, 4000, eval_every=1000, eval_episodes=20)
    s = done.summary
    assert s["finished"] and s["env_steps"] == 4500 and s["grad_steps"] == 4000, s
    start, final = s["phase_evals"][0], s["final_eval"]
    assert start["phase"] == "start" and start["eval"]["step"] == 0
    untrained = start["eval"]["mean_return"]
    print(f"point mass: untrained {untrained:.1f}, trained {final['mean_return']:.1f}")
    assert untrained < LEARNED_RETURN, untrained
    assert final["mean_return"] >= LEARNED_RETURN, (untrained, final)
    # info["is_success"] reaches the evaluation, and the config names the env by its class.
    assert final["success_rate"] is not None
    assert o2o.Run.resume(done.dir).config()["env"] == "PointMass"

    # The policy acts in the env's bounds; loaded again with the env, it is the same policy.
    obs = np.random.default_rng(0).uniform(-1, 1, size=(16, 4)).astype(np.float32)
    actions = agent.predict(obs)
    assert actions.shape == (16, 2) and np.all(np.abs(actions) <= 1.0)
    again = o2o.load_policy(done.dir, env=PointMass)
    np.testing.assert_array_equal(again(obs), actions)
    assert again.env == "PointMass"
    with pytest.raises(o2o.Error, match="PointMass"):
        o2o.load_policy(done.dir)  # not a registry env: the env is needed


class Counting(PointMass):
    """The point mass, counting the steps taken on each object."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return super().step(action)


def test_an_env_object_is_copied_and_a_factory_called_for_each_env(tmp_path):
    mine = Counting()
    run = quiet(o2o.Run.preset("sac-inverted-pendulum"), tmp_path).set(
        {"train.random_steps": 100, "eval.episodes": 1, "eval.every": 200})
    done = run.env(mine).fit_online(50)
    assert done.summary["env_steps"] == 150
    assert mine.steps == 0, "the run stepped the user's own env object"

    made = []

    def factory():
        made.append(Counting())
        return made[-1]

    run = run.env(factory)
    assert len(made) == 1  # Run.env makes one to check the spaces (and closes it)
    assert run.config()["env"] == "Counting" and "Python env Counting" in repr(run)
    run.fit_online(50)
    # Envs made: the check, the acting env (all 150 steps), the evaluation env (one episode).
    assert len(made) >= 3 and 150 in [e.steps for e in made], [e.steps for e in made]


def test_an_o2o_env_id_is_stepped_in_rust_and_checked_at_once(tmp_path):
    run = o2o.Run.preset("sac-hopper").env("InvertedPendulum-v5")
    assert run.config()["env"] == "InvertedPendulum-v5"
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        run.env("NoSuchEnv-v0")
    # A registered Gymnasium env handed over as an object is stepped in Python.
    made = quiet(o2o.Run.preset("sac-inverted-pendulum"), tmp_path).env(gym.make("InvertedPendulum-v5"))
    assert made.config()["env"] == "InvertedPendulum-v5"


class Broken(PointMass):
    """The point mass, failing as told."""

    def __init__(self, fail_at=None, in_reset=False, old_api=False, obs_size=4):
        super().__init__()
        self.fail_at, self.in_reset, self.old_api, self.obs_size = fail_at, in_reset, old_api, obs_size

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        if self.in_reset and seed is not None:
            raise KeyError(f"no start state for seed {seed}")
        return obs, info

    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        if self.fail_at is not None and self.t == self.fail_at:
            raise ValueError(f"the motor driver failed at step {self.t}")
        if self.old_api:
            return obs, r, term or trunc, info
        return obs[: self.obs_size], r, term, trunc, info


def test_an_exception_raised_in_the_env_is_raised_by_the_run(tmp_path):
    run = quiet(o2o.Run.preset("sac-inverted-pendulum"), tmp_path).set({"train.random_steps": 100})
    with pytest.raises(ValueError, match="the motor driver failed at step 7"):
        run.env(lambda: Broken(fail_at=7)).fit_online(100)
    with pytest.raises(KeyError, match="no start state for seed"):
        run.env(lambda: Broken(in_reset=True)).fit_online(100)
    # Results Gymnasium 1.x would not give: o2o's error names what was expected.
    with pytest.raises(o2o.Error, match=r"expected a tuple \(obs, reward, terminated, truncated, info\)"):
        run.env(lambda: Broken(old_api=True)).fit_online(100)
    with pytest.raises(o2o.Error, match="expected 4 numbers, found 3"):
        run.env(lambda: Broken(obs_size=3)).fit_online(100)


def test_envs_o2o_cannot_take_are_refused_at_run_env():
    run = o2o.Run.preset("sac-inverted-pendulum")
    with pytest.raises(ValueError, match="gymnasium.spaces.Box.*Discrete"):
        run.env(gym.make("CartPole-v1"))
    unbounded = PointMass()
    unbounded.action_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    with pytest.raises(ValueError, match="infinite bounds"):
        run.env(unbounded)
    with pytest.raises(TypeError, match="not a Gymnasium env"):
        run.env(lambda: 42)
    with pytest.raises(TypeError, match="o2o env id"):
        run.env(3.5)
    with pytest.raises(RuntimeError, match="cannot make it"):
        run.env(lambda: (_ for _ in ()).throw(RuntimeError("cannot make it")))


def test_ctrl_c_in_a_python_env_run_then_resume_gives_the_same_metrics(tmp_path):
    run = quiet(o2o.Run.preset("sac-inverted-pendulum"), tmp_path).set(
        {"train.random_steps": 200, "eval.every": 200, "eval.episodes": 2, "checkpoint.every": 200,
         "agent.critic.hidden": [16, 16], "agent.actor.mlp.hidden": [16, 16], "train.batch_size": 32}
    ).env(PointMass)
    whole = run.fit_online(400)

    seen = []

    def press_ctrl_c(folder, state):
        if not seen:
            seen.append(folder)
            _thread.interrupt_main()
            time.sleep(1.0)

    with pytest.raises(KeyboardInterrupt, match="o2o.Run.resume"):
        run.on_checkpoint(press_ctrl_c).fit_online(400)
    stopped = seen[0].parent.parent
    with pytest.raises(o2o.Error, match="PointMass"):
        o2o.Run.resume(stopped).rerun("off").progress("off").run()  # the env is needed again
    resumed = o2o.Run.resume(stopped).env(PointMass).rerun("off").progress("off").run()
    assert resumed.summary["finished"] and resumed.summary["env_steps"] == 600
    assert without_timing(resumed.metrics) == without_timing(whole.metrics)
