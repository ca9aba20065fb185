//! `manifest.json` of a benchmark folder: how each file was made (seeds, the SAC run, the rule
//! that chose the medium snapshot) and what it holds (rows, episodes, returns, size, SHA-256).
//! `o2o dataset info` reads it to describe a file that sits next to it.

use crate::run::rundir::Provenance;
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// File name of the manifest inside a benchmark folder.
pub const MANIFEST: &str = "manifest.json";
/// Value of the manifest's `format` field.
pub const FORMAT: &str = "o2o-benchmark/1";

/// The whole manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchmarkManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// `hopper`, `halfcheetah` or `walker2d` (the D4RL score family).
    pub task: String,
    /// The env every file was collected in, e.g. `hopper-v2`.
    pub env: String,
    /// `small`, `full` (or `custom` when sizes were overridden).
    pub scale: String,
    /// Who made it, when, from which revision.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The device SAC trained on.
    pub device: String,
    /// libtorch's intra-op threads.
    pub torch_threads: i64,
    /// Every seed used.
    pub seeds: Seeds,
    /// The SAC run.
    pub sac: SacRecord,
    /// How the medium snapshot is chosen, in words.
    pub medium_rule: String,
    /// The evaluation chosen as the medium policy.
    pub medium: MediumChoice,
    /// Every file, in the order they were made.
    pub files: Vec<FileRecord>,
    /// Seconds the whole command took.
    pub wall_s: f64,
}

/// Every seed used; each rollout set is an `Actor` whose episode k resets with
/// `derive_seed(seed, 1, k)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Seeds {
    /// `--seed`.
    pub run: u64,
    /// The SAC run's seed (its agent, runner RNG and episode seeds derive from it as in `o2o train`).
    pub sac: u64,
    /// The random file's rollouts.
    pub random: u64,
    /// The medium file's rollouts.
    pub medium: u64,
    /// The expert file's rollouts.
    pub expert: u64,
}

/// The SAC run that produced the policies and the replay data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SacRecord {
    /// The preset the config started from (the env replaced by the `-v2` one).
    pub preset: String,
    /// Uniformly random env steps before learning.
    pub random_steps: u64,
    /// Env steps with one SAC update each.
    pub online_steps: u64,
    /// Gradient steps in all.
    pub grad_steps: u64,
    /// Env steps between evaluations.
    pub eval_every: u64,
    /// Deterministic episodes per evaluation.
    pub eval_episodes: usize,
    /// Every evaluation (deterministic policy), in order; the last is the final policy's.
    pub evaluations: Vec<EvalPoint>,
    /// Seconds the SAC run took.
    pub wall_s: f64,
}

/// One evaluation of the SAC run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalPoint {
    /// The runner's loop step.
    pub step: u64,
    /// Env steps so far.
    pub env_step: u64,
    /// Gradient steps so far.
    pub grad_step: u64,
    /// Mean return of the deterministic episodes.
    pub mean_return: f64,
    /// D4RL normalized score ×100 of that return, when the task has one.
    pub normalized_score: Option<f64>,
}

/// The snapshot chosen as the medium policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MediumChoice {
    /// The expert's (final policy's) evaluation return.
    pub expert_eval_return: f64,
    /// The target return of the medium rule (one third of the expert's normalized score, or
    /// `--medium-score`).
    pub target_return: f64,
    /// The chosen evaluation.
    pub eval: EvalPoint,
    /// Whether no evaluation reached the target and the final policy was taken instead.
    pub fallback_to_final: bool,
}

/// One dataset file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRecord {
    /// File name inside the folder, e.g. `hopper-medium-v2.hdf5`.
    pub file: String,
    /// The D4RL id it stands in for, e.g. `hopper-medium-v2`.
    pub id: String,
    /// `random`, `medium`, `medium-replay` or `expert`.
    pub role: String,
    /// Which policy collected it, in words.
    pub policy: String,
    /// Rows of the file.
    pub rows: usize,
    /// Complete episodes (ended by a termination or the time limit).
    pub episodes: usize,
    /// Undiscounted returns of the complete episodes (null when there are none).
    pub returns: Option<Stats>,
    /// D4RL normalized score ×100 of those returns.
    pub normalized_score: Option<Stats>,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// gzip level of the columns, 0 = uncompressed.
    pub gzip: u8,
}

/// min / mean / max.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The smallest value.
    pub min: f64,
    /// The mean.
    pub mean: f64,
    /// The largest value.
    pub max: f64,
}

impl Stats {
    /// The statistics of `values`, `None` when empty.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self { min, mean: values.iter().sum::<f64>() / values.len() as f64, max })
    }

    /// Each value mapped by `f` (monotone increasing, e.g. the normalized score).
    pub fn map(self, f: impl Fn(f64) -> f64) -> Self {
        Self { min: f(self.min), mean: f(self.mean), max: f(self.max) }
    }
}

impl BenchmarkManifest {
    /// The manifest of the folder `dir`, if it has one; a `manifest.json` of another kind (a
    /// run's) is `None`, an unreadable benchmark manifest an error.
    pub fn read_dir(dir: &Path) -> Result<Option<Self>> {
        read_dir(dir, FORMAT)
    }

    /// The record of the file named `file`.
    pub fn file(&self, file: &str) -> Option<&FileRecord> {
        self.files.iter().find(|f| f.file == file)
    }
}

/// The `manifest.json` of the folder `dir` when its `format` is `format`; `None` when there is
/// none or it is of another kind, an error when it is not JSON or not a valid one of this kind.
pub fn read_dir<T: DeserializeOwned>(dir: &Path, format: &str) -> Result<Option<T>> {
    let path = dir.join(MANIFEST);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(None) };
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(format) {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .with_context(|| format!("{} is not a valid {format} manifest", path.display()))
}

/// What `o2o dataset info` prints about a file that sits next to a benchmark manifest: its
/// role, how it was made, its recorded returns, and whether its SHA-256 still matches.
/// `None` when there is no manifest or it does not list the file.
pub fn describe(path: &Path) -> Result<Option<Vec<String>>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let Some(m) = BenchmarkManifest::read_dir(dir)? else { return Ok(None) };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(f) = m.file(&name) else { return Ok(None) };
    let mut out = vec![
        format!(
            "benchmark: {} (role {}, scale {}, env {}), made by o2o {} ({}) on {}",
            f.id, f.role, m.scale, m.env, m.provenance.o2o_version, m.provenance.git_revision, m.provenance.created_utc
        ),
        format!("  policy: {}", f.policy),
    ];
    if f.role == "medium" || f.role == "medium-replay" {
        let e = &m.medium.eval;
        out.push(format!(
            "  medium snapshot: env step {} (eval return {:.1}; target {:.1}: {}; expert eval return {:.1})",
            e.env_step, e.mean_return, m.medium.target_return, m.medium_rule, m.medium.expert_eval_return
        ));
    }
    let ret = |s: Option<Stats>| {
        s.map_or("none (no complete episode)".to_string(), |s| {
            format!("min {:.1}, mean {:.1}, max {:.1}", s.min, s.mean, s.max)
        })
    };
    out.push(format!(
        "  manifest: {} rows, {} complete episodes, return {}, normalized {}",
        f.rows,
        f.episodes,
        ret(f.returns),
        ret(f.normalized_score)
    ));
    let (sha, bytes) = o2o_datasets::download::hash_file(path)?;
    let check = if sha == f.sha256 && bytes == f.bytes {
        "matches the manifest".to_string()
    } else {
        format!("DIFFERS from the manifest (file {sha}, {bytes} bytes; manifest {}, {} bytes)", f.sha256, f.bytes)
    };
    out.push(format!("  sha256: {check}"));
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_normalized_map() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(s, Stats { min: 1.0, mean: 2.0, max: 3.0 });
        assert_eq!(s.map(|r| 10.0 * r), Stats { min: 10.0, mean: 20.0, max: 30.0 });
        assert_eq!(Stats::of(&[]), None);
    }

    #[test]
    fn a_run_manifest_is_not_a_benchmark_manifest() {
        let dir = tempfile::tempdir().unwrap();
        assert!(BenchmarkManifest::read_dir(dir.path()).unwrap().is_none());
        std::fs::write(dir.path().join(MANIFEST), r#"{"o2o_version": "0.1.0", "algo": "sac"}"#).unwrap();
        assert!(BenchmarkManifest::read_dir(dir.path()).unwrap().is_none());
        std::fs::write(dir.path().join(MANIFEST), format!(r#"{{"format": "{FORMAT}", "task": 3}}"#)).unwrap();
        assert!(BenchmarkManifest::read_dir(dir.path()).is_err());
    }
}
