//! The online ring buffer: env transitions pushed one at a time, oldest overwritten first, with
//! Monte-Carlo returns-to-go filled in for an episode's rows when the episode ends.
//!
//! **MC returns online.** Rows of the episode in progress do not have a return yet; their
//! `mc_return` is [`MC_PENDING`] (−∞) until the episode ends. −∞ is the "no floor" value for
//! Cal-QL's `max(Q, G)`, so an unfinished row is simply not calibrated. When `push` gets
//! `terminated` or `truncated`, the episode's rows are filled backwards with
//! `G_t = r_t + γ G_{t+1}` starting from G = 0:
//! - `terminated`: G = 0 after the last step is exact (bootstrapping stops there);
//! - `truncated`: we also start from 0, so rows get the episode's **partial** MC return (what
//!   was observed, no bootstrap value), as the Cal-QL and CORL reference code do. It
//!   underestimates V^μ near the time limit; Cal-QL uses G only as a lower bound, so an
//!   underestimate is the safe direction.
//!
//! An episode longer than the capacity has only its newest `capacity` rows in the buffer; those
//! get returns computed from the rewards still present.
//!
//! **Episodes.** Every row also records the row of its episode's last step (the episode still
//! running: "open"), so hindsight relabelling ([`Her`], set with [`ReplayBuffer::set_her`]) can
//! draw a later step of the same episode. Rows are overwritten oldest first, so while a row is
//! stored, every later step of its episode is too.
//!
//! **Closed episodes only.** With [`ReplayBuffer::set_closed_episodes_only`], sampling leaves
//! out the rows of the episode in progress, as WSRL's and Cal-QL's official buffers do (WSRL
//! samples only finished episodes' rows; Cal-QL inserts a trajectory when it ends): every sampled
//! row then has its MC return. With [`Her`] it is SB3's `HerReplayBuffer` behaviour too (only
//! finished episodes are sampled and relabelled; the runner's default for HER runs). The open
//! episode is always the newest rows, so the sampleable rows are the oldest `len − open` ones, a
//! contiguous run in ring order.
//!
//! **Checkpoints.** [`ReplayBuffer::save`] writes a small header (dims, capacity, cursor, length,
//! open episode, γ), the raw little-endian `f32` columns and the episode column to a temp file,
//! then renames it, so a crash never leaves a half-written buffer and resume is exact. Files of
//! the first format (`O2ORING1`, no episode column) still load, each row its own episode end.
//! The HER settings are not saved: they come from the run's config.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use rand::Rng;
use tch::Device;

use super::columns::{sample_parts, Columns, HerSource, Source, MC_PENDING, OPEN_EPISODE};
use super::her::Her;
use crate::atomic::write_atomic;
use crate::batch::TransitionBatch;
use crate::error::{DatasetError, Result};
use crate::mc_returns::{episode_returns_to_go, McConfig};

const MAGIC: &[u8; 8] = b"O2ORING2";
/// The first format: no episode column.
const MAGIC_V1: &[u8; 8] = b"O2ORING1";
const END: &[u8; 8] = b"O2OEND01";

/// A fixed-capacity FIFO buffer of online transitions. Holds no RNG: callers pass theirs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayBuffer {
    cols: Columns,
    capacity: usize,
    len: usize,
    /// Next row to write.
    cursor: usize,
    /// First row and length of the episode in progress.
    open_start: usize,
    open_len: usize,
    mc: McConfig,
    /// Per row, the row of its episode's last step ([`OPEN_EPISODE`] while it runs).
    episode_last: Vec<u32>,
    /// Hindsight relabelling of sampled rows, when set.
    her: Option<Her>,
    /// Sample only rows of finished episodes (not saved: it comes from the run's config).
    closed_only: bool,
    /// Reused scratch space for an ending episode's rewards and returns.
    scratch: Scratch,
}

/// Scratch vectors; not part of the buffer's state (equal whenever the buffers are).
#[derive(Debug, Clone, Default)]
struct Scratch(Vec<f32>, Vec<f32>);

impl PartialEq for Scratch {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ReplayBuffer {
    /// An empty buffer of `capacity` rows; MC returns use discount `gamma`. Fails on a zero
    /// capacity or dimension, or γ outside [0, 1).
    pub fn new(capacity: usize, obs_dim: usize, act_dim: usize, gamma: f32) -> Result<Self> {
        Self::with_mc(capacity, obs_dim, act_dim, McConfig::dense(gamma))
    }

    /// Like [`ReplayBuffer::new`], with the full MC-return config (e.g. the sparse-reward
    /// all-failure convention).
    pub fn with_mc(capacity: usize, obs_dim: usize, act_dim: usize, mc: McConfig) -> Result<Self> {
        if capacity == 0 || obs_dim == 0 || act_dim == 0 {
            return Err(DatasetError::Invalid(format!(
                "replay buffer needs capacity, obs_dim and act_dim > 0, found {capacity}, {obs_dim}, {act_dim}"
            )));
        }
        mc.validate()?;
        if capacity >= OPEN_EPISODE as usize {
            return Err(DatasetError::Invalid(format!(
                "replay buffer capacity must be below {OPEN_EPISODE}, found {capacity}"
            )));
        }
        Ok(Self {
            cols: Columns::zeroed(capacity, obs_dim, act_dim, true),
            capacity,
            len: 0,
            cursor: 0,
            open_start: 0,
            open_len: 0,
            mc,
            episode_last: vec![OPEN_EPISODE; capacity],
            her: None,
            closed_only: false,
            scratch: Scratch::default(),
        })
    }

    /// Number of stored transitions (at most the capacity).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no transition has been pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of stored transitions.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Observation size.
    pub fn obs_dim(&self) -> usize {
        self.cols.obs_dim
    }

    /// Action size.
    pub fn act_dim(&self) -> usize {
        self.cols.act_dim
    }

    /// Relabel sampled rows with hindsight goals ([`Her`]), or stop (`None`). Fails when the
    /// goal layout does not fit this buffer's observations.
    pub fn set_her(&mut self, her: Option<Her>) -> Result<()> {
        if let Some(h) = &her {
            let g = h.goals();
            if g.achieved[1] > self.cols.obs_dim || g.desired[1] > self.cols.obs_dim {
                return Err(DatasetError::Dimension {
                    what: "HER goal layout: end of the goal ranges (the buffer's obs_dim at most)".into(),
                    expected: self.cols.obs_dim,
                    found: g.achieved[1].max(g.desired[1]),
                });
            }
        }
        self.her = her;
        Ok(())
    }

    /// Sample only rows of finished episodes (`true`), or every stored row (`false`, the default).
    pub fn set_closed_episodes_only(&mut self, closed_only: bool) {
        self.closed_only = closed_only;
    }

    /// Rows a batch can be drawn from: every stored row, or with
    /// [`ReplayBuffer::set_closed_episodes_only`] those of finished episodes.
    pub fn sampleable_len(&self) -> usize {
        if self.closed_only {
            self.len - self.open_len.min(self.len)
        } else {
            self.len
        }
    }

    /// The HER settings, when set.
    pub fn her(&self) -> Option<&Her> {
        self.her.as_ref()
    }

    /// The stored row of the last step of row `i`'s episode, or `None` while that episode is
    /// still running (or `i` is not a stored row).
    pub fn episode_last_row(&self, i: usize) -> Option<usize> {
        (i < self.len && self.episode_last[i] != OPEN_EPISODE).then(|| self.episode_last[i] as usize)
    }

    /// Steps of the episode in progress (0 right after an episode ended).
    pub fn open_episode_len(&self) -> usize {
        self.open_len
    }

    /// Stores one transition. `terminated` (a true end) sets the row's terminal flag;
    /// `truncated` (time limit) does not. Either one closes the episode and fills its MC
    /// returns. Fails if a slice has the wrong length.
    pub fn push(
        &mut self,
        obs: &[f32],
        action: &[f32],
        reward: f32,
        next_obs: &[f32],
        terminated: bool,
        truncated: bool,
    ) -> Result<()> {
        let (od, ad) = (self.cols.obs_dim, self.cols.act_dim);
        for (what, found, expected) in
            [("obs", obs.len(), od), ("action", action.len(), ad), ("next_obs", next_obs.len(), od)]
        {
            if found != expected {
                return Err(DatasetError::Dimension {
                    what: format!("replay buffer push: {what} length"),
                    expected,
                    found,
                });
            }
        }
        let i = self.cursor;
        self.cols.obs[i * od..(i + 1) * od].copy_from_slice(obs);
        self.cols.next_obs[i * od..(i + 1) * od].copy_from_slice(next_obs);
        self.cols.action[i * ad..(i + 1) * ad].copy_from_slice(action);
        self.cols.reward[i] = reward;
        self.cols.terminal[i] = if terminated { 1.0 } else { 0.0 };
        self.episode_last[i] = OPEN_EPISODE;
        if let Some(mc) = self.cols.mc_return.as_mut() {
            mc[i] = MC_PENDING;
        }
        if self.open_len == 0 {
            self.open_start = i;
        }
        self.open_len += 1;
        self.cursor = (self.cursor + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
        if terminated || truncated {
            self.close_episode();
        }
        Ok(())
    }

    /// Fills the MC returns of the episode in progress (see the module docs) and starts a new one.
    fn close_episode(&mut self) {
        // Only the newest `capacity` rows of a very long episode are still stored.
        let n = self.open_len.min(self.capacity);
        let first = (self.open_start + self.open_len - n) % self.capacity;
        let Scratch(rewards, returns) = &mut self.scratch;
        rewards.clear();
        rewards.extend((0..n).map(|k| self.cols.reward[(first + k) % self.capacity]));
        returns.clear();
        returns.resize(n, 0.0);
        episode_returns_to_go(rewards, &self.mc, returns);
        if let Some(mc) = self.cols.mc_return.as_mut() {
            for (k, g) in returns.iter().enumerate() {
                mc[(first + k) % self.capacity] = *g;
            }
        }
        let last = ((first + n - 1) % self.capacity) as u32;
        for k in 0..n {
            self.episode_last[(first + k) % self.capacity] = last;
        }
        self.open_len = 0;
        self.open_start = self.cursor;
    }

    /// `batch` transitions drawn uniformly with replacement from the sampleable rows
    /// ([`ReplayBuffer::sampleable_len`]), gathered into new CPU tensors and moved to `device`.
    /// Batches always carry `mc_return` ([`MC_PENDING`] for rows of the episode in progress).
    pub fn sample<R: Rng + ?Sized>(&self, batch: usize, rng: &mut R, device: Device) -> Result<TransitionBatch> {
        if self.sampleable_len() == 0 {
            let what = if self.closed_only && self.len > 0 {
                "online replay buffer (no finished episode yet)"
            } else {
                "online replay buffer"
            };
            return Err(DatasetError::EmptyBuffer { what: what.into() });
        }
        Ok(sample_parts(&[(self.source(), batch)], self.cols.obs_dim, self.cols.act_dim, false, rng, device))
    }

    pub(crate) fn source(&self) -> Source<'_> {
        // The ring fills rows 0, 1, … before it wraps, so the stored rows are always 0..len, the
        // oldest at (cursor − len) mod capacity; the open episode is the newest rows.
        let newest = (self.cursor + self.capacity - 1) % self.capacity;
        let her = self.her.as_ref().map(|her| HerSource {
            her,
            episode_last: &self.episode_last,
            newest,
            capacity: self.capacity,
        });
        let first = if self.closed_only { (self.cursor + self.capacity - self.len) % self.capacity } else { 0 };
        Source { cols: &self.cols, valid: self.sampleable_len(), first, is_offline: 0.0, her }
    }

    /// Writes the whole buffer state to `path` atomically (temp file in the same folder, then
    /// rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, |tmp| self.write_to(tmp))
    }

    fn write_to(&self, tmp: &Path) -> Result<()> {
        let io = |e| DatasetError::io(tmp, e);
        let file = std::fs::File::create(tmp).map_err(io)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        w.write_all(MAGIC).map_err(io)?;
        for v in
            [self.capacity, self.cols.obs_dim, self.cols.act_dim, self.len, self.cursor, self.open_start, self.open_len]
        {
            w.write_all(&(v as u64).to_le_bytes()).map_err(io)?;
        }
        w.write_all(&self.mc.gamma.to_le_bytes()).map_err(io)?;
        w.write_all(&[self.mc.sparse_failure_reward.is_some() as u8]).map_err(io)?;
        w.write_all(&self.mc.sparse_failure_reward.unwrap_or(0.0).to_le_bytes()).map_err(io)?;
        let (n, od, ad) = (self.len, self.cols.obs_dim, self.cols.act_dim);
        let empty = Vec::new();
        let mc = self.cols.mc_return.as_ref().unwrap_or(&empty);
        for col in [
            &self.cols.obs[..n * od],
            &self.cols.action[..n * ad],
            &self.cols.reward[..n],
            &self.cols.next_obs[..n * od],
            &self.cols.terminal[..n],
            &mc[..n],
        ] {
            write_f32s(&mut w, col).map_err(io)?;
        }
        let mut bytes = Vec::with_capacity(4 * n);
        for v in &self.episode_last[..n] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        w.write_all(&bytes).map_err(io)?;
        w.write_all(END).map_err(io)?;
        let file = w.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        Ok(())
    }

    /// Reads a buffer written by [`ReplayBuffer::save`]. A truncated or foreign file is a
    /// [`DatasetError::BadMetadata`] naming the file.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |message: String| DatasetError::BadMetadata { path: path.to_path_buf(), message };
        let file = std::fs::File::open(path).map_err(|e| DatasetError::io(path, e))?;
        let file_len = file.metadata().map_err(|e| DatasetError::io(path, e))?.len();
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic).map_err(|_| bad("file too short for a replay-buffer header".into()))?;
        let with_episodes = match &magic {
            m if m == MAGIC => true,
            m if m == MAGIC_V1 => false,
            _ => return Err(bad(format!("not an o2o replay buffer: expected magic {:?}, found {:?}", MAGIC, magic))),
        };
        let mut u = [0u64; 7];
        let mut b8 = [0u8; 8];
        for v in u.iter_mut() {
            r.read_exact(&mut b8).map_err(|_| bad("truncated header".into()))?;
            *v = u64::from_le_bytes(b8);
        }
        let [capacity, obs_dim, act_dim, len, cursor, open_start, open_len] = u.map(|v| v as usize);
        let mut b4 = [0u8; 4];
        let mut b1 = [0u8; 1];
        r.read_exact(&mut b4).map_err(|_| bad("truncated header".into()))?;
        let gamma = f32::from_le_bytes(b4);
        r.read_exact(&mut b1).map_err(|_| bad("truncated header".into()))?;
        r.read_exact(&mut b4).map_err(|_| bad("truncated header".into()))?;
        let sparse = (b1[0] == 1).then(|| f32::from_le_bytes(b4));
        if capacity == 0
            || obs_dim == 0
            || act_dim == 0
            || len > capacity
            || cursor >= capacity
            || open_start >= capacity
            || b1[0] > 1
        {
            return Err(bad(format!(
                "inconsistent header: capacity {capacity}, obs_dim {obs_dim}, act_dim {act_dim}, len {len}, cursor {cursor}, open episode start {open_start}"
            )));
        }
        let header = 8 + 7 * 8 + 4 + 1 + 4;
        let expected =
            header as u64 + 4 * (len as u64) * (2 * obs_dim as u64 + act_dim as u64 + 3 + with_episodes as u64) + 8;
        if file_len != expected {
            return Err(bad(format!(
                "expected {expected} bytes for {len} rows, found {file_len} (truncated or corrupt)"
            )));
        }
        let mut buf = Self::with_mc(capacity, obs_dim, act_dim, McConfig { gamma, sparse_failure_reward: sparse })?;
        let n = len;
        let mc = buf.cols.mc_return.as_mut().expect("online buffers always have an mc column");
        for col in [
            &mut buf.cols.obs[..n * obs_dim],
            &mut buf.cols.action[..n * act_dim],
            &mut buf.cols.reward[..n],
            &mut buf.cols.next_obs[..n * obs_dim],
            &mut buf.cols.terminal[..n],
            &mut mc[..n],
        ] {
            read_f32s(&mut r, col).map_err(|e| bad(format!("reading columns: {e}")))?;
        }
        if with_episodes {
            let mut bytes = vec![0u8; 4 * n];
            r.read_exact(&mut bytes).map_err(|e| bad(format!("reading the episode column: {e}")))?;
            for (k, (v, x)) in buf.episode_last.iter_mut().zip(bytes.chunks_exact(4)).enumerate() {
                *v = u32::from_le_bytes([x[0], x[1], x[2], x[3]]);
                if *v != OPEN_EPISODE && *v as usize >= len {
                    return Err(bad(format!("row {k}: episode end row {v} outside the {len} stored rows")));
                }
            }
        } else {
            // The first format kept no episode ends: each closed row is its own episode's end.
            for (k, v) in buf.episode_last[..n].iter_mut().enumerate() {
                *v = k as u32;
            }
            for m in 0..open_len.min(len) {
                buf.episode_last[(open_start + m) % capacity] = OPEN_EPISODE;
            }
        }
        r.read_exact(&mut b8).map_err(|_| bad("missing end marker".into()))?;
        if &b8 != END {
            return Err(bad("bad end marker (corrupt file)".into()));
        }
        buf.len = len;
        buf.cursor = cursor;
        buf.open_start = open_start;
        buf.open_len = open_len;
        Ok(buf)
    }
}

fn write_f32s(w: &mut impl Write, col: &[f32]) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(4 * 16384);
    for chunk in col.chunks(16384) {
        bytes.clear();
        for v in chunk {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        w.write_all(&bytes)?;
    }
    Ok(())
}

fn read_f32s(r: &mut impl Read, col: &mut [f32]) -> std::io::Result<()> {
    let mut bytes = vec![0u8; 4 * 16384];
    for chunk in col.chunks_mut(16384) {
        let b = &mut bytes[..4 * chunk.len()];
        r.read_exact(b)?;
        for (v, x) in chunk.iter_mut().zip(b.chunks_exact(4)) {
            *v = f32::from_le_bytes([x[0], x[1], x[2], x[3]]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn push_step(b: &mut ReplayBuffer, t: f32, r: f32, term: bool, trunc: bool) {
        b.push(&[t, -t], &[t], r, &[t + 1.0, -t - 1.0], term, trunc).unwrap();
    }

    fn mc(b: &ReplayBuffer) -> Vec<f32> {
        b.cols.mc_return.as_ref().unwrap()[..b.len].to_vec()
    }

    /// The action values (`t`) of 2000 rows sampled from `b`.
    fn sampled_steps(b: &ReplayBuffer) -> std::collections::BTreeSet<i64> {
        let batch = b.sample(2000, &mut ChaCha8Rng::seed_from_u64(1), Device::Cpu).unwrap();
        Vec::<f32>::try_from(batch.action.flatten(0, -1)).unwrap().into_iter().map(|t| t as i64).collect()
    }

    #[test]
    fn closed_episodes_only_leaves_out_the_open_episode_also_after_wrapping() {
        let mut b = ReplayBuffer::new(6, 2, 1, 0.9).unwrap();
        b.set_closed_episodes_only(true);
        push_step(&mut b, 0.0, 1.0, false, false);
        // Only an open episode: nothing to sample, and the error says why.
        assert_eq!(b.sampleable_len(), 0);
        let e = b.sample(4, &mut ChaCha8Rng::seed_from_u64(0), Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("no finished episode"), "{e}");
        push_step(&mut b, 1.0, 1.0, true, false);
        push_step(&mut b, 2.0, 1.0, false, false);
        push_step(&mut b, 3.0, 1.0, false, false);
        assert_eq!((b.len(), b.sampleable_len()), (4, 2));
        assert_eq!(sampled_steps(&b), [0, 1].into());
        // Every sampled row has its MC return (no −∞ pending rows).
        let batch = b.sample(500, &mut ChaCha8Rng::seed_from_u64(2), Device::Cpu).unwrap();
        assert!(Vec::<f32>::try_from(batch.mc_return.unwrap()).unwrap().iter().all(|g| g.is_finite()));
        // Wrapped: steps 2–5 close at 5, then 6 and 7 start an open episode over rows 0 and 1.
        push_step(&mut b, 4.0, 1.0, false, false);
        push_step(&mut b, 5.0, 1.0, false, true);
        push_step(&mut b, 6.0, 1.0, false, false);
        push_step(&mut b, 7.0, 1.0, false, false);
        assert_eq!((b.len(), b.sampleable_len()), (6, 4));
        assert_eq!(sampled_steps(&b), [2, 3, 4, 5].into());
        // Off (the default): the open episode's rows are sampled too.
        b.set_closed_episodes_only(false);
        assert_eq!(b.sampleable_len(), 6);
        assert_eq!(sampled_steps(&b), [2, 3, 4, 5, 6, 7].into());
    }

    #[test]
    fn mc_returns_filled_when_episode_ends() {
        let mut b = ReplayBuffer::new(10, 2, 1, 0.5).unwrap();
        push_step(&mut b, 0.0, 1.0, false, false);
        push_step(&mut b, 1.0, 2.0, false, false);
        assert_eq!(mc(&b), vec![MC_PENDING, MC_PENDING]);
        push_step(&mut b, 2.0, 4.0, true, false);
        // G_2 = 4, G_1 = 2 + 0.5·4 = 4, G_0 = 1 + 0.5·4 = 3
        assert_eq!(mc(&b), vec![3.0, 4.0, 4.0]);
        assert_eq!(b.cols.terminal[..3], [0.0, 0.0, 1.0]);
        // A truncated episode: partial return, terminal flag stays 0.
        push_step(&mut b, 3.0, 2.0, false, false);
        push_step(&mut b, 4.0, 2.0, false, true);
        assert_eq!(mc(&b)[3..], [3.0, 2.0]);
        assert_eq!(b.cols.terminal[3..5], [0.0, 0.0]);
        assert_eq!(b.open_episode_len(), 0);
    }

    #[test]
    fn ring_wraps_and_long_episode_uses_stored_rows() {
        let mut b = ReplayBuffer::new(3, 2, 1, 0.5).unwrap();
        for t in 0..5 {
            push_step(&mut b, t as f32, 1.0, false, t == 4);
        }
        assert_eq!(b.len(), 3);
        assert_eq!(b.capacity(), 3);
        // Rows hold steps 3, 4, 2 (cursor wrapped twice); the newest 3 steps are 2, 3, 4.
        assert_eq!(b.cols.reward, vec![1.0, 1.0, 1.0]);
        assert_eq!(b.cols.obs[..6], [3.0, -3.0, 4.0, -4.0, 2.0, -2.0]);
        // Returns of steps 2, 3, 4 are 1.75, 1.5, 1 (rows 2, 0, 1).
        assert_eq!(mc(&b), vec![1.5, 1.0, 1.75]);
    }

    #[test]
    fn sparse_failure_convention_online() {
        let cfg = McConfig { gamma: 0.9, sparse_failure_reward: Some(-1.0) };
        let mut b = ReplayBuffer::with_mc(8, 2, 1, cfg).unwrap();
        for t in 0..3 {
            push_step(&mut b, t as f32, -1.0, false, t == 2);
        }
        for g in mc(&b) {
            assert!((g + 10.0).abs() < 1e-5, "{g}");
        }
    }

    #[test]
    fn push_checks_lengths() {
        let mut b = ReplayBuffer::new(4, 2, 1, 0.99).unwrap();
        assert!(matches!(b.push(&[0.0], &[0.0], 0.0, &[0.0, 0.0], false, false), Err(DatasetError::Dimension { .. })));
        assert!(ReplayBuffer::new(0, 2, 1, 0.99).is_err());
        assert!(ReplayBuffer::new(4, 2, 1, 1.5).is_err());
        assert!(matches!(
            b.sample(2, &mut ChaCha8Rng::seed_from_u64(0), Device::Cpu),
            Err(DatasetError::EmptyBuffer { .. })
        ));
    }

    #[test]
    fn save_load_roundtrip_and_identical_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("online.bin");
        let mut b = ReplayBuffer::new(5, 2, 1, 0.9).unwrap();
        for t in 0..7 {
            push_step(&mut b, t as f32, t as f32 * 0.5, t == 3, false);
        }
        b.save(&path).unwrap();
        let c = ReplayBuffer::load(&path).unwrap();
        assert_eq!(b, c);
        let x = b.sample(32, &mut ChaCha8Rng::seed_from_u64(3), Device::Cpu).unwrap();
        let y = c.sample(32, &mut ChaCha8Rng::seed_from_u64(3), Device::Cpu).unwrap();
        assert!(x.obs.equal(&y.obs) && x.action.equal(&y.action) && x.reward.equal(&y.reward));
        assert!(x.next_obs.equal(&y.next_obs) && x.terminal.equal(&y.terminal));
        assert!(x.mc_return.unwrap().equal(&y.mc_return.unwrap()));
        // No temp file left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn load_rejects_truncated_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("online.bin");
        let mut b = ReplayBuffer::new(5, 2, 1, 0.9).unwrap();
        push_step(&mut b, 0.0, 1.0, false, false);
        b.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        let err = ReplayBuffer::load(&path).unwrap_err();
        assert!(matches!(err, DatasetError::BadMetadata { .. }), "{err}");
        assert!(err.to_string().contains("online.bin"));
        std::fs::write(&path, b"hello world, not a buffer").unwrap();
        assert!(matches!(ReplayBuffer::load(&path), Err(DatasetError::BadMetadata { .. })));
    }
}
