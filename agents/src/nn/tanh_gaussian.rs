//! Tanh-squashed Gaussian policy (SAC; Haarnoja et al. 2018, arXiv 1812.05905, appendix C).
//!
//! `u = μ(s) + σ(s) ε`, `ε ~ N(0, I)`, `a = tanh(u)`, and the change of variables gives
//! `log π(a|s) = Σ_i [ log N(u_i; μ_i, σ_i) − log(1 − tanh²(u_i)) ]`, with the correction written
//! in the overflow-free form `log(1 − tanh² u) = 2 (log 2 − u − softplus(−2u))`.
//! log σ is either a second head of the network ("state-dependent", the SAC default) or one
//! free parameter per action dimension ("state-independent", WSRL's AntMaze actor), clamped to
//! `[log_std_min, log_std_max]`. Shapes: observations `[B, obs]`, actions and `ε` `[B, A]`,
//! log-probabilities `[B]`.

use super::floats::{floats as slice, floats_mut as slice_mut};
use super::mlp_pass::{forward_no_grad, MlpPass};
use super::path;
use super::{Activation, Layer, Mlp, MlpConfig, ParamSet, PolicyGraph};
use crate::rng::AgentRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// `log √(2π)`.
pub const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_7;

/// Tanh-Gaussian actor settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TanhGaussianConfig {
    /// The trunk MLP.
    pub mlp: MlpConfig,
    /// log σ from a network head (true) or a free per-dimension parameter (false).
    pub state_dependent_std: bool,
    /// Lower clamp of log σ.
    pub log_std_min: f64,
    /// Upper clamp of log σ.
    pub log_std_max: f64,
    /// JaxCQL's learnable log-σ affine (FamO2O-CQL): `log σ = m · raw + o` with two learned
    /// scalars, `m` starting at 1 and `o` at `log_std_offset` (state-dependent σ only).
    pub log_std_affine: bool,
    /// The offset `o`'s initial value (JaxCQL: −1).
    pub log_std_offset: f64,
}

impl Default for TanhGaussianConfig {
    fn default() -> Self {
        // log σ ∈ [−20, 2]: the SAC / jaxrl tanh-normal defaults (algorithms.md §6.5).
        Self {
            mlp: MlpConfig::default(),
            state_dependent_std: true,
            log_std_min: -20.0,
            log_std_max: 2.0,
            log_std_affine: false,
            log_std_offset: -1.0,
        }
    }
}

/// π(a|s) = tanh-squashed diagonal Gaussian.
#[derive(Debug)]
pub struct TanhGaussianActor {
    net: Mlp,
    log_std: Option<Tensor>,
    /// `(m, o)` of `log σ = m · raw + o` (`log_std_affine`).
    affine: Option<(Tensor, Tensor)>,
    act_dim: i64,
    cfg: TanhGaussianConfig,
}

impl TanhGaussianActor {
    /// A new actor with parameters under `prefix` in `params`.
    pub fn new(
        params: &mut ParamSet,
        prefix: &str,
        obs_dim: i64,
        act_dim: i64,
        cfg: &TanhGaussianConfig,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let out = if cfg.state_dependent_std { 2 * act_dim } else { act_dim };
        let net = Mlp::new(params, prefix, obs_dim, out, &cfg.mlp, 1.0, rng, device);
        let log_std = (!cfg.state_dependent_std).then(|| {
            params.add(format!("{prefix}/log_std"), Tensor::zeros([act_dim], (Kind::Float, Device::Cpu)), device)
        });
        let affine = (cfg.state_dependent_std && cfg.log_std_affine).then(|| {
            let m = params.add(format!("{prefix}/log_std_mult"), Tensor::from_slice(&[1.0f32]), device);
            let o = params.add(
                format!("{prefix}/log_std_offset"),
                Tensor::from_slice(&[cfg.log_std_offset as f32]),
                device,
            );
            (m, o)
        });
        Self { net, log_std, affine, act_dim, cfg: cfg.clone() }
    }

    /// The output layer's `(weight [hidden, out], bias [out])` (FamO2O's balance head init).
    pub(crate) fn head(&self) -> (&Tensor, &Tensor) {
        let (layers, ..) = self.net.parts();
        let head = layers[layers.len() - 1];
        (&head.weight, &head.bias)
    }

    /// A copy with detached weights, for inference outside training (TorchScript export).
    pub fn detached(&self) -> Self {
        let affine = self.affine.as_ref().map(|(m, o)| (m.detach().copy(), o.detach().copy()));
        Self {
            net: self.net.detached(),
            log_std: self.log_std.as_ref().map(|t| t.detach().copy()),
            affine,
            act_dim: self.act_dim,
            cfg: self.cfg.clone(),
        }
    }

    /// `(μ, log σ)`, each `[B, A]`, log σ clamped.
    pub fn dist(&self, obs: &Tensor, dropout_rng: Option<&mut AgentRng>) -> (Tensor, Tensor) {
        self.dist_of(self.net.forward(obs, dropout_rng))
    }

    /// `(μ, log σ)` from the network's output `out` `[B, A or 2A]`.
    fn dist_of(&self, out: Tensor) -> (Tensor, Tensor) {
        let (mean, log_std) = match &self.log_std {
            None => {
                let parts = out.split(self.act_dim, -1);
                let raw = parts[1].shallow_clone();
                let log_std = match &self.affine {
                    Some((m, o)) => raw * m + o,
                    None => raw,
                };
                (parts[0].shallow_clone(), log_std)
            }
            Some(ls) => {
                let ls = ls.expand_as(&out);
                (out, ls)
            }
        };
        (mean, log_std.clamp(self.cfg.log_std_min, self.cfg.log_std_max))
    }

    /// Reparameterized sample `a = tanh(μ + σ ε)` and its log-probability `[B]`.
    pub fn sample(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        self.sample_repeated(obs, eps, 1)
    }

    /// [`Self::sample`] with `k` draws per state: `obs` is `[B, obs]`, `eps` is `[B·k, A]`, and
    /// row `r` of the output is a draw at state `r / k` — the same as `sample` on
    /// `repeat_interleave(obs, k)`, but the network runs on the `B` states once, not `k` times.
    pub fn sample_repeated(&self, obs: &Tensor, eps: &Tensor, k: i64) -> (Tensor, Tensor) {
        let (mean, log_std) = self.dist(obs, None);
        let (mean, log_std) = if k > 1 {
            (mean.repeat_interleave_self_int(k, 0, None), log_std.repeat_interleave_self_int(k, 0, None))
        } else {
            (mean, log_std)
        };
        draw(&mean, &log_std, eps)
    }

    /// [`Self::sample`] for a training step on the CPU fast path ([`MlpPass`]): `(a, log π, pass)`,
    /// where `pass.grads(loss, params)` gives `∂loss/∂θ` over the actor's parameter set for a
    /// loss of `a` and `log π`.
    pub(crate) fn sample_pass(&self, obs: &Tensor, eps: &Tensor) -> ActorSample {
        let pass = MlpPass::new(&self.net, obs, None);
        // The default head (state-dependent log σ, no affine) on a taped pass: the sample, its
        // log-density and later their gradient in one pass over the rows, without a graph.
        if pass.is_taped() && self.head_fuses(&pass.out, eps) {
            let (out, eps) = (pass.out.detach().contiguous(), eps.contiguous());
            let (a, logp) = self.fused_head(&out, &eps);
            let (lo, hi) = (self.cfg.log_std_min as f32, self.cfg.log_std_max as f32);
            // Leaves, so a loss of them can still be differentiated in them by autograd.
            return ActorSample {
                a: a.set_requires_grad(true),
                log_prob: logp.set_requires_grad(true),
                pass,
                fused: Some((out, eps, lo, hi)),
            };
        }
        let (mean, log_std) = self.dist_of(pass.out.shallow_clone());
        let (a, log_prob) = draw(&mean, &log_std, eps);
        ActorSample { a, log_prob, pass, fused: None }
    }

    /// [`Self::sample`] without gradients, the network on the fused pass where it applies (the
    /// TD target's next actions).
    pub(crate) fn sample_no_grad(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let out = forward_no_grad(&self.net, obs);
            if self.head_fuses(&out, eps) {
                return self.fused_head(&out.contiguous(), &eps.contiguous());
            }
            let (mean, log_std) = self.dist_of(out);
            draw(&mean, &log_std, eps)
        })
    }

    /// Whether the head's fused pass applies: the default head (state-dependent log σ, no
    /// affine) on float32 CPU tensors, the generic path not forced ([`crate::nn::path`]).
    fn head_fuses(&self, out: &Tensor, eps: &Tensor) -> bool {
        let fuses = self.log_std.is_none() && self.affine.is_none() && path::fast_cpu(out) && path::fast_cpu(eps);
        if fuses {
            path::hit();
        }
        fuses
    }

    /// `(a, log π)` from the network's output `[B, 2A]` and `ε` `[B, A]` (both contiguous) in
    /// one pass over the rows, split over libtorch's team.
    fn fused_head(&self, out: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        let rows = out.size()[0];
        let (a, logp) = (
            Tensor::empty([rows, self.act_dim], (Kind::Float, Device::Cpu)),
            Tensor::empty([rows], (Kind::Float, Device::Cpu)),
        );
        let (lo, hi) = (self.cfg.log_std_min as f32, self.cfg.log_std_max as f32);
        assert_eq!(
            (out.size(), eps.size()),
            (vec![rows, 2 * self.act_dim], vec![rows, self.act_dim]),
            "the head's output and noise"
        );
        // SAFETY: contiguous float32 CPU tensors of the shapes just checked (`out` [B, 2A],
        // `eps` and `a` [B, A], `logp` [B]); `a` and `logp` are fresh; the slices end here.
        unsafe {
            head_forward_rows(
                slice(&out.detach()),
                slice(eps),
                slice_mut(&a),
                slice_mut(&logp),
                self.act_dim as usize,
                lo,
                hi,
            )
        };
        (a, logp)
    }

    /// The deterministic action `tanh(μ)` (evaluation).
    pub fn mode(&self, obs: &Tensor) -> Tensor {
        self.dist(obs, None).0.tanh()
    }

    /// [`Self::mode`] as data: the network with the μ half of its head (a state-dependent σ's
    /// half is not needed), then tanh.
    pub fn mode_graph(&self) -> PolicyGraph {
        self.net.graph_of_outputs(self.act_dim).then(Layer::Activation(Activation::Tanh))
    }
}

/// A reparameterized draw for a training step ([`TanhGaussianActor::sample_pass`]).
pub(crate) struct ActorSample {
    /// `a = tanh(μ + σ ε)`, `[B, A]`.
    pub a: Tensor,
    /// `log π(a|s)`, `[B]`.
    pub log_prob: Tensor,
    pass: MlpPass,
    /// The fused head's inputs: the network's output `[B, 2A]`, ε, and the log σ clamp.
    fused: Option<(Tensor, Tensor, f32, f32)>,
}

impl ActorSample {
    /// `∂L/∂θ` over the actor's parameter set `params` for a loss `L` whose gradients in the
    /// draw are `∂L/∂ log π = d_logp` `[B]` and `∂L/∂a = d_a` `[B, A]`. (SAC's actor loss
    /// `E[α log π − Q(s, a)]` has `d_logp = α / B` and `d_a = −∂Q/∂a / B`.)
    pub fn grads(self, d_logp: &Tensor, d_a: &Tensor, params: &ParamSet) -> Vec<Tensor> {
        match self.fused {
            Some((out, eps, lo, hi)) => {
                let (gl, ga) =
                    (d_logp.detach().to_kind(Kind::Float).contiguous(), d_a.detach().to_kind(Kind::Float).contiguous());
                let grad_out = out.empty_like();
                // SAFETY: as in `sample_pass`; `grad_out` is fresh, `[B, 2A]`.
                unsafe {
                    head_backward_rows(
                        slice(&out),
                        slice(&eps),
                        slice(&gl),
                        slice(&ga),
                        slice_mut(&grad_out),
                        ga.size()[1] as usize,
                        lo,
                        hi,
                    )
                };
                self.pass.grads_from_out(&grad_out, params)
            }
            None => {
                let loss =
                    (&self.log_prob * d_logp.detach()).sum(Kind::Float) + (&self.a * d_a.detach()).sum(Kind::Float);
                self.pass.grads(&loss, params)
            }
        }
    }
}

/// The head forward, row by row: `ℓ = clamp(raw, lo, hi)`, `u = μ + e^ℓ ε`, `a = tanh u`,
/// `log π = Σ_i [−ε_i²/2 − ℓ_i − log √(2π) − 2 (log 2 − u_i − softplus(−2 u_i))]`, for `out`
/// `[B, 2A]` = `[μ, raw]` (the formulas of [`draw`], in `f32`).
fn head_forward(out: &[f32], eps: &[f32], a: &mut [f32], logp: &mut [f32], act: usize, lo: f32, hi: f32) {
    for (r, lp) in logp.iter_mut().enumerate() {
        let mut sum = 0f32;
        for i in 0..act {
            let (m, l, e) = (out[r * 2 * act + i], out[r * 2 * act + act + i].clamp(lo, hi), eps[r * act + i]);
            let u = m + l.exp() * e;
            a[r * act + i] = u.tanh();
            sum += e * e * -0.5 - l - LOG_SQRT_2PI as f32 - 2.0 * (std::f32::consts::LN_2 - u - softplus(-2.0 * u));
        }
        *lp = sum;
    }
}

/// The head's backward pass: with `g_u = d_logp · 2 tanh u + d_a (1 − tanh² u)`
/// (`∂ log π/∂u = 2 tanh u`, the derivative of `−log(1 − tanh² u)`), `∂L/∂μ = g_u` and
/// `∂L/∂raw = (g_u e^ℓ ε − d_logp) · 1(lo ≤ raw ≤ hi)` (clamp passes the gradient inside
/// its bounds, as libtorch's does).
#[allow(clippy::too_many_arguments)]
fn head_backward(
    out: &[f32],
    eps: &[f32],
    d_logp: &[f32],
    d_a: &[f32],
    grad: &mut [f32],
    act: usize,
    lo: f32,
    hi: f32,
) {
    for (r, gl) in d_logp.iter().enumerate() {
        for i in 0..act {
            let (m, raw, e) = (out[r * 2 * act + i], out[r * 2 * act + act + i], eps[r * act + i]);
            let sigma = raw.clamp(lo, hi).exp();
            let t = (m + sigma * e).tanh();
            let gu = gl * 2.0 * t + d_a[r * act + i] * (1.0 - t * t);
            grad[r * 2 * act + i] = gu;
            grad[r * 2 * act + act + i] = if (lo..=hi).contains(&raw) { gu * sigma * e - gl } else { 0.0 };
        }
    }
}

/// `log(1 + eˣ)`, as libtorch's softplus (β = 1, linear above 20).
/// Below this many rows the head's passes stay on one thread.
const HEAD_PARALLEL_ROWS: usize = 64;

/// Row ranges for the head's passes: one per thread of libtorch's team (its intra-op count),
/// or one. Each row's values come from the same operations wherever the cuts fall.
fn head_parts(rows: usize) -> Vec<std::ops::Range<usize>> {
    let parts = super::team::pieces(rows, HEAD_PARALLEL_ROWS).min(rows);
    (0..parts).map(|i| rows * i / parts..rows * (i + 1) / parts).collect()
}

/// [`head_forward`] with its rows split over libtorch's team.
fn head_forward_rows(out: &[f32], eps: &[f32], a: &mut [f32], logp: &mut [f32], act: usize, lo: f32, hi: f32) {
    let mut pieces = Vec::new();
    let (mut a, mut logp) = (a, logp);
    for r in head_parts(logp.len()) {
        let (ap, at) = std::mem::take(&mut a).split_at_mut(r.len() * act);
        let (lp, lt) = std::mem::take(&mut logp).split_at_mut(r.len());
        (a, logp) = (at, lt);
        pieces.push((&out[r.start * 2 * act..r.end * 2 * act], &eps[r.start * act..r.end * act], ap, lp));
    }
    super::team::run(pieces, |(o, e, a, lp)| head_forward(o, e, a, lp, act, lo, hi));
}

/// [`head_backward`] with its rows split over libtorch's team.
#[allow(clippy::too_many_arguments)]
fn head_backward_rows(
    out: &[f32],
    eps: &[f32],
    d_logp: &[f32],
    d_a: &[f32],
    grad: &mut [f32],
    act: usize,
    lo: f32,
    hi: f32,
) {
    let mut pieces = Vec::new();
    let mut grad = grad;
    for r in head_parts(d_logp.len()) {
        let (gp, gt) = std::mem::take(&mut grad).split_at_mut(r.len() * 2 * act);
        grad = gt;
        pieces.push((
            &out[r.start * 2 * act..r.end * 2 * act],
            &eps[r.start * act..r.end * act],
            &d_logp[r.clone()],
            &d_a[r.start * act..r.end * act],
            gp,
        ));
    }
    super::team::run(pieces, |(o, e, gl, ga, g)| head_backward(o, e, gl, ga, g, act, lo, hi));
}

fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// `a = tanh(u)` with `u = μ + σ ε`, and `log π(a)` ([`tanh_gaussian_log_prob`]).
fn draw(mean: &Tensor, log_std: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
    let u = mean + log_std.exp() * eps;
    let log_prob = tanh_gaussian_log_prob(&u, eps, log_std);
    (u.tanh(), log_prob)
}

/// `log π(tanh u)` for `u = μ + σ ε`:
/// `Σ_i [−ε_i²/2 − log σ_i − log √(2π) − 2 (log 2 − u_i − softplus(−2 u_i))]`, shape `[B]`.
pub fn tanh_gaussian_log_prob(u: &Tensor, eps: &Tensor, log_std: &Tensor) -> Tensor {
    let gauss = eps.square() * (-0.5) - log_std - LOG_SQRT_2PI;
    let correction = (-u + std::f64::consts::LN_2 - (u * -2.0).softplus()) * 2.0;
    (gauss - correction).sum_dim_intlist(-1, false, Kind::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The analytic log-density matches the change of variables p_A(a) = N(atanh a; μ, σ) / (1 − a²)
    /// pointwise on a grid, and integrates to 1 over (−1, 1).
    #[test]
    fn log_prob_matches_numeric_change_of_variables() {
        let (mu, log_std) = (0.3f64, -0.4f64);
        let sigma = log_std.exp();
        let n = 20_000usize;
        let grid: Vec<f64> = (0..n).map(|k| -1.0 + (k as f64 + 0.5) * 2.0 / n as f64).collect();
        let u: Vec<f32> = grid.iter().map(|a| a.atanh() as f32).collect();
        let eps: Vec<f32> = grid.iter().map(|a| ((a.atanh() - mu) / sigma) as f32).collect();
        let n = n as i64;
        let ours = tanh_gaussian_log_prob(
            &Tensor::from_slice(&u).view([n, 1]),
            &Tensor::from_slice(&eps).view([n, 1]),
            &Tensor::full([n, 1], log_std, (Kind::Float, Device::Cpu)),
        );
        let ours = Vec::<f32>::try_from(&ours).unwrap();
        let mut integral = 0.0;
        for (a, lp) in grid.iter().zip(&ours) {
            let e = (a.atanh() - mu) / sigma;
            // p_A(a) = N(atanh a; μ, σ) / (1 − a²).
            let reference = (-0.5 * e * e).exp() / (sigma * (2.0 * std::f64::consts::PI).sqrt()) / (1.0 - a * a);
            if a.abs() < 0.99 {
                assert!((*lp as f64 - reference.ln()).abs() < 1e-4, "a={a}: {lp} vs {}", reference.ln());
            }
            integral += (*lp as f64).exp() * 2.0 / n as f64;
        }
        assert!((integral - 1.0).abs() < 1e-3, "density integrates to {integral}");
    }

    /// The fused head (sample, log-density and their gradient in one pass) equals autograd
    /// through the tensor formulas, weights' gradients included, with log σ clamped on some
    /// entries (large observations and a narrow clamp put `raw` past its bounds on some).
    #[test]
    fn fused_head_matches_autograd() {
        let mut p = ParamSet::new();
        let mut rng = AgentRng::new(4);
        let cfg = TanhGaussianConfig { log_std_min: -1.0, log_std_max: 0.5, ..Default::default() };
        let actor = TanhGaussianActor::new(&mut p, "actor", 5, 3, &cfg, &mut rng, Device::Cpu);
        let obs = rng.normal(&[64, 5], Device::Cpu) * 3.0;
        let eps = rng.normal(&[64, 3], Device::Cpu);
        let (d_logp, d_a) = (rng.normal(&[64], Device::Cpu), rng.normal(&[64, 3], Device::Cpu));
        let (want_a, want_lp) = actor.sample(&obs, &eps);
        let loss = (&want_lp * &d_logp).sum(Kind::Float) + (&want_a * &d_a).sum(Kind::Float);
        let want = Tensor::run_backward(&[loss], &p.tensors(), false, false);
        let raw = tch::no_grad(|| actor.net.forward(&obs, None)).narrow(1, 3, 3);
        let outside = raw.lt(-1.0).logical_or(&raw.gt(0.5)).to_kind(Kind::Float).mean(Kind::Float).double_value(&[]);
        assert!(outside > 0.05 && outside < 0.95, "the clamp binds on {outside} of the entries");
        let draw = actor.sample_pass(&obs, &eps);
        assert!(draw.fused.is_some());
        let close = |x: &Tensor, y: &Tensor, what: &str| {
            let d = (x - y).abs().max().double_value(&[]);
            assert!(d < 1e-5 * (1.0 + y.abs().max().double_value(&[])), "{what}: {d}");
        };
        close(&draw.a, &want_a, "a");
        close(&draw.log_prob, &want_lp, "log π");
        // The no-gradient draw (the TD target's) takes the same fused head.
        let (a, lp) = actor.sample_no_grad(&obs, &eps);
        assert!(!a.requires_grad() && a.equal(&draw.a.detach()) && lp.equal(&draw.log_prob.detach()));
        let got = draw.grads(&d_logp, &d_a, &p);
        for ((g, w), (name, _)) in got.iter().zip(&want).zip(p.named()) {
            close(g, w, name);
        }
    }

    /// The head's passes split over the team's rows give the one-pass bits.
    #[test]
    fn row_split_head_passes_equal_one_pass() {
        let (rows, act) = (301usize, 6usize);
        let v = |n: usize, seed: u64| AgentRng::new(seed).normal_vec(n);
        let (out, eps, gl, ga) = (v(rows * 2 * act, 1), v(rows * act, 2), v(rows, 3), v(rows * act, 4));
        let (mut a1, mut l1, mut a2, mut l2) =
            (vec![0f32; rows * act], vec![0f32; rows], vec![0f32; rows * act], vec![0f32; rows]);
        head_forward(&out, &eps, &mut a1, &mut l1, act, -1.0, 0.5);
        head_forward_rows(&out, &eps, &mut a2, &mut l2, act, -1.0, 0.5);
        assert!(a1 == a2 && l1 == l2);
        let (mut g1, mut g2) = (vec![0f32; rows * 2 * act], vec![0f32; rows * 2 * act]);
        head_backward(&out, &eps, &gl, &ga, &mut g1, act, -1.0, 0.5);
        head_backward_rows(&out, &eps, &gl, &ga, &mut g2, act, -1.0, 0.5);
        assert!(g1 == g2 && g1.iter().any(|g| *g != 0.0));
    }

    #[test]
    fn shapes_and_bounds_both_std_forms() {
        for sd in [true, false] {
            let mut p = ParamSet::new();
            let mut rng = AgentRng::new(1);
            let cfg = TanhGaussianConfig { state_dependent_std: sd, ..Default::default() };
            let actor = TanhGaussianActor::new(&mut p, "actor", 17, 6, &cfg, &mut rng, Device::Cpu);
            let obs = rng.normal(&[9, 17], Device::Cpu) * 10.0;
            let eps = rng.normal(&[9, 6], Device::Cpu) * 5.0;
            let (a, lp) = actor.sample(&obs, &eps);
            assert_eq!(a.size(), vec![9, 6]);
            assert_eq!(lp.size(), vec![9]);
            assert!(a.abs().max().double_value(&[]) <= 1.0);
            assert!(lp.isfinite().all().int64_value(&[]) == 1);
            assert_eq!(actor.mode(&obs).size(), vec![9, 6]);
            assert_eq!(p.named().iter().any(|(n, _)| n == "actor/log_std"), !sd);
        }
    }
}
