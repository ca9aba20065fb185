//! The env benchmark runs end to end at a tiny scale and reports every figure (no timing is
//! asserted: speed goes to BENCHMARKS.md). Needs the set-up's Python, like the parity tests.

use o2o_envs::bench::{run, BenchOptions};
use std::path::PathBuf;

#[test]
fn bench_reports_all_figures_with_the_documented_json_keys() {
    let python = std::env::var_os("O2O_PYTHON")
        .map(PathBuf::from)
        .or_else(|| option_env!("O2O_PYTHON").map(PathBuf::from))
        .expect("O2O_PYTHON is not set: run `make setup`");
    let script =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
            .join("../scripts/bench_gym.py");
    let opts = BenchOptions { steps: 600, repeats: 1, num_envs: 3, seed: 1 };
    let r = run("Hopper-v5", &opts, &python, &script).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "env",
        "ours_steps_per_s",
        "physics_steps_per_s",
        "gymnasium_steps_per_s",
        "vec_1_thread_steps_per_s",
        "vec_2_threads_steps_per_s",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["env"], "Hopper-v5");
    for rate in [
        r.ours_steps_per_s,
        r.physics_steps_per_s,
        r.gymnasium_steps_per_s,
        r.vec_1_thread_steps_per_s,
        r.vec_2_threads_steps_per_s,
    ] {
        assert!(rate.is_finite() && rate > 0.0, "{r:?}");
    }
    assert!(r.table().contains("ours/physics"));
    assert!(run("Hopper-v9", &opts, &python, &script).is_err());
}
