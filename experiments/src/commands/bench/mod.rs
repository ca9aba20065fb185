//! `o2o bench …`: benchmarks. Each prints a ratio against a reference measured in the same run.
//! The measurements are the library's ([`o2o_experiments::bench`], and `o2o_envs::bench` for
//! envs); each file here holds a benchmark's arguments and prints its report.

pub mod data;
pub mod dynamics;
pub mod env;
pub mod fleet;
pub mod ppo;
pub mod update;

use clap::Subcommand;

/// Arguments of `o2o bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Env steps per second vs the MuJoCo physics bound and Gymnasium, plus vector-env scaling.
    Env(env::EnvBenchArgs),
    /// Agent update rate (SAC, SAC with a 10-critic LayerNorm ensemble, IQL) vs PyTorch eager.
    Update(update::UpdateArgs),
    /// Dataset load time vs h5py and replay sampling rate (batches of 256) vs numpy.
    Data(data::DataBenchArgs),
    /// Fleet throughput: transitions/s through the JetStream stream vs an in-process buffer
    /// (1, 2, 4 actor processes), learner updates/s with the stream attached vs without.
    Fleet(fleet::FleetBenchArgs),
    /// PPO env steps per second (rollout + update, 8 envs) vs PyTorch + Gymnasium PPO.
    Ppo(ppo::PpoBenchArgs),
    /// Uni-O4's dynamics-ensemble training steps per second vs PyTorch eager.
    Dynamics(dynamics::DynamicsBenchArgs),
}

/// Run the chosen benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Env(a) => env::run(a),
        BenchCommand::Update(a) => update::run(a),
        BenchCommand::Data(a) => data::run(a),
        BenchCommand::Fleet(a) => fleet::run(a),
        BenchCommand::Ppo(a) => ppo::run(a),
        BenchCommand::Dynamics(a) => dynamics::run(a),
    }
}

/// Print a benchmark's report: its table on stdout, its warning (if any) on stderr, then, with
/// `--json`, its JSON object as the last line.
fn print_report(table: &str, warning: Option<String>, json: Option<serde_json::Value>) {
    println!("{table}");
    if let Some(warning) = warning {
        eprintln!("{warning}");
    }
    if let Some(json) = json {
        println!("{json}");
    }
}
