//! Weight initialization from the agent's own random stream.
//!
//! Orthogonal initialization (Saxe et al. 2014), the default of the JAX reference code
//! (jaxrl / WSRL `default_init`): draw a Gaussian matrix, take Q of its QR decomposition, fix
//! the signs by diag(R), scale by `gain`. Or PyTorch's `nn.Linear` default (CleanRL, CORL):
//! weights and biases uniform on `±1/√fan_in`. The draws come from [`AgentRng`], so the same
//! seed gives the same network without touching libtorch's global generator.

use crate::rng::AgentRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// How a dense layer's weight and bias start (`init` in an MLP's settings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightInit {
    /// Orthogonal weights with gain √2 in hidden layers and the network's head gain on the
    /// output layer, zero biases (jaxrl, WSRL, RLPD).
    #[default]
    Orthogonal,
    /// PyTorch's `nn.Linear` default: weight and bias uniform on `±1/√fan_in`, gains ignored
    /// (CleanRL, CORL). On Hopper-v5, 5 seeds × 100k steps, SAC with it ended lower than with
    /// `Orthogonal` (final IQM 497 against 1035; BENCHMARKS.md, "The initialization study").
    FanInUniform,
    /// Glorot/Xavier uniform (flax `xavier_uniform`, RLPD's `default_init` for every layer,
    /// heads included; fidelity-audit D20): weights uniform on `±√(6 / (fan_in + fan_out))`,
    /// zero biases, gains ignored.
    XavierUniform,
}

/// A dense layer's `([fan_in, fan_out]` weight, `[fan_out]` bias`)` drawn per `init`.
pub fn dense(rng: &mut AgentRng, fan_in: i64, fan_out: i64, gain: f64, init: WeightInit) -> (Tensor, Tensor) {
    match init {
        WeightInit::Orthogonal => {
            (orthogonal(rng, fan_in, fan_out, gain), Tensor::zeros([fan_out], (Kind::Float, Device::Cpu)))
        }
        WeightInit::FanInUniform => {
            let bound = 1.0 / (fan_in as f64).sqrt();
            let mut uniform = |shape: &[i64]| rng.uniform_tensor(shape, Device::Cpu) * (2.0 * bound) - bound;
            (uniform(&[fan_in, fan_out]), uniform(&[fan_out]))
        }
        WeightInit::XavierUniform => {
            let bound = (6.0 / (fan_in + fan_out) as f64).sqrt();
            (
                rng.uniform_tensor(&[fan_in, fan_out], Device::Cpu) * (2.0 * bound) - bound,
                Tensor::zeros([fan_out], (Kind::Float, Device::Cpu)),
            )
        }
    }
}

/// An orthogonal `[fan_in, fan_out]` matrix scaled by `gain` (rows or columns orthonormal,
/// whichever are fewer).
pub fn orthogonal(rng: &mut AgentRng, fan_in: i64, fan_out: i64, gain: f64) -> Tensor {
    let (rows, cols) = (fan_in.max(fan_out), fan_in.min(fan_out));
    let a = Tensor::from_slice(&rng.normal_vec((rows * cols) as usize)).view([rows, cols]).to_kind(tch::Kind::Double);
    let (q, r) = Tensor::linalg_qr(&a, "reduced");
    let q = q * r.diagonal(0, 0, 1).sign().unsqueeze(0); // [rows, cols], orthonormal columns
    let q = if fan_in >= fan_out { q } else { q.tr() };
    (q * gain).to_kind(tch::Kind::Float).contiguous().to_device(Device::Cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fan_in_uniform_bounds_and_spread() {
        let mut rng = AgentRng::new(1);
        let (w, b) = dense(&mut rng, 64, 256, 2.0, WeightInit::FanInUniform);
        assert_eq!((w.size(), b.size()), (vec![64, 256], vec![256]));
        let bound = 1.0 / 8.0;
        for t in [&w, &b] {
            assert!(t.abs().max().double_value(&[]) <= bound);
        }
        // Uniform on ±b has standard deviation b/√3.
        let sd = w.std(true).double_value(&[]);
        assert!((sd - bound / 3f64.sqrt()).abs() < 0.005, "{sd}");
        // Xavier: ±√(6 / (64 + 256)), zero bias.
        let (w, b) = dense(&mut rng, 64, 256, 2.0, WeightInit::XavierUniform);
        let bound = (6.0f64 / 320.0).sqrt();
        assert!(w.abs().max().double_value(&[]) <= bound && b.abs().max().double_value(&[]) == 0.0);
        assert!((w.std(true).double_value(&[]) - bound / 3f64.sqrt()).abs() < 0.005);
        let (w, b) = dense(&mut rng, 64, 256, 2.0, WeightInit::Orthogonal);
        assert_eq!(b.abs().max().double_value(&[]), 0.0);
        assert!(
            (w.tr().matmul(&w).diagonal(0, 0, 1).mean(Kind::Float).double_value(&[]) - 4.0 * 64.0 / 256.0).abs() < 1e-3
        );
    }

    #[test]
    fn columns_or_rows_are_orthonormal() {
        let mut rng = AgentRng::new(0);
        for (i, o) in [(23, 256), (256, 256), (256, 1)] {
            let w = orthogonal(&mut rng, i, o, 2.0);
            assert_eq!(w.size(), vec![i, o]);
            let g = if i >= o { w.tr().matmul(&w) } else { w.matmul(&w.tr()) };
            let n = i.min(o);
            let eye = Tensor::eye(n, (tch::Kind::Float, Device::Cpu)) * 4.0;
            let err = (g - eye).abs().max().double_value(&[]);
            assert!(err < 1e-4, "{i}x{o}: {err}");
        }
    }
}
