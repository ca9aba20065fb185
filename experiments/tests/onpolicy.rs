//! The on-policy loop (issue 21, items 1, 2 and 7): PPO from scratch on InvertedPendulum-v5
//! reaches an evaluation return ≥ 900, and an on-policy run killed with SIGKILL mid-run and
//! resumed ends exactly like one that never stopped (checkpoints fall mid-episode; the envs'
//! episodes are rebuilt by replaying their seeded resets and actions).
//!
//! Every run is the real `o2o` binary on the CPU with one torch thread and a fixed seed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{metrics_without_time, O2O};

/// PPO's preset as it is (8 envs × 128 steps, 50k env steps; about 15 s on one core).
#[test]
fn ppo_from_scratch_reaches_900_on_inverted_pendulum() {
    let run = common::run_o2o(
        "o2o-onpolicy-",
        &["train", "--preset", "ppo-inverted-pendulum", "--seed", "0"],
        &["eval.episodes=5", "checkpoint.every=0"],
    );
    let evals = common::metric(&run, "eval/return");
    let last = *evals.last().expect("evaluations");
    assert!(last >= 900.0, "PPO's final evaluation return {last} < 900 (all: {evals:?})");
    assert!(evals[0] < 900.0, "the first evaluation ({}) already solved the task; the test proves nothing", evals[0]);
}

/// A short PPO run: 4 envs × 64 steps per rollout, 12 rollouts, a checkpoint every 2 rollouts
/// (mid-episode: InvertedPendulum's episodes run to 1000 steps once it balances).
const RUN: &[&str] = &[
    "train",
    "--preset",
    "ppo-inverted-pendulum",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--seed",
    "4",
    "--set",
    "rollout.num_envs=4",
    "--set",
    "rollout.steps=64",
    "--set",
    "rollout.threads=2",
    "--set",
    "train.online_steps=3072",
    "--set",
    "eval.every=1024",
    "--set",
    "eval.episodes=2",
    "--set",
    "checkpoint.every=512",
    "--set",
    "agent.epochs=2",
];

fn o2o(args: &[&str], runs: &Path) -> Command {
    let mut c = Command::new(O2O);
    c.args(args).arg("--rerun=off").arg("--runs-dir").arg(runs).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn one_dir(runs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(runs).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| p.is_dir())
}

fn step_folders(run: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(run.join("checkpoints"))
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("step-")))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn sigkill_then_resume_of_an_on_policy_run_is_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs_a, runs_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let out = o2o(RUN, &runs_a).output().unwrap();
    assert!(out.status.success(), "straight run failed: {}", String::from_utf8_lossy(&out.stderr));
    let a = one_dir(&runs_a).unwrap();

    let mut child = o2o(RUN, &runs_b).spawn().unwrap();
    let t0 = Instant::now();
    let b = loop {
        if let Some(d) = one_dir(&runs_b) {
            if !step_folders(&d).is_empty() {
                break d;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "run B ended before its first checkpoint");
        assert!(t0.elapsed() < Duration::from_secs(300), "no checkpoint after 300 s");
        std::thread::sleep(Duration::from_millis(2));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!b.join("summary.json").exists(), "run B finished before it could be killed");
    // The checkpoint it stopped at holds an episode in progress (so replay is exercised).
    let first = step_folders(&b).remove(0);
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("onpolicy.json")).unwrap()).unwrap();
    assert!(
        st["envs"].as_array().unwrap().iter().any(|e| !e["actions"].as_array().unwrap().is_empty()),
        "no episode in progress at {}",
        first.display()
    );

    let out = Command::new(O2O)
        .args(["resume", "--device", "cpu", "--threads", "1", "--rerun=off"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success(), "resume failed: {}", String::from_utf8_lossy(&out.stderr));

    let (ca, cb) = (step_folders(&a).pop().unwrap(), step_folders(&b).pop().unwrap());
    assert_eq!(ca.file_name(), cb.file_name());
    let (ta, tb) =
        (tch::Tensor::load_multi(ca.join("agent.ot")).unwrap(), tch::Tensor::load_multi(cb.join("agent.ot")).unwrap());
    assert!(ta.len() > 10);
    for ((n, x), (_, y)) in ta.iter().zip(&tb) {
        assert!(x.equal(y), "tensor {n} differs after resume");
    }
    assert_eq!(std::fs::read(ca.join("onpolicy.json")).unwrap(), std::fs::read(cb.join("onpolicy.json")).unwrap());
    let (ma, mb) = (metrics_without_time(&a), metrics_without_time(&b));
    assert!(ma.iter().any(|m| m.contains_key("eval/return")) && ma.iter().any(|m| m.contains_key("train/policy_loss")));
    assert_eq!(ma.len(), mb.len(), "metrics.jsonl line counts differ");
    for (i, (x, y)) in ma.iter().zip(&mb).enumerate() {
        assert_eq!(x, y, "metrics.jsonl line {} differs", i + 1);
    }
}

/// Uni-O4 end to end on the shipped small hopper data (its medium file),
/// every stage shortened: the non-IQL critic (MC V, SARSA Q), dynamics, BC, BPPO with AM-Q
/// gating, a `dynamic`-scaled V refit, the hand-over, then PPO online; the diagnostics are in `metrics.jsonl` and the stages cached in the run directory.
#[test]
fn unio4_runs_offline_to_online_with_its_diagnostics() {
    let mut sets = unio4_short_sets(200);
    // The online critic starts from a ReLU-output V refit on MC returns of rewards divided by a
    // running return std (the halfcheetah scripts' `dynamic`), whose statistic carries on online.
    // The offline critic takes the non-IQL path (V on MC returns, then SARSA Q; halfcheetah-me's).
    for s in [
        "agent.critic.path=\"sarsa\"",
        "agent.critic.steps=100",
        "agent.critic.q_steps=100",
        "agent.value_refit.steps=200",
        "agent.value_refit.batch_size=128",
        "agent.value_refit.reward_scale=1.0",
        "agent.value_refit.reward_scaling=\"dynamic\"",
        "agent.online.critic_head=\"relu\"",
        "agent.online.reward_scaling=\"dynamic\"",
    ] {
        sets.push(s.to_string());
    }
    let run = common::run_o2o("o2o-unio4-", &["train", "--preset", "unio4-hopper-small", "--seed", "0"], &sets);
    let h: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("unio4/handover.json")).unwrap()).unwrap();
    let candidates: Vec<u64> = h["candidates"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
    assert!(candidates.len() >= 3 && candidates.contains(&h["chosen"].as_u64().unwrap()), "{h}");
    for stage in ["critic.ot", "dynamics.ot", "bc.ot", "bppo.ot", "bppo.json", "value_refit.ot"] {
        assert!(run.join("unio4").join(stage).is_file(), "stage file {stage} missing");
    }
    for e in 0..4 {
        // The initial (BC) score and two gated evaluations per member.
        assert_eq!(common::metric(&run, &format!("unio4/ope/score/{e}")).len(), 3, "member {e}");
        assert_eq!(common::metric(&run, &format!("unio4/ope/accepted/{e}")).len(), 2);
        assert_eq!(common::metric(&run, &format!("unio4/handover/real_return/{e}")).len(), 1);
    }
    // The critic stage logged its V phase, then its SARSA Q phase.
    let (v_loss, q_loss) =
        (common::metric(&run, "unio4/critic/value_loss"), common::metric(&run, "unio4/critic/q_loss"));
    assert!(
        v_loss.len() == 1 && q_loss.len() == 1 && q_loss[0].is_finite() && q_loss[0] > 0.0,
        "{v_loss:?} {q_loss:?}"
    );
    let refit = common::metric(&run, "unio4/value_refit/value_loss");
    assert!(refit.len() == 2 && refit[1] < refit[0], "the refit V's loss falls: {refit:?}");
    let g = common::metric(&run, "unio4/value_refit/return_mean");
    let (std, count) = (
        common::metric(&run, "unio4/value_refit/reward_scaling_std"),
        common::metric(&run, "unio4/value_refit/reward_scaling_count"),
    );
    assert!(
        std.len() == 1 && std[0] > 1.0 && count.len() == 1 && count[0] > 1000.0,
        "the dataset pass: σ_R {std:?} over {count:?} rows"
    );
    assert!(
        g.iter().all(|g| *g > 0.0 && *g < 30.0),
        "MC returns of hopper rewards ÷ σ_R (≈ 3 / (1 − γ) / σ_R at most): {g:?}"
    );
    assert!(
        common::metric(&run, "train/reward_scaling_std").iter().all(|s| (s / std[0] - 1.0).abs() < 0.5),
        "online σ_R continues near the offline one"
    );
    // The online agent continued the statistic: n = the dataset pass's rows + one per env step.
    let ck = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("agent.ot").is_file())
        .max()
        .unwrap();
    let saved = tch::Tensor::load_multi(ck.join("agent.ot")).unwrap();
    let get = |name: &str| {
        saved
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} in the agent's checkpoint"))
            .1
            .shallow_clone()
    };
    assert_eq!(
        get("reward_scaling/stats").double_value(&[0]),
        count[0] + 2048.0,
        "online steps continue the offline count"
    );
    // The members learned on dataset-standardized states, so the online agent normalizes with
    // the dataset's frozen statistics (hopper's height, observation 0, has mean ≈ 1.2 there).
    assert_eq!(get("obs_norm/frozen").int64_value(&[0]), 1, "the hand-over freezes the dataset's statistics");
    let (mean, var) = (get("obs_norm/mean"), get("obs_norm/var"));
    assert!(
        (mean.double_value(&[0]) - 1.2).abs() < 0.3 && var.double_value(&[0]) > 0.0 && var.double_value(&[0]) < 0.5,
        "obs_norm mean {mean} var {var}"
    );
    let holdout = common::metric(&run, "unio4/dynamics/holdout/0");
    assert!(holdout.len() == 2 && holdout.iter().all(|l| l.is_finite() && *l > 0.0), "{holdout:?}");
    assert!(
        common::metric(&run, "unio4/ope/disagreement").iter().all(|d| *d > 0.0),
        "independently initialized members disagree"
    );
    // The offline evaluation is the chosen member's, and the online phase ran after it.
    let evals = common::metric(&run, "eval/return");
    let chosen = h["chosen"].as_u64().unwrap() as usize;
    assert_eq!(evals[0], h["real_return"][chosen].as_f64().unwrap(), "the run continues from the chosen member");
    assert!(evals.len() >= 2 && !common::metric(&run, "train/policy_loss").is_empty());

    // `o2o experiment unio4-ope-probe` re-scores the finished run's members: with the run's
    // episode count its BPPO members' real returns are the hand-over's, bit for bit; AM-Q is
    // given at each horizon, and no rollout outlasts its horizon.
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args(["experiment", "unio4-ope-probe"])
        .arg(&run)
        .args(["--horizons", "2,6", "--start-states", "16", "--episodes", "1", "--device", "cpu", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "unio4-ope-probe failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let probe: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("probe.json")).unwrap()).unwrap();
    let policies = probe[0]["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 8, "4 BC and 4 BPPO members");
    for p in policies {
        let (am, len) = (p["am_q"].as_array().unwrap(), p["model_length"].as_array().unwrap());
        assert!(am.len() == 2 && am.iter().all(|x| x.as_f64().unwrap().is_finite()), "{p}");
        assert!(len[0].as_f64().unwrap() <= 2.0 && len[1].as_f64().unwrap() <= 6.0, "{p}");
        if p["stage"] == "bppo" {
            let e = p["member"].as_u64().unwrap() as usize;
            assert_eq!(p["real_return"].as_f64().unwrap(), h["real_return"][e].as_f64().unwrap(), "member {e}");
        }
    }
    assert_eq!(probe[0]["rank_corr_bppo"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(out.path().join("probe.md")).unwrap().contains("| bppo 3 |"));
}

/// Uni-O4's stages shortened on the shipped medium hopper file, `bppo_steps` of BPPO
/// with an AM-Q gate (and a partial save) every 100.
fn unio4_short_sets(bppo_steps: u32) -> Vec<String> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/hopper-small/hopper-medium-v2.hdf5");
    vec![
        format!("dataset.path={:?}", data.display().to_string()),
        "agent.critic.steps=200".into(),
        "agent.policy.bc_steps=200".into(),
        format!("agent.policy.bppo_steps={bppo_steps}"),
        "agent.save_every=100".into(),
        "agent.log_every=100".into(),
        "agent.dynamics.max_epochs=2".into(),
        "agent.ope.horizon=20".into(),
        "agent.ope.start_states=128".into(),
        "train.online_steps=2048".into(),
        "eval.episodes=1".into(),
        "checkpoint.every=0".into(),
    ]
}

/// The offline stages resume exactly: a Uni-O4 run killed with SIGKILL inside BPPO (after a
/// partial save of the policy ensemble, its optimizer, RNG and the AM-Q gate) and resumed ends
/// with the same ensemble, hand-over and metrics as a run that never stopped.
#[test]
fn sigkill_inside_unio4_bppo_then_resume_is_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs_a, runs_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut args: Vec<String> =
        ["train", "--preset", "unio4-hopper-small", "--seed", "3", "--device", "cpu", "--threads", "1"]
            .map(String::from)
            .to_vec();
    for s in unio4_short_sets(300) {
        args.extend(["--set".to_string(), s]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = o2o(&args, &runs_a).output().unwrap();
    assert!(out.status.success(), "straight run failed: {}", String::from_utf8_lossy(&out.stderr));
    let a = one_dir(&runs_a).unwrap();

    let mut child = o2o(&args, &runs_b).spawn().unwrap();
    let t0 = Instant::now();
    let b = loop {
        if let Some(d) = one_dir(&runs_b) {
            if d.join("unio4/bppo.partial.ot").is_file() {
                break d;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "run B ended before a partial BPPO save");
        assert!(t0.elapsed() < Duration::from_secs(300), "no partial BPPO save after 300 s");
        std::thread::sleep(Duration::from_millis(2));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !b.join("unio4/bppo.ot").exists() && !b.join("summary.json").exists(),
        "run B left BPPO before it could be killed"
    );

    let out = Command::new(O2O)
        .args(["resume", "--device", "cpu", "--threads", "1", "--rerun=off"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success(), "resume failed: {}", String::from_utf8_lossy(&out.stderr));
    let (ta, tb) = (
        tch::Tensor::load_multi(a.join("unio4/bppo.ot")).unwrap(),
        tch::Tensor::load_multi(b.join("unio4/bppo.ot")).unwrap(),
    );
    assert!(ta.len() > 10 && ta.len() == tb.len());
    for ((n, x), (_, y)) in ta.iter().zip(&tb) {
        assert!(x.equal(y), "BPPO tensor {n} differs after resume");
    }
    for f in ["unio4/bppo.json", "unio4/handover.json"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f} differs after resume");
    }
    let (ma, mb) = (metrics_without_time(&a), metrics_without_time(&b));
    assert!(ma.iter().any(|m| m.contains_key("unio4/ope/accepted/0")));
    assert_eq!(ma.len(), mb.len(), "metrics.jsonl line counts differ");
    for (i, (x, y)) in ma.iter().zip(&mb).enumerate() {
        assert_eq!(x, y, "metrics.jsonl line {} differs", i + 1);
    }
}

/// Every Uni-O4 preset's config is valid, and the refit presets are refused when the online
/// reward scale differs from the one the refit V was trained for.
#[test]
fn unio4_presets_validate_and_the_refit_scale_is_checked() {
    let names: Vec<&str> =
        o2o_experiments::run::presets::names().into_iter().filter(|n| n.starts_with("unio4-")).collect();
    assert_eq!(names.len(), 11, "{names:?}");
    for name in &names {
        o2o_experiments::Run::preset(name).unwrap().config().unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
    let err = o2o_experiments::Run::preset("unio4-hopper-medium")
        .unwrap()
        .set(["agent.online.reward_scale=1.0"])
        .and_then(|r| r.config())
        .unwrap_err();
    assert!(format!("{err:#}").contains("unio4.value_refit.reward_scale"), "{err:#}");
    // The official scripts' critics: `dynamic` scaling with a ReLU-headed refit V for
    // halfcheetah-m/-me, `number` with the ReLU head for hopper, the offline IQL V for walker2d,
    // and the non-IQL (MC V + SARSA Q) offline critic for halfcheetah-me.
    let unio4 = |name: &str| match o2o_experiments::Run::preset(name).unwrap().config().unwrap().agent {
        o2o_agents::AgentConfig::Unio4(c) => c,
        other => panic!("{name}: {}", other.algo()),
    };
    use o2o_agents::ppo::{RewardScaling, ValueHead};
    use o2o_agents::unio4::critic::CriticPath;
    for (name, scaling, head, refit, path) in [
        ("unio4-halfcheetah-medium", RewardScaling::Dynamic, ValueHead::Relu, true, CriticPath::Iql),
        ("unio4-halfcheetah-medium-expert", RewardScaling::Dynamic, ValueHead::Relu, true, CriticPath::Sarsa),
        ("unio4-halfcheetah-medium-replay", RewardScaling::Constant, ValueHead::Relu, true, CriticPath::Iql),
        ("unio4-hopper-medium", RewardScaling::Constant, ValueHead::Relu, true, CriticPath::Iql),
        ("unio4-walker2d-medium", RewardScaling::Constant, ValueHead::Linear, false, CriticPath::Iql),
    ] {
        let c = unio4(name);
        assert_eq!(
            (c.online.reward_scaling, c.online.critic_head, c.value_refit.is_some(), c.critic.path),
            (scaling, head, refit, path),
            "{name}"
        );
    }
    // Every preset's `online` table keeps Uni-O4's online defaults for what it leaves out: the
    // dataset's frozen normalization and advantages standardized over the rollout.
    for name in &names {
        let c = unio4(name);
        assert_eq!(
            (c.online.obs_norm.mode, c.online.advantage_norm),
            (o2o_agents::nn::ObsNormMode::Dataset, o2o_agents::ppo::AdvantageNorm::Rollout),
            "{name}"
        );
    }
    let err = o2o_experiments::Run::preset("unio4-halfcheetah-medium")
        .unwrap()
        .set(["agent.online.reward_scaling=\"constant\""])
        .and_then(|r| r.config())
        .unwrap_err();
    assert!(format!("{err:#}").contains("unio4.value_refit.reward_scaling"), "{err:#}");
}

/// fidelity-audit-2 E1: every `ppo-*` preset (CleanRL's recipe) normalizes rewards as CleanRL
/// does (`NormalizeReward`: divided by a running std of the discounted return, then
/// `TransformReward`: clipped to ±10), so the ±0.2 value clip acts in normalized units. E4:
/// like CleanRL, they store the unclamped sample.
#[test]
fn cleanrl_ppo_presets_scale_rewards_and_store_the_unclamped_sample() {
    use o2o_agents::ppo::RewardScaling;
    let names: Vec<&str> =
        o2o_experiments::run::presets::names().into_iter().filter(|n| n.starts_with("ppo-")).collect();
    assert!(
        names.contains(&"ppo-hopper") && names.contains(&"ppo-halfcheetah") && names.contains(&"ppo-inverted-pendulum"),
        "{names:?}"
    );
    for name in names {
        let c = match o2o_experiments::Run::preset(name).unwrap().config().unwrap().agent {
            o2o_agents::AgentConfig::Ppo(c) => c,
            other => panic!("{name}: {}", other.algo()),
        };
        assert_eq!((c.reward_scaling, c.reward_clip, c.reward_scale), (RewardScaling::Dynamic, 10.0, 1.0), "{name}");
        assert!(c.clip_value && !c.store_clamped_action, "{name}");
    }
}

/// fidelity-audit-2 E4: every Uni-O4 preset's online PPO stores the sampled action clamped to
/// ±1 and the log-probability of the clamped action, as the official `ppo_finetune` does.
#[test]
fn unio4_presets_store_the_clamped_action() {
    let names: Vec<&str> =
        o2o_experiments::run::presets::names().into_iter().filter(|n| n.starts_with("unio4-")).collect();
    assert!(!names.is_empty());
    for name in names {
        match o2o_experiments::Run::preset(name).unwrap().config().unwrap().agent {
            o2o_agents::AgentConfig::Unio4(c) => {
                assert!(c.online.store_clamped_action && c.online_config().store_clamped_action, "{name}")
            }
            other => panic!("{name}: {}", other.algo()),
        }
    }
}
