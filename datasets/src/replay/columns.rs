//! Contiguous `f32` column storage shared by every buffer, and the gather that copies sampled
//! rows straight into preallocated tensors.
//!
//! Why raw columns and not tensors: the online buffer is written one row per env step, and a
//! per-row `Tensor::copy_` costs microseconds of dispatch each; a `Vec<f32>` write costs
//! nanoseconds. Sampling then gathers rows with `copy_from_slice` into one tensor per column,
//! allocated once per batch, so no memory is allocated per sampled row.

use rand::Rng;
use tch::{Device, Kind, Tensor};

use super::her::Her;
use crate::batch::TransitionBatch;

/// `mc_return` of rows whose episode has not ended yet (−∞: Cal-QL's "no floor").
pub const MC_PENDING: f32 = f32::NEG_INFINITY;

/// Row-major columns of transitions. Row `i` of `obs` is `obs[i * obs_dim .. (i + 1) * obs_dim]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Columns {
    pub obs_dim: usize,
    pub act_dim: usize,
    pub obs: Vec<f32>,
    pub action: Vec<f32>,
    pub reward: Vec<f32>,
    pub next_obs: Vec<f32>,
    pub terminal: Vec<f32>,
    pub mc_return: Option<Vec<f32>>,
}

impl Columns {
    /// `rows` zeroed rows (the allocator hands out zeroed pages lazily, so a large, mostly
    /// unused capacity costs no resident memory).
    pub fn zeroed(rows: usize, obs_dim: usize, act_dim: usize, with_mc: bool) -> Self {
        Self {
            obs_dim,
            act_dim,
            obs: vec![0.0; rows * obs_dim],
            action: vec![0.0; rows * act_dim],
            reward: vec![0.0; rows],
            next_obs: vec![0.0; rows * obs_dim],
            terminal: vec![0.0; rows],
            mc_return: with_mc.then(|| vec![0.0; rows]),
        }
    }
}

/// Where the rows of a batch come from: `valid` rows of `cols`, rows `first, first + 1, …`
/// (wrapping at the end of the columns), drawn uniformly with replacement, tagged with
/// `is_offline` in the batch.
pub(crate) struct Source<'a> {
    pub cols: &'a Columns,
    pub valid: usize,
    /// The first sampleable row (0 but for a ring buffer that leaves out its open episode).
    pub first: usize,
    pub is_offline: f32,
    /// Hindsight relabelling of the rows drawn from this source, when it has episodes and HER.
    pub her: Option<HerSource<'a>>,
}

/// What HER needs of a ring buffer: its settings and where each row's episode ends.
pub(crate) struct HerSource<'a> {
    pub her: &'a Her,
    /// Per row, the row of its episode's last step, or [`OPEN_EPISODE`] for the episode still
    /// running (whose newest step is `newest`).
    pub episode_last: &'a [u32],
    pub newest: usize,
    pub capacity: usize,
}

/// `episode_last` of the rows of the episode in progress.
pub(crate) const OPEN_EPISODE: u32 = u32::MAX;

impl HerSource<'_> {
    /// The row whose next observation gives row `i` its relabelled goal, when it is relabelled:
    /// row i + offset (in ring order), offset uniform in 0..=(steps from i to its episode's end).
    fn future_row<R: Rng + ?Sized>(&self, i: usize, rng: &mut R) -> Option<usize> {
        let last = match self.episode_last[i] {
            OPEN_EPISODE => self.newest,
            l => l as usize,
        };
        let steps_to_end = (last + self.capacity - i) % self.capacity;
        self.her.draw(steps_to_end, rng).map(|off| (i + off) % self.capacity)
    }
}

/// One batch's tensors, allocated once, filled row by row.
pub(crate) struct BatchBuilder {
    obs_dim: usize,
    act_dim: usize,
    obs: Tensor,
    action: Tensor,
    reward: Tensor,
    next_obs: Tensor,
    terminal: Tensor,
    mc_return: Option<Tensor>,
    is_offline: Option<Tensor>,
}

/// The tensor's storage as a mutable `f32` slice.
fn f32_slice_mut(t: &mut Tensor) -> &mut [f32] {
    let n = t.numel();
    // SAFETY: every tensor reaching here was made by `Tensor::empty` below: CPU, Kind::Float,
    // contiguous, owning `n` f32 that no other tensor or slice references. The slice borrows
    // `t` mutably, so it can neither outlive nor alias it.
    unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, n) }
}

impl BatchBuilder {
    /// Allocates CPU tensors for `batch` rows.
    pub fn new(batch: usize, obs_dim: usize, act_dim: usize, with_mc: bool, with_source: bool) -> Self {
        let b = batch as i64;
        let opts = (Kind::Float, Device::Cpu);
        Self {
            obs_dim,
            act_dim,
            obs: Tensor::empty([b, obs_dim as i64], opts),
            action: Tensor::empty([b, act_dim as i64], opts),
            reward: Tensor::empty([b], opts),
            next_obs: Tensor::empty([b, obs_dim as i64], opts),
            terminal: Tensor::empty([b], opts),
            mc_return: with_mc.then(|| Tensor::empty([b], opts)),
            is_offline: with_source.then(|| Tensor::empty([b], opts)),
        }
    }

    /// Fills batch rows `start..start + count` with rows of `src` drawn uniformly with
    /// replacement. `src.valid` must be > 0 and the dims must match (callers check).
    pub fn fill<R: Rng + ?Sized>(&mut self, start: usize, count: usize, src: &Source<'_>, rng: &mut R) {
        let (od, ad) = (self.obs_dim, self.act_dim);
        let c = src.cols;
        debug_assert!(src.valid > 0 && c.obs_dim == od && c.act_dim == ad);
        let obs = f32_slice_mut(&mut self.obs);
        let action = f32_slice_mut(&mut self.action);
        let reward = f32_slice_mut(&mut self.reward);
        let next_obs = f32_slice_mut(&mut self.next_obs);
        let terminal = f32_slice_mut(&mut self.terminal);
        let mut mc = self.mc_return.as_mut().map(f32_slice_mut);
        let mut flag = self.is_offline.as_mut().map(f32_slice_mut);
        let rows = c.reward.len();
        for r in start..start + count {
            let k = rng.gen_range(0..src.valid);
            let i = if src.first == 0 { k } else { (src.first + k) % rows };
            obs[r * od..(r + 1) * od].copy_from_slice(&c.obs[i * od..(i + 1) * od]);
            next_obs[r * od..(r + 1) * od].copy_from_slice(&c.next_obs[i * od..(i + 1) * od]);
            action[r * ad..(r + 1) * ad].copy_from_slice(&c.action[i * ad..(i + 1) * ad]);
            reward[r] = c.reward[i];
            terminal[r] = c.terminal[i];
            if let (Some(dst), Some(col)) = (mc.as_deref_mut(), c.mc_return.as_deref()) {
                dst[r] = col[i];
            }
            if let Some(dst) = flag.as_deref_mut() {
                dst[r] = src.is_offline;
            }
            if let Some(h) = &src.her {
                if let Some(j) = h.future_row(i, rng) {
                    let future = &c.next_obs[j * od..(j + 1) * od];
                    h.her.relabel(
                        &mut obs[r * od..(r + 1) * od],
                        &mut next_obs[r * od..(r + 1) * od],
                        &mut reward[r],
                        &mut terminal[r],
                        future,
                    );
                    // The return to go belongs to the old goal: no Cal-QL floor for this row.
                    if let Some(dst) = mc.as_deref_mut() {
                        dst[r] = MC_PENDING;
                    }
                }
            }
        }
    }

    /// The finished batch on `device` (one copy per column when `device` is not the CPU).
    pub fn finish(self, device: Device) -> TransitionBatch {
        let mv = |t: Tensor| if device == Device::Cpu { t } else { t.to_device(device) };
        TransitionBatch {
            obs: mv(self.obs),
            action: mv(self.action),
            reward: mv(self.reward),
            next_obs: mv(self.next_obs),
            terminal: mv(self.terminal),
            mc_return: self.mc_return.map(mv),
            is_offline: self.is_offline.map(mv),
        }
    }
}

/// Draws `count` rows from each part in order and returns them as one batch. The batch has an
/// `mc_return` column when every part has one, and an `is_offline` column when `with_source`.
/// Parts with `count == 0` may be empty; the others must have `valid > 0` (callers check).
pub(crate) fn sample_parts<R: Rng + ?Sized>(
    parts: &[(Source<'_>, usize)],
    obs_dim: usize,
    act_dim: usize,
    with_source: bool,
    rng: &mut R,
    device: Device,
) -> TransitionBatch {
    let total: usize = parts.iter().map(|(_, n)| n).sum();
    let with_mc = parts.iter().filter(|(_, n)| *n > 0).all(|(s, _)| s.cols.mc_return.is_some());
    let mut b = BatchBuilder::new(total, obs_dim, act_dim, with_mc, with_source);
    let mut start = 0;
    for (src, n) in parts {
        if *n > 0 {
            b.fill(start, *n, src, rng);
        }
        start += n;
    }
    b.finish(device)
}
