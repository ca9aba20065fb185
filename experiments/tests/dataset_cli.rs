//! `o2o dataset info` and `o2o dataset convert` on our own D4RL- and Minari-format files.

use std::process::Command;

use o2o_datasets::d4rl::D4rlDataset;

fn o2o(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o")).args(args).output().expect("run o2o");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Two hopper-shaped episodes: 3 steps ending in a timeout (return 3), 2 ending in a fall (return 4).
fn hopper_like() -> D4rlDataset {
    let n = 5;
    D4rlDataset {
        source: "mem".into(),
        obs_dim: 11,
        act_dim: 3,
        observations: (0..n * 11).map(|i| i as f32 * 0.01).collect(),
        actions: vec![0.1; n * 3],
        rewards: vec![1.0, 1.0, 1.0, 2.0, 2.0],
        terminals: vec![0.0, 0.0, 0.0, 0.0, 1.0],
        timeouts: Some(vec![0.0, 0.0, 1.0, 0.0, 0.0]),
        next_observations: Some((0..n * 11).map(|i| i as f32 * 0.01 + 0.11).collect()),
        infos: Default::default(),
        metadata: Default::default(),
        dtypes: Default::default(),
    }
}

#[test]
fn info_and_convert_on_d4rl_and_minari_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.hdf5");
    hopper_like().write(&file).unwrap();
    let (ok, out) = o2o(&["dataset", "info", file.to_str().unwrap(), "--env", "hopper-medium-v2"]);
    assert!(ok, "{out}");
    assert!(out.contains("observations") && out.contains("float32") && out.contains("[5, 11]"), "{out}");
    assert!(out.contains("episodes: 2 (1 terminated, 1 truncated, 0 unflagged)"), "{out}");
    assert!(out.contains("episode return: min 3.000, mean 3.500, max 4.000"), "{out}");
    // hopper: 100 · (3.5 + 20.272305) / (3234.3 + 20.272305) = 0.73
    assert!(out.contains("normalized score (D4RL, x100): min 0.7, mean 0.7, max 0.7"), "{out}");

    // A mismatching env is a warning naming the file, key, expected and found.
    let (ok, out) = o2o(&["dataset", "info", file.to_str().unwrap(), "--env", "halfcheetah-medium-v2"]);
    assert!(ok, "{out}");
    assert!(out.contains("does not fit the env") && out.contains("expects 17"), "{out}");

    let minari = dir.path().join("minari");
    let (ok, out) = o2o(&[
        "dataset",
        "convert",
        file.to_str().unwrap(),
        minari.to_str().unwrap(),
        "--to",
        "minari",
        "--id",
        "hopper-medium-v2",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = o2o(&["dataset", "info", minari.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("format: Minari") && out.contains("2 episodes, 5 steps"), "{out}");
    assert!(out.contains("normalized score (D4RL, x100)"), "ref scores come from metadata.json: {out}");

    let back = dir.path().join("back.hdf5");
    let (ok, out) = o2o(&["dataset", "convert", minari.to_str().unwrap(), back.to_str().unwrap(), "--to", "d4rl"]);
    assert!(ok, "{out}");
    let d = D4rlDataset::read(&back).unwrap();
    let orig = hopper_like();
    assert_eq!(
        (d.observations, d.rewards, d.terminals, d.timeouts),
        (orig.observations, orig.rewards, orig.terminals, orig.timeouts)
    );
}

#[test]
fn info_on_a_missing_id_or_broken_file_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out) = o2o(&["dataset", "info", "hoper-medium-v2"]);
    assert!(!ok && out.contains("did you mean `hopper-medium-v2`"), "{out}");
    let bad = dir.path().join("bad.hdf5");
    std::fs::write(&bad, b"not hdf5").unwrap();
    let (ok, out) = o2o(&["dataset", "info", bad.to_str().unwrap()]);
    assert!(!ok && out.contains("bad.hdf5") && out.contains("not a readable HDF5 file"), "{out}");
}
