//! D4RL reader, writer and transition builders on small files written here, in each variant of
//! formats.md §1, plus one deliberately broken file per validation error.

use std::path::{Path, PathBuf};

use o2o_datasets::d4rl::{BuildOptions, D4rlDataset, MetaValue};
use o2o_datasets::h5util::{self, Dtype};
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::DatasetError;

const N: usize = 7;
const OD: usize = 3;
const AD: usize = 2;

/// Row i: obs = [i, i + 0.5, −i], action = [0.1 i, −0.1 i], reward = i + 1.
/// Episodes: rows 0–2 end by timeout, rows 3–4 end by termination, rows 5–6 trail unflagged.
fn obs() -> Vec<f32> {
    (0..N).flat_map(|i| [i as f32, i as f32 + 0.5, -(i as f32)]).collect()
}
fn next_obs() -> Vec<f32> {
    (0..N).flat_map(|i| [i as f32 + 100.0, 0.0, 0.0]).collect()
}
fn actions() -> Vec<f32> {
    (0..N).flat_map(|i| [0.1 * i as f32, -0.1 * i as f32]).collect()
}
fn rewards() -> Vec<f32> {
    (0..N).map(|i| i as f32 + 1.0).collect()
}
const TERMINALS: [bool; N] = [false, false, false, false, true, false, false];
const TIMEOUTS: [bool; N] = [false, false, true, false, false, false, false];

struct Variant {
    f64: bool,
    bool_flags: bool,
    next_obs: bool,
    timeouts: bool,
    rewards_n1: bool,
}

const GYM: Variant = Variant { f64: false, bool_flags: true, next_obs: true, timeouts: true, rewards_n1: false };
const ANTMAZE: Variant = Variant { f64: true, bool_flags: false, next_obs: false, timeouts: true, rewards_n1: true };

fn write_fixture(path: &Path, v: &Variant) {
    let f = o2o_datasets::h5util::create(path).unwrap();
    let fl = if v.f64 { Dtype::Float64 } else { Dtype::Float32 };
    let flag = |x: &[bool]| x.iter().map(|&b| b as u8 as f32).collect::<Vec<_>>();
    let fd = if v.bool_flags { Dtype::Bool } else { Dtype::Float32 };
    h5util::write_column(path, &f, "observations", &[N, OD], fl, &obs()).unwrap();
    h5util::write_column(path, &f, "actions", &[N, AD], fl, &actions()).unwrap();
    let rshape: &[usize] = if v.rewards_n1 { &[N, 1] } else { &[N] };
    h5util::write_column(path, &f, "rewards", rshape, fl, &rewards()).unwrap();
    h5util::write_column(path, &f, "terminals", &[N], fd, &flag(&TERMINALS)).unwrap();
    if v.timeouts {
        h5util::write_column(path, &f, "timeouts", &[N], fd, &flag(&TIMEOUTS)).unwrap();
    }
    if v.next_obs {
        h5util::write_column(path, &f, "next_observations", &[N, OD], fl, &next_obs()).unwrap();
    }
    h5util::write_column(path, &f, "infos/qpos", &[N, 2], fl, &vec![0.25; 2 * N]).unwrap();
    h5util::write_string(path, &f, "metadata/algorithm", "SAC").unwrap();
    h5util::write_scalar(path, &f, "metadata/iteration", &42i32).unwrap();
    h5util::write_column(path, &f, "metadata/policy/fc0/weight", &[4, OD], Dtype::Float32, &vec![0.5; 4 * OD]).unwrap();
}

fn fixture(dir: &Path, name: &str, v: &Variant) -> PathBuf {
    let p = dir.join(name);
    write_fixture(&p, v);
    p
}

#[test]
fn reads_gym_mujoco_variant_float32_bool_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "gym.hdf5", &GYM)).unwrap();
    assert_eq!((d.len(), d.obs_dim, d.act_dim), (N, OD, AD));
    assert_eq!(d.observations, obs());
    assert_eq!(d.actions, actions());
    assert_eq!(d.rewards, rewards());
    assert_eq!(d.terminals, vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(d.timeouts.as_deref(), Some(&[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0][..]));
    assert_eq!(d.next_observations.as_deref(), Some(&next_obs()[..]));
    assert_eq!(d.dtypes["observations"], Dtype::Float32);
    assert_eq!(d.dtypes["terminals"], Dtype::Bool);
    assert_eq!(d.infos["infos/qpos"].shape, vec![N, 2]);
    assert_eq!(d.metadata["metadata/algorithm"], MetaValue::Str("SAC".into()));
    match &d.metadata["metadata/iteration"] {
        MetaValue::Array(c) => assert_eq!((c.dtype, c.data.clone(), c.shape.len()), (Dtype::Int32, vec![42.0], 0)),
        other => panic!("{other:?}"),
    }
    assert!(d.metadata.contains_key("metadata/policy/fc0/weight"));
    let eps = d.episodes(None);
    assert_eq!(eps.iter().map(|e| e.rows.clone()).collect::<Vec<_>>(), vec![0..3, 3..5, 5..7]);
    assert!(eps[0].truncated && !eps[0].terminated);
    assert!(eps[1].terminated && !eps[1].truncated);
    assert!(!eps[2].terminated && !eps[2].truncated);
    assert_eq!(d.episode_returns(None), vec![6.0, 9.0, 13.0]);
    assert!(d.warnings().iter().any(|w| w.contains("neither")));
}

#[test]
fn reads_antmaze_variant_float64_float_flags_no_next_obs() {
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "antmaze.hdf5", &ANTMAZE)).unwrap();
    assert_eq!(d.observations, obs());
    assert_eq!(d.rewards, rewards(), "(N, 1) rewards are squeezed");
    assert_eq!(d.dtypes["observations"], Dtype::Float64);
    assert_eq!(d.dtypes["terminals"], Dtype::Float32);
    assert_eq!(d.terminals[4], 1.0);
    assert!(d.next_observations.is_none());
}

#[test]
fn qlearning_dataset_reproduces_d4rl_quirks() {
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "gym.hdf5", &GYM)).unwrap();
    let t = d.qlearning_dataset(&BuildOptions::default()).unwrap();
    // Row 2 (timeout) skipped, row 6 (last row) dropped; next_obs from the following row even
    // though next_observations exists; the terminal row's s' is the next episode's first obs.
    assert_eq!(t.rewards, vec![1.0, 2.0, 4.0, 5.0, 6.0]);
    assert_eq!(t.terminals, vec![0.0, 0.0, 0.0, 1.0, 0.0]);
    assert_eq!(t.next_observations[..3], obs()[3..6]);
    assert_eq!(t.next_observations[3 * OD..4 * OD], obs()[5 * OD..6 * OD]);
    // Without timeouts, the step counter (max_episode_steps = 3) finds the same rows.
    let mut no_to = d.clone();
    no_to.timeouts = None;
    let t2 = no_to.qlearning_dataset(&BuildOptions { max_episode_steps: Some(3), mc: None }).unwrap();
    assert_eq!(t2.rewards, t.rewards);
    // MC returns per episode of kept rows, γ = 0.5: [1, 2] | [4, 5] | [6].
    let t3 = d.qlearning_dataset(&BuildOptions { max_episode_steps: None, mc: Some(McConfig::dense(0.5)) }).unwrap();
    assert_eq!(t3.mc_returns.unwrap(), vec![2.0, 2.0, 6.5, 5.0, 6.0]);
}

#[test]
fn corrected_builder_keeps_rows_with_a_true_next_state() {
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "gym.hdf5", &GYM)).unwrap();
    let t = d.corrected_transitions(&BuildOptions::default()).unwrap();
    assert_eq!(t.len(), N, "with next_observations every row is kept");
    assert_eq!(t.next_observations, next_obs());
    assert_eq!(t.episode_ends, vec![0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    let a = D4rlDataset::read(&fixture(dir.path(), "antmaze.hdf5", &ANTMAZE)).unwrap();
    let t = a.corrected_transitions(&BuildOptions { max_episode_steps: None, mc: Some(McConfig::dense(0.5)) }).unwrap();
    // No next_observations: the timeout row 2 and the last row 6 have no known s'.
    assert_eq!(t.rewards, vec![1.0, 2.0, 4.0, 5.0, 6.0]);
    assert_eq!(t.next_observations[3 * OD..4 * OD], obs()[5 * OD..6 * OD]);
    assert_eq!(t.mc_returns.unwrap(), vec![2.0, 2.0, 6.5, 5.0, 6.0]);
}

#[test]
fn writer_round_trips_keys_values_and_dtypes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, v) in [("gym.hdf5", GYM), ("antmaze.hdf5", ANTMAZE)] {
        let d = D4rlDataset::read(&fixture(dir.path(), name, &v)).unwrap();
        let out = dir.path().join(format!("out_{name}"));
        d.write(&out).unwrap();
        let mut back = D4rlDataset::read(&out).unwrap();
        back.source = d.source.clone();
        assert_eq!(back, d, "{name}");
    }
    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "temp file left: {names:?}");
}

#[test]
fn venv_h5py_reads_our_d4rl_file_as_d4rl_code_expects() {
    let python = std::env::var("O2O_PYTHON").or_else(|_| option_env!("O2O_PYTHON").map(String::from).ok_or(())).expect(
        "O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml) so the venv python with h5py is known",
    );
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "gym.hdf5", &GYM)).unwrap();
    let out = dir.path().join("ours.hdf5");
    d.write(&out).unwrap();
    let script = r#"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
keys = []
f.visititems(lambda k, v: keys.append(k) if isinstance(v, h5py.Dataset) else None)
expect = {"observations": ((7, 3), np.float32), "actions": ((7, 2), np.float32), "rewards": ((7,), np.float32),
          "terminals": ((7,), np.bool_), "timeouts": ((7,), np.bool_), "next_observations": ((7, 3), np.float32),
          "infos/qpos": ((7, 2), np.float32)}
for k, (shape, dt) in expect.items():
    assert f[k].shape == shape, (k, f[k].shape)
    assert f[k].dtype == dt, (k, f[k].dtype)
assert f["terminals"][4] == True and f["timeouts"][2] == True and int(f["terminals"][:].sum()) == 1
assert np.allclose(f["observations"][6], [6, 6.5, -6])
alg = f["metadata/algorithm"][()]
assert (alg.decode() if isinstance(alg, bytes) else alg) == "SAC", alg
assert int(f["metadata/iteration"][()]) == 42
print("OK", sorted(keys))
"#;
    let res = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success() && stdout.starts_with("OK"),
        "h5py check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
}

#[test]
fn gzip_writer_round_trips_and_h5py_sees_the_filters() {
    let python = std::env::var("O2O_PYTHON").or_else(|_| option_env!("O2O_PYTHON").map(String::from).ok_or(())).expect(
        "O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml) so the venv python with h5py is known",
    );
    let dir = tempfile::tempdir().unwrap();
    let d = D4rlDataset::read(&fixture(dir.path(), "gym.hdf5", &GYM)).unwrap();
    let out = dir.path().join("gz.hdf5");
    d.write_gzip(&out, Some(4)).unwrap();
    let mut back = D4rlDataset::read(&out).unwrap();
    back.source = d.source.clone();
    assert_eq!(back, d);
    let script = r#"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
for k in ["observations", "actions", "rewards", "terminals", "timeouts", "next_observations", "infos/qpos"]:
    assert f[k].compression == "gzip" and f[k].compression_opts == 4 and f[k].shuffle, (k, f[k].compression, f[k].shuffle)
assert f["metadata/iteration"].compression is None
print("OK")
"#;
    let res = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success() && stdout.starts_with("OK"),
        "h5py check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
}

// ---- one deliberately broken file per validation error ----

fn broken(dir: &Path, name: &str, edit: impl FnOnce(&hdf5_metno::File, &Path)) -> PathBuf {
    let p = fixture(dir, name, &GYM);
    let f = o2o_datasets::h5util::open_rw(&p).unwrap();
    edit(&f, &p);
    drop(f);
    p
}

fn names(err: &DatasetError, path: &Path, key: &str) {
    let msg = err.to_string();
    assert!(msg.contains(path.to_str().unwrap()), "message does not name the file: {msg}");
    assert!(msg.contains(key), "message does not name `{key}`: {msg}");
}

#[test]
fn truncated_file_is_a_corrupt_file_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "t.hdf5", &GYM);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let err = D4rlDataset::read(&p).unwrap_err();
    assert!(matches!(err, DatasetError::Corrupt { .. }), "{err}");
    names(&err, &p, "truncated");
}

#[test]
fn garbage_file_is_a_corrupt_file_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.hdf5");
    std::fs::write(&p, b"this is not an HDF5 file at all").unwrap();
    assert!(matches!(D4rlDataset::read(&p), Err(DatasetError::Corrupt { .. })));
    assert!(matches!(D4rlDataset::read(&dir.path().join("absent.hdf5")), Err(DatasetError::Io { .. })));
}

#[test]
fn missing_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = broken(dir.path(), "m.hdf5", |f, _| f.unlink("actions").unwrap());
    let err = D4rlDataset::read(&p).unwrap_err();
    assert!(matches!(err, DatasetError::MissingKey { .. }), "{err}");
    names(&err, &p, "actions");
}

#[test]
fn keys_of_different_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let p = broken(dir.path(), "l.hdf5", |f, p| {
        f.unlink("rewards").unwrap();
        h5util::write_column(p, f, "rewards", &[N - 2], Dtype::Float32, &vec![1.0; N - 2]).unwrap();
    });
    let err = D4rlDataset::read(&p).unwrap_err();
    match &err {
        DatasetError::LengthMismatch { expected, found, .. } => assert_eq!((*expected, *found), (N, N - 2)),
        other => panic!("{other}"),
    }
    names(&err, &p, "rewards");
}

#[test]
fn wrong_rank() {
    let dir = tempfile::tempdir().unwrap();
    let p = broken(dir.path(), "r.hdf5", |f, p| {
        f.unlink("observations").unwrap();
        h5util::write_column(p, f, "observations", &[N * OD], Dtype::Float32, &obs()).unwrap();
    });
    let err = D4rlDataset::read(&p).unwrap_err();
    assert!(matches!(err, DatasetError::WrongShape { .. }), "{err}");
    names(&err, &p, "observations");
    assert!(err.to_string().contains("rank 2"));
}

#[test]
fn nan_and_infinite_values() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bad) in [("nan.hdf5", f32::NAN), ("inf.hdf5", f32::INFINITY)] {
        let p = broken(dir.path(), name, |f, p| {
            f.unlink("actions").unwrap();
            let mut a = actions();
            a[2 * AD + 1] = bad;
            h5util::write_column(p, f, "actions", &[N, AD], Dtype::Float32, &a).unwrap();
        });
        let err = D4rlDataset::read(&p).unwrap_err();
        match &err {
            DatasetError::NonFinite { row, column, .. } => assert_eq!((*row, *column), (2, 1)),
            other => panic!("{other}"),
        }
        names(&err, &p, "actions");
    }
}

#[test]
fn string_where_numbers_belong() {
    let dir = tempfile::tempdir().unwrap();
    let p = broken(dir.path(), "s.hdf5", |f, p| {
        f.unlink("rewards").unwrap();
        h5util::write_string(p, f, "rewards", "oops").unwrap();
    });
    let err = D4rlDataset::read(&p).unwrap_err();
    assert!(matches!(err, DatasetError::WrongDtype { .. }), "{err}");
    names(&err, &p, "rewards");
}

#[test]
fn observation_size_that_does_not_fit_the_env() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture(dir.path(), "e.hdf5", &GYM);
    let d = D4rlDataset::read(&p).unwrap();
    let e = o2o_datasets::registry::lookup("hopper-medium-v2").unwrap();
    let err = d.check_env(&e.env_id, e.obs_dim, e.act_dim).unwrap_err();
    match &err {
        DatasetError::EnvMismatch { expected, found, .. } => assert_eq!((*expected, *found), (11, 3)),
        other => panic!("{other}"),
    }
    names(&err, &p, "observations");
    assert!(err.to_string().contains("hopper-v2"));
}

/// Kitchen v0 layout: float32 terminals, no `timeouts`, no `next_observations`, and `infos` a
/// plain (N,) integer dataset rather than a group.
#[test]
fn kitchen_variant_and_the_step_counter_quirk() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("kitchen.hdf5");
    let n = 8;
    {
        let f = o2o_datasets::h5util::create(&p).unwrap();
        h5util::write_column(
            &p,
            &f,
            "observations",
            &[n, 1],
            Dtype::Float32,
            &(0..n).map(|i| i as f32).collect::<Vec<_>>(),
        )
        .unwrap();
        h5util::write_column(&p, &f, "actions", &[n, 1], Dtype::Float32, &vec![0.0; n]).unwrap();
        h5util::write_column(&p, &f, "rewards", &[n], Dtype::Float32, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
            .unwrap();
        let mut term = vec![0.0; n];
        term[1] = 1.0;
        h5util::write_column(&p, &f, "terminals", &[n], Dtype::Float32, &term).unwrap();
        h5util::write_column(&p, &f, "infos", &[n], Dtype::Int64, &[0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]).unwrap();
    }
    let d = D4rlDataset::read(&p).unwrap();
    assert!(d.timeouts.is_none() && d.next_observations.is_none());
    assert_eq!(d.infos["infos"].data, vec![0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    let opts = BuildOptions { max_episode_steps: Some(3), mc: None };
    // D4RL's counter restarts at 0 on the terminal row 1 and is then incremented, so the next
    // episode's "final" step (counter == 2) is row 3, not row 4; row 6 is final too; row 7 is
    // the dropped last row.
    assert_eq!(d.qlearning_dataset(&opts).unwrap().rewards, vec![0.0, 1.0, 2.0, 4.0, 5.0]);
    // Corrected: episodes 0–1 (terminated), 2–4 and 5–7 (3-step time limit); the last row of a
    // time-limited episode has no known s' and is dropped.
    let eps = d.episodes(Some(3));
    assert_eq!(eps.iter().map(|e| e.rows.clone()).collect::<Vec<_>>(), vec![0..2, 2..5, 5..8]);
    assert_eq!(d.corrected_transitions(&opts).unwrap().rewards, vec![0.0, 1.0, 2.0, 3.0, 5.0, 6.0]);
    // The writer keeps the layout: infos stays a plain int64 dataset, terminals stay float32.
    let out = dir.path().join("kitchen_out.hdf5");
    d.write(&out).unwrap();
    let back = D4rlDataset::read(&out).unwrap();
    assert_eq!((back.infos["infos"].dtype, back.dtypes["terminals"]), (Dtype::Int64, Dtype::Float32));
}

/// A file written the way D4RL's own scripts write theirs: h5py, gzip compression, bool flags,
/// `metadata/algorithm` as fixed-length bytes (`np.string_`), an int32 iteration, policy weights.
#[test]
fn reads_a_gzip_file_written_like_d4rl_by_h5py() {
    let python = std::env::var("O2O_PYTHON").or_else(|_| option_env!("O2O_PYTHON").map(String::from).ok_or(())).expect(
        "O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml) so the venv python with h5py is known",
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hopper_medium-v2.hdf5");
    let script = r#"
import sys, h5py, numpy as np
n = 1500
with h5py.File(sys.argv[1], "w") as f:
    kw = dict(compression="gzip")
    f.create_dataset("observations", data=np.arange(n * 11, dtype=np.float32).reshape(n, 11), **kw)
    f.create_dataset("next_observations", data=np.arange(n * 11, dtype=np.float32).reshape(n, 11) + 11, **kw)
    f.create_dataset("actions", data=np.full((n, 3), 0.5, np.float32), **kw)
    f.create_dataset("rewards", data=np.ones(n, np.float32), **kw)
    term = np.zeros(n, bool); term[1200] = True
    to = np.zeros(n, bool); to[999] = True
    f.create_dataset("terminals", data=term, **kw)
    f.create_dataset("timeouts", data=to, **kw)
    f.create_dataset("infos/qpos", data=np.zeros((n, 6), np.float32), **kw)
    f.create_dataset("infos/action_log_probs", data=np.full(n, -1.5, np.float32), **kw)
    f.create_dataset("metadata/algorithm", data=np.bytes_("SAC"))
    f.create_dataset("metadata/iteration", data=np.int32(7))
    f.create_dataset("metadata/policy/fc0/weight", data=np.ones((256, 11), np.float32))
    f.create_dataset("metadata/policy/nonlinearity", data=np.bytes_("relu"))
"#;
    let res = std::process::Command::new(&python).arg("-c").arg(script).arg(&p).output().unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let d = D4rlDataset::read(&p).unwrap();
    assert_eq!((d.len(), d.obs_dim, d.act_dim), (1500, 11, 3));
    assert_eq!(d.observations[1499 * 11 + 10], (1500 * 11 - 1) as f32);
    assert_eq!(d.metadata["metadata/algorithm"], MetaValue::Str("SAC".into()));
    assert_eq!(d.metadata["metadata/policy/nonlinearity"], MetaValue::Str("relu".into()));
    assert_eq!(d.infos["infos/action_log_probs"].data[0], -1.5);
    let eps = d.episodes(None);
    assert_eq!(eps.iter().map(|e| e.rows.clone()).collect::<Vec<_>>(), vec![0..1000, 1000..1201, 1201..1500]);
    let e = o2o_datasets::registry::lookup_file("hopper_medium-v2.hdf5").unwrap();
    d.check_env(&e.env_id, e.obs_dim, e.act_dim).unwrap();
    // qlearning_dataset: 1500 rows − the timeout row − the last row.
    assert_eq!(d.qlearning_dataset(&BuildOptions::default()).unwrap().len(), 1498);
}
