//! `o2o bench update` end to end: from the same weights, batch and noise, every algorithm's
//! losses agree with the PyTorch reference (`scripts/bench_update_torch.py`) within 1e-5, and
//! the `--json` line carries every field the issue names, the side-by-side cost ratio included.

use std::path::Path;
use std::process::Command;

#[test]
fn bench_update_matches_pytorch_and_prints_its_json() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let out = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args(["bench", "update", "--json", "--rounds", "1", "--updates", "2", "--warmup", "1", "--threads", "1"])
        .env("O2O_SCRIPTS", &scripts)
        .output()
        .expect("run o2o");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "o2o bench update failed:\n{stderr}");
    let last = stdout.lines().last().expect("output");
    let json: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {last}"));
    let results = json["results"].as_array().expect("results");
    let algos: Vec<&str> = results.iter().map(|r| r["algo"].as_str().expect("algo")).collect();
    assert_eq!(algos, ["sac", "sac_ens10_ln", "iql", "cql", "calql", "rlpd"]);
    for r in results {
        let diff = r["max_abs_loss_diff"].as_f64().expect("max_abs_loss_diff");
        assert!(diff <= 1e-5, "{}: losses differ from PyTorch by {diff}", r["algo"]);
        for key in ["ours_updates_per_s", "pytorch_updates_per_s", "gflops"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{}: {key} = {}", r["algo"], r[key]);
        }
    }
    assert!(json["matmul_peak_gflops"].as_f64().is_some_and(|x| x > 0.0));
    // Ten critics cost more than two (about 3x by FLOPs); the bound only guards the measurement.
    let ratio = json["ensemble_cost_ratio"].as_f64().expect("ensemble_cost_ratio");
    assert!(ratio > 1.5 && ratio < 10.0, "10/2-critic cost ratio {ratio}");
}
