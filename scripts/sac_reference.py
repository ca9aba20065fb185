"""A reference SAC in PyTorch + Gymnasium, to check o2o's SAC learning curve against.

Same recipe as o2o's `sac-hopper` preset (algorithms.md §6.5): 2×256 ReLU MLPs, Adam 3e-4,
batch 256, γ 0.99, τ 0.005, two critics with a min target, entropy in the backup, learned
temperature α = exp(log α) from α₀ = 1 with target entropy −|A|, uniformly random actions for
the first `--random-steps` env steps, then one update per env step. Deterministic evaluation
(tanh of the mean) every `--eval-every` env steps. Prints one JSON object per evaluation.

    python scripts/sac_reference.py --env Hopper-v5 --steps 30000 --seed 0

With `--out DIR` it also writes DIR as a run directory `o2o report` reads next to o2o's runs:
`config.toml` (algo, env, seed, the step budget in o2o's keys, the initialization as
`agent.critic.init`), `metrics.jsonl` (one line per evaluation: `env_step`, `grad_step`,
`eval/return`, `train/alpha`, `wall_s`) and, once the run ends, `summary.json` with
`"finished": true`. An existing finished DIR is left alone; an unfinished one is started over.
"""

import argparse
import json
import os
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(inp, out, hidden=256):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out))


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(-20.0, 2.0)

    def sample(self, obs):
        mean, log_std = self(obs)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        a = torch.tanh(u)
        # log N(u; mean, std) − Σ log(1 − tanh(u)²), the second term in its stable form.
        logp = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        logp = logp - (2 * (np.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return a, logp


def evaluate(env_id, actor, scale, episodes, seed):
    env = gym.make(env_id)
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + k)
        done, ret = False, 0.0
        while not done:
            with torch.no_grad():
                a = torch.tanh(actor(torch.as_tensor(obs, dtype=torch.float32))[0]).numpy()
            obs, r, term, trunc, _ = env.step(a * scale)
            ret += r
            done = term or trunc
        returns.append(ret)
    return float(np.mean(returns))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="Hopper-v5")
    p.add_argument("--steps", type=int, default=30000)
    p.add_argument("--random-steps", type=int, default=5000)
    p.add_argument("--eval-every", type=int, default=5000)
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--init", choices=["torch", "orthogonal"], default="torch",
                   help="PyTorch's default Linear init, or o2o's (orthogonal, gain √2 hidden and 1 on the output layer, zero biases)")
    p.add_argument("--out", default=None, help="also write a run directory o2o report reads (config.toml, metrics.jsonl, summary.json)")
    args = p.parse_args()
    metrics = None
    if args.out:
        if os.path.exists(os.path.join(args.out, "summary.json")):
            print(f"{args.out} already holds a finished run; leaving it", file=sys.stderr)
            return
        os.makedirs(args.out, exist_ok=True)
        init = "torch_default" if args.init == "torch" else "orthogonal"
        with open(os.path.join(args.out, "config.toml"), "w") as f:
            f.write(
                f'# scripts/sac_reference.py {" ".join(sys.argv[1:])}\n'
                f'algo = "sac (PyTorch reference, scripts/sac_reference.py)"\npreset = "sac-reference"\n'
                f'env = "{args.env}"\nseed = {args.seed}\n\n[train]\noffline_steps = 0\n'
                f"random_steps = {args.random_steps}\nwarmup_steps = 0\nonline_steps = {args.steps - args.random_steps}\n"
                f'\n[agent.critic]\ninit = "{init}"\n\n[agent.actor.mlp]\ninit = "{init}"\n'
            )
        metrics = open(os.path.join(args.out, "metrics.jsonl"), "w")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    env = gym.make(args.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    scale = env.action_space.high  # symmetric boxes in the locomotion tasks
    actor = Actor(obs_dim, act_dim)
    q1, q2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    q1_t, q2_t = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)
    if args.init == "orthogonal":
        for net in (actor.net, q1, q2):
            layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
            for i, layer in enumerate(layers):
                nn.init.orthogonal_(layer.weight, gain=1.0 if i == len(layers) - 1 else np.sqrt(2.0))
                nn.init.zeros_(layer.bias)
    q1_t.load_state_dict(q1.state_dict())
    q2_t.load_state_dict(q2.state_dict())
    log_alpha = torch.zeros(1, requires_grad=True)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-4)
    alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)
    target_entropy = -float(act_dim)

    cap = args.steps
    buf_o = np.zeros((cap, obs_dim), np.float32)
    buf_a = np.zeros((cap, act_dim), np.float32)
    buf_r = np.zeros(cap, np.float32)
    buf_o2 = np.zeros((cap, obs_dim), np.float32)
    buf_d = np.zeros(cap, np.float32)

    obs, _ = env.reset(seed=args.seed)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        if step <= args.random_steps:
            a = rng.uniform(-1.0, 1.0, act_dim).astype(np.float32)
        else:
            with torch.no_grad():
                a = actor.sample(torch.as_tensor(obs, dtype=torch.float32)[None])[0][0].numpy()
        obs2, r, term, trunc, _ = env.step(a * scale)
        i = step - 1
        buf_o[i], buf_a[i], buf_r[i], buf_o2[i], buf_d[i] = obs, a, r, obs2, float(term)
        obs = obs2
        if term or trunc:
            obs, _ = env.reset()
        if step > args.random_steps:
            idx = rng.integers(0, step, 256)
            o, act, rew, o2, d = (torch.as_tensor(x[idx]) for x in (buf_o, buf_a, buf_r, buf_o2, buf_d))
            alpha = log_alpha.exp().detach()
            with torch.no_grad():
                a2, logp2 = actor.sample(o2)
                x2 = torch.cat([o2, a2], -1)
                q_next = torch.min(q1_t(x2), q2_t(x2)).squeeze(-1) - alpha * logp2
                y = rew + 0.99 * (1.0 - d) * q_next
            x = torch.cat([o, act], -1)
            q_loss = F.mse_loss(q1(x).squeeze(-1), y) + F.mse_loss(q2(x).squeeze(-1), y)
            q_opt.zero_grad()
            q_loss.backward()
            q_opt.step()
            with torch.no_grad():
                for net, tgt in ((q1, q1_t), (q2, q2_t)):
                    for p_, pt in zip(net.parameters(), tgt.parameters()):
                        pt.mul_(0.995).add_(0.005 * p_)
            a_new, logp = actor.sample(o)
            xn = torch.cat([o, a_new], -1)
            actor_loss = (alpha * logp - torch.min(q1(xn), q2(xn)).squeeze(-1)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            alpha_loss = -(log_alpha.exp() * (logp.detach() + target_entropy)).mean()
            alpha_opt.zero_grad()
            alpha_loss.backward()
            alpha_opt.step()
        if step % args.eval_every == 0:
            ret = evaluate(args.env, actor, scale, args.eval_episodes, args.seed)
            alpha_now = float(log_alpha.exp().detach())
            print(json.dumps({"env_step": step, "eval_return": ret, "alpha": alpha_now, "wall_s": time.time() - t0}), flush=True)
            if metrics is not None:
                grad_step = max(0, step - args.random_steps)
                metrics.write(json.dumps({"env_step": step, "grad_step": grad_step, "eval/return": ret, "train/alpha": alpha_now, "wall_s": time.time() - t0}) + "\n")
                metrics.flush()
    if metrics is not None:
        metrics.close()
        tmp = os.path.join(args.out, "summary.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"finished": True, "env_steps": args.steps, "wall_s": time.time() - t0}, f)
        os.replace(tmp, os.path.join(args.out, "summary.json"))


if __name__ == "__main__":
    main()
