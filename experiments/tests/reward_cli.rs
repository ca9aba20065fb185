//! `o2o reward demos | train | eval | adapt` end to end at toy scale: files appear, the model
//! file round-trips through the commands, eval writes VOC for all five modes, and bad input
//! fails with a message naming it.

use std::process::Command;

fn o2o(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o")).args(args).output().expect("run o2o");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn demos_train_eval_adapt() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (ok, out) = o2o(&["reward", "demos", "--task", "FetchPush-v4", "--episodes", "4", "--out", &p("push.hdf5")]);
    assert!(ok && out.contains("4 episodes"), "{out}");
    assert!(dir.path().join("push.hdf5.keyframes.json").is_file());
    let (ok, out) = o2o(&[
        "reward",
        "demos",
        "--task",
        "FetchPickAndPlace-v4",
        "--episodes",
        "2",
        "--seed",
        "50",
        "--out",
        &p("pick.hdf5"),
    ]);
    assert!(ok, "{out}");

    let config = p("small.toml");
    std::fs::write(&config, "hidden = [32]\nbatch_size = 64\n[labels]\nsample_factor = 3\npairs_per_episode = 100\n")
        .unwrap();
    let views = ["--view", "gripper=6:9", "--view", "object=9:12"];
    let (push, model) = (p("push.hdf5"), p("push.pt"));
    let mut args = vec![
        "reward",
        "train",
        "--demos",
        &push,
        "--config",
        &config,
        "--steps",
        "60",
        "--held-out",
        "1",
        "--out",
        &model,
    ];
    args.extend(views);
    let (ok, out) = o2o(&args);
    assert!(ok && out.contains("trained on 3 demos") && out.contains("held-out (1 demos): VOC incremental"), "{out}");

    let (ok, out) = o2o(&["reward", "eval", "--model", &model, "--demos", &p("push.hdf5"), "--out", &p("eval")]);
    assert!(ok, "{out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("eval/eval.json")).unwrap()).unwrap();
    assert_eq!(report["modes"].as_array().unwrap().len(), 5);
    assert_eq!(report["demos"].as_array().unwrap().len(), 4);
    assert!(report["mean_voc"][3].as_f64().unwrap().is_finite());
    assert!(dir.path().join("eval/progress.png").metadata().unwrap().len() > 1000);
    assert!(dir.path().join("eval/progress.rrd").metadata().unwrap().len() > 100);

    let (ok, out) = o2o(&[
        "reward",
        "adapt",
        "--from",
        &model,
        "--demo",
        &p("pick.hdf5"),
        "--held",
        &p("pick.hdf5"),
        "--steps",
        "30",
        "--out",
        &p("pick.pt"),
    ]);
    assert!(ok && out.contains("VOC before") && out.contains("VOC after"), "{out}");
    assert!(dir.path().join("pick.adapt.json").is_file());

    // Bad input names what is wrong.
    let (ok, out) = o2o(&["reward", "train", "--demos", &p("push.hdf5"), "--view", "gripper=9:6", "--out", &p("x.pt")]);
    assert!(!ok && out.contains("--view gripper=9:6"), "{out}");
    let (ok, out) =
        o2o(&["reward", "eval", "--model", &p("missing.pt"), "--demos", &p("push.hdf5"), "--out", &p("e2")]);
    assert!(!ok && out.contains("missing.pt"), "{out}");
}

/// A shaped SAC run on FetchReach: `[shaping]` from `--set`, the potentials and shaped returns
/// in metrics.jsonl, PBRS's telescoping visible per episode (Fetch never terminates, so over a
/// 50-step episode Σ F = Σ (γΦ(s') − Φ(s)), which the shaped and gold returns bracket), the
/// naive mode differing, and `enabled = false` leaving the env's rewards.
#[test]
fn shaped_run_logs_potentials_beside_rewards() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (ok, out) = o2o(&["reward", "demos", "--task", "FetchReach-v4", "--episodes", "3", "--out", &p("reach.hdf5")]);
    assert!(ok, "{out}");
    std::fs::write(
        p("small.toml"),
        "hidden = [16]\nbatch_size = 32\n[labels]\nsample_factor = 2\npairs_per_episode = 50\n",
    )
    .unwrap();
    let (ok, out) = o2o(&[
        "reward",
        "train",
        "--demos",
        &p("reach.hdf5"),
        "--config",
        &p("small.toml"),
        "--steps",
        "20",
        "--view",
        "grip=6:9",
        "--view",
        "goal=3:6",
        "--out",
        &p("reach.pt"),
    ]);
    assert!(ok, "{out}");
    let run = |mode: &str, enabled: &str, runs: &str| -> Vec<serde_json::Value> {
        let model = format!("shaping={{ model = \"{}\", mode = \"{mode}\", enabled = {enabled} }}", p("reach.pt"));
        let args = [
            "train",
            "--preset",
            "sac-inverted-pendulum",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--rerun=off",
            "--runs-dir",
            &p(runs),
            "--set",
            "env=FetchReach-v4",
            "--set",
            "train.random_steps=100",
            "--set",
            "train.online_steps=0",
            "--set",
            "eval.every=0",
            "--set",
            "eval.episodes=1",
            "--set",
            &model,
        ];
        let (ok, out) = o2o(&args);
        assert!(ok, "{out}");
        let run_dir = std::fs::read_dir(p(runs)).unwrap().next().unwrap().unwrap().path();
        std::fs::read_to_string(run_dir.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v.get("train/episode_return").is_some())
            .collect()
    };
    let pbrs = run("pbrs", "true", "a");
    assert_eq!(pbrs.len(), 2, "two 50-step episodes");
    for e in &pbrs {
        for key in [
            "train/episode_shaped_return",
            "train/episode_gold_return",
            "train/episode_potential_start",
            "train/episode_potential_end",
        ] {
            assert!(e[key].as_f64().unwrap().is_finite(), "{key} in {e}");
        }
        assert_eq!(e["train/episode_gold_return"], e["train/episode_return"], "gold = env reward");
        assert_ne!(e["train/episode_shaped_return"], e["train/episode_return"]);
    }
    let naive = run("naive", "true", "b");
    // Same seed, same random actions: the same states and potentials, a different reward.
    assert_eq!(naive[0]["train/episode_potential_end"], pbrs[0]["train/episode_potential_end"]);
    let telescoped = naive[0]["train/episode_gold_return"].as_f64().unwrap()
        + naive[0]["train/episode_potential_end"].as_f64().unwrap()
        - naive[0]["train/episode_potential_start"].as_f64().unwrap();
    assert!(
        (naive[0]["train/episode_shaped_return"].as_f64().unwrap() - telescoped).abs() < 1e-4,
        "naive sums to Φ_end − Φ_start"
    );
    let off = run("pbrs", "false", "c");
    assert!(off[0].get("train/episode_shaped_return").is_none());
}
