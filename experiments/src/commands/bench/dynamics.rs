//! `o2o bench dynamics`: Uni-O4's dynamics-ensemble training steps per second vs PyTorch eager
//! (the measurement is [`o2o_experiments::bench::dynamics`]).

use o2o_experiments::bench::dynamics::{DynamicsBench, DynamicsOptions};

/// Arguments of `o2o bench dynamics`.
#[derive(clap::Args)]
pub struct DynamicsBenchArgs {
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Observation dimension (Hopper 11, HalfCheetah/Walker2d 17).
    #[arg(long, default_value_t = 17)]
    pub obs: i64,
    /// Action dimension.
    #[arg(long, default_value_t = 6)]
    pub act: i64,
    /// Rows per member per step (the official 256).
    #[arg(long, default_value_t = 256)]
    pub batch: i64,
    /// Members E (the official 7).
    #[arg(long, default_value_t = 7)]
    pub members: i64,
    /// Hidden widths of each member (the official gym setting 4×200).
    #[arg(long, value_delimiter = ',', default_value = "200,200,200,200")]
    pub hidden: Vec<i64>,
    /// Timed steps per side and round.
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Untimed warm-up steps.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Alternate ours and PyTorch this many times and keep each side's best rate.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Intra-op threads for both sides (default: libtorch's default).
    #[arg(long)]
    pub threads: Option<i32>,
}

/// Run the benchmark.
pub fn run(args: DynamicsBenchArgs) -> anyhow::Result<()> {
    let bench = DynamicsBench::new(DynamicsOptions {
        obs: args.obs,
        act: args.act,
        batch: args.batch,
        members: args.members,
        hidden: args.hidden,
        steps: args.steps,
        warmup: args.warmup,
        rounds: args.rounds,
        threads: args.threads,
    })?;
    println!("{}", bench.header());
    let report = bench.run()?;
    super::print_report(&report.table(), report.warning(), args.json.then(|| report.json()));
    Ok(())
}
