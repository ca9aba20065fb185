//! `o2o experiment famo2o-ablation`: does a state-adaptive balance help FamO2O-CQL? The study is
//! [`o2o_experiments::studies::famo2o_ablation`]; this file turns the command line into its
//! options.

use crate::commands::run::DeviceArg;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::famo2o_ablation::{self, Famo2oAblationOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment famo2o-ablation`.
#[derive(Args, Debug)]
pub struct AblationArgs {
    /// The preset suffix: `famo2o-cql-<task>`, e.g. `hopper-small` (the shipped data) or
    /// `hopper-medium` (D4RL, the paper's budget).
    #[arg(long, default_value = "hopper-small")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Output folder (default `experiments-out/famo2o-ablation-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs at a time.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Torch threads per run.
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// Where the runs compute.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceArg,
    /// Extra `--set key=value` for every run (e.g. `train.online_steps=2000`).
    #[arg(long = "set")]
    pub set: Vec<String>,
}

/// Run the experiment.
pub fn run(args: AblationArgs) -> Result<()> {
    // This study records its command line as `o2o experiment famo2o-ablation <its flags>`.
    let command = std::iter::once("o2o experiment famo2o-ablation".to_string())
        .chain(std::env::args().skip(3))
        .collect::<Vec<_>>()
        .join(" ");
    let options = Famo2oAblationOptions {
        task: args.task,
        seeds: args.seeds,
        out: args.out,
        processes: super::processes(args.jobs, args.threads, args.device)?,
        set: args.set,
        command,
    };
    super::print(&famo2o_ablation::run(&options)?);
    Ok(())
}
