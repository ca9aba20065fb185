//! The online critic some Uni-O4 task scripts start from instead of the offline IQL V
//! (`ppo_finetune/main.py` with `--scale_strategy number`, the hopper and halfcheetah-medium-
//! replay scripts): a fresh V regressed on the dataset's Monte-Carlo returns of the *rescaled*
//! rewards, then handed to PPO, which keeps scaling the online rewards by the same factor.
//! - `G_t = c·r_t + γ (1 − end_t) G_{t+1}`, episodes cut at every end (terminal or timeout, as
//!   the code's returns are), rows in the dataset's episode order;
//! - `L = E[(V(s) − G)²]` on batches of `batch_size` rows, Adam;
//! - `c = reward_scale` (the script's `number` strategy is 0.1).
//!
//! Differences from the code, as options do not cover them: the code's V ends in a ReLU
//! (`V ≥ 0`), ours is PPO's plain linear head (the hopper returns it regresses are positive, so
//! only the gradient below zero differs); the `dynamic` strategy (division by a running std of
//! the discounted return, carried into the online phase) is not implemented.

use super::Data;
use crate::checkpoint::{load_agent, save_agent, state_tensors};
use crate::nn::{Adam, Mlp, MlpConfig, ParamSet};
use crate::rng::AgentRng;
use crate::{AgentError, Metrics};
use o2o_datasets::mc_returns::{returns_to_go, McConfig};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// Value-refit settings (the scripts': 3×256, 1e6 steps, LR 1e-4, batch 512, ×0.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValueRefitConfig {
    /// The V network; it must be the online PPO critic's shape (it is handed over as it).
    pub value: MlpConfig,
    /// Regression steps.
    pub steps: u64,
    /// Adam learning rate.
    pub lr: f64,
    /// Rows per step.
    pub batch_size: usize,
    /// Reward scale `c` of the returns; the online PPO's `reward_scale` must equal it.
    pub reward_scale: f64,
    /// Discount γ of the returns.
    pub gamma: f64,
}

impl Default for ValueRefitConfig {
    fn default() -> Self {
        Self { value: MlpConfig { hidden: vec![256, 256, 256], ..MlpConfig::default() }, steps: 1_000_000, lr: 1e-4, batch_size: 512, reward_scale: 0.1, gamma: 0.99 }
    }
}

impl ValueRefitConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.steps == 0 || self.batch_size == 0 || !(self.lr > 0.0) || !(self.reward_scale > 0.0) || !(0.0..1.0).contains(&self.gamma) {
            return Err(AgentError::Config(format!(
                "unio4.value_refit: steps and batch_size must be ≥ 1, lr and reward_scale > 0 and gamma in [0, 1), found steps {}, batch_size {}, lr {}, reward_scale {}, gamma {}",
                self.steps, self.batch_size, self.lr, self.reward_scale, self.gamma
            )));
        }
        Ok(())
    }
}

/// Discounted returns `G_t = c·r_t + γ (1 − end_t) G_{t+1}` of rows in episode order (the
/// dataset crate's return-to-go of the scaled rewards).
pub fn mc_returns(reward: &[f32], episode_end: &[f32], scale: f64, gamma: f64) -> Result<Vec<f32>, AgentError> {
    let scaled: Vec<f32> = reward.iter().map(|r| (scale * *r as f64) as f32).collect();
    returns_to_go(&scaled, episode_end, &McConfig::dense(gamma as f32)).map_err(|e| AgentError::Config(format!("unio4.value_refit: {e}")))
}

/// The stage: V, its optimizer and batch stream, and the targets.
pub struct ValueRefit {
    cfg: ValueRefitConfig,
    v: Mlp,
    params: ParamSet,
    opt: Adam,
    rng: AgentRng,
    step: u64,
    returns: Tensor,
}

impl ValueRefit {
    /// A fresh V for `obs_dim` states, with the returns of `data`.
    pub fn new(cfg: ValueRefitConfig, data: &Data, device: Device, seed: u64) -> Result<Self, AgentError> {
        cfg.validate()?;
        let mut rng = AgentRng::new(seed);
        let mut params = ParamSet::new();
        let obs_dim = data.obs.size()[1];
        // Named `critic` like the PPO critic it becomes.
        let v = Mlp::new(&mut params, "critic", obs_dim, 1, &cfg.value, 1.0, &mut rng, device);
        let host = |t: &Tensor| Vec::<f32>::try_from(&t.to_device(Device::Cpu).to_kind(Kind::Float)).unwrap_or_default();
        let g = mc_returns(&host(&data.reward), &host(&data.episode_end), cfg.reward_scale, cfg.gamma)?;
        let returns = Tensor::from_slice(&g).to_device(device);
        Ok(Self { opt: Adam::new(&params, cfg.lr), cfg, v, params, rng, step: 0, returns })
    }

    /// Steps done.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The V network's parameters (`critic/…`, handed to the online PPO).
    pub fn params(&self) -> &ParamSet {
        &self.params
    }

    /// One regression step on a batch of `data` (states as the online agent sees them).
    pub fn update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        let idx = self.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let g = self.returns.index_select(0, &idx);
        let v = self.v.forward(&s, None).squeeze_dim(-1);
        // L = E[(V(s) − G)²].
        let loss = (&v - &g).square().mean(Kind::Float);
        self.opt.minimize(&self.params, &loss);
        self.step += 1;
        vec![("value_loss", loss.double_value(&[])), ("v_mean", v.mean(Kind::Float).double_value(&[])), ("return_mean", g.mean(Kind::Float).double_value(&[]))]
    }

    fn live(&self) -> Vec<(String, Tensor)> {
        state_tensors(&[&self.params], &[("value_opt", &self.opt, &self.params)])
    }

    /// Write the stage state (weights, moments, step, RNG) atomically.
    pub fn save(&self, path: &Path) -> Result<(), AgentError> {
        save_agent(path, "unio4-value-refit", &self.live(), &[("value_opt", &self.opt)], self.step as i64, &self.rng)
    }

    /// Restore what [`ValueRefit::save`] wrote.
    pub fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        let live = self.live();
        let mut opts: [(&str, &mut Adam); 1] = [("value_opt", &mut self.opt)];
        if let Some(meta) = load_agent(path, "unio4-value-refit", &live, &mut opts, None)? {
            self.step = meta.step as u64;
            self.rng = meta.rng;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns restart at every episode end (terminal or timeout) and carry the scale.
    #[test]
    fn returns_are_cut_at_episode_ends_and_scaled() {
        // Episode 1: rows 0–2 (ends by a timeout at row 2); episode 2: rows 3–4.
        let r = [1.0, 2.0, 3.0, 10.0, 20.0];
        let end = [0.0, 0.0, 1.0, 0.0, 1.0];
        let g = mc_returns(&r, &end, 0.1, 0.5).unwrap();
        let want = [0.1 + 0.5 * (0.2 + 0.5 * 0.3), 0.2 + 0.5 * 0.3, 0.3, 1.0 + 0.5 * 2.0, 2.0];
        for (x, y) in g.iter().zip(want) {
            assert!((*x as f64 - y).abs() < 1e-6, "{g:?} vs {want:?}");
        }
    }

    /// The regression fits the returns of a small dataset, and a save/load continues exactly.
    #[test]
    fn fits_the_returns_and_resumes_exactly() {
        // 64 one-dimensional states s = t / 64 of one episode; r = 1 each step.
        let n = 64;
        let obs: Vec<f32> = (0..n).map(|t| t as f32 / n as f32).collect();
        let next: Vec<f32> = (1..=n).map(|t| t as f32 / n as f32).collect();
        let mut end = vec![0.0f32; n];
        end[n - 1] = 1.0;
        let d = Data::new(&obs, &vec![0.0; n], &vec![1.0; n], &next, &vec![0.0; n], &end, 1, 1, Device::Cpu).unwrap();
        let cfg = ValueRefitConfig { value: MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() }, steps: 600, lr: 3e-3, batch_size: 64, reward_scale: 1.0, gamma: 0.5 };
        let mut a = ValueRefit::new(cfg.clone(), &d, Device::Cpu, 7).unwrap();
        let first = a.update(&d, false)[0].1;
        for _ in 0..300 {
            a.update(&d, false);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refit.ot");
        a.save(&path).unwrap();
        let mut b = ValueRefit::new(cfg, &d, Device::Cpu, 99).unwrap();
        b.load(&path).unwrap();
        let (mut la, mut lb) = (0.0, 0.0);
        for _ in 0..1500 {
            la = a.update(&d, false)[0].1;
            lb = b.update(&d, false)[0].1;
        }
        assert_eq!(la, lb, "a loaded stage continues bit for bit");
        // G ranges over [1, 2): 2 − 2^{t−63}, flat then falling to 1 at the episode's end; an MSE
        // under 0.01 means V follows it.
        assert!(la < 0.01 && la < first / 50.0, "final loss {la} (first {first})");
    }
}
