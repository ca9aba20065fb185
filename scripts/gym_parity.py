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
        out = {"obs0": raw._get_obs().tolist(), "obs": [], "reward": [], "terminated": [], "truncated": []}
        for a in ep["actions"]:
            # Round to the exact float32 values our env used (JSON carries them as shortest
            # decimals; the dynamics are chaotic, so even 1e-9 matters), then widen to float64:
            # with a float32 array Gymnasium computes its control cost in float32 (NumPy 2
            # promotion), a rounding of up to ~5e-7 on Ant's reward that is the reference's.
            action = np.asarray(a, dtype=np.float32).astype(np.float64)
            if req.get("clip_action", False):
                action = np.clip(action, low, high)
            obs, reward, terminated, truncated, _info = env.step(action)
            out["obs"].append(np.asarray(obs, dtype=np.float64).tolist())
            out["reward"].append(float(reward))
            out["terminated"].append(bool(terminated))
            out["truncated"].append(bool(truncated))
        episodes.append(out)
    json.dump(
        {"gymnasium": gym.__version__, "mujoco": __import__("mujoco").__version__, "episodes": episodes},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
