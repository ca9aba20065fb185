//! `o2o experiment famo2o-claim`: does a state-adaptive balance beat any single balance? The study
//! (its variants, the fixed β values, β(s) per region, the table) is
//! [`o2o_experiments::studies::famo2o_claim`]; this file turns the command line into its options.

use super::ProcessArgs;
use anyhow::Result;
use clap::Args;
use o2o_experiments::studies::famo2o_claim::{self, Algo, Famo2oClaimOptions};
use std::path::PathBuf;

/// Arguments of `o2o experiment famo2o-claim`.
#[derive(Args, Debug)]
pub struct ClaimArgs {
    /// Which FamO2O agent: `cql` (FamO2O-CQL against fixed β = 0.5, 1.0, 1.5) or `iql`
    /// (FamO2O-IQL, whose balance model has an entropy temperature, against fixed β = β_min, the
    /// midpoint and β_max of its preset's range, e.g. 8, 11, 14).
    #[arg(long, value_enum, default_value = "cql")]
    pub algo: Algo,
    /// The preset suffix: `famo2o-<algo>-<task>`, e.g. `halfcheetah-mixed-small` (region-dependent
    /// data quality, a 2-core budget).
    #[arg(long, default_value = "halfcheetah-mixed-small")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Output folder (default `experiments-out/famo2o-claim-<task>` for cql,
    /// `experiments-out/famo2o-claim-iql-<task>` for iql).
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
        algo: args.algo,
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
