//! `o2o bench …`: benchmarks. Each prints a ratio against a reference measured in the same run.

pub mod data;
pub mod dynamics;
pub mod env;
pub mod fleet;
pub mod ppo;
pub mod update;

use anyhow::{bail, Context};
use std::path::Path;

use clap::Subcommand;

/// Arguments of `o2o bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Env steps per second vs the MuJoCo physics bound and Gymnasium, plus vector-env scaling.
    Env(env::EnvBenchArgs),
    /// Agent update rate (SAC, SAC with a 10-critic LayerNorm ensemble, IQL) vs PyTorch eager.
    Update(update::UpdateArgs),
    /// Dataset load time vs h5py and replay sampling rate (batches of 256) vs numpy.
    Data(data::DataBenchArgs),
    /// Fleet throughput: transitions/s through the JetStream stream vs an in-process buffer
    /// (1, 2, 4 actor processes), learner updates/s with the stream attached vs without.
    Fleet(fleet::FleetBenchArgs),
    /// PPO env steps per second (rollout + update, 8 envs) vs PyTorch + Gymnasium PPO.
    Ppo(ppo::PpoBenchArgs),
    /// Uni-O4's dynamics-ensemble training steps per second vs PyTorch eager.
    Dynamics(dynamics::DynamicsBenchArgs),
}

/// Run the chosen benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Env(a) => env::run(a),
        BenchCommand::Update(a) => update::run(a),
        BenchCommand::Data(a) => data::run(a),
        BenchCommand::Fleet(a) => fleet::run(a),
        BenchCommand::Ppo(a) => ppo::run(a),
        BenchCommand::Dynamics(a) => dynamics::run(a),
    }
}

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
    let script = o2o_experiments::paths::scripts_dir().join(script);
    let python = o2o_experiments::paths::venv_python();
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
pub(crate) fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
