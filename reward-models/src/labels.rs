//! Progress and hop labels from demonstrations, built the way Robo-Dopamine's released data
//! pipeline builds them (`FlagOpen/Robo-Dopamine@7d4415f`, `dataset/utils/0_…` and `1_…`; read
//! for the facts, restated here in our own code).
//!
//! 1. **Sample frames.** An episode's keyframes split it into N sub-tasks. With
//!    L = last end − first start and n = L / k (k = `sample_factor`, 20), every sub-task gets
//!    m = round(n / N) intervals (at least 1), i.e. m + 1 evenly spaced frame ids including both
//!    ends, rounded half to even (numpy's `round`). The union over sub-tasks (shared boundaries
//!    merge), sorted, is the list of M + 1 sample frames.
//! 2. **Progress** Φ(frame at index i) = i / M: step-wise discretization, so each sub-task
//!    contributes exactly 1/N whatever its duration.
//! 3. **Hop** for an ordered pair of sample indices (p → q):
//!    H = (q − p)/(M − p) if q > p,  (q − p)/p if q < p,  0 if equal; H ∈ [−1, 1].
//! 4. **Balanced pairs.** A pool of distinct random ordered pairs (up to
//!    min(10⁵, max(80·m′, 10·m′))) is bucketed by 25 hop bins of width 8 % on [−100 %, 100 %] ×
//!    4 gap bins over |p − q| ∈ [1, M − 1]; each hop bin gets m′/25 pairs (the remainder to the
//!    central bins), split evenly over its gap bins (remainder to the most populated); a deficit
//!    is filled from the central hop bins outwards, then from whatever is left.
//! 5. **Zero-hop pairs.** round(0.05 · pairs) pairs label 0: a sample frame f_i and the raw frame
//!    f_i ± max(1, ⌊0.075 · (f_{i+1} − f_{i−1})⌋), clamped to the first/last sample frame.
//!
//! Deviation: an episode without keyframes is one sub-task over frames `0..=len−1`; the released
//! script names frame `len` as its end and then drops it by its range filter.

use crate::RewardModelError;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

/// One annotated sub-task: raw frame ids of its first and last frame (inclusive). The field
/// names match the released pipeline's `annotated_keyframes.json`, so those files load as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubTask {
    /// Frame id where the sub-task starts.
    pub start_frame_id: usize,
    /// Frame id where it ends (the next sub-task usually starts here).
    pub end_frame_id: usize,
    /// Free-text name of the sub-task (the released files spell the key `anotation`).
    #[serde(default, alias = "anotation", skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
}

impl SubTask {
    /// A sub-task from `start` to `end` without a name.
    pub fn new(start: usize, end: usize) -> Self {
        Self { start_frame_id: start, end_frame_id: end, annotation: None }
    }
}

/// Settings of the label pipeline; the defaults are the released script's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LabelConfig {
    /// k: about one sample frame per k raw frames ("chunk size C" in the paper).
    pub sample_factor: usize,
    /// Pairs per episode, zero-hop pairs included (`max_sample_num`).
    pub pairs_per_episode: usize,
    /// Fraction of those that are zero-hop pairs (α = 5 %).
    pub zero_fraction: f64,
    /// Hop bins on [−1, 1].
    pub hop_bins: usize,
    /// Temporal-gap bins inside each hop bin.
    pub gap_bins: usize,
    /// Candidate-pool oversampling factor (pool = min(10⁵, max(f·m′, 10·m′))).
    pub oversample: usize,
    /// Zero-pair shift as a fraction of the neighbouring sample-frame span (0.075).
    pub zero_shift: f64,
}

impl Default for LabelConfig {
    fn default() -> Self {
        Self {
            sample_factor: 20,
            pairs_per_episode: 1000,
            zero_fraction: 0.05,
            hop_bins: 25,
            gap_bins: 4,
            oversample: 80,
            zero_shift: 0.075,
        }
    }
}

impl LabelConfig {
    /// Check the ranges; `key` names the config section in errors.
    pub fn validate(&self) -> Result<(), RewardModelError> {
        let bad = |key: &str, expected: &str, found: String| {
            Err(RewardModelError::Config { key: format!("labels.{key}"), expected: expected.into(), found })
        };
        if self.sample_factor == 0 {
            return bad("sample_factor", "≥ 1", "0".into());
        }
        if !(0.0..=1.0).contains(&self.zero_fraction) {
            return bad("zero_fraction", "in [0, 1]", self.zero_fraction.to_string());
        }
        if self.hop_bins == 0 || self.gap_bins == 0 {
            return bad("hop_bins/gap_bins", "≥ 1", format!("{}/{}", self.hop_bins, self.gap_bins));
        }
        if !(self.zero_shift >= 0.0 && self.zero_shift.is_finite()) {
            return bad("zero_shift", "finite and ≥ 0", self.zero_shift.to_string());
        }
        Ok(())
    }
}

/// A labelled ordered pair of raw frame ids: the model learns H(s_before, s_after) ≈ `hop`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// Raw frame id of the BEFORE state.
    pub before: usize,
    /// Raw frame id of the AFTER state.
    pub after: usize,
    /// Hop label in [−1, 1].
    pub hop: f64,
}

/// Round half to even (numpy's `np.round`, Python's `round`).
fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// Check an episode's keyframes against its length (`len` raw frames); `None` or an empty
/// list means one sub-task over the whole episode.
pub fn checked_subtasks(
    subtasks: Option<&[SubTask]>,
    len: usize,
    source: &str,
) -> Result<Vec<SubTask>, RewardModelError> {
    if len < 2 {
        return Err(RewardModelError::Keyframes {
            episode: source.into(),
            message: format!("an episode needs at least 2 frames, found {len}"),
        });
    }
    let list = match subtasks {
        Some(s) if !s.is_empty() => s.to_vec(),
        _ => return Ok(vec![SubTask::new(0, len - 1)]),
    };
    let mut prev_end = 0usize;
    for (i, t) in list.iter().enumerate() {
        if t.end_frame_id <= t.start_frame_id {
            return Err(RewardModelError::Keyframes {
                episode: source.into(),
                message: format!(
                    "sub-task {i}: end_frame_id {} must be greater than start_frame_id {}",
                    t.end_frame_id, t.start_frame_id
                ),
            });
        }
        if t.end_frame_id >= len {
            return Err(RewardModelError::Keyframes {
                episode: source.into(),
                message: format!(
                    "sub-task {i}: end_frame_id {} is past the episode's last frame {}",
                    t.end_frame_id,
                    len - 1
                ),
            });
        }
        if i > 0 && t.start_frame_id < prev_end {
            return Err(RewardModelError::Keyframes { episode: source.into(), message: format!("sub-task {i}: start_frame_id {} is before the previous sub-task's end {prev_end}; sub-tasks must be in order", t.start_frame_id) });
        }
        prev_end = t.end_frame_id;
    }
    Ok(list)
}

/// Step 1: the sorted sample frame ids (M + 1 of them) of an episode with these sub-tasks.
pub fn sample_frames(subtasks: &[SubTask], sample_factor: usize) -> Vec<usize> {
    let (first, last) = match (subtasks.first(), subtasks.last()) {
        (Some(f), Some(l)) => (f.start_frame_id, l.end_frame_id),
        _ => return Vec::new(),
    };
    let span = (last.saturating_sub(first)).max(1) as f64;
    let n = span / sample_factor.max(1) as f64;
    let m = (round_half_even(n / subtasks.len() as f64) as usize).max(1);
    let mut ids: Vec<usize> = Vec::new();
    for t in subtasks {
        let (a, b) = (t.start_frame_id as f64, t.end_frame_id as f64);
        for j in 0..=m {
            ids.push(round_half_even(a + (b - a) * j as f64 / m as f64) as usize);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Step 2: Φ at sample index `i` of `M + 1` sample frames, i / M.
pub fn progress(i: usize, m: usize) -> f64 {
    i as f64 / m as f64
}

/// Step 3: hop label of sample indices p → q on a list with last index `m` (= M).
pub fn hop(p: usize, q: usize, m: usize) -> f64 {
    use std::cmp::Ordering::*;
    match q.cmp(&p) {
        Greater => (q as f64 - p as f64) / (m - p) as f64,
        Less => (q as f64 - p as f64) / p as f64,
        Equal => 0.0,
    }
}

/// Hop bin of a hop in [−1, 1] (width 2/bins; +1 falls in the last bin).
pub fn hop_bin(h: f64, bins: usize) -> usize {
    let w = 2.0 / bins as f64;
    (((h.clamp(-1.0, 1.0) + 1.0) / w).floor() as usize).min(bins - 1)
}

/// Gap bin of |p − q| ∈ [1, max_gap] with `bins` equal-width bins.
pub fn gap_bin(gap: usize, max_gap: usize, bins: usize) -> usize {
    let max_gap = max_gap.max(1);
    let gap = gap.clamp(1, max_gap);
    let w = max_gap as f64 / bins as f64;
    (((gap - 1) as f64 / w).floor() as usize).min(bins - 1)
}

/// Step 5 helper: how far the zero pair at sample index `i` moves its raw frame id,
/// max(1, ⌊shift · (f_{i+1} − f_{i−1})⌋) with the neighbours clamped to the list.
pub fn zero_pair_offset(frames: &[usize], i: usize, shift: f64) -> usize {
    let lo = frames[i.saturating_sub(1)];
    let hi = frames[(i + 1).min(frames.len() - 1)];
    (((hi - lo) as f64 * shift).floor() as usize).max(1)
}

/// Steps 4–5 for one episode: balanced hop pairs plus zero-hop pairs, as raw frame ids.
/// An episode with fewer than 3 sample frames yields no pairs (as in the released script).
pub fn sample_pairs<R: Rng>(frames: &[usize], cfg: &LabelConfig, rng: &mut R) -> Vec<Pair> {
    let n_ids = frames.len();
    if n_ids < 3 {
        return Vec::new();
    }
    let m = n_ids - 1;
    let n_zero = (cfg.pairs_per_episode as f64 * cfg.zero_fraction).round() as usize;
    let want = cfg.pairs_per_episode.saturating_sub(n_zero);
    let mut out: Vec<Pair> = balanced_pairs(n_ids, want, cfg, rng)
        .into_iter()
        .map(|(p, q)| Pair { before: frames[p], after: frames[q], hop: hop(p, q, m) })
        .collect();
    let (first, last) = (frames[0], frames[m]);
    for _ in 0..n_zero {
        let i = rng.gen_range(0..n_ids);
        let d = zero_pair_offset(frames, i, cfg.zero_shift);
        let after = if rng.gen_bool(0.5) { frames[i] + d } else { frames[i].saturating_sub(d) };
        out.push(Pair { before: frames[i], after: after.clamp(first, last), hop: 0.0 });
    }
    out
}

/// Step 4: `want` distinct ordered index pairs over `n_ids` sample frames, hop × gap balanced.
fn balanced_pairs<R: Rng>(n_ids: usize, want: usize, cfg: &LabelConfig, rng: &mut R) -> Vec<(usize, usize)> {
    if want == 0 {
        return Vec::new();
    }
    let m = n_ids - 1;
    // The candidate pool: distinct random ordered pairs (all of them when there are few).
    let target = (want * cfg.oversample.max(10)).min(100_000);
    let mut pool: Vec<(usize, usize)> = if n_ids * m <= target {
        (0..n_ids).flat_map(|p| (0..n_ids).filter(move |&q| q != p).map(move |q| (p, q))).collect()
    } else {
        let mut seen = HashSet::with_capacity(target);
        let mut tries = 0;
        while seen.len() < target && tries < target * 20 {
            tries += 1;
            let (p, q) = (rng.gen_range(0..n_ids), rng.gen_range(0..n_ids));
            if p != q {
                seen.insert((p, q));
            }
        }
        let mut v: Vec<_> = seen.into_iter().collect();
        v.sort_unstable(); // HashSet order is not seeded; sort so the draw below is
        v
    };
    pool.shuffle(rng);
    let (hb, gb) = (cfg.hop_bins, cfg.gap_bins);
    let mut buckets: Vec<Vec<Vec<(usize, usize)>>> = vec![vec![Vec::new(); gb]; hb];
    for (p, q) in pool {
        let g = gap_bin(p.abs_diff(q), m - 1, gb);
        buckets[hop_bin(hop(p, q, m), hb)][g].push((p, q));
    }
    // Quota per hop bin: want / bins, the remainder to the bins nearest the centre.
    let centre = (hb as f64 - 1.0) / 2.0;
    let mut order: Vec<usize> = (0..hb).collect();
    order.sort_by(|a, b| (*a as f64 - centre).abs().total_cmp(&(*b as f64 - centre).abs()));
    let mut quota = vec![want / hb; hb];
    for &k in order.iter().take(want % hb) {
        quota[k] += 1;
    }
    let mut selected = Vec::with_capacity(want);
    for (s, cells) in buckets.iter_mut().enumerate() {
        if quota[s] == 0 || cells.iter().all(Vec::is_empty) {
            continue;
        }
        // Split over gap bins; the remainder to the most populated ones.
        let mut per_gap = vec![quota[s] / gb; gb];
        let mut by_size: Vec<usize> = (0..gb).collect();
        by_size.sort_by_key(|&g| std::cmp::Reverse(cells[g].len()));
        for &g in by_size.iter().take(quota[s] % gb) {
            per_gap[g] += 1;
        }
        for (g, cell) in cells.iter_mut().enumerate() {
            let take = per_gap[g].min(cell.len());
            selected.extend(cell.drain(..take));
        }
    }
    // Deficits: from the central hop bins outwards, then any leftovers (none remain after the
    // outward sweep, which visits every bin, but the order of filling is the released one).
    for &s in &order {
        if selected.len() >= want {
            break;
        }
        for cell in buckets[s].iter_mut() {
            let take = (want - selected.len()).min(cell.len());
            selected.extend(cell.drain(..take));
        }
    }
    selected.truncate(want);
    selected
}

/// Read a keyframe sidecar: JSON (a list of sub-tasks, as the released
/// `annotated_keyframes.json`) or TOML (`[[subtask]]` tables with the same keys), chosen by the
/// file extension.
pub fn read_keyframes(path: &Path) -> Result<Vec<SubTask>, RewardModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| RewardModelError::Io { path: path.into(), source: e })?;
    let bad = |message: String| RewardModelError::Keyframes { episode: path.display().to_string(), message };
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str(&text)
            .map_err(|e| bad(format!("expected a JSON list of {{start_frame_id, end_frame_id}} objects: {e}"))),
        Some("toml") => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct File {
                subtask: Vec<SubTask>,
            }
            toml::from_str::<File>(&text)
                .map(|f| f.subtask)
                .map_err(|e| bad(format!("expected [[subtask]] tables with start_frame_id and end_frame_id: {e}")))
        }
        other => Err(bad(format!("expected a .json or .toml keyframe file, found extension {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn rounding_is_half_even() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(-0.5), 0.0);
        assert_eq!(round_half_even(2.4), 2.0);
        assert_eq!(round_half_even(2.6), 3.0);
    }

    #[test]
    fn hop_bins_cover_the_range() {
        assert_eq!(hop_bin(-1.0, 25), 0);
        assert_eq!(hop_bin(1.0, 25), 24);
        assert_eq!(hop_bin(0.0, 25), 12);
        assert_eq!(gap_bin(1, 19, 4), 0);
        assert_eq!(gap_bin(19, 19, 4), 3);
    }

    #[test]
    fn pairs_are_balanced_over_hop_bins() {
        // A long episode: 201 sample frames, plenty of candidates in every hop bin.
        let frames: Vec<usize> = (0..=200).map(|i| i * 5).collect();
        let cfg = LabelConfig::default();
        let pairs = sample_pairs(&frames, &cfg, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(pairs.len(), 1000);
        assert_eq!(pairs.iter().filter(|p| p.hop == 0.0).count(), 50);
        let mut hist = [0usize; 25];
        for p in pairs.iter().filter(|p| p.before != p.after && p.hop != 0.0) {
            hist[hop_bin(p.hop, 25)] += 1;
        }
        // 950 / 25 = 38 per hop bin, split over 4 gap bins. Large hops have candidates at every
        // gap and fill their quota; small hops exist only at small gaps, so their other gap
        // cells stay empty and the deficit goes to the central bin first (the released order).
        for b in [0, 1, 2, 22, 23, 24] {
            assert_eq!(hist[b], 38, "hop-bin histogram {hist:?}");
        }
        assert!(hist.iter().all(|&c| c > 0), "every hop bin is represented: {hist:?}");
        let others: usize = hist.iter().enumerate().filter(|(b, _)| *b != 12).map(|(_, c)| c).sum();
        assert_eq!(hist[12], 950 - others);
        let uniq: HashSet<(usize, usize)> =
            pairs.iter().filter(|p| p.hop != 0.0).map(|p| (p.before, p.after)).collect();
        assert_eq!(uniq.len(), 950);
    }

    #[test]
    fn keyframe_checks_name_the_problem() {
        let e = checked_subtasks(Some(&[SubTask::new(0, 50), SubTask::new(40, 90)]), 100, "ep3").unwrap_err();
        assert!(e.to_string().contains("sub-task 1") && e.to_string().contains("ep3"), "{e}");
        let e = checked_subtasks(Some(&[SubTask::new(0, 100)]), 100, "ep3").unwrap_err();
        assert!(e.to_string().contains("past the episode's last frame 99"), "{e}");
        assert_eq!(checked_subtasks(None, 10, "x").unwrap(), vec![SubTask::new(0, 9)]);
    }

    #[test]
    fn sidecars_read_in_both_forms() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("k.json");
        std::fs::write(
            &j,
            r#"[{"anotation":"reach","start_frame_id":0,"end_frame_id":12},{"start_frame_id":12,"end_frame_id":49}]"#,
        )
        .unwrap();
        let t = dir.path().join("k.toml");
        std::fs::write(&t, "[[subtask]]\nannotation = \"reach\"\nstart_frame_id = 0\nend_frame_id = 12\n\n[[subtask]]\nstart_frame_id = 12 # push\nend_frame_id = 49\n").unwrap();
        let a = read_keyframes(&j).unwrap();
        let b = read_keyframes(&t).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].annotation.as_deref(), Some("reach"));
        std::fs::write(&t, "[[subtask]]\nstart_frame_id = -3\n").unwrap();
        let e = read_keyframes(&t).unwrap_err().to_string();
        assert!(e.contains("k.toml") && e.contains("start_frame_id"), "{e}");
    }
}
