//! `o2o experiment <name>`: multi-run experiments that answer one question each, written to one
//! output folder (runs, logs, a markdown table, PNG curves).

pub mod dopamine;
pub mod famo2o_ablation;
pub mod famo2o_claim;
pub mod jobs;
pub mod sera_ablation;
pub mod unio4_claim;
pub mod wsrl_ablation;

use anyhow::Result;
use clap::{Args, Subcommand};

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
    /// and the balance model's β(s) per region.
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
    }
}
