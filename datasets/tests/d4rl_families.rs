//! AntMaze v2 and Adroit v1 files as D4RL wrote them (formats.md §1.3–1.4), small and written
//! here, read through the registry entries of their ids; and the lookup of a user's files in
//! D4RL's own cache folder (issue #25).

use std::path::Path;

use o2o_datasets::d4rl::{BuildOptions, D4rlDataset};
use o2o_datasets::h5util::{self, Dtype};
use o2o_datasets::registry::lookup;
use o2o_datasets::scores::{normalized_score, RewardPreset};

/// An AntMaze v2 layout: float32 obs (N, 29) with qpos[:15] + qvel[:14], actions (N, 8) in
/// [−1, 1], sparse rewards whose 1s come in a cluster (episodes are not cut at the goal),
/// `terminals` float32 equal to the rewards, `timeouts` at the end of the first episode, no
/// `next_observations`, `infos/goal` / `infos/qpos` / `infos/qvel`.
fn write_antmaze(path: &Path, n: usize) {
    let f = h5util::create(path).unwrap();
    let obs: Vec<f32> = (0..n).flat_map(|i| (0..29).map(move |k| (i * 29 + k) as f32 * 1e-3)).collect();
    let act: Vec<f32> = (0..n * 8).map(|k| ((k % 17) as f32 / 8.0 - 1.0).clamp(-1.0, 1.0)).collect();
    let rew: Vec<f32> = (0..n).map(|i| if (6..9).contains(&i) { 1.0 } else { 0.0 }).collect();
    let timeouts: Vec<f32> = (0..n).map(|i| (i == 4) as u8 as f32).collect();
    h5util::write_column(path, &f, "observations", &[n, 29], Dtype::Float32, &obs).unwrap();
    h5util::write_column(path, &f, "actions", &[n, 8], Dtype::Float32, &act).unwrap();
    h5util::write_column(path, &f, "rewards", &[n], Dtype::Float32, &rew).unwrap();
    h5util::write_column(path, &f, "terminals", &[n], Dtype::Float32, &rew).unwrap();
    h5util::write_column(path, &f, "timeouts", &[n], Dtype::Bool, &timeouts).unwrap();
    h5util::write_column(path, &f, "infos/goal", &[n, 2], Dtype::Float32, &vec![0.75; 2 * n]).unwrap();
    h5util::write_column(path, &f, "infos/qpos", &[n, 15], Dtype::Float32, &vec![0.0; 15 * n]).unwrap();
    h5util::write_column(path, &f, "infos/qvel", &[n, 14], Dtype::Float32, &vec![0.0; 14 * n]).unwrap();
}

#[test]
fn antmaze_v2_file_checks_against_its_env_and_takes_the_reward_presets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("antmaze.hdf5");
    write_antmaze(&path, 10);
    let e = lookup("antmaze-umaze-v2").unwrap();
    assert_eq!((e.env_id.as_str(), e.family, e.max_episode_steps), ("antmaze-umaze-v2", "antmaze", 700));
    let d = D4rlDataset::read(&path).unwrap();
    d.check_env(&e.env_id, e.obs_dim, e.act_dim).unwrap();
    assert_eq!(d.infos["infos/goal"].shape, vec![10, 2]);
    assert_eq!(d.terminals, d.rewards, "the relabelled terminals equal the sparse rewards");
    // qlearning_dataset: the timeout row 4 and the last row 9 are skipped, the goal cluster kept.
    let t = d.qlearning_dataset(&BuildOptions::default()).unwrap();
    assert_eq!(t.len(), 8);
    assert_eq!(t.terminals, vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    // IQL/RLPD r − 1 and Cal-QL/CQL/WSRL 10r − 5 (algorithms.md §7.4); scores use raw rewards.
    let mut minus_one = t.rewards.clone();
    RewardPreset::from_name("antmaze-minus-one").unwrap().apply(&mut minus_one, &[]).unwrap();
    assert_eq!(minus_one, vec![-1.0, -1.0, -1.0, -1.0, -1.0, 0.0, 0.0, 0.0]);
    let mut calql = t.rewards.clone();
    RewardPreset::from_name("calql-antmaze").unwrap().apply(&mut calql, &[]).unwrap();
    assert_eq!(calql, vec![-5.0, -5.0, -5.0, -5.0, -5.0, 5.0, 5.0, 5.0]);
    assert_eq!(normalized_score("antmaze", 1.0).unwrap(), 100.0);
    // The wrong env is named with expected vs found.
    let err = d.check_env("door-v1", 39, 28).unwrap_err().to_string();
    assert!(err.contains("door-v1") && err.contains("39") && err.contains("29"), "{err}");
}

#[test]
fn adroit_human_file_keeps_its_infos_and_maps_to_the_task_env() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("door-human-v1.hdf5");
    let n = 6;
    let f = h5util::create(&path).unwrap();
    let timeouts: Vec<f32> = (0..n).map(|i| (i == 2 || i == 5) as u8 as f32).collect();
    h5util::write_column(&path, &f, "observations", &[n, 39], Dtype::Float32, &vec![0.1; 39 * n]).unwrap();
    h5util::write_column(&path, &f, "actions", &[n, 28], Dtype::Float32, &vec![0.2; 28 * n]).unwrap();
    h5util::write_column(&path, &f, "rewards", &[n], Dtype::Float32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    h5util::write_column(&path, &f, "terminals", &[n], Dtype::Bool, &vec![0.0; n]).unwrap();
    h5util::write_column(&path, &f, "timeouts", &[n], Dtype::Bool, &timeouts).unwrap();
    h5util::write_column(&path, &f, "infos/qpos", &[n, 30], Dtype::Float32, &vec![0.3; 30 * n]).unwrap();
    h5util::write_column(&path, &f, "infos/qvel", &[n, 30], Dtype::Float32, &vec![0.0; 30 * n]).unwrap();
    h5util::write_column(&path, &f, "infos/door_body_pos", &[n, 3], Dtype::Float32, &vec![-0.25; 3 * n]).unwrap();
    drop(f);
    let e = lookup("door-human-v1").unwrap();
    assert_eq!((e.env_id.as_str(), e.family, e.max_episode_steps), ("door-v1", "door", 200));
    assert_eq!(lookup("pen-expert-v1").unwrap().max_episode_steps, 100);
    let d = D4rlDataset::read(&path).unwrap();
    d.check_env(&e.env_id, e.obs_dim, e.act_dim).unwrap();
    assert_eq!(d.infos["infos/qpos"].shape, vec![n, 30]);
    assert_eq!(d.infos["infos/door_body_pos"].data[0], -0.25);
    // Human demos: timeouts on each demo's last step, no terminals; two demos of 3.
    assert_eq!(d.episode_returns(None), vec![6.0, 15.0]);
    assert_eq!(d.qlearning_dataset(&BuildOptions::default()).unwrap().rewards, vec![1.0, 2.0, 4.0, 5.0]);
}

/// The only test here that sets environment variables (tests in one binary share them).
#[test]
fn registry_files_are_found_in_d4rls_own_cache() {
    let ours = tempfile::tempdir().unwrap();
    let theirs = tempfile::tempdir().unwrap();
    std::env::set_var("O2O_DATASETS", ours.path());
    std::env::set_var("D4RL_DATASET_DIR", theirs.path());
    let name = lookup("antmaze-umaze-v2").unwrap().file_name().to_string();
    assert_eq!(name, "Ant_maze_u-maze_noisy_multistart_False_multigoal_False_sparse_fixed.hdf5");
    let (p, found) = o2o_datasets::download::cached_file(None, &name);
    assert!(!found && p == ours.path().join(&name), "{p:?}");
    write_antmaze(&theirs.path().join(&name), 5);
    assert_eq!(o2o_datasets::download::cached_file(None, &name), (theirs.path().join(&name), true));
    write_antmaze(&ours.path().join(&name), 5);
    assert_eq!(
        o2o_datasets::download::cached_file(None, &name),
        (ours.path().join(&name), true),
        "o2o's own cache comes first"
    );
}
