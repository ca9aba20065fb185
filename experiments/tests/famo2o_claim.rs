//! FamO2O's claim experiment at a tiny budget: `o2o dataset make-benchmark --mixed-quality`
//! (a trained policy in region A, uniform random actions in region B, split by a rule on the
//! observation) and `o2o experiment famo2o-claim` end to end on such a file.

mod common;

use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::Env;
use o2o_experiments::run::actor::{ActionScale, Policy, UniformPolicy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROWS: usize = 2500;
/// Region A: HalfCheetah's forward velocity below 0 (a barely trained policy and random actions
/// both cross it often, so both regions get rows).
const RULE: &str = "obs[8]<0";

fn o2o(args: &[&str]) -> (bool, String) {
    let out = Command::new(common::O2O).args(args).output().expect("run o2o");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// A finished SAC run on halfcheetah-v2 (500 env steps, 32-unit networks): the policy.
fn policy_run() -> &'static PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let sets = [
            "env=\"halfcheetah-v2\"",
            "train.random_steps=200",
            "train.online_steps=300",
            "eval.every=0",
            "eval.episodes=1",
            "checkpoint.every=0",
            "agent.critic.hidden=[32, 32]",
            "agent.actor.mlp.hidden=[32, 32]",
        ];
        common::run_o2o("o2o-mixed-policy-", &["run", "--preset", "sac-halfcheetah"], &sets)
    })
}

fn make_mixed(out: &Path, seed: &str) {
    let (ok, log) = o2o(&[
        "dataset",
        "make-benchmark",
        "halfcheetah",
        "--mixed-quality",
        policy_run().to_str().unwrap(),
        "--policy-region",
        RULE,
        "--transitions",
        &ROWS.to_string(),
        "--eval-episodes",
        "1",
        "--seed",
        seed,
        "--out",
        out.to_str().unwrap(),
        "--threads",
        "1",
        "--device",
        "cpu",
    ]);
    assert!(ok, "{log}");
}

/// The mixed-quality file the experiment test trains on (seed 1).
fn mixed_file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("o2o-mixed-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
        make_mixed(&dir, "1");
        dir.join("halfcheetah-mixed-v2.hdf5")
    })
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Rows are split by the rule on their observation (recorded as `infos/region`); region B's
/// actions are exactly the manifest's uniform stream, drawn in row order, and region A's are
/// not; the manifest records the rule, the per-region shares and mean rewards the file holds,
/// and the same seed gives the same file.
#[test]
fn mixed_quality_rows_follow_the_region_rule_and_repeat_with_the_seed() {
    let path = mixed_file();
    let dir = path.parent().unwrap();
    let m = manifest(dir);
    assert_eq!(
        (m["format"].as_str(), m["task"].as_str(), m["env"].as_str()),
        (Some("o2o-benchmark-mixed/1"), Some("halfcheetah"), Some("halfcheetah-v2"))
    );
    let rule = &m["region_rule"];
    assert_eq!(
        (rule["text"].as_str(), rule["feature"].as_u64(), rule["above"].as_bool(), rule["threshold"].as_f64()),
        (Some("obs[8] < 0"), Some(8), Some(false), Some(0.0))
    );
    assert!(m["command"].as_array().unwrap().iter().any(|a| a == RULE), "the command is recorded: {}", m["command"]);
    assert_eq!(m["policy"]["algo"], "sac");
    assert_eq!(m["policy"]["env_steps"], 500);
    assert!(m["policy"]["eval_return"].as_f64().unwrap().is_finite());

    let ds = D4rlDataset::read(path).unwrap();
    ds.check_env("halfcheetah-v2", 17, 6).unwrap();
    assert_eq!(ds.len(), ROWS);
    let region = &ds.infos["infos/region"];
    assert_eq!(region.shape, vec![ROWS]);
    let in_a: Vec<bool> = (0..ROWS).map(|i| ds.obs(i)[8] < 0.0).collect();
    for (i, a) in in_a.iter().enumerate() {
        assert_eq!(region.data[i], if *a { 1.0 } else { 0.0 }, "row {i}: obs[8] = {}", ds.obs(i)[8]);
    }
    let rows_a = in_a.iter().filter(|a| **a).count();
    assert!(rows_a > 100 && ROWS - rows_a > 100, "both regions need rows to test anything: {rows_a} of {ROWS} in A");

    // Region B: the k-th row of B holds the k-th draw of the uniform stream; region A none of them.
    // (Recorded in env units, as the recorder maps them.)
    let scale = ActionScale::new(o2o_envs::make("halfcheetah-v2").unwrap().action_space(), "halfcheetah-v2").unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(m["seeds"]["random_actions"].as_u64().unwrap());
    let mut uniform = UniformPolicy { rng: &mut rng, dim: 6 };
    let mut draw = || scale.to_env(&uniform.act(&[]).unwrap());
    let mut next = draw();
    let mut matched_b = 0;
    for i in 0..ROWS {
        let a = &ds.actions[i * 6..(i + 1) * 6];
        if in_a[i] {
            assert_ne!(a, &next[..], "row {i} (region A) took the random stream's action");
        } else {
            assert_eq!(a, &next[..], "row {i} (region B) is not the random stream's next action");
            matched_b += 1;
            next = draw();
        }
    }
    assert_eq!(matched_b, ROWS - rows_a);

    // Shares and mean rewards as the file holds them.
    let mean_reward = |want: bool| {
        let r: Vec<f64> = (0..ROWS).filter(|&i| in_a[i] == want).map(|i| ds.rewards[i] as f64).collect();
        r.iter().sum::<f64>() / r.len() as f64
    };
    let (a, b) = (&m["regions"]["a"], &m["regions"]["b"]);
    assert_eq!((a["rows"].as_u64(), b["rows"].as_u64()), (Some(rows_a as u64), Some((ROWS - rows_a) as u64)));
    assert!((a["share"].as_f64().unwrap() - rows_a as f64 / ROWS as f64).abs() < 1e-12);
    assert!((a["mean_reward"].as_f64().unwrap() - mean_reward(true)).abs() < 1e-9);
    assert!((b["mean_reward"].as_f64().unwrap() - mean_reward(false)).abs() < 1e-9);
    let (sha, bytes) = o2o_datasets::download::hash_file(path).unwrap();
    assert_eq!((m["file"]["sha256"].as_str(), m["file"]["bytes"].as_u64()), (Some(sha.as_str()), Some(bytes)));

    // The same seed: the same file, byte for byte; another seed: another file.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    make_mixed(&scratch.path().join("again"), "1");
    assert_eq!(manifest(&scratch.path().join("again"))["file"]["sha256"], m["file"]["sha256"]);
    make_mixed(&scratch.path().join("other"), "2");
    assert_ne!(manifest(&scratch.path().join("other"))["file"]["sha256"], m["file"]["sha256"]);
    // A rule on a number the observation does not have is refused.
    let (ok, log) = o2o(&[
        "dataset",
        "make-benchmark",
        "halfcheetah",
        "--mixed-quality",
        policy_run().to_str().unwrap(),
        "--policy-region",
        "obs[17]<0",
        "--transitions",
        "10",
        "--out",
        scratch.path().join("bad").to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    assert!(!ok && log.contains("17 observation numbers"), "{log}");
}

/// `o2o experiment famo2o-claim` at a tiny budget (2 seeds, 150 + 200 steps): every variant's
/// row, the paired rows FamO2O − each fixed β and − the best fixed β on both measures, β(s) per
/// region of each FamO2O run's final balance model, the fixed β in each fixed run's config; a
/// second invocation reuses the finished runs.
#[test]
fn famo2o_claim_compares_the_balance_model_with_each_fixed_beta() {
    let data = mixed_file();
    let out =
        tempfile::Builder::new().prefix("o2o-famo2o-claim-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let claim = || {
        let mut c = Command::new(common::O2O);
        c.args([
            "experiment",
            "famo2o-claim",
            "--seeds",
            "2",
            "--jobs",
            "2",
            "--threads",
            "1",
            "--device",
            "cpu",
            "--out",
        ])
        .arg(&out);
        for s in tiny_budget(data, 200) {
            c.args(["--set", &s]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "famo2o-claim failed:\n{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(out.join("results.json")).unwrap()
    };
    let first = claim();
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(out.join("curves.png").is_file());
    for v in ["famo2o", "fixed-0.5", "fixed-1.0", "fixed-1.5"] {
        assert_eq!(
            table.matches(&format!("| {v} |")).count(),
            2,
            "{v}: a row at fixed steps and a summary row:\n{table}"
        );
    }
    for measure in ["final score", "mean online score"] {
        for fixed in ["fixed-0.5", "fixed-1.0", "fixed-1.5"] {
            assert!(table.contains(&format!("| {measure} | famo2o − {fixed} |")), "{measure}, {fixed}:\n{table}");
        }
        assert_eq!(table.matches(&format!("| {measure} | famo2o − best fixed β (fixed-")).count(), 1, "{table}");
    }
    assert!(
        table.contains("region A: ") && table.contains(RULE.replace('<', " < ").as_str()),
        "the data's rule and shares:\n{table}"
    );

    let r: Value = serde_json::from_str(&first).unwrap();
    for measure in ["final_score", "mean_online_score", "offline_end_score"] {
        for v in ["famo2o", "fixed-0.5", "fixed-1.0", "fixed-1.5"] {
            for seed in ["0", "1"] {
                assert!(r["per_seed"][measure][v][seed].is_number(), "{measure} {v} {seed}: {}", r["per_seed"]);
            }
        }
    }
    let paired = r["paired"].as_array().unwrap();
    assert_eq!(paired.len(), 8);
    for p in paired {
        let c = &p["comparison"];
        assert_eq!(c["variant"], "famo2o");
        assert_eq!(c["seeds"], serde_json::json!([0, 1]));
        let (lo, hi, mean) = (c["ci"][0].as_f64().unwrap(), c["ci"][1].as_f64().unwrap(), c["mean"].as_f64().unwrap());
        assert!(lo <= mean && mean <= hi, "{p}");
    }
    // The per-seed difference against a fixed β is FamO2O's value minus that variant's.
    let p = paired.iter().find(|p| p["measure"] == "final score" && p["label"] == "famo2o − fixed-1.0").unwrap();
    let finals = &r["per_seed"]["final_score"];
    let d0 = finals["famo2o"]["0"].as_f64().unwrap() - finals["fixed-1.0"]["0"].as_f64().unwrap();
    assert!((p["comparison"]["diffs"][0].as_f64().unwrap() - d0).abs() < 1e-12, "{p}");

    // β(s) per region: in the code map's range; the mean over all rows is the share-weighted mean
    // of the two regions'.
    let share_a = r["regions"]["a"]["share"].as_f64().unwrap();
    let betas = &r["beta_by_region"]["per_seed"];
    for seed in ["0", "1"] {
        let b = &betas[seed];
        let (all, a, bb) = (b["all"].as_f64().unwrap(), b["a"].as_f64().unwrap(), b["b"].as_f64().unwrap());
        for x in [all, a, bb] {
            assert!(x > -0.5 && x < 1.5, "seed {seed}: β {x} outside (−0.5, 1.5)");
        }
        assert!((all - (share_a * a + (1.0 - share_a) * bb)).abs() < 1e-4, "seed {seed}: {b}");
    }
    assert_eq!(r["beta_by_region"]["paired_a_minus_b"]["seeds"], serde_json::json!([0, 1]));

    let config = |variant: &str, seed: u64| {
        let dir = std::fs::read_dir(out.join("runs").join(variant).join(format!("seed-{seed}")))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        toml::from_str::<toml::Table>(&std::fs::read_to_string(dir.join("config.toml")).unwrap()).unwrap()
    };
    assert!(config("famo2o", 1)["agent"].get("fixed_beta").is_none());
    for (v, beta) in [("fixed-0.5", 0.5), ("fixed-1.0", 1.0), ("fixed-1.5", 1.5)] {
        assert_eq!(config(v, 0)["agent"]["fixed_beta"].as_float(), Some(beta), "{v}");
        assert_eq!(config(v, 1)["seed"].as_integer(), Some(1), "{v}");
    }

    // Resumable: the finished runs are reused, giving the same per-seed values.
    let second: Value = serde_json::from_str(&claim()).unwrap();
    assert_eq!(second["per_seed"], r["per_seed"]);
    assert_eq!(second["beta_by_region"]["per_seed"], r["beta_by_region"]["per_seed"]);
    for v in ["famo2o", "fixed-1.5"] {
        assert_eq!(
            std::fs::read_dir(out.join("runs").join(v).join("seed-0")).unwrap().count(),
            1,
            "{v}: a second run was started"
        );
    }
}

/// The claim runs' `--set` overrides at a test budget: 150 offline steps, `online` online steps,
/// 16-unit networks, no checkpoints.
fn tiny_budget(data: &Path, online: u64) -> Vec<String> {
    let mut sets = vec![format!("dataset.path={:?}", data.display().to_string())];
    sets.extend(
        [
            "train.offline_steps=150",
            "eval.every=100",
            "eval.episodes=1",
            "diagnostics.every=100",
            "diagnostics.dense_every=100",
            "checkpoint.every=0",
            "agent.critic.hidden=[16, 16]",
            "agent.actor.mlp.hidden=[16, 16]",
            "agent.balance.mlp.hidden=[16, 16]",
        ]
        .map(String::from),
    );
    sets.push(format!("train.online_steps={online}"));
    sets
}

/// `--algo iql`: FamO2O-IQL against fixed β at the ends and the middle of its preset's range
/// (8, 11, 14), each fixed run's config carrying its β; the acting β of a fixed run is that β in
/// every state (its β(s) section would show a constant), the balance model's β stays inside
/// [8, 14], and the β section reports α_b.
#[test]
fn famo2o_claim_iql_compares_the_iql_balance_model_with_the_ends_and_middle_of_its_range() {
    let data = mixed_file();
    let out = tempfile::Builder::new()
        .prefix("o2o-famo2o-claim-iql-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    let mut c = Command::new(common::O2O);
    c.args(["experiment", "famo2o-claim", "--algo", "iql", "--seeds", "2", "--jobs", "2", "--threads", "1"])
        .args(["--device", "cpu", "--out"])
        .arg(&out);
    for s in tiny_budget(data, 150).into_iter().chain(["agent.value.hidden=[16, 16]".to_string()]) {
        c.args(["--set", &s]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "famo2o-claim --algo iql failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("famo2o-iql-halfcheetah-mixed-small") && table.contains("α_b (last)"), "{table}");
    for v in ["famo2o", "fixed-8", "fixed-11", "fixed-14"] {
        assert_eq!(table.matches(&format!("| {v} |")).count(), 2, "{v}:\n{table}");
    }
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["algo"], "famo2o-iql");
    assert_eq!(r["paired"].as_array().unwrap().len(), 8, "3 fixed β and the best, on 2 measures");
    for seed in ["0", "1"] {
        let b = &r["beta_by_region"]["per_seed"][seed];
        for k in ["all", "a", "b"] {
            let x = b[k].as_f64().unwrap();
            assert!((8.0..=14.0).contains(&x), "seed {seed}: β({k}) = {x} outside [8, 14]");
        }
        let alpha = r["beta_by_region"]["last_online_diagnostics"][seed]["balance_alpha"].as_f64();
        assert!(alpha.is_some_and(|a| a > 0.0), "seed {seed}: α_b {alpha:?}");
    }
    for (v, beta) in [("fixed-8", 8.0), ("fixed-11", 11.0), ("fixed-14", 14.0)] {
        let dir = std::fs::read_dir(out.join("runs").join(v).join("seed-0")).unwrap().next().unwrap().unwrap().path();
        let config: toml::Table = toml::from_str(&std::fs::read_to_string(dir.join("config.toml")).unwrap()).unwrap();
        assert_eq!(config["algo"].as_str(), Some("famo2o-iql"));
        assert_eq!(config["agent"]["fixed_beta"].as_float(), Some(beta), "{v}");
        // The fixed run's online β statistics: β on every row, no spread.
        let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
        let last = metrics.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|m| {
            m.get("diag/online/beta_mean").and_then(Value::as_f64).map(|b| (b, m["diag/online/beta_std"].as_f64()))
        });
        assert_eq!(last, Some((beta, Some(0.0))), "{v}");
    }
}
