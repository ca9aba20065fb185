//! Potential-based shaping leaves the optimal policy unchanged: over a terminated episode the
//! discounted sum of shaping terms equals −Φ(s₀), whatever the trajectory. Computed on libtorch
//! tensors (the batch path) and checked against the scalar path.

use o2o_reward_models::PotentialShaping;
use tch::{Kind, Tensor};

#[test]
fn discounted_shaping_sum_is_minus_initial_potential() {
    let gamma = 0.97;
    let shaping = PotentialShaping::new(gamma).unwrap();
    // Two different trajectories of potentials starting from the same Φ(s₀) = 0.2.
    for potentials in [vec![0.2, 0.4, 0.1, 0.9, 0.7], vec![0.2, 0.95, 0.3, 0.3, 0.05, 0.6]] {
        let n = potentials.len() - 1;
        let phi = Tensor::from_slice(&potentials[..n]).to_kind(Kind::Double);
        let phi_next = Tensor::from_slice(&potentials[1..]).to_kind(Kind::Double);
        let mut term = vec![0.0f64; n];
        term[n - 1] = 1.0; // the episode ends with a true termination
        let terminal = Tensor::from_slice(&term);
        let reward = Tensor::zeros([n as i64], (Kind::Double, tch::Device::Cpu));
        let shaped = shaping.shape_batch(&reward, &phi, &phi_next, &terminal);
        let shaped: Vec<f64> = Vec::try_from(shaped).unwrap();
        let discounted: f64 = shaped.iter().enumerate().map(|(t, f)| gamma.powi(t as i32) * f).sum();
        assert!((discounted + potentials[0]).abs() < 1e-12, "Σγ^t F = {discounted}, want {}", -potentials[0]);
        for t in 0..n {
            let scalar = shaping.shape(0.0, potentials[t], potentials[t + 1], t == n - 1);
            assert!((scalar - shaped[t]).abs() < 1e-12);
        }
    }
}
