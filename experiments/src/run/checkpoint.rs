//! Checkpoints: `checkpoints/step-<loop step>/` holding `agent.ot` (the agent's full state, its
//! own format), `replay.bin` (the online replay buffer, when the run has one) and `state.json`
//! (the runner's counters, its RNG position, and the length of `metrics.jsonl` at that moment).
//!
//! Atomic: everything is written into `checkpoints/.tmp-step-<n>/`, then that folder is renamed
//! to `step-<n>` — a rename is atomic, so any `step-*` folder is complete and a kill at any
//! moment leaves at worst a `.tmp-*` folder, which the next writer or resume removes.
//!
//! Online phases are checkpointed only at episode boundaries, and each episode's reset seed is
//! derived from the episode index (see `actor.rs`), so no env state needs saving.

use super::eval::EvalResult;
use super::rundir::{write_atomic, CHECKPOINTS};
use anyhow::{bail, Context, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Bumped when `state.json` changes incompatibly.
pub const FORMAT: u32 = 1;

/// File names inside a checkpoint folder.
pub const AGENT: &str = "agent.ot";
/// The online replay buffer.
pub const REPLAY: &str = "replay.bin";
/// The intervention buffer (`train.intervention_share > 0`).
pub const INTERVENTIONS: &str = "interventions.bin";
/// The runner's counters and RNG position ([`RunnerState`]).
pub const STATE: &str = "state.json";
/// The run's recorded dataset so far (`train.record_dataset`).
pub const DATASET: &str = "dataset.hdf5";

/// The runner's part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerState {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// Loop steps done (gradient steps offline + env steps online).
    pub step: u64,
    /// Gradient updates done.
    pub grad_step: u64,
    /// Env steps done.
    pub env_step: u64,
    /// Index of the next training episode.
    pub episode: u64,
    /// The runner RNG (batch sampling, random actions): its 32-byte seed in hex, its stream,
    /// and its word position (a u128, as a decimal string).
    pub rng_seed: String,
    /// The RNG's stream.
    pub rng_stream: u64,
    /// The RNG's word position, a u128 as a decimal string.
    pub rng_word_pos: String,
    /// Bytes of `metrics.jsonl` written when the checkpoint was taken.
    pub metrics_len: u64,
    /// The run reached its last step.
    pub finished: bool,
    /// The latest evaluation.
    pub last_eval: Option<EvalResult>,
    /// The best evaluation so far (by mean return).
    pub best_eval: Option<EvalResult>,
    /// Evaluations taken when a phase ended (`eval.at_phase_end`).
    #[serde(default)]
    pub phase_evals: Vec<PhaseEval>,
    /// A fleet learner's position in its transition stream: the last stream sequence whose
    /// transitions this checkpoint's replay buffer holds (docs/fleet.md); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seq: Option<u64>,
}

/// An evaluation at the end of a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseEval {
    /// The phase that ended: `offline`, `random`, `warmup`, `online`; `start` for the
    /// evaluation before the first step.
    pub phase: String,
    /// Its result.
    pub eval: EvalResult,
    /// Env steps done at that moment.
    pub env_step: u64,
    /// Seconds since this process started the run.
    pub wall_s: f64,
}

impl RunnerState {
    /// Capture the RNG's exact position.
    pub fn set_rng(&mut self, rng: &ChaCha8Rng) {
        self.rng_seed = rng.get_seed().iter().map(|b| format!("{b:02x}")).collect();
        self.rng_stream = rng.get_stream();
        self.rng_word_pos = rng.get_word_pos().to_string();
    }

    /// Rebuild the RNG at the saved position.
    pub fn rng(&self) -> Result<ChaCha8Rng> {
        let bytes: Vec<u8> = (0..self.rng_seed.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(self.rng_seed.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<_, _>>()
            .with_context(|| format!("rng_seed {:?} is not hex", self.rng_seed))?;
        let seed: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| anyhow::anyhow!("rng_seed: expected 32 bytes, found {}", b.len()))?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(self.rng_stream);
        rng.set_word_pos(
            self.rng_word_pos
                .parse()
                .with_context(|| format!("rng_word_pos {:?} is not a number", self.rng_word_pos))?,
        );
        Ok(rng)
    }
}

/// A fresh state at step 0.
pub fn initial_state(rng: &ChaCha8Rng) -> RunnerState {
    let mut s = RunnerState {
        format: FORMAT,
        step: 0,
        grad_step: 0,
        env_step: 0,
        episode: 0,
        rng_seed: String::new(),
        rng_stream: 0,
        rng_word_pos: String::new(),
        metrics_len: 0,
        finished: false,
        last_eval: None,
        best_eval: None,
        phase_evals: Vec::new(),
        stream_seq: None,
    };
    s.set_rng(rng);
    s
}

/// Write a checkpoint folder for `state`: `write_parts` fills the temp folder with the agent
/// and replay files; then `state.json` is added and the folder renamed into place. Keeps the
/// newest `keep` checkpoints. Returns the checkpoint folder.
pub fn write(
    run_dir: &Path,
    state: &RunnerState,
    keep: usize,
    write_parts: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = run_dir.join(CHECKPOINTS);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let name = format!("step-{:010}", state.step);
    let tmp = root.join(format!(".tmp-{name}"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("cannot remove the stale {}", tmp.display()))?;
    }
    std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    write_parts(&tmp)?;
    write_atomic(&tmp.join(STATE), serde_json::to_string_pretty(state)?.as_bytes())?;
    super::fault::point("checkpoint");
    let dest = root.join(&name);
    if dest.exists() {
        // Same step written twice (the final checkpoint right after a periodic one).
        std::fs::remove_dir_all(&dest).with_context(|| format!("cannot replace {}", dest.display()))?;
    }
    std::fs::rename(&tmp, &dest).with_context(|| format!("cannot rename {} to {}", tmp.display(), dest.display()))?;
    if let Ok(dir) = std::fs::File::open(&root) {
        let _ = dir.sync_all();
    }
    let all = list(run_dir)?;
    for old in all.iter().take(all.len().saturating_sub(keep)) {
        std::fs::remove_dir_all(old).with_context(|| format!("cannot remove the old checkpoint {}", old.display()))?;
    }
    Ok(dest)
}

/// Complete checkpoints of a run, oldest first.
pub fn list(run_dir: &Path) -> Result<Vec<PathBuf>> {
    let root = run_dir.join(CHECKPOINTS);
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&root).with_context(|| format!("cannot list {}", root.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(n) = name.strip_prefix("step-").and_then(|n| n.parse::<u64>().ok()) {
            if entry.path().join(STATE).is_file() {
                found.push((n, entry.path()));
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// The newest complete checkpoint; an error naming the folder when there is none.
pub fn latest(run_dir: &Path) -> Result<PathBuf> {
    match list(run_dir)?.pop() {
        Some(p) => Ok(p),
        None => bail!("{} has no complete checkpoint (no checkpoints/step-*/{STATE})", run_dir.display()),
    }
}

/// The checkpoint folder `name` (`step-N`, `step-0000001000`, or a path) of the run in
/// `run_dir`, or its newest complete one.
pub fn find(run_dir: &Path, name: Option<&str>) -> Result<PathBuf> {
    let Some(name) = name else { return latest(run_dir) };
    let all = list(run_dir)?;
    let wanted = name.trim_end_matches('/').rsplit('/').next().unwrap_or(name);
    let step = wanted.strip_prefix("step-").and_then(|n| n.parse::<u64>().ok());
    let found = all.iter().find(|p| {
        let file = p.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
        file == wanted
            || step.is_some_and(|s| file.strip_prefix("step-").and_then(|n| n.parse::<u64>().ok()) == Some(s))
    });
    match found {
        Some(p) => Ok(p.clone()),
        None => {
            let names: Vec<String> =
                all.iter().filter_map(|p| p.file_name().map(|f| f.to_string_lossy().to_string())).collect();
            bail!(
                "checkpoint {name}: {} has no such complete checkpoint; it has: {}",
                run_dir.display(),
                if names.is_empty() { "none".into() } else { names.join(", ") }
            )
        }
    }
}

/// Remove half-written `.tmp-*` checkpoint folders left by a killed run.
pub fn remove_partial(run_dir: &Path) -> Result<()> {
    let root = run_dir.join(CHECKPOINTS);
    for entry in std::fs::read_dir(&root).with_context(|| format!("cannot list {}", root.display()))? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(".tmp-") {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Move a checkpoint out of the way (`checkpoints/.<why>-step-N`, numbered if taken), so the
/// newest complete checkpoint is again the one to continue from; returns where it went.
pub fn set_aside(checkpoint: &Path, why: &str) -> Result<PathBuf> {
    let name = checkpoint.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let parent = checkpoint.parent().with_context(|| format!("{} has no parent folder", checkpoint.display()))?;
    let mut dest = parent.join(format!(".{why}-{name}"));
    let mut k = 2;
    while dest.exists() {
        dest = parent.join(format!(".{why}-{name}-{k}"));
        k += 1;
    }
    std::fs::rename(checkpoint, &dest)
        .with_context(|| format!("cannot move {} to {}", checkpoint.display(), dest.display()))?;
    Ok(dest)
}

/// Read a checkpoint's `state.json`.
pub fn read_state(checkpoint: &Path) -> Result<RunnerState> {
    let p = checkpoint.join(STATE);
    let text = std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
    let s: RunnerState =
        serde_json::from_str(&text).with_context(|| format!("{} is not a runner state", p.display()))?;
    if s.format != FORMAT {
        bail!("{}: checkpoint format {} (expected {FORMAT})", p.display(), s.format);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn rng_position_round_trips_exactly() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        for _ in 0..37 {
            rng.next_u32();
        }
        let mut s = initial_state(&rng);
        s.set_rng(&rng);
        let json = serde_json::to_string(&s).unwrap();
        let back: RunnerState = serde_json::from_str(&json).unwrap();
        let mut restored = back.rng().unwrap();
        let a: Vec<u64> = (0..10).map(|_| rng.next_u64()).collect();
        let b: Vec<u64> = (0..10).map(|_| restored.next_u64()).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn checkpoints_are_listed_in_order_and_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let rng = ChaCha8Rng::seed_from_u64(0);
        let mut s = initial_state(&rng);
        for step in [5, 10, 15] {
            s.step = step;
            write(tmp.path(), &s, 2, |d| Ok(std::fs::write(d.join(AGENT), b"x")?)).unwrap();
        }
        // A half-written one is ignored, then removed.
        std::fs::create_dir_all(tmp.path().join(CHECKPOINTS).join(".tmp-step-0000000020")).unwrap();
        let l = list(tmp.path()).unwrap();
        assert_eq!(l.len(), 2);
        assert!(l[0].ends_with("step-0000000010") && l[1].ends_with("step-0000000015"));
        assert_eq!(read_state(&latest(tmp.path()).unwrap()).unwrap().step, 15);
        remove_partial(tmp.path()).unwrap();
        assert_eq!(std::fs::read_dir(tmp.path().join(CHECKPOINTS)).unwrap().count(), 2);
    }

    #[test]
    fn a_failed_part_leaves_no_complete_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let s = initial_state(&ChaCha8Rng::seed_from_u64(0));
        assert!(write(tmp.path(), &s, 2, |_| bail!("disk full")).is_err());
        assert!(latest(tmp.path()).is_err());
    }
}
