//! A critic ensemble `Q_θ` with its Polyak target `Q̄` (SAC and its variants, IQL): building the
//! pair, and one critic step `θ ← Adam(θ, ∇_θ L)`, then `θ̄ ← (1 − τ) θ̄ + τ θ`, where the
//! algorithm writes its loss `L` from the Q-values `Q_i(s, a)` of [`CriticPass::new`].
//!
//! On the CPU the ensemble takes its taped pass ([`EnsembleMlp::forward_taped`]): `L` is
//! differentiated in the Q-values alone, their gradient is carried through the networks by
//! [`EnsembleMlp::backward_loss`], and Adam and the Polyak step share one pass over the weights
//! ([`Adam::apply_and_track`]). Elsewhere autograd does the whole of it, then [`polyak_update`].

use super::ensemble::EnsembleTape;
use super::floats::floats;
use super::{polyak_update, Adam, EnsembleMlp, MlpConfig, ParamSet};
use crate::rng::AgentRng;
use tch::{Device, Kind, Tensor};

/// `members` one-output critics on `in_dim` inputs, registered as `critic/…`, and their target,
/// registered as `critic_target/…`, with `θ̄ = θ` and no gradients:
/// `(critic, critic_params, target, target_params)`. The target draws its own initialization
/// from `rng` after the critic's (then overwritten), as two separate constructions would.
pub(crate) fn critic_and_target(
    members: i64,
    in_dim: i64,
    cfg: &MlpConfig,
    rng: &mut AgentRng,
    device: Device,
) -> (EnsembleMlp, ParamSet, EnsembleMlp, ParamSet) {
    let mut critic_params = ParamSet::new();
    let critic = EnsembleMlp::new(&mut critic_params, "critic", members, in_dim, 1, cfg, 1.0, rng, device);
    let mut target_params = ParamSet::new();
    let target = EnsembleMlp::new(&mut target_params, "critic_target", members, in_dim, 1, cfg, 1.0, rng, device);
    target_params.copy_from(&critic_params);
    target_params.set_requires_grad(false);
    (critic, critic_params, target, target_params)
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

/// The elements of a one-dimensional float32 CPU tensor of any stride (a minibatch's strided
/// view of a column), read without a libtorch op; `None` for any other tensor.
fn elements_1d(t: &Tensor) -> Option<Vec<f32>> {
    if t.device() != Device::Cpu || t.kind() != Kind::Float || t.dim() != 1 {
        return None;
    }
    let (len, stride) = (t.size()[0] as usize, t.stride()[0] as isize);
    let base = t.data_ptr() as *const f32;
    // SAFETY: a float32 CPU tensor of `len` elements `stride` apart from its data pointer
    // (which includes the view's offset); they are only read, before this returns.
    Some((0..len).map(|i| unsafe { *base.offset(i as isize * stride) }).collect())
}

/// The TD target `y = r + γ (1 − d) (min_i Q̄_i − α log π(a'|s'))` `[B]` on the CPU in one pass
/// over the rows, from the subset's target values `q_next` `[M, B]`, `log π(a'|s')`, the rows'
/// rewards and done flags, with `alpha` only where the entropy enters the backup; `None` (the
/// caller's tensor ops) off the CPU or for other layouts. Each row is computed in the tensor
/// ops' order with the same float32 roundings (`1 − d`, times γ, times the bracket, plus r), so
/// it equals them bit for bit; it saves their seven small passes and dispatches.
pub(crate) fn td_target_cpu(
    q_next: &Tensor,
    next_logp: &Tensor,
    reward: &Tensor,
    terminal: &Tensor,
    alpha: Option<&Tensor>,
    gamma: f64,
) -> Option<Tensor> {
    if q_next.device() != Device::Cpu || q_next.kind() != Kind::Float || q_next.dim() != 2 || !q_next.is_contiguous() {
        return None;
    }
    let (members, rows) = (q_next.size()[0] as usize, q_next.size()[1] as usize);
    let (logp, r, d) = (elements_1d(next_logp)?, elements_1d(reward)?, elements_1d(terminal)?);
    let alpha = match alpha {
        Some(a) if a.device() == Device::Cpu && a.kind() == Kind::Float && a.numel() == 1 => {
            Some(a.double_value(&[0]) as f32)
        }
        Some(_) => return None,
        None => None,
    };
    if members == 0 || [logp.len(), r.len(), d.len()] != [rows; 3] {
        return None;
    }
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
/// the loss (a logged value) summed in float64. `None` off the CPU or for other layouts.
pub(crate) fn squared_td_grad_cpu(q: &Tensor, y: &Tensor) -> Option<(Tensor, Tensor)> {
    if q.device() != Device::Cpu || q.kind() != Kind::Float || q.dim() != 2 || !q.is_contiguous() {
        return None;
    }
    let (members, rows) = (q.size()[0] as usize, q.size()[1] as usize);
    let y = elements_1d(y)?;
    if y.len() != rows || members * rows == 0 {
        return None;
    }
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

    /// Whether the pass is the taped one, for [`CriticPass::step_from_grad`].
    pub fn is_taped(&self) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            let mut bracket = q_next.amin(0, false);
            if with_entropy {
                bracket = bracket - &alpha * &logp;
            }
            let want = &reward + (1.0 - &terminal) * 0.99 * bracket;
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
}
