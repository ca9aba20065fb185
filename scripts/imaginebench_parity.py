#!/usr/bin/env python3
"""Parity oracle for `o2o env parity imaginebench-mujoco-<level>-v0`.

A Python implementation of ImagineBench Mujoco-v0's documented task rules (formats.md §3.3,
written from the rules, not from the benchmark's code) on Gymnasium's `HalfCheetah-v4`, which
the benchmark's tasks are built on (its own package pins gym 0.26 and does not install beside
Gymnasium 1.4):

- observation: 18 numbers; at reset [x, obs17] with x the absolute root x (qpos[0]); after a
  step [x_after - x_before, obs17];
- reward from v4's info: forward tasks reward_run + reward_ctrl; backward tasks
  -reward_run + reward_ctrl; move-forward-backward / move-backward-forward
  |reward_run| + reward_ctrl; jump-in-place -|reward_run| + reward_ctrl;
- success on the history of per-step dx (S = sum, t = steps taken), checked after every step;
  the episode terminates on success and is truncated at max_episode_steps (200).

Reads one JSON request on stdin:
  {"max_episode_steps": 200, "episodes": [{"task": "jump-forward", "qpos": [...],
   "qvel": [...], "actions": [[...], ...]}, ...]}
Each episode: reset, `set_state(qpos, qvel)`, then every action in order (our side ends the
episode; a disagreement shows as a flag mismatch, not a length mismatch). Writes per episode
the start observation and, per step, the 18 numbers, reward, terminated and truncated.
"""
import json
import sys

import numpy as np

FORWARD = {"jump-forward", "move-forward", "rep-jump-forward", "rep-move-forward", "move-forward-fast"}
BACKWARD = {"jump-backward", "move-backward", "rep-jump-backward", "rep-move-backward", "move-backward-fast"}
TURN = {"move-forward-backward", "move-backward-forward"}


def reward(task, run, ctrl):
    if task in FORWARD:
        return run + ctrl
    if task in BACKWARD:
        return -run + ctrl
    if task in TURN:
        return abs(run) + ctrl
    if task == "jump-in-place":
        return -abs(run) + ctrl
    raise ValueError(f"unknown task {task!r}")


def success(task, history):
    s, t = float(np.sum(history)), len(history)
    if task in ("jump-forward", "rep-jump-forward"):
        return s > 0 and t >= 5
    if task in ("jump-backward", "rep-jump-backward"):
        return s < 0 and t >= 5
    if task in ("move-forward", "rep-move-forward"):
        return s > 7 and t >= 99
    if task in ("move-backward", "rep-move-backward"):
        return s < -7 and t >= 99
    if task == "move-forward-fast":
        return s > 8.5 and t >= 99
    if task == "move-backward-fast":
        return s < -8.5 and t >= 99
    if task in TURN:
        pos = [x for x in history if x > 0]
        neg = [x for x in history if x < 0]
        return len(neg) > 30 and len(pos) > 30 and sum(neg) < -3 and sum(pos) > 3 and t >= 199
    if task == "jump-in-place":
        return abs(s) < 1.05 and t >= 15
    raise ValueError(f"unknown task {task!r}")


def main() -> None:
    req = json.load(sys.stdin)
    import gymnasium as gym

    env = gym.make("HalfCheetah-v4", max_episode_steps=req["max_episode_steps"], disable_env_checker=True)
    raw = env.unwrapped
    episodes = []
    for ep in req["episodes"]:
        task = ep["task"]
        env.reset(seed=0)
        raw.set_state(np.asarray(ep["qpos"], dtype=np.float64), np.asarray(ep["qvel"], dtype=np.float64))
        x_before = float(raw.data.qpos[0])
        out = {"obs0": [x_before] + raw._get_obs().tolist(), "obs": [], "reward": [], "terminated": [], "truncated": []}
        history = []
        for a in ep["actions"]:
            # The exact float32 values our env used, widened to float64 (see gym_parity.py).
            action = np.asarray(a, dtype=np.float32).astype(np.float64)
            obs, _r, _term, truncated, info = env.step(action)
            x = float(raw.data.qpos[0])
            dx = x - x_before
            x_before = x
            history.append(dx)
            ok = success(task, history)
            out["obs"].append([dx] + np.asarray(obs, dtype=np.float64).tolist())
            out["reward"].append(float(reward(task, float(info["reward_run"]), float(info["reward_ctrl"]))))
            out["terminated"].append(bool(ok))
            out["truncated"].append(bool(truncated))
        episodes.append(out)
    json.dump({"gymnasium": gym.__version__, "mujoco": __import__("mujoco").__version__, "episodes": episodes}, sys.stdout)


if __name__ == "__main__":
    main()
