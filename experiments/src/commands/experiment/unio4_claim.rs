//! `o2o experiment unio4-claim`: does Uni-O4 hand over from offline to online without a dip? The
//! study (its variants, measures and table) is [`o2o_experiments::studies::unio4_claim`]; this
//! file turns the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::unio4_claim::{self, Unio4ClaimOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment unio4-claim`.
#[derive(Args, Debug)]
pub struct ClaimArgs {
    /// The Uni-O4 preset suffix: `unio4-<task>`, e.g. `halfcheetah-small` (the `make demo` data at
    /// a 2-core budget) or `halfcheetah-medium` (D4RL and the paper's budget: a GPU job). The
    /// IQL and PPO baselines are `iql-<env>-medium` and `ppo-<env>` with the same data, env and
    /// online budget.
    #[arg(long, default_value = "halfcheetah-small")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Output folder (default `experiments-out/unio4-claim-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: ProcessArgs,
    /// A config override for every run, as in `o2o run --set` (keys every algorithm has:
    /// `train.online_steps`, `eval.every`, `eval.episodes`, …).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// `o2o experiment unio4-claim`.
pub fn run(args: ClaimArgs) -> Result<()> {
    let options = Unio4ClaimOptions {
        task: args.task,
        seeds: args.seeds,
        out: args.out,
        processes: args.processes.processes()?,
        set: args.set,
        command: super::command_line(),
    };
    super::print(&unio4_claim::run(&options)?);
    Ok(())
}
