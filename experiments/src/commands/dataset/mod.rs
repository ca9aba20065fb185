//! `o2o dataset …`: commands on offline datasets. Each subcommand lives in its own file here
//! (datasets engineers: add `download`, `info`, … as variants of [`DatasetCommand`]).

pub mod convert;
pub mod download;
pub mod info;
pub mod make_benchmark;
pub mod view;

use std::path::Path;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::lerobot::{LeRobotDataset, LeRobotKeys};
use o2o_datasets::minari::MinariDataset;

/// Arguments of `o2o dataset`.
#[derive(Args, Debug)]
pub struct DatasetArgs {
    #[command(subcommand)]
    pub command: DatasetCommand,
}

/// The `o2o dataset` subcommands.
#[derive(Subcommand, Debug)]
pub enum DatasetCommand {
    /// Log a dataset's episodes to Rerun: observations, actions and rewards as series, and the
    /// bodies in 3D when the file carries infos/qpos and infos/qvel.
    View(view::ViewArgs),
    /// Download a dataset into the cache (resumable, SHA-256 verified): `o2o dataset download hopper-medium-v2`.
    Download(download::DownloadArgs),
    /// Keys, dtypes, shapes, episodes, returns, normalized score and warnings of a dataset.
    Info(info::InfoArgs),
    /// Convert between a D4RL-format file, a Minari dataset folder and a LeRobotDataset folder
    /// (read: v3.0, v2.1; written: v3.0).
    Convert(convert::ConvertArgs),
    /// Make our own D4RL-style random / medium / medium-replay / expert files by training SAC
    /// on a `-v2` env: `o2o dataset make-benchmark hopper --scale small --out data/hopper-small`;
    /// or an ImagineBench file of real and model-imagined rollouts: `make-benchmark imaginebench-mujoco`.
    /// AntMaze files from a waypoint planner and an o2o-trained ant controller:
    /// `make-benchmark antmaze-umaze --controller data/antmaze-controller`; Adroit-layout files from
    /// a scripted controller: `make-benchmark pen`. A file whose quality differs by state region
    /// (a trained policy in one region, random actions elsewhere):
    /// `make-benchmark halfcheetah --mixed-quality RUN_DIR --policy-region 'obs[8]<2.5'`.
    MakeBenchmark(make_benchmark::MakeBenchmarkArgs),
}

/// `o2o dataset`.
pub fn run(args: DatasetArgs) -> Result<()> {
    match args.command {
        DatasetCommand::View(a) => view::run(a),
        DatasetCommand::Download(a) => download::run(a),
        DatasetCommand::Info(a) => info::run(a),
        DatasetCommand::Convert(a) => convert::run(a),
        DatasetCommand::MakeBenchmark(a) => make_benchmark::run(a),
    }
}

/// Which LeRobot features o2o reads as which column (LeRobotDataset folders only).
#[derive(Args, Debug, Clone, Default)]
pub struct LeRobotKeyArgs {
    /// LeRobot feature(s) concatenated into the observation (default `observation.state`);
    /// repeat for several.
    #[arg(long = "lerobot-observation", value_name = "KEY")]
    pub observation: Vec<String>,
    /// LeRobot action feature (default `action`).
    #[arg(long = "lerobot-action", value_name = "KEY")]
    pub action: Option<String>,
    /// LeRobot reward feature (default `next.reward`; without one, rewards are 0).
    #[arg(long = "lerobot-reward", value_name = "KEY")]
    pub reward: Option<String>,
    /// LeRobot termination flag (default `next.done`).
    #[arg(long = "lerobot-done", value_name = "KEY")]
    pub done: Option<String>,
    /// LeRobot intervention flag (default `complementary_info.is_intervention`).
    #[arg(long = "lerobot-intervention", value_name = "KEY")]
    pub intervention: Option<String>,
}

impl LeRobotKeyArgs {
    /// The mapping these flags give.
    pub fn keys(&self) -> LeRobotKeys {
        LeRobotKeys {
            observation: self.observation.clone(),
            action: self.action.clone(),
            reward: self.reward.clone(),
            done: self.done.clone(),
            intervention: self.intervention.clone(),
        }
    }
}

/// Reads a LeRobotDataset folder, printing its warnings to stderr.
pub fn read_lerobot(path: &Path, keys: &LeRobotKeys) -> Result<LeRobotDataset> {
    let ds =
        LeRobotDataset::read(path, keys).with_context(|| format!("reading the LeRobot dataset {}", path.display()))?;
    for w in &ds.warnings {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(ds)
}

/// A dataset path as D4RL rows: a LeRobotDataset folder (it has `meta/info.json`), a Minari
/// dataset folder, or a D4RL-format HDF5 file.
pub fn read_rows(path: &Path, keys: &LeRobotKeys) -> Result<D4rlDataset> {
    if o2o_datasets::lerobot::is_lerobot_dir(path) {
        Ok(read_lerobot(path, keys)?.d4rl)
    } else if path.is_dir() {
        Ok(MinariDataset::read(path)
            .with_context(|| format!("reading the Minari dataset {}", path.display()))?
            .to_d4rl())
    } else {
        D4rlDataset::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

/// The name of a dataset path for output files (`<stem>.rrd`).
pub fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into())
}
