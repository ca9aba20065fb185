//! `o2o dataset …`: commands on offline datasets. Each subcommand lives in its own file here
//! (datasets engineers: add `download`, `info`, … as variants of [`DatasetCommand`]).

pub mod adroit_benchmark;
pub mod antmaze_benchmark;
pub mod benchmark;
pub mod convert;
pub mod download;
pub mod imaginebench_benchmark;
pub mod info;
pub mod make_benchmark;
pub mod mixed_benchmark;
pub mod view;

use anyhow::Result;
use clap::{Args, Subcommand};

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
    /// Convert between a D4RL-format file and a Minari dataset folder.
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
