//! Exact resume (issue 5, item 5): a run killed with SIGKILL and resumed ends with exactly the
//! weights, replay buffer and metrics of a run that never stopped.
//!
//! Both runs use the real `o2o` binary on InvertedPendulum-v5 with small networks, one torch
//! thread and the CPU, so they are bit-for-bit reproducible.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{metrics_without_time, O2O};

/// A short SAC run: 150 random steps, then 1,650 online steps; a checkpoint every 300 steps.
const RUN: &[&str] = &[
    "train",
    "--preset",
    "sac-inverted-pendulum",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--seed",
    "3",
    "--set",
    "train.random_steps=150",
    "--set",
    "train.online_steps=1650",
    "--set",
    "train.batch_size=64",
    "--set",
    "train.log_every=50",
    "--set",
    "eval.every=600",
    "--set",
    "eval.episodes=2",
    "--set",
    "checkpoint.every=300",
    "--set",
    "agent.critic.hidden=[32, 32]",
    "--set",
    "agent.actor.mlp.hidden=[32, 32]",
    "--set",
    "train.record_dataset=true",
];

fn o2o(args: &[&str], runs: &Path) -> Command {
    let mut c = Command::new(O2O);
    c.args(args).arg("--rerun=off").arg("--runs-dir").arg(runs).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// The one run directory inside `runs`.
fn only_run(runs: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> =
        std::fs::read_dir(runs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1, "expected one run directory in {}, found {dirs:?}", runs.display());
    dirs.into_iter().next().unwrap()
}

fn checkpoints(run: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(run.join("checkpoints"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("step-"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn assert_same_tensors(a: &Path, b: &Path) {
    let ta = tch::Tensor::load_multi(a).unwrap();
    let tb = tch::Tensor::load_multi(b).unwrap();
    let names = |t: &[(String, tch::Tensor)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ta), names(&tb));
    assert!(ta.len() > 5, "the agent checkpoint holds {} tensors", ta.len());
    for ((name, x), (_, y)) in ta.iter().zip(&tb) {
        assert_eq!(x.size(), y.size(), "{name}");
        assert!(x.equal(y), "tensor {name} differs after resume");
    }
}

/// Run `args` straight through in `a/`; run it again in `b/`, SIGKILL it once its first
/// checkpoint exists, `o2o resume` it; then compare everything the two runs left behind.
/// `last` is the final checkpoint's folder name; `rows` the recorded dataset's length, if any.
fn assert_kill_resume_is_exact(args: &[&str], last: &str, rows: Option<usize>) {
    let tmp = tempfile::tempdir().unwrap();
    let (runs_a, runs_b) = (tmp.path().join("a"), tmp.path().join("b"));

    // A: straight through.
    let out = o2o(args, &runs_a).output().unwrap();
    assert!(out.status.success(), "straight run failed: {}", String::from_utf8_lossy(&out.stderr));
    let a = only_run(&runs_a);

    // B: the same run, killed with SIGKILL once its first checkpoint exists.
    let mut child = o2o(args, &runs_b).spawn().unwrap();
    let t0 = Instant::now();
    let b = loop {
        if let Ok(mut d) = std::fs::read_dir(&runs_b) {
            if let Some(Ok(e)) = d.next() {
                if !checkpoints(&e.path()).is_empty() {
                    break e.path();
                }
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "run B ended before its first checkpoint");
        assert!(t0.elapsed() < Duration::from_secs(300), "no checkpoint after 300 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    assert!(!b.join("summary.json").exists(), "run B finished before it could be killed; the test proves nothing");
    let killed_at = checkpoints(&b);
    assert!(!killed_at.iter().any(|c| c.ends_with(last)), "killed too late: {killed_at:?}");

    let out = Command::new(O2O)
        .args(["resume", "--device", "cpu", "--threads", "1", "--rerun=off"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success(), "resume failed: {}", String::from_utf8_lossy(&out.stderr));

    // Same final checkpoint: agent tensors, replay buffer, runner state.
    let (ca, cb) = (checkpoints(&a).pop().unwrap(), checkpoints(&b).pop().unwrap());
    assert!(ca.ends_with(last), "{ca:?}");
    assert_eq!(ca.file_name(), cb.file_name());
    assert_same_tensors(&ca.join("agent.ot"), &cb.join("agent.ot"));
    assert!(
        std::fs::read(ca.join("replay.bin")).unwrap() == std::fs::read(cb.join("replay.bin")).unwrap(),
        "replay buffers differ"
    );
    // state.json equal apart from `metrics_len` (a byte count, which wall-clock digits change)
    // and the wall-clock times of the phase-end evaluations.
    let state = |c: &Path| {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(c.join("state.json")).unwrap()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("metrics_len");
        for p in o["phase_evals"].as_array_mut().unwrap() {
            p.as_object_mut().unwrap().remove("wall_s");
        }
        v
    };
    assert_eq!(state(&ca), state(&cb));

    // Same recorded dataset (train.record_dataset), continued across the kill.
    if let Some(rows) = rows {
        let read = |r: &Path| {
            let mut d = o2o_datasets::d4rl::D4rlDataset::read(&r.join("dataset.hdf5")).unwrap();
            d.source = PathBuf::new();
            d
        };
        let (da, db) = (read(&a), read(&b));
        assert_eq!(da.len(), rows);
        assert!(da == db, "recorded datasets differ");
    }

    // Same metrics, line for line, apart from wall-clock fields.
    let (ma, mb) = (metrics_without_time(&a), metrics_without_time(&b));
    assert!(
        ma.iter().any(|m| m.contains_key("eval/return")) && ma.iter().any(|m| m.contains_key("train/episode_return"))
    );
    assert_eq!(ma.len(), mb.len(), "metrics.jsonl line counts differ");
    for (i, (x, y)) in ma.iter().zip(&mb).enumerate() {
        assert_eq!(x, y, "metrics.jsonl line {} differs", i + 1);
    }

    // Resuming a finished run does nothing.
    let out = Command::new(O2O).args(["resume", "--device", "cpu", "--rerun=off"]).arg(&b).output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("already finished"));
}

#[test]
fn sigkill_then_resume_equals_an_uninterrupted_run() {
    assert_kill_resume_is_exact(RUN, "step-0000001800", Some(1800));
}

/// The same for one run that goes offline → online: IQL on a dataset (recorded from 400
/// uniformly random steps), then online steps with half of each batch from that dataset.
/// (The actor-LR decay spans all 1,500 updates: the agents crate's Adam turns a learning rate
/// of exactly 0 into NaN weights, which a decay ending before the online phase would hit.)
#[test]
fn sigkill_then_resume_is_exact_across_offline_and_online_phases() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = ["train.random_steps=400", "train.online_steps=0", "train.record_dataset=true", "eval.episodes=1"];
    let mut args = vec!["train", "--preset", "sac-inverted-pendulum", "--device", "cpu", "--threads", "1"];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let out = o2o(&args, tmp.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dataset = only_run(tmp.path()).join("dataset.hdf5");
    let preset = tmp.path().join("iql-o2o.toml");
    std::fs::write(
        &preset,
        format!(
            "algo = \"iql\"\nenv = \"InvertedPendulum-v5\"\nseed = 5\n[dataset]\npath = {:?}\ntransitions = \"corrected\"\n\
             [train]\noffline_steps = 600\nonline_steps = 900\noffline_ratio = 0.5\nbatch_size = 64\nlog_every = 50\n\
             [eval]\nevery = 500\nepisodes = 2\n[checkpoint]\nevery = 200\n\
             [agent]\nactor_lr_decay_steps = 1500\ncritic = {{ hidden = [32, 32] }}\nvalue = {{ hidden = [32, 32] }}\nactor = {{ mlp = {{ hidden = [32, 32] }} }}\n",
            dataset.display().to_string()
        ),
    )
    .unwrap();
    let p = preset.to_str().unwrap();
    assert_kill_resume_is_exact(
        &["train", "--preset", p, "--device", "cpu", "--threads", "1"],
        "step-0000001500",
        None,
    );
}

/// WSRL across its whole recipe: killed during pre-training (first checkpoint at loop step
/// 200), resumed through the switch (where `reset_optimizers` zeroes Adam's moments once, and
/// must not again on resume), the warm-up, the online phase with its dense diagnostics.
#[test]
fn sigkill_then_resume_is_exact_through_wsrls_switch_and_warmup() {
    let data = tempfile::tempdir().unwrap();
    let (dataset, _) = common::pd_dataset(data.path(), 2, 0.3);
    let sets = [
        "env=InvertedPendulum-v5".to_string(),
        format!("dataset.path={:?}", dataset.display().to_string()),
        "dataset.transitions=corrected".into(),
        "train.offline_steps=300".into(),
        "train.warmup_steps=200".into(),
        "train.online_steps=400".into(),
        "train.online_batch_size=128".into(),
        "train.log_every=50".into(),
        "eval.every=300".into(),
        "eval.episodes=2".into(),
        "diagnostics.window=200".into(),
        "diagnostics.dense_every=100".into(),
        "checkpoint.every=200".into(),
        "agent.reset_optimizers=true".into(),
        "agent.cql_n_actions=2".into(),
        "agent.critic.hidden=[32, 32]".into(),
        "agent.actor.mlp.hidden=[32, 32]".into(),
    ];
    let mut args = vec!["run", "--preset", "wsrl-hopper-small", "--device", "cpu", "--threads", "1", "--seed", "4"];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    assert_kill_resume_is_exact(&args, "step-0000000900", None);
}

/// FamO2O over CQL and over IQL (issue 19), offline then online in one run: killed after its
/// first checkpoint (offline), resumed through the switch to online updates, where the universal
/// policy's β changes from random draws to the balance model's; both policies, the balance
/// model, every optimizer and temperature are in the checkpoint.
#[test]
fn sigkill_then_resume_is_exact_for_famo2o_cql_and_iql() {
    let data = tempfile::tempdir().unwrap();
    let (dataset, _) = common::pd_dataset(data.path(), 2, 0.3);
    for (preset, extra) in [
        ("famo2o-cql-hopper-small", vec!["agent.cql_n_actions=2", "agent.balance.mlp.hidden=[32, 32]"]),
        ("famo2o-iql-hopper-small", vec!["agent.value.hidden=[32, 32]", "agent.balance.mlp.hidden=[32, 32]"]),
    ] {
        let mut sets = vec![
            "env=InvertedPendulum-v5".to_string(),
            format!("dataset.path={:?}", dataset.display().to_string()),
            "dataset.transitions=corrected".into(),
            "train.offline_steps=300".into(),
            "train.online_steps=600".into(),
            "train.batch_size=64".into(),
            "train.log_every=50".into(),
            "eval.every=300".into(),
            "eval.episodes=2".into(),
            "diagnostics.every=300".into(),
            "checkpoint.every=200".into(),
            "agent.critic.hidden=[32, 32]".into(),
            "agent.actor.mlp.hidden=[32, 32]".into(),
        ];
        if preset.contains("iql") {
            sets.push("dataset.reward=none".into());
        }
        sets.extend(extra.iter().map(|s| s.to_string()));
        let mut args = vec!["run", "--preset", preset, "--device", "cpu", "--threads", "1", "--seed", "2"];
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        assert_kill_resume_is_exact(&args, "step-0000000900", None);
    }
}

#[test]
fn bad_overrides_fail_before_creating_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    for (set, needle) in [
        ("train.online_stepz=5", "online_stepz"),
        ("train.online_steps=abc", "abc"),
        ("agent.critic_lrr=1", "critic_lrr"),
    ] {
        let out = o2o(&["train", "--preset", "sac-inverted-pendulum", "--set", set], tmp.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {err}");
        assert!(err.contains(needle), "{set}: error does not name {needle}: {err}");
    }
    let out = o2o(&["train", "--preset", "iql-hopper-medium", "--set", "dataset.path=/no/such/file.hdf5"], tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/file.hdf5"));
    let out = o2o(&["train", "--preset", "no-such-preset"], tmp.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("sac-hopper"));
    assert!(
        !tmp.path().exists() || std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "a failed config created a run directory"
    );
}

#[test]
fn run_directory_has_its_files_and_d4rl_envs_get_normalized_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "train",
        "--preset",
        "sac-hopper",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--set",
        "env=hopper-v2",
        "--set",
        "train.random_steps=30",
        "--set",
        "train.online_steps=0",
        "--set",
        "eval.every=0",
        "--set",
        "eval.episodes=2",
    ];
    let out = o2o(&args, tmp.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = only_run(tmp.path());
    assert!(run.file_name().unwrap().to_string_lossy().starts_with("sac-hopper-0-"));
    // config.toml is the whole resolved config: the agent's defaults are spelled out.
    let config: toml::Table = std::fs::read_to_string(run.join("config.toml")).unwrap().parse().unwrap();
    assert_eq!(config["env"].as_str(), Some("hopper-v2"));
    assert_eq!(config["agent"]["gamma"].as_float(), Some(0.99));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    for key in ["git_revision", "seeds", "machine", "o2o_version", "device"] {
        assert!(manifest.get(key).is_some(), "manifest.json lacks {key}");
    }
    assert_eq!(manifest["machine"]["mujoco"].as_str(), Some("3.17.0"));
    assert!(manifest["machine"]["cores"].as_u64().unwrap() >= 1);
    // The evaluation's normalized score is D4RL's: 100 (R − REF_MIN) / (REF_MAX − REF_MIN).
    let last: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(run.join("metrics.jsonl")).unwrap().lines().last().unwrap())
            .unwrap();
    let ret = last["eval/return"].as_f64().unwrap();
    let score = last["eval/normalized_score"].as_f64().unwrap();
    assert!((score - 100.0 * (ret + 20.272305) / (3234.3 + 20.272305)).abs() < 1e-9, "{ret} → {score}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["steps"].as_u64(), Some(30));
    assert_eq!(summary["final_eval"]["normalized_score"].as_f64(), Some(score));
}

/// HER (issue 22): a SAC + HER run on FetchReach-v4 killed after its first checkpoint and
/// resumed ends with the same weights, replay buffer (its episode column included) and metrics:
/// the relabelling draws come from the checkpointed runner RNG.
#[test]
fn sigkill_then_resume_is_exact_with_her() {
    let sets = [
        "train.random_steps=100",
        "train.online_steps=400",
        "train.batch_size=32",
        "train.log_every=50",
        "eval.every=250",
        "eval.episodes=1",
        "checkpoint.every=150",
        "agent.critic.hidden=[16, 16]",
        "agent.actor.mlp.hidden=[16, 16]",
    ];
    let mut args = vec!["train", "--preset", "sac-her-fetch-reach", "--device", "cpu", "--threads", "1", "--seed", "2"];
    for s in &sets {
        args.extend(["--set", s]);
    }
    assert_kill_resume_is_exact(&args, "step-0000000500", None);
}
