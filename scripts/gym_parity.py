#!/usr/bin/env python3
"""Parity oracle for `o2o env parity`: replays episodes in Gymnasium's own MuJoCo envs.

Reads one JSON request on stdin:
  {"gym_id": "Hopper-v4", "gym_kwargs": {}, "clip_action": true, "max_episode_steps": 1000,
   "episodes": [{"qpos": [...], "qvel": [...], "actions": [[...], ...]}, ...]}
For each episode: `env.reset()`, then `env.unwrapped.set_state(qpos, qvel)` (so both sides
start from the same state, whatever the random streams), then every action in order through
`env.step` (the `gymnasium.make` stack, TimeLimit included). With `clip_action` the action is
clipped to the action space first, as D4RL's NormalizedBoxEnv did for the -v2 tasks.
Actions arrive as the float32 values our env used and are passed on as float64 (see below).
Writes one JSON object on stdout: per episode the start observation and, per step, the
observation, reward, terminated and truncated.

With "robotics": true the id is a gymnasium-robotics 1.4.2 Fetch task: the package's ids are
registered, the MuJoCo 3.17 joint-type shim below is applied, each episode carries its desired
"goal" and starts from our qpos/qvel (data written directly, then mj_forward, since these envs
have no set_state), observations are flattened as [achieved_goal, desired_goal, observation],
and the reply adds the env's settled start state "initial_qpos" (after `_env_setup`).
"""
import json
import sys

import numpy as np


def replay(env, obs0, actions, prepare=None, correct=None, observe=None) -> dict:
    """Step `env` (a `gymnasium.make` stack, already at the episode's start state whose
    observation is `obs0`) through `actions`; `prepare` maps each action first, `correct` maps
    (reward, terminated) after each step, `observe` maps each observation to its flat list
    (default: the array as float64). Returns the episode as the reply lists it."""
    out = {"obs0": np.asarray(obs0, dtype=np.float64).tolist(), "obs": [], "reward": [], "terminated": [], "truncated": []}
    for a in actions:
        # Round to the exact float32 values our env used (JSON carries them as shortest
        # decimals; the dynamics are chaotic, so even 1e-9 matters), then widen to float64:
        # with a float32 array Gymnasium computes its control cost in float32 (NumPy 2
        # promotion), a rounding of up to ~5e-7 on Ant's reward that is the reference's.
        action = np.asarray(a, dtype=np.float32).astype(np.float64)
        if prepare is not None:
            action = prepare(action)
        obs, reward, terminated, truncated, _info = env.step(action)
        if correct is not None:
            reward, terminated = correct(reward, terminated)
        out["obs"].append(observe(obs) if observe is not None else np.asarray(obs, dtype=np.float64).tolist())
        out["reward"].append(float(reward))
        out["terminated"].append(bool(terminated))
        out["truncated"].append(bool(truncated))
    return out


def shim_joint_type_for_mujoco_317() -> None:
    """gymnasium-robotics 1.4.2 on MuJoCo 3.17: `model.jnt_type[j]` is an np.int32 and
    `mjtJoint.__eq__(np.int32)` is False, so `joint_type in (mjJNT_HINGE, mjJNT_SLIDE)` in
    mujoco_utils.{set,get}_joint_{qpos,qvel} asserts (envsuites.md 1.3). The cast to int: those
    functions see a `mujoco` whose joint-type constants are plain ints, so the comparisons are
    int against np.int32 and hold. Nothing else in the module changes."""
    import mujoco
    from gymnasium_robotics.utils import mujoco_utils

    class JointTypes:
        mjJNT_FREE = int(mujoco.mjtJoint.mjJNT_FREE)
        mjJNT_BALL = int(mujoco.mjtJoint.mjJNT_BALL)
        mjJNT_SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
        mjJNT_HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)

    class MujocoWithIntJointTypes:
        mjtJoint = JointTypes

        def __getattr__(self, name):
            return getattr(mujoco, name)

    mujoco_utils.mujoco = MujocoWithIntJointTypes()


def flat_goal_obs(obs) -> list:
    return np.concatenate([obs["achieved_goal"], obs["desired_goal"], obs["observation"]]).astype(np.float64).tolist()


def main() -> None:
    req = json.load(sys.stdin)
    import gymnasium as gym

    robotics = req.get("robotics", False)
    if robotics:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        shim_joint_type_for_mujoco_317()

    env = gym.make(
        req["gym_id"],
        max_episode_steps=req["max_episode_steps"],
        disable_env_checker=True,
        **req.get("gym_kwargs", {}),
    )
    raw = env.unwrapped
    low, high = env.action_space.low, env.action_space.high
    episodes = []
    for ep in req["episodes"]:
        env.reset(seed=0)
        qpos, qvel = np.asarray(ep["qpos"], dtype=np.float64), np.asarray(ep["qvel"], dtype=np.float64)
        if robotics:
            import mujoco

            raw.data.qpos[:] = qpos
            raw.data.qvel[:] = qvel
            raw.goal = np.asarray(ep["goal"], dtype=np.float64)
            mujoco.mj_forward(raw.model, raw.data)
            obs0 = flat_goal_obs(raw._get_obs())
        else:
            raw.set_state(qpos, qvel)
            obs0 = raw._get_obs()
        clip = (lambda a: np.clip(a, low, high)) if req.get("clip_action", False) else None
        out = replay(env, obs0, ep["actions"], prepare=clip, observe=flat_goal_obs if robotics else None)
        episodes.append(out)
    reply = {"gymnasium": gym.__version__, "mujoco": __import__("mujoco").__version__, "episodes": episodes}
    if robotics:
        reply["initial_qpos"] = np.asarray(raw.initial_qpos, dtype=np.float64).tolist()
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
