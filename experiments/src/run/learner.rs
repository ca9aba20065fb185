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
use std::time::Instant;
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
    /// HIL-SERL's intervention buffer: `round(share · B)` rows from the transitions an
    /// operator took over, the rest from `base` (all from `base` while no intervention is
    /// stored).
    #[allow(missing_docs)]
    Interventions { base: Box<Source<'a>>, interventions: &'a ReplayBuffer, share: f64 },
}

impl Source<'_> {
    /// Rows of a `size`-row batch that come from the intervention buffer.
    pub fn intervention_rows(&self, size: usize) -> usize {
        match self {
            Source::Interventions { interventions, share, .. } if interventions.sampleable_len() > 0 => {
                MixedSampler { offline_ratio: *share }.offline_count(size)
            }
            _ => 0,
        }
    }

    /// One batch of `size` rows on `device`.
    pub fn sample(&self, size: usize, rng: &mut ChaCha8Rng, device: Device) -> Result<TransitionBatch> {
        if let Source::Interventions { base, interventions, .. } = self {
            let n = self.intervention_rows(size);
            if n == 0 {
                return base.sample(size, rng, device);
            }
            let mut taken = interventions.sample(n, rng, device).context("sampling the intervention buffer")?;
            if n == size {
                return Ok(taken);
            }
            let rest = base.sample(size - n, rng, device)?;
            // Intervention rows are online rows: is_offline 0 where the base batch has the column.
            if rest.is_offline.is_some() && taken.is_offline.is_none() {
                taken.is_offline = Some(tch::Tensor::zeros([n as i64], (tch::Kind::Float, device)));
            }
            return Ok(TransitionBatch::cat(&[&rest, &taken]));
        }
        let batch = match self {
            Source::Offline(b) => b.sample(size, rng, device),
            Source::Online(b) => b.sample(size, rng, device),
            Source::Mixed { offline, online, sampler } => sampler.sample(offline, online, size, rng, device),
            Source::Union { offline, online } => o2o_datasets::replay::sample_union(offline, online, size, rng, device),
            Source::Weighted { first, second, first_fraction } => {
                o2o_datasets::replay::sample_weighted(first, second, *first_fraction, size, rng, device)
            }
            Source::Interventions { .. } => unreachable!("sampled above"),
        };
        batch.context("sampling a training batch")
    }

    /// The online replay buffer, where the source has one.
    fn online(&self) -> Option<&ReplayBuffer> {
        match self {
            Source::Offline(_) | Source::Weighted { .. } => None,
            Source::Online(b) | Source::Mixed { online: b, .. } | Source::Union { online: b, .. } => Some(b),
            Source::Interventions { base, .. } => base.online(),
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
pub fn learn(
    agent: &mut dyn Agent,
    source: &Source<'_>,
    batch_size: usize,
    updates: usize,
    rng: &mut ChaCha8Rng,
    device: Device,
    sera: Option<&Sera>,
) -> Result<Metrics> {
    learn_timed(agent, source, batch_size, updates, rng, device, sera, &mut LearnTime::default())
}

/// Wall seconds [`learn_timed`] spent drawing batches and in the agent's updates (SERA's bonus
/// included), summed over calls: the runner logs them per window as `perf/sample_s` and
/// `perf/update_s`, so a run shows what its loop costs beside the update, measured in the same
/// seconds as its `perf/steps_per_s` (a comparison that the host's drift cannot bias).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct LearnTime {
    /// Drawing the batches.
    pub sample_s: f64,
    /// The updates.
    pub update_s: f64,
}

/// [`learn`], adding the time it spends sampling and updating to `time`.
#[allow(clippy::too_many_arguments)] // learn's arguments and the clock
pub fn learn_timed(
    agent: &mut dyn Agent,
    source: &Source<'_>,
    batch_size: usize,
    updates: usize,
    rng: &mut ChaCha8Rng,
    device: Device,
    sera: Option<&Sera>,
    time: &mut LearnTime,
) -> Result<Metrics> {
    let mut metrics = Metrics::new();
    let mut last = None;
    for _ in 0..updates {
        let t0 = Instant::now();
        let batch = source.sample(batch_size, rng, device)?;
        let t1 = Instant::now();
        time.sample_s += (t1 - t0).as_secs_f64();
        metrics = match sera {
            Some(sera) => {
                let extra = match (sera.config().neighbours, source.online()) {
                    (Neighbours::OnlineSample, Some(online)) => Some(
                        online
                            .sample(sera.config().neighbour_samples, rng, device)
                            .context("sampling SERA's neighbour set from the online buffer")?,
                    ),
                    (Neighbours::OnlineSample, None) => {
                        anyhow::bail!("sera.neighbours = \"online-sample\" needs an online replay buffer")
                    }
                    (Neighbours::Batch, _) => None,
                };
                let m = sera.update(agent, &batch, extra.as_ref())?;
                if let Some(warning) = sera.take_warning() {
                    eprintln!("warning: {warning}");
                }
                m
            }
            None => agent.update(&batch),
        };
        time.update_s += t1.elapsed().as_secs_f64();
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
        (Source::Interventions { .. }, Some(b)) => {
            b.is_offline.as_ref().map_or(0.0, |f| f.mean(tch::Kind::Float).double_value(&[]))
        }
    };
    metrics.push(("offline_fraction", offline_fraction));
    // The share of each batch from the intervention buffer (HIL-SERL), when the run has one.
    if let Source::Interventions { .. } = source {
        metrics.push(("intervention_fraction", source.intervention_rows(batch_size) as f64 / batch_size.max(1) as f64));
    }
    // A weighted offline mix: the share of the last batch from the first buffer (ImagineBench:
    // the real rollouts), from the batch's `is_offline` flags.
    if let (Source::Weighted { .. }, Some(b)) = (source, &last) {
        let flags = b.is_offline.as_ref().context("a weighted batch without its is_offline column")?;
        metrics.push(("real_fraction", flags.mean(tch::Kind::Float).double_value(&[])));
    }
    Ok(metrics)
}

/// Stores the actor's transitions in the online replay buffer, rewards transformed, and the
/// intervened ones in the intervention buffer too, when there is one.
pub struct ReplaySink<'a> {
    /// The buffer.
    pub replay: &'a mut ReplayBuffer,
    /// Applied to each reward before storing.
    pub reward: RewardTransform,
    /// The intervention buffer (`train.intervention_share > 0`).
    pub interventions: Option<&'a mut ReplayBuffer>,
}

impl TransitionSink for ReplaySink<'_> {
    fn push(&mut self, t: &Transition) -> Result<()> {
        let r = self.reward.apply(t.reward) as f32;
        self.replay
            .push(&t.obs, &t.action, r, &t.next_obs, t.terminated, t.truncated)
            .context("storing a transition in the replay buffer")?;
        if let (true, Some(b)) = (t.intervention, self.interventions.as_mut()) {
            b.push(&t.obs, &t.action, r, &t.next_obs, t.terminated, t.truncated)
                .context("storing a transition in the intervention buffer")?;
        }
        Ok(())
    }
}

/// Agent metric names go under `train/` unless they carry their own namespace.
pub fn namespaced(name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("train/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use o2o_datasets::transitions::Transitions;
    use rand::SeedableRng;

    fn replay(rows: usize, reward: f32) -> ReplayBuffer {
        let mut b = ReplayBuffer::new(1000, 2, 1, 0.99).unwrap();
        for _ in 0..rows {
            b.push(&[0.0, 0.0], &[0.0], reward, &[0.0, 0.0], false, false).unwrap();
        }
        b
    }

    /// Rows of the batch whose reward is `r` (each buffer here has one reward value).
    fn rows_with(batch: &TransitionBatch, r: f64) -> i64 {
        batch.reward.eq(r).sum(tch::Kind::Int64).int64_value(&[])
    }

    #[test]
    fn the_intervention_share_of_every_batch_is_honoured() {
        let (online, taken) = (replay(50, 0.0), replay(5, 1.0));
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for (share, expected) in [(0.25, 16), (0.5, 32), (1.0, 64), (0.0, 0)] {
            let source =
                Source::Interventions { base: Box::new(Source::Online(&online)), interventions: &taken, share };
            for _ in 0..3 {
                let b = source.sample(64, &mut rng, Device::Cpu).unwrap();
                assert_eq!((b.len(), rows_with(&b, 1.0)), (64, expected), "share {share}");
            }
        }
        // No intervention yet: the whole batch from the base.
        let none = replay(0, 1.0);
        let source =
            Source::Interventions { base: Box::new(Source::Online(&online)), interventions: &none, share: 0.5 };
        assert_eq!(rows_with(&source.sample(64, &mut rng, Device::Cpu).unwrap(), 1.0), 0);
        // Over a mixed base: offline, online and intervention rows in their shares, the
        // intervention rows counted online in is_offline.
        let offline = OfflineBuffer::new(Transitions {
            obs_dim: 2,
            act_dim: 1,
            observations: vec![0.0; 40],
            actions: vec![0.0; 20],
            rewards: vec![2.0; 20],
            next_observations: vec![0.0; 40],
            terminals: vec![0.0; 20],
            episode_ends: vec![0.0; 20],
            mc_returns: None,
        })
        .unwrap();
        let mixed = Source::Mixed { offline: &offline, online: &online, sampler: MixedSampler::new(0.5).unwrap() };
        let source = Source::Interventions { base: Box::new(mixed), interventions: &taken, share: 0.25 };
        let b = source.sample(64, &mut rng, Device::Cpu).unwrap();
        assert_eq!((rows_with(&b, 1.0), rows_with(&b, 2.0), rows_with(&b, 0.0)), (16, 24, 24));
        let offline_rows = b.is_offline.as_ref().unwrap().sum(tch::Kind::Float).double_value(&[]);
        assert_eq!(offline_rows, 24.0);
        // What `learn` logs as intervention_fraction.
        assert_eq!(source.intervention_rows(64), 16);
        assert_eq!(Source::Online(&online).intervention_rows(64), 0);
    }

    #[test]
    fn the_sink_stores_interventions_in_both_buffers() {
        let (mut online, mut taken) = (replay(0, 0.0), replay(0, 0.0));
        let mut sink = ReplaySink {
            replay: &mut online,
            reward: RewardTransform { scale: 2.0, shift: 0.0 },
            interventions: Some(&mut taken),
        };
        let t = Transition {
            obs: vec![0.0, 0.0],
            action: vec![0.5],
            reward: 1.5,
            next_obs: vec![0.0, 0.0],
            terminated: false,
            truncated: false,
            intervention: false,
        };
        sink.push(&t).unwrap();
        sink.push(&Transition { intervention: true, ..t }).unwrap();
        assert_eq!((online.len(), taken.len()), (2, 1));
        let b = taken.sample(4, &mut ChaCha8Rng::seed_from_u64(1), Device::Cpu).unwrap();
        assert_eq!(rows_with(&b, 3.0), 4, "the reward transform applies to the intervention buffer too");
    }
}
