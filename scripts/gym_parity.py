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
"""
import json
import sys

import numpy as np


def replay(env, obs0, actions, prepare=None, correct=None) -> dict:
    """Step `env` (a `gymnasium.make` stack, already at the episode's start state whose
    observation is `obs0`) through `actions`; `prepare` maps each action first, `correct` maps
    (reward, terminated) after each step. Returns the episode as the reply lists it."""
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
        out["obs"].append(np.asarray(obs, dtype=np.float64).tolist())
        out["reward"].append(float(reward))
        out["terminated"].append(bool(terminated))
        out["truncated"].append(bool(truncated))
    return out


def main() -> None:
    req = json.load(sys.stdin)
    import gymnasium as gym

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
        raw.set_state(np.asarray(ep["qpos"], dtype=np.float64), np.asarray(ep["qvel"], dtype=np.float64))
        clip = (lambda a: np.clip(a, low, high)) if req.get("clip_action", False) else None
        out = replay(env, raw._get_obs(), ep["actions"], prepare=clip)
        episodes.append(out)
    json.dump(
        {"gymnasium": gym.__version__, "mujoco": __import__("mujoco").__version__, "episodes": episodes},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
