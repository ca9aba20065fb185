//! The run another run starts from (`o2o finetune --from`, `o2o run --from`,
//! [`Run::starting_from`](super::builder::Run::starting_from)): its config, the checkpoint to
//! start from, and what the new run's manifest records about it.

use super::checkpoint::{self, STATE};
use super::config::{ParentConfig, RunConfig};
use super::rundir::{self, Manifest, ParentInfo};
use crate::Error;
use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};

/// A finished (or stopped) run to start from.
pub struct ParentRun {
    /// The parent's resolved config.
    pub config: RunConfig,
    /// The checkpoint to start from, as an absolute path.
    pub checkpoint: PathBuf,
    /// What the new run's manifest says about its parent.
    pub info: ParentInfo,
}

impl ParentRun {
    /// Read the run in `path` (its newest checkpoint), or the checkpoint folder `path`
    /// (`<run>/checkpoints/step-N`); a note on stderr when that checkpoint is not the end of
    /// the run.
    pub fn read(path: &Path) -> Result<Self> {
        let (dir, checkpoint) = if path.join(STATE).is_file() {
            let outside = || anyhow!("{} is a checkpoint outside a run directory", path.display());
            let run = path.parent().and_then(Path::parent).ok_or_else(|| Error::run_dir(path, outside()))?;
            (run.to_path_buf(), path.to_path_buf())
        } else {
            (path.to_path_buf(), PathBuf::new())
        };
        let config = rundir::read_config(&dir)?;
        let checkpoint = if checkpoint.as_os_str().is_empty() { checkpoint::latest(&dir)? } else { checkpoint };
        if !checkpoint::read_state(&checkpoint)?.finished {
            eprintln!("note: {} did not finish; starting from its checkpoint {}", dir.display(), checkpoint.display());
        }
        let run_dir = std::fs::canonicalize(&dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
        let checkpoint = std::fs::canonicalize(&checkpoint)?;
        let git_revision = std::fs::read_to_string(dir.join(rundir::MANIFEST))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
            .map(|m| m.provenance.git_revision);
        let info = ParentInfo {
            run_dir: run_dir.display().to_string(),
            checkpoint: checkpoint.display().to_string(),
            git_revision,
        };
        Ok(Self { config, checkpoint, info })
    }

    /// The `[parent]` table of the new run's config.
    pub fn config_entry(&self) -> Result<toml::Value> {
        Ok(toml::Value::try_from(ParentConfig {
            run_dir: PathBuf::from(&self.info.run_dir),
            checkpoint: self.checkpoint.clone(),
        })?)
    }
}
