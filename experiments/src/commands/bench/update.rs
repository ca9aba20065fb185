//! `o2o bench update`: agent updates per second vs a PyTorch eager reference, same run (the
//! measurement, and what `--json` prints, is [`o2o_experiments::bench::update`]).

use anyhow::bail;
use o2o_experiments::bench::update::{self, UpdateBench, UpdateOptions};
use tch::Device;

/// Arguments of `o2o bench update`.
#[derive(clap::Args)]
pub struct UpdateArgs {
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Batch size.
    #[arg(long, default_value_t = 256)]
    pub batch: i64,
    /// Observation dimension.
    #[arg(long, default_value_t = 17)]
    pub obs: i64,
    /// Action dimension.
    #[arg(long, default_value_t = 6)]
    pub act: i64,
    /// Timed updates per implementation and algorithm.
    #[arg(long, default_value_t = 200)]
    pub updates: usize,
    /// Untimed warm-up updates.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// cpu, cuda or auto (CUDA when available).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Alternate ours and PyTorch this many times and keep each side's best rate (the build
    /// machines are shared, so a single measurement can catch someone else's compile).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Intra-op threads for both sides (default: libtorch's default).
    #[arg(long)]
    pub threads: Option<i32>,
    /// The larger batch of the SERA rows (they run at `--batch` and at this).
    #[arg(long, default_value_t = 1024)]
    pub sera_large_batch: i64,
    /// Only these algorithms (comma-separated, e.g. `cql,rlpd`, or `sera-sac,sera-calql` for
    /// the SERA rows; default: all).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// Run the benchmark.
pub fn run(args: UpdateArgs) -> anyhow::Result<()> {
    let device = match args.device.as_str() {
        "cpu" => Device::Cpu,
        "cuda" => {
            if !tch::Cuda::is_available() {
                bail!("--device cuda: no CUDA device is available");
            }
            Device::Cuda(0)
        }
        "auto" => Device::cuda_if_available(),
        other => bail!("--device must be cpu, cuda or auto, found `{other}`"),
    };
    let bench = UpdateBench::new(UpdateOptions {
        batch: args.batch,
        obs: args.obs,
        act: args.act,
        updates: args.updates,
        warmup: args.warmup,
        device,
        rounds: args.rounds,
        threads: args.threads,
        sera_large_batch: args.sera_large_batch,
        only: args.only,
    });
    println!("{}", bench.header());
    let sera = bench.sera()?;
    if !sera.is_empty() {
        println!("{}", update::sera_table(&sera));
    }
    let report = bench.measure(sera)?;
    if report.results.is_empty() {
        if args.json {
            println!("{}", report.json());
        }
        return Ok(());
    }
    super::print_report(&report.table(), report.warning(), args.json.then(|| report.json()));
    Ok(())
}
