//! A family of policies indexed by a balance coefficient β, and a model that picks β per state
//! (FamO2O: Wang et al., "Train Once, Get a Family: State-Adaptive Balances for Offline-to-Online
//! Reinforcement Learning", NeurIPS 2023, arXiv 2310.17966; facts: algorithms-next.md §2.1).
//!
//! - [`BetaEncoding`]: the sinusoidal encoding `e(β) ∈ R^d`,
//!   `e_{2k}(β) = sin(β / n^{2k/d})`, `e_{2k+1}(β) = cos(β / n^{2k/d})`, `k = 0 … d/2 − 1`
//!   (d = 6, n = 1e4 in both official variants); shapes `β: [B]` → `[B, d]`.
//! - [`Conditioned`]: any policy whose input is `[s, e(β)]` (`[B, obs + d]`): the universal
//!   policy `π_u(a | s, β)`. The wrapper only builds the input; the policy keeps its own API.
//! - [`BalanceModel`]: `π_b(β | s)`, a 1-D tanh-squashed Gaussian over `u ∈ (−1, 1)` mapped to β
//!   by a [`BetaRange`]. Its log-probability is that of `u` (the tanh change of variables
//!   included); the affine map to β only shifts it by a constant, which neither the balance
//!   loss nor its entropy temperature sees.

use super::{BetaSource, Layer, ParamSet, PolicyGraph, TanhGaussianActor, TanhGaussianConfig};
use crate::rng::AgentRng;
use crate::Scatter;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// The sinusoidal β encoding's size `d` and base `n`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BetaEncoding {
    /// Dimension d (even).
    pub dim: i64,
    /// Base n of the frequencies `1 / n^{2k/d}`.
    pub base: f64,
}

impl Default for BetaEncoding {
    fn default() -> Self {
        Self { dim: 6, base: 1e4 }
    }
}

impl BetaEncoding {
    /// `Err(message)` naming the field when `dim` is not a positive even number or `base ≤ 1`.
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.dim < 2 || self.dim % 2 != 0 {
            return Err(format!("{field}.dim must be a positive even number, found {}", self.dim));
        }
        if self.base <= 1.0 {
            return Err(format!("{field}.base must be > 1, found {}", self.base));
        }
        Ok(())
    }

    /// The frequencies `1 / n^{2k/d}`, `k = 0 … d/2 − 1`, as float32.
    pub fn frequencies(&self) -> Vec<f32> {
        (0..self.dim / 2).map(|k| self.base.powf(-(2 * k) as f64 / self.dim as f64) as f32).collect()
    }

    /// `e(β)`, `[B]` → `[B, d]`: columns `sin(β/n^{0/d}), cos(β/n^{0/d}), sin(β/n^{2/d}), …`.
    pub fn encode(&self, beta: &Tensor) -> Tensor {
        let inv = Tensor::from_slice(&self.frequencies()).to_device(beta.device());
        // [B, d/2] angles, then sin and cos interleaved: [B, d/2, 2] → [B, d].
        let angle = beta.to_kind(Kind::Float).unsqueeze(-1) * inv.unsqueeze(0);
        Tensor::stack(&[angle.sin(), angle.cos()], -1).flatten(1, 2)
    }
}

/// A policy conditioned on β: its input is `[s, e(β)]`.
#[derive(Debug)]
pub struct Conditioned<P> {
    /// The policy, built for `obs_dim + encoding.dim` inputs.
    pub policy: P,
    /// How β enters the input.
    pub encoding: BetaEncoding,
}

impl<P> Conditioned<P> {
    /// `build(in_dim)` makes the policy for `obs_dim + encoding.dim` inputs.
    pub fn new(obs_dim: i64, encoding: BetaEncoding, build: impl FnOnce(i64) -> P) -> Self {
        Self { policy: build(obs_dim + encoding.dim), encoding }
    }

    /// The policy's input `[s, e(β)]`, `[B, obs + d]`, for states `[B, obs]` and β `[B]`.
    pub fn input(&self, obs: &Tensor, beta: &Tensor) -> Tensor {
        Tensor::cat(&[obs.shallow_clone(), self.encoding.encode(beta)], 1)
    }

    /// The conditioned policy as data: `[s, e(β)]` with β from `beta`, then `policy` (the graph
    /// of the wrapped policy, on `obs + d` numbers).
    pub fn graph(&self, policy: PolicyGraph, beta: BetaSource) -> PolicyGraph {
        let mut layers = vec![Layer::AppendBeta { encoding: self.encoding, beta }];
        layers.extend(policy.layers);
        PolicyGraph::new(policy.obs_dim - self.encoding.dim as usize, layers)
    }
}

/// How the balance model's `u ∈ (−1, 1)` becomes β.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BetaMap {
    /// `β = β_min + (u + 1)/2 · (β_max − β_min)`, β ∈ (β_min, β_max): the paper's range, and the
    /// map of the official FamO2O-IQL code.
    Paper,
    /// `β = β_min + u · (β_max − β_min)`, β ∈ (2β_min − β_max, β_max): the official FamO2O-CQL
    /// code (`hierarchical_policy.py`), which for the nominal (0.5, 1.5) gives (−0.5, 1.5).
    Code,
}

/// The balance coefficient's range and map.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BetaRange {
    /// β_min.
    pub min: f64,
    /// β_max.
    pub max: f64,
    /// The map from `u` to β.
    pub map: BetaMap,
}

impl BetaRange {
    /// β for `u ∈ (−1, 1)` (any shape).
    pub fn beta(&self, u: &Tensor) -> Tensor {
        let width = self.max - self.min;
        match self.map {
            BetaMap::Paper => (u + 1.0) * (0.5 * width) + self.min,
            BetaMap::Code => u * width + self.min,
        }
    }

    /// The interval β lies in, `(low, high)`.
    pub fn bounds(&self) -> (f64, f64) {
        match self.map {
            BetaMap::Paper => (self.min, self.max),
            BetaMap::Code => (2.0 * self.min - self.max, self.max),
        }
    }
}

/// How the balance model's output layer starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BalanceHeadInit {
    /// As the network's other heads (orthogonal, gain 1, with the default `init`): β starts
    /// spread over its range.
    #[default]
    Orthogonal,
    /// The official FamO2O-CQL head (`JaxCQL/model.py FullyConnectedNetwork`): weights uniform on
    /// ±√(3 · 1e-2 / fan_in) (flax `variance_scaling(1e-2, "fan_in", "uniform")`), zero bias, so
    /// μ_b ≈ 0 and β starts at the map's middle on every state, with log σ ≈ the affine's offset.
    VarianceScaling,
}

/// The scale of [`BalanceHeadInit::VarianceScaling`].
pub const BALANCE_HEAD_SCALE: f64 = 1e-2;

/// `π_b(β | s)`: a 1-D tanh-Gaussian over `u`, mapped to β.
#[derive(Debug)]
pub struct BalanceModel {
    net: TanhGaussianActor,
    range: BetaRange,
}

impl BalanceModel {
    /// A balance model on `obs_dim` states with parameters under `prefix` in `params`, its
    /// output layer drawn per `head` (after the network, from the same stream).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        params: &mut ParamSet,
        prefix: &str,
        obs_dim: i64,
        cfg: &TanhGaussianConfig,
        range: BetaRange,
        head: BalanceHeadInit,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let net = TanhGaussianActor::new(params, prefix, obs_dim, 1, cfg, rng, device);
        if head == BalanceHeadInit::VarianceScaling {
            let (weight, bias) = net.head();
            let fan_in = weight.size()[0];
            let bound = (3.0 * BALANCE_HEAD_SCALE / fan_in as f64).sqrt();
            let w = rng.uniform_tensor(&weight.size(), Device::Cpu) * (2.0 * bound) - bound;
            tch::no_grad(|| {
                weight.shallow_clone().copy_(&w);
                let _ = bias.shallow_clone().zero_();
            });
        }
        Self { net, range }
    }

    /// A copy with detached weights (inference outside training).
    pub fn detached(&self) -> Self {
        Self { net: self.net.detached(), range: self.range }
    }

    /// The range and map.
    pub fn range(&self) -> &BetaRange {
        &self.range
    }

    /// A reparameterized draw, `u = tanh(μ(s) + σ(s) ε)` with `ε: [B, 1]`:
    /// `(β [B], log π_b(u|s) [B])`, differentiable in the model's parameters.
    pub fn sample(&self, obs: &Tensor, eps: &Tensor) -> (Tensor, Tensor) {
        let (u, log_prob) = self.net.sample(obs, eps);
        (self.range.beta(&u.squeeze_dim(-1)), log_prob)
    }

    /// The deterministic β, `map(tanh μ(s))`, `[B]`.
    pub fn mode(&self, obs: &Tensor) -> Tensor {
        self.range.beta(&self.net.mode(obs).squeeze_dim(-1))
    }

    /// [`Self::mode`] as data.
    pub fn beta_source(&self) -> BetaSource {
        BetaSource::Model { layers: self.net.mode_graph().layers, range: self.range }
    }

    /// The β an agent acts with on `obs` `[B, ·]`, `[B]`: `fixed` on every row where a config
    /// fixes it (the fixed-β ablation, the model unused), else [`Self::mode`].
    pub fn mode_or(&self, fixed: Option<f64>, obs: &Tensor) -> Tensor {
        match fixed {
            Some(b) => Tensor::full([obs.size()[0]], b, (Kind::Float, obs.device())),
            None => self.mode(obs),
        }
    }

    /// [`Self::mode_or`] as data.
    pub fn beta_source_or(&self, fixed: Option<f64>) -> BetaSource {
        match fixed {
            Some(b) => BetaSource::Fixed(b),
            None => self.beta_source(),
        }
    }
}

/// The keys of [`beta_stats`], in its order.
pub const BETA_STATS: [&str; 5] = ["beta_mean", "beta_std", "beta_q10", "beta_q50", "beta_q90"];

/// The keys of [`dq_dbeta`], in its order.
pub const DQ_DBETA: [&str; 2] = ["dq_dbeta_mean", "dq_dbeta_positive"];

/// Mean, standard deviation and the 10/50/90 % quantiles of `beta` `[B]`, for the logs:
/// `beta_mean`, `beta_std`, `beta_q10`, `beta_q50`, `beta_q90` ([`BETA_STATS`]).
pub fn beta_stats(beta: &Tensor) -> Vec<(&'static str, f64)> {
    let mut v = Vec::<f32>::try_from(beta.detach().to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1))
        .unwrap_or_default();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f32::total_cmp);
    let n = v.len() as f64;
    let mean = v.iter().map(|x| *x as f64).sum::<f64>() / n;
    let var = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / n;
    // Linear interpolation between order statistics (numpy's default).
    let q = |p: f64| {
        let pos = p * (n - 1.0);
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * (pos - lo as f64)
    };
    BETA_STATS.into_iter().zip([mean, var.sqrt(), q(0.1), q(0.5), q(0.9)]).collect()
}

/// dQ/dβ at `beta` `[B]`, per row: the derivative of `q(β)` `[B]` (row i depending on β_i only,
/// e.g. `min_j Q_j(s, π_u(s, e(β)))` at the policy's mode) through autograd, without touching any
/// parameter's gradient. Logged as `dq_dbeta_mean` and `dq_dbeta_positive` (the share of rows
/// where a larger β gives a larger Q): a positive derivative almost everywhere is why a balance
/// loss of −Q alone drives β to the top of its range (fidelity-audit-2 E7).
pub fn dq_dbeta(beta: &Tensor, q: impl FnOnce(&Tensor) -> Tensor) -> Vec<(&'static str, f64)> {
    let leaf = beta.detach().to_kind(Kind::Float).set_requires_grad(true);
    let value = q(&leaf).sum(Kind::Float);
    let grad = Tensor::run_backward(&[value], &[&leaf], false, false).remove(0);
    let positive = grad.gt(0.0).to_kind(Kind::Float).mean(Kind::Float);
    DQ_DBETA.into_iter().zip([grad.mean(Kind::Float).double_value(&[]), positive.double_value(&[])]).collect()
}

/// FamO2O's scatter diagnostics for a batch: the balance model's β(s) `[B]` against `q`
/// (`Q(s, a)` on the batch's actions, `[B]`) as `beta_vs_q`, and against the Monte-Carlo
/// return-to-go on the rows where it is finite as `beta_vs_return`.
pub fn beta_scatters(beta: &Tensor, q: &Tensor, mc_return: Option<&Tensor>) -> Vec<Scatter> {
    let values = |t: &Tensor| {
        Vec::<f32>::try_from(t.detach().to_device(Device::Cpu).to_kind(Kind::Float).flatten(0, -1)).unwrap_or_default()
    };
    let beta = values(beta);
    let mut out =
        vec![Scatter { name: "beta_vs_q", x_name: "Q(s, a)", y_name: "β(s)", x: values(q), y: beta.clone() }];
    if let Some(g) = mc_return {
        let (x, y): (Vec<f32>, Vec<f32>) = values(g).into_iter().zip(beta).filter(|(g, _)| g.is_finite()).unzip();
        if !x.is_empty() {
            out.push(Scatter { name: "beta_vs_return", x_name: "return-to-go", y_name: "β(s)", x, y });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// e(β) against the reference vectors of algorithms-next.md §2.1 (4 decimal places).
    #[test]
    fn encoding_matches_the_reference_vectors() {
        let reference: [(f32, [f32; 6]); 5] = [
            (0.0, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]),
            (8.0, [0.9894, -0.1455, 0.3629, 0.9318, 0.0172, 0.9999]),
            (14.0, [0.9906, 0.1367, 0.6050, 0.7962, 0.0302, 0.9995]),
            (0.5, [0.4794, 0.8776, 0.0232, 0.9997, 0.0011, 1.0]),
            (1.5, [0.9975, 0.0707, 0.0696, 0.9976, 0.0032, 1.0]),
        ];
        let betas: Vec<f32> = reference.iter().map(|(b, _)| *b).collect();
        let e = BetaEncoding::default().encode(&Tensor::from_slice(&betas));
        assert_eq!(e.size(), vec![5, 6]);
        for (row, (beta, want)) in reference.iter().enumerate() {
            for (k, w) in want.iter().enumerate() {
                let got = e.double_value(&[row as i64, k as i64]);
                // The reference is rounded to 4 decimals: 5e-5 rounding plus 1e-4 tolerance.
                assert!((got - *w as f64).abs() < 1.5e-4, "e({beta})[{k}] = {got}, reference {w}");
            }
        }
    }

    /// u = 0 maps to the middle of the IQL range (11), to 0.5 under the CQL code's map and to 1.0
    /// under the paper's; u → ±1 reaches each map's ends.
    #[test]
    fn range_maps_pin_the_middle_and_the_ends() {
        let u = Tensor::from_slice(&[0.0f32, -1.0, 1.0]);
        let iql = BetaRange { min: 8.0, max: 14.0, map: BetaMap::Paper };
        let code = BetaRange { min: 0.5, max: 1.5, map: BetaMap::Code };
        let paper = BetaRange { min: 0.5, max: 1.5, map: BetaMap::Paper };
        for (range, want) in [(iql, [11.0, 8.0, 14.0]), (code, [0.5, -0.5, 1.5]), (paper, [1.0, 0.5, 1.5])] {
            let b = range.beta(&u);
            for (i, w) in want.iter().enumerate() {
                assert!(
                    (b.double_value(&[i as i64]) - w).abs() < 1e-6,
                    "{range:?}: u = {} → {}",
                    u.double_value(&[i as i64]),
                    b.double_value(&[i as i64])
                );
            }
            assert_eq!(range.bounds(), (want[1], want[2]));
        }
    }

    #[test]
    fn balance_model_draws_stay_in_range_and_conditioning_widens_the_input() {
        let mut p = ParamSet::new();
        let mut rng = AgentRng::new(3);
        let range = BetaRange { min: 8.0, max: 14.0, map: BetaMap::Paper };
        let cfg =
            TanhGaussianConfig { state_dependent_std: false, log_std_min: -10.0, ..TanhGaussianConfig::default() };
        let m =
            BalanceModel::new(&mut p, "balance", 4, &cfg, range, BalanceHeadInit::Orthogonal, &mut rng, Device::Cpu);
        let obs = rng.normal(&[32, 4], Device::Cpu) * 5.0;
        let (beta, logp) = m.sample(&obs, &(rng.normal(&[32, 1], Device::Cpu) * 3.0));
        assert_eq!((beta.size(), logp.size()), (vec![32], vec![32]));
        assert!(beta.min().double_value(&[]) >= 8.0 && beta.max().double_value(&[]) <= 14.0);
        assert_eq!(m.mode(&obs).size(), vec![32]);
        let c = Conditioned::new(4, BetaEncoding::default(), |d| d);
        assert_eq!(c.policy, 10);
        assert_eq!(c.input(&obs, &beta).size(), vec![32, 10]);
        let s = beta_stats(&Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0]));
        let get = |k: &str| s.iter().find(|(n, _)| *n == k).unwrap().1;
        assert_eq!((get("beta_mean"), get("beta_q50"), get("beta_q10")), (3.0, 3.0, 1.4));
        assert!((get("beta_std") - 2f64.sqrt()).abs() < 1e-12);
    }

    /// The official FamO2O-CQL head: weights within ±√(3e-2 / fan_in), zero bias. Its weights
    /// have variance 1e-2/fan_in against the orthogonal head's 1/fan_in, and the hidden layers
    /// are the same draws, so μ_b(s) = atanh(β − 0.5) (the code map) spreads √1e-2 = 0.1 times as
    /// much over states: β starts near the middle of its range (within 0.1 here, analytically
    /// ≈ 3 × 0.075 at the 3σ tail for these inputs), where the orthogonal head spreads it.
    /// dQ/dβ of a function increasing in β is positive on every row.
    #[test]
    fn the_variance_scaling_head_starts_beta_mid_range() {
        let cfg = TanhGaussianConfig {
            mlp: super::super::MlpConfig { hidden: vec![64, 64], ..Default::default() },
            log_std_affine: true,
            ..TanhGaussianConfig::default()
        };
        let range = BetaRange { min: 0.5, max: 1.5, map: BetaMap::Code };
        let obs = AgentRng::new(9).normal(&[256, 4], Device::Cpu);
        let mut mu_std = Vec::new();
        for head in [BalanceHeadInit::VarianceScaling, BalanceHeadInit::Orthogonal] {
            let (mut p, mut rng) = (ParamSet::new(), AgentRng::new(1));
            let m = BalanceModel::new(&mut p, "balance", 4, &cfg, range, head, &mut rng, Device::Cpu);
            let beta = m.mode(&obs);
            let mu = (beta.to_kind(Kind::Double) - 0.5).clamp(-1.0 + 1e-9, 1.0 - 1e-9).atanh();
            mu_std.push(mu.std(false).double_value(&[]));
            if head == BalanceHeadInit::VarianceScaling {
                let (w, b) = m.net.head();
                assert!(w.abs().max().double_value(&[]) <= (3e-2f64 / 64.0).sqrt() + 1e-7);
                assert_eq!(b.abs().max().double_value(&[]), 0.0);
                let off = (m.mode(&obs) - 0.5).abs().max().double_value(&[]);
                assert!(off < 0.1, "variance scaling: β within {off} of the middle");
            }
        }
        // 64 weights per output: the ratio's sampling error is about 1/√64 ≈ 12 %, so [0.05, 0.2]
        // holds the analytic 0.1 with room for that error.
        let ratio = mu_std[0] / mu_std[1];
        assert!(
            (0.05..0.2).contains(&ratio),
            "std of μ_b: variance scaling {} vs orthogonal {} (ratio {ratio}, analytic 0.1)",
            mu_std[0],
            mu_std[1]
        );
        let d = dq_dbeta(&Tensor::from_slice(&[0.2f32, 1.0, 1.4]), |b| b.square() * 3.0);
        assert!((d[0].1 - (1.2 + 6.0 + 8.4) / 3.0).abs() < 1e-5 && d[1].1 == 1.0, "{d:?}");
    }
}
