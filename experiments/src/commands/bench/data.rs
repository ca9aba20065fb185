//! `o2o bench data [--json]`: dataset load time vs h5py and replay sampling rate vs numpy
//! (the measurement is [`o2o_experiments::bench::data`]).

use anyhow::Result;
use o2o_experiments::bench::data::{self, DataOptions};

/// Arguments of `o2o bench data`.
#[derive(clap::Args, Debug)]
pub struct DataBenchArgs {
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Rows in the generated file.
    #[arg(long, default_value_t = 1_000_000)]
    pub transitions: usize,
    /// Loads timed per reader (the best is reported).
    #[arg(long, default_value_t = 7)]
    pub repeats: usize,
    /// Batches drawn for the sampling rate.
    #[arg(long, default_value_t = 4000)]
    pub batches: usize,
}

/// `o2o bench data`.
pub fn run(args: DataBenchArgs) -> Result<()> {
    let report =
        data::run(&DataOptions { transitions: args.transitions, repeats: args.repeats, batches: args.batches })?;
    super::print_report(&report.table(), None, args.json.then(|| report.json()));
    Ok(())
}
