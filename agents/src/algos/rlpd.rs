//! RLPD: Reinforcement Learning with Prior Data (Ball, Smith, Kostrikov, Levine, "Efficient
//! Online Reinforcement Learning with Offline Data", ICML 2023, arXiv 2302.02948).
//!
//! Facts: ../shared/reference/algorithms.md §6.4; reference code consulted for facts:
//! ikostrikov/rlpd (`train_finetuning.py`, `sac_learner.py`, `configs/rlpd_config.py`).
//!
//! RLPD is SAC ([`super::sac`]) with a particular configuration and data schedule, so this file
//! is that configuration; the update is SAC's:
//! - no offline pre-training: online from scratch, every batch half offline, half online
//!   (symmetric sampling: the runner's `train.offline_ratio = 0.5`);
//! - E = 10 critics with LayerNorm (critic only), target `min` over a random subset of M = 2
//!   drawn **without** replacement, entropy in the backup:
//!   `y = r + γ (1 − d) (min_{i∈I} Q̄_i(s', a') − α log π(a'|s'))`;
//! - actor on the ensemble **mean**: `L_π = E[α log π(ã|s) − (1/E) Σ_i Q_i(s, ã)]`;
//! - UTD G = 20: one update gets a batch of `20 × 256` rows, makes 20 critic steps on 20
//!   minibatches (Polyak after each), then one actor and one temperature step on the **last**
//!   minibatch (`actor_batch = "last_slice"`); SAC's strided minibatches give each of them
//!   the batch's 50/50 offline/online split, as RLPD's interleaved batches do;
//! - temperature α₀ = 1, learning rate 3e-4, target entropy H̄ = −|A|/2; all LRs 3e-4, γ 0.99,
//!   τ 0.005, 2×256 networks.
//!
//! The runner's `batch_size` is therefore `critic_steps × 256` with `updates_per_step = 1`.

use super::flat::{overlay, table_of};
use super::sac::{ActorBatch, QReduce, Sac, SacConfig};
use crate::nn::MlpConfig;
use crate::AgentError;
use serde::{Deserialize, Serialize};
use tch::Device;

/// RLPD's configuration: SAC's fields with RLPD's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table", into = "toml::Table")]
pub struct RlpdConfig(pub SacConfig);

impl Default for RlpdConfig {
    fn default() -> Self {
        Self(SacConfig {
            critic: MlpConfig { layer_norm: true, ..MlpConfig::default() },
            num_critics: 10,
            target_subset: 2,
            subset_with_replacement: false,
            actor_q: QReduce::Mean,
            target_entropy_per_dim: -0.5,
            backup_entropy: true,
            critic_steps: 20,
            actor_batch: ActorBatch::LastSlice,
            ..SacConfig::default()
        })
    }
}

impl TryFrom<toml::Table> for RlpdConfig {
    type Error = String;
    fn try_from(table: toml::Table) -> Result<Self, String> {
        Ok(Self(overlay(&Self::default().0, table)?))
    }
}

impl From<RlpdConfig> for toml::Table {
    fn from(c: RlpdConfig) -> Self {
        table_of(&c.0)
    }
}

/// A new RLPD agent: a SAC agent with this configuration that reports (and checkpoints as) `rlpd`.
pub fn new(cfg: RlpdConfig, obs_dim: i64, act_dim: i64, device: Device, seed: u64) -> Result<Sac, AgentError> {
    Sac::named("rlpd", cfg.0, obs_dim, act_dim, device, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stateful;

    #[test]
    fn defaults_are_rlpds_and_keys_override_them() {
        let c: RlpdConfig =
            toml::Value::Table(toml::from_str("critic_steps = 4\ncritic = { hidden = [64, 64] }").unwrap())
                .try_into()
                .unwrap();
        assert_eq!(c.0.critic_steps, 4);
        assert_eq!(c.0.critic.hidden, vec![64, 64]);
        assert!(c.0.critic.layer_norm, "RLPD's LayerNorm survives a partial critic table");
        assert!(!c.0.actor.mlp.layer_norm, "no LayerNorm in the actor");
        assert_eq!((c.0.num_critics, c.0.target_subset, c.0.subset_with_replacement), (10, 2, false));
        assert_eq!(c.0.target_entropy_per_dim, -0.5);
        assert_eq!(new(c, 3, 2, Device::Cpu, 0).unwrap().name(), "rlpd");
    }
}
