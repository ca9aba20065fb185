"""A Gymnasium env written in Python, trained online with o2o's SAC (the Rust example
experiments/examples/custom_env.rs, in Python): a point mass on the plane that must reach a goal.

    python python/examples/point_mass.py [RUNS_DIR] [ONLINE_STEPS]

o2o steps the env from its Rust loop (the GIL taken per call); the networks train in Rust.
"""

import sys

import gymnasium as gym
import numpy as np

import o2o


class PointMass(gym.Env):
    """Observation (x, y, goal x, goal y) in [-1, 1]²; action a velocity in [-1, 1]²; reward the
    negative distance to the goal; the episode ends at the goal (terminated) or after 50 steps
    (truncated). `info["is_success"]` says whether the goal was reached."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + 0.1 * np.clip(action, -1, 1), -1, 1).astype(np.float32)
        self.t += 1
        dist = float(np.linalg.norm(self.pos - self.goal))
        reached = dist < 0.1
        return self._obs(), -dist, reached, not reached and self.t >= 50, {"is_success": reached}

    def _obs(self):
        return np.concatenate([self.pos, self.goal])


def sac(**run):
    """SAC with the small-task settings of the preset sac-inverted-pendulum."""
    return o2o.SAC(hidden=(64, 64), actor_lr=1e-3, critic_lr=1e-3, batch_size=128, random_steps=500, **run)


def main():
    runs_dir = sys.argv[1] if len(sys.argv) > 1 else "runs"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    agent = sac(runs_dir=runs_dir, device="cpu", set={"eval.at_start": True})
    # The class PointMass is a factory of envs: o2o makes one to act in and one to evaluate on.
    done = agent.fit_online(PointMass, steps, eval_every=1000, eval_episodes=10)
    start, final = done.summary["phase_evals"][0]["eval"], done.summary["final_eval"]
    print(f"{done.dir}: return {start['mean_return']:.1f} untrained, {final['mean_return']:.1f} after {steps} steps")
    env = PointMass()
    obs, _ = env.reset(seed=123)
    print("first action from the start of a new episode:", agent.predict(obs))


if __name__ == "__main__":
    main()
