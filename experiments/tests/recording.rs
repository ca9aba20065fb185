//! Issue 8: a real `o2o train` run writes `recording.rrd` that the set-up's `rerun rrd` tools
//! read, with the metric curves on the step timelines and a moving 3D body from evaluation; and
//! `o2o report` over its seeds gives the numbers its metrics.jsonl files imply.

use std::path::{Path, PathBuf};
use std::process::Command;

const O2O: &str = env!("CARGO_BIN_EXE_o2o");

/// A very short SAC run on InvertedPendulum-v5 (a few seconds on 2 cores).
fn train(runs: &Path, seed: &str) -> PathBuf {
    let out = Command::new(O2O)
        .args(["train", "--preset", "sac-inverted-pendulum", "--device", "cpu", "--threads", "1", "--seed", seed])
        .args(["--set", "train.random_steps=100", "--set", "train.online_steps=300", "--set", "train.batch_size=32"])
        .args(["--set", "train.log_every=50", "--set", "eval.every=150", "--set", "eval.episodes=2"])
        .args([
            "--set",
            "checkpoint.every=1000",
            "--set",
            "agent.critic.hidden=[16, 16]",
            "--set",
            "agent.actor.mlp.hidden=[16, 16]",
        ])
        .arg("--runs-dir")
        .arg(runs)
        .output()
        .expect("run o2o");
    assert!(out.status.success(), "o2o train failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(runs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    dirs.pop().expect("a run directory")
}

/// `rerun rrd print -vv` of `file`, reduced to (entity, rows, timelines) per chunk.
fn chunks(file: &Path) -> Vec<(String, usize, Vec<String>)> {
    let venv = std::env::var_os("O2O_VENV")
        .map(PathBuf::from)
        .or_else(|| option_env!("O2O_VENV").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/o2o/venv"));
    let out = Command::new(venv.join("bin/rerun"))
        .args(["rrd", "print", "-vv"])
        .arg(file)
        .output()
        .expect("run the venv's rerun");
    assert!(out.status.success(), "rerun rrd print failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v: Vec<(String, usize, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Chunk(") {
            let rows =
                rest.split(" with ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            v.push((rest.split(" - ").nth(1).unwrap_or("").trim().to_string(), rows, vec![]));
        } else if let Some(c) = v.last_mut() {
            for part in line.split("index_name: ").skip(1) {
                c.2.push(part.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect());
            }
        }
    }
    v
}

#[test]
fn a_training_run_records_curves_and_a_moving_body_and_reports_over_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let run = train(&runs, "1");
    let rrd = run.join("recording.rrd");
    assert!(rrd.exists(), "{} has no recording.rrd", run.display());
    let chunks = chunks(&rrd);
    let has =
        |entity: &str, timeline: &str| chunks.iter().any(|(e, _, t)| e == entity && t.iter().any(|x| x == timeline));
    for t in ["grad_step", "env_step", "wall_time"] {
        assert!(has("/eval/return", t), "/eval/return lacks timeline {t}");
    }
    // Evaluations at steps 0?, 150, 300, 400 (end): episode 0 of each is drawn; the cart and the
    // pole are bodies with transforms on the eval_step timeline, and their geoms are static.
    let moving: Vec<&String> = chunks
        .iter()
        .filter(|(e, _, t)| e.starts_with("/episode/world/") && t.iter().any(|x| x == "eval_step"))
        .map(|c| &c.0)
        .collect();
    assert!(moving.iter().any(|e| e.as_str() == "/episode/world/pole"), "no moving pole: {moving:?}");
    let pole_rows: usize = chunks.iter().filter(|(e, _, _)| e == "/episode/world/pole").map(|c| c.1).sum();
    assert!(pole_rows >= 2, "the pole was logged at {pole_rows} steps");
    assert!(
        chunks.iter().any(|(e, _, t)| e.starts_with("/episode/world/pole/geom") && t.is_empty()),
        "no static pole geometry"
    );
    assert!(has("/episode/action", "eval_step") && has("/episode/reward", "episode_step"));

    // A second seed, then a report over both: its table lists both final scores.
    let run2 = train(&runs, "2");
    let out_dir = tmp.path().join("report");
    let out = Command::new(O2O)
        .arg("report")
        .arg(&runs)
        .arg("--out")
        .arg(&out_dir)
        .args(["--metric", "eval/return", "--reps", "2000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "o2o report failed: {}", String::from_utf8_lossy(&out.stderr));
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let last_return = |dir: &Path| -> f64 {
        let text = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("eval/return").and_then(|r| r.as_f64()))
            .last()
            .unwrap()
    };
    let (a, b) = (last_return(&run), last_return(&run2));
    let mean = (a + b) / 2.0;
    // Two runs of one group: mean = IQM (n = 2 cuts nothing); the bootstrap interval spans [min, max].
    let stats = format!(
        "| sac-inverted-pendulum | 2 | {mean:.1} [{:.1}, {:.1}] | {mean:.1} [{:.1}, {:.1}] |",
        a.min(b),
        a.max(b),
        a.min(b),
        a.max(b)
    );
    let row = md
        .lines()
        .find(|l| l.starts_with("| sac · InvertedPendulum-v5 · offline 0 · random "))
        .unwrap_or_else(|| panic!("no group row in\n{md}"));
    assert!(row.contains(&stats), "expected {stats} in {row}");
    assert!(out_dir.join("curves-1.png").exists());
}

/// A shaped Fetch run (FetchReachTerminal-v4 with the true distance potential) follows Φ along
/// its evaluation episodes: `eval/potential_*` and `eval/goal_distance_end` among the metrics,
/// and Φ step by step in the recording (`episode/potential` on the episode timelines), with no
/// 3D bodies for a Fetch task.
#[test]
fn a_shaped_fetch_run_records_its_potential_along_evaluation_episodes() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let out = Command::new(O2O)
        .args(["train", "--preset", "sac-fetch-reach-dopamine-trap", "--device", "cpu", "--threads", "1"])
        .args(["--set", "shaping.potential=\"goal-distance\"", "--set", "train.random_steps=100"])
        .args(["--set", "train.online_steps=100", "--set", "eval.every=100", "--set", "eval.episodes=2"])
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .expect("run o2o");
    assert!(out.status.success(), "o2o train failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let evals: Vec<serde_json::Value> = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("eval/return").is_some())
        .collect();
    assert!(!evals.is_empty());
    for e in &evals {
        for key in ["eval/potential_start", "eval/potential_mean", "eval/potential_end", "eval/goal_distance_end"] {
            assert!(e[key].is_f64(), "{key} missing in {e}");
        }
        // Φ = 1 − d/0.25 at the last state.
        let (phi, d) = (e["eval/potential_end"].as_f64().unwrap(), e["eval/goal_distance_end"].as_f64().unwrap());
        assert!((phi - (1.0 - d / 0.25)).abs() < 1e-5, "Φ_end {phi} vs d_end {d}");
    }
    let chunks = chunks(&run.join("recording.rrd"));
    assert!(
        chunks.iter().any(|(e, _, t)| e == "/episode/potential" && t.iter().any(|x| x == "eval_step")),
        "no /episode/potential on eval_step: {:?}",
        chunks.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    assert!(!chunks.iter().any(|(e, _, _)| e.starts_with("/episode/world/")), "a Fetch task has no 3D bodies");
}
