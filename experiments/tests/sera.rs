//! SERA through the `o2o` binary (issue 18), on the shipped hopper data with tiny networks:
//!
//! 1. λ = 0 reproduces the base algorithm bit for bit: the same seed with `[sera] enabled,
//!    lambda = 0` gives the same metrics (every key the base run logs) and the same final
//!    weights as the run without SERA, while it does compute and log the bonus;
//! 2. with λ = 1 the bonus is logged (`train/sera/r_int_mean`, `…_std`, `…/bonus_share`) and
//!    training differs from the base run; the other options (online-buffer neighbours, dataset
//!    standardization, the literal log form, the mean over critics) run end to end;
//! 3. settings that cannot work fail before the first step, naming the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tch::Tensor;

mod common;

use common::{metric, metrics_without_time, O2O};

fn hopper_small() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/hopper-small/hopper-medium-v2.hdf5").canonicalize().unwrap()
}

/// `sera-calql-hopper-small` at a test budget (200 offline steps, 300 online env steps on
/// 64-row batches, 32×32 networks), plus `extra`.
fn sets(extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        format!("dataset.path={:?}", hopper_small().display().to_string()),
        "train.offline_steps=200".to_string(),
        "train.online_steps=300".into(),
        "train.batch_size=64".into(),
        "train.log_every=50".into(),
        "eval.every=250".into(),
        "eval.episodes=2".into(),
        "checkpoint.every=0".into(),
        "diagnostics.every=0".into(),
        "agent.critic.hidden=[32, 32]".into(),
        "agent.actor.mlp.hidden=[32, 32]".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(extra: &[&str]) -> PathBuf {
    common::run_o2o("o2o-sera-", &["run", "--preset", "sera-calql-hopper-small"], &sets(extra))
}

fn final_weights(run: &Path) -> Vec<(String, Tensor)> {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let mut v = Tensor::load_multi(run.join(summary["checkpoint"].as_str().unwrap()).join("agent.ot")).unwrap();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn without_sera_keys(m: Vec<BTreeMap<String, serde_json::Value>>) -> Vec<BTreeMap<String, serde_json::Value>> {
    m.into_iter()
        .map(|mut row| {
            row.retain(|k, _| !k.starts_with("train/sera/"));
            row
        })
        .collect()
}

#[test]
fn lambda_zero_reproduces_the_base_algorithm_bit_for_bit() {
    let base = run(&["sera.enabled=false"]);
    let zero = run(&["sera.lambda=0"]);
    assert!(metric(&base, "train/sera/r_int_mean").is_empty(), "the base run computes no bonus");
    let r_int = metric(&zero, "train/sera/r_int_mean");
    assert!(
        r_int.len() >= 4 && r_int.iter().all(|x| x.is_finite()),
        "the λ = 0 run computes and logs the bonus: {r_int:?}"
    );
    assert!(metric(&zero, "train/sera/bonus_share").iter().all(|&s| s == 0.0));
    let (a, b) = (metrics_without_time(&base), without_sera_keys(metrics_without_time(&zero)));
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "metrics row {i} differs");
    }
    for ((n, x), (m, y)) in final_weights(&base).iter().zip(&final_weights(&zero)) {
        assert_eq!(n, m);
        assert!(x.equal(y), "tensor {n} differs");
    }
}

#[test]
fn the_bonus_is_logged_and_changes_training() {
    let base = run(&["sera.enabled=false"]);
    let on = run(&[]);
    let (mean, std, share) = (
        metric(&on, "train/sera/r_int_mean"),
        metric(&on, "train/sera/r_int_std"),
        metric(&on, "train/sera/bonus_share"),
    );
    assert!(mean.len() >= 4 && mean.len() == std.len() && std.len() == share.len());
    assert!(std.iter().all(|&s| s > 0.0 && s.is_finite()), "{std:?}");
    assert!(share.iter().all(|&s| s > 0.0 && s < 1.0), "{share:?}");
    // The offline part is untouched; the first online update already differs.
    let (a, b) = (metric(&base, "train/critic_loss"), metric(&on, "train/critic_loss"));
    assert_eq!(a[..4], b[..4], "offline updates (steps 50..200) get no bonus");
    assert_ne!(a.last(), b.last());
    // Every other option runs end to end.
    let other = run(&[
        "sera.neighbours=\"online-sample\"",
        "sera.neighbour_samples=256",
        "sera.state_scaling=\"dataset\"",
        "sera.log_form=\"log2-max\"",
        "sera.q_reduction=\"mean\"",
        "sera.normalization=\"none\"",
    ]);
    let mean = metric(&other, "train/sera/r_int_mean");
    assert!(!mean.is_empty() && mean.iter().all(|x| x.is_finite()), "{mean:?}");
}

#[test]
fn settings_that_cannot_work_fail_before_the_first_step_naming_the_key() {
    let fail = |args: &[&str]| {
        let runs = tempfile::Builder::new().prefix("o2o-sera-bad-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let out = Command::new(O2O)
            .args(args)
            .args(["--device", "cpu", "--threads", "1", "--rerun=off", "--runs-dir"])
            .arg(runs.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let data = format!("dataset.path={:?}", hopper_small().display().to_string());
    let err = fail(&["run", "--preset", "sera-calql-hopper-small", "--set", &data, "--set", "sera.k=300"]);
    assert!(err.contains("sera.k") && err.contains("300"), "{err}");
    // Standardizing by the dataset's statistics in a run that has no dataset.
    let err = fail(&[
        "run",
        "--preset",
        "sac-inverted-pendulum",
        "--set",
        "sera.enabled=true",
        "--set",
        "sera.state_scaling=\"dataset\"",
        "--set",
        "train.online_steps=10",
    ]);
    assert!(err.contains("sera.state_scaling"), "{err}");
    let err =
        fail(&["run", "--preset", "sera-calql-hopper-small", "--set", &data, "--set", "sera.normalisation=\"tanh\""]);
    assert!(err.contains("normalisation"), "{err}");
}
