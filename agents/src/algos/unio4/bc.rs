//! Uni-O4's policy ensemble: behaviour cloning of `n = 4` Gaussian policies
//! (`BC_ensemble.py joint_train`), then multi-step BPPO improvement of each member
//! (`abppo.py joint_train`), all `n` as one batched module ([`EnsembleMlp`], weights
//! `[n, in, out]`; log σ `[n, 1, A]`, state-independent, clamped to `[−5, 0]`).
//!
//! **BC** (every member sees the same minibatch of dataset pairs `(s, a)`):
//! - `heuristic` (the default): `L_i = −log π_i(a|s) − α (log π_i(a|s) − sg[max_{j≠i} log π_j(a|s)])`.
//!   The max is stop-gradient, so `∇L_i = −(1 + α) ∇log π_i`: the term only rescales the BC
//!   gradient, and under Adam (invariant to a constant gradient scale) α = 0.1 trains the same
//!   networks as α = 0 up to ε — diversity comes from independent initialization alone
//!   (algorithms-next.md §1.1 item 4; tested below);
//! - `distribution`: `L_i = −log π_i(a|s) − α KL(π_i(·|s) ‖ sg[π_{j*}(·|s)])`, `j*` the most
//!   likely other member per row: a real repulsion between members.
//!
//! **BPPO** per member, step t of T, on 512 states: `a ~ π_i^old(·|s)`,
//! `A_i = min_j Q_j(s, a) − V(s)` standardized over the batch (mean, std + 1e-10),
//! `L_i = −E[min(ρ A_i, clip(ρ, 1 − ε_t, 1 + ε_t) A_i)]`, `ρ = π_i(a|s) / π_i^old(a|s)`;
//! `ε_t = ε₀ (1 − min(t, 200) / T)`, each member's gradient norm clipped to 0.5 on its own.
//! `π_i^old ← π_i` only when AM-Q says member i improved ([`PolicyEnsemble::accept`]).
//! - The learning rate of step t (0-based) is `lr₀ (1 − max(t − 1, 0) / T)`. The official
//!   `main.py` sets `lr₀ (1 − t / T)` *after* step t, so step 0 and step 1 both run at lr₀
//!   (fidelity-audit-2 E5).
//! - BPPO starts from a fresh Adam: zero moments, step count 0. The official code builds one
//!   optimizer per member for BPPO and loads only the BC weights into it (fidelity-audit-2 E2).
//!   Here the ensemble's single Adam is reset before BPPO's first step. Adam is elementwise and
//!   the members' step counts are equal, so this is the same as n fresh per-member optimizers.
//!   The reset happens whether BC ran in this process or a cached BC stage was loaded. A run
//!   resumed inside BPPO (step > 0) restores BPPO's own Adam from its checkpoint.

use super::Data;
use crate::checkpoint::{Checkpoint, Part, Stateful};
use crate::nn::{EnsembleMlp, Frozen, GaussianConfig, MlpConfig, ParamSet, Trained};
use crate::ppo::clipped_surrogate;
use crate::rng::AgentRng;
use crate::{AgentError, Metrics};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// `log √(2π)`.
const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_7;

/// The ensemble BC loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BcLoss {
    /// `−log π_i − α (log π_i − sg[max_{j≠i} log π_j])` (the code's default; a rescaled BC).
    #[default]
    Heuristic,
    /// `−log π_i − α KL(π_i ‖ sg[π_{j*}])`.
    Distribution,
}

/// Policy-ensemble settings (official locomotion defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Each member (3×256, tanh'd mean; tanh hidden layers for halfcheetah-m/-mr).
    pub actor: GaussianConfig,
    /// Members n.
    pub members: i64,
    /// BC steps (4e5).
    pub bc_steps: u64,
    /// BC learning rate (1e-4).
    pub bc_lr: f64,
    /// Rows per BC and BPPO step (512).
    pub batch_size: usize,
    /// α_bc (0.1).
    pub alpha_bc: f64,
    /// Which BC loss.
    pub bc_loss: BcLoss,
    /// BPPO steps T (1e4).
    pub bppo_steps: u64,
    /// BPPO learning rate lr₀ (1e-4).
    pub bppo_lr: f64,
    /// Initial clip ε₀ (0.25).
    pub clip: f64,
    /// The clip decays only for the first this-many steps (200).
    pub clip_decay_steps: u64,
    /// Each member's gradient-norm clip (0.5).
    pub max_grad_norm: f64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            actor: GaussianConfig {
                mlp: MlpConfig { hidden: vec![256, 256, 256], ..MlpConfig::default() },
                log_std_min: -5.0,
                log_std_max: 0.0,
                squash_mean: true,
                head_gain: 1.0,
            },
            members: 4,
            bc_steps: 400_000,
            bc_lr: 1e-4,
            batch_size: 512,
            alpha_bc: 0.1,
            bc_loss: BcLoss::Heuristic,
            bppo_steps: 10_000,
            bppo_lr: 1e-4,
            clip: 0.25,
            clip_decay_steps: 200,
            max_grad_norm: 0.5,
        }
    }
}

impl PolicyConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.members < 2 {
            return Err(AgentError::Config(format!(
                "unio4.policy.members must be ≥ 2 (the BC loss compares members), found {}",
                self.members
            )));
        }
        if !self.actor.squash_mean || self.actor.mlp.dropout != 0.0 || self.actor.mlp.layer_norm {
            return Err(AgentError::Config(
                "unio4.policy.actor: a tanh'd mean (squash_mean = true), no dropout, no layer norm".into(),
            ));
        }
        if self.batch_size == 0 || !(self.clip > 0.0) || !(self.max_grad_norm > 0.0) {
            return Err(AgentError::Config("unio4.policy: batch_size ≥ 1, clip > 0 and max_grad_norm > 0".into()));
        }
        Ok(())
    }

    /// `ε_t = ε₀ (1 − min(t, decay) / T)`.
    pub fn clip_at(&self, t: u64) -> f64 {
        self.clip * (1.0 - t.min(self.clip_decay_steps) as f64 / self.bppo_steps.max(1) as f64)
    }
}

/// `n` Gaussian policies `π_i(a|s) = N(tanh μ_i(s), σ_i²)` as one module.
struct Members {
    net: EnsembleMlp,
    log_std: Tensor,
}

impl Members {
    #[allow(clippy::too_many_arguments)]
    fn new(
        params: &mut ParamSet,
        prefix: &str,
        cfg: &PolicyConfig,
        obs_dim: i64,
        act_dim: i64,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let net = EnsembleMlp::new(
            params,
            prefix,
            cfg.members,
            obs_dim,
            act_dim,
            &cfg.actor.mlp,
            cfg.actor.head_gain,
            rng,
            device,
        );
        let log_std = params.add(
            format!("{prefix}/log_std"),
            Tensor::zeros([cfg.members, 1, act_dim], (Kind::Float, device)),
            device,
        );
        Self { net, log_std }
    }

    /// `tanh μ_i(s)` `[n, B, A]`.
    fn mean(&self, s: &Tensor) -> Tensor {
        self.net.forward(s, None).tanh()
    }

    fn log_std(&self, cfg: &GaussianConfig) -> Tensor {
        self.log_std.clamp(cfg.log_std_min, cfg.log_std_max)
    }

    /// `log π_i(a|s)` `[n, B]` for `a` `[B, A]` (shared) or `[n, B, A]`.
    fn log_prob(&self, mean: &Tensor, a: &Tensor, cfg: &GaussianConfig) -> Tensor {
        let ls = self.log_std(cfg);
        let z = (a - mean) * (-&ls).exp();
        (z.square() * (-0.5) - ls - LOG_SQRT_2PI).sum_dim_intlist(-1, false, Kind::Float)
    }
}

/// The policy ensemble: π (trained), π_old (BPPO's behaviour policy), their optimizer.
pub struct PolicyEnsemble {
    cfg: PolicyConfig,
    pi: Trained<Members>,
    old: Frozen<Members>,
    rng: AgentRng,
    act_dim: i64,
    /// BC steps then BPPO steps done.
    bc_step: i64,
    bppo_step: i64,
}

/// `max_{j≠i} x_j` for every `i`: `x` `[n, B]` → `[n, B]`.
fn max_of_others(x: &Tensor) -> Tensor {
    let n = x.size()[0];
    let eye = Tensor::eye(n, (Kind::Bool, x.device())).unsqueeze(-1);
    x.unsqueeze(0).expand([n, n, x.size()[1]], false).masked_fill(&eye, f64::NEG_INFINITY).amax(1, false)
}

/// Scale each member's slice of `grads` (every tensor `[n, …]`) so that member's joint L2 norm
/// is at most `max`; returns the norms before.
fn clip_per_member(grads: &mut [Tensor], n: i64, max: f64) -> Tensor {
    tch::no_grad(|| {
        let sq = grads
            .iter()
            .map(|g| g.square().reshape([n, -1]).sum_dim_intlist(1, false, Kind::Float))
            .fold(Tensor::zeros([n], (Kind::Float, grads[0].device())), |a, b| a + b);
        let norm = sq.sqrt();
        let scale = (max / (&norm + 1e-6)).clamp_max(1.0);
        for g in grads.iter_mut() {
            let mut shape = vec![n];
            shape.extend(std::iter::repeat_n(1, g.dim() - 1));
            let _ = g.g_mul_(&scale.view(shape.as_slice()));
        }
        norm
    })
}

impl PolicyEnsemble {
    /// Fresh members (independent initializations), π_old = π.
    pub fn new(cfg: PolicyConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        crate::algos::prepare("unio4-policy", obs_dim, act_dim, device)?;
        let mut rng = AgentRng::new(seed);
        let pi = Trained::new(cfg.bc_lr, |p| Members::new(p, "policy", &cfg, obs_dim, act_dim, &mut rng, device));
        let old = Frozen::copy_of(&pi, |p| Members::new(p, "policy_old", &cfg, obs_dim, act_dim, &mut rng, device));
        Ok(Self { cfg, pi, old, rng, act_dim, bc_step: 0, bppo_step: 0 })
    }

    /// `(BC steps, BPPO steps)` done.
    pub fn steps(&self) -> (i64, i64) {
        (self.bc_step, self.bppo_step)
    }

    /// The ensemble's random stream (OPE start states and model noise draw from it).
    pub fn rng_mut(&mut self) -> &mut AgentRng {
        &mut self.rng
    }

    /// Member `e`'s deterministic action `tanh μ_e(s)` `[B, A]`, without gradients.
    pub fn mean_action(&self, e: i64, s: &Tensor) -> Tensor {
        tch::no_grad(|| self.pi.net.mean(s).get(e))
    }

    /// Member `e`'s weights by the names of a single [`crate::nn::GaussianActor`] under
    /// `prefix` (`{prefix}/l0/weight` `[in, out]`, …, `{prefix}/log_std` `[A]`): what the online
    /// PPO actor is loaded with.
    pub fn member_tensors(&self, e: i64, prefix: &str) -> Vec<(String, Tensor)> {
        self.pi
            .params
            .named()
            .iter()
            .map(|(n, t)| {
                let name = n.replacen("policy", prefix, 1);
                let x = t.detach().get(e);
                let x = if name.ends_with("/bias") {
                    x.squeeze_dim(0)
                } else if name.ends_with("log_std") {
                    x.view([self.act_dim])
                } else {
                    x
                };
                (name, x)
            })
            .collect()
    }

    /// Spread of the members' mean actions on states `s`: mean over rows of the per-dimension
    /// std across members (the ensemble's disagreement).
    pub fn disagreement(&self, s: &Tensor) -> f64 {
        tch::no_grad(|| self.pi.net.mean(s).std_dim(0, false, false).mean(Kind::Float).double_value(&[]))
    }

    /// The BC loss of every member on `(s, a)`, summed over members (see the module docs).
    pub fn bc_loss(&self, s: &Tensor, a: &Tensor, alpha: f64, kind: BcLoss) -> Tensor {
        let g = &self.cfg.actor;
        let mean = self.pi.net.mean(s);
        let logp = self.pi.net.log_prob(&mean, a, g);
        let per = match kind {
            BcLoss::Heuristic => -&logp - (&logp - max_of_others(&logp.detach())) * alpha,
            BcLoss::Distribution => {
                // j*(i, b) = argmax_{j≠i} log π_j(a_b|s_b), then KL(π_i ‖ sg π_{j*}) per row.
                let n = logp.size()[0];
                let masked = logp
                    .detach()
                    .unsqueeze(0)
                    .expand([n, n, logp.size()[1]], false)
                    .masked_fill(&Tensor::eye(n, (Kind::Bool, logp.device())).unsqueeze(-1), f64::NEG_INFINITY);
                let j = masked.argmax(1, false); // [n, B]
                let (mu_d, ls_d) = (mean.detach(), self.pi.net.log_std(g).detach());
                let a_dim = mean.size()[2];
                let jx = j.unsqueeze(-1).expand([n, mean.size()[1], a_dim], false);
                let mu_j = mu_d.gather(0, &jx, false);
                let ls_j = ls_d.expand([n, mean.size()[1], a_dim], false).gather(0, &jx, false);
                let ls_i = self.pi.net.log_std(g);
                let kl = (&ls_j - &ls_i
                    + ((&ls_i * 2.0).exp() + (&mean - &mu_j).square()) / ((&ls_j * 2.0).exp() * 2.0)
                    - 0.5)
                    .sum_dim_intlist(-1, false, Kind::Float);
                -&logp - kl * alpha
            }
        };
        per.mean_dim(1, false, Kind::Float).sum(Kind::Float)
    }

    /// One BC step on a batch of dataset pairs (all members, the same rows).
    pub fn bc_update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        let idx = self.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let a = data.action.index_select(0, &idx);
        let loss = self.bc_loss(&s, &a, self.cfg.alpha_bc, self.cfg.bc_loss);
        self.pi.opt.lr = self.cfg.bc_lr;
        self.pi.opt.minimize(&self.pi.params, &loss);
        self.bc_step += 1;
        if self.bc_step as u64 == self.cfg.bc_steps {
            // BPPO starts from the final BC weights, π_old included.
            self.old.params.copy_from(&self.pi.params);
        }
        vec![("bc_loss", loss.double_value(&[]) / self.cfg.members as f64)]
    }

    /// BPPO's loss `Σ_i L_i` on states `s` (as the critic sees them), with `a ~ π_old`:
    /// `advantage(s, a)` gives `min Q − V` for `a` `[n·B, A]` (members stacked).
    fn bppo_loss(
        &mut self,
        s: &Tensor,
        advantage: &mut dyn FnMut(&Tensor, &Tensor) -> Tensor,
        weight: Option<f64>,
        clip: f64,
    ) -> (Tensor, f64) {
        let g = self.cfg.actor.clone();
        let (n, b) = (self.cfg.members, s.size()[0]);
        let (a, logp_old) = tch::no_grad(|| {
            let mean = self.old.net.mean(s);
            let eps = self.rng.normal(&[n, b, self.act_dim], s.device());
            let a = &mean + self.old.net.log_std(&g).exp() * eps;
            let lp = self.old.net.log_prob(&mean, &a, &g);
            (a, lp)
        });
        let adv = tch::no_grad(|| {
            let s_rep = s.unsqueeze(0).expand([n, b, s.size()[1]], false).reshape([n * b, -1]);
            let raw = advantage(&s_rep, &a.reshape([n * b, self.act_dim])).view([n, b]);
            let std = (&raw - raw.mean_dim(1, true, Kind::Float)) / (raw.std_dim(1, true, true) + 1e-10);
            // The non-IQL path weights the standardized advantage: ω where Â > 0, 1 − ω elsewhere.
            match weight {
                Some(omega) => super::sarsa::weighted_advantage(&std, omega),
                None => std,
            }
        });
        let logp = self.pi.net.log_prob(&self.pi.net.mean(s), &a, &g);
        let ratio = (logp - logp_old).exp();
        // L = Σ_i L_clip,i: `clipped_surrogate` averages over all n·B rows, so × n.
        let loss = clipped_surrogate(&ratio, &adv, clip) * n as f64;
        let clip_frac =
            tch::no_grad(|| (&ratio - 1.0).abs().gt(clip).to_kind(Kind::Float).mean(Kind::Float).double_value(&[]));
        (loss, clip_frac)
    }

    /// BPPO's learning rate at step `t` (0-based): `lr₀ (1 − max(t − 1, 0) / T)`. The official
    /// loop sets the LR after each step, so step t runs at the value set after step t − 1.
    pub fn bppo_lr_at(&self, t: u64) -> f64 {
        self.cfg.bppo_lr * (1.0 - t.saturating_sub(1) as f64 / self.cfg.bppo_steps.max(1) as f64)
    }

    /// One BPPO step on `batch_size` random dataset states; `advantage` is `Q − V` (IQL: `min Q`),
    /// `weight` the non-IQL path's ω ([`super::OfflineCritic::advantage_weight`]). The first
    /// step (t = 0) resets the optimizer first: BPPO starts with zero moments and step 0, not
    /// with BC's Adam.
    pub fn bppo_update(
        &mut self,
        data: &Data,
        state_norm: bool,
        advantage: &mut dyn FnMut(&Tensor, &Tensor) -> Tensor,
        weight: Option<f64>,
    ) -> Metrics {
        let t = self.bppo_step as u64;
        if t == 0 {
            self.pi.opt.reset();
        }
        let clip = self.cfg.clip_at(t);
        let idx = self.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let (loss, clip_frac) = self.bppo_loss(&s, advantage, weight, clip);
        let mut grads = Tensor::run_backward(&[&loss], &self.pi.params.tensors(), false, false);
        let norms = clip_per_member(&mut grads, self.cfg.members, self.cfg.max_grad_norm);
        self.pi.opt.lr = self.bppo_lr_at(t);
        self.pi.opt.apply(&self.pi.params, &grads);
        self.bppo_step += 1;
        vec![
            ("bppo_loss", loss.double_value(&[])),
            ("clip", clip),
            ("clip_fraction", clip_frac),
            ("grad_norm", norms.mean(Kind::Float).double_value(&[])),
            ("lr", self.pi.opt.lr),
        ]
    }

    /// `π_old,i ← π_i` for every member with `improved[i]`; the others' π_old stay bit for bit.
    pub fn accept(&mut self, improved: &[bool]) {
        tch::no_grad(|| {
            for ((_, dst), (_, src)) in self.old.params.named().iter().zip(self.pi.params.named()) {
                for (e, ok) in improved.iter().enumerate() {
                    if *ok {
                        dst.get(e as i64).copy_(&src.get(e as i64));
                    }
                }
            }
        });
    }
}

/// π, π_old and BC's (then BPPO's) Adam; the BC steps are the counter, the BPPO steps are
/// written as `meta/bppo_step`.
impl Stateful for PolicyEnsemble {
    fn name(&self) -> &'static str {
        "unio4-policy"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![Part::trained("policy_opt", &self.pi), Part::frozen(&self.old)]
    }

    fn progress(&self) -> (i64, &AgentRng) {
        (self.bc_step, &self.rng)
    }

    fn set_progress(&mut self, step: i64, rng: AgentRng) {
        (self.bc_step, self.rng) = (step, rng);
    }

    fn written_only(&self) -> Vec<(String, Tensor)> {
        vec![("meta/bppo_step".into(), Tensor::from_slice(&[self.bppo_step]))]
    }

    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        let bppo_step = Checkpoint::read(path)?.i64s("meta/bppo_step", 1)?[0];
        self.restore(path, self.name(), None)?;
        self.bppo_step = bppo_step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Adam;

    fn small() -> PolicyConfig {
        PolicyConfig {
            actor: GaussianConfig {
                mlp: MlpConfig { hidden: vec![16, 16], ..MlpConfig::default() },
                ..PolicyConfig::default().actor
            },
            batch_size: 32,
            ..PolicyConfig::default()
        }
    }

    fn grads(p: &PolicyEnsemble, loss: &Tensor) -> Vec<Tensor> {
        Tensor::run_backward(&[loss], &p.pi.params.tensors(), false, false)
    }

    /// Test 6 of §1.8: the heuristic ensemble loss's gradient is exactly (1 + α) times plain BC's
    /// (α = 0), for every parameter; the distribution loss's is not.
    #[test]
    fn heuristic_bc_gradient_is_a_rescaled_bc_gradient() {
        let p = PolicyEnsemble::new(small(), 3, 2, Device::Cpu, 1).unwrap();
        let mut rng = AgentRng::new(2);
        let (s, a) = (rng.normal(&[32, 3], Device::Cpu), rng.normal(&[32, 2], Device::Cpu).tanh());
        let plain = grads(&p, &p.bc_loss(&s, &a, 0.0, BcLoss::Heuristic));
        let heur = grads(&p, &p.bc_loss(&s, &a, 0.1, BcLoss::Heuristic));
        for (g0, g1) in plain.iter().zip(&heur) {
            let diff = (g1 - g0 * 1.1).abs().max().double_value(&[]);
            assert!(diff <= 1e-6 * (1.0 + g0.abs().max().double_value(&[])), "{diff}");
        }
        let dist = grads(&p, &p.bc_loss(&s, &a, 0.1, BcLoss::Distribution));
        let off: f64 =
            plain.iter().zip(&dist).map(|(g0, g1)| (g1 - g0 * 1.1).abs().max().double_value(&[])).fold(0.0, f64::max);
        assert!(off > 1e-4, "the KL loss must differ from a rescaled BC ({off})");
    }

    /// Test 5 of §1.8: after a BPPO step moved every π_i, accepting members 0 and 2 copies their
    /// π into π_old and leaves 1 and 3 bit-identical.
    #[test]
    fn only_improved_members_replace_their_old_policy() {
        let d = toy_data(5);
        let mut p = after_bc(&PolicyConfig { bc_steps: 1, bppo_steps: 10, ..small() }, &d, 4);
        let before: Vec<Tensor> = p.old.params.named().iter().map(|(_, t)| t.detach().copy()).collect();
        p.bppo_update(&d, false, &mut toy_advantage, None);
        p.accept(&[true, false, true, false]);
        for (((_, old), (_, pi)), was) in p.old.params.named().iter().zip(p.pi.params.named()).zip(&before) {
            for e in [0i64, 2] {
                assert!(old.get(e).equal(&pi.get(e)), "member {e} takes π");
                assert!(!old.get(e).equal(&was.get(e)) || pi.get(e).equal(&was.get(e)));
            }
            for e in [1i64, 3] {
                assert!(old.get(e).equal(&was.get(e)), "member {e} keeps π_old bit for bit");
            }
        }
        assert!(
            p.pi.params.named().iter().zip(&before).any(|((_, pi), was)| !pi.get(1).equal(&was.get(1))),
            "the step moved member 1"
        );
    }

    /// The non-IQL path's weight reaches the surrogate: with ω = 0.5 every standardized
    /// advantage is halved, so the gradient (at π = π_old, where the loss itself is −mean Â = 0)
    /// is exactly half the unweighted one (same samples); with ω = 0.9 it is not.
    #[test]
    fn advantage_weight_reaches_the_bppo_loss() {
        let s = AgentRng::new(2).normal(&[32, 3], Device::Cpu);
        let mut adv = |s: &Tensor, a: &Tensor| {
            s.sum_dim_intlist(1, false, Kind::Float) - a.sum_dim_intlist(1, false, Kind::Float)
        };
        let mut grad = |w: Option<f64>| {
            let mut p = PolicyEnsemble::new(small(), 3, 2, Device::Cpu, 8).unwrap();
            let loss = p.bppo_loss(&s, &mut adv, w, 0.2).0;
            Tensor::cat(&grads(&p, &loss).iter().map(|g| g.flatten(0, -1)).collect::<Vec<_>>(), 0)
        };
        let (plain, half, skew) = (grad(None), grad(Some(0.5)), grad(Some(0.9)));
        let norm = plain.norm().double_value(&[]);
        assert!(norm > 1e-3, "{norm}");
        assert!((&half - &plain * 0.5).abs().max().double_value(&[]) < 1e-6 * norm.max(1.0));
        assert!((&skew - &half).norm().double_value(&[]) > 1e-2 * norm);
    }

    /// 64 random dataset pairs `(s, a)` (3-dim states, 2-dim actions in (−1, 1)).
    fn toy_data(seed: u64) -> Data {
        let mut rng = AgentRng::new(seed);
        let n = 64;
        let f = |t: &Tensor| Vec::<f32>::try_from(&t.flatten(0, -1)).unwrap();
        let (s, a) = (rng.normal(&[n, 3], Device::Cpu), rng.normal(&[n, 2], Device::Cpu).tanh());
        let zeros = vec![0.0f32; n as usize];
        Data::new(&f(&s), &f(&a), &zeros, &f(&s), &zeros, &zeros, 3, 2, Device::Cpu).unwrap()
    }

    fn toy_advantage(s: &Tensor, a: &Tensor) -> Tensor {
        s.sum_dim_intlist(1, false, Kind::Float) - a.sum_dim_intlist(1, false, Kind::Float)
    }

    /// A fresh ensemble (seed `seed`) after its `cfg.bc_steps` BC steps on `d`.
    fn after_bc(cfg: &PolicyConfig, d: &Data, seed: u64) -> PolicyEnsemble {
        let mut p = PolicyEnsemble::new(cfg.clone(), 3, 2, Device::Cpu, seed).unwrap();
        for _ in 0..cfg.bc_steps {
            p.bc_update(d, false);
        }
        p
    }

    /// What `path` holds, loaded into an ensemble built from another seed.
    fn reloaded(cfg: &PolicyConfig, path: &Path) -> PolicyEnsemble {
        let mut q = PolicyEnsemble::new(cfg.clone(), 3, 2, Device::Cpu, 99).unwrap();
        q.load(path).unwrap();
        q
    }

    fn same_weights(x: &PolicyEnsemble, y: &PolicyEnsemble) -> bool {
        x.pi.params.named().iter().zip(y.pi.params.named()).all(|((_, a), (_, b))| a.equal(b))
    }

    /// fidelity-audit-2 E2: the first BPPO step is an Adam step from zero moments and step 0
    /// (lr₀ · m̂/(√v̂ + ε) with m̂ = g, v̂ = g²) on BPPO's clipped gradient, not a step of the
    /// BC stage's Adam. This holds both after BC in the same process and when the finished BC
    /// stage is loaded from its checkpoint (a cached `bc.ot`, a resumed run). Replaying the
    /// same sample through BC's Adam instead lands elsewhere, so the check has teeth.
    #[test]
    fn bppo_starts_from_a_fresh_adam() {
        let cfg = PolicyConfig { bc_steps: 5, bppo_steps: 10, ..small() };
        let d = toy_data(5);
        let mut p = after_bc(&cfg, &d, 4);
        assert_eq!(p.pi.opt.steps(), 5);
        let dir = tempfile::tempdir().unwrap();
        let bc = dir.path().join("bc.ot");
        p.save(&bc).unwrap();
        let load = || reloaded(&cfg, &bc);
        // The reference: BPPO's first step by hand, through a brand-new Adam (and, for the
        // contrast, through the BC Adam the checkpoint holds).
        let step_by_hand = |q: &mut PolicyEnsemble, fresh: bool| {
            let idx = q.rng.indices(d.len(), q.cfg.batch_size, true, Device::Cpu);
            let s = d.norm_obs(&d.obs.index_select(0, &idx), false);
            let (loss, _) = q.bppo_loss(&s, &mut toy_advantage, None, q.cfg.clip_at(0));
            let mut g = grads(q, &loss);
            let _ = clip_per_member(&mut g, q.cfg.members, q.cfg.max_grad_norm);
            if fresh {
                Adam::new(&q.pi.params, q.cfg.bppo_lr).apply(&q.pi.params, &g);
            } else {
                q.pi.opt.lr = q.cfg.bppo_lr;
                q.pi.opt.apply(&q.pi.params, &g);
            }
        };
        let (mut want, mut stale) = (load(), load());
        step_by_hand(&mut want, true);
        step_by_hand(&mut stale, false);
        assert!(!same_weights(&want, &stale), "BC's Adam state must change the step, or this test proves nothing");
        let mut resumed = load();
        for (who, q) in [("in-process", &mut p), ("loaded from the BC checkpoint", &mut resumed)] {
            q.bppo_update(&d, false, &mut toy_advantage, None);
            assert!(same_weights(q, &want), "{who}: the first BPPO step is not a fresh Adam's");
            assert_eq!(q.pi.opt.steps(), 1, "{who}: BPPO's Adam counts from 0");
        }
    }

    /// Inside BPPO nothing is reset: a run saved after BPPO step 2 and loaded continues with
    /// BPPO's own Adam (moments, step 2) bit for bit.
    #[test]
    fn bppo_resumed_mid_stage_keeps_its_adam() {
        let cfg = PolicyConfig { bc_steps: 3, bppo_steps: 10, ..small() };
        let d = toy_data(6);
        let mut p = after_bc(&cfg, &d, 7);
        for _ in 0..2 {
            p.bppo_update(&d, false, &mut toy_advantage, None);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bppo.partial.ot");
        p.save(&path).unwrap();
        let mut q = reloaded(&cfg, &path);
        assert_eq!((q.steps(), q.pi.opt.steps()), ((3, 2), 2));
        for _ in 0..2 {
            assert_eq!(
                p.bppo_update(&d, false, &mut toy_advantage, None),
                q.bppo_update(&d, false, &mut toy_advantage, None)
            );
        }
        assert!(same_weights(&p, &q) && p.pi.opt.steps() == 4 && q.pi.opt.steps() == 4);
        for ((n, x), (_, y)) in p.named_tensors().iter().zip(q.named_tensors()) {
            assert!(x.equal(&y), "{n}");
        }
    }

    /// fidelity-audit-2 E5: step t runs at lr₀ (1 − max(t − 1, 0) / T), as the official loop
    /// sets lr₀ (1 − t / T) after step t: steps 0 and 1 at lr₀, step 2 at lr₀ (1 − 1/T), the last
    /// step (T − 1) at lr₀ (1 − (T − 2)/T).
    #[test]
    fn bppo_lr_is_set_after_each_step() {
        let cfg = PolicyConfig { bc_steps: 1, bppo_steps: 10, bppo_lr: 1e-4, ..small() };
        let d = toy_data(9);
        let mut p = after_bc(&cfg, &d, 1);
        let lr: Vec<f64> = (0..10)
            .map(|_| p.bppo_update(&d, false, &mut toy_advantage, None).iter().find(|(k, _)| *k == "lr").unwrap().1)
            .collect();
        let want: Vec<f64> = [1.0, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2].iter().map(|f| 1e-4 * f).collect();
        for (t, (got, want)) in lr.iter().zip(&want).enumerate() {
            assert!((got - want).abs() < 1e-15, "step {t}: lr {got}, want {want}");
        }
    }

    #[test]
    fn clip_schedule_freezes_after_200_steps() {
        let c = PolicyConfig { bppo_steps: 10_000, ..PolicyConfig::default() };
        assert_eq!(c.clip_at(0), 0.25);
        assert!((c.clip_at(200) - 0.245).abs() < 1e-12 && (c.clip_at(5000) - 0.245).abs() < 1e-12);
    }
}
