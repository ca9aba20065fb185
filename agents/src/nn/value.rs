//! A state-value network `V(s)` fitted by expectile regression (IQL's V, Uni-O4's critic,
//! FamO2O's IQL): `L_V = E[ |τ − 1(u < 0)| · u² ]`, `u = q̄ − V(s)`, where `q̄` `[B]` is the
//! regression target (the target critics' min at the data action).
//!
//! [`expectile_step`] is the loss and its gradient for one step. On the CPU fast path
//! ([`MlpPass`], the network's taped pass) the loss's gradient in `V(s)` is formed in closed form,
//! `∂L_V/∂V(s_b) = −2 |τ − 1(u_b < 0)| u_b / B`, and carried through the network by the tape;
//! elsewhere autograd differentiates [`expectile_loss`] (the reference, which a test checks the
//! fast path against).

use super::mlp_pass::MlpPass;
use super::path;
use super::{Mlp, ParamSet};
use crate::rng::AgentRng;
use tch::{Kind, Tensor};

/// The expectile loss `E[|τ − 1(u < 0)| u²]` of residuals `u` `[B]`.
pub(crate) fn expectile_loss(u: &Tensor, expectile: f64) -> Tensor {
    let weight = u.lt(0.0).to_kind(Kind::Float) * (1.0 - 2.0 * expectile) + expectile;
    (weight * u.square()).mean(Kind::Float)
}

/// `(L_V, ∂L_V/∂θ_V)` for `V` on `obs` `[B, obs]` towards `q_target` `[B]`, the gradients in the
/// order of `params` (the value network's parameter set): the closed form on the taped pass,
/// else autograd on [`expectile_loss`] with dropout drawn from `rng` (the reference).
pub(crate) fn expectile_step(
    value: &Mlp,
    params: &ParamSet,
    obs: &Tensor,
    q_target: &Tensor,
    expectile: f64,
    rng: &mut AgentRng,
) -> (Tensor, Vec<Tensor>) {
    if let Some(done) = closed_form(value, params, obs, q_target, expectile) {
        return done;
    }
    // L_V on V's pass, differentiated by autograd (below the output by the tape, where taped).
    let pass = MlpPass::new(value, obs, Some(rng));
    let v = pass.out.squeeze_dim(-1);
    let loss = expectile_loss(&(q_target - v), expectile);
    let grads = pass.grads(&loss, params);
    (loss, grads)
}

/// The fast path: one pass over the rows for `L_V` and `∂L_V/∂V(s)`, then the tape; `None`
/// (having drawn nothing) where the taped pass does not apply or `q̄` is not float32 on the CPU.
fn closed_form(
    value: &Mlp,
    params: &ParamSet,
    obs: &Tensor,
    q_target: &Tensor,
    expectile: f64,
) -> Option<(Tensor, Vec<Tensor>)> {
    if !(path::fast_cpu(q_target) && MlpPass::applies(value, obs)) {
        return None;
    }
    path::hit();
    let pass = MlpPass::new(value, obs, None);
    let v = Vec::<f32>::try_from(pass.out.detach().contiguous().view([-1])).expect("V(s) as floats");
    let q = Vec::<f32>::try_from(q_target.detach().contiguous().view([-1])).expect("q̄ as floats");
    let (rows, tau) = (v.len(), expectile as f32);
    let (mut grad, mut loss) = (vec![0f32; rows], 0f64);
    for ((g, v), q) in grad.iter_mut().zip(&v).zip(&q) {
        let u = q - v;
        let w = if u < 0.0 { 1.0 - tau } else { tau };
        loss += (w * u * u) as f64;
        *g = -2.0 * w * u / rows as f32;
    }
    let grad = Tensor::from_slice(&grad).view([rows as i64, 1]);
    Some((Tensor::from((loss / rows as f64) as f32), pass.grads_from_out(&grad, params)))
}

/// AWR's advantage weights `w = min(exp(βA), w_max)` for `βA` `[B]`: IQL's actor step (one β)
/// and FamO2O-IQL's universal policy (a β per row) weight `log π(a|s)` by them.
pub(crate) fn advantage_weights(beta_adv: &Tensor, max_weight: f64) -> Tensor {
    beta_adv.exp().clamp_max(max_weight)
}

/// The keys of [`advantage_weight_stats`], in its order.
pub const ADVANTAGE_WEIGHT_STATS: [&str; 2] = ["awr_clipped", "awr_ess"];

/// What the advantage weights `w` `[B]` do to a batch: `awr_clipped`, the share of rows at the clip
/// `w_max`, and `awr_ess`, the effective sample size `(Σw)² / Σw²` as a share of the batch (1: every
/// row weighs the same, behaviour cloning; 1/B: one row carries the step). Neither needs the graph.
pub fn advantage_weight_stats(weight: &Tensor, max_weight: f64) -> [(&'static str, f64); 2] {
    tch::no_grad(|| {
        let w = weight.detach().to_kind(Kind::Double);
        let n = w.numel().max(1) as f64;
        let clipped = w.ge(max_weight).to_kind(Kind::Double).mean(Kind::Double).double_value(&[]);
        let (sum, sum_sq) = (w.sum(Kind::Double).double_value(&[]), w.square().sum(Kind::Double).double_value(&[]));
        let ess = if sum_sq > 0.0 { sum * sum / (n * sum_sq) } else { 0.0 };
        [(ADVANTAGE_WEIGHT_STATS[0], clipped), (ADVANTAGE_WEIGHT_STATS[1], ess)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights [e⁰, e¹, 100 (clipped from e⁵), 100 (e⁶)]: half the rows at the clip, and
    /// (Σw)² / (4 Σw²) by hand.
    #[test]
    fn advantage_weight_stats_count_the_clip_and_the_effective_sample_size() {
        let w = advantage_weights(&Tensor::from_slice(&[0.0f32, 1.0, 5.0, 6.0]), 100.0);
        let e = std::f64::consts::E;
        let want: Vec<f64> = vec![1.0, e, 100.0, 100.0];
        let got = Vec::<f64>::try_from(w.to_kind(Kind::Double)).unwrap();
        assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-4), "{got:?}");
        let (s, s2): (f64, f64) = (want.iter().sum(), want.iter().map(|x| x * x).sum());
        let stats = advantage_weight_stats(&w, 100.0);
        assert_eq!(stats[0], ("awr_clipped", 0.5));
        assert!((stats[1].1 - s * s / (4.0 * s2)).abs() < 1e-6, "{stats:?}");
        let equal = advantage_weight_stats(&Tensor::from_slice(&[3.0f32; 8]), 100.0);
        assert_eq!(equal, [("awr_clipped", 0.0), ("awr_ess", 1.0)]);
    }
    use crate::nn::MlpConfig;
    use tch::Device;

    #[test]
    fn expectile_loss_weights_signs() {
        // u = +1 weighs τ, u = −1 weighs 1 − τ: mean(0.9·1, 0.1·1) = 0.5.
        let l = expectile_loss(&Tensor::from_slice(&[1.0f32, -1.0]), 0.9).double_value(&[]);
        assert!((l - 0.5).abs() < 1e-6, "{l}");
    }

    /// The closed-form step's loss and gradients equal autograd's on the expectile loss (the
    /// path float64 targets take).
    #[test]
    fn closed_form_matches_autograd() {
        let mut p = ParamSet::new();
        let mut rng = AgentRng::new(5);
        let value = Mlp::new(&mut p, "value", 4, 1, &MlpConfig::default(), 1.0, &mut rng, Device::Cpu);
        let obs = rng.normal(&[64, 4], Device::Cpu);
        let q = rng.normal(&[64], Device::Cpu);
        assert!(closed_form(&value, &p, &obs, &q.to_kind(Kind::Double), 0.8).is_none());
        let (loss, grads) = expectile_step(&value, &p, &obs, &q, 0.8, &mut rng);
        let (want_loss, want) = expectile_step(&value, &p, &obs, &q.to_kind(Kind::Double), 0.8, &mut rng);
        assert!((loss.double_value(&[]) - want_loss.double_value(&[])).abs() < 1e-5);
        assert_eq!(grads.len(), want.len());
        for (g, w) in grads.iter().zip(&want) {
            assert!((g - w).abs().max().double_value(&[]) < 1e-5 * (1.0 + w.abs().max().double_value(&[])));
        }
    }
}
