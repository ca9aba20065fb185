//! `o2o experiment <name>`: multi-run experiments that answer one question each, written to one
//! output folder (runs, logs, a markdown table, PNG curves). The studies themselves are the
//! library's ([`o2o_experiments::studies`]); these files turn the command line into a study's
//! options and print the table and the files it wrote.

pub mod dopamine;
pub mod famo2o_ablation;
pub mod famo2o_claim;
pub mod sera_ablation;
pub mod unio4_claim;
pub mod unio4_ope_probe;
pub mod wsrl_ablation;

use crate::commands::run::DeviceArg;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use o2o_experiments::studies::jobs::Processes;
use o2o_experiments::studies::StudyReport;

/// Arguments of `o2o experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    #[command(subcommand)]
    pub which: Which,
}

/// The experiments.
#[derive(Subcommand, Debug)]
pub enum Which {
    /// WSRL, WSRL without warm-up, Cal-QL keeping offline data (50/50) and RLPD from scratch, on
    /// one dataset and online budget, over seeds.
    WsrlAblation(wsrl_ablation::AblationArgs),
    /// FamO2O-CQL against the same agent with one fixed β = 1 (CQL with a fixed balance), on
    /// one preset's data and budget, over seeds.
    Famo2oAblation(famo2o_ablation::AblationArgs),
    /// FamO2O-CQL's state-adaptive balance against fixed β = 0.5, 1.0 and 1.5 (each its own
    /// pre-training), on data whose quality differs by state region: paired per-seed differences
    /// and the balance model's β(s) per region. `--algo iql`: FamO2O-IQL against fixed β at the
    /// ends and the middle of its preset's range.
    Famo2oClaim(famo2o_claim::ClaimArgs),
    /// Cal-QL fine-tuning with and without SERA's bonus, from the same offline checkpoint per
    /// seed, on one preset's data and budget.
    SeraAblation(sera_ablation::AblationArgs),
    /// Dopamine-style shaping over seeds: RLPD from scripted FetchPush demos with the sparse
    /// reward, the naive progress reward and PBRS (`--task fetch-push`), or the semantic trap on
    /// FetchReach with success terminating (`--task fetch-reach-trap`: sparse + HER, per-step
    /// progress, PBRS with the learned and the true Φ; success rate and episode length).
    Dopamine(dopamine::DopamineArgs),
    /// Uni-O4 offline → online against IQL → IQL on the same data and PPO from scratch, on the
    /// same env-step budget: the dip at the hand-over, the final score and AM-Q's ranking.
    Unio4Claim(unio4_claim::ClaimArgs),
    /// Re-score finished Uni-O4 runs' BC and BPPO members by AM-Q at several rollout horizons
    /// and by real returns: does AM-Q rank them as the env does?
    Unio4OpeProbe(unio4_ope_probe::ProbeArgs),
}

/// Dispatch.
pub fn run(args: ExperimentArgs) -> Result<()> {
    match args.which {
        Which::WsrlAblation(a) => wsrl_ablation::run(a),
        Which::Famo2oAblation(a) => famo2o_ablation::run(a),
        Which::Famo2oClaim(a) => famo2o_claim::run(a),
        Which::SeraAblation(a) => sera_ablation::run(a),
        Which::Dopamine(a) => dopamine::run(a),
        Which::Unio4Claim(a) => unio4_claim::run(a),
        Which::Unio4OpeProbe(a) => unio4_ope_probe::run(a),
    }
}

/// How the runs' processes run (the experiments' `--jobs/--threads/--device` flags).
#[derive(Args, Debug)]
pub struct ProcessArgs {
    /// Runs at a time.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Torch threads per run.
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// cpu, cuda, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
}

impl ProcessArgs {
    /// The library's [`Processes`]: these flags, and this executable for the runs.
    pub fn processes(&self) -> Result<Processes> {
        processes(self.jobs, self.threads, self.device)
    }
}

/// [`Processes`] of `jobs` runs at a time with `threads` torch threads each on `device`, each run
/// this `o2o` executable.
pub fn processes(jobs: usize, threads: i32, device: DeviceArg) -> Result<Processes> {
    let exe = std::env::current_exe().context("cannot find the o2o executable")?;
    Ok(Processes { jobs, threads, device, exe })
}

/// The command line this process was started with, for the record.
pub fn command_line() -> String {
    std::iter::once("o2o".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ")
}

/// Print a finished study: its table, then the files it wrote.
pub fn print(report: &StudyReport) {
    println!("{}", report.table);
    println!("{}", report.summary());
}
