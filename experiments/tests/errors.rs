//! Issue 48 item 4: the library's errors are an `o2o_experiments::Error` a caller can match —
//! each variant made here by a real case (a damaged checkpoint, a bad dataset file, an unknown
//! key, a directory that is not a run, a run in use, an unknown env, a checkpoint of other
//! sizes) — and each prints the lines it printed as an `anyhow` error.

use o2o_agents::AgentError;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::DatasetError;
use o2o_envs::EnvError;
use o2o_experiments::run::prepare::load_checkpoint_agent;
use o2o_experiments::run::rundir::RunLock;
use o2o_experiments::{Error, Run, RunConfig};
use std::path::{Path, PathBuf};
use tch::Device;

/// Offline IQL with small networks on InvertedPendulum-v5; its data comes from `Run::dataset`
/// (or, set so, `dataset.path`).
const CONFIG: &str = r#"
algo = "iql"
env = "InvertedPendulum-v5"
[dataset]
in_memory = true
reward = "none"
transitions = "corrected"
[train]
batch_size = 32
log_every = 10
[eval]
every = 20
episodes = 1
[checkpoint]
every = 20
[agent]
expectile = 0.7
beta = 3.0
actor_lr_decay_steps = 0
critic = { hidden = [16, 16] }
value = { hidden = [16, 16] }
actor = { mlp = { hidden = [16, 16] } }
"#;

fn data_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/inverted-pendulum-sac-replay.hdf5")
}

fn iql<'a>(runs: &Path) -> Run<'a> {
    Run::from_toml_str("iql-errors", CONFIG).unwrap().runs_dir(runs).device(Device::Cpu)
}

/// Every line `err` prints, the message first: what the `o2o` command line shows.
fn lines(err: &dyn std::error::Error) -> Vec<String> {
    std::iter::successors(Some(err), |e| e.source()).map(|e| e.to_string()).collect()
}

/// A run of in-memory data stopped by its callback right after its first checkpoint (step 20):
/// its directory and the data.
fn stopped_run(runs: &Path) -> (PathBuf, D4rlDataset) {
    let data = D4rlDataset::read(&data_file()).unwrap();
    let mut dir = None;
    let err = iql(runs)
        .dataset(data.clone())
        .unwrap()
        .on_checkpoint(|ckpt, _| {
            dir = ckpt.parent().and_then(Path::parent).map(Path::to_path_buf);
            anyhow::bail!("stopping at {}", ckpt.display())
        })
        .fit(40)
        .unwrap_err();
    // A callback's own error is none of the library's kinds, and keeps its text.
    assert!(matches!(&err, Error::Other(_)), "{err:?}");
    assert!(err.to_string().starts_with("stopping at "), "{err}");
    (dir.expect("the run wrote a checkpoint"), data)
}

#[test]
fn checkpoints_and_run_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, data) = stopped_run(tmp.path());
    let ckpt = dir.join("checkpoints/step-0000000020");
    assert!(ckpt.join("agent.ot").is_file());

    // Not a run: the directory is named, and the message is the one it always was.
    let nowhere = tmp.path().join("nowhere");
    match Run::resume(&nowhere) {
        Err(Error::RunDir { path, reason, .. }) => {
            assert_eq!(path, nowhere);
            assert!(reason.contains("config.toml"), "{reason}");
        }
        other => panic!("{:?}", other.err()),
    }
    let err = load_checkpoint_agent(&nowhere, None, None, Device::Cpu).err().unwrap();
    assert!(matches!(&err, Error::RunDir { .. }), "{err:?}");
    let text = lines(&err);
    assert_eq!(text[0], format!("{} is not a run directory", nowhere.display()));
    assert!(text[1].starts_with("cannot read ") && text.len() == 3, "{text:?}");

    // A resumed run takes no overrides; a checkpoint it does not have.
    let err = Run::resume(&dir).unwrap().set(["seed=3"]).err().unwrap();
    assert!(matches!(&err, Error::BadConfig { .. }), "{err:?}");
    let err = Run::resume(&dir).unwrap().from_checkpoint("step-999").dataset(data.clone()).unwrap().run().unwrap_err();
    assert!(matches!(&err, Error::RunDir { path, .. } if *path == dir), "{err:?}");
    assert!(err.to_string().contains("no such complete checkpoint"), "{err}");

    // Another process's run: refused, naming the holder.
    let held = RunLock::acquire(&dir).unwrap();
    let err = Run::resume(&dir).unwrap().dataset(data.clone()).unwrap().run().unwrap_err();
    match &err {
        Error::RunInUse { path, holder, .. } => assert!(*path == dir && holder.starts_with("pid "), "{err:?}"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("is in use by pid"), "{err}");
    drop(held);

    // The checkpoint loaded into an agent of other sizes: the agent's own error.
    let other_env = o2o_envs::make("Hopper-v5").unwrap();
    let err = load_checkpoint_agent(&dir, None, Some(other_env), Device::Cpu).err().unwrap();
    assert!(matches!(&err, Error::Agent { error: AgentError::ShapeMismatch { .. }, .. }), "{err:?}");

    // A truncated agent file: a damaged checkpoint, named.
    let agent = ckpt.join("agent.ot");
    let bytes = std::fs::read(&agent).unwrap();
    std::fs::write(&agent, &bytes[..bytes.len() / 3]).unwrap();
    let err = load_checkpoint_agent(&dir, None, None, Device::Cpu).err().unwrap();
    match &err {
        Error::DamagedCheckpoint { path, reason, .. } => {
            assert_eq!(*path, ckpt);
            assert!(reason.contains("agent.ot") && !reason.contains("frame #"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.to_string(), format!("loading the agent from {}", agent.display()));
    // Resumed: the damaged checkpoint is moved aside, and with the in-memory data spent on the
    // attempt the resume stops, naming it.
    let err = Run::resume(&dir).unwrap().dataset(data).unwrap().run().unwrap_err();
    assert!(matches!(&err, Error::DamagedCheckpoint { path, .. } if *path == ckpt), "{err:?}");
    assert!(err.to_string().contains("is damaged") && !ckpt.exists(), "{err}");
}

#[test]
fn configs_datasets_and_envs() {
    let tmp = tempfile::tempdir().unwrap();
    // An unknown key in an override, a preset that does not exist, text that is not TOML.
    let err = iql(tmp.path()).set(["train.no_such_key=1"]).err().unwrap();
    match &err {
        Error::BadConfig { origin, message, .. } => {
            assert_eq!(origin, "config iql-errors");
            assert!(message.contains("no_such_key"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(Run::preset("no-such-preset"), Err(Error::BadConfig { .. })));
    let err = RunConfig::from_toml_str("algo = ", "inline text").unwrap_err();
    assert!(matches!(&err, Error::BadConfig { origin, .. } if origin == "inline text"), "{err:?}");
    assert!(format!("{err:#}").starts_with("inline text is not valid TOML: "), "{err:#}");

    // A file that is not HDF5: the dataset reader's error, its file named.
    let bad = tmp.path().join("bad.hdf5");
    std::fs::write(&bad, b"not an hdf5 file").unwrap();
    let from_file = |path: &str| ["dataset.in_memory=false".to_string(), format!("dataset.path={path:?}")];
    let err = iql(tmp.path()).set(from_file(&bad.display().to_string())).unwrap().fit(10).unwrap_err();
    match &err {
        Error::BadDataset { path, error, .. } => {
            assert_eq!(path.as_deref(), Some(bad.as_path()));
            assert!(matches!(error, Some(DatasetError::Corrupt { .. })), "{error:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(format!("{err:#}").contains("bad.hdf5"), "{err:#}");
    // A relative path to no file; in-memory data the config asks for but is not given.
    let err = iql(tmp.path()).set(from_file("no-such-file.hdf5")).unwrap().fit(10).unwrap_err();
    assert!(matches!(&err, Error::BadDataset { error: None, .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-file.hdf5 does not exist"), "{err}");
    let err = iql(tmp.path()).fit(10).unwrap_err();
    assert!(matches!(&err, Error::BadDataset { path: None, .. }), "{err:?}");

    // An env id the registry does not know: the env's own error.
    let data = D4rlDataset::read(&data_file()).unwrap();
    let err = iql(tmp.path()).set(["env=\"Nope-v0\""]).unwrap().dataset(data).unwrap().fit(10).unwrap_err();
    assert!(matches!(&err, Error::Env { error: EnvError::UnknownId { id, .. }, .. } if id == "Nope-v0"), "{err:?}");
    // None of these left a run directory behind.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
