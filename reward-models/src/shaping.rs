//! Potential-based reward shaping (Ng, Harada & Russell, ICML 1999), the form Dopamine-RL uses
//! to turn a progress estimate Φ(s) ∈ [0, 1] into a dense reward without changing which policy
//! is optimal:
//!
//!   F(s, s') = γ·Φ(s') − Φ(s),        r' = r + F(s, s')
//!
//! Over an episode that ends in a true termination, Σ_t γ^t F = −Φ(s₀) provided Φ(terminal) := 0,
//! so Q'(s, a) = Q(s, a) − Φ(s) and the argmax over actions is unchanged. A time-limit
//! truncation is not an end of the task: there Φ(s') is kept, matching how the critic still
//! bootstraps from s'.

use tch::Tensor;

/// Errors from building a shaping term.
#[derive(Debug, thiserror::Error)]
pub enum ShapingError {
    /// The discount is outside (0, 1].
    #[error("discount γ must be in (0, 1], found {0}")]
    Discount(f64),
    /// The success threshold is outside [0, 1).
    #[error("success threshold δ must be in [0, 1), found {0}")]
    Delta(f64),
}

/// The shaping term F(s, s') = γ·Φ(s') − Φ(s) with Φ(terminal) = 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PotentialShaping {
    gamma: f64,
}

impl PotentialShaping {
    /// Shaping for discount `gamma`; it must equal the learner's discount for invariance.
    pub fn new(gamma: f64) -> Result<Self, ShapingError> {
        if !(gamma > 0.0 && gamma <= 1.0) {
            return Err(ShapingError::Discount(gamma));
        }
        Ok(Self { gamma })
    }

    /// The discount the term was built for.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// F(s, s') for one transition; `terminated` zeroes Φ(s').
    pub fn bonus(&self, phi: f64, phi_next: f64, terminated: bool) -> f64 {
        let phi_next = if terminated { 0.0 } else { phi_next };
        self.gamma * phi_next - phi
    }

    /// r + F(s, s') for one transition.
    pub fn shape(&self, reward: f64, phi: f64, phi_next: f64, terminated: bool) -> f64 {
        reward + self.bonus(phi, phi_next, terminated)
    }

    /// r + F(s, s') for a batch; `terminal` holds 1.0 for true terminations, 0.0 otherwise.
    /// All tensors have shape `[B]`.
    pub fn shape_batch(&self, reward: &Tensor, phi: &Tensor, phi_next: &Tensor, terminal: &Tensor) -> Tensor {
        let keep = terminal.ones_like() - terminal;
        reward + phi_next * keep * self.gamma - phi
    }
}

/// The naive comparison reward r_gold + Φ(s') − Φ(s): progress gained, with Φ(s') as
/// estimated even after a true termination (`shaping.mode = "naive"`). Summed with discount γ
/// over an episode it is −Φ(s₀) + (1 − γ) Σ_{t=1}^{T−1} γ^{t−1} Φ(s_t) + γ^{T−1} Φ(s_T) (plus
/// the gold rewards): the last term pays for the state the episode ends in at full weight, so
/// with an exact Φ that peaks at the goal this reward keeps the sparse task's optimum.
pub fn naive_reward(gold: f64, phi: f64, phi_next: f64) -> f64 {
    gold + phi_next - phi
}

/// The per-step progress reward r_gold + λ·Φ(s'), with Φ(s') := 0 after a true termination
/// (`shaping.mode = "progress"`). Its discounted return is Σ γ^t r_gold + λ Σ_{t=1}^{T−1}
/// γ^{t−1} Φ(s_t): the objective Robo-Dopamine shows its naive reward Φ(s') − Φ(s) amounts
/// to, Σ γ^{t−1} Φ(s_t) (algorithms.md §5.3), with weight λ. It pays every step spent in a
/// high-progress state and nothing after the episode ends, so where success terminates,
/// hovering just short of it is worth λΦ/(1 − γ) against r_gold for finishing: the semantic
/// trap, whenever λΦ > (1 − γ)·r_gold.
pub fn progress_reward(gold: f64, phi_next: f64, terminated: bool, scale: f64) -> f64 {
    gold + if terminated { 0.0 } else { scale * phi_next }
}

/// Dopamine-RL's automatic success signal: r_gold = 1 when the progress estimate of the next
/// state reaches 1 − δ (δ = 0.05 in the paper), else 0.
pub fn success_from_progress(phi_next: f64, delta: f64) -> Result<bool, ShapingError> {
    if !(0.0..1.0).contains(&delta) {
        return Err(ShapingError::Delta(delta));
    }
    Ok(phi_next >= 1.0 - delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_discounts() {
        assert!(PotentialShaping::new(0.0).is_err());
        assert!(PotentialShaping::new(1.5).is_err());
        assert!(PotentialShaping::new(f64::NAN).is_err());
        assert!(PotentialShaping::new(1.0).is_ok());
    }

    #[test]
    fn terminal_potential_is_zero_and_truncation_keeps_it() {
        let s = PotentialShaping::new(0.9).unwrap();
        assert_eq!(s.bonus(0.5, 0.8, true), -0.5);
        assert!((s.bonus(0.5, 0.8, false) - (0.9 * 0.8 - 0.5)).abs() < 1e-12);
    }

    #[test]
    fn naive_keeps_the_next_potential_and_progress_zeroes_it_at_a_termination() {
        assert!((naive_reward(1.0, 0.8, 1.0) - 1.2).abs() < 1e-12);
        assert!((progress_reward(0.0, 0.8, false, 0.1) - 0.08).abs() < 1e-12);
        assert_eq!(progress_reward(1.0, 0.95, true, 0.1), 1.0, "the absorbing state has no progress");
    }

    #[test]
    fn success_threshold() {
        assert!(success_from_progress(0.96, 0.05).unwrap());
        assert!(!success_from_progress(0.94, 0.05).unwrap());
        assert!(success_from_progress(0.5, 1.0).is_err());
    }
}
