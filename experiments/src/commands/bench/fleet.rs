//! `o2o bench fleet`: transitions per second through the JetStream stream vs an in-process
//! buffer, and learner updates per second with the stream attached vs without (the measurement
//! is [`o2o_experiments::bench::fleet`]).

use anyhow::Result;
use o2o_experiments::bench::fleet::{self, FleetBenchOptions, WorkerOptions};

/// Arguments of `o2o bench fleet`.
#[derive(clap::Args)]
pub struct FleetBenchArgs {
    /// Env steps per actor process.
    #[arg(long, default_value_t = 10_000)]
    pub steps: u64,
    /// Actor process counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub actors: Vec<usize>,
    /// Transitions per published message (the fleet's default).
    #[arg(long, default_value_t = o2o_experiments::fleet::FleetConfig::default().batch)]
    pub batch: usize,
    /// Learner updates per mode (with the stream, without it).
    #[arg(long, default_value_t = 1000)]
    pub updates: u64,
    /// Updates per block; the two modes alternate block by block so both see the same load.
    #[arg(long, default_value_t = 100)]
    pub block: u64,
    /// The learner's run config (a preset or a .toml); its agent and batch size are used.
    #[arg(long, default_value = "sac-halfcheetah")]
    pub config: String,
    /// Torch threads (in this process and in each worker).
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Internal: run as one actor process (`stream` or `local`).
    #[arg(long, hide = true)]
    pub worker: Option<String>,
    /// Internal: the worker's server.
    #[arg(long, hide = true, default_value = "")]
    pub nats: String,
    /// Internal: the worker's run id.
    #[arg(long, hide = true, default_value = "")]
    pub run: String,
    /// Internal: the worker's index.
    #[arg(long, hide = true, default_value_t = 0)]
    pub index: u64,
}

/// Run `o2o bench fleet` (or, with `--worker`, one of its actor processes).
pub fn run(a: FleetBenchArgs) -> Result<()> {
    let options = FleetBenchOptions {
        steps: a.steps,
        actors: a.actors,
        batch: a.batch,
        updates: a.updates,
        block: a.block,
        config: a.config,
        threads: a.threads,
    };
    if let Some(mode) = a.worker {
        let worker = WorkerOptions { mode, nats: a.nats, run: a.run, index: a.index };
        println!("{}", serde_json::to_string(&fleet::worker(&options, &worker)?)?);
        return Ok(());
    }
    let report = fleet::run(&options)?;
    super::print_report(&report.table(), None, a.json.then(|| report.json()));
    Ok(())
}
