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

use super::config::RunConfig;
use super::data::Recorder;
use super::rundir::{write_atomic, CHECKPOINTS, METRICS};
use super::state::{RunnerState, FORMAT};
use crate::logging::Logger;
use crate::Error;
use anyhow::{anyhow, bail, Context, Result};
use o2o_agents::Agent;
use o2o_datasets::ReplayBuffer;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

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

/// Complete checkpoints of a run, oldest first; without a `checkpoints/` folder,
/// [`Error::RunDir`].
pub fn list(run_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in read_dir(run_dir)? {
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

/// The newest complete checkpoint; an [`Error::RunDir`] naming the folder when there is none.
pub fn latest(run_dir: &Path) -> Result<PathBuf> {
    match list(run_dir)?.pop() {
        Some(p) => Ok(p),
        None => {
            let text = anyhow!("{} has no complete checkpoint (no checkpoints/step-*/{STATE})", run_dir.display());
            Err(Error::run_dir(run_dir, text).into())
        }
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
            let text = anyhow!(
                "checkpoint {name}: {} has no such complete checkpoint; it has: {}",
                run_dir.display(),
                if names.is_empty() { "none".into() } else { names.join(", ") }
            );
            Err(Error::run_dir(run_dir, text).into())
        }
    }
}

/// Remove half-written `.tmp-*` checkpoint folders left by a killed run.
pub fn remove_partial(run_dir: &Path) -> Result<()> {
    for entry in read_dir(run_dir)? {
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

/// The entries of a run's `checkpoints/` folder; [`Error::RunDir`] when it cannot be listed.
fn read_dir(run_dir: &Path) -> Result<std::fs::ReadDir> {
    let root = run_dir.join(CHECKPOINTS);
    let listed = std::fs::read_dir(&root).with_context(|| format!("cannot list {}", root.display()));
    listed.map_err(|e| Error::run_dir(run_dir, e).into())
}

/// Read a checkpoint's `state.json`; [`Error::DamagedCheckpoint`] when it cannot be read or is
/// of another format.
pub fn read_state(checkpoint: &Path) -> Result<RunnerState> {
    parse_state(&checkpoint.join(STATE)).map_err(|e| Error::damaged_checkpoint(checkpoint, e).into())
}

/// The runner state in the file `p`, of this build's format.
fn parse_state(p: &Path) -> Result<RunnerState> {
    let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    let s: RunnerState =
        serde_json::from_str(&text).with_context(|| format!("{} is not a runner state", p.display()))?;
    if s.format != FORMAT {
        bail!("{}: checkpoint format {} (expected {FORMAT})", p.display(), s.format);
    }
    Ok(s)
}

/// `err`, the failure to load the checkpoint folder `path`, as [`Error::DamagedCheckpoint`]
/// under the line [`DamagedCheckpoint`] prints (what a resume falls back from).
pub fn damaged(path: &Path, err: anyhow::Error) -> anyhow::Error {
    Error::damaged_checkpoint(path, err.context(DamagedCheckpoint { path: path.to_path_buf() })).into()
}

/// Whether `err` says the checkpoint folder `path` cannot be loaded.
pub fn is_damaged(err: &anyhow::Error, path: &Path) -> bool {
    matches!(err.downcast_ref::<Error>(), Some(Error::DamagedCheckpoint { path: p, .. }) if p == path)
}

/// The line that names a checkpoint that cannot be loaded, above the reason: the context
/// [`damaged`] gives the error, which is an [`Error::DamagedCheckpoint`].
#[derive(Debug, Clone)]
pub struct DamagedCheckpoint {
    /// The checkpoint folder.
    pub path: PathBuf,
}

impl std::fmt::Display for DamagedCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "checkpoint {} cannot be loaded", self.path.display())
    }
}

/// Before a checkpoint of the run in `dir`: flush the metrics, then record in `state` their length
/// (what a resume cuts `metrics.jsonl` back to) and the runner RNG's position.
pub fn mark(dir: &Path, state: &mut RunnerState, rng: &ChaCha8Rng, logger: &mut Logger) -> Result<()> {
    logger.flush()?;
    let metrics = dir.join(METRICS);
    state.metrics_len =
        std::fs::metadata(&metrics).with_context(|| format!("cannot stat {}", metrics.display()))?.len();
    state.set_rng(rng);
    Ok(())
}

/// [`mark`], then write the checkpoint folder of a run at `state`:
/// the agent, the replay and intervention buffers and the recorded dataset, when it has them.
#[allow(clippy::too_many_arguments)]
pub(super) fn save(
    dir: &Path,
    config: &RunConfig,
    state: &mut RunnerState,
    rng: &ChaCha8Rng,
    agent: &dyn Agent,
    replay: Option<&ReplayBuffer>,
    interventions: Option<&ReplayBuffer>,
    recorder: Option<&Recorder>,
    logger: &mut Logger,
) -> Result<PathBuf> {
    mark(dir, state, rng, logger)?;
    write(dir, state, config.checkpoint.keep, |tmp| {
        agent.save(&tmp.join(AGENT)).context("saving the agent")?;
        if let Some(r) = replay {
            r.save(&tmp.join(REPLAY)).context("saving the replay buffer")?;
        }
        if let Some(b) = interventions {
            b.save(&tmp.join(INTERVENTIONS)).context("saving the intervention buffer")?;
        }
        if let Some(r) = recorder {
            r.write(&tmp.join(DATASET))?;
        }
        Ok(())
    })
}

/// Cut `metrics.jsonl` back to `len` bytes (what it held at the checkpoint being resumed).
pub(crate) fn truncate_metrics(path: &Path, len: u64) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let found = file.metadata()?.len();
    if found < len {
        bail!("{} has {found} bytes, fewer than the {len} recorded at the checkpoint; it was modified", path.display());
    }
    file.set_len(len).with_context(|| format!("cannot truncate {}", path.display()))?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state::initial_state;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

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
