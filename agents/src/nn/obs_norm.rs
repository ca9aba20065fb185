//! Observation normalization owned by the agent: `ŝ = clip((s − μ) / √(σ² + ε), −c, c)`.
//!
//! Two ways to get `μ, σ²` (`[obs_dim]` each, float64):
//! - **running** (CleanRL's PPO, Gymnasium's `NormalizeObservation`): updated from every batch
//!   of collected observations with the parallel-variance formula, starting from count 1e-4;
//! - **frozen** from a dataset's statistics (Uni-O4 online: the offline data's mean and std,
//!   never updated).
//!
//! The statistics live in the agent's checkpoint (part `obs_norm`), so evaluation and export
//! normalize exactly as training did, and a resumed run continues the running estimate.

use super::policy_graph::doubles;
use super::Layer;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Where the statistics come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObsNormMode {
    /// No normalization.
    None,
    /// Running mean and variance of the observations collected so far (CleanRL).
    #[default]
    Running,
    /// The run's dataset statistics, frozen (Uni-O4); a run without a dataset falls back to
    /// `running`.
    Dataset,
}

/// Observation-normalization settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObsNormConfig {
    /// Where `μ, σ²` come from.
    pub mode: ObsNormMode,
    /// Clip of the normalized observation `c` (CleanRL 10; 0 = no clip).
    pub clip: f64,
    /// `ε` under the square root.
    pub eps: f64,
}

impl Default for ObsNormConfig {
    fn default() -> Self {
        Self { mode: ObsNormMode::Running, clip: 10.0, eps: 1e-8 }
    }
}

/// The statistics and how to apply them.
#[derive(Debug)]
pub struct ObsNorm {
    cfg: ObsNormConfig,
    mean: Tensor,
    var: Tensor,
    count: Tensor,
    /// 1 when frozen (dataset statistics), 0 when running; a tensor so it is checkpointed.
    frozen: Tensor,
}

impl ObsNorm {
    /// Zero mean, unit variance, count 1e-4 (Gymnasium's `RunningMeanStd` start).
    pub fn new(cfg: &ObsNormConfig, obs_dim: i64, device: Device) -> Self {
        let opts = (Kind::Double, device);
        Self {
            cfg: cfg.clone(),
            mean: Tensor::zeros([obs_dim], opts),
            var: Tensor::ones([obs_dim], opts),
            count: Tensor::from_slice(&[1e-4f64]).to_device(device),
            frozen: Tensor::zeros([1], (Kind::Int64, device)),
        }
    }

    /// A copy with its own tensors (for export: normalization outside the agent).
    pub fn detached(&self) -> Self {
        Self {
            cfg: self.cfg.clone(),
            mean: self.mean.copy(),
            var: self.var.copy(),
            count: self.count.copy(),
            frozen: self.frozen.copy(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ObsNormConfig {
        &self.cfg
    }

    /// Whether the statistics are frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen.int64_value(&[0]) != 0
    }

    /// Fix `μ = mean`, `σ² = std²` for good (dataset statistics).
    pub fn freeze(&mut self, mean: &[f32], std: &[f32]) {
        let dev = self.mean.device();
        tch::no_grad(|| {
            self.mean.copy_(&Tensor::from_slice(mean).to_kind(Kind::Double).to_device(dev));
            self.var.copy_(&Tensor::from_slice(std).to_kind(Kind::Double).to_device(dev).square());
            let _ = self.frozen.fill_(1);
        });
    }

    /// Fold a batch `[B, obs_dim]` into the running statistics (no-op when frozen or off):
    /// `μ ← μ + δ b / n'`, `σ² ← (σ² n + σ_b² b + δ² n b / n') / n'`, `n' = n + b`.
    pub fn update(&mut self, obs: &Tensor) {
        if self.cfg.mode == ObsNormMode::None || self.is_frozen() {
            return;
        }
        tch::no_grad(|| {
            let x = obs.to_kind(Kind::Double).to_device(self.mean.device());
            let b = x.size()[0] as f64;
            let bm = x.mean_dim(0, false, Kind::Double);
            let bv = x.var_dim(0, false, false);
            let delta = &bm - &self.mean;
            let n = &self.count;
            let total = n + b;
            let new_mean = &self.mean + &delta * b / &total;
            let m2 = &self.var * n + bv * b + delta.square() * n * b / &total;
            self.mean.copy_(&new_mean);
            self.var.copy_(&(m2 / &total));
            self.count.copy_(&total);
        });
    }

    /// `clip((s − μ) / √(σ² + ε), −c, c)` as float32 (the input unchanged when off).
    pub fn apply(&self, obs: &Tensor) -> Tensor {
        if self.cfg.mode == ObsNormMode::None {
            return obs.to_kind(Kind::Float);
        }
        let x = (obs.to_kind(Kind::Double) - &self.mean) / (&self.var + self.cfg.eps).sqrt();
        let x = if self.cfg.clip > 0.0 { x.clamp(-self.cfg.clip, self.cfg.clip) } else { x };
        x.to_kind(Kind::Float)
    }

    /// [`Self::apply`] as data, with the statistics as they are now; `None` when off.
    pub fn layer(&self) -> Option<Layer> {
        (self.cfg.mode != ObsNormMode::None).then(|| Layer::Standardize64 {
            mean: doubles(&self.mean),
            std: doubles(&(&self.var + self.cfg.eps).sqrt()),
            clip: (self.cfg.clip > 0.0).then_some(self.cfg.clip),
        })
    }

    /// The checkpoint tensors, under `prefix`.
    pub fn named(&self, prefix: &str) -> Vec<(String, Tensor)> {
        vec![
            (format!("{prefix}/mean"), self.mean.shallow_clone()),
            (format!("{prefix}/var"), self.var.shallow_clone()),
            (format!("{prefix}/count"), self.count.shallow_clone()),
            (format!("{prefix}/frozen"), self.frozen.shallow_clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two batches folded in equal the statistics of their union (up to the 1e-4 prior).
    #[test]
    fn running_statistics_equal_the_union() {
        let mut n = ObsNorm::new(&ObsNormConfig { clip: 0.0, ..ObsNormConfig::default() }, 2, Device::Cpu);
        let a = Tensor::from_slice(&[1.0f32, 10.0, 3.0, 14.0, 5.0, 9.0]).view([3, 2]);
        let b = Tensor::from_slice(&[7.0f32, 2.0, -1.0, 0.0]).view([2, 2]);
        n.update(&a);
        n.update(&b);
        let all = Tensor::cat(&[&a, &b], 0).to_kind(Kind::Double);
        let (m, v) = (all.mean_dim(0, false, Kind::Double), all.var_dim(0, false, false));
        assert!((&n.mean - &m).abs().max().double_value(&[]) < 1e-3);
        assert!((&n.var - &v).abs().max().double_value(&[]) < 1e-3);
        let z = n.apply(&all);
        assert!(z.mean_dim(0, false, Kind::Float).abs().max().double_value(&[]) < 1e-3);
        // Frozen: updates change nothing.
        n.freeze(&[1.0, 2.0], &[2.0, 4.0]);
        n.update(&a);
        let z = n.apply(&Tensor::from_slice(&[3.0f32, 6.0]).view([1, 2]));
        assert!((z.double_value(&[0, 0]) - 1.0).abs() < 1e-6 && (z.double_value(&[0, 1]) - 1.0).abs() < 1e-6);
        assert!(n.is_frozen());
    }
}
