//! LeRobotDataset interop against the real `lerobot` package (0.4.4, in `$O2O_HOME/lerobot-venv`,
//! installed by `scripts/setup.sh`; driven through `scripts/lerobot_oracle.py`):
//! - lerobot writes v3.0 (`create`/`add_frame`/`save_episode`/`finalize`), o2o reads it;
//! - o2o writes v3.0 (`o2o dataset convert --to lerobot`), `LeRobotDataset(repo_id, root=…)`
//!   loads it offline;
//! - a v2.1 folder (lerobot 0.4.4 writes v3.0 only, so it is built from the documented layout
//!   with Hugging Face `datasets`, as lerobot 2.x wrote it) and lerobot's own v2.1 → v3.0
//!   conversion of it, both read by o2o;
//! - IQL trained from a LeRobot copy of `data/hopper-small/hopper-medium-v2.hdf5` logs the same
//!   metrics as from the HDF5 file (no Python needed).
//!
//! Without the lerobot venv the Python tests are skipped with a message, unless `CI` is set:
//! then they fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{metrics_without_time, run_o2o, O2O};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The lerobot venv's python, or `None` (with a message) when it is not installed and `CI` is
/// unset. Under `CI` a missing venv is a failure.
fn lerobot_python() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    candidates.extend(std::env::var_os("O2O_LEROBOT_PYTHON").map(PathBuf::from));
    candidates.extend(option_env!("O2O_LEROBOT_PYTHON").map(PathBuf::from));
    let home = std::env::var_os("O2O_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/o2o")));
    candidates.extend(home.map(|h| h.join("lerobot-venv/bin/python")));
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Some(p.clone());
    }
    let msg = format!(
        "the lerobot venv is not installed (looked for {candidates:?}); `make setup` (scripts/setup.sh) installs lerobot 0.4.4 into $O2O_HOME/lerobot-venv"
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and {msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

fn oracle(py: &Path, args: &[&Path]) {
    let out = Command::new(py)
        .arg(repo().join("scripts/lerobot_oracle.py"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_LEROBOT_HOME", std::env::temp_dir().join("o2o-lerobot-home"))
        .output()
        .unwrap();
    assert!(out.status.success(), "lerobot_oracle.py {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

fn o2o(args: &[&str]) -> String {
    let out = Command::new(O2O).args(args).output().unwrap();
    assert!(out.status.success(), "o2o {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn scratch(prefix: &str) -> PathBuf {
    tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(floats).collect(),
        Value::Bool(b) => vec![if *b { 1.0 } else { 0.0 }],
        x => vec![x.as_f64().unwrap() as f32],
    }
}

/// The frames the oracle wrote, against the D4RL file o2o converted the folder to.
fn assert_matches_oracle(d: &D4rlDataset, expected: &Value) {
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(d.len(), rows.len());
    let col = |key: &str| rows.iter().flat_map(|r| floats(&r[key])).collect::<Vec<f32>>();
    assert_eq!(d.observations, col("observation.state"));
    assert_eq!(d.actions, col("action"));
    assert_eq!(d.rewards, col("next.reward"));
    assert_eq!(d.terminals, col("next.done"));
    assert_eq!(d.infos["infos/intervention"].data, col("complementary_info.is_intervention"));
    // Episodes 1 and 2 end without next.done: time limits on their last frames (rows 8 and 11).
    let mut timeouts = vec![0.0; rows.len()];
    (timeouts[8], timeouts[11]) = (1.0, 1.0);
    assert_eq!(d.timeouts.as_deref(), Some(&timeouts[..]));
    assert_eq!(d.episodes(None).iter().map(|e| e.rows.len()).collect::<Vec<_>>(), vec![5, 4, 3]);
}

#[test]
fn lerobot_writes_v30_and_o2o_reads_it() {
    let Some(py) = lerobot_python() else { return };
    let dir = scratch("lerobot-v30-");
    let (root, expected) = (dir.join("v30"), dir.join("expected.json"));
    oracle(&py, &[Path::new("write-v30"), &root, &expected]);
    assert_eq!(json(&root.join("meta/info.json"))["codebase_version"], "v3.0");

    let info = o2o(&["dataset", "info", root.to_str().unwrap()]);
    for want in [
        "LeRobotDataset v3.0",
        "3 episodes, 12 frames, fps 20",
        "-> infos/intervention",
        "observation.images.wrist (image",
    ] {
        assert!(info.contains(want), "`{want}` not in:\n{info}");
    }
    let h5 = dir.join("from-lerobot.hdf5");
    o2o(&["dataset", "convert", root.to_str().unwrap(), h5.to_str().unwrap(), "--to", "d4rl"]);
    assert_matches_oracle(&D4rlDataset::read(&h5).unwrap(), &json(&expected));
}

#[test]
fn v21_layout_and_lerobots_own_v30_conversion_read_the_same() {
    let Some(py) = lerobot_python() else { return };
    let dir = scratch("lerobot-v21-");
    let (root, expected) = (dir.join("ds"), dir.join("expected.json"));
    oracle(&py, &[Path::new("write-v21"), &root, &expected]);
    assert_eq!(json(&root.join("meta/info.json"))["codebase_version"], "v2.1");
    let expected = json(&expected);
    let h5 = dir.join("v21.hdf5");
    o2o(&["dataset", "convert", root.to_str().unwrap(), h5.to_str().unwrap(), "--to", "d4rl"]);
    assert_matches_oracle(&D4rlDataset::read(&h5).unwrap(), &expected);

    // lerobot's converter rewrites the folder in place as v3.0 (data in several files, list
    // columns written by pandas) and keeps the v2.1 copy beside it.
    oracle(&py, &[Path::new("convert"), &dir, Path::new("ds")]);
    assert_eq!(json(&root.join("meta/info.json"))["codebase_version"], "v3.0");
    let files = std::fs::read_dir(root.join("data/chunk-000")).unwrap().count();
    assert!(files > 1, "the converted data spans {files} file(s)");
    let h5 = dir.join("v30.hdf5");
    o2o(&["dataset", "convert", root.to_str().unwrap(), h5.to_str().unwrap(), "--to", "d4rl"]);
    assert_matches_oracle(&D4rlDataset::read(&h5).unwrap(), &expected);
}

/// Three episodes (terminated, timed out, unflagged) of a 4-d state and 2-d action with
/// intervened rows, as a robot recording would have them.
fn robot_like() -> D4rlDataset {
    let mut d = D4rlDataset::empty("robot".into(), 4, 2);
    let n = 10;
    for i in 0..n {
        let x = i as f32;
        d.observations.extend([x.sin(), x.cos(), 0.1 * x, -x]);
        d.actions.extend([0.3 * x.sin(), -0.05 * x]);
        d.rewards.push(0.5 * x - 1.0);
    }
    d.terminals = vec![0., 0., 0., 1., 0., 0., 0., 0., 0., 0.];
    d.timeouts = Some(vec![0., 0., 0., 0., 0., 0., 1., 0., 0., 0.]);
    d.next_observations = None;
    let interventions = vec![0., 0., 0., 0., 1., 1., 0., 0., 0., 1.];
    d.infos.insert("infos/intervention".into(), Column { shape: vec![n], dtype: Dtype::Float32, data: interventions });
    d
}

#[test]
fn o2o_writes_v30_and_lerobot_loads_it() {
    let Some(py) = lerobot_python() else { return };
    let dir = scratch("o2o-v30-");
    let (h5, root, got) = (dir.join("robot.hdf5"), dir.join("robot-lerobot"), dir.join("got.json"));
    let d = robot_like();
    d.write(&h5).unwrap();
    // A tiny file budget: one data file per episode, so lerobot reads several.
    let s = h5.to_str().unwrap();
    let out = o2o(&[
        "dataset",
        "convert",
        s,
        root.to_str().unwrap(),
        "--to",
        "lerobot",
        "--fps",
        "50",
        "--task",
        "push the block",
        "--data-files-size-mb",
        "0.000001",
    ]);
    assert!(out.contains("3 episodes, 10 frames, 3 data file(s)"), "{out}");
    oracle(&py, &[Path::new("read"), &root, &got]);
    let got = json(&got);

    let meta = &got["meta"];
    assert_eq!(
        (meta["fps"].as_u64(), meta["num_episodes"].as_u64(), meta["num_frames"].as_u64()),
        (Some(50), Some(3), Some(10))
    );
    assert_eq!(meta["lengths"], serde_json::json!([4, 3, 3]));
    assert_eq!(meta["data_files"].as_array().unwrap().len(), 3);
    let rows = got["rows"].as_array().unwrap();
    let col = |key: &str| rows.iter().flat_map(|r| floats(&r[key])).collect::<Vec<f32>>();
    assert_eq!(col("observation.state"), d.observations);
    assert_eq!(col("action"), d.actions);
    assert_eq!(col("next.reward"), d.rewards);
    assert_eq!(col("next.done"), d.terminals);
    assert_eq!(col("complementary_info.is_intervention"), d.infos["infos/intervention"].data);
    assert_eq!(col("episode_index"), vec![0., 0., 0., 0., 1., 1., 1., 2., 2., 2.]);
    assert_eq!(col("frame_index"), vec![0., 1., 2., 3., 0., 1., 2., 0., 1., 2.]);
    assert_eq!(col("index"), (0..10).map(|i| i as f32).collect::<Vec<_>>());
    for (t, f) in col("timestamp").iter().zip(col("frame_index")) {
        assert!((t - f / 50.0).abs() < 1e-6, "timestamp {t} at frame {f}");
    }
    assert!(rows.iter().all(|r| r["task"] == "push the block"));
    // stats.json as lerobot loads it: mean of the state's last dimension, −(0+…+9)/10.
    let mean = got["stats"]["observation.state"]["mean"].as_array().unwrap();
    assert!((mean[3].as_f64().unwrap() + 4.5).abs() < 1e-9, "{mean:?}");
    assert_eq!(got["stats"]["next.reward"]["count"], serde_json::json!([10]));

    // And back: o2o reads its own output to the same rows.
    let back = dir.join("back.hdf5");
    o2o(&["dataset", "convert", root.to_str().unwrap(), back.to_str().unwrap(), "--to", "d4rl"]);
    let b = D4rlDataset::read(&back).unwrap();
    assert_eq!(
        (b.observations, b.actions, b.rewards, b.terminals),
        (d.observations, d.actions, d.rewards, d.terminals)
    );
}

#[test]
fn iql_trains_the_same_from_a_lerobot_copy_of_hopper_small() {
    let hdf5 = repo().join("data/hopper-small/hopper-medium-v2.hdf5");
    let dir = scratch("hopper-lerobot-");
    let copy = dir.join("hopper-medium-v2");
    let out = o2o(&["dataset", "convert", hdf5.to_str().unwrap(), copy.to_str().unwrap(), "--to", "lerobot"]);
    assert!(out.contains("LeRobotDataset v3.0, fps 125"), "hopper's control rate is 1 / (0.002 s · 4): {out}");
    let sets = |data: &Path, lerobot: bool| {
        let mut v = vec![
            format!("dataset.path={:?}", data.display().to_string()),
            "train.offline_steps=300".into(),
            "train.online_steps=0".into(),
            "train.log_every=50".into(),
            "train.batch_size=64".into(),
            "eval.every=150".into(),
            "eval.episodes=1".into(),
            "checkpoint.every=0".into(),
            "agent.critic.hidden=[32, 32]".into(),
            "agent.actor.mlp.hidden=[32, 32]".into(),
            "agent.value.hidden=[32, 32]".into(),
        ];
        if lerobot {
            v.push("dataset.format=\"lerobot\"".into());
        }
        v
    };
    let args = ["run", "--preset", "iql-hopper-medium"];
    let from_hdf5 = run_o2o("iql-hdf5-", &args, &sets(&hdf5, false));
    let from_lerobot = run_o2o("iql-lerobot-", &args, &sets(&copy, true));
    let (a, b) = (metrics_without_time(&from_hdf5), metrics_without_time(&from_lerobot));
    assert!(a.len() >= 6, "{} metric lines", a.len());
    assert!(a.iter().any(|m| m.contains_key("eval/return")), "an evaluation was logged: {:?}", a.last());
    assert_eq!(a, b, "IQL from the LeRobot copy logs the same metrics as from the HDF5 file");
}
