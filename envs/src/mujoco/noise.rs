//! The env's random source and the two reset-noise distributions Gymnasium's MuJoCo tasks use.
//!
//! The stream is ChaCha8 seeded from a `u64`, so a seed gives the same episode starts on every
//! machine. (Gymnasium's stream is NumPy's PCG64, which we do not reproduce: parity checks
//! compare dynamics from a shared initial state, not the noise draws themselves.)

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The env's random source.
pub type EnvRng = ChaCha8Rng;

/// A fresh random source from `seed`.
pub fn rng_from_seed(seed: u64) -> EnvRng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Add U[−c, c) to every element (Gymnasium: `np_random.uniform(low=-c, high=c)`).
pub fn add_uniform(rng: &mut EnvRng, x: &mut [f64], c: f64) {
    for v in x {
        // low + (high − low)·u, u ∈ [0, 1)
        *v += -c + 2.0 * c * rng.gen::<f64>();
    }
}

/// Add c·N(0, 1) to every element (Gymnasium: `c * np_random.standard_normal(n)`).
pub fn add_normal(rng: &mut EnvRng, x: &mut [f64], c: f64) {
    for v in x {
        *v += c * standard_normal(rng);
    }
}

/// One N(0, 1) draw by Box–Muller: z = √(−2 ln u₁) · cos(2π u₂), u₁ ∈ (0, 1], u₂ ∈ [0, 1).
pub fn standard_normal(rng: &mut EnvRng) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>();
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut rng = rng_from_seed(1);
        let mut x = vec![0.0; 10_000];
        add_uniform(&mut rng, &mut x, 0.1);
        assert!(x.iter().all(|v| (-0.1..0.1).contains(v)));
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        assert!(mean.abs() < 0.003, "mean {mean}");
        assert!(x.iter().any(|v| *v < -0.099) && x.iter().any(|v| *v > 0.099));
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut rng = rng_from_seed(2);
        let mut x = vec![0.0; 20_000];
        add_normal(&mut rng, &mut x, 1.0);
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / x.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.04, "var {var}");
    }

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (rng_from_seed(7), rng_from_seed(7));
        assert_eq!(standard_normal(&mut a), standard_normal(&mut b));
        let mut c = rng_from_seed(8);
        assert_ne!(standard_normal(&mut a), standard_normal(&mut c));
    }
}
