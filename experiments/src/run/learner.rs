//! The learner side of the loop: a transition source and an agent, nothing else.
//!
//! Sources are the offline dataset, the online replay buffer, or a mix of both at a fixed ratio
//! (the datasets crate's `MixedSampler`); the runner owns the RNG they sample with, so batch
//! draws are part of the checkpointed state. When acting and learning are split across
//! processes, the replay buffer is filled from a stream instead of by [`ReplaySink`].

use super::actor::{Transition, TransitionSink};
use anyhow::{Context, Result};
use o2o_agents::sera::{Neighbours, Sera};
use o2o_agents::{Agent, Metrics};
use o2o_datasets::{MixedSampler, OfflineBuffer, ReplayBuffer, TransitionBatch};
use rand_chacha::ChaCha8Rng;
use tch::Device;

/// r' = scale · r + shift, applied to offline and online rewards alike (the agent must see one
/// reward scale); returns and scores are always reported in the env's own reward.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardTransform {
    /// Multiplier.
    pub scale: f64,
    /// Added after scaling.
    pub shift: f64,
}

impl RewardTransform {
    /// No change.
    pub const IDENTITY: Self = Self { scale: 1.0, shift: 0.0 };

    /// Apply to one reward.
    pub fn apply(&self, r: f64) -> f64 {
        self.scale * r + self.shift
    }
}

/// Where batches come from.
pub enum Source<'a> {
    /// The offline dataset only.
    Offline(&'a OfflineBuffer),
    /// The online replay buffer only.
    Online(&'a ReplayBuffer),
    /// `round(ratio · B)` offline rows and the rest online.
    #[allow(missing_docs)] // the two buffers and the sampler that mixes them
    Mixed { offline: &'a OfflineBuffer, online: &'a ReplayBuffer, sampler: MixedSampler },
    /// Uniform over both, as one buffer pre-filled with the dataset (the offline share decays).
    #[allow(missing_docs)] // the two buffers
    Union { offline: &'a OfflineBuffer, online: &'a ReplayBuffer },
    /// `round(first_fraction · B)` rows from `first` and the rest from `second`, two offline
    /// buffers (ImagineBench's real and imaginary rollouts).
    #[allow(missing_docs)]
    Weighted { first: &'a OfflineBuffer, second: &'a OfflineBuffer, first_fraction: f64 },
}

impl Source<'_> {
    /// One batch of `size` rows on `device`.
    pub fn sample(&self, size: usize, rng: &mut ChaCha8Rng, device: Device) -> Result<TransitionBatch> {
        let batch = match self {
            Source::Offline(b) => b.sample(size, rng, device),
            Source::Online(b) => b.sample(size, rng, device),
            Source::Mixed { offline, online, sampler } => sampler.sample(offline, online, size, rng, device),
            Source::Union { offline, online } => o2o_datasets::replay::sample_union(offline, online, size, rng, device),
            Source::Weighted { first, second, first_fraction } => o2o_datasets::replay::sample_weighted(first, second, *first_fraction, size, rng, device),
        };
        batch.context("sampling a training batch")
    }

    /// The online replay buffer, where the source has one.
    fn online(&self) -> Option<&ReplayBuffer> {
        match self {
            Source::Offline(_) | Source::Weighted { .. } => None,
            Source::Online(b) | Source::Mixed { online: b, .. } | Source::Union { online: b, .. } => Some(b),
        }
    }
}

/// `updates` gradient steps, each on a fresh batch; returns the last update's metrics plus
/// `offline_fraction`, the share of that batch's rows drawn from the offline dataset (0 when
/// online data only: WSRL's claim that it retains no offline data is visible in the log).
///
/// With `sera`, every batch's reward gets SERA's bonus before the update, computed with the
/// agent's critic as it is at that update (the one place where it is applied, for every
/// algorithm); its `train/sera/…` statistics of the last batch join the metrics.
pub fn learn(agent: &mut dyn Agent, source: &Source<'_>, batch_size: usize, updates: usize, rng: &mut ChaCha8Rng, device: Device, sera: Option<&Sera>) -> Result<Metrics> {
    let mut metrics = Metrics::new();
    let mut last = None;
    for _ in 0..updates {
        let batch = source.sample(batch_size, rng, device)?;
        metrics = match sera {
            Some(sera) => {
                let extra = match (sera.config().neighbours, source.online()) {
                    (Neighbours::OnlineSample, Some(online)) => Some(online.sample(sera.config().neighbour_samples, rng, device).context("sampling SERA's neighbour set from the online buffer")?),
                    (Neighbours::OnlineSample, None) => anyhow::bail!("sera.neighbours = \"online-sample\" needs an online replay buffer"),
                    (Neighbours::Batch, _) => None,
                };
                sera.update(agent, &batch, extra.as_ref())?
            }
            None => agent.update(&batch),
        };
        last = Some(batch);
    }
    let offline_fraction = match (source, &last) {
        (_, None) => 0.0,
        (Source::Offline(_) | Source::Weighted { .. }, _) => 1.0,
        (Source::Online(_), _) => 0.0,
        (Source::Mixed { .. } | Source::Union { .. }, Some(b)) => match &b.is_offline {
            Some(flags) => flags.mean(tch::Kind::Float).double_value(&[]),
            None => anyhow::bail!("a mixed batch without its is_offline column"),
        },
    };
    metrics.push(("offline_fraction", offline_fraction));
    // A weighted offline mix: the share of the last batch from the first buffer (ImagineBench:
    // the real rollouts), from the batch's `is_offline` flags.
    if let (Source::Weighted { .. }, Some(b)) = (source, &last) {
        let flags = b.is_offline.as_ref().context("a weighted batch without its is_offline column")?;
        metrics.push(("real_fraction", flags.mean(tch::Kind::Float).double_value(&[])));
    }
    Ok(metrics)
}

/// Stores the actor's transitions in the online replay buffer, rewards transformed.
pub struct ReplaySink<'a> {
    /// The buffer.
    pub replay: &'a mut ReplayBuffer,
    /// Applied to each reward before storing.
    pub reward: RewardTransform,
}

impl TransitionSink for ReplaySink<'_> {
    fn push(&mut self, t: &Transition) -> Result<()> {
        self.replay
            .push(&t.obs, &t.action, self.reward.apply(t.reward) as f32, &t.next_obs, t.terminated, t.truncated)
            .context("storing a transition in the replay buffer")
    }
}
