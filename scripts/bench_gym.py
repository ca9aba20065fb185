#!/usr/bin/env python3
"""Reference figures for `o2o bench env`: Gymnasium's env.step and raw mj_step in Python.

usage: bench_gym.py GYM_ID --steps N [--seed S] [--repeats R]
Prints one JSON object: {"gym_id", "gymnasium_steps_per_s", "python_mj_step_steps_per_s",
"frame_skip"}, each the best of R timed runs of N steps after a warm-up. `env.step` goes through
the full `gymnasium.make` stack (TimeLimit, OrderEnforcing, PassiveEnvChecker), resetting on
episode end; actions are drawn uniformly in the action box beforehand, outside the timing.
"""
import argparse
import json
import time

import gymnasium as gym
import mujoco
import numpy as np


def time_env(env, actions):
    env.reset(seed=0)
    t0 = time.perf_counter()
    for a in actions:
        _obs, _r, terminated, truncated, _info = env.step(a)
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - t0)


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
    args = p.parse_args()

    if args.gym_id.startswith("AdroitHand"):
        import gymnasium_robotics  # the Adroit ids (`o2o bench env pen-v1`)

        gym.register_envs(gymnasium_robotics)
    env = gym.make(args.gym_id)
    rng = np.random.default_rng(args.seed)
    low, high = env.action_space.low, env.action_space.high
    actions = rng.uniform(low, high, size=(args.steps, low.shape[0])).astype(np.float32)
    time_env(env, actions[: min(1000, args.steps)])  # warm-up
    best_env = max(time_env(env, actions) for _ in range(args.repeats))

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
