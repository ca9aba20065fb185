//! The transition batch: the one thing `datasets` hands to `agents`.
//!
//! Plain tensors, one row per transition, first dimension the batch. Agents never read files;
//! buffers and samplers in this crate fill these tensors straight from contiguous f32 storage.

use tch::{Device, Tensor};

/// A batch of transitions `(s, a, r, s', terminal)` plus optional extras.
///
/// Shapes: `obs` and `next_obs` `[B, obs_dim]`, `action` `[B, act_dim]`, `reward`, `terminal`
/// and `mc_return` `[B]`. All `f32`. `terminal` is 1.0 only for true terminations (bootstrapping
/// stops); time-limit truncations are 0.0 with a real `next_obs`.
#[derive(Debug)]
pub struct TransitionBatch {
    /// States s, `[B, obs_dim]`.
    pub obs: Tensor,
    /// Actions a, `[B, act_dim]`.
    pub action: Tensor,
    /// Rewards r, `[B]`.
    pub reward: Tensor,
    /// Next states s', `[B, obs_dim]`.
    pub next_obs: Tensor,
    /// 1.0 where the episode truly terminated after this transition, `[B]`.
    pub terminal: Tensor,
    /// Monte-Carlo return-to-go of each transition (needed by Cal-QL), when known.
    pub mc_return: Option<Tensor>,
    /// Which rows came from the offline dataset (1.0) rather than online data (0.0), when the
    /// batch was drawn by a mixed sampler; useful for diagnostics and tests.
    pub is_offline: Option<Tensor>,
}

impl TransitionBatch {
    /// Number of transitions in the batch.
    pub fn len(&self) -> usize {
        self.obs.size()[0] as usize
    }

    /// Whether the batch holds no transitions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `f` applied to every column (the optional ones where present).
    pub fn map_columns(&self, f: impl Fn(&Tensor) -> Tensor) -> Self {
        Self {
            obs: f(&self.obs),
            action: f(&self.action),
            reward: f(&self.reward),
            next_obs: f(&self.next_obs),
            terminal: f(&self.terminal),
            mc_return: self.mc_return.as_ref().map(&f),
            is_offline: self.is_offline.as_ref().map(&f),
        }
    }

    /// The same batch on `device`.
    pub fn to_device(&self, device: Device) -> Self {
        self.map_columns(|t| t.to_device(device))
    }

    /// Rows `start..start+len` as a new batch (a view; no copy).
    pub fn narrow(&self, start: i64, len: i64) -> Self {
        self.map_columns(|t| t.narrow(0, start, len))
    }

    /// Rows `start, start + step, start + 2·step, …` as a new batch (a strided view; no copy).
    pub fn strided(&self, start: i64, step: i64) -> Self {
        let n = self.len() as i64;
        self.map_columns(|t| t.slice(0, start, n, step))
    }

    /// Concatenate batches row-wise (e.g. an offline and an online half). Optional columns are
    /// kept only when every part has them.
    pub fn cat(parts: &[&TransitionBatch]) -> Self {
        let col = |f: fn(&TransitionBatch) -> &Tensor| Tensor::cat(&parts.iter().map(|b| f(b)).collect::<Vec<_>>(), 0);
        let opt = |f: fn(&TransitionBatch) -> Option<&Tensor>| {
            let v: Option<Vec<&Tensor>> = parts.iter().map(|b| f(b)).collect();
            v.map(|v| Tensor::cat(&v, 0))
        };
        Self {
            obs: col(|b| &b.obs),
            action: col(|b| &b.action),
            reward: col(|b| &b.reward),
            next_obs: col(|b| &b.next_obs),
            terminal: col(|b| &b.terminal),
            mc_return: opt(|b| b.mc_return.as_ref()),
            is_offline: opt(|b| b.is_offline.as_ref()),
        }
    }
}
