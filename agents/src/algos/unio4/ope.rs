//! AM-Q, Uni-O4's offline policy evaluation (`dynamics_eval.py rollout, dynamics_eval`): from
//! a batch of random dataset states, roll the learned model `H` steps with the policy's
//! deterministic (mean) action clipped to `[−1, 1]`, and score the policy by the mean of the
//! critic's `min_j Q_j(s_t, a_t)` over **every visited** `(s_t, a_t)`:
//! `AM-Q(π) = Σ_{rollouts} Σ_{t < T_k} Q(s_t, π(s_t)) / Σ_k T_k`, where rollout k stops after the
//! step whose next state the task's termination rule ends (`T_k ≤ H`). Model rewards are not
//! used. Every `eval_step` BPPO steps each member is scored on its own fresh start states; its
//! π_old is replaced by π only when the score beats the member's best so far.

use crate::AgentError;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// OPE settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpeConfig {
    /// Model steps per rollout H (`rollout_step`: 1000 locomotion).
    pub horizon: usize,
    /// BPPO steps between evaluations (`eval_step`: 100).
    pub eval_step: u64,
    /// Random dataset states each evaluation starts from (512).
    pub start_states: usize,
}

impl Default for OpeConfig {
    fn default() -> Self {
        Self { horizon: 1000, eval_step: 100, start_states: 512 }
    }
}

impl OpeConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.horizon == 0 || self.eval_step == 0 || self.start_states == 0 {
            return Err(AgentError::Config(format!(
                "unio4.ope: horizon, eval_step and start_states must be ≥ 1, found {}, {}, {}",
                self.horizon, self.eval_step, self.start_states
            )));
        }
        Ok(())
    }
}

/// What one AM-Q evaluation needs: the policy's deterministic action, the critic, the model and
/// the termination rule, all on raw states `[B, o]`.
pub struct Rollout<'a> {
    /// `π(s)` `[B, a]` (clipped to `[−1, 1]` here).
    pub policy: &'a mut dyn FnMut(&Tensor) -> Tensor,
    /// `min_j Q_j(s, a)` `[B]`.
    pub q: &'a mut dyn FnMut(&Tensor, &Tensor) -> Tensor,
    /// One model step `s′` `[B, o]`.
    pub step: &'a mut dyn FnMut(&Tensor, &Tensor) -> Tensor,
    /// Which next states end their rollout, `[B]` booleans.
    pub done: &'a dyn Fn(&Tensor) -> Tensor,
}

/// AM-Q of a policy from `start` `[B, o]` over `horizon` steps (see the module docs).
pub fn am_q(start: &Tensor, horizon: usize, r: Rollout<'_>) -> f64 {
    am_q_with_length(start, horizon, r).0
}

/// [`am_q`] and the mean number of model steps a rollout lasted (`Σ_k T_k / B`): how long the
/// policy stays clear of the termination rule in the model, for diagnostics.
pub fn am_q_with_length(start: &Tensor, horizon: usize, r: Rollout<'_>) -> (f64, f64) {
    let rows = start.size()[0].max(1) as f64;
    tch::no_grad(|| {
        let (mut sum, mut count) = (0.0f64, 0i64);
        let mut s = start.shallow_clone();
        for _ in 0..horizon {
            let a = (r.policy)(&s).clamp(-1.0, 1.0);
            sum += (r.q)(&s, &a).sum(Kind::Double).double_value(&[]);
            count += s.size()[0];
            let next = (r.step)(&s, &a);
            // Rollouts whose next state ends the task are dropped from here on.
            let alive = (r.done)(&next).logical_not().nonzero().squeeze_dim(1);
            if alive.size()[0] == 0 {
                break;
            }
            s = next.index_select(0, &alive);
        }
        let score = if count == 0 { f64::NAN } else { sum / count as f64 };
        (score, count as f64 / rows)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// Test 2 of §1.8: known dynamics s′ = s + a, a constant policy a = 0.5, Q(s, a) = s + 2a,
    /// termination at s > 2, H = 4, from s₀ ∈ {0, 1, 1.6}:
    /// row 0 visits s = 0, .5, 1, 1.5 (Q = 1, 1.5, 2, 2.5; s = 2 is not > 2, so it survives H);
    /// row 1 visits 1, 1.5, 2 (Q = 2, 2.5, 3; the next state 2.5 ends it);
    /// row 2 visits 1.6 (Q = 2.6; 2.1 ends it). Mean of the 8 values: 17.1 / 8 = 2.1375.
    #[test]
    fn am_q_on_linear_dynamics_equals_the_hand_computed_mean() {
        let start = Tensor::from_slice(&[0.0f32, 1.0, 1.6]).view([3, 1]);
        let mut policy = |s: &Tensor| s.zeros_like() + 0.5;
        let mut q = |s: &Tensor, a: &Tensor| (s + a * 2.0).squeeze_dim(1);
        let mut step = |s: &Tensor, a: &Tensor| s + a;
        let done = |s: &Tensor| s.gt(2.0).squeeze_dim(1);
        let score = am_q(&start, 4, Rollout { policy: &mut policy, q: &mut q, step: &mut step, done: &done });
        assert!((score - 2.1375).abs() < 1e-6, "{score}");
        // The rollouts lasted 4, 3 and 1 steps.
        let (again, length) =
            am_q_with_length(&start, 4, Rollout { policy: &mut policy, q: &mut q, step: &mut step, done: &done });
        assert_eq!((again, length), (score, 8.0 / 3.0));
        // Actions are clipped to [−1, 1] before Q and the model see them.
        let mut big = |s: &Tensor| s.zeros_like() + 5.0;
        let score = am_q(
            &Tensor::zeros([1, 1], (Kind::Float, Device::Cpu)),
            1,
            Rollout { policy: &mut big, q: &mut q, step: &mut step, done: &done },
        );
        assert!((score - 2.0).abs() < 1e-6, "{score}");
    }
}
