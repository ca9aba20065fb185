//! Minari reader and writer: a dataset written the way Minari's Python code writes it (h5py and
//! `json.dumps`, bare `Infinity` tokens included), our own round trip, D4RL ↔ Minari
//! conversion, and broken episodes.

use std::path::{Path, PathBuf};

use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{self, Dtype};
use o2o_datasets::minari::MinariDataset;
use o2o_datasets::DatasetError;

fn python() -> String {
    std::env::var("O2O_PYTHON").ok().or_else(|| option_env!("O2O_PYTHON").map(String::from)).expect(
        "O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml) so the venv python with h5py is known",
    )
}

/// Two episodes (T = 3 and 2) of a 4-d obs, 2-d action Box dataset, as Minari 0.5 writes it.
fn python_minari(dir: &Path) -> PathBuf {
    let root = dir.join("mujoco/toy/medium-v0");
    let script = r#"
import sys, os, json, h5py, numpy as np
root = sys.argv[1]
data = os.path.join(root, "data"); os.makedirs(data)
with h5py.File(os.path.join(data, "main_data.hdf5"), "w") as f:
    for k, T in enumerate([3, 2]):
        g = f.create_group(f"episode_{k}")
        g.attrs["id"] = k; g.attrs["seed"] = 123 + k; g.attrs["total_steps"] = T
        g.create_dataset("observations", data=np.arange((T + 1) * 4, dtype=np.float64).reshape(T + 1, 4) + 100 * k, maxshape=(None, 4), chunks=True)
        g.create_dataset("actions", data=np.full((T, 2), 0.5 * (k + 1), dtype=np.float32))
        g.create_dataset("rewards", data=np.arange(T, dtype=np.float64) + k)
        g.create_dataset("terminations", data=np.array([False] * (T - 1) + [k == 0]))
        g.create_dataset("truncations", data=np.array([False] * (T - 1) + [k == 1]))
space = lambda n, dt: json.dumps({"type": "Box", "dtype": dt, "shape": [n], "low": [-float("inf")] * n, "high": [float("inf")] * n})
meta = {"dataset_id": "mujoco/toy/medium-v0", "total_episodes": 2, "total_steps": 5, "data_format": "hdf5",
        "observation_space": space(4, "float64"), "action_space": space(2, "float32"),
        "env_spec": json.dumps({"id": "Toy-v5", "max_episode_steps": 1000}), "ref_min_score": -float("inf"),
        "ref_max_score": 1.5, "minari_version": "0.5.3", "author": ["o2o"], "requirements": ["mujoco==3.2.3"]}
with open(os.path.join(data, "metadata.json"), "w") as fh:
    fh.write(json.dumps(meta))
"#;
    let res = std::process::Command::new(python()).arg("-c").arg(script).arg(&root).output().unwrap();
    assert!(res.status.success(), "python fixture failed: {}", String::from_utf8_lossy(&res.stderr));
    assert!(std::fs::read_to_string(root.join("data/metadata.json")).unwrap().contains("-Infinity"));
    root
}

#[test]
fn reads_a_dataset_written_by_python_with_bare_infinity() {
    let dir = tempfile::tempdir().unwrap();
    let m = MinariDataset::read(&python_minari(dir.path())).unwrap();
    assert_eq!((m.obs_dim, m.act_dim, m.episodes.len(), m.total_steps()), (4, 2, 2, 5));
    assert_eq!(m.metadata["dataset_id"], "mujoco/toy/medium-v0");
    assert_eq!(m.dtypes["observations"], Dtype::Float64);
    let e0 = &m.episodes[0];
    assert_eq!(e0.observations.len(), 4 * 4, "T + 1 observations");
    assert_eq!(e0.observations[15], 15.0);
    assert_eq!((e0.seed, e0.id), (Some(123), 0));
    assert_eq!(e0.terminations, vec![0.0, 0.0, 1.0]);
    assert_eq!(m.episodes[1].truncations, vec![0.0, 1.0]);
    assert_eq!(m.episodes[1].rewards, vec![1.0, 2.0]);
}

#[test]
fn our_writer_round_trips_and_keeps_infinity_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let m = MinariDataset::read(&python_minari(dir.path())).unwrap();
    let out = dir.path().join("copy");
    m.write(&out).unwrap();
    let mut back = MinariDataset::read(&out).unwrap();
    back.source = m.source.clone();
    assert_eq!(back, m);
    let text = std::fs::read_to_string(out.join("data/metadata.json")).unwrap();
    assert!(text.contains("\"ref_min_score\":-Infinity"), "{text}");
    // Python's json module reads our metadata.json back (bare tokens are what it expects).
    let check = "import json,sys; m=json.load(open(sys.argv[1])); assert m['ref_min_score']==-float('inf'); assert json.loads(m['observation_space'])['high'][0]==float('inf'); print('OK')";
    let res =
        std::process::Command::new(python()).arg("-c").arg(check).arg(out.join("data/metadata.json")).output().unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
}

#[test]
fn minari_to_d4rl_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let m = MinariDataset::read(&python_minari(dir.path())).unwrap();
    let d = m.to_d4rl();
    assert_eq!(d.len(), 5);
    assert_eq!(d.terminals, vec![0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(d.timeouts.as_deref(), Some(&[0.0, 0.0, 0.0, 0.0, 1.0][..]));
    // next_observations of row 2 is episode 0's final observation s_3.
    assert_eq!(d.next_observations.as_ref().unwrap()[2 * 4..3 * 4], [12.0, 13.0, 14.0, 15.0]);
    let path = dir.path().join("d4rl.hdf5");
    d.write(&path).unwrap();
    let d2 = D4rlDataset::read(&path).unwrap();
    let m2 = MinariDataset::from_d4rl(&d2, "mujoco/toy/medium-v0", None);
    assert_eq!(m2.episodes.len(), 2);
    for (a, b) in m2.episodes.iter().zip(&m.episodes) {
        assert_eq!(
            (&a.observations, &a.actions, &a.rewards, &a.terminations, &a.truncations),
            (&b.observations, &b.actions, &b.rewards, &b.terminations, &b.truncations)
        );
    }
}

#[test]
fn d4rl_without_next_observations_drops_unknown_final_steps() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("am.hdf5");
    let f = o2o_datasets::h5util::create(&p).unwrap();
    let n = 5;
    h5util::write_column(&p, &f, "observations", &[n, 1], Dtype::Float32, &[0.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
    h5util::write_column(&p, &f, "actions", &[n, 1], Dtype::Float32, &[0.0; 5]).unwrap();
    h5util::write_column(&p, &f, "rewards", &[n], Dtype::Float32, &[1.0; 5]).unwrap();
    h5util::write_column(&p, &f, "terminals", &[n], Dtype::Float32, &[0.0, 1.0, 0.0, 0.0, 0.0]).unwrap();
    h5util::write_column(&p, &f, "timeouts", &[n], Dtype::Bool, &[0.0, 0.0, 0.0, 0.0, 1.0]).unwrap();
    drop(f);
    let d = D4rlDataset::read(&p).unwrap();
    let m = MinariDataset::from_d4rl(&d, "antmaze-umaze-v2", None);
    // Episode 0 (terminated): 2 steps, s_T repeated. Episode 1 (timeout): last step dropped.
    assert_eq!(m.episodes[0].observations, vec![0.0, 1.0, 1.0]);
    assert_eq!(m.episodes[1].observations, vec![2.0, 3.0, 4.0]);
    assert_eq!(m.episodes[1].truncations, vec![0.0, 1.0]);
    assert_eq!(m.metadata["ref_max_score"], 1.0);
}

#[test]
fn broken_episodes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = python_minari(dir.path());
    let h5 = root.join("data/main_data.hdf5");
    {
        let f = o2o_datasets::h5util::open_rw(&h5).unwrap();
        let g = f.group("episode_1").unwrap();
        g.unlink("observations").unwrap();
        // T observations instead of T + 1.
        h5util::write_column(&h5, &g, "observations", &[2, 4], Dtype::Float64, &[0.0; 8]).unwrap();
    }
    let err = MinariDataset::read(&root).unwrap_err();
    assert!(matches!(err, DatasetError::LengthMismatch { expected: 3, found: 2, .. }), "{err}");
    assert!(err.to_string().contains("episode_1/observations") && err.to_string().contains("main_data.hdf5"), "{err}");
    {
        let f = o2o_datasets::h5util::open_rw(&h5).unwrap();
        f.group("episode_1").unwrap().unlink("truncations").unwrap();
    }
    let err = MinariDataset::read(&root).unwrap_err();
    assert!(
        matches!(err, DatasetError::MissingKey { .. }) && err.to_string().contains("episode_1/truncations"),
        "{err}"
    );
    std::fs::write(root.join("data/metadata.json"), "{not json").unwrap();
    assert!(matches!(MinariDataset::read(&root), Err(DatasetError::BadMetadata { .. })));
}
