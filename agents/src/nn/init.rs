//! Weight initialization from the agent's own random stream.
//!
//! Orthogonal initialization (Saxe et al. 2014), the default of the JAX reference code
//! (jaxrl / WSRL `default_init`): draw a Gaussian matrix, take Q of its QR decomposition, fix
//! the signs by diag(R), scale by `gain`. The Gaussian draw comes from [`AgentRng`], so the same
//! seed gives the same network without touching libtorch's global generator.

use crate::rng::AgentRng;
use tch::{Device, Tensor};

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
