//! The env benchmark without the `o2o` binary (builds only this crate):
//! `cargo run --release -p o2o-envs --example bench_env -- HalfCheetah-v5 [--json] [--steps N]
//! [--repeats R] [--num-envs N]`. Same measurement and output as `o2o bench env`.

use o2o_envs::bench::{run, BenchOptions};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = BenchOptions::default();
    let (mut id, mut json) = (None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--json" => json = true,
            "--steps" => opts.steps = num("--steps"),
            "--repeats" => opts.repeats = num("--repeats"),
            "--num-envs" => opts.num_envs = num("--num-envs"),
            _ => id = Some(a.clone()),
        }
    }
    let Some(id) = id else {
        eprintln!("usage: bench_env <ID> [--json] [--steps N] [--repeats R] [--num-envs N]");
        std::process::exit(2)
    };
    let python = std::env::var_os("O2O_PYTHON")
        .map(PathBuf::from)
        .or_else(|| option_env!("O2O_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_gym.py");
    match run(&id, &opts, &python, &script) {
        Ok(r) => {
            println!("{}", r.table());
            if json {
                println!("{}", serde_json::to_string(&r).expect("a report of numbers and strings serializes"));
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
