"""PyTorch eager reference for `o2o bench dynamics`: Uni-O4's dynamics ensemble (the
MOBILE-style batched `EnsembleLinear`: weights [E, in, out], biases [E, 1, out], Swish, a
Gaussian head with soft log-variance bounds) trained the way its `train_dynamics` does: one
minibatch per member, NLL + 0.01 (sum max_logvar - sum min_logvar) + per-layer weight decay,
torch.optim.Adam.

Reads o2o's initial weights and one batch from --dir (manifest.json lists them), reports the
loss on that batch from those weights (the cross-check), then times --steps training steps on
a cycle of random batches of the same shape. Prints one JSON object on its last line:
{"loss": x, "steps_per_s": y, "threads": n, "torch": version}.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class EnsembleDynamics(nn.Module):
    def __init__(self, members, dims, obs_dim):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.zeros(members, i, o)) for i, o in zip(dims[:-1], dims[1:])])
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(members, 1, o)) for o in dims[1:]])
        out = obs_dim + 1
        self.max_logvar = nn.Parameter(torch.full((1, 1, out), 0.5))
        self.min_logvar = nn.Parameter(torch.full((1, 1, out), -10.0))
        self.out = out

    def forward(self, x):
        h = x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = F.silu(h)
        mu, raw = h[..., : self.out], h[..., self.out :]
        lv = self.max_logvar - F.softplus(self.max_logvar - raw)
        lv = self.min_logvar + F.softplus(lv - self.min_logvar)
        return mu, lv


def loss_fn(model, x, y, decay, coef):
    mu, lv = model(x)
    nll = ((mu - y).pow(2) * torch.exp(-lv)).mean(dim=(1, 2)).sum() + lv.mean(dim=(1, 2)).sum()
    wd = sum(0.5 * l * w.pow(2).sum() for w, l in zip(model.weights, decay))
    return nll + coef * (model.max_logvar.sum() - model.min_logvar.sum()) + wd


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    spec = json.load(open(os.path.join(a.dir, "manifest.json")))
    obs, act, e = spec["obs"], spec["act"], spec["members"]
    dims = [obs + act] + list(spec["hidden"]) + [2 * (obs + 1)]
    model = EnsembleDynamics(e, dims, obs)
    # o2o's names: dynamics/l{i}/weight|bias, dynamics/head/weight|bias, dynamics/max_logvar,
    # dynamics/min_logvar; standardization is identity in the bench (mean 0, std 1).
    loaded = {q["name"]: torch.from_numpy(np.load(os.path.join(a.dir, q["file"]))) for q in spec["params"]}
    layer_names = [f"dynamics/l{i}" for i in range(len(spec["hidden"]))] + ["dynamics/head"]
    with torch.no_grad():
        for i, n in enumerate(layer_names):
            model.weights[i].copy_(loaded[n + "/weight"])
            model.biases[i].copy_(loaded[n + "/bias"])
        model.max_logvar.copy_(loaded["dynamics/max_logvar"])
        model.min_logvar.copy_(loaded["dynamics/min_logvar"])
    x0 = torch.from_numpy(np.load(os.path.join(a.dir, "x.npy")))
    y0 = torch.from_numpy(np.load(os.path.join(a.dir, "y.npy")))
    decay, coef = spec["weight_decay"], spec["logvar_loss_coef"]
    with torch.no_grad():
        check = float(loss_fn(model, x0, y0, decay, coef))

    opt = torch.optim.Adam(model.parameters(), lr=spec["lr"])
    xs = [torch.randn_like(x0) for _ in range(spec["batches"])]
    ys = [0.1 * torch.randn_like(y0) for _ in range(spec["batches"])]

    def step(i):
        k = i % len(xs)
        loss = loss_fn(model, xs[k], ys[k], decay, coef)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    t = time.perf_counter()
    for i in range(a.steps):
        step(i)
    rate = a.steps / (time.perf_counter() - t)
    print(json.dumps({"loss": check, "steps_per_s": rate, "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
