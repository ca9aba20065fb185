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
    fn success_threshold() {
        assert!(success_from_progress(0.96, 0.05).unwrap());
        assert!(!success_from_progress(0.94, 0.05).unwrap());
        assert!(success_from_progress(0.5, 1.0).is_err());
    }
}
