//! `o2o experiment dopamine`: does potential-based shaping with a learned progress model help,
//! and does using progress as a reward hurt? The study (its two tasks, the semantic trap worked
//! by hand, the variants and the table) is [`o2o_experiments::studies::dopamine`]; this file turns
//! the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::dopamine::{self, DopamineOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment dopamine`.
#[derive(Args, Debug)]
pub struct DopamineArgs {
    /// The task: `fetch-push` (FetchPush-v4, preset `rlpd-fetch-push-dopamine`: sparse, naive,
    /// PBRS) or `fetch-reach-trap` (FetchReachTerminal-v4, preset `sac-fetch-reach-dopamine-trap`: the
    /// semantic trap, sparse + HER, per-step progress, PBRS with the learned and the true Φ).
    #[arg(long, default_value = "fetch-push")]
    pub task: String,
    /// Seeds 0..N (default: 3 for fetch-push, 5 for fetch-reach-trap).
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Scripted demonstrations to record (Φ's training set; fetch-push's prior data too).
    #[arg(long, default_value_t = 50)]
    pub demos: usize,
    /// Gradient steps of the progress model.
    #[arg(long, default_value_t = 1500)]
    pub model_steps: usize,
    /// Output folder (default `experiments-out/dopamine-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: ProcessArgs,
    /// A config override for every run (e.g. a smaller budget), as in `o2o train --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// `o2o experiment dopamine`.
pub fn run(args: DopamineArgs) -> Result<()> {
    let options = DopamineOptions {
        task: args.task,
        seeds: args.seeds,
        demos: args.demos,
        model_steps: args.model_steps,
        out: args.out,
        processes: args.processes.processes()?,
        set: args.set,
        command: super::command_line(),
    };
    super::print(&dopamine::run(&options)?);
    Ok(())
}
