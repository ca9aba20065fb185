//! `o2o experiment sera-ablation`: does SERA's bonus help Cal-QL fine-tuning? The study (its
//! variants, the maze coverage on AntMaze tasks, the table) is
//! [`o2o_experiments::studies::sera_ablation`]; this file turns the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::sera_ablation::{self, SeraAblationOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment sera-ablation`.
#[derive(Args, Debug)]
pub struct AblationArgs {
    /// The preset suffix: `sera-calql-<task>`, e.g. `hopper-small` (the shipped data, a 2-core
    /// budget) or `hopper-medium` (D4RL, the paper's budget: a GPU job).
    #[arg(long, default_value = "hopper-small")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Output folder (default `experiments-out/sera-ablation-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: ProcessArgs,
    /// A config override for every run (e.g. a shorter budget), as in `o2o run --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// `o2o experiment sera-ablation`.
pub fn run(args: AblationArgs) -> Result<()> {
    let options = SeraAblationOptions {
        task: args.task,
        seeds: args.seeds,
        out: args.out,
        processes: args.processes.processes()?,
        set: args.set,
        command: super::command_line(),
    };
    super::print(&sera_ablation::run(&options)?);
    Ok(())
}
