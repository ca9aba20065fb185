//! `o2o experiment dopamine --task fetch-reach-trap` end to end at a tiny budget: slowed scripted
//! demos and a progress model are made once, the five variants run on FetchReachTerminal-v4 (the
//! sparse one with HER, the others shaped), and the table holds success rate, episode length,
//! goal distance and Φ at the end of evaluation episodes, and the paired differences; a second
//! invocation reuses every run.

use std::path::Path;

mod common;

const VARIANTS: [&str; 5] = ["sparse", "naive-progress", "pbrs", "pbrs-true", "naive-progress-true"];

fn experiment(out: &Path) -> std::process::Output {
    let mut c = std::process::Command::new(common::O2O);
    c.args([
        "experiment",
        "dopamine",
        "--task",
        "fetch-reach-trap",
        "--seeds",
        "1",
        "--demos",
        "8",
        "--model-steps",
        "100",
        "--jobs",
        "1",
        "--device",
        "cpu",
        "--out",
    ])
    .arg(out);
    for s in ["train.random_steps=100", "train.online_steps=200", "eval.every=150", "eval.episodes=2"] {
        c.args(["--set", s]);
    }
    c.output().unwrap()
}

#[test]
fn the_trap_experiment_runs_five_variants_and_reports_length_distance_and_phi() {
    let out = tempfile::Builder::new().prefix("o2o-dopamine-trap-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let o = experiment(out.path());
    assert!(o.status.success(), "the trap experiment failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.path().join("table.md")).unwrap();
    for section in
        ["## Success rate", "## Evaluation episode length", "## Goal distance", "## Φ at the end", "## Paired"]
    {
        assert!(table.contains(section), "{section}:\n{table}");
    }
    for v in VARIANTS {
        // A row in each of the four curve tables.
        assert_eq!(table.matches(&format!("| {v} |")).count(), 4, "{v}:\n{table}");
    }
    assert_eq!(table.matches(" − pbrs |").count(), 12, "four variants × three measures:\n{table}");
    assert_eq!(table.matches("| naive-progress-true − pbrs-true |").count(), 3, "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 5);
    assert_eq!(json["paired"].as_array().unwrap().len(), 15);
    for key in ["lengths", "potential_end", "goal_distance_end_cm", "final_lengths"] {
        assert_eq!(json[key].as_object().unwrap().len(), 5, "{key}");
    }
    assert!(out.path().join("lengths.png").is_file() && out.path().join("curves.png").is_file());
    // The sparse run relabels (HER), the shaped ones store the progress reward or PBRS.
    let config = |v: &str| {
        let dir = std::fs::read_dir(out.path().join("runs").join(v).join("seed-0")).unwrap().next().unwrap().unwrap();
        std::fs::read_to_string(dir.path().join("config.toml")).unwrap()
    };
    assert!(config("sparse").contains("her = \"future\""));
    assert!(config("naive-progress").contains("mode = \"progress\""));
    assert!(config("pbrs-true").contains("potential = \"goal-distance\""));
    // Run again: every run is reused.
    let again = experiment(out.path());
    assert!(again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("reusing") && !stderr.contains("continuing"), "{stderr}");
    for v in VARIANTS {
        let runs = std::fs::read_dir(out.path().join("runs").join(v).join("seed-0")).unwrap().count();
        assert_eq!(runs, 1, "{v}: the finished run is reused, not run again");
    }
}
