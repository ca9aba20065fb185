//! `o2o experiment wsrl-ablation`: why WSRL works, on one dataset, one online budget and several
//! seeds. The study (its variants, budget, measures and the claim it tests) is
//! [`o2o_experiments::studies::wsrl_ablation`]; this file turns the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::wsrl_ablation::{self, Scale, WsrlAblationOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment wsrl-ablation`.
#[derive(Args, Debug)]
pub struct AblationArgs {
    /// D4RL task, e.g. `hopper-medium` (small scale: `data/<env>-small/<task>-v2.hdf5` must
    /// exist, see `o2o dataset make-benchmark`; full scale: the registry's `<task>-v2`).
    #[arg(long, default_value = "hopper-medium")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// `small` or `full`.
    #[arg(long, value_enum, default_value = "small")]
    pub scale: Scale,
    /// Output folder (default `experiments-out/wsrl-ablation-<task>-<scale>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: ProcessArgs,
    /// A config override for every run (e.g. a shorter budget), as in `o2o run --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run only these variants (comma-separated; `wsrl` among them): wsrl, wsrl-no-warmup,
    /// no-retain-cql, calql-retain, rlpd. Default: all.
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
}

/// `o2o experiment wsrl-ablation`.
pub fn run(args: AblationArgs) -> Result<()> {
    let options = WsrlAblationOptions {
        task: args.task,
        seeds: args.seeds,
        scale: args.scale,
        out: args.out,
        processes: args.processes.processes()?,
        set: args.set,
        variants: args.variants,
        command: super::command_line(),
    };
    super::print(&wsrl_ablation::run(&options)?);
    Ok(())
}
