//! A critic ensemble `Q_θ` with its Polyak target `Q̄` (SAC and its variants, IQL): building the
//! pair, and one critic step `θ ← Adam(θ, ∇_θ L)`, then `θ̄ ← (1 − τ) θ̄ + τ θ`, where the
//! algorithm writes its loss `L` from the Q-values `Q_i(s, a)` of [`CriticPass::new`].
//!
//! On the CPU the ensemble takes its taped pass ([`EnsembleMlp::forward_taped`]): `L` is
//! differentiated in the Q-values alone, their gradient is carried through the networks by
//! [`EnsembleMlp::backward_loss`], and Adam and the Polyak step share one pass over the weights
//! ([`Adam::apply_and_track`]). Elsewhere (CUDA, or the generic path forced, [`super::path`])
//! autograd does the whole of it, then [`polyak_update`].

use super::ensemble::EnsembleTape;
use super::floats::floats;
use super::path;
use super::{polyak_update, Adam, EnsembleMlp, Frozen, MlpConfig, ParamSet, TanhGaussianActor, Trained};
use crate::rng::AgentRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// `members` one-output critics on `in_dim` inputs, registered as `critic/…` and trained by
/// Adam at `lr`, and their target, registered as `critic_target/…`, with `θ̄ = θ` and no
/// gradients. The target draws its own initialization from `rng` after the critic's (then
/// overwritten), as two separate constructions would.
pub(crate) fn critic_and_target(
    members: i64,
    in_dim: i64,
    cfg: &MlpConfig,
    lr: f64,
    rng: &mut AgentRng,
    device: Device,
) -> (Trained<EnsembleMlp>, Frozen<EnsembleMlp>) {
    let critic = Trained::new(lr, |p| EnsembleMlp::new(p, "critic", members, in_dim, 1, cfg, 1.0, rng, device));
    let target =
        Frozen::copy_of(&critic, |p| EnsembleMlp::new(p, "critic_target", members, in_dim, 1, cfg, 1.0, rng, device));
    (critic, target)
}

/// The critic's input `[s, a]` `[B, obs + act]`.
pub(crate) fn state_action(obs: &Tensor, action: &Tensor) -> Tensor {
    Tensor::cat(&[obs, action], 1)
}

/// `Q_i(s, a)` of every member, `[E, B]`, without gradients or dropout, the inputs moved to
/// `device` first (what [`crate::Agent::critic_values`] returns).
pub(crate) fn critic_values(critic: &EnsembleMlp, obs: &Tensor, action: &Tensor, device: Device) -> Tensor {
    tch::no_grad(|| {
        critic.forward(&state_action(&obs.to_device(device), &action.to_device(device)), None).squeeze_dim(-1)
    })
}

/// Diagnostics of Q-values `q` `[B]` (no gradients) against the Monte-Carlo returns `G` of the
/// same rows: `q`, their mean; where some `G` are finite, `mc_return` and `q_minus_mc`, the
/// means of `G` and `Q − G` on those rows.
pub(crate) fn q_against_returns(q: &Tensor, mc_return: Option<&Tensor>) -> Vec<(&'static str, f64)> {
    let mut out = vec![("q", q.mean(Kind::Float).double_value(&[]))];
    if let Some(g) = mc_return {
        let finite = g.isfinite();
        if finite.sum(Kind::Int64).int64_value(&[]) > 0 {
            let (g, q) = (g.masked_select(&finite), q.masked_select(&finite));
            out.push(("mc_return", g.mean(Kind::Float).double_value(&[])));
            out.push(("q_minus_mc", (q - g).mean(Kind::Float).double_value(&[])));
        }
    }
    out
}

/// `q̄ = min_j Q̄_j(s, a)` `[B]` of the target critics at `sa = [s, a]`, without gradients (the
/// fused pass where it applies).
pub(crate) fn target_min_q(target: &EnsembleMlp, sa: &Tensor) -> Tensor {
    match target.tape_applies(sa) {
        true => target.forward_fused(sa, None).amin(0, false),
        false => tch::no_grad(|| target.forward(sa, None).squeeze_dim(-1).amin(0, false)),
    }
}

/// A critic ensemble, its optimizer and its Polyak target, borrowed for one step.
pub(crate) struct CriticParts<'a> {
    pub critic: &'a EnsembleMlp,
    pub opt: &'a mut Adam,
    pub params: &'a ParamSet,
    pub target: &'a ParamSet,
}

impl<'a> CriticParts<'a> {
    /// The trained `critic` and its `target`.
    pub fn of(critic: &'a mut Trained<EnsembleMlp>, target: &'a Frozen<EnsembleMlp>) -> Self {
        let Trained { net, params, opt } = critic;
        Self { critic: net, opt, params, target: &target.params }
    }
}

/// How the squared TD errors `(Q_i(s_b, a_b) − y_b)²` of a critic step are reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TdReduce {
    /// `mean_{i,b}`: the mean over members and rows (SAC and its variants).
    MeanOverMembers,
    /// `mean_b Σ_i`: the members' losses summed (IQL and its variants).
    SumOverMembers,
}

/// IQL's Q step on `sa = [s, a]` towards `y` `[B]`: `L_Q = E[Σ_j (y − Q_j(s, a))²]`, then
/// `θ̄ ← (1 − τ) θ̄ + τ θ`; returns `(L_Q, mean Q)`, detached.
pub(crate) fn q_step(c: CriticParts<'_>, sa: &Tensor, y: &Tensor, tau: f64, rng: &mut AgentRng) -> (Tensor, Tensor) {
    let pass = CriticPass::new(c.critic, sa, rng);
    let (loss, q) = pass.td_step(c, y, TdReduce::SumOverMembers, tau, CriticTerm::default());
    (loss, q.mean(Kind::Float))
}

/// A variant's addition to one critic step's loss (CQL's regularizer); none by default.
#[derive(Default)]
pub(crate) struct CriticTerm {
    /// The part of the term that reaches the critic only through the step's `Q(s, a)`
    /// ([`CriticPass::q`]), differentiated with the TD loss.
    pub on_q: Option<Tensor>,
    /// The gradient, over the critic's parameters in their order, of a part the variant
    /// differentiated itself (CQL's sampled actions).
    pub grads: Option<Vec<Tensor>>,
}

/// The elements of a one-dimensional float32 CPU tensor of any stride (a minibatch's strided
/// view of a column), read without a libtorch op; `None` for any other tensor.
fn elements_1d(t: &Tensor) -> Option<Vec<f32>> {
    if !path::fast_cpu(t) || t.dim() != 1 {
        return None;
    }
    let (len, stride) = (t.size()[0] as usize, t.stride()[0] as isize);
    let base = t.data_ptr() as *const f32;
    // SAFETY: a float32 CPU tensor of `len` elements `stride` apart from its data pointer
    // (which includes the view's offset); they are only read, before this returns.
    Some((0..len).map(|i| unsafe { *base.offset(i as isize * stride) }).collect())
}

/// What a soft backup adds to the next state's value: `y = r + γ (1 − d) (V' − α log π(a'|s'))`.
pub(crate) struct Backup<'a> {
    /// r `[B]`.
    pub reward: &'a Tensor,
    /// d `[B]`: 1 where the episode truly ended (not a time limit).
    pub terminal: &'a Tensor,
    /// γ.
    pub gamma: f64,
    /// α, where the entropy enters the backup (`None`: it does not).
    pub alpha: Option<&'a Tensor>,
}

/// The soft TD target, without gradients:
/// `y = r + γ (1 − d) (max_k min_{i∈I} Q̄_i(s', a'_k) − α log π(a'_k|s'))` `[B]`, for `next` =
/// `[s', a']` `[B·k, in]` (k next actions per state, state-major) with their `log π` `[B·k]`,
/// over the target members `subset` `I` (all of them without one); with `k > 1` the max over the
/// state's k actions (max-target backup) and the log π of the chosen one.
///
/// The target's pass is the fused one where it applies ([`EnsembleMlp::forward_fused`]); for
/// `k = 1` the backup is one pass over the rows on the CPU ([`td_target_cpu`], equal to the
/// tensor ops bit for bit), else the tensor ops (the reference).
pub(crate) fn soft_td_target(
    target: &EnsembleMlp,
    subset: Option<&Tensor>,
    next: &Tensor,
    next_logp: &Tensor,
    k: i64,
    backup: Backup<'_>,
) -> Tensor {
    tch::no_grad(|| {
        let q = match subset {
            _ if target.tape_applies(next) => target.forward_fused(next, subset),
            Some(idx) => target.forward_subset(next, idx).squeeze_dim(-1),
            None => target.forward(next, None).squeeze_dim(-1),
        };
        let one_pass = (k == 1)
            .then(|| td_target_cpu(&q, next_logp, backup.reward, backup.terminal, backup.alpha, backup.gamma))
            .flatten();
        one_pass.unwrap_or_else(|| td_target_reference(&q, next_logp, k, &backup))
    })
}

/// The soft TD target from the subset's target values `q` `[M, B·k]` with tensor ops (see
/// [`soft_td_target`]).
fn td_target_reference(q: &Tensor, next_logp: &Tensor, k: i64, backup: &Backup<'_>) -> Tensor {
    let n = backup.reward.size()[0];
    let (mut q_next, mut next_logp) = (q.amin(0, false), next_logp.shallow_clone());
    if k > 1 {
        // max_k min_{i∈I} Q̄_i(s', a'_k), and the log π of the chosen a'_k.
        let (best, arg) = q_next.view([n, k]).max_dim(1, true);
        next_logp = next_logp.view([n, k]).gather(1, &arg, false).squeeze_dim(1);
        q_next = best.squeeze_dim(1);
    }
    if let Some(alpha) = backup.alpha {
        q_next = q_next - alpha * &next_logp;
    }
    backup.reward + (1.0 - backup.terminal) * backup.gamma * q_next
}

/// The TD target `y = r + γ (1 − d) (min_i Q̄_i − α log π(a'|s'))` `[B]` on the CPU in one pass
/// over the rows, from the subset's target values `q_next` `[M, B]`, `log π(a'|s')`, the rows'
/// rewards and done flags, with `alpha` only where the entropy enters the backup; `None` (the
/// caller's tensor ops) off the CPU fast path ([`path::fast_cpu`]) or for other layouts. Each
/// row is computed in the tensor ops' order with the same float32 roundings (`1 − d`, times γ,
/// times the bracket, plus r), so it equals them bit for bit; it saves their seven small passes
/// and dispatches.
pub(crate) fn td_target_cpu(
    q_next: &Tensor,
    next_logp: &Tensor,
    reward: &Tensor,
    terminal: &Tensor,
    alpha: Option<&Tensor>,
    gamma: f64,
) -> Option<Tensor> {
    if !path::fast_cpu(q_next) || q_next.dim() != 2 || !q_next.is_contiguous() {
        return None;
    }
    let (members, rows) = (q_next.size()[0] as usize, q_next.size()[1] as usize);
    let (logp, r, d) = (elements_1d(next_logp)?, elements_1d(reward)?, elements_1d(terminal)?);
    let alpha = match alpha {
        Some(a) if path::fast_cpu(a) && a.numel() == 1 => Some(a.double_value(&[0]) as f32),
        Some(_) => return None,
        None => None,
    };
    if members == 0 || [logp.len(), r.len(), d.len()] != [rows; 3] {
        return None;
    }
    path::hit();
    // SAFETY: a contiguous float32 CPU tensor of members × rows elements, only read here.
    let q = unsafe { floats(q_next) };
    let gamma = gamma as f32;
    let y: Vec<f32> = (0..rows)
        .map(|j| {
            // amin over the members, NaN-propagating as libtorch's.
            let min = (1..members).map(|m| q[m * rows + j]).fold(q[j], |acc, x| {
                if acc.is_nan() || x.is_nan() {
                    f32::NAN
                } else if x < acc {
                    x
                } else {
                    acc
                }
            });
            let bracket = match alpha {
                Some(a) => min - a * logp[j],
                None => min,
            };
            r[j] + (1.0 - d[j]) * gamma * bracket
        })
        .collect();
    Some(Tensor::from_slice(&y))
}

/// The squared TD loss `L = mean_{i,b} (Q_i(s_b, a_b) − y_b)²` over `q` `[E, B]` and its
/// gradient in the Q-values, `∂L/∂Q_i = 2 (Q_i − y) / (E B)`, on the CPU in one pass: `(∂L/∂Q,
/// L)`, the gradient equal bit for bit to the tensor ops' (`Q − y`, times the float32 constant),
/// the loss (a logged value) summed in float64. `None` off the CPU fast path ([`path::fast_cpu`])
/// or for other layouts.
pub(crate) fn squared_td_grad_cpu(q: &Tensor, y: &Tensor) -> Option<(Tensor, Tensor)> {
    if !path::fast_cpu(q) || q.dim() != 2 || !q.is_contiguous() {
        return None;
    }
    let (members, rows) = (q.size()[0] as usize, q.size()[1] as usize);
    let y = elements_1d(y)?;
    if y.len() != rows || members * rows == 0 {
        return None;
    }
    path::hit();
    // SAFETY: a contiguous float32 CPU tensor of members × rows elements, only read here.
    let qs = unsafe { floats(q) };
    let scale = (2.0 / (members * rows) as f64) as f32;
    let mut sum = 0.0f64;
    let grad: Vec<f32> = qs
        .iter()
        .enumerate()
        .map(|(i, &qi)| {
            let diff = qi - y[i % rows];
            sum += diff as f64 * diff as f64;
            diff * scale
        })
        .collect();
    let loss = Tensor::from((sum / (members * rows) as f64) as f32);
    Some((Tensor::from_slice(&grad).view([members as i64, rows as i64]), loss))
}

/// The Q-values one critic step differentiates, and how.
pub(crate) struct CriticPass {
    /// `Q_i(s, a)` of every member, `[E, B]`: a leaf with a tape on the CPU, part of autograd's
    /// graph elsewhere.
    pub q: Tensor,
    tape: Option<EnsembleTape>,
}

impl CriticPass {
    /// `Q_i(x)` of every member for `x = [s, a]` `[B, in]`: the taped pass where it applies,
    /// else autograd's pass with dropout drawn from `rng`.
    pub fn new(critic: &EnsembleMlp, x: &Tensor, rng: &mut AgentRng) -> Self {
        if critic.tape_applies(x) {
            let (q, tape) = critic.forward_taped(x);
            Self { q: q.set_requires_grad(true), tape: Some(tape) }
        } else {
            Self { q: critic.forward(x, Some(rng)).squeeze_dim(-1), tape: None }
        }
    }

    /// One Adam step of `opt` on the critic's `params` down `∇_θ loss`, plus `extra`, a gradient
    /// over the same parameters in their order that the caller formed itself (CQL's sampled
    /// actions); then `θ̄ ← (1 − τ) θ̄ + τ θ` on `target`. `loss` reaches the critic only through
    /// [`CriticPass::q`]. Returns `Q`, detached.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        self,
        critic: &EnsembleMlp,
        opt: &mut Adam,
        params: &ParamSet,
        target: &ParamSet,
        tau: f64,
        loss: &Tensor,
        extra: Option<&[Tensor]>,
    ) -> Tensor {
        match self.tape {
            Some(tape) => {
                let grads = critic.backward_loss(tape, loss, &self.q);
                Self::adam_and_polyak(grads, opt, params, target, tau, extra);
            }
            None => {
                // The caller's own gradient G enters through Σ_p ⟨p, G_p⟩ (value dropped).
                let surrogate;
                let loss = match extra {
                    Some(g) => {
                        let linear = params
                            .named()
                            .iter()
                            .zip(g)
                            .map(|((_, p), g)| (p * g).sum(Kind::Float))
                            .fold(loss.zeros_like(), |acc, t| acc + t);
                        surrogate = loss + (&linear - linear.detach());
                        &surrogate
                    }
                    None => loss,
                };
                opt.minimize(params, loss);
                polyak_update(target, params, tau);
            }
        }
        self.q.detach()
    }

    /// One critic step on the squared TD loss towards `y` `[B]`, reduced as `reduce` says, plus
    /// the variant's `term`: `L = reduce (Q_i(s, a) − y)² + on_q`, Adam on `∇_θ L + grads`, then
    /// `θ̄ ← (1 − τ) θ̄ + τ θ`. Returns `(the TD loss, Q)`, both detached.
    ///
    /// On the taped pass with no `on_q`, the TD loss's gradient in `Q` is formed directly
    /// (`∂L/∂Q_i = 2 (Q_i − y) / (E B)` for the mean, `2 (Q_i − y) / B` for the sum) and carried
    /// through the networks by the tape, with no graph; otherwise autograd differentiates `L`
    /// (the reference).
    pub fn td_step(
        self,
        c: CriticParts<'_>,
        y: &Tensor,
        reduce: TdReduce,
        tau: f64,
        term: CriticTerm,
    ) -> (Tensor, Tensor) {
        let extra = term.grads.as_deref();
        if self.is_taped() && term.on_q.is_none() {
            let (grad_q, td_loss) = match reduce {
                // ∂L_Q/∂Q_i(s, a) = 2 (Q_i(s, a) − y) / (E B), in one pass on the CPU.
                TdReduce::MeanOverMembers => squared_td_grad_cpu(&self.q, y).unwrap_or_else(|| {
                    let diff = tch::no_grad(|| self.q.detach() - y.unsqueeze(0));
                    (&diff * (2.0 / diff.numel() as f64), diff.square().mean(Kind::Float))
                }),
                // ∂L_Q/∂Q_j(s_b, a_b) = 2 (Q_j − y_b) / B.
                TdReduce::SumOverMembers => {
                    let diff = tch::no_grad(|| self.q.detach() - y.unsqueeze(0));
                    let loss = diff.square().sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float);
                    (&diff * (2.0 / diff.size()[1] as f64), loss)
                }
            };
            let q = self.step_from_grad(c.critic, c.opt, c.params, c.target, tau, &grad_q, extra);
            return (td_loss.detach(), q);
        }
        let square = (&self.q - y.unsqueeze(0)).square();
        let td_loss = match reduce {
            TdReduce::MeanOverMembers => square.mean(Kind::Float),
            TdReduce::SumOverMembers => square.sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float),
        };
        let loss = match &term.on_q {
            Some(t) => &td_loss + t,
            None => td_loss.shallow_clone(),
        };
        let q = self.step(c.critic, c.opt, c.params, c.target, tau, &loss, extra);
        (td_loss.detach(), q)
    }

    /// Whether the pass is the taped one, for [`CriticPass::step_from_grad`].
    fn is_taped(&self) -> bool {
        self.tape.is_some()
    }

    /// [`CriticPass::step`] on the taped pass for a loss whose gradient in `Q` the caller
    /// formed itself, `grad_q = ∂L/∂Q` `[E, B]` (a squared TD error's `2 (Q − y) / (E B)`):
    /// no graph and no backward pass for the loss.
    #[allow(clippy::too_many_arguments)]
    pub fn step_from_grad(
        self,
        critic: &EnsembleMlp,
        opt: &mut Adam,
        params: &ParamSet,
        target: &ParamSet,
        tau: f64,
        grad_q: &Tensor,
        extra: Option<&[Tensor]>,
    ) -> Tensor {
        let tape = self.tape.expect("step_from_grad needs the taped pass");
        let grads = critic.backward_params(tape, grad_q);
        Self::adam_and_polyak(grads, opt, params, target, tau, extra);
        self.q.detach()
    }

    /// `∇ + extra`, one Adam step, and `θ̄ ← (1 − τ) θ̄ + τ θ` in the same pass over the weights.
    fn adam_and_polyak(
        mut grads: Vec<Tensor>,
        opt: &mut Adam,
        params: &ParamSet,
        target: &ParamSet,
        tau: f64,
        extra: Option<&[Tensor]>,
    ) {
        if let Some(extra) = extra {
            tch::no_grad(|| {
                grads.iter_mut().zip(extra).for_each(|(g, e)| {
                    let _ = g.g_add_(e);
                })
            });
        }
        opt.apply_and_track(params, &grads, target, tau);
    }
}

/// How the actor aggregates the ensemble's Q-values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QReduce {
    /// min over all members (SAC, WSRL).
    Min,
    /// mean over all members (REDQ, RLPD).
    Mean,
}

/// SAC's actor loss through the critic ensemble, `L_π = E_s[α log π(ã|s) − agg_i Q_i(s, ã)]`,
/// `ã = tanh(μ(s) + σ(s) ε)` reparameterized on the noise `eps` `[B, A]`, `agg` the min or the
/// mean over the members (`reduce`), differentiated in the actor's parameters only. Returns
/// `(L_π, ∂L_π/∂θ_π in the order of params, log π(ã|s) [B])`, all detached.
///
/// On the critic's taped pass, `agg_i Q_i(s, ã)` and `∂ mean_b agg/∂ã` come from the tape
/// without a graph through the critic (for the min, through each row's minimizing member
/// only), and the draw carries `∂L_π/∂ log π = α / B` and `∂L_π/∂ã = −∂ agg/∂ã / B` back into
/// the actor; elsewhere autograd differentiates `L_π` (the reference).
pub(crate) fn actor_through_critic(
    actor: &TanhGaussianActor,
    params: &ParamSet,
    critic: &EnsembleMlp,
    obs: &Tensor,
    eps: &Tensor,
    alpha: &Tensor,
    reduce: QReduce,
) -> (Tensor, Vec<Tensor>, Tensor) {
    // The actor's trunk takes its taped pass on the CPU ([`crate::nn::mlp_pass`]).
    let draw = actor.sample_pass(obs, eps);
    let logp = draw.log_prob.shallow_clone();
    let x = state_action(obs, &draw.a);
    let (n, act_dim) = (obs.size()[0], draw.a.size()[1]);
    let (loss, grads) = if critic.tape_applies(&x) {
        // agg_i Q_i(s, ã) and ∂ mean_b agg/∂ã without a graph through the critic; ã's graph then
        // takes ⟨ã, ∂Q/∂ã⟩ back into the actor.
        let (q, tape) = critic.forward_taped(&x);
        let (agg, grad_x) = match reduce {
            // min: the gradient goes to each row's minimizing member (one member's cost).
            QReduce::Min => {
                let (min, arg) = q.min_dim(0, false);
                (min, critic.backward_input_one_member(tape, &arg, 1.0 / n as f64))
            }
            QReduce::Mean => (
                q.mean_dim(0, false, Kind::Float),
                critic.backward_input(tape, &(q.ones_like() / (q.size()[0] * n) as f64)),
            ),
        };
        let grad_a = grad_x.narrow(1, obs.size()[1], act_dim);
        // ∂L_π/∂ log π = α / B, ∂L_π/∂ã = −∂ agg/∂ã (already divided by B).
        let d_logp = (alpha / n as f64).expand([n], false);
        let grads = draw.grads(&d_logp, &(-grad_a), params);
        ((alpha * logp.detach() - agg).mean(Kind::Float), grads)
    } else {
        let q = match reduce {
            // Backward through each row's minimizing member only (EnsembleMlp::forward_min).
            QReduce::Min => critic.forward_min(&x),
            QReduce::Mean => critic.forward(&x, None).squeeze_dim(-1).mean_dim(0, false, Kind::Float),
        };
        let actor_loss = (alpha * &logp - q).mean(Kind::Float);
        // Autograd from L_π into the draw, then through the actor.
        // (The graph below the draw is kept for `grads` where the head is not fused.)
        let g = Tensor::run_backward(&[&actor_loss], &[&draw.log_prob, &draw.a], true, false);
        let grads = draw.grads(&g[0], &g[1], params);
        (actor_loss, grads)
    };
    (loss.detach(), grads, logp.detach())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The taped step's directly formed TD gradient moves the critic as autograd's gradient of
    /// the same loss does, for both reductions: two copies of one ensemble, one step each.
    #[test]
    fn closed_form_td_step_matches_autograd() {
        for reduce in [TdReduce::SumOverMembers, TdReduce::MeanOverMembers] {
            let mut rng = AgentRng::new(5);
            let (sa, y) = (rng.normal(&[64, 6], Device::Cpu), rng.normal(&[64], Device::Cpu));
            let cfg = MlpConfig::default();
            let (mut c1, t1) = critic_and_target(2, 6, &cfg, 3e-4, &mut AgentRng::new(1), Device::Cpu);
            let (mut c2, t2) = critic_and_target(2, 6, &cfg, 3e-4, &mut AgentRng::new(1), Device::Cpu);
            let pass = CriticPass::new(&c1.net, &sa, &mut AgentRng::new(0));
            assert!(pass.is_taped());
            let (l1, _) = pass.td_step(CriticParts::of(&mut c1, &t1), &y, reduce, 0.005, CriticTerm::default());
            let pass = CriticPass::new(&c2.net, &sa, &mut AgentRng::new(0));
            let square = (&pass.q - y.unsqueeze(0)).square();
            let l2 = match reduce {
                TdReduce::MeanOverMembers => square.mean(Kind::Float),
                TdReduce::SumOverMembers => square.sum_dim_intlist(0, false, Kind::Float).mean(Kind::Float),
            };
            let _ = pass.step(&c2.net, &mut c2.opt, &c2.params, &t2.params, 0.005, &l2, None);
            assert!((l1.double_value(&[]) - l2.double_value(&[])).abs() < 1e-5);
            let (p1, p2) =
                (c1.params.named().iter().zip(c2.params.named()), t1.params.named().iter().zip(t2.params.named()));
            for ((name, a), (_, b)) in p1.chain(p2) {
                assert!((a - b).abs().max().double_value(&[]) < 1e-6, "{name} ({reduce:?})");
            }
        }
    }

    /// The one-pass TD target and TD-loss gradient equal the tensor ops they replace, bit for
    /// bit, on strided minibatch columns (rows i, i + k, …), with and without the entropy term,
    /// with a terminal row; the loss agrees to float32 rounding.
    #[test]
    fn one_pass_td_target_and_gradient_equal_the_tensor_ops() {
        let mut rng = AgentRng::new(7);
        let (members, rows, k) = (2i64, 37i64, 3i64);
        let n = rows * k;
        let q_next = rng.normal(&[members, rows], Device::Cpu) * 30.0;
        let logp = rng.normal(&[n], Device::Cpu).slice(0, 1, n, k);
        let reward = rng.normal(&[n], Device::Cpu).slice(0, 1, n, k);
        let terminal = rng.uniform_tensor(&[n], Device::Cpu).ge(0.7).to_kind(Kind::Float).slice(0, 1, n, k);
        assert!(!reward.is_contiguous() && terminal.sum(Kind::Float).double_value(&[]) > 0.0);
        let alpha = Tensor::from_slice(&[0.37f32]);
        for with_entropy in [true, false] {
            let backup =
                Backup { reward: &reward, terminal: &terminal, gamma: 0.99, alpha: with_entropy.then_some(&alpha) };
            let want = td_target_reference(&q_next, &logp, 1, &backup);
            let got = td_target_cpu(&q_next, &logp, &reward, &terminal, with_entropy.then_some(&alpha), 0.99)
                .expect("CPU float tensors");
            assert!(
                got.equal(&want),
                "TD target (entropy {with_entropy}) differs: {}",
                (&got - &want).abs().max().double_value(&[])
            );
        }
        let q = rng.normal(&[10, rows], Device::Cpu) * 30.0;
        let y = td_target_cpu(&q_next, &logp, &reward, &terminal, Some(&alpha), 0.99).unwrap();
        let diff = &q - y.unsqueeze(0);
        let (grad, loss) = squared_td_grad_cpu(&q, &y).expect("CPU float tensors");
        assert!(grad.equal(&(&diff * (2.0 / diff.numel() as f64))), "∂L/∂Q differs");
        let want = diff.square().mean(Kind::Float).double_value(&[]);
        assert!((loss.double_value(&[]) - want).abs() <= 1e-6 * want.abs(), "{} vs {want}", loss.double_value(&[]));
        // Anything else takes the tensor ops.
        assert!(td_target_cpu(&q_next.to_kind(Kind::Double), &logp, &reward, &terminal, None, 0.99).is_none());
        assert!(squared_td_grad_cpu(&q.t_copy().t_(), &y).is_none());
    }

    /// The actor loss through the critic's taped pass has autograd's value and gradients, for
    /// the min and the mean over the members, with and without LayerNorm.
    #[test]
    fn actor_through_taped_critic_matches_autograd() {
        for (reduce, layer_norm, members) in
            [(QReduce::Min, false, 2), (QReduce::Min, true, 5), (QReduce::Mean, true, 5)]
        {
            let mut rng = AgentRng::new(11);
            let mut p = ParamSet::new();
            let cfg = crate::nn::TanhGaussianConfig::default();
            let actor = TanhGaussianActor::new(&mut p, "actor", 4, 2, &cfg, &mut rng, Device::Cpu);
            let cfg = MlpConfig { hidden: vec![32, 32], layer_norm, ..MlpConfig::default() };
            let (critic, _) = critic_and_target(members, 6, &cfg, 3e-4, &mut rng, Device::Cpu);
            crate::nn::ensemble::tests::perturb_norms_and_biases(&critic.params, &mut rng);
            let (obs, eps) = (rng.normal(&[50, 4], Device::Cpu), rng.normal(&[50, 2], Device::Cpu));
            let alpha = Tensor::from_slice(&[0.3f32]);
            // The same critic with dropout refuses the taped pass, and the actor loss evaluates
            // it without dropout: the autograd path on the same function.
            let cfg = MlpConfig { dropout: 0.1, ..cfg };
            let (untaped, _) = critic_and_target(members, 6, &cfg, 3e-4, &mut AgentRng::new(0), Device::Cpu);
            untaped.params.copy_from(&critic.params);
            assert!(critic.net.tape_applies(&obs) && !untaped.net.tape_applies(&obs));
            let run = |critic: &EnsembleMlp| actor_through_critic(&actor, &p, critic, &obs, &eps, &alpha, reduce);
            let ((l1, g1, lp1), (l2, g2, lp2)) = (run(&critic.net), run(&untaped.net));
            assert!((l1.double_value(&[]) - l2.double_value(&[])).abs() < 1e-5, "{reduce:?} loss");
            assert!((lp1 - lp2).abs().max().double_value(&[]) < 1e-5);
            for ((a, b), (name, _)) in g1.iter().zip(&g2).zip(p.named()) {
                let d = (a - b).abs().max().double_value(&[]);
                assert!(
                    d < 1e-5 * (1.0 + b.abs().max().double_value(&[])),
                    "{name} ({reduce:?}, LN {layer_norm}): {d}"
                );
            }
        }
    }
}
