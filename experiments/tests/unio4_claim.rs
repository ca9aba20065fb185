//! `o2o experiment unio4-claim` end to end at a tiny budget on the shipped halfcheetah data: the
//! three variants run on the same env and online budget (IQL on Uni-O4's critic-step budget),
//! and the table and results.json hold the claim's measures and the paired differences.

use std::path::Path;

mod common;

#[test]
fn unio4_claim_runs_the_three_variants_on_one_budget() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out =
        tempfile::Builder::new().prefix("o2o-unio4-claim-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let mut c = std::process::Command::new(common::O2O);
    c.current_dir(root)
        .args([
            "experiment",
            "unio4-claim",
            "--task",
            "halfcheetah-small",
            "--seeds",
            "1",
            "--jobs",
            "1",
            "--device",
            "cpu",
            "--out",
        ])
        .arg(&out);
    for s in [
        "agent.critic.steps=200",
        "agent.critic.q.hidden=[32, 32]",
        "agent.critic.value.hidden=[32, 32]",
        "agent.policy.bc_steps=200",
        "agent.policy.bppo_steps=200",
        "agent.policy.members=2",
        "agent.handover_top_k=2",
        "agent.save_every=100",
        "agent.log_every=100",
        "agent.dynamics.max_epochs=2",
        "agent.dynamics.net.hidden=[32, 32]",
        "agent.ope.horizon=10",
        "agent.ope.start_states=64",
        "agent.value_refit.steps=100",
        "train.online_steps=4096",
        "eval.every=2048",
        "eval.episodes=1",
        "checkpoint.every=0",
    ] {
        c.args(["--set", s]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "unio4-claim failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    for v in ["unio4", "iql", "ppo"] {
        assert_eq!(table.matches(&format!("| {v} |")).count(), 2, "{v}: a score row and a claim row:\n{table}");
    }
    assert_eq!(table.matches(" − unio4 |").count(), 6, "two baselines × three measures:\n{table}");
    // The claim rows (signed cells): every measure there, the dip included (the first online
    // evaluation counts when none falls in the first 20% of the budget).
    for v in ["unio4", "iql", "ppo"] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {v} | +")) || l.starts_with(&format!("| {v} | -")))
            .unwrap_or_else(|| panic!("no claim row for {v}:\n{table}"));
        assert_eq!(row.matches(" – |").count(), if v == "unio4" { 0 } else { 1 }, "{row}");
    }
    let config = |variant: &str| {
        let dir =
            std::fs::read_dir(out.join("runs").join(variant).join("seed-0")).unwrap().next().unwrap().unwrap().path();
        toml::from_str::<toml::Table>(&std::fs::read_to_string(dir.join("config.toml")).unwrap()).unwrap()
    };
    for v in ["unio4", "iql", "ppo"] {
        let c = config(v);
        assert_eq!(c["env"].as_str(), Some("halfcheetah-v2"), "{v}");
        assert_eq!(c["train"]["online_steps"].as_integer(), Some(4096), "{v}");
    }
    assert_eq!(config("iql")["train"]["offline_steps"].as_integer(), Some(200));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert!(results["per_seed"]["offline_score"]["unio4"]["0"].is_number(), "{}", results["per_seed"]);
    assert!(results["per_seed"]["dip"]["iql"]["0"].is_number(), "{}", results["per_seed"]);
    // IQL keeps learning online (its actor's LR does not decay to 0 at the switch).
    let iql = results["curves"]["iql"][0].as_array().unwrap();
    let (offline, last) = (
        iql.iter().rev().find(|p| p[0].as_f64() == Some(0.0)).unwrap()[1].as_f64().unwrap(),
        iql.last().unwrap()[1].as_f64().unwrap(),
    );
    assert_ne!(offline, last, "IQL's policy did not move online: {iql:?}");
    assert_eq!(results["paired"].as_array().map(|p| p.len()), Some(6));
}
