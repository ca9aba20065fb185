//! `o2o bench update` end to end: from the same weights, batch and noise, every algorithm's
//! losses agree with the PyTorch reference (`scripts/bench_update_torch.py`) within 1e-5, and
//! the `--json` line carries every field the issue names, the side-by-side cost ratio included.

use std::path::Path;
use std::process::Command;

#[test]
fn bench_update_matches_pytorch_and_prints_its_json() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let out = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args([
            "bench",
            "update",
            "--json",
            "--rounds",
            "1",
            "--updates",
            "2",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--only",
            "sac,sac_ens10_ln,iql,cql,calql,rlpd",
        ])
        .env("O2O_SCRIPTS", &scripts)
        .output()
        .expect("run o2o");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "o2o bench update failed:\n{stderr}");
    let last = stdout.lines().last().expect("output");
    let json: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {last}"));
    let results = json["results"].as_array().expect("results");
    let algos: Vec<&str> = results.iter().map(|r| r["algo"].as_str().expect("algo")).collect();
    assert_eq!(algos, ["sac", "sac_ens10_ln", "iql", "cql", "calql", "rlpd"]);
    for r in results {
        let diff = r["max_abs_loss_diff"].as_f64().expect("max_abs_loss_diff");
        assert!(diff <= 1e-5, "{}: losses differ from PyTorch by {diff}", r["algo"]);
        // The share of the machine: gflops over the same run's matmul peak.
        let share = r["share_of_peak"].as_f64().expect("share_of_peak");
        let want = r["gflops"].as_f64().unwrap() / json["matmul_peak_gflops"].as_f64().unwrap();
        assert!((share - want).abs() < 1e-9 && share > 0.0, "{}: share_of_peak {share} vs {want}", r["algo"]);
        assert!(
            r["share_of_peak_cpu"].as_f64().is_some_and(|x| x > 0.0),
            "{}: share_of_peak_cpu = {}",
            r["algo"],
            r["share_of_peak_cpu"]
        );
        for key in ["ours_updates_per_s", "pytorch_updates_per_s", "gflops"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{}: {key} = {}", r["algo"], r[key]);
        }
    }
    assert!(json["matmul_peak_gflops"].as_f64().is_some_and(|x| x > 0.0));
    assert!(json["matmul_peak_gflops_per_cpu_s"].as_f64().is_some_and(|x| x > 0.0));
    assert!(
        json["load_average"].as_str().is_some_and(|l| l.split_whitespace().count() == 3),
        "load_average = {}",
        json["load_average"]
    );
    // Ten critics cost more than two (about 3x by FLOPs); the bound only guards the measurement.
    let ratio = json["ensemble_cost_ratio"].as_f64().expect("ensemble_cost_ratio");
    assert!(ratio > 1.5 && ratio < 10.0, "10/2-critic cost ratio {ratio}");
}

/// The SERA rows: the cost of the update with the bonus over the same update without it, at
/// both batch sizes, with its parts (small batches here; the figures are in BENCHMARKS.md).
#[test]
fn bench_update_prints_the_sera_rows() {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args([
            "bench",
            "update",
            "--json",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--only",
            "sera-sac,sera-calql",
            "--batch",
            "32",
            "--sera-large-batch",
            "64",
        ])
        .output()
        .expect("run o2o");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "o2o bench update failed:\n{stderr}");
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("output")).expect("JSON last line");
    let rows = json["sera_overhead"].as_array().expect("sera_overhead");
    let seen: Vec<(String, i64)> =
        rows.iter().map(|r| (r["algo"].as_str().unwrap().to_string(), r["batch"].as_i64().unwrap())).collect();
    assert_eq!(
        seen,
        [("sera-sac".to_string(), 32), ("sera-sac".into(), 64), ("sera-calql".into(), 32), ("sera-calql".into(), 64)]
    );
    for r in rows {
        // The bonus adds work; the bound only guards the measurement.
        let ratio = r["cost_ratio"].as_f64().unwrap();
        assert!(ratio > 0.8 && ratio < 5.0, "{r}");
        for key in ["update_ms", "q_ms", "knn_ms"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{r}");
        }
    }
}

/// Runs `o2o bench <args>` and returns its `--json` line.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    let out = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .arg("bench")
        .args(args)
        .env("O2O_SCRIPTS", &scripts)
        .output()
        .expect("run o2o");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "o2o bench {args:?} failed:\n{stderr}");
    serde_json::from_str(stdout.lines().last().expect("output"))
        .unwrap_or_else(|e| panic!("last line is not JSON ({e}):\n{stdout}"))
}

/// Uni-O4's dynamics ensemble: from the same weights and batch, our training loss equals the
/// PyTorch module's (`scripts/bench_dynamics_torch.py`) to 1e-5, and both rates are measured.
#[test]
fn bench_dynamics_matches_pytorch_and_prints_its_json() {
    let j = bench_json(&[
        "dynamics",
        "--json",
        "--rounds",
        "1",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--threads",
        "1",
        "--hidden",
        "32,32",
        "--batch",
        "16",
        "--members",
        "3",
    ]);
    let rel = j["loss_rel_diff"].as_f64().expect("loss_rel_diff");
    assert!(rel <= 1e-5, "dynamics loss differs from PyTorch by {rel} (relative)");
    for key in ["ours_steps_per_s", "pytorch_steps_per_s", "ratio"] {
        assert!(j[key].as_f64().is_some_and(|x| x > 0.0), "{key} = {}", j[key]);
    }
    assert_eq!(j["members"], 3);
}

/// PPO: a real `ppo-hopper` run on 2 envs and the Gymnasium reference, both timed.
#[test]
fn bench_ppo_runs_both_sides_and_prints_its_json() {
    let j = bench_json(&[
        "ppo",
        "--json",
        "--rounds",
        "1",
        "--envs",
        "2",
        "--rollout",
        "32",
        "--rollouts",
        "2",
        "--threads",
        "1",
    ]);
    for key in ["ours_steps_per_s", "pytorch_steps_per_s", "ratio"] {
        assert!(j[key].as_f64().is_some_and(|x| x > 0.0), "{key} = {}", j[key]);
    }
    assert_eq!(j["envs"], 2);
}
