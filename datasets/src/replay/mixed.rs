//! Mixed sampling: each batch takes a fixed fraction of its rows from one buffer and the rest
//! from another, e.g. RLPD's and Cal-QL's symmetric 50/50 offline/online batches, or
//! ImagineBench's real/imaginary weighting.
//!
//! The offline count is `round(ratio · B)` every batch (not a random binomial draw), so every
//! batch has the same composition, as in the RLPD and Cal-QL reference code. Rows are written
//! offline first, then online, and the batch's `is_offline` column says which is which.

use rand::Rng;
use tch::Device;

use super::columns::{sample_parts, Source};
use super::offline::OfflineBuffer;
use super::ring::ReplayBuffer;
use crate::batch::TransitionBatch;
use crate::error::{DatasetError, Result};

/// Draws `round(offline_ratio · B)` rows from an offline buffer and the rest from an online one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedSampler {
    /// Fraction of each batch drawn from the offline data, in [0, 1]. RLPD and Cal-QL use 0.5.
    pub offline_ratio: f64,
}

impl MixedSampler {
    /// A sampler with `offline_ratio` ∈ [0, 1].
    pub fn new(offline_ratio: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&offline_ratio) {
            return Err(DatasetError::Invalid(format!("offline ratio must be in [0, 1], found {offline_ratio}")));
        }
        Ok(Self { offline_ratio })
    }

    /// RLPD's and Cal-QL's symmetric sampling: half offline, half online.
    pub fn symmetric() -> Self {
        Self { offline_ratio: 0.5 }
    }

    /// Rows per batch that come from the offline buffer.
    pub fn offline_count(&self, batch: usize) -> usize {
        ((self.offline_ratio * batch as f64).round() as usize).min(batch)
    }

    /// One mixed batch. While the online buffer is still empty (the first steps of
    /// fine-tuning), the whole batch comes from the offline buffer. The batch has `mc_return`
    /// when the offline buffer has MC returns, and always has `is_offline`.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        offline: &OfflineBuffer,
        online: &ReplayBuffer,
        batch: usize,
        rng: &mut R,
        device: Device,
    ) -> Result<TransitionBatch> {
        for (what, expected, found) in
            [("obs_dim", offline.obs_dim(), online.obs_dim()), ("act_dim", offline.act_dim(), online.act_dim())]
        {
            if expected != found {
                return Err(DatasetError::Dimension {
                    what: format!("mixed sampler: online buffer {what} (offline buffer's)"),
                    expected,
                    found,
                });
            }
        }
        let mut n_off = self.offline_count(batch);
        if online.sampleable_len() == 0 {
            n_off = batch;
        }
        let n_on = batch - n_off;
        if n_off > 0 && offline.is_empty() {
            return Err(DatasetError::EmptyBuffer { what: "offline buffer (mixed sampler)".into() });
        }
        let parts = [(offline.source(), n_off), (online.source(), n_on)];
        Ok(sample_parts(&parts, offline.obs_dim(), offline.act_dim(), true, rng, device))
    }
}

/// Draws `round(first_fraction · B)` rows from `first` and the rest from `second`, two offline
/// buffers (e.g. ImagineBench real and imaginary transitions). `is_offline` is 1.0 for rows of
/// `first` and 0.0 for rows of `second`. An empty buffer gives all rows to the other.
pub fn sample_weighted<R: Rng + ?Sized>(
    first: &OfflineBuffer,
    second: &OfflineBuffer,
    first_fraction: f64,
    batch: usize,
    rng: &mut R,
    device: Device,
) -> Result<TransitionBatch> {
    let mix = MixedSampler::new(first_fraction)?;
    if first.obs_dim() != second.obs_dim() || first.act_dim() != second.act_dim() {
        return Err(DatasetError::Dimension {
            what: "weighted sampler: second buffer obs_dim + act_dim".into(),
            expected: first.obs_dim() + first.act_dim(),
            found: second.obs_dim() + second.act_dim(),
        });
    }
    let mut n_first = mix.offline_count(batch);
    if second.is_empty() {
        n_first = batch;
    } else if first.is_empty() {
        n_first = 0;
    }
    if first.is_empty() && second.is_empty() {
        return Err(DatasetError::EmptyBuffer { what: "both buffers of the weighted sampler".into() });
    }
    let second_src = Source { is_offline: 0.0, ..second.source() };
    let parts = [(first.source(), n_first), (second_src, batch - n_first)];
    Ok(sample_parts(&parts, first.obs_dim(), first.act_dim(), true, rng, device))
}

/// One batch drawn uniformly from the union of `offline` and `online`, as from one replay buffer
/// pre-filled with the dataset that online transitions are appended to (IQL's and CORL's
/// fine-tuning, fidelity-audit D16): each row is offline with probability N / (N + t) for N
/// dataset rows and t online ones, so the offline share decays as the online data grows. The
/// offline count is that binomial draw (B uniform indices over the union, those below N), then
/// each part is drawn uniformly within its buffer, which is the same distribution.
pub fn sample_union<R: Rng + ?Sized>(
    offline: &OfflineBuffer,
    online: &ReplayBuffer,
    batch: usize,
    rng: &mut R,
    device: Device,
) -> Result<TransitionBatch> {
    if offline.obs_dim() != online.obs_dim() || offline.act_dim() != online.act_dim() {
        return Err(DatasetError::Dimension {
            what: "union sampler: online buffer obs_dim + act_dim (offline buffer's)".into(),
            expected: offline.obs_dim() + offline.act_dim(),
            found: online.obs_dim() + online.act_dim(),
        });
    }
    let (n, t) = (offline.len(), online.sampleable_len());
    if n + t == 0 {
        return Err(DatasetError::EmptyBuffer { what: "both buffers of the union sampler".into() });
    }
    let n_off = (0..batch).filter(|_| rng.gen_range(0..n + t) < n).count();
    let parts = [(offline.source(), n_off), (online.source(), batch - n_off)];
    Ok(sample_parts(&parts, offline.obs_dim(), offline.act_dim(), true, rng, device))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transitions::Transitions;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn offline(n: usize, reward: f32) -> OfflineBuffer {
        OfflineBuffer::new(Transitions {
            obs_dim: 2,
            act_dim: 1,
            observations: vec![1.0; 2 * n],
            actions: vec![1.0; n],
            rewards: vec![reward; n],
            next_observations: vec![1.0; 2 * n],
            terminals: vec![0.0; n],
            episode_ends: vec![0.0; n],
            mc_returns: Some(vec![reward; n]),
        })
        .unwrap()
    }

    #[test]
    fn symmetric_batch_is_half_and_half_with_flags() {
        let off = offline(10, 1.0);
        let mut on = ReplayBuffer::new(10, 2, 1, 0.99).unwrap();
        on.push(&[2.0, 2.0], &[2.0], -1.0, &[2.0, 2.0], false, true).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let b = MixedSampler::symmetric().sample(&off, &on, 256, &mut rng, Device::Cpu).unwrap();
        let flag = Vec::<f32>::try_from(b.is_offline.as_ref().unwrap()).unwrap();
        let rew = Vec::<f32>::try_from(&b.reward).unwrap();
        assert_eq!(flag.iter().filter(|&&f| f == 1.0).count(), 128);
        for (f, r) in flag.iter().zip(&rew) {
            assert_eq!(*r, if *f == 1.0 { 1.0 } else { -1.0 });
        }
        assert_eq!(b.mc_return.as_ref().unwrap().size(), vec![256]);
    }

    #[test]
    fn ratio_rounding_and_empty_online_fallback() {
        assert_eq!(MixedSampler::new(0.25).unwrap().offline_count(10), 3);
        assert!(MixedSampler::new(1.5).is_err());
        let off = offline(4, 1.0);
        let on = ReplayBuffer::new(10, 2, 1, 0.99).unwrap();
        let b = MixedSampler::symmetric().sample(&off, &on, 8, &mut ChaCha8Rng::seed_from_u64(0), Device::Cpu).unwrap();
        assert_eq!(f64::try_from(b.is_offline.unwrap().sum(tch::Kind::Float)).unwrap(), 8.0);
    }

    #[test]
    fn weighted_real_imaginary() {
        let real = offline(5, 1.0);
        let imag = offline(50, 0.0);
        let b = sample_weighted(&real, &imag, 0.75, 100, &mut ChaCha8Rng::seed_from_u64(0), Device::Cpu).unwrap();
        assert_eq!(f64::try_from(b.reward.sum(tch::Kind::Float)).unwrap(), 75.0);
    }

    /// The offline share of union batches is N / (N + t): 1 with no online data, about 0.2 with
    /// 40 dataset rows and 160 online ones (200 batches of 256 rows: within 0.01).
    #[test]
    fn union_share_decays_with_the_online_data() {
        let off = offline(40, 1.0);
        let mut on = ReplayBuffer::new(1000, 2, 1, 0.99).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let share = |on: &ReplayBuffer, rng: &mut ChaCha8Rng| {
            let rows: f64 = (0..200)
                .map(|_| {
                    f64::try_from(
                        sample_union(&off, on, 256, rng, Device::Cpu)
                            .unwrap()
                            .is_offline
                            .unwrap()
                            .sum(tch::Kind::Float),
                    )
                    .unwrap()
                })
                .sum();
            rows / (200.0 * 256.0)
        };
        assert_eq!(share(&on, &mut rng), 1.0);
        for _ in 0..160 {
            on.push(&[2.0, 2.0], &[2.0], -1.0, &[2.0, 2.0], false, false).unwrap();
        }
        let s = share(&on, &mut rng);
        assert!((s - 0.2).abs() < 0.01, "{s}");
        let empty = offline(0, 1.0);
        let none = ReplayBuffer::new(10, 2, 1, 0.99).unwrap();
        assert!(sample_union(&empty, &none, 8, &mut rng, Device::Cpu).is_err());
    }
}
