//! AntMaze through the runner (issue #25): every `{iql,cql,calql,wsrl,rlpd}-antmaze-*` preset
//! (the D4RL mazes, and `-umaze-small` on the shipped data)
//! resolves and builds its agent for the env's 29-number observation and 8 actions, and a short
//! `o2o run --preset … --dataset <file>` on a small AntMaze-layout file written here trains,
//! evaluates in `antmaze-umaze-v2` and logs the success rate beside the normalized score.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_experiments::run::{prepare::build_agent, presets};
use o2o_experiments::Run;
use std::path::{Path, PathBuf};

mod common;

#[test]
fn every_antmaze_preset_builds_its_agent_and_names_its_dataset() {
    tch::set_num_threads(1); // libtorch's spinning OpenMP threads only slow a shared 2-core machine
    let mut seen = 0;
    for name in presets::names() {
        // `sera-calql-antmaze-<maze>`: SERA's bonus on the Cal-QL protocol (the one-arm data preset
        // has its own test in sera_antmaze.rs).
        let Some(rest) = ["iql", "cql", "calql", "wsrl", "rlpd", "sera-calql"]
            .iter()
            .find_map(|a| name.strip_prefix(&format!("{a}-antmaze-")))
            .filter(|rest| !rest.contains("onearm"))
        else {
            continue;
        };
        let c = Run::preset(name).unwrap().config().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let d = c.dataset.as_ref().unwrap();
        // `<algo>-antmaze-<maze>-small` (issue 47 item 8): the maze's env on the shipped file;
        // `-200k` (issue 43): on the 200k-row file made on demand.
        let small =
            rest.strip_suffix("-small").map(|m| (m, "small")).or(rest.strip_suffix("-200k").map(|m| (m, "200k")));
        if let Some((maze, size)) = small {
            assert_eq!(c.env, format!("antmaze-{maze}-v2"), "{name}");
            let path = d.path.as_ref().map(|p| p.display().to_string());
            assert_eq!(path, Some(format!("data/antmaze-umaze-{size}/antmaze-umaze-v2.hdf5")), "{name}");
        } else {
            assert_eq!(c.env, format!("antmaze-{rest}-v2"), "{name}");
            assert_eq!(d.id.as_deref(), Some(c.env.as_str()), "{name}: the dataset is the env's");
        }
        let reward =
            if name.starts_with("iql") || name.starts_with("rlpd") { "antmaze-minus-one" } else { "calql-antmaze" };
        assert_eq!(d.reward.name(), reward, "{name}");
        // Building is the slow part (orthogonal inits of 10 critics): one maze per algorithm; the
        // other presets differ from it in the env and dataset ids only.
        if rest == "umaze" || small.is_some() {
            let mut agent = build_agent(&c, 29, 8, tch::Device::Cpu).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            let a = agent.act(&tch::Tensor::zeros([1, 29], (tch::Kind::Float, tch::Device::Cpu)), true);
            assert_eq!(a.size(), vec![1, 8], "{name}");
        }
        seen += 1;
    }
    assert_eq!(seen, 43);
}

/// An AntMaze-layout file (29 obs, 8 actions in [−1, 1], sparse rewards, timeouts, no
/// `next_observations`) from random-action rollouts of antmaze-umaze-v2, 100 steps an episode,
/// with the rewards of the last 5 steps of every other episode set to 1 (made-up labels, so
/// MC returns and the reward preset see both outcomes; not a D4RL dataset).
fn antmaze_file(dir: &Path) -> PathBuf {
    let mut env = o2o_envs::make("antmaze-umaze-v2").unwrap();
    let mut ds = D4rlDataset::empty(PathBuf::from("test"), 29, 8);
    ds.next_observations = None;
    for ep in 0..4u64 {
        let mut obs = env.reset(Some(ep)).unwrap();
        for t in 0..100usize {
            let a: Vec<f32> =
                (0..8).map(|k| (((t * 7 + k * 3 + ep as usize) % 13) as f32 / 6.0 - 1.0).clamp(-1.0, 1.0)).collect();
            let s = env.step(&a).unwrap();
            let hit = ep % 2 == 1 && t >= 95;
            ds.observations.extend_from_slice(&obs);
            ds.actions.extend_from_slice(&a);
            ds.rewards.push(if hit { 1.0 } else { 0.0 });
            ds.terminals.push(if hit { 1.0 } else { 0.0 });
            ds.timeouts.as_mut().unwrap().push(if t == 99 { 1.0 } else { 0.0 });
            obs = s.obs;
        }
    }
    let path = dir.join("antmaze-umaze-small.hdf5");
    ds.write(&path).unwrap();
    path
}

#[test]
fn a_short_antmaze_run_from_a_local_file_logs_success() {
    let dir =
        tempfile::Builder::new().prefix("o2o-antmaze-data-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let file = antmaze_file(&dir);
    let sets = [
        "agent.critic.hidden=[32, 32]",
        "agent.value.hidden=[32, 32]",
        "agent.actor.mlp.hidden=[32, 32]",
        "agent.actor_lr_decay_steps=100",
        "train.offline_steps=100",
        "train.online_steps=100",
        "train.replay_capacity=5000",
        "train.log_every=50",
        "eval.every=0",
        "eval.episodes=1",
        "checkpoint.every=0",
    ];
    let run = common::run_o2o(
        "o2o-antmaze-",
        &["run", "--preset", "iql-antmaze-umaze", "--dataset", file.to_str().unwrap()],
        &sets,
    );
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("antmaze-umaze-small.hdf5") && config.contains("antmaze-minus-one"), "{config}");
    let success = common::metric(&run, "eval/success_rate");
    assert!(!success.is_empty(), "no eval/success_rate in {}", run.display());
    assert!(success.iter().all(|s| (0.0..=1.0).contains(s)));
    let score = common::metric(&run, "eval/normalized_score");
    assert_eq!(score.len(), success.len());
    // Sparse reward in {0, 1} with termination at the goal: the normalized score is 100 × success.
    for (s, n) in success.iter().zip(&score) {
        assert!((n - 100.0 * s).abs() < 1e-9, "score {n} vs success {s}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["env_steps"].as_u64(), Some(100));
    assert!(summary["grad_steps"].as_u64().unwrap() >= 100);
}
