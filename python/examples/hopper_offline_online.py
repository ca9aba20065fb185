"""Offline to online from Python, d3rlpy-style: IQL on the hopper data shipped in
data/hopper-small, fine-tuned online in o2o's hopper-v2 (stepped in Rust), then the policy run in
Gymnasium's own Hopper-v5.

    python python/examples/hopper_offline_online.py [OFFLINE_STEPS] [ONLINE_STEPS]
"""

import sys
from pathlib import Path

import gymnasium as gym

import o2o

REPO = Path(__file__).resolve().parents[2]


def main():
    offline_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    online_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    data = o2o.Dataset.from_d4rl(REPO / "data" / "hopper-small" / "hopper-medium-v2.hdf5")
    print(f"{data}: {data.episodes} episodes recorded in {data.env}")

    # The IQL paper's MuJoCo settings (the preset base iql-locomotion), on one CPU thread.
    iql = o2o.IQL(expectile=0.7, beta=3.0, device="cpu", threads=1)
    offline = iql.fit(data, offline_steps, eval_every=offline_steps, eval_episodes=5)
    online = iql.fit_online(data.env, online_steps, eval_every=online_steps, eval_episodes=5)
    for name, done in [("offline", offline), ("online", online)]:
        print(f"{name}: return {done.summary['final_eval']['mean_return']:.0f} ({done.dir})")

    env = gym.make("Hopper-v5")
    obs, _ = env.reset(seed=0)
    total, over = 0.0, False
    while not over:
        obs, reward, terminated, truncated, _ = env.step(iql.predict(obs))
        total, over = total + reward, terminated or truncated
    print(f"one episode in Gymnasium's Hopper-v5: return {total:.0f}")
    print("TorchScript policy:", iql.save_policy(online.dir / "policy.pt"))


if __name__ == "__main__":
    main()
