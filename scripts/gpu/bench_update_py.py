#!/usr/bin/env python3
"""Agent updates per second under two more Python stacks, for the GPU check (issue 49): the same
updates `o2o bench update` times in o2o and in PyTorch eager (scripts/bench_update_torch.py),
under `torch.compile` and under a pure-JAX `jax.jit`, on the same device.

What it measures. For each variant, one "update" is exactly what one bench_update_torch.py
`agent.update(batch)` call does, with the sizes experiments/src/bench/update.rs writes into its
manifest (obs 17, act 6, hidden [256, 256], batch 256):
  sac           2 critics, target min over both, 1 critic + 1 actor + 1 temperature Adam step
  sac_ens10_ln  10 LayerNorm critics, target min over a random 2-subset, actor min over all 10
  iql           value (expectile 0.7), actor (AWR, beta 3, cosine LR), 2 critics; 3 Adam steps
  cql           SAC (2 critics, no entropy in the backup) + CQL's logsumexp over 10 uniform,
                10 pi(.|s) and 10 pi(.|s') actions per state, alpha 5 (CORL's cql.py)
  rlpd          UTD 20: 20 critic steps on rows i::20 of a 20 x 256 batch (10 LayerNorm critics,
                random 2-subset target, entropy backup), then actor (mean over the 10 critics)
                and temperature (target entropy -0.5 * act) on the last minibatch
Every critic step is followed by a Polyak update (tau 0.005), every optimizer is Adam(3e-4), the
batch is fixed and fresh noise is drawn each update. Rates are updates per wall second after
the first call and --warmup untimed updates; `compile_s` is the wall time of the very first call (tracing +
compilation + that update), reported apart from the steady state. As in the eager script, each
update's losses are fetched to the host every update (a sync per update; `--jax-sync end`
lets JAX pipeline the updates and only blocks at the end).

Backends.
  torch-compile  builds each agent with bench_update_torch.make() from a spec dict shaped as the
    Rust side writes it (no network is duplicated here) and times torch.compile(agent.update)
    (--mode default | reduce-overhead | max-autotune ...). The update has .item()/.tolist(),
    zero_grad(), backward() and optimizer steps inside: for the SAC family (critic steps in a
    Python loop) Dynamo (torch 2.13) gives up on the update frame itself and runs it eagerly,
    compiling only what it calls (the networks' forwards, Adam's step); IQL's straight-line
    update is split into ~10 graphs. The JSON's "dynamo" entry counts graphs, graph breaks and
    their reasons. Inductor's cache goes to a fresh temporary folder so compile_s is a cold
    compile (TORCHINDUCTOR_COMPILE_THREADS=1 keeps inductor's compile in one process). CQL's
    update also runs under `torch.device(dev)` (harmless now that bench_update_torch.py draws
    its uniform actions on the batch's device). Keep --warmup >= 10: Dynamo specializes the frame that resumes after each
    .item() on the loss's value and recompiles it every call until its recompile limit (8)
    leaves it to eager. torch-eager: the same harness without torch.compile (a baseline).
  jax  a from-scratch port with `jax` and `jax.numpy` only (no flax/optax): parameters are
    pytrees of arrays initialised like nn.Linear (U(+-1/sqrt(fan_in))), Adam is written out
    (torch's defaults: betas 0.9/0.999, eps 1e-8, bias-corrected), ensembles are stacked
    parameters under jax.vmap (the 2-critic variants too), the whole update (critic steps,
    Polyak, actor, temperature or value steps) is one jax.jit with the state donated, and
    RLPD's 20 critic steps are a jax.lax.scan (--scan-unroll to unroll). Differences from the
    eager rows that are inherent to the frameworks: the actor loss differentiates the actor's
    parameters only (PyTorch's backward also fills the critics' unused .grad), and CQL's 3 x 10
    sampled actions go through each critic as one 3BN-row batch rather than three.
    Matmul precision defaults to "highest" (true float32, as PyTorch's default; JAX on Ampere
    and later would otherwise use TF32): --jax-precision default|high|highest. Checked against
    the eager classes (same weights, same noise, jax_agents() run op by op): two updates' losses
    of sac, sac_ens10_ln, iql, cql and rlpd at UTD 1 agree within 2.2e-5.
JAX caveats: tested with 0.10.2 on the CPU; only long-stable APIs are used (tree_util.tree_map,
jax.random.key falling back to PRNGKey, jax.devices(platform)), so 0.11 + CUDA plugin should
run it as is. XLA's CPU thread count cannot be set directly: --threads N pins the process to N
cores before JAX starts (N = 1 also turns off Eigen's multi-threading).

Last line of output: {"backend", "device", "versions": {...}, "variants": {name:
{"updates_per_s", "compile_s", "losses": {first update's losses}, "rows_per_update", ...}}}.
"""

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

NAMES = ("sac", "sac_ens10_ln", "iql", "cql", "rlpd")
RLPD_UTD = 20  # RlpdConfig::default().critic_steps, the Rust side's `rows` for RLPD


def spec_for(name, obs, act, hidden):
    """(spec, rows per update as a multiple of --batch), as update.rs's `variants` builds them."""
    base = {"name": name, "obs_dim": obs, "act_dim": act, "hidden": hidden}
    if name in ("sac", "sac_ens10_ln"):
        e = 2 if name == "sac" else 10
        return {**base, "algo": "sac", "num_critics": e, "target_subset": 2, "layer_norm": e == 10}, 1
    if name == "rlpd":
        return {**base, "algo": "rlpd", "critic_steps": RLPD_UTD}, RLPD_UTD
    return {**base, "algo": name}, 1


def make_batch(rows, obs, act, seed=2024):
    """A random batch like update.rs's random_batch (float32 NumPy arrays)."""
    r = np.random.default_rng(seed)
    f = lambda x: np.asarray(x, dtype=np.float32)
    return {"obs": f(r.standard_normal((rows, obs))), "action": f(np.tanh(r.standard_normal((rows, act)))),
            "reward": f(r.standard_normal(rows)), "next_obs": f(r.standard_normal((rows, obs))),
            "terminal": f(r.uniform(size=rows) >= 0.95), "mc_return": f(r.standard_normal(rows))}


def check_finite(name, losses):
    bad = {k: v for k, v in losses.items() if not math.isfinite(v)}
    assert not bad, f"{name}: non-finite losses {bad}"


# ----------------------------------------------------------------------------- torch.compile

def run_torch(args, names):
    import shutil
    import tempfile
    from contextlib import nullcontext
    cache = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:  # a cold compile every run
        cache = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="o2o-inductor-")
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import bench_update_torch as ref

    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    mode = "eager" if args.backend == "torch-eager" else None if args.mode == "default" else args.mode
    out = {}
    for name in names:
        spec, rows = spec_for(name, args.obs, args.act, args.hidden)
        torch._dynamo.reset()
        counters.clear()
        torch.manual_seed(0)
        with torch.device(dev):  # parameters, log_alpha and optimizer state on the device
            agent = ref.make(spec)
        batch = {k: torch.from_numpy(v).to(dev) for k, v in make_batch(rows * args.batch, args.obs, args.act).items()}
        ctx = (lambda: torch.device(dev)) if spec["algo"] in ("cql", "calql") else nullcontext
        update = agent.update if mode == "eager" else torch.compile(agent.update, mode=mode)

        def step():
            with ctx():
                return update(batch)

        t0 = time.perf_counter()
        losses = step()
        sync()
        compile_s = time.perf_counter() - t0
        check_finite(name, losses)
        for _ in range(args.warmup):
            step()
        sync()
        t0 = time.perf_counter()
        for _ in range(args.updates):
            last = step()
        sync()
        dt = time.perf_counter() - t0
        check_finite(name, last)
        out[name] = {"updates_per_s": args.updates / dt, "compile_s": compile_s, "losses": losses,
                     "rows_per_update": rows * args.batch}
        if mode != "eager":  # what Dynamo made of it: graphs, breaks, and why frames fell back to eager
            first = lambda *ds: sorted({r.splitlines()[0][:100] for d in ds for r in d})
            out[name]["dynamo"] = {"unique_graphs": counters["stats"].get("unique_graphs", 0),
                                   "graph_breaks": sum(counters["graph_break"].values()),
                                   "frames_ok": counters["frames"].get("ok", 0),
                                   "frames_total": counters["frames"].get("total", 0),
                                   "break_reasons": first(counters["graph_break"], counters["unimplemented"])}
        print(f"{name}: {out[name]['updates_per_s']:.1f} up/s, first call {compile_s:.1f} s, "
              f"{json.dumps(out[name].get('dynamo', {}))}", file=sys.stderr)
        # What is done so far, should a time limit stop the rest (the last JSON line is read).
        print(json.dumps({"backend": args.backend, "device": args.device, "partial": True, "variants": out}), flush=True)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    versions = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "mode": mode or "default", "threads": torch.get_num_threads()}
    if dev.type == "cuda":
        versions["gpu"] = torch.cuda.get_device_name(dev)
    return versions, out


# ----------------------------------------------------------------------------- JAX

def jax_agents(jax, jnp, scan_unroll=1):
    """The JAX agents: builders (spec, key) -> (state, update(state, batch) -> (state, losses))."""
    tmap = jax.tree_util.tree_map
    lr, gamma, tau, b1, b2, adam_eps = 3e-4, 0.99, 0.005, 0.9, 0.999, 1e-8
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)

    # --- networks: an MLP is a list of {"w", "b"[, "g", "beta"]} layers; an ensemble stacks them.
    def mlp_init(key, dims, ln=False):
        layers = []
        for k, (i, o) in zip(jax.random.split(key, len(dims) - 1), zip(dims[:-1], dims[1:])):
            kw, kb = jax.random.split(k)
            s = 1.0 / math.sqrt(i)
            layers.append({"w": jax.random.uniform(kw, (i, o), minval=-s, maxval=s),
                           "b": jax.random.uniform(kb, (o,), minval=-s, maxval=s)})
        if ln:
            for layer in layers[:-1]:
                o = layer["b"].shape[0]
                layer["g"], layer["beta"] = jnp.ones((o,)), jnp.zeros((o,))
        return layers

    def mlp(p, x):
        for layer in p[:-1]:
            x = x @ layer["w"] + layer["b"]
            if "g" in layer:  # nn.LayerNorm(h): biased variance, eps 1e-5
                mu = x.mean(-1, keepdims=True)
                var = ((x - mu) ** 2).mean(-1, keepdims=True)
                x = (x - mu) / jnp.sqrt(var + 1e-5) * layer["g"] + layer["beta"]
            x = jax.nn.relu(x)
        return x @ p[-1]["w"] + p[-1]["b"]

    def ens_init(key, n, dims, ln):
        return jax.vmap(lambda k: mlp_init(k, dims, ln))(jax.random.split(key, n))

    def ens_q(p, obs, act):  # [E, rows]
        x = jnp.concatenate([obs, act], -1)
        return jax.vmap(lambda q: mlp(q, x)[..., 0])(p)

    def tanh_gaussian(p, obs, eps, a_dim):  # TanhGaussianActor: log_std clamped to [-20, 2]
        out = mlp(p, obs)
        mu, log_std = out[..., :a_dim], jnp.clip(out[..., a_dim:], -20.0, 2.0)
        u = mu + jnp.exp(log_std) * eps
        logp = (-0.5 * eps**2 - log_std - half_log_2pi).sum(-1)
        logp = logp - (2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))).sum(-1)
        return jnp.tanh(u), logp

    # --- Adam as torch.optim.Adam computes it, and the Polyak average.
    def adam_init(p):
        return {"m": tmap(jnp.zeros_like, p), "v": tmap(jnp.zeros_like, p), "t": jnp.zeros((), jnp.int32)}

    def adam(p, g, s, step_lr=lr):
        t = s["t"] + 1
        c1, c2 = 1.0 - b1 ** t.astype(jnp.float32), 1.0 - b2 ** t.astype(jnp.float32)
        m = tmap(lambda m, g: b1 * m + (1.0 - b1) * g, s["m"], g)
        v = tmap(lambda v, g: b2 * v + (1.0 - b2) * g * g, s["v"], g)
        p = tmap(lambda p, m, v: p - (step_lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + adam_eps), p, m, v)
        return p, {"m": m, "v": v, "t": t}

    def polyak(target, src):
        return tmap(lambda t, s: t * (1.0 - tau) + s * tau, target, src)

    def copy(p):
        return tmap(lambda x: x.copy(), p)

    # --- SAC, SAC-ensemble, CQL, RLPD: bench_update_torch.SAC / CQL with make()'s options.
    def sac_family(spec, key):
        o, a, h = spec["obs_dim"], spec["act_dim"], list(spec["hidden"])
        algo = spec["algo"]
        e, m, ln = {"sac": (spec.get("num_critics"), spec.get("target_subset"), spec.get("layer_norm")),
                    "rlpd": (10, 2, True), "cql": (2, 2, False)}[algo]
        k = spec.get("critic_steps", 1) if algo == "rlpd" else 1
        rlpd, cql = algo == "rlpd", algo == "cql"
        target_entropy = (-0.5 if rlpd else -1.0) * a
        n_act, cql_alpha = 10, 5.0
        ka, kc, key = jax.random.split(key, 3)
        critic = ens_init(kc, e, [o + a] + h + [1], ln)
        state = {"actor": mlp_init(ka, [o] + h + [2 * a]), "critic": critic, "target": copy(critic),
                 "log_alpha": jnp.zeros((1,)), "key": key}
        for n in ("actor", "critic"):
            state[n + "_opt"] = adam_init(state[n])
        state["alpha_opt"] = adam_init(state["log_alpha"])

        def critic_step(carry, b, actor, alpha):
            critic, target, opt, key = carry
            key, k1, k2, k3, k4, k5 = jax.random.split(key, 6)
            rows = b["obs"].shape[0]
            next_a, next_logp = tanh_gaussian(actor, b["next_obs"], jax.random.normal(k1, (rows, a)), a)
            if m < e:  # a fresh random m-subset of the targets each critic step
                idx = jax.random.permutation(k2, e)[:m]
                target_sub = tmap(lambda x: x[idx], target)
            else:
                target_sub = target
            q_next = ens_q(target_sub, b["next_obs"], next_a).min(0)
            if not cql:  # backup_entropy (CQL turns it off)
                q_next = q_next - alpha * next_logp
            y = b["reward"] + gamma * (1.0 - b["terminal"]) * q_next
            if cql:  # N uniform, N pi(.|s), N pi(.|s') actions per state, all scored at s
                obs_n = jnp.repeat(b["obs"], n_act, 0)
                rand = jax.random.uniform(k3, (rows * n_act, a)) * 2.0 - 1.0
                nxt, logp_next = tanh_gaussian(actor, jnp.repeat(b["next_obs"], n_act, 0),
                                               jax.random.normal(k4, (rows * n_act, a)), a)
                cur, logp_cur = tanh_gaussian(actor, obs_n, jax.random.normal(k5, (rows * n_act, a)), a)
                acts = jnp.concatenate([rand, nxt, cur])
                offsets = jnp.stack([jnp.full((rows, n_act), a * math.log(0.5)),
                                     logp_next.reshape(rows, n_act), logp_cur.reshape(rows, n_act)])

            def loss(c):
                qs = ens_q(c, b["obs"], b["action"])
                td = ((qs - y) ** 2).mean()  # mean over critics of each one's MSE
                if not cql:
                    return td, (td, jnp.zeros(()))
                q = ens_q(c, jnp.concatenate([obs_n] * 3), acts).reshape(e, 3, rows, n_act) - offsets
                gap = (jax.nn.logsumexp(q, axis=(1, 3)) - qs).mean(-1)  # [E]
                return td + cql_alpha * gap.mean(), (td, gap.mean())

            (_, aux), g = jax.value_and_grad(loss, has_aux=True)(critic)
            critic, opt = adam(critic, g, opt)
            return (critic, polyak(target, critic), opt, key), aux

        def update(state, batch):
            actor, alpha = state["actor"], jnp.exp(state["log_alpha"])
            carry = (state["critic"], state["target"], state["critic_opt"], state["key"])
            if k == 1:
                carry, (td, gap) = critic_step(carry, batch, actor, alpha)
                last = batch
            else:  # minibatch i = rows i::k, as the eager code slices
                mbs = tmap(lambda x: jnp.swapaxes(x.reshape(x.shape[0] // k, k, *x.shape[1:]), 0, 1), batch)
                carry, (tds, gaps) = jax.lax.scan(lambda c, b: critic_step(c, b, actor, alpha), carry, mbs,
                                                  unroll=scan_unroll)
                td, gap, last = tds[-1], gaps[-1], tmap(lambda x: x[-1], mbs)
            critic, target, critic_opt, key = carry
            key, ke = jax.random.split(key)
            obs = last["obs"] if rlpd else batch["obs"]
            eps = jax.random.normal(ke, (obs.shape[0], a))

            def actor_loss(p):
                act, logp = tanh_gaussian(p, obs, eps, a)
                q = ens_q(critic, obs, act)
                q = q.mean(0) if rlpd else q.min(0)
                return (alpha[0] * logp - q).mean(), logp

            (a_loss, logp), g = jax.value_and_grad(actor_loss, has_aux=True)(actor)
            actor, actor_opt = adam(actor, g, state["actor_opt"])
            logp = jax.lax.stop_gradient(logp)

            def alpha_loss(la):
                return (-jnp.exp(la) * (logp + target_entropy)).mean()

            al_loss, g = jax.value_and_grad(alpha_loss)(state["log_alpha"])
            log_alpha, alpha_opt = adam(state["log_alpha"], g, state["alpha_opt"])
            new = {"actor": actor, "critic": critic, "target": target, "log_alpha": log_alpha, "key": key,
                   "actor_opt": actor_opt, "critic_opt": critic_opt, "alpha_opt": alpha_opt}
            metrics = {"critic_loss": td, "actor_loss": a_loss, "alpha_loss": al_loss}
            if cql:
                metrics["cql_gap"] = gap
            return new, metrics

        return state, update

    # --- IQL: bench_update_torch.IQL (expectile 0.7, beta 3, exp-weight cap 100, cosine actor LR).
    def iql(spec, key):
        o, a, h = spec["obs_dim"], spec["act_dim"], list(spec["hidden"])
        expectile, beta, max_steps = 0.7, 3.0, 1_000_000
        ka, kc, kv = jax.random.split(key, 3)
        critic = ens_init(kc, 2, [o + a] + h + [1], False)
        state = {"actor": {"net": mlp_init(ka, [o] + h + [a]), "log_std": jnp.zeros((a,))},
                 "critic": critic, "target": copy(critic), "value": mlp_init(kv, [o] + h + [1])}
        for n in ("actor", "critic", "value"):
            state[n + "_opt"] = adam_init(state[n])

        def update(state, b):
            v_fn = lambda p, x: mlp(p, x)[..., 0]
            q_t = ens_q(state["target"], b["obs"], b["action"]).min(0)

            def value_loss(p):
                u = q_t - v_fn(p, b["obs"])
                return (jnp.abs(expectile - (u < 0).astype(u.dtype)) * u**2).mean()

            v_loss, g = jax.value_and_grad(value_loss)(state["value"])
            value, value_opt = adam(state["value"], g, state["value_opt"])
            weight = jnp.minimum(jnp.exp(beta * (q_t - v_fn(value, b["obs"]))), 100.0)
            next_v = v_fn(value, b["next_obs"])

            def actor_loss(p):  # GaussianPolicy: tanh mean, state-independent log_std in [-5, 2]
                mean = jnp.tanh(mlp(p["net"], b["obs"]))
                log_std = jnp.clip(p["log_std"], -5.0, 2.0)
                logp = (-0.5 * ((b["action"] - mean) / jnp.exp(log_std)) ** 2 - log_std - half_log_2pi).sum(-1)
                return -(weight * logp).mean()

            a_loss, g = jax.value_and_grad(actor_loss)(state["actor"])
            t = state["actor_opt"]["t"].astype(jnp.float32)  # CosineAnnealingLR(T_max=max_steps)
            actor, actor_opt = adam(state["actor"], g, state["actor_opt"],
                                    lr * 0.5 * (1.0 + jnp.cos(math.pi * t / max_steps)))
            y = b["reward"] + gamma * (1.0 - b["terminal"]) * next_v

            def critic_loss(c):  # sum over the 2 critics of each one's MSE
                return ((ens_q(c, b["obs"], b["action"]) - y) ** 2).mean(-1).sum()

            c_loss, g = jax.value_and_grad(critic_loss)(state["critic"])
            critic, critic_opt = adam(state["critic"], g, state["critic_opt"])
            new = {"actor": actor, "critic": critic, "target": polyak(state["target"], critic), "value": value,
                   "actor_opt": actor_opt, "critic_opt": critic_opt, "value_opt": value_opt}
            return new, {"value_loss": v_loss, "actor_loss": a_loss, "critic_loss": c_loss}

        return state, update

    return sac_family, iql


def run_jax(args, names):
    if args.device == "cpu" and args.threads:
        cpus = sorted(os.sched_getaffinity(0))[: args.threads]
        os.sched_setaffinity(0, cpus)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_default_matmul_precision", args.jax_precision)
    try:
        dev = jax.devices(args.device)[0]
    except RuntimeError:
        if args.device != "cuda":
            raise
        dev = jax.devices("gpu")[0]
    new_key = getattr(jax.random, "key", jax.random.PRNGKey)
    sac_family, iql = jax_agents(jax, jnp, args.scan_unroll)
    out = {}
    for name in names:
        spec, rows = spec_for(name, args.obs, args.act, args.hidden)
        with jax.default_device(dev):
            state, update = (iql if spec["algo"] == "iql" else sac_family)(spec, new_key(0))
        state = jax.device_put(state, dev)
        batch = jax.device_put(make_batch(rows * args.batch, args.obs, args.act), dev)
        step = jax.jit(update, donate_argnums=0)
        fetch = args.jax_sync == "update"

        t0 = time.perf_counter()
        state, metrics = step(state, batch)
        losses = {k: float(v) for k, v in jax.device_get(metrics).items()}
        compile_s = time.perf_counter() - t0
        check_finite(name, losses)
        for _ in range(args.warmup):
            state, metrics = step(state, batch)
        jax.block_until_ready(state)
        t0 = time.perf_counter()
        for _ in range(args.updates):
            state, metrics = step(state, batch)
            if fetch:  # the host reads the losses every update, like the eager script's .item()
                jax.device_get(metrics)
        jax.block_until_ready((state, metrics))
        dt = time.perf_counter() - t0
        check_finite(name, {k: float(v) for k, v in jax.device_get(metrics).items()})
        out[name] = {"updates_per_s": args.updates / dt, "compile_s": compile_s, "losses": losses,
                     "rows_per_update": rows * args.batch}
        print(f"{name}: {out[name]['updates_per_s']:.1f} up/s, compile {compile_s:.1f} s", file=sys.stderr)
        # What is done so far, should a time limit stop the rest (the last JSON line is read).
        print(json.dumps({"backend": args.backend, "device": args.device, "partial": True, "variants": out}), flush=True)
    import jaxlib
    versions = {"python": platform.python_version(), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                "platform": dev.platform, "device_kind": dev.device_kind, "matmul_precision": args.jax_precision,
                "sync": args.jax_sync, "scan_unroll": args.scan_unroll}
    return versions, out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", required=True, choices=["torch-compile", "torch-eager", "jax"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--variants", default=",".join(NAMES))
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--obs", type=int, default=17)
    p.add_argument("--act", type=int, default=6)
    p.add_argument("--hidden", default="256,256")
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads / cores JAX may use")
    p.add_argument("--mode", default="default", help="torch.compile mode (e.g. reduce-overhead)")
    p.add_argument("--jax-precision", default="highest", choices=["default", "high", "highest"])
    p.add_argument("--jax-sync", default="update", choices=["update", "end"])
    p.add_argument("--scan-unroll", type=int, default=1, help="jax.lax.scan unroll for RLPD's critic steps")
    args = p.parse_args()
    args.hidden = [int(x) for x in args.hidden.split(",")]
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        p.error(f"unknown variants {unknown} (known: {', '.join(NAMES)})")
    versions, variants = (run_jax if args.backend == "jax" else run_torch)(args, names)
    print(json.dumps({"backend": args.backend, "device": args.device, "versions": versions, "variants": variants}))


if __name__ == "__main__":
    main()
