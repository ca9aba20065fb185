"""PyTorch + Gymnasium reference for `o2o bench ppo`: PPO in the shape of CleanRL's
ppo_continuous_action.py, with o2o's ppo-hopper hyperparameters, timed per rollout
(collection + update) the way o2o's on-policy loop reports `perf/steps_per_s`.

- envs: gymnasium.vector.SyncVectorEnv of --envs copies of --env (Gymnasium's own vector env,
  stepped in this thread, as CleanRL does);
- networks: actor mean 64x64 tanh with a state-independent log std, critic 64x64 tanh;
  running observation normalization clipped at +-10 (updated while collecting);
- update: GAE(0.99, 0.95), 10 epochs of minibatches of 64, clipped surrogate (0.2), clipped
  value loss, advantage normalization per minibatch, grad-norm clip 0.5, Adam eps 1e-5
  (one optimizer for the actor, one for the critic, as o2o has).

Prints one JSON object on its last line: {"steps_per_s": median over the rollouts after the
first, "rates": [...], "threads": n, "torch": version, "gymnasium": version}.
"""

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn


def mlp(i, o, gain):
    layers = [nn.Linear(i, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, o)]
    for l in layers:
        if isinstance(l, nn.Linear):
            nn.init.orthogonal_(l.weight, np.sqrt(2))
            nn.init.zeros_(l.bias)
    nn.init.orthogonal_(layers[-1].weight, gain)
    return nn.Sequential(*layers)


class RunningNorm:
    def __init__(self, d):
        self.mean, self.var, self.count = np.zeros(d), np.ones(d), 1e-4

    def __call__(self, x):
        b_mean, b_var, n = x.mean(0), x.var(0), x.shape[0]
        delta, tot = b_mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / tot
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / tot) / tot
        self.count = tot
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -10, 10).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="Hopper-v5")
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--rollout", type=int, default=256)
    p.add_argument("--rollouts", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(a.env) for _ in range(a.envs)])
    od, ad = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    lo, hi = envs.single_action_space.low, envs.single_action_space.high
    actor, critic = mlp(od, ad, 0.01), mlp(od, 1, 1.0)
    log_std = nn.Parameter(torch.zeros(ad))
    opt_a = torch.optim.Adam(list(actor.parameters()) + [log_std], lr=3e-4, eps=1e-5)
    opt_c = torch.optim.Adam(critic.parameters(), lr=3e-4, eps=1e-5)
    norm = RunningNorm(od)
    T, N = a.rollout, a.envs
    obs_b = torch.zeros(T, N, od)
    act_b = torch.zeros(T, N, ad)
    logp_b, rew_b, done_b, val_b = (torch.zeros(T, N) for _ in range(4))
    raw, _ = envs.reset(seed=0)
    obs = torch.from_numpy(norm(raw))
    done = torch.zeros(N)
    rates = []
    for _ in range(a.rollouts):
        t0 = time.perf_counter()
        for t in range(T):
            obs_b[t], done_b[t] = obs, done
            with torch.no_grad():
                mean, v = actor(obs), critic(obs).squeeze(-1)
                dist = torch.distributions.Normal(mean, log_std.exp())
                act = dist.sample()
                logp_b[t], val_b[t], act_b[t] = dist.log_prob(act).sum(-1), v, act
            raw, r, term, trunc, _ = envs.step(np.clip(act.numpy(), lo, hi))
            rew_b[t] = torch.from_numpy(r.astype(np.float32))
            obs, done = torch.from_numpy(norm(raw)), torch.from_numpy((term | trunc).astype(np.float32))
        with torch.no_grad():
            nxt = critic(obs).squeeze(-1)
            adv, last = torch.zeros(T, N), torch.zeros(N)
            for t in reversed(range(T)):
                nd = 1.0 - (done if t == T - 1 else done_b[t + 1])
                nv = nxt if t == T - 1 else val_b[t + 1]
                delta = rew_b[t] + 0.99 * nv * nd - val_b[t]
                last = delta + 0.99 * 0.95 * nd * last
                adv[t] = last
            ret = adv + val_b
        b_obs, b_act, b_logp = obs_b.reshape(-1, od), act_b.reshape(-1, ad), logp_b.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), ret.reshape(-1), val_b.reshape(-1)
        rows = T * N
        for _epoch in range(10):
            perm = torch.randperm(rows)
            for s in range(0, rows, 64):
                mb = perm[s : s + 64]
                dist = torch.distributions.Normal(actor(b_obs[mb]), log_std.exp())
                ratio = (dist.log_prob(b_act[mb]).sum(-1) - b_logp[mb]).exp()
                ma = b_adv[mb]
                ma = (ma - ma.mean()) / (ma.std() + 1e-8)
                pg = torch.max(-ma * ratio, -ma * ratio.clamp(0.8, 1.2)).mean()
                opt_a.zero_grad()
                pg.backward()
                nn.utils.clip_grad_norm_(list(actor.parameters()) + [log_std], 0.5)
                opt_a.step()
                v = critic(b_obs[mb]).squeeze(-1)
                vc = b_val[mb] + (v - b_val[mb]).clamp(-0.2, 0.2)
                vl = 0.5 * torch.max((v - b_ret[mb]) ** 2, (vc - b_ret[mb]) ** 2).mean()
                opt_c.zero_grad()
                vl.backward()
                nn.utils.clip_grad_norm_(critic.parameters(), 0.5)
                opt_c.step()
        rates.append(rows / (time.perf_counter() - t0))
    later = sorted(rates[1:])
    print(json.dumps({"steps_per_s": later[len(later) // 2], "rates": rates, "threads": torch.get_num_threads(), "torch": torch.__version__, "gymnasium": gym.__version__}))


if __name__ == "__main__":
    main()
