//! `o2o bench ppo`: PPO env steps per second vs PyTorch + Gymnasium PPO (the measurement is
//! [`o2o_experiments::bench::ppo`]).

use o2o_experiments::bench::ppo::{PpoBench, PpoOptions};

/// Arguments of `o2o bench ppo`.
#[derive(clap::Args)]
pub struct PpoBenchArgs {
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// The env (a Gymnasium id both sides know).
    #[arg(long, default_value = "Hopper-v5")]
    pub env: String,
    /// Envs in the vector env.
    #[arg(long, default_value_t = 8)]
    pub envs: usize,
    /// Steps per env per rollout (8 × 256 = CleanRL's 2048-row rollout).
    #[arg(long, default_value_t = 256)]
    pub rollout: usize,
    /// Rollouts per side and round (the first is not counted).
    #[arg(long, default_value_t = 4)]
    pub rollouts: usize,
    /// Threads for both sides (libtorch intra-op and our vector env's workers).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Alternate ours and PyTorch this many times and keep each side's best.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
}

/// Run the benchmark.
pub fn run(args: PpoBenchArgs) -> anyhow::Result<()> {
    let bench = PpoBench::new(PpoOptions {
        env: args.env,
        envs: args.envs,
        rollout: args.rollout,
        rollouts: args.rollouts,
        threads: args.threads,
        rounds: args.rounds,
    })?;
    println!("{}", bench.header());
    let report = bench.run()?;
    super::print_report(&report.table(), None, args.json.then(|| report.json()));
    Ok(())
}
