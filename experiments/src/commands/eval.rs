//! `o2o eval <run-dir> [--checkpoint step-N] [--episodes N] [--seed S] [--json]`: evaluate a
//! run's checkpoint with the policy's mode, on fresh episodes, without touching the run.

use super::run::DeviceArg;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `o2o eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The checkpoint (`step-N`); default: the newest complete one.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// Episodes to run.
    #[arg(long, default_value_t = 10)]
    pub episodes: usize,
    /// Seed of the episodes' resets (episode k resets with a seed derived from it and k).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the result as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// cpu, cuda, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
}

/// `o2o eval`.
pub fn run(args: EvalArgs) -> Result<()> {
    let device = args.device.resolve()?;
    // A robot run's env is rebuilt from its robot config, as `o2o resume` does (the episodes'
    // recording stays in memory: evaluation leaves the run untouched).
    let config_path = args.run_dir.join(o2o_experiments::run::rundir::CONFIG);
    let env = match o2o_experiments::RunConfig::read(&config_path) {
        Ok(config) => match o2o_experiments::robot::RobotSession::for_env(&config.env)? {
            Some(session) => Some(Box::new(session.make_env()?) as Box<dyn o2o_envs::Env>),
            None => None,
        },
        // Not a run directory: evaluate_checkpoint says so.
        Err(_) => None,
    };
    let (checkpoint, r) = o2o_experiments::run::eval::evaluate_checkpoint(
        &args.run_dir,
        args.checkpoint.as_deref(),
        args.episodes,
        args.seed,
        env,
        device,
    )?;
    if args.json {
        let mut v = serde_json::to_value(r)?;
        v["checkpoint"] = checkpoint.display().to_string().into();
        v["episodes"] = args.episodes.into();
        v["seed"] = args.seed.into();
        println!("{v}");
    } else {
        let score = r.normalized_score.map_or(String::new(), |s| format!(", normalized {s:.1}"));
        let success = r.success_rate.map_or(String::new(), |s| format!(", success rate {s:.2}"));
        println!(
            "{}: return {:.1} ± {:.1} over {} episodes{score}{success} (mean length {:.0})",
            checkpoint.display(),
            r.mean_return,
            r.std_return,
            args.episodes,
            r.mean_length
        );
    }
    Ok(())
}
