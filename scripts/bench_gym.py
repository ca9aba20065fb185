#!/usr/bin/env python3
"""Reference figures for `o2o bench env`: Gymnasium's env.step and raw mj_step in Python.

usage: bench_gym.py GYM_ID --steps N [--seed S] [--repeats R]
Prints one JSON object: {"gym_id", "gymnasium_steps_per_s", "python_mj_step_steps_per_s",
"frame_skip"}, each the best of R timed runs of N steps after a warm-up. `env.step` goes through
the full `gymnasium.make` stack (TimeLimit, OrderEnforcing, PassiveEnvChecker), resetting on
episode end; actions are drawn uniformly in the action box beforehand, outside the timing.
For Adroit, `o2o bench env` passes its own episode ends so both sides reset equally often:
`--max-episode-steps` (D4RL's pen horizon is 100, Gymnasium-Robotics' 200) and, for pen,
`--pen-drop-termination` (D4RL ends the episode when the pen falls below z = 0.075; with random
actions that happens within tens of steps).
For the AntMaze ids (`antmaze-*-v2`, `-v0`) the reference is D4RL 1.1's own env on the mujoco
bindings, built as `d4rl_antmaze_parity.py` builds it (its stand-ins for mujoco_py and old gym),
stepped through D4RL's `NormalizedBoxEnv` with its registered time limit.
"""
import argparse
import contextlib
import json
import sys
import tempfile
import time

import gymnasium as gym
import mujoco
import numpy as np


def time_env(env, actions, dropped=None):
    env.reset(seed=0)
    t0 = time.perf_counter()
    for a in actions:
        _obs, _r, terminated, truncated, _info = env.step(a)
        if terminated or truncated or (dropped is not None and dropped()):
            env.reset()
    return len(actions) / (time.perf_counter() - t0)


class D4rlEpisodes:
    """D4RL's old-gym env (4-tuple `step`) with its time limit, as `time_env` steps an env."""

    def __init__(self, env, limit):
        self.env, self.limit, self.t = env, limit, 0
        self.unwrapped = env.wrapped_env

    def reset(self, seed=None):
        self.t = 0
        return self.env.reset()

    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        self.t += 1
        return obs, reward, done, self.t >= self.limit, info


def d4rl_antmaze(gym_id):
    """D4RL 1.1's `gym_id` on the mujoco bindings (`d4rl_antmaze_parity.py`)."""
    import d4rl_antmaze_parity as parity

    with contextlib.redirect_stdout(sys.stderr):
        registry = parity.install_stand_ins(parity.d4rl_dir())
        entry_point, limit, kwargs = registry[gym_id]
        mod_name, fn_name = entry_point.split(":")
        with tempfile.TemporaryDirectory() as tmp:
            tempfile.tempdir = tmp  # maze_env.py leaves its XML behind otherwise
            env = getattr(sys.modules[mod_name], fn_name)(**kwargs)
            tempfile.tempdir = None
    return D4rlEpisodes(env, limit)


def time_mj_step(model, data, actions, frame_skip):
    t0 = time.perf_counter()
    for a in actions:
        data.ctrl[:] = a
        mujoco.mj_step(model, data, nstep=frame_skip)
    return len(actions) / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("gym_id")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-episode-steps", type=int, default=None)
    p.add_argument("--pen-drop-termination", action="store_true")
    args = p.parse_args()

    if args.gym_id.startswith("AdroitHand"):
        import gymnasium_robotics  # the Adroit ids (`o2o bench env pen-v1`)

        gym.register_envs(gymnasium_robotics)
    if args.gym_id.startswith("antmaze-"):
        env = d4rl_antmaze(args.gym_id)
        dim = env.unwrapped.model.nu
        low, high = -np.ones(dim, dtype=np.float32), np.ones(dim, dtype=np.float32)
    else:
        env = gym.make(args.gym_id, **({"max_episode_steps": args.max_episode_steps} if args.max_episode_steps else {}))
        low, high = env.action_space.low, env.action_space.high
    dropped = None
    if args.pen_drop_termination:
        raw = env.unwrapped
        dropped = lambda: raw.data.xpos[raw.obj_body_id][2] < 0.075  # noqa: E731
    rng = np.random.default_rng(args.seed)
    actions = rng.uniform(low, high, size=(args.steps, low.shape[0])).astype(np.float32)
    with contextlib.redirect_stdout(sys.stderr):  # D4RL prints each new goal
        time_env(env, actions[: min(1000, args.steps)], dropped)  # warm-up
        best_env = max(time_env(env, actions, dropped) for _ in range(args.repeats))

    raw = env.unwrapped
    data = mujoco.MjData(raw.model)
    best_mj = max(time_mj_step(raw.model, data, actions, raw.frame_skip) for _ in range(args.repeats))
    print(json.dumps({
        "gym_id": args.gym_id,
        "gymnasium_steps_per_s": best_env,
        "python_mj_step_steps_per_s": best_mj,
        "frame_skip": raw.frame_skip,
    }))


if __name__ == "__main__":
    main()
