//! ImagineBench through the runner (issue 24), on the shipped small file made by
//! `o2o dataset make-benchmark imaginebench-mujoco --scale small`:
//!
//! 1. the data mixes: `rows = "real"` / `"imaginary"`, a fixed `real_fraction` (exactly
//!    round(f · B) real rows per batch), and the released code's proportional mix (uniform over
//!    all rows: the real share averages n_real / n); real rows are told apart by their
//!    instruction vectors, which must be those of the real tasks' sentences;
//! 2. `o2o train --preset cql-imaginebench-mujoco-real+imagined` at a test budget logs success
//!    per level and per task for all 13 tasks, records the embedding source in the manifest,
//!    and `o2o report` tables the per-level / per-task success;
//! 3. bad ImagineBench settings fail before the first step, naming the key.

use o2o_datasets::imaginebench::Rows;
use o2o_datasets::scores::RewardPreset;
use o2o_envs::imaginebench::{builtin_embedding, InstructionEncoder, Instructions, Level};
use o2o_experiments::run::config::{DatasetConfig, DatasetFormat, RunConfig, TransitionRule};
use o2o_experiments::run::imaginebench::load;
use rand::SeedableRng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn small_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../data/imaginebench-mujoco-small/mujoco-small.hdf5")
        .canonicalize()
        .unwrap()
}

const DIM: usize = 8;

fn dataset(rows: Rows, real_fraction: Option<f64>) -> DatasetConfig {
    DatasetConfig {
        id: None,
        path: Some(small_file()),
        reward: RewardPreset::None,
        transitions: TransitionRule::Qlearning,
        in_memory: false,
        format: Some(DatasetFormat::ImagineBench),
        lerobot: None,
        rows: Some(rows),
        real_fraction,
        relabel: None,
    }
}

/// The share of a batch's rows whose instruction vector is a real task's sentence's.
fn real_share(obs: &tch::Tensor, real: &HashSet<u32>) -> (usize, usize) {
    let v: Vec<f32> = Vec::try_from(obs.select(1, 18).contiguous()).unwrap();
    (v.iter().filter(|x| real.contains(&x.to_bits())).count(), v.len())
}

#[test]
fn real_and_imaginary_mixes_have_the_asked_composition() {
    let encoder = InstructionEncoder::BuiltIn { dim: DIM };
    let real: HashSet<u32> = Level::Real
        .tasks()
        .iter()
        .flat_map(|t| t.instructions(Instructions::Fixed))
        .map(|s| builtin_embedding(s, DIM)[0].to_bits())
        .collect();
    let space = o2o_envs::BoxSpace::new(vec![-1.0; 6], vec![1.0; 6]);
    let load_rows = |rows: Rows, f: Option<f64>| {
        load(&dataset(rows, f), &encoder, &space, "imaginebench-mujoco-all-v0", 18 + DIM, 6, None).unwrap()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let dev = tch::Device::Cpu;

    // A fixed real fraction: exactly round(0.25 · 256) = 64 real rows in every batch.
    let mix = load_rows(Rows::All, Some(0.25));
    for _ in 0..5 {
        let b = mix.source().sample(256, &mut rng, dev).unwrap();
        assert_eq!(real_share(&b.obs, &real), (64, 256));
        let flags: Vec<f32> = Vec::try_from(b.is_offline.as_ref().unwrap()).unwrap();
        assert_eq!(flags.iter().filter(|f| **f == 1.0).count(), 64, "is_offline marks the real rows");
    }
    // Real only / imaginary only.
    let real_only = load_rows(Rows::Real, None);
    let imag_only = load_rows(Rows::Imaginary, None);
    let (n_real, n_imag) = (real_only.buffer.len(), imag_only.buffer.len());
    assert!(n_real > 1000 && n_imag > 1000, "{n_real} {n_imag}");
    assert_eq!(real_share(&real_only.source().sample(256, &mut rng, dev).unwrap().obs, &real), (256, 256));
    assert_eq!(real_share(&imag_only.source().sample(256, &mut rng, dev).unwrap().obs, &real).0, 0);
    // The released code's mix: uniform over all rows, so the real share averages n_real / n.
    let all = load_rows(Rows::All, None);
    assert_eq!(all.buffer.len(), n_real + n_imag);
    let (mut k, mut n) = (0, 0);
    for _ in 0..40 {
        let (a, b) = real_share(&all.source().sample(256, &mut rng, dev).unwrap().obs, &real);
        k += a;
        n += b;
    }
    let expect = n_real as f64 / (n_real + n_imag) as f64;
    assert!((k as f64 / n as f64 - expect).abs() < 0.03, "real share {} vs {expect}", k as f64 / n as f64);
}

#[test]
fn cql_preset_reports_success_per_level_and_task_and_report_tables_it() {
    let sets = [
        "train.offline_steps=40",
        "train.batch_size=64",
        "train.log_every=20",
        "eval.every=0",
        "eval.episodes=13",
        "checkpoint.every=0",
        "agent.critic.hidden=[32, 32]",
        "agent.actor.mlp.hidden=[32, 32]",
    ];
    let data = format!("dataset.path={:?}", small_file().display().to_string());
    let mut all: Vec<&str> = sets.to_vec();
    all.push(&data);
    let run =
        common::run_o2o("o2o-imaginebench-", &["train", "--preset", "cql-imaginebench-mujoco-real+imagined"], &all);
    for l in Level::ALL {
        let v = common::metric(&run, &format!("eval/success/{}", l.name()));
        assert_eq!(v.len(), 1, "{}", l.name());
        assert!((0.0..=1.0).contains(&v[0]));
        for t in l.tasks() {
            let s = common::metric(&run, &format!("eval/success/{}", t.key()));
            assert!(s.len() == 1 && (s[0] == 0.0 || s[0] == 1.0), "one episode per task: {} {s:?}", t.key());
        }
    }
    let rate = common::metric(&run, "eval/success_rate")[0];
    let per_level: f64 = Level::ALL
        .iter()
        .map(|l| common::metric(&run, &format!("eval/success/{}", l.name()))[0] * l.tasks().len() as f64)
        .sum();
    assert!((rate - per_level / 13.0).abs() < 1e-9, "the levels' rates average to the overall rate");
    assert_eq!(common::metric(&run, "train/real_fraction"), vec![0.5, 0.5], "half of each batch is real");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["instruction_embeddings"], "built-in hashed bag of words (64)");

    let out = run.join("report");
    let r = Command::new(common::O2O)
        .args(["report", "--metric", "eval/success/hard", "--reps", "100", "--out"])
        .arg(&out)
        .arg(&run)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Success by level and task"), "{md}");
    assert!(md.contains("| easy | easy/move-backward-fast |") && md.contains("rephrase/rep-move-forward"), "{md}");
}

#[test]
fn bad_imaginebench_settings_name_the_key() {
    let base = |extra: &str| {
        format!("preset = \"p\"\nalgo = \"bc\"\nenv = \"imaginebench-mujoco-real-v0\"\n[train]\noffline_steps = 10\n[dataset]\nformat = \"imaginebench\"\npath = \"x.hdf5\"\n{extra}")
    };
    let err = |extra: &str| format!("{:#}", RunConfig::from_toml_str(&base(extra), "t").unwrap_err());
    assert!(err("rows = \"dreamt\"").contains("dataset.rows"));
    assert!(err("rows = \"real\"\nreal_fraction = 0.5").contains("real_fraction"));
    assert!(err("real_fraction = 1.5").contains("1.5"));
    assert!(err("reward = \"iql-locomotion\"").contains("dataset.reward"));
    assert!(err("[imaginebench]\ninstructions = \"swapped\"").contains("imaginebench.instructions"));
    // A table that lacks a sentence of the level fails when the env is made, naming it.
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.hdf5");
    let mut ds = o2o_datasets::imaginebench::ImagineBenchDataset::read(&small_file()).unwrap();
    let k = ds.instructions.len();
    ds.set_embeddings(4, vec![0.5; 4 * k]).unwrap();
    ds.instructions.retain(|s| s != "Run forward.");
    ds.instructions.push("Something else.".into());
    ds.write(&table).unwrap();
    let text = format!("preset = \"p\"\nalgo = \"cql\"\nenv = \"imaginebench-mujoco-real-v0\"\n[train]\nonline_steps = 10\n[imaginebench]\nembeddings = {:?}\n", table.display().to_string());
    let config = RunConfig::from_toml_str(&text, "t").unwrap();
    let e = match o2o_experiments::run::prepare::env_factory(&config) {
        Ok(_) => panic!("a table without `Run forward.` must fail"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("Run forward."), "{e}");
}

/// A short BC run on the small data (real rows only) reports success per level, and its state
/// normalization took the dataset's statistics (the checkpoint's `obs_norm/*` are not the
/// identity). BC learns the real jumps quickly: their sentences' episodes succeed more often
/// than chance would make the level's rate 0.
#[test]
fn short_bc_run_reports_per_level_success() {
    let data = format!("dataset.path={:?}", small_file().display().to_string());
    let sets = [
        "train.offline_steps=300",
        "train.log_every=10",
        "eval.every=0",
        "eval.episodes=13",
        "checkpoint.every=0",
        &data,
    ];
    let run = common::run_o2o("o2o-imaginebench-bc-", &["train", "--preset", "bc-imaginebench-mujoco-real"], &sets);
    let levels: Vec<f64> =
        Level::ALL.iter().map(|l| common::metric(&run, &format!("eval/success/{}", l.name()))[0]).collect();
    assert!(levels.iter().all(|v| (0.0..=1.0).contains(v)), "{levels:?}");
    let bc = common::metric(&run, "train/bc_loss");
    let late = bc[25..].iter().sum::<f64>() / 5.0;
    assert!(bc.len() == 30 && bc[0] > 1.3 * late, "the BC loss falls: {bc:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let ckpt = run.join(summary["checkpoint"].as_str().unwrap()).join("agent.ot");
    let t = tch::Tensor::load_multi(&ckpt).unwrap();
    let scale = &t.iter().find(|(n, _)| n == "obs_norm/scale").unwrap().1;
    let s: Vec<f32> = Vec::try_from(scale.view([-1])).unwrap();
    assert_eq!(s.len(), 18 + 64);
    assert!(s[1..18].iter().any(|v| (v - 1.0).abs() > 0.05), "dataset statistics were set: {:?}", &s[..18]);
}

/// Offline-to-online on the unseen hard level through `o2o run`: Cal-QL pre-trained on real +
/// imagined rows fine-tunes online in imaginebench-mujoco-hard-v0 and logs the hard level's
/// success at the end of pre-training and during fine-tuning, against env steps.
#[test]
fn finetune_on_the_hard_level_reports_success_against_env_steps() {
    let data = format!("dataset.path={:?}", small_file().display().to_string());
    let sets = [
        "train.offline_steps=30",
        "train.online_steps=400",
        "train.batch_size=64",
        "train.log_every=100",
        "eval.every=200",
        "eval.episodes=3",
        "checkpoint.every=0",
        "agent.critic.hidden=[32, 32]",
        "agent.actor.mlp.hidden=[32, 32]",
        &data,
    ];
    let run =
        common::run_o2o("o2o-imaginebench-ft-", &["run", "--preset", "calql-imaginebench-mujoco-hard-finetune"], &sets);
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let evals: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.get("env_step")?.as_f64()?, r.get("eval/success/hard")?.as_f64()?)))
        .collect();
    let steps: Vec<f64> = evals.iter().map(|e| e.0).collect();
    assert!(steps.len() >= 3, "evaluations before and during fine-tuning: {evals:?}");
    assert!(steps.iter().any(|s| *s > 0.0) && steps.contains(&0.0), "{evals:?}");
    assert!(evals.iter().all(|(_, v)| (0.0..=1.0).contains(v)));
    for t in Level::Hard.tasks() {
        assert!(!common::metric(&run, &format!("eval/success/{}", t.key())).is_empty(), "{}", t.key());
    }
    assert!(!common::metric(&run, "train/episode_success").is_empty(), "online episodes report success");
}
