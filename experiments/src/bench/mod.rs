//! Speed benchmarks (`o2o bench …`), each against a reference measured in the same run, one
//! file per benchmark: an options struct (what to measure), a function or a bench value that
//! measures and returns a report, and the report's `table()` and `json()`, what the command
//! prints.
//!
//! - [`update`]: agent updates per second (SAC, the 10-critic ensemble, IQL, CQL, Cal-QL, RLPD,
//!   SERA's bonus) vs PyTorch eager, with each update's losses checked against PyTorch's;
//! - [`dynamics`]: Uni-O4's dynamics-ensemble training steps per second vs PyTorch eager;
//! - [`ppo`]: PPO env steps per second (rollout + update) vs a PyTorch + Gymnasium PPO;
//! - [`data`]: dataset load time vs h5py and replay sampling rate vs numpy;
//! - [`fleet`]: transitions per second through the fleet's JetStream stream vs an in-process
//!   buffer, and learner updates per second with the stream attached vs without.
//!
//! Env steps per second are `o2o_envs::bench`'s. The Python references are the scripts under
//! [`paths::scripts_dir`](crate::paths::scripts_dir), run with the set-up's virtualenv.

pub mod data;
pub mod dynamics;
pub mod fleet;
pub mod ppo;
pub mod update;

use anyhow::{bail, Context};
use std::path::Path;

/// A scratch folder removed when dropped (the exchange files with a Python reference).
pub(crate) struct TempDir(std::path::PathBuf);

impl TempDir {
    pub(crate) fn new(bench: &str) -> anyhow::Result<Self> {
        let p = std::env::temp_dir().join(format!("o2o-bench-{bench}-{}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(Self(p))
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run `scripts/<script>` with the venv's Python and parse the JSON object on its last line.
pub(crate) fn python_json(script: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let script = crate::paths::scripts_dir().join(script);
    let python = crate::paths::venv_python();
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .with_context(|| format!("running {} {}", python.display(), script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({}):\n{}", script.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .with_context(|| format!("parsing the last line of {}'s output:\n{stdout}", script.display()))
}

/// The 1-, 5- and 15-minute load averages, for the header of a benchmark.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
