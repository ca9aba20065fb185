//! `o2o dataset make-benchmark` at a tiny scale (a few seconds): four D4RL-format files that our
//! reader accepts, holding the states their observations came from, with the sizes, returns and
//! checksums the manifest records, and the medium snapshot chosen by the documented rule.
//! (A tiny SAC budget guarantees no ordering of the returns, so none is asserted.)

use o2o_datasets::d4rl::{D4rlDataset, MetaValue};
use o2o_datasets::h5util::Dtype;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn o2o(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o")).args(args).output().expect("run o2o");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

const ROWS: usize = 2500;

/// Hopper's observation is qpos[1:] followed by clip(qvel, −10, 10): each row's recorded state
/// must be the one its observation was taken in.
fn check_states(ds: &D4rlDataset, name: &str) {
    let (qpos, qvel) = (&ds.infos["infos/qpos"], &ds.infos["infos/qvel"]);
    assert_eq!((qpos.shape.clone(), qvel.shape.clone()), (vec![ds.len(), 6], vec![ds.len(), 6]), "{name}");
    for i in 0..ds.len() {
        let o = ds.obs(i);
        assert_eq!(&o[..5], &qpos.data[i * 6 + 1..i * 6 + 6], "{name} row {i}: obs vs qpos");
        let v: Vec<f32> = qvel.data[i * 6..i * 6 + 6].iter().map(|v| v.clamp(-10.0, 10.0)).collect();
        assert_eq!(&o[5..], &v[..], "{name} row {i}: obs vs qvel");
    }
}

/// Within an episode, next_observations[i] is observations[i + 1]; flags are exclusive.
fn check_continuity(ds: &D4rlDataset, name: &str) {
    let (t, n) = (ds.timeouts.as_ref().unwrap(), ds.next_observations.as_ref().unwrap());
    for i in 0..ds.len() {
        assert!(!(ds.terminals[i] != 0.0 && t[i] != 0.0), "{name} row {i}: both flags");
        if i + 1 < ds.len() && ds.terminals[i] == 0.0 && t[i] == 0.0 {
            assert_eq!(&n[i * 11..(i + 1) * 11], ds.obs(i + 1), "{name} row {i}");
        }
    }
}

#[test]
fn make_benchmark_writes_four_d4rl_files_and_a_matching_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hopper-tiny");
    let rows = ROWS.to_string();
    let make = |out: &Path, keep: &str| {
        o2o(&[
            "dataset",
            "make-benchmark",
            "hopper",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "3",
            "--sac-steps",
            "1500",
            "--sac-random-steps",
            "500",
            "--transitions",
            &rows,
            "--eval-every",
            "250",
            "--eval-episodes",
            "2",
            "--set",
            "agent.critic.hidden=[64,64]",
            "--set",
            "agent.actor.mlp.hidden=[64,64]",
            keep,
            "--threads",
            "1",
            "--device",
            "cpu",
        ])
    };
    let (ok, log) = make(&out, "--keep-run");
    assert!(ok, "{log}");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        (m["format"].as_str(), m["task"].as_str(), m["env"].as_str(), m["scale"].as_str()),
        (Some("o2o-benchmark/1"), Some("hopper"), Some("hopper-v2"), Some("custom"))
    );
    assert_eq!(m["seeds"]["sac"], 3);
    let sac = &m["sac"];
    assert_eq!(
        (sac["random_steps"].as_u64(), sac["online_steps"].as_u64(), sac["grad_steps"].as_u64()),
        (Some(500), Some(1000), Some(1000))
    );
    let evals = sac["evaluations"].as_array().unwrap();
    assert_eq!(
        evals.iter().map(|e| e["env_step"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![250, 500, 750, 1000, 1250, 1500]
    );

    // The medium rule: the earliest evaluation reaching one third of the final policy's
    // normalized score (hopper REF_MIN = −20.272305).
    let ret = |e: &Value| e["mean_return"].as_f64().unwrap();
    let expert = ret(evals.last().unwrap());
    let target = -20.272305 + (expert + 20.272305) / 3.0;
    let medium = &m["medium"];
    assert!((medium["target_return"].as_f64().unwrap() - target).abs() < 1e-9);
    assert_eq!(medium["expert_eval_return"].as_f64().unwrap(), expert);
    let chosen = evals.iter().position(|e| ret(e) >= target).unwrap_or(evals.len() - 1);
    assert_eq!(medium["eval"], evals[chosen], "medium snapshot");
    let medium_env_step = evals[chosen]["env_step"].as_u64().unwrap() as usize;

    // Every file: present, hashed as recorded, read back by our D4RL reader, sized as recorded.
    let files = m["files"].as_array().unwrap();
    let roles: Vec<&str> = files.iter().map(|f| f["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["random", "medium", "expert", "medium-replay"]);
    for f in files {
        let (role, name) = (f["role"].as_str().unwrap(), f["file"].as_str().unwrap());
        assert_eq!(name, format!("hopper-{role}-v2.hdf5"));
        let path = out.join(name);
        let (sha, bytes) = o2o_datasets::download::hash_file(&path).unwrap();
        assert_eq!((f["sha256"].as_str().unwrap(), f["bytes"].as_u64().unwrap()), (sha.as_str(), bytes), "{name}");
        let ds = D4rlDataset::read(&path).unwrap();
        ds.check_env("hopper-v2", 11, 3).unwrap();
        assert_eq!(f["rows"].as_u64().unwrap() as usize, ds.len(), "{name}");
        check_states(&ds, name);
        check_continuity(&ds, name);
        // Episode returns as recorded (complete episodes only).
        let eps: Vec<_> = ds.episodes(None).into_iter().filter(|e| e.terminated || e.truncated).collect();
        assert_eq!(f["episodes"].as_u64().unwrap() as usize, eps.len(), "{name}");
        let mean = eps.iter().map(|e| ds.rewards[e.rows.clone()].iter().map(|&r| r as f64).sum::<f64>()).sum::<f64>()
            / eps.len() as f64;
        assert!((f["returns"]["mean"].as_f64().unwrap() - mean).abs() < 1e-6, "{name}");
        let float = if role == "medium-replay" { Dtype::Float64 } else { Dtype::Float32 };
        assert_eq!(ds.dtypes["observations"], float, "{name}");
        assert_eq!(
            ds.metadata.get("metadata/algorithm"),
            (role != "random").then(|| MetaValue::Str("SAC".into())).as_ref(),
            "{name}"
        );
        match role {
            "medium-replay" => {
                // The SAC run's own first transitions, cut at the last episode end before the snapshot.
                assert!(
                    ds.len() <= medium_env_step && ds.len() > 0,
                    "{name}: {} rows, snapshot at {medium_env_step}",
                    ds.len()
                );
                assert!(
                    ds.terminals[ds.len() - 1] != 0.0 || ds.timeouts.as_ref().unwrap()[ds.len() - 1] != 0.0,
                    "{name} ends mid-episode"
                );
                let run = D4rlDataset::read(&out.join("sac-run").join("dataset.hdf5")).unwrap();
                assert_eq!(run.len(), 1500);
                assert_eq!(&run.observations[..ds.len() * 11], &ds.observations[..]);
                assert_eq!(&run.actions[..ds.len() * 3], &ds.actions[..]);
            }
            _ => assert_eq!(ds.len(), ROWS, "{name}"),
        }
    }
    assert!(
        !std::fs::read_dir(&out).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".make-benchmark")),
        "work folder left behind"
    );

    // Same seed, same files, byte for byte (and without --keep-run no run folder stays).
    let again = dir.path().join("again");
    let (ok, log) = make(&again, "--gzip=4");
    assert!(ok, "{log}");
    let m2: Value = serde_json::from_str(&std::fs::read_to_string(again.join("manifest.json")).unwrap()).unwrap();
    let shas = |m: &Value| m["files"].as_array().unwrap().iter().map(|f| f["sha256"].clone()).collect::<Vec<_>>();
    assert_eq!(shas(&m2), shas(&m));
    assert_eq!(std::fs::read_dir(&again).unwrap().count(), 5, "four files and the manifest");

    // `o2o dataset info` knows the file's role from the manifest and checks its hash.
    let medium_file = out.join("hopper-medium-v2.hdf5");
    let (ok, info) = o2o(&["dataset", "info", medium_file.to_str().unwrap()]);
    assert!(ok, "{info}");
    assert!(
        info.contains("benchmark: hopper-medium-v2 (role medium") && info.contains("sha256: matches the manifest"),
        "{info}"
    );
    assert!(info.contains("registry: hopper-medium-v2 (env hopper-v2"), "{info}");
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for name in ["manifest.json", "hopper-medium-v2.hdf5"] {
        std::fs::copy(out.join(name), copy.join(name)).unwrap();
    }
    let tampered = copy.join("hopper-medium-v2.hdf5");
    let mut ds = D4rlDataset::read(&tampered).unwrap();
    ds.rewards[0] += 1.0;
    ds.write(&tampered).unwrap();
    let (ok, info) = o2o(&["dataset", "info", tampered.to_str().unwrap()]);
    assert!(ok && info.contains("sha256: DIFFERS from the manifest"), "{info}");
}

#[test]
fn make_benchmark_refuses_bad_sizes_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let (ok, log) = o2o(&[
        "dataset",
        "make-benchmark",
        "hopper",
        "--out",
        out.to_str().unwrap(),
        "--sac-steps",
        "100",
        "--sac-random-steps",
        "100",
    ]);
    assert!(!ok && log.contains("sac-random-steps < sac-steps"), "{log}");
    assert!(!Path::new(&out).join("manifest.json").exists());
}

/// The hopper-small files shipped in `data/hopper-small/` are the ones the manifest describes,
/// readable by our reader, with states matching their observations; the medium file is at
/// D4RL's medium level (hopper-medium-v2 averages 44 normalized), not the weak 7 of the first
/// files.
#[test]
fn shipped_hopper_small_files_match_their_manifest() {
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../data/hopper-small");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    // `custom`: the small scale with --sac-steps and --eval-every raised (the command is in it).
    assert_eq!((m["task"].as_str(), m["scale"].as_str()), (Some("hopper"), Some("custom")));
    assert!(!m["git_revision"].as_str().unwrap().ends_with("-dirty"), "made from uncommitted code");
    let mut shipped = 0;
    for f in m["files"].as_array().unwrap() {
        let name = f["file"].as_str().unwrap();
        let path = dir.join(name);
        if !path.exists() {
            assert!(matches!(f["role"].as_str(), Some("random" | "expert" | "medium-replay")), "{name} is missing");
            continue;
        }
        if f["role"] == "medium" {
            let score = f["normalized_score"]["mean"].as_f64().unwrap();
            assert!((35.0..=65.0).contains(&score), "the medium file's mean normalized score is {score}");
        }
        shipped += 1;
        let (sha, bytes) = o2o_datasets::download::hash_file(&path).unwrap();
        assert_eq!((f["sha256"].as_str().unwrap(), f["bytes"].as_u64().unwrap()), (sha.as_str(), bytes), "{name}");
        let ds = D4rlDataset::read(&path).unwrap();
        assert_eq!(ds.len() as u64, f["rows"].as_u64().unwrap(), "{name}");
        check_states(&ds, name);
    }
    assert!(shipped >= 1, "medium is shipped");
}
