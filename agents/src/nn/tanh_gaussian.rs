//! Tanh-squashed Gaussian policy (SAC; Haarnoja et al. 2018, arXiv 1812.05905, appendix C).
//!
//! `u = μ(s) + σ(s) ε`, `ε ~ N(0, I)`, `a = tanh(u)`, and the change of variables gives
//! `log π(a|s) = Σ_i [ log N(u_i; μ_i, σ_i) − log(1 − tanh²(u_i)) ]`, with the correction written
//! in the overflow-free form `log(1 − tanh² u) = 2 (log 2 − u − softplus(−2u))`.
//! log σ is either a second head of the network ("state-dependent", the SAC default) or one
//! free parameter per action dimension ("state-independent", WSRL's AntMaze actor), clamped to
//! `[log_std_min, log_std_max]`. Shapes: observations `[B, obs]`, actions and `ε` `[B, A]`,
//! log-probabilities `[B]`.

use super::mlp_pass::{forward_no_grad, MlpPass};
use super::{Mlp, MlpConfig, ParamSet};
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
        Self { mlp: MlpConfig::default(), state_dependent_std: true, log_std_min: -20.0, log_std_max: 2.0, log_std_affine: false, log_std_offset: -1.0 }
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
    pub fn new(params: &mut ParamSet, prefix: &str, obs_dim: i64, act_dim: i64, cfg: &TanhGaussianConfig, rng: &mut AgentRng, device: Device) -> Self {
        let out = if cfg.state_dependent_std { 2 * act_dim } else { act_dim };
        let net = Mlp::new(params, prefix, obs_dim, out, &cfg.mlp, 1.0, rng, device);
        let log_std = (!cfg.state_dependent_std).then(|| params.add(format!("{prefix}/log_std"), Tensor::zeros([act_dim], (Kind::Float, Device::Cpu)), device));
        let affine = (cfg.state_dependent_std && cfg.log_std_affine).then(|| {
            let m = params.add(format!("{prefix}/log_std_mult"), Tensor::from_slice(&[1.0f32]), device);
            let o = params.add(format!("{prefix}/log_std_offset"), Tensor::from_slice(&[cfg.log_std_offset as f32]), device);
            (m, o)
        });
        Self { net, log_std, affine, act_dim, cfg: cfg.clone() }
    }

    /// A copy with detached weights, for inference outside training (TorchScript export).
    pub fn detached(&self) -> Self {
        let affine = self.affine.as_ref().map(|(m, o)| (m.detach().copy(), o.detach().copy()));
        Self { net: self.net.detached(), log_std: self.log_std.as_ref().map(|t| t.detach().copy()), affine, act_dim: self.act_dim, cfg: self.cfg.clone() }
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
        let (mean, log_std) = if k > 1 { (mean.repeat_interleave_self_int(k, 0, None), log_std.repeat_interleave_self_int(k, 0, None)) } else { (mean, log_std) };
        draw(&mean, &log_std, eps)
    }

    /// [`Self::sample`] for a training step on the CPU fast path ([`MlpPass`]): `(a, log π, pass)`,
    /// where `pass.grads(loss, params)` gives `∂loss/∂θ` over the actor's parameter set for a
    /// loss of `a` and `log π`.
    pub(crate) fn sample_pass(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor, MlpPass) {
        let pass = MlpPass::new(&self.net, obs, None);
        let (mean, log_std) = self.dist_of(pass.out.shallow_clone());
        let (a, log_prob) = draw(&mean, &log_std, eps);
        (a, log_prob, pass)
    }

    /// [`Self::sample`] without gradients, the network on the fused pass where it applies (the
    /// TD target's next actions).
    pub(crate) fn sample_no_grad(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let (mean, log_std) = self.dist_of(forward_no_grad(&self.net, obs));
            draw(&mean, &log_std, eps)
        })
    }

    /// The deterministic action `tanh(μ)` (evaluation).
    pub fn mode(&self, obs: &Tensor) -> Tensor {
        self.dist(obs, None).0.tanh()
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
        let ours = tanh_gaussian_log_prob(&Tensor::from_slice(&u).view([n, 1]), &Tensor::from_slice(&eps).view([n, 1]), &Tensor::full([n, 1], log_std, (Kind::Float, Device::Cpu)));
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
