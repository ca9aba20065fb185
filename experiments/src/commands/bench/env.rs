//! `o2o bench env <ID>`: single-thread env steps per second for our env, the MuJoCo physics
//! bound (`mj_step` × frame skip on the same model) and Gymnasium's Python `env.step`, all in one
//! run, plus the vector env on 1 and 2 threads. The measurement is `o2o_envs::bench` (its docs
//! say exactly what is timed); this command prints it.
//!
//! With `--json` the last line is one JSON object with keys `env`, `ours_steps_per_s`,
//! `physics_steps_per_s`, `gymnasium_steps_per_s`, `vec_1_thread_steps_per_s`,
//! `vec_2_threads_steps_per_s` (plus the ratios, settings and load average).

use anyhow::{Context, Result};
use o2o_envs::bench::{run as measure, BenchOptions};

/// Arguments of `o2o bench env`.
#[derive(clap::Args)]
pub struct EnvBenchArgs {
    /// Task id, e.g. HalfCheetah-v5 (see `o2o env list`).
    pub id: String,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Timed env steps per measurement.
    #[arg(long, default_value_t = 20_000)]
    pub steps: usize,
    /// Timed runs per measurement; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Envs in the vector env.
    #[arg(long, default_value_t = 8)]
    pub num_envs: usize,
    /// Seed of the actions and resets.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Run `o2o bench env`.
pub fn run(a: EnvBenchArgs) -> Result<()> {
    let opts = BenchOptions { steps: a.steps, repeats: a.repeats, num_envs: a.num_envs, seed: a.seed };
    let python = o2o_experiments::paths::venv_python();
    let script = o2o_experiments::paths::scripts_dir().join("bench_gym.py");
    let report = measure(&a.id, &opts, &python, &script).with_context(|| format!("benchmarking {}", a.id))?;
    println!("{}", report.table());
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}
