//! Progress Φ from hops: the three reconstructions of Robo-Dopamine (paper §3, released
//! `examples/inference.py` for the per-mode formulas), their average and the optional
//! consistency-weighted update. The released code has no fusion; the average and the
//! weighting follow the paper.
//!
//! - incremental:        Φ_I(s_t) = Φ(s_{t−1}) + ΔΦ,  ΔΦ = (1 − Φ(s_{t−1}))·h if h ≥ 0 else Φ(s_{t−1})·h,
//!   with h = H(s_{t−1}, s_t) and Φ(s_0) = 0;
//! - forward-anchored:   Φ_F(s_t) = H(s_init, s_t);
//! - backward-anchored:  Φ_B(s_t) = 1 + H(s_goal, s_t);
//! - fused:              Φ* = (Φ_I + Φ_F + Φ_B) / 3;
//! - consistency weight: Φ̄ = (Φ_F + Φ_B)/2, Δ = |Φ_B − Φ_F| / (Φ̄ + ε), w = exp(−α Δ²),
//!   Φ*(s_t) = Φ*(s_{t−1}) + (w/2)·(Φ̄(s_t) − Φ*(s_{t−1}) + ΔΦ*), ΔΦ* the incremental step from Φ*(s_{t−1}).
//!
//! Under exact hops (H computed from the true Φ) every form returns the true Φ: the forward
//! anchor gives H(s_0, s_t) = Φ_t directly, the backward one H(goal, s_t) = Φ_t − 1, and the
//! incremental one telescopes. Fusion therefore only averages model errors.

use serde::{Deserialize, Serialize};

/// Which estimate of Φ to use as the potential. Only [`Fusion::Backward`] is Markov (a function
/// of the state alone, the goal anchor being fixed by the model), which potential-based shaping
/// needs for its guarantee; the others depend on the episode's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fusion {
    /// Φ_I only (history-dependent: the whole path).
    Incremental,
    /// Φ_F only (history-dependent: a function of (s_0, s_t)).
    Forward,
    /// Φ_B only (Markov: a function of s_t, the goal anchor being the model's).
    Backward,
    /// (Φ_I + Φ_F + Φ_B) / 3 (history-dependent).
    Mean,
    /// The consistency-weighted update with weight exp(−α Δ²) (history-dependent).
    Weighted,
}

impl Fusion {
    /// Whether the estimate is a function of the current state alone (only `backward`).
    pub fn is_markov(self) -> bool {
        self == Fusion::Backward
    }
}

/// One incremental step: Φ(s_{t−1}) and h = H(s_{t−1}, s_t) → Φ(s_t). Stays in [0, 1] when Φ(s_{t−1}) ∈ [0, 1] and h ∈ [−1, 1].
pub fn incremental_step(phi_prev: f64, h: f64) -> f64 {
    let delta = if h >= 0.0 { (1.0 - phi_prev) * h } else { phi_prev * h };
    phi_prev + delta
}

/// Φ_I over an episode from consecutive hops h_t = H(s_{t−1}, s_t); returns Φ(s_0..=s_T), Φ(s_0) = 0.
pub fn incremental(hops: &[f64]) -> Vec<f64> {
    let mut phi = Vec::with_capacity(hops.len() + 1);
    phi.push(0.0);
    for &h in hops {
        let last = phi[phi.len() - 1];
        phi.push(incremental_step(last, h));
    }
    phi
}

/// Φ_F(s_t) = H(s_init, s_t).
pub fn forward(h_from_start: f64) -> f64 {
    h_from_start
}

/// Φ_B(s_t) = 1 + H(s_goal, s_t).
pub fn backward(h_from_goal: f64) -> f64 {
    1.0 + h_from_goal
}

/// Φ* = (Φ_I + Φ_F + Φ_B) / 3.
pub fn mean(phi_i: f64, phi_f: f64, phi_b: f64) -> f64 {
    (phi_i + phi_f + phi_b) / 3.0
}

/// w = exp(−α Δ²), Δ = |Φ_B − Φ_F| / ((Φ_F + Φ_B)/2 + ε).
pub fn consistency_weight(phi_f: f64, phi_b: f64, alpha: f64, eps: f64) -> f64 {
    let bar = 0.5 * (phi_f + phi_b);
    let d = (phi_b - phi_f).abs() / (bar + eps);
    (-alpha * d * d).exp()
}

/// The three hops seen at one step of an episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepHops {
    /// H(s_{t−1}, s_t).
    pub incremental: f64,
    /// H(s_init, s_t).
    pub from_start: f64,
    /// H(s_goal, s_t).
    pub from_goal: f64,
}

/// Every estimate at one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Φ_I.
    pub incremental: f64,
    /// Φ_F.
    pub forward: f64,
    /// Φ_B.
    pub backward: f64,
    /// (Φ_I + Φ_F + Φ_B) / 3.
    pub mean: f64,
    /// The consistency-weighted Φ*.
    pub weighted: f64,
    /// Its weight w.
    pub weight: f64,
}

impl Estimate {
    /// The estimate a [`Fusion`] selects.
    pub fn get(&self, fusion: Fusion) -> f64 {
        match fusion {
            Fusion::Incremental => self.incremental,
            Fusion::Forward => self.forward,
            Fusion::Backward => self.backward,
            Fusion::Mean => self.mean,
            Fusion::Weighted => self.weighted,
        }
    }
}

/// Running reconstruction along one episode: feed the hops of each new state with [`Tracker::step`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracker {
    alpha: f64,
    eps: f64,
    phi_i: f64,
    phi_w: f64,
}

impl Tracker {
    /// A tracker at s_0 (every estimate 0) with consistency sharpness α and ε.
    pub fn new(alpha: f64, eps: f64) -> Self {
        Self { alpha, eps, phi_i: 0.0, phi_w: 0.0 }
    }

    /// Back to s_0.
    pub fn reset(&mut self) {
        self.phi_i = 0.0;
        self.phi_w = 0.0;
    }

    /// Advance to s_t with its hops.
    pub fn step(&mut self, h: StepHops) -> Estimate {
        self.phi_i = incremental_step(self.phi_i, h.incremental);
        let (f, b) = (forward(h.from_start), backward(h.from_goal));
        let w = consistency_weight(f, b, self.alpha, self.eps);
        let step = incremental_step(self.phi_w, h.incremental) - self.phi_w;
        self.phi_w += 0.5 * w * (0.5 * (f + b) - self.phi_w + step);
        Estimate {
            incremental: self.phi_i,
            forward: f,
            backward: b,
            mean: mean(self.phi_i, f, b),
            weighted: self.phi_w,
            weight: w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_is_one_when_anchors_agree_and_small_when_they_disagree() {
        assert!((consistency_weight(0.4, 0.4, 20.0, 1e-6) - 1.0).abs() < 1e-12);
        // Δ = 0.2/0.5 = 0.4, w = exp(−20·0.16) = exp(−3.2)
        assert!((consistency_weight(0.4, 0.6, 20.0, 0.0) - (-3.2f64).exp()).abs() < 1e-12);
    }

    #[test]
    fn incremental_step_examples() {
        assert!((incremental_step(0.5, 0.5) - 0.75).abs() < 1e-15);
        assert!((incremental_step(0.5, -0.5) - 0.25).abs() < 1e-15);
        assert_eq!(incremental_step(0.3, -1.0), 0.0);
        assert_eq!(incremental_step(0.3, 1.0), 1.0);
    }
}
