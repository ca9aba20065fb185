//! The library's examples (issue 16, item 3), built by `cargo test` like every example, run at
//! a tiny budget: an env of one's own trained online with SAC, offline IQL on data built in
//! memory then fine-tuned, and an exact resume from code. Also what the CLI says about such
//! runs, which it cannot continue by itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

/// `target/<profile>/examples/<name>`, next to this test's `deps/` folder.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is missing: examples are built by `cargo test` (or `cargo build --examples`)",
        path.display()
    );
    path
}

fn run_example(name: &str, args: &[&str]) -> (PathBuf, Output) {
    let runs = tempfile::Builder::new()
        .prefix(&format!("example-{name}-"))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    let out = Command::new(example(name)).arg(&runs).args(args).env("OMP_NUM_THREADS", "1").output().unwrap();
    assert!(
        out.status.success(),
        "example {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (runs, out)
}

fn run_dirs(runs: &Path) -> Vec<PathBuf> {
    let mut d: Vec<PathBuf> =
        std::fs::read_dir(runs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    d.sort();
    d
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

#[test]
fn custom_env_example_trains_records_and_checkpoints() {
    let (runs, out) = run_example("custom_env", &["2000"]);
    let dirs = run_dirs(&runs);
    assert_eq!(dirs.len(), 1);
    let dir = &dirs[0];
    assert!(String::from_utf8_lossy(&out.stdout).contains("success rate"));
    let summary = json(&dir.join("summary.json"));
    assert_eq!(summary["finished"], true);
    assert_eq!(summary["env_steps"], 2500, "500 random + 2000 online steps");
    assert!(summary["final_eval"]["success_rate"].is_number(), "the env's success flag reaches the evaluation");
    // Random actions score about −50 (50 steps at a mean distance of about 1); heading for the
    // goal scores about −5. 2000 SAC steps reach about −21 (seed 0).
    let ret = summary["final_eval"]["mean_return"].as_f64().unwrap();
    assert!(ret > -35.0, "SAC did not learn the point mass: final return {ret}");
    assert!(dir.join("recording.rrd").metadata().unwrap().len() > 0);
    assert!(!std::fs::read_dir(dir.join("checkpoints")).unwrap().next().is_none());
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert!(config.contains("env = \"PointMass-v0\""), "the env's id replaces the preset's:\n{config}");

    // The CLI cannot make this env, and says how to continue such a run.
    let o = Command::new(common::O2O).arg("resume").arg(dir).arg("--rerun=off").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(String::from_utf8_lossy(&o.stdout).contains("already finished") || err.contains("Run::resume"), "{err}");
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let last = o2o_experiments::run::checkpoint::latest(dir).unwrap();
    std::fs::remove_dir_all(&last).unwrap();
    let o = Command::new(common::O2O).arg("resume").arg(dir).arg("--rerun=off").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("PointMass-v0") && err.contains("Run::resume(dir)?.env("), "{err}");
}

#[test]
fn own_dataset_example_trains_offline_on_memory_data_then_online() {
    let (runs, out) = run_example("own_dataset", &["600", "400"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("offline:") && stdout.contains("online:"), "{stdout}");
    let dirs = run_dirs(&runs);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let (offline, online) =
        if dirs[0].to_string_lossy().contains("finetune") { (&dirs[1], &dirs[0]) } else { (&dirs[0], &dirs[1]) };
    let m = json(&offline.join("manifest.json"));
    assert_eq!(m["dataset"]["path"], "(in-memory dataset)");
    let sha = m["dataset"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);
    assert!(std::fs::read_to_string(offline.join("config.toml")).unwrap().contains("in_memory = true"));
    let s = json(&offline.join("summary.json"));
    assert_eq!((s["grad_steps"].as_u64(), s["env_steps"].as_u64()), (Some(600), Some(0)));
    let m2 = json(&online.join("manifest.json"));
    assert_eq!(m2["dataset"]["sha256"], sha.as_str(), "the fine-tuning run saw the same data");
    assert!(m2["parent"]["run_dir"].as_str().unwrap().ends_with(offline.file_name().unwrap().to_str().unwrap()));
    let s2 = json(&online.join("summary.json"));
    assert_eq!(s2["env_steps"], 400);

    // `o2o resume` has no data to give a run whose data was in memory, and says so.
    std::fs::remove_file(online.join("summary.json")).unwrap();
    for c in o2o_experiments::run::checkpoint::list(online).unwrap() {
        std::fs::remove_dir_all(c).unwrap();
    }
    let o = Command::new(common::O2O).arg("resume").arg(online).arg("--rerun=off").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("in memory") && err.contains("Run::dataset"), "{err}");
}

#[test]
fn resume_example_continues_exactly() {
    let (_, out) = run_example("resume", &["1200"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("stopping at") && stdout.contains("identical:"), "{stdout}");
}
