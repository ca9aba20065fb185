//! The online critic some Uni-O4 task scripts start from instead of the offline IQL V
//! (`ppo_finetune/main.py` with `--scale_strategy number` or `dynamic`: the hopper and
//! halfcheetah scripts): a fresh V regressed on the dataset's Monte-Carlo returns of the
//! *rescaled* rewards, then handed to PPO, which keeps scaling the online rewards the same way.
//! - `r̃_t`: `reward_scaling = "constant"` (the `number` strategy) leaves `r_t`;
//!   `"dynamic"` divides it by a running std of the discounted return over the dataset rows in
//!   order ([`ReturnStdScaler::scale_dataset`]; episode-ending rows keep their reward, the
//!   code's quirk), and the statistic it ends with is handed to the online PPO with V;
//! - `G_t = c·r̃_t + γ (1 − end_t) G_{t+1}`, episodes cut at every end (terminal or timeout, as
//!   the code's returns are), rows in the dataset's episode order; `c = reward_scale` (0.1 for
//!   `number`, 1 for `dynamic`);
//! - `V(s) = max(0, MLP(s))` with `head = "relu"` (the code's `ValueReluMLP`, the default;
//!   `"linear"` drops the ReLU), and the online PPO critic must have the same head;
//! - `L = E[(V(s) − G)²]` on batches of `batch_size` rows, Adam.

use super::Data;
use crate::checkpoint::{Part, Stateful};
use crate::nn::{Mlp, MlpConfig, ParamSet, Trained};
use crate::ppo::{RewardScaling, ValueHead};
use crate::rng::AgentRng;
use crate::{AgentError, Metrics};
use o2o_datasets::mc_returns::{returns_to_go, McConfig};
use o2o_datasets::reward_scaling::ReturnStdScaler;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// Value-refit settings (the scripts': 3×256, 1e6 steps, LR 1e-4, batch 512, ×0.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValueRefitConfig {
    /// The V network; it must be the online PPO critic's shape (it is handed over as it).
    pub value: MlpConfig,
    /// V's output: `relu` (the code's) or `linear`; the online PPO's `critic_head` must equal it.
    pub head: ValueHead,
    /// `constant` (× `reward_scale` only, the `number` strategy) or `dynamic` (÷ the running
    /// return std first); the online PPO's `reward_scaling` must equal it.
    pub reward_scaling: RewardScaling,
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
        Self {
            value: MlpConfig { hidden: vec![256, 256, 256], ..MlpConfig::default() },
            head: ValueHead::Relu,
            reward_scaling: RewardScaling::Constant,
            steps: 1_000_000,
            lr: 1e-4,
            batch_size: 512,
            reward_scale: 0.1,
            gamma: 0.99,
        }
    }
}

impl ValueRefitConfig {
    /// Reject settings that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.steps == 0
            || self.batch_size == 0
            || !(self.lr > 0.0)
            || !(self.reward_scale > 0.0)
            || !(0.0..1.0).contains(&self.gamma)
        {
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
    returns_to_go(&scaled, episode_end, &McConfig::dense(gamma as f32))
        .map_err(|e| AgentError::Config(format!("unio4.value_refit: {e}")))
}

/// The stage: V, its optimizer and batch stream, and the targets.
pub struct ValueRefit {
    cfg: ValueRefitConfig,
    v: Trained<Mlp>,
    pub(super) rng: AgentRng,
    pub(super) step: u64,
    returns: Tensor,
    scaler: Option<ReturnStdScaler>,
}

impl ValueRefit {
    /// A fresh V for `obs_dim` states, with the returns of `data`.
    pub fn new(cfg: ValueRefitConfig, data: &Data, device: Device, seed: u64) -> Result<Self, AgentError> {
        // Named `critic` like the PPO critic it becomes.
        Self::with_prefix(cfg, data, device, seed, "critic")
    }

    /// The same with V's parameters registered under `prefix` (the non-IQL offline critic's V,
    /// [`super::sarsa`], is `value/…`).
    pub(super) fn with_prefix(
        cfg: ValueRefitConfig,
        data: &Data,
        device: Device,
        seed: u64,
        prefix: &str,
    ) -> Result<Self, AgentError> {
        cfg.validate()?;
        let obs_dim = data.obs.size()[1];
        crate::algos::prepare("unio4-value-refit", obs_dim, data.action.size()[1], device)?;
        let mut rng = AgentRng::new(seed);
        let v = Trained::new(cfg.lr, |p| Mlp::new(p, prefix, obs_dim, 1, &cfg.value, 1.0, &mut rng, device));
        // The host's copy (tch's conversion reads a device tensor back).
        let host = |t: &Tensor| Vec::<f32>::try_from(&t.to_kind(Kind::Float)).unwrap_or_default();
        let (reward, end) = (host(&data.reward), host(&data.episode_end));
        // r̃: the `dynamic` pass over the rows in order (its end state goes online), or r.
        let mut scaler = (cfg.reward_scaling == RewardScaling::Dynamic).then(|| ReturnStdScaler::new(cfg.gamma));
        let scaled = match scaler.as_mut() {
            Some(s) => s.scale_dataset(&reward, &end),
            None => reward,
        };
        if let Some(s) = scaler.as_mut() {
            // Online, every env starts a fresh episode: R = 0, the statistic carries on.
            s.reset_returns();
        }
        let g = mc_returns(&scaled, &end, cfg.reward_scale, cfg.gamma)?;
        let returns = Tensor::from_slice(&g).to_device(device);
        Ok(Self { cfg, v, rng, step: 0, returns, scaler })
    }

    /// Steps done.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The V network's parameters (`critic/…`, handed to the online PPO).
    pub fn params(&self) -> &ParamSet {
        &self.v.params
    }

    /// The `dynamic` scaling's statistic after the dataset pass (handed to the online PPO), or
    /// `None` under `constant`.
    pub fn scaler(&self) -> Option<&ReturnStdScaler> {
        self.scaler.as_ref()
    }

    /// `V(s)` `[B]` through the configured head.
    pub fn value(&self, s: &Tensor) -> Tensor {
        self.cfg.head.apply(self.v.net.forward(s, None)).squeeze_dim(-1)
    }

    /// One regression step on a batch of `data` (states as the online agent sees them).
    pub fn update(&mut self, data: &Data, state_norm: bool) -> Metrics {
        let idx = self.rng.indices(data.len(), self.cfg.batch_size, true, data.obs.device());
        let s = data.norm_obs(&data.obs.index_select(0, &idx), state_norm);
        let g = self.returns.index_select(0, &idx);
        let v = self.value(&s);
        // L = E[(V(s) − G)²].
        let loss = (&v - &g).square().mean(Kind::Float);
        self.v.minimize(&loss);
        self.step += 1;
        vec![
            ("value_loss", loss.double_value(&[])),
            ("v_mean", v.mean(Kind::Float).double_value(&[])),
            ("return_mean", g.mean(Kind::Float).double_value(&[])),
        ]
    }
}

impl Stateful for ValueRefit {
    fn name(&self) -> &'static str {
        "unio4-value-refit"
    }

    fn parts(&self) -> Vec<Part<'_>> {
        vec![Part::trained("value_opt", &self.v)]
    }

    fn progress(&self) -> (i64, &AgentRng) {
        (self.step as i64, &self.rng)
    }

    fn set_progress(&mut self, step: i64, rng: AgentRng) {
        (self.step, self.rng) = (step as u64, rng);
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
        let cfg = ValueRefitConfig {
            value: MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() },
            steps: 600,
            lr: 3e-3,
            batch_size: 64,
            reward_scale: 1.0,
            gamma: 0.5,
            ..ValueRefitConfig::default()
        };
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

    /// `dynamic`: the returns V regresses are those of the dataset pass's scaled rewards (the
    /// episode-ending row unscaled), the statistic is kept for the online phase with every env's
    /// R at 0; the ReLU head keeps V ≥ 0 where the linear output is negative.
    #[test]
    fn dynamic_returns_and_relu_head() {
        // Two episodes: rows 0–2 (end at 2), rows 3–4 (end at 4); one-dimensional states.
        let r = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let end = [0.0f32, 0.0, 1.0, 0.0, 1.0];
        let obs = [0.0f32, 0.1, 0.2, 0.3, 0.4];
        let d = Data::new(&obs, &[0.0; 5], &r, &obs, &[0.0; 5], &end, 1, 1, Device::Cpu).unwrap();
        let cfg = ValueRefitConfig {
            value: MlpConfig { hidden: vec![8], ..MlpConfig::default() },
            reward_scaling: RewardScaling::Dynamic,
            reward_scale: 1.0,
            gamma: 0.9,
            ..ValueRefitConfig::default()
        };
        let refit = ValueRefit::new(cfg.clone(), &d, Device::Cpu, 1).unwrap();
        let mut s = ReturnStdScaler::new(0.9);
        let scaled = s.scale_dataset(&r, &end);
        assert_eq!((scaled[2], scaled[4]), (3.0, 5.0), "episode-ending rows unscaled");
        assert!(scaled[1] != 2.0 && scaled[3] != 4.0);
        let want = mc_returns(&scaled, &end, 1.0, 0.9).unwrap();
        assert_eq!(Vec::<f32>::try_from(&refit.returns).unwrap(), want);
        assert_eq!(refit.scaler().unwrap().stats(), s.stats());
        assert!(refit.scaler().unwrap().returns().is_empty(), "online episodes start at R = 0");
        // The head: ReLU of the same network's linear output.
        let lin = ValueRefit::new(ValueRefitConfig { head: ValueHead::Linear, ..cfg }, &d, Device::Cpu, 1).unwrap();
        let x = Tensor::from_slice(&[-3.0f32, -1.0, 0.0, 1.0, 3.0]).view([5, 1]);
        let (v_lin, v_relu) = (lin.value(&x), refit.value(&x));
        assert!(v_relu.equal(&v_lin.relu()) && v_relu.ge(0.0).all().int64_value(&[]) == 1);
        assert!(ValueRefit::new(ValueRefitConfig::default(), &d, Device::Cpu, 1).unwrap().scaler().is_none());
    }
}
