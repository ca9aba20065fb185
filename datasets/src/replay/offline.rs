//! The offline buffer: a fixed dataset of transitions, sampled uniformly with replacement.

use rand::Rng;
use tch::Device;

use super::columns::{sample_parts, Columns, Source};
use crate::batch::TransitionBatch;
use crate::error::{DatasetError, Result};
use crate::transitions::Transitions;

/// A read-only buffer over a whole offline dataset, in contiguous `f32` columns.
#[derive(Debug, Clone)]
pub struct OfflineBuffer {
    cols: Columns,
    len: usize,
}

impl OfflineBuffer {
    /// Takes ownership of `t`'s columns (no copy). Fails if the columns disagree in length.
    pub fn new(t: Transitions) -> Result<Self> {
        t.validate()?;
        let len = t.len();
        let cols = Columns {
            obs_dim: t.obs_dim,
            act_dim: t.act_dim,
            obs: t.observations,
            action: t.actions,
            reward: t.rewards,
            next_obs: t.next_observations,
            terminal: t.terminals,
            mc_return: t.mc_returns,
        };
        Ok(Self { cols, len })
    }

    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no transitions.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Observation size.
    pub fn obs_dim(&self) -> usize {
        self.cols.obs_dim
    }

    /// Action size.
    pub fn act_dim(&self) -> usize {
        self.cols.act_dim
    }

    /// Whether batches carry a `mc_return` column.
    pub fn has_mc_returns(&self) -> bool {
        self.cols.mc_return.is_some()
    }

    /// The observation column, row-major `[len, obs_dim]` (e.g. for per-dimension statistics).
    pub fn observations(&self) -> &[f32] {
        &self.cols.obs[..self.len * self.cols.obs_dim]
    }

    /// The action column, row-major `[len, act_dim]`.
    pub fn actions(&self) -> &[f32] {
        &self.cols.action[..self.len * self.cols.act_dim]
    }

    /// The next-observation column, row-major `[len, obs_dim]`.
    pub fn next_observations(&self) -> &[f32] {
        &self.cols.next_obs[..self.len * self.cols.obs_dim]
    }

    /// The terminal column (1 at true terminations).
    pub fn terminals(&self) -> &[f32] {
        &self.cols.terminal[..self.len]
    }

    /// The reward column (e.g. for statistics).
    pub fn rewards(&self) -> &[f32] {
        &self.cols.reward
    }

    /// The Monte-Carlo return-to-go column, when computed.
    pub fn mc_returns(&self) -> Option<&[f32]> {
        self.cols.mc_return.as_deref().map(|g| &g[..self.len])
    }

    /// `batch` transitions drawn uniformly with replacement, gathered into new CPU tensors and
    /// moved to `device`. The caller owns the RNG (so it can be checkpointed with the run).
    pub fn sample<R: Rng + ?Sized>(&self, batch: usize, rng: &mut R, device: Device) -> Result<TransitionBatch> {
        if self.len == 0 {
            return Err(DatasetError::EmptyBuffer { what: "offline buffer".into() });
        }
        let src = Source { cols: &self.cols, valid: self.len, first: 0, is_offline: 1.0, her: None };
        Ok(sample_parts(&[(src, batch)], self.cols.obs_dim, self.cols.act_dim, false, rng, device))
    }

    pub(crate) fn source(&self) -> Source<'_> {
        Source { cols: &self.cols, valid: self.len, first: 0, is_offline: 1.0, her: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn tiny() -> Transitions {
        // Row i: obs = [i, 10 i], action = [100 i], reward i, next_obs = obs + 1, terminal i == 2.
        let n = 3;
        let mut t = Transitions { obs_dim: 2, act_dim: 1, ..Default::default() };
        for i in 0..n {
            let f = i as f32;
            t.observations.extend([f, 10.0 * f]);
            t.next_observations.extend([f + 1.0, 10.0 * f + 1.0]);
            t.actions.push(100.0 * f);
            t.rewards.push(f);
            t.terminals.push(if i == 2 { 1.0 } else { 0.0 });
            t.episode_ends.push(if i == 2 { 1.0 } else { 0.0 });
        }
        t.mc_returns = Some(vec![3.0, 3.0, 2.0]);
        t
    }

    #[test]
    fn sampled_rows_are_whole_rows_of_the_dataset() {
        let buf = OfflineBuffer::new(tiny()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let b = buf.sample(64, &mut rng, Device::Cpu).unwrap();
        assert_eq!(b.obs.size(), vec![64, 2]);
        assert_eq!(b.action.size(), vec![64, 1]);
        let obs = Vec::<f32>::try_from(b.obs.flatten(0, -1)).unwrap();
        let next = Vec::<f32>::try_from(b.next_obs.flatten(0, -1)).unwrap();
        let act = Vec::<f32>::try_from(&b.action.flatten(0, -1)).unwrap();
        let rew = Vec::<f32>::try_from(&b.reward).unwrap();
        let term = Vec::<f32>::try_from(&b.terminal).unwrap();
        let mc = Vec::<f32>::try_from(b.mc_return.as_ref().unwrap()).unwrap();
        let mut seen = [false; 3];
        for r in 0..64 {
            let i = rew[r] as usize;
            seen[i] = true;
            assert_eq!(obs[2 * r..2 * r + 2], [i as f32, 10.0 * i as f32]);
            assert_eq!(next[2 * r..2 * r + 2], [i as f32 + 1.0, 10.0 * i as f32 + 1.0]);
            assert_eq!(act[r], 100.0 * i as f32);
            assert_eq!(term[r], if i == 2 { 1.0 } else { 0.0 });
            assert_eq!(mc[r], [3.0, 3.0, 2.0][i]);
        }
        assert_eq!(seen, [true; 3], "64 uniform draws from 3 rows must hit every row");
        assert!(b.is_offline.is_none());
    }

    #[test]
    fn same_seed_same_batch() {
        let buf = OfflineBuffer::new(tiny()).unwrap();
        let a = buf.sample(16, &mut ChaCha8Rng::seed_from_u64(7), Device::Cpu).unwrap();
        let b = buf.sample(16, &mut ChaCha8Rng::seed_from_u64(7), Device::Cpu).unwrap();
        assert!(a.obs.equal(&b.obs) && a.reward.equal(&b.reward));
    }

    #[test]
    fn empty_and_inconsistent_inputs_are_errors() {
        let empty = OfflineBuffer::new(Transitions { obs_dim: 2, act_dim: 1, ..Default::default() }).unwrap();
        assert!(matches!(
            empty.sample(4, &mut ChaCha8Rng::seed_from_u64(0), Device::Cpu),
            Err(DatasetError::EmptyBuffer { .. })
        ));
        let mut bad = tiny();
        bad.actions.pop();
        assert!(matches!(OfflineBuffer::new(bad), Err(DatasetError::Dimension { .. })));
    }
}
