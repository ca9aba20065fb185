//! A critic ensemble `Q_θ` with its Polyak target `Q̄` (SAC and its variants, IQL): building the
//! pair, and one critic step `θ ← Adam(θ, ∇_θ L)`, then `θ̄ ← (1 − τ) θ̄ + τ θ`, where the
//! algorithm writes its loss `L` from the Q-values `Q_i(s, a)` of [`CriticPass::new`].
//!
//! On the CPU the ensemble takes its taped pass ([`EnsembleMlp::forward_taped`]): `L` is
//! differentiated in the Q-values alone, their gradient is carried through the networks by
//! [`EnsembleMlp::backward_loss`], and Adam and the Polyak step share one pass over the weights
//! ([`Adam::apply_and_track`]). Elsewhere autograd does the whole of it, then [`polyak_update`].

use super::{polyak_update, Adam, EnsembleMlp, MlpConfig, ParamSet};
use super::ensemble::EnsembleTape;
use crate::rng::AgentRng;
use tch::{Device, Kind, Tensor};

/// `members` one-output critics on `in_dim` inputs, registered as `critic/…`, and their target,
/// registered as `critic_target/…`, with `θ̄ = θ` and no gradients:
/// `(critic, critic_params, target, target_params)`. The target draws its own initialization
/// from `rng` after the critic's (then overwritten), as two separate constructions would.
pub(crate) fn critic_and_target(members: i64, in_dim: i64, cfg: &MlpConfig, rng: &mut AgentRng, device: Device) -> (EnsembleMlp, ParamSet, EnsembleMlp, ParamSet) {
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
    tch::no_grad(|| critic.forward(&state_action(&obs.to_device(device), &action.to_device(device)), None).squeeze_dim(-1))
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
    pub fn step(self, critic: &EnsembleMlp, opt: &mut Adam, params: &ParamSet, target: &ParamSet, tau: f64, loss: &Tensor, extra: Option<&[Tensor]>) -> Tensor {
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
                        let linear = params.named().iter().zip(g).map(|((_, p), g)| (p * g).sum(Kind::Float)).fold(loss.zeros_like(), |acc, t| acc + t);
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
    pub fn step_from_grad(self, critic: &EnsembleMlp, opt: &mut Adam, params: &ParamSet, target: &ParamSet, tau: f64, grad_q: &Tensor, extra: Option<&[Tensor]>) -> Tensor {
        let tape = self.tape.expect("step_from_grad needs the taped pass");
        let grads = critic.backward_params(tape, grad_q);
        Self::adam_and_polyak(grads, opt, params, target, tau, extra);
        self.q.detach()
    }

    /// `∇ + extra`, one Adam step, and `θ̄ ← (1 − τ) θ̄ + τ θ` in the same pass over the weights.
    fn adam_and_polyak(mut grads: Vec<Tensor>, opt: &mut Adam, params: &ParamSet, target: &ParamSet, tau: f64, extra: Option<&[Tensor]>) {
        if let Some(extra) = extra {
            tch::no_grad(|| grads.iter_mut().zip(extra).for_each(|(g, e)| {
                let _ = g.g_add_(e);
            }));
        }
        opt.apply_and_track(params, &grads, target, tau);
    }
}
