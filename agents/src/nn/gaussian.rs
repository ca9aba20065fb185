//! Gaussian policy with a tanh'd mean (IQL / AWAC style; Kostrikov et al. 2022, arXiv 2110.06169).
//!
//! `π(a|s) = N(a; tanh(μ(s)), σ²)` with a state-independent `log σ` (one parameter per action
//! dimension, clamped to `[log_std_min, log_std_max]`). The density is evaluated at dataset
//! actions for advantage-weighted regression, so no tanh change of variables is involved; the
//! deterministic action is `tanh(μ(s))` and a stochastic one is clipped to `[-1, 1]`.

use super::mlp_pass::MlpPass;
use super::path;
use super::{tanh_gaussian::LOG_SQRT_2PI, Activation, Layer, Mlp, MlpConfig, ParamSet, PolicyGraph};
use crate::rng::AgentRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Gaussian actor settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GaussianConfig {
    /// The mean network.
    pub mlp: MlpConfig,
    /// Lower clamp of log σ (−5 in the IQL reference code).
    pub log_std_min: f64,
    /// Upper clamp of log σ.
    pub log_std_max: f64,
    /// Squash the mean through tanh (IQL, Uni-O4); `false` leaves it linear (CleanRL's PPO,
    /// whose env clips the sampled action).
    #[serde(skip_serializing_if = "is_true")]
    pub squash_mean: bool,
    /// Orthogonal gain of the mean's output layer (CleanRL's PPO: 0.01, so the first actions
    /// are near 0).
    #[serde(skip_serializing_if = "is_one")]
    pub head_gain: f64,
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

impl Default for GaussianConfig {
    fn default() -> Self {
        Self { mlp: MlpConfig::default(), log_std_min: -5.0, log_std_max: 2.0, squash_mean: true, head_gain: 1.0 }
    }
}

/// π(a|s) = N(tanh μ(s), σ²).
#[derive(Debug)]
pub struct GaussianActor {
    net: Mlp,
    log_std: Tensor,
    cfg: GaussianConfig,
}

impl GaussianActor {
    /// A new actor with parameters under `prefix` in `params`.
    pub fn new(
        params: &mut ParamSet,
        prefix: &str,
        obs_dim: i64,
        act_dim: i64,
        cfg: &GaussianConfig,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let net = Mlp::new(params, prefix, obs_dim, act_dim, &cfg.mlp, cfg.head_gain, rng, device);
        let log_std =
            params.add(format!("{prefix}/log_std"), Tensor::zeros([act_dim], (Kind::Float, Device::Cpu)), device);
        Self { net, log_std, cfg: cfg.clone() }
    }

    /// A copy with detached weights, for inference outside training (TorchScript export).
    pub fn detached(&self) -> Self {
        Self { net: self.net.detached(), log_std: self.log_std.detach().copy(), cfg: self.cfg.clone() }
    }

    /// The mean `tanh(μ(s))` (or `μ(s)` without `squash_mean`), `[B, A]` (also the
    /// deterministic action).
    pub fn mean(&self, obs: &Tensor, dropout_rng: Option<&mut AgentRng>) -> Tensor {
        let mu = self.net.forward(obs, dropout_rng);
        if self.cfg.squash_mean {
            mu.tanh()
        } else {
            mu
        }
    }

    /// [`Self::mean`] as data: the network, then tanh with `squash_mean`.
    pub fn mean_graph(&self) -> PolicyGraph {
        let graph = self.net.graph();
        match self.cfg.squash_mean {
            true => graph.then(Layer::Activation(Activation::Tanh)),
            false => graph,
        }
    }

    /// The network computing the mean (before any tanh).
    pub fn net(&self) -> &Mlp {
        &self.net
    }

    /// The log σ parameter itself (unclamped), `[A]`.
    pub fn log_std_param(&self) -> &Tensor {
        &self.log_std
    }

    /// `log π(a|s)` `[B]` for a mean `[B, A]` already computed (one forward pass shared with
    /// the entropy or the action).
    pub fn log_prob_at(&self, mean: &Tensor, action: &Tensor) -> Tensor {
        let log_std = self.log_std();
        let z = (action - mean) * (-&log_std).exp();
        (z.square() * (-0.5) - log_std - LOG_SQRT_2PI).sum_dim_intlist(-1, false, Kind::Float)
    }

    /// The entropy `H = Σ_i (½ + log √(2π) + log σ_i)` (state-independent σ: a scalar).
    pub fn entropy(&self) -> Tensor {
        (self.log_std() + 0.5 + LOG_SQRT_2PI).sum(Kind::Float)
    }

    /// Clamped log σ, `[A]`.
    pub fn log_std(&self) -> Tensor {
        self.log_std.clamp(self.cfg.log_std_min, self.cfg.log_std_max)
    }

    /// `log π(a|s) = Σ_i [−(a_i − m_i)² / (2σ_i²) − log σ_i − log √(2π)]`, shape `[B]`.
    pub fn log_prob(&self, obs: &Tensor, action: &Tensor, dropout_rng: Option<&mut AgentRng>) -> Tensor {
        let mean = self.mean(obs, dropout_rng);
        self.log_prob_at(&mean, action)
    }

    /// [`Self::log_prob`] for a training step on the CPU fast path ([`MlpPass`]): `(log π, pass)`,
    /// where `pass.grads(loss, params)` gives `∂loss/∂θ` over the actor's parameter set
    /// (log σ included) for a loss of `log π`.
    pub(crate) fn log_prob_pass(
        &self,
        obs: &Tensor,
        action: &Tensor,
        dropout_rng: Option<&mut AgentRng>,
    ) -> (Tensor, MlpPass) {
        let pass = MlpPass::new(&self.net, obs, dropout_rng);
        let mean = if self.cfg.squash_mean { pass.out.tanh() } else { pass.out.shallow_clone() };
        (self.log_prob_at(&mean, action), pass)
    }

    /// The advantage-weighted log-likelihood loss `L = −(1/B) Σ_b w_b log π(a_b|s_b)` (IQL's and
    /// AWR's actor step) and its gradients: `(L, the gradients of the actor's parameter set
    /// `params` in order)`. In closed form on the CPU fast path
    /// ([`GaussianActor::weighted_nll_closed_form`]), else autograd on
    /// [`GaussianActor::log_prob_pass`] with dropout drawn from `rng` (the reference).
    pub(crate) fn weighted_nll_step(
        &self,
        obs: &Tensor,
        action: &Tensor,
        weight: &Tensor,
        params: &ParamSet,
        rng: &mut AgentRng,
    ) -> (Tensor, Vec<Tensor>) {
        if let Some(done) = self.weighted_nll_closed_form(obs, action, weight, params) {
            return done;
        }
        let (logp, pass) = self.log_prob_pass(obs, action, Some(rng));
        let loss = -(weight * logp).mean(Kind::Float);
        let grads = pass.grads(&loss, params);
        (loss, grads)
    }

    /// [`GaussianActor::weighted_nll_step`] on the CPU fast path, with its gradients in closed
    /// form, one pass over the rows and no graph: for `z = (a − m) e^{−log σ}`,
    /// `∂L/∂m = −(w/B) z e^{−log σ}` (times `1 − m²` through the tanh of the mean) and
    /// `∂L/∂ log σ = −Σ_b (w_b/B) (z² − 1)` where the clamp passes it; `None` (having drawn
    /// nothing) where the taped pass does not apply.
    fn weighted_nll_closed_form(
        &self,
        obs: &Tensor,
        action: &Tensor,
        weight: &Tensor,
        params: &ParamSet,
    ) -> Option<(Tensor, Vec<Tensor>)> {
        let fast = [action, weight, &self.log_std].into_iter().all(path::fast_cpu);
        if !(fast && MlpPass::applies(&self.net, obs)) {
            return None;
        }
        path::hit();
        let pass = MlpPass::new(&self.net, obs, None);
        let (rows, act) = (action.size()[0] as usize, action.size()[1] as usize);
        let out = Vec::<f32>::try_from(pass.out.detach().contiguous().view([-1])).ok()?;
        let a = Vec::<f32>::try_from(action.detach().contiguous().view([-1])).ok()?;
        let w = Vec::<f32>::try_from(weight.detach().contiguous().view([-1])).ok()?;
        let raw = Vec::<f32>::try_from(self.log_std.detach().contiguous()).ok()?;
        let (lo, hi) = (self.cfg.log_std_min as f32, self.cfg.log_std_max as f32);
        let log_std: Vec<f32> = raw.iter().map(|l| l.clamp(lo, hi)).collect();
        let inv_std: Vec<f32> = log_std.iter().map(|l| (-l).exp()).collect();
        let (mut grad_out, mut grad_ls, mut loss) = (vec![0f32; rows * act], vec![0f32; act], 0f64);
        for r in 0..rows {
            let g = -w[r] / rows as f32; // ∂L/∂ log π(a_r|s_r)
            let mut logp = 0f32;
            for i in 0..act {
                let o = out[r * act + i];
                let m = if self.cfg.squash_mean { o.tanh() } else { o };
                let z = (a[r * act + i] - m) * inv_std[i];
                logp += z * z * -0.5 - log_std[i] - LOG_SQRT_2PI as f32;
                let dm = g * z * inv_std[i];
                grad_out[r * act + i] = if self.cfg.squash_mean { dm * (1.0 - m * m) } else { dm };
                grad_ls[i] += g * (z * z - 1.0);
            }
            loss += (g * logp) as f64;
        }
        for (gl, l) in grad_ls.iter_mut().zip(&raw) {
            if !(lo..=hi).contains(l) {
                *gl = 0.0;
            }
        }
        let grad_out = Tensor::from_slice(&grad_out).view([rows as i64, act as i64]);
        let grad_ls = Tensor::from_slice(&grad_ls);
        Some((Tensor::from(loss as f32), pass.grads_from_out_and(&grad_out, params, vec![grad_ls])))
    }

    /// A reparameterized sample `tanh μ + σ ε`, not clipped (differentiable everywhere: a loss
    /// that backpropagates through the action, FamO2O's balance model).
    pub fn rsample(&self, obs: &Tensor, eps: &Tensor) -> Tensor {
        self.mean(obs, None) + self.log_std().exp() * eps
    }

    /// A sample `clip(tanh μ + σ ε, −1, 1)`.
    pub fn sample(&self, obs: &Tensor, eps: &Tensor) -> Tensor {
        (self.mean(obs, None) + self.log_std().exp() * eps).clamp(-1.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed-form weighted log-likelihood step equals autograd's loss and gradients,
    /// with and without the tanh on the mean, with the log σ clamp binding on one dimension.
    #[test]
    fn weighted_nll_step_matches_autograd() {
        for squash_mean in [true, false] {
            let mut p = ParamSet::new();
            let mut rng = AgentRng::new(3);
            let cfg = GaussianConfig {
                squash_mean,
                log_std_min: -1.0,
                log_std_max: 0.5,
                mlp: MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() },
                ..GaussianConfig::default()
            };
            let actor = GaussianActor::new(&mut p, "actor", 5, 3, &cfg, &mut rng, Device::Cpu);
            tch::no_grad(|| actor.log_std.shallow_clone().copy_(&Tensor::from_slice(&[-0.4f32, 0.9, -2.0])));
            let obs = rng.normal(&[40, 5], Device::Cpu);
            let act = (rng.normal(&[40, 3], Device::Cpu) * 0.5).tanh();
            let w = rng.normal(&[40], Device::Cpu).exp();
            let want_loss = -(&w * actor.log_prob(&obs, &act, None)).mean(Kind::Float);
            let want = Tensor::run_backward(&[&want_loss], &p.tensors(), false, false);
            let (loss, got) = actor.weighted_nll_closed_form(&obs, &act, &w, &p).expect("the taped pass applies");
            assert!(
                (loss.double_value(&[]) - want_loss.double_value(&[])).abs()
                    < 1e-5 * (1.0 + want_loss.double_value(&[]).abs())
            );
            assert_eq!(got.len(), want.len());
            for ((g, w), (name, _)) in got.iter().zip(&want).zip(p.named()) {
                let d = (g - w).abs().max().double_value(&[]);
                assert!(d < 1e-5 * (1.0 + w.abs().max().double_value(&[])), "{name} (squash {squash_mean}): {d}");
            }
            // The clamped dimensions (0.9 > 0.5, −2 < −1) get no log σ gradient.
            let gl = &got[got.len() - 1];
            assert!(gl.double_value(&[0]) != 0.0 && gl.double_value(&[1]) == 0.0 && gl.double_value(&[2]) == 0.0);
        }
    }

    #[test]
    fn log_prob_matches_closed_form() {
        let mut p = ParamSet::new();
        let mut rng = AgentRng::new(2);
        let actor = GaussianActor::new(&mut p, "actor", 3, 2, &GaussianConfig::default(), &mut rng, Device::Cpu);
        tch::no_grad(|| actor.log_std.shallow_clone().copy_(&Tensor::from_slice(&[-0.5f32, 0.2])));
        let obs = rng.normal(&[4, 3], Device::Cpu);
        let act = rng.normal(&[4, 2], Device::Cpu).tanh();
        let lp = actor.log_prob(&obs, &act, None);
        let mean = actor.mean(&obs, None);
        for b in 0..4 {
            let mut want = 0.0;
            for (i, ls) in [-0.5f64, 0.2].iter().enumerate() {
                let (a, m) = (act.double_value(&[b, i as i64]), mean.double_value(&[b, i as i64]));
                let s = ls.exp();
                want += -((a - m) / s).powi(2) / 2.0 - ls - 0.5 * (2.0 * std::f64::consts::PI).ln();
            }
            assert!((lp.double_value(&[b]) - want).abs() < 1e-5);
        }
        let a = actor.sample(&obs, &(rng.normal(&[4, 2], Device::Cpu) * 100.0));
        assert!(a.abs().max().double_value(&[]) <= 1.0);
    }
}
