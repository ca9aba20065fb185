//! Helpers shared by the tests that drive the real `o2o` binary through whole runs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `o2o` binary under test.
pub const O2O: &str = env!("CARGO_BIN_EXE_o2o");

/// Runs `o2o <args> --device cpu --threads 1 --rerun=off --runs-dir <fresh dir> [--set s]...`,
/// asserts it succeeded, and returns the one run directory it made. The runs folder lives under
/// cargo's per-target scratch folder (prefixed `prefix`) and is kept so a failing run can be
/// inspected.
pub fn run_o2o<S: AsRef<str>>(prefix: &str, args: &[&str], sets: &[S]) -> PathBuf {
    let runs = tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let mut c = Command::new(O2O);
    c.args(args).args(["--device", "cpu", "--threads", "1", "--rerun=off", "--runs-dir"]).arg(&runs);
    for s in sets {
        c.args(["--set", s.as_ref()]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "o2o {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

/// Every value of metric `key` in a run's `metrics.jsonl`, in order.
pub fn metric(run: &Path, key: &str) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap().get(key).and_then(|v| v.as_f64()))
        .collect()
}
