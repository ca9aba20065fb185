//! `o2o dataset make-benchmark pen` at a tiny scale (issue #25): D4RL's Adroit v1 keys and
//! shapes, timeouts at the 100-step horizon, the per-episode target orientation, and rewards and
//! observations that replaying the file's actions in `pen-v1` from the recorded episode seeds
//! reproduces exactly; the manifest's success rate and return match the file.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::Env;
use o2o_experiments::run::actor::derive_seed;
use serde_json::Value;
use std::process::Command;

#[test]
fn a_tiny_made_pen_file_is_d4rls_layout_and_replays_in_the_env() {
    let dir = tempfile::Builder::new().prefix("o2o-make-adroit-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = dir.path().join("pen-tiny");
    let o = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args([
            "dataset",
            "make-benchmark",
            "pen",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "4",
            "--transitions",
            "300",
            "--threads",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "make-benchmark pen failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let path = out.join("pen-scripted-v1.hdf5");
    let ds = D4rlDataset::read(&path).unwrap();
    assert_eq!((ds.len(), ds.obs_dim, ds.act_dim), (300, 45, 24));
    let (qpos, qvel, orien) = (&ds.infos["infos/qpos"], &ds.infos["infos/qvel"], &ds.infos["infos/desired_orien"]);
    assert_eq!(
        (qpos.shape.clone(), qvel.shape.clone(), orien.shape.clone()),
        (vec![300, 30], vec![300, 30], vec![300, 4])
    );
    let timeouts = ds.timeouts.as_ref().unwrap();
    assert_eq!((0..300).filter(|&i| timeouts[i] != 0.0).collect::<Vec<_>>(), vec![99, 199, 299]);
    assert!(ds.terminals.iter().all(|t| *t == 0.0), "the hold-pose controller does not drop the pen here");

    // Replay every episode from its seed with the file's actions: same observations, rewards, states.
    let mut env = o2o_envs::make("pen-v1").unwrap();
    let mut successes = 0;
    let mut total = 0.0;
    for k in 0..3usize {
        let mut obs = env.reset(Some(derive_seed(4, 1, k as u64))).unwrap();
        let mut success = false;
        for t in 0..100 {
            let i = k * 100 + t;
            assert_eq!(&obs[..], ds.obs(i), "row {i}: observation");
            assert_eq!(&obs[..24], &qpos.data[i * 30..i * 30 + 24], "row {i}: obs = qpos[..-6] first");
            assert_eq!(
                &orien.data[i * 4..i * 4 + 4],
                &orien.data[k * 400..k * 400 + 4],
                "row {i}: the target is the episode's"
            );
            let s = env.step(&ds.actions[i * 24..(i + 1) * 24]).unwrap();
            assert_eq!(s.reward as f32, ds.rewards[i], "row {i}: reward");
            assert_eq!(s.truncated, t == 99);
            success |= s.info.success == Some(true);
            total += s.reward;
            obs = s.obs;
        }
        successes += success as usize;
    }
    let m: Value = serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        (m["format"].as_str(), m["env"].as_str(), m["episodes"].as_u64()),
        (Some("o2o-benchmark-adroit/1"), Some("pen-v1"), Some(3))
    );
    assert_eq!(m["success_rate"].as_f64().unwrap(), successes as f64 / 3.0);
    assert!((m["mean_return"].as_f64().unwrap() - total / 3.0).abs() < 1e-6);
    let (sha, _) = o2o_datasets::download::hash_file(&path).unwrap();
    assert_eq!(m["sha256"].as_str(), Some(sha.as_str()));
}
