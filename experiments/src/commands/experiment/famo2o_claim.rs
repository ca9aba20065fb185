//! `o2o experiment famo2o-claim`: does a state-adaptive balance beat any single balance? The study
//! (its variants, the fixed β values, β(s) per region, the table) is
//! [`o2o_experiments::studies::famo2o_claim`]; this file turns the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::famo2o_claim::{self, Famo2oClaimOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment famo2o-claim`.
#[derive(Args, Debug)]
pub struct ClaimArgs {
    /// The preset suffix: `famo2o-cql-<task>`, e.g. `halfcheetah-mixed-small` (region-dependent
    /// data quality, a 2-core budget).
    #[arg(long, default_value = "halfcheetah-mixed-small")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Output folder (default `experiments-out/famo2o-claim-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: ProcessArgs,
    /// A config override for every run (e.g. a shorter budget or another dataset), as in
    /// `o2o run --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// `o2o experiment famo2o-claim`.
pub fn run(args: ClaimArgs) -> Result<()> {
    let options = Famo2oClaimOptions {
        task: args.task,
        seeds: args.seeds,
        out: args.out,
        processes: args.processes.processes()?,
        set: args.set,
        command: super::command_line(),
    };
    super::print(&famo2o_claim::run(&options)?);
    Ok(())
}
