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
    let (ok, out) = o2o(&["reward", "demos", "--task", "FetchPickAndPlace-v4", "--episodes", "2", "--seed", "50", "--out", &p("pick.hdf5")]);
    assert!(ok, "{out}");

    let config = p("small.toml");
    std::fs::write(&config, "hidden = [32]\nbatch_size = 64\n[labels]\nsample_factor = 3\npairs_per_episode = 100\n").unwrap();
    let views = ["--view", "gripper=6:9", "--view", "object=9:12"];
    let (push, model) = (p("push.hdf5"), p("push.pt"));
    let mut args = vec!["reward", "train", "--demos", &push, "--config", &config, "--steps", "60", "--held-out", "1", "--out", &model];
    args.extend(views);
    let (ok, out) = o2o(&args);
    assert!(ok && out.contains("trained on 3 demos") && out.contains("held-out (1 demos): VOC incremental"), "{out}");

    let (ok, out) = o2o(&["reward", "eval", "--model", &model, "--demos", &p("push.hdf5"), "--out", &p("eval")]);
    assert!(ok, "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("eval/eval.json")).unwrap()).unwrap();
    assert_eq!(report["modes"].as_array().unwrap().len(), 5);
    assert_eq!(report["demos"].as_array().unwrap().len(), 4);
    assert!(report["mean_voc"][3].as_f64().unwrap().is_finite());
    assert!(dir.path().join("eval/progress.png").metadata().unwrap().len() > 1000);
    assert!(dir.path().join("eval/progress.rrd").metadata().unwrap().len() > 100);

    let (ok, out) = o2o(&["reward", "adapt", "--from", &model, "--demo", &p("pick.hdf5"), "--held", &p("pick.hdf5"), "--steps", "30", "--out", &p("pick.pt")]);
    assert!(ok && out.contains("VOC before") && out.contains("VOC after"), "{out}");
    assert!(dir.path().join("pick.adapt.json").is_file());

    // Bad input names what is wrong.
    let (ok, out) = o2o(&["reward", "train", "--demos", &p("push.hdf5"), "--view", "gripper=9:6", "--out", &p("x.pt")]);
    assert!(!ok && out.contains("--view gripper=9:6"), "{out}");
    let (ok, out) = o2o(&["reward", "eval", "--model", &p("missing.pt"), "--demos", &p("push.hdf5"), "--out", &p("e2")]);
    assert!(!ok && out.contains("missing.pt"), "{out}");
}
