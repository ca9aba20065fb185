"""PyTorch eager reference for `o2o bench update`: SAC (2 critics), SAC with a 10-critic
LayerNorm ensemble, and IQL, written the way CORL's single-file algorithms are (one nn.Module
per critic, torch.optim.Adam), timed on the same thread count as the Rust side.

Two jobs, both driven by files the Rust benchmark writes into --dir:
  1. cross-check: load o2o's initial weights, batch and the noise its update drew (NumPy .npy
     files, listed in manifest.json), run one update with that noise and report the losses;
  2. timing: updates per second on the same batch with fresh noise each update.
Prints one JSON object on its last line: {"variants": {name: {"losses": {...},
"updates_per_s": x}}, "threads": n, "torch": version}.
"""

import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------- networks

def mlp(in_dim, hidden, out_dim, layer_norm=False):
    layers, d = [], in_dim
    for h in hidden:
        layers += [nn.Linear(d, h)] + ([nn.LayerNorm(h)] if layer_norm else []) + [nn.ReLU()]
        d = h
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


class Critic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, layer_norm=False):
        super().__init__()
        self.net = mlp(obs_dim + act_dim, hidden, 1, layer_norm)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], dim=-1)).squeeze(-1)


class ValueFunction(nn.Module):
    def __init__(self, obs_dim, hidden):
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1)

    def forward(self, obs):
        return self.net(obs).squeeze(-1)


class TanhGaussianActor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, log_std_min=-20.0, log_std_max=2.0):
        super().__init__()
        self.net = mlp(obs_dim, hidden, 2 * act_dim)
        self.act_dim, self.lo, self.hi = act_dim, log_std_min, log_std_max

    def forward(self, obs, eps=None):
        mu, log_std = self.net(obs).split(self.act_dim, dim=-1)
        log_std = log_std.clamp(self.lo, self.hi)
        std = log_std.exp()
        if eps is None:
            eps = torch.randn_like(mu)
        u = mu + std * eps
        # log N(u; mu, std) - log|d tanh(u)/du|, the TanhTransform Jacobian.
        log_prob = torch.distributions.Normal(mu, std).log_prob(u).sum(-1)
        log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob


class GaussianPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden, log_std_min=-5.0, log_std_max=2.0):
        super().__init__()
        self.net = mlp(obs_dim, hidden, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.lo, self.hi = log_std_min, log_std_max

    def log_prob(self, obs, act):
        mean = torch.tanh(self.net(obs))
        std = self.log_std.clamp(self.lo, self.hi).exp()
        return torch.distributions.Normal(mean, std).log_prob(act).sum(-1)


# ----------------------------------------------------------------------------- algorithms

class SAC:
    """SAC with the options RLPD and CQL use: critic_steps minibatches (rows i::k) with the actor
    on the whole batch or the last minibatch, min or mean over critics in the actor loss, entropy
    in the backup or not. The critic step calls self.critic_term (zero here; CQL's regularizer)."""

    def __init__(self, obs_dim, act_dim, hidden, num_critics, subset, layer_norm, gamma=0.99, tau=0.005, lr=3e-4,
                 critic_steps=1, actor_last=False, actor_mean=False, backup_entropy=True, target_entropy_per_dim=-1.0):
        self.actor = TanhGaussianActor(obs_dim, act_dim, hidden)
        self.critics = nn.ModuleList([Critic(obs_dim, act_dim, hidden, layer_norm) for _ in range(num_critics)])
        self.targets = nn.ModuleList([Critic(obs_dim, act_dim, hidden, layer_norm) for _ in range(num_critics)])
        self.targets.load_state_dict(self.critics.state_dict())
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=lr)
        self.target_entropy = target_entropy_per_dim * float(act_dim)
        self.num_critics, self.subset, self.gamma, self.tau = num_critics, subset, gamma, tau
        self.critic_steps, self.actor_last, self.actor_mean, self.backup_entropy = critic_steps, actor_last, actor_mean, backup_entropy
        self.act_dim = act_dim

    def critic_term(self, b, qs, noise, out):
        return 0.0

    def update(self, batch, noise=None):
        noise = list(noise) if noise is not None else None
        alpha = self.log_alpha.exp().detach()
        k = self.critic_steps
        out = {}
        # o2o draws the noise of every minibatch's next actions at once (one [N, A] draw,
        # minibatch i taking rows i::k; the actor does not move during the critic steps); the
        # cross-check slices it the same way. Timing draws fresh noise per step, as the
        # official code's loop does.
        next_eps = noise.pop(0) if noise and k > 1 else None
        for i in range(k):
            b = {key: v[i::k] for key, v in batch.items()}
            with torch.no_grad():
                eps = next_eps[i::k] if next_eps is not None else (noise.pop(0) if noise else None)
                next_a, next_logp = self.actor(b["next_obs"], eps)
                if self.subset < self.num_critics:
                    idx = noise.pop(0).tolist() if noise else torch.randperm(self.num_critics)[: self.subset].tolist()
                else:
                    idx = range(self.num_critics)
                q_next = torch.stack([self.targets[j](b["next_obs"], next_a) for j in idx]).min(0).values
                if self.backup_entropy:
                    q_next = q_next - alpha * next_logp
                y = b["reward"] + self.gamma * (1.0 - b["terminal"]) * q_next
            qs = [c(b["obs"], b["action"]) for c in self.critics]
            td_loss = sum(F.mse_loss(q, y) for q in qs) / len(qs)
            critic_loss = td_loss + self.critic_term(b, qs, noise, out)
            self.critic_opt.zero_grad()
            critic_loss.backward()
            self.critic_opt.step()
            with torch.no_grad():
                for t, s in zip(self.targets.parameters(), self.critics.parameters()):
                    t.data.mul_(1.0 - self.tau).add_(s.data, alpha=self.tau)

        obs = b["obs"] if self.actor_last else batch["obs"]
        a, logp = self.actor(obs, noise.pop(0) if noise else None)
        q = torch.stack([c(obs, a) for c in self.critics])
        q = q.mean(0) if self.actor_mean else q.min(0).values
        actor_loss = (alpha * logp - q).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()

        alpha_loss = (-self.log_alpha.exp() * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()
        out.update({"critic_loss": td_loss.item(), "actor_loss": actor_loss.item(), "alpha_loss": alpha_loss.item()})
        return out

    def load(self, w):
        set_mlp(self.actor.net, w, "actor")
        for e, c in enumerate(self.critics):
            set_mlp(c.net, w, "critic", member=e)
        for e, c in enumerate(self.targets):
            set_mlp(c.net, w, "critic_target", member=e)
        with torch.no_grad():
            self.log_alpha.copy_(torch.from_numpy(w["temperature/param"]))


class CQL(SAC):
    """CQL as in CORL's cql.py (importance-sampled logsumexp over N uniform, N π(·|s) and N π(·|s')
    actions, all evaluated at s), plus Cal-QL's floor at the MC return when calibrate=True."""

    def __init__(self, *args, n_actions=10, cql_alpha=5.0, calibrate=False, **kw):
        super().__init__(*args, backup_entropy=False, **kw)
        self.n_actions, self.cql_alpha, self.calibrate = n_actions, cql_alpha, calibrate

    def critic_term(self, b, qs, noise, out):
        B, N, A = b["obs"].shape[0], self.n_actions, self.act_dim
        obs = b["obs"].repeat_interleave(N, 0)
        next_obs = b["next_obs"].repeat_interleave(N, 0)
        rand = (noise.pop(0) if noise else torch.rand(B * N, A, device=b["obs"].device)) * 2.0 - 1.0
        with torch.no_grad():
            cur, logp_cur = self.actor(obs, noise.pop(0) if noise else None)
            nxt, logp_next = self.actor(next_obs, noise.pop(0) if noise else None)
        term, gaps = 0.0, []
        for c, q_data in zip(self.critics, qs):
            q_rand = c(obs, rand).view(B, N)
            q_cur = c(obs, cur).view(B, N)
            q_next = c(obs, nxt).view(B, N)
            if self.calibrate:
                g = b["mc_return"].view(B, 1)
                q_cur, q_next = torch.maximum(q_cur, g), torch.maximum(q_next, g)
            cat = torch.cat([q_rand - A * math.log(0.5), q_next - logp_next.view(B, N), q_cur - logp_cur.view(B, N)], 1)
            gap = (torch.logsumexp(cat, 1) - q_data).mean()
            gaps.append(gap)
            term = term + self.cql_alpha * gap
        out["cql_gap"] = (sum(gaps) / len(gaps)).item()
        return term / len(qs)


class IQL:
    def __init__(self, obs_dim, act_dim, hidden, gamma=0.99, tau=0.005, lr=3e-4, expectile=0.7, beta=3.0, max_steps=1_000_000):
        self.actor = GaussianPolicy(obs_dim, act_dim, hidden)
        self.critics = nn.ModuleList([Critic(obs_dim, act_dim, hidden) for _ in range(2)])
        self.targets = nn.ModuleList([Critic(obs_dim, act_dim, hidden) for _ in range(2)])
        self.targets.load_state_dict(self.critics.state_dict())
        self.value = ValueFunction(obs_dim, hidden)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.actor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.actor_opt, max_steps)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=lr)
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=lr)
        self.gamma, self.tau, self.expectile, self.beta = gamma, tau, expectile, beta

    def update(self, b, noise=None):
        with torch.no_grad():
            q_t = torch.min(*[t(b["obs"], b["action"]) for t in self.targets])
        u = q_t - self.value(b["obs"])
        value_loss = (torch.abs(self.expectile - (u < 0).float()) * u**2).mean()
        self.value_opt.zero_grad()
        value_loss.backward()
        self.value_opt.step()

        with torch.no_grad():
            adv = q_t - self.value(b["obs"])
            next_v = self.value(b["next_obs"])
        weight = torch.exp(self.beta * adv).clamp(max=100.0)
        actor_loss = -(weight * self.actor.log_prob(b["obs"], b["action"])).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        self.actor_sched.step()

        y = b["reward"] + self.gamma * (1.0 - b["terminal"]) * next_v
        critic_loss = sum(F.mse_loss(c(b["obs"], b["action"]), y) for c in self.critics)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        with torch.no_grad():
            for t, s in zip(self.targets.parameters(), self.critics.parameters()):
                t.data.mul_(1.0 - self.tau).add_(s.data, alpha=self.tau)
        return {"value_loss": value_loss.item(), "actor_loss": actor_loss.item(), "critic_loss": critic_loss.item()}

    def load(self, w):
        set_mlp(self.actor.net, w, "actor")
        with torch.no_grad():
            self.actor.log_std.copy_(torch.from_numpy(w["actor/log_std"]))
        for e, c in enumerate(self.critics):
            set_mlp(c.net, w, "critic", member=e)
        for e, c in enumerate(self.targets):
            set_mlp(c.net, w, "critic_target", member=e)
        set_mlp(self.value.net, w, "value")


def set_mlp(seq, w, prefix, member=None):
    """Copy o2o's weights (W: [in, out] or [E, in, out]) into an nn.Sequential of Linear/LayerNorm."""
    pick = (lambda a: a) if member is None else (lambda a: a[member])
    linears = [m for m in seq if isinstance(m, nn.Linear)]
    norms = [m for m in seq if isinstance(m, nn.LayerNorm)]
    names = [f"{prefix}/l{i}" for i in range(len(linears) - 1)] + [f"{prefix}/head"]
    with torch.no_grad():
        for lin, name in zip(linears, names):
            lin.weight.copy_(torch.from_numpy(pick(w[name + "/weight"])).reshape(lin.weight.shape[::-1]).t())
            lin.bias.copy_(torch.from_numpy(pick(w[name + "/bias"])).reshape(-1))
        for i, ln in enumerate(norms):
            ln.weight.copy_(torch.from_numpy(pick(w[f"{prefix}/ln{i}/weight"])).reshape(-1))
            ln.bias.copy_(torch.from_numpy(pick(w[f"{prefix}/ln{i}/bias"])).reshape(-1))


# ----------------------------------------------------------------------------- driver

def make(spec):
    o, a, h = spec["obs_dim"], spec["act_dim"], spec["hidden"]
    if spec["algo"] == "sac":
        return SAC(o, a, h, spec["num_critics"], spec["target_subset"], spec["layer_norm"])
    if spec["algo"] == "rlpd":
        return SAC(o, a, h, 10, 2, True, critic_steps=spec["critic_steps"], actor_last=True, actor_mean=True, target_entropy_per_dim=-0.5)
    if spec["algo"] in ("cql", "calql"):
        return CQL(o, a, h, 2, 2, False, calibrate=spec["algo"] == "calql")
    return IQL(o, a, h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    out = {}
    for spec in manifest["variants"]:
        name = spec["name"]
        load = lambda f: np.load(os.path.join(args.dir, f))
        batch = {k: torch.from_numpy(load(f)).to(dev) for k, f in spec["batch"].items()}
        noise = [torch.from_numpy(load(f)).to(dev) for f in spec["noise"]]
        # 1. cross-check from o2o's weights and noise (on the CPU, in float32).
        torch.manual_seed(0)
        agent = make(spec)
        agent.load({k: load(f) for k, f in spec["weights"].items()})
        losses = agent.update({k: v.cpu() for k, v in batch.items()}, [n.cpu() for n in noise])
        # 2. timing with fresh noise each update.
        agent = make(spec)
        for m in [getattr(agent, k) for k in ("actor", "critics", "targets", "value") if hasattr(agent, k)]:
            m.to(dev)
        if hasattr(agent, "log_alpha"):
            agent.log_alpha = agent.log_alpha.detach().to(dev).requires_grad_(True)
            agent.alpha_opt = torch.optim.Adam([agent.log_alpha], lr=3e-4)
        for _ in range(args.warmup):
            agent.update(batch)
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(args.updates):
            agent.update(batch)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
        # Also per CPU second of this thread: steadier than wall time on a shared machine.
        out[name] = {"losses": losses, "updates_per_s": args.updates / dt, "cpu_updates_per_s": args.updates / cpu if cpu > 0 else 0.0}
    print(json.dumps({"variants": out, "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
