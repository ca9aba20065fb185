//! Polyak (exponential moving average) target update: `θ̄ ← (1 − τ) θ̄ + τ θ`.

use super::ParamSet;
use tch::Tensor;

/// `θ̄ ← (1 − τ) θ̄ + τ θ` for every tensor, in place and without gradient tracking. The two
/// sets come from the same constructor (same names in the same order); that is checked once
/// here and a mismatch is a programming error.
pub fn polyak_update(target: &ParamSet, online: &ParamSet, tau: f64) {
    assert_eq!(target.named().len(), online.named().len(), "polyak_update: parameter sets differ in length");
    tch::no_grad(|| {
        for ((tn, t), (on, o)) in target.named().iter().zip(online.named()) {
            debug_assert!(
                tn.rsplit('/').next() == on.rsplit('/').next() && t.size() == o.size(),
                "polyak_update: {tn} vs {on}"
            );
            polyak_one(t, o, tau);
        }
    });
}

/// One tensor's step, `θ̄ ← θ̄ + τ (θ − θ̄)` in place (callers hold no gradient graph).
pub(crate) fn polyak_one(target: &Tensor, online: &Tensor, tau: f64) {
    // lerp: t + τ (o − t) = (1 − τ) t + τ o.
    let _ = target.shallow_clone().lerp_(online, tau);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Tensor};

    #[test]
    fn moves_target_by_tau() {
        let mut t = ParamSet::new();
        let mut o = ParamSet::new();
        let th = t.add("target/w", Tensor::from_slice(&[1.0f32, -2.0]), Device::Cpu);
        let _ = o.add("critic/w", Tensor::from_slice(&[3.0f32, 2.0]), Device::Cpu);
        polyak_update(&t, &o, 0.25);
        let v = Vec::<f32>::try_from(&th.detach()).unwrap();
        assert_eq!(v, vec![0.75 * 1.0 + 0.25 * 3.0, 0.75 * -2.0 + 0.25 * 2.0]);
    }
}
