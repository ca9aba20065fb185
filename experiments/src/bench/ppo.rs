//! `o2o bench ppo`: PPO env steps per second, rollout and update together, against a PyTorch +
//! Gymnasium PPO written to the same hyperparameters, measured in the same run ([`PpoBench`]
//! from [`PpoOptions`]; [`PpoReport`] is what it measured).
//!
//! Ours is a real run of the `ppo-hopper` preset through the library (`Run`), with
//! `--envs` envs stepped by the vector env on `--threads` threads, `--rollout` steps per env per
//! rollout, 10 epochs of minibatches of 64 (CleanRL's 32 minibatches of a 2048-row rollout):
//! its `perf/steps_per_s` per rollout from `metrics.jsonl`. The reference is
//! `scripts/bench_ppo_torch.py`: CleanRL's `ppo_continuous_action.py` shape (64×64 tanh actor
//! and critic, running observation normalization, GAE, clipped surrogate and value loss,
//! grad-norm clip 0.5, Adam ε 1e-5) on a `gymnasium.vector.SyncVectorEnv` of the same env,
//! timed per rollout the same way. Both report the median over the rollouts after the first
//! (the first carries start-up); `--rounds` alternates the two sides and keeps each one's best.
//!
//! With `--json` the last line is `{"ours_steps_per_s", "pytorch_steps_per_s", "ratio", "envs",
//! "rollout", "threads", "env"}`.

use super::python_json;
use crate::logging::RerunArgs;
use crate::run::progress::ProgressOptions;
use crate::Run;
use anyhow::{bail, Context};
use serde_json::json;
use std::path::Path;

/// What `o2o bench ppo` measures.
#[derive(Debug, Clone)]
pub struct PpoOptions {
    /// The env (a Gymnasium id both sides know).
    pub env: String,
    /// Envs in the vector env.
    pub envs: usize,
    /// Steps per env per rollout (8 × 256 = CleanRL's 2048-row rollout).
    pub rollout: usize,
    /// Rollouts per side and round (the first is not counted).
    pub rollouts: usize,
    /// Threads for both sides (libtorch intra-op and our vector env's workers).
    pub threads: usize,
    /// Alternate ours and PyTorch this many times and keep each side's best.
    pub rounds: usize,
}

/// The benchmark, its options checked and libtorch's threads set.
pub struct PpoBench {
    args: PpoOptions,
}

/// What `o2o bench ppo` measured.
#[derive(Debug, Clone)]
pub struct PpoReport {
    /// Our env steps per second (best round's median rollout).
    pub ours_steps_per_s: f64,
    /// PyTorch + Gymnasium's env steps per second, measured the same way.
    pub pytorch_steps_per_s: f64,
    /// The options measured.
    pub options: PpoOptions,
}

impl PpoBench {
    /// Check the options and set libtorch's intra-op threads.
    pub fn new(args: PpoOptions) -> anyhow::Result<Self> {
        if args.envs == 0 || args.rollout == 0 || args.rollouts < 2 || args.threads == 0 {
            bail!(
                "o2o bench ppo: --envs, --rollout and --threads must be ≥ 1 and --rollouts ≥ 2 (the first is not counted)"
            );
        }
        tch::set_num_threads(args.threads as i32);
        Ok(Self { args })
    }

    /// The line `o2o bench ppo` prints before it measures (with the load average now).
    pub fn header(&self) -> String {
        let args = &self.args;
        format!("o2o bench ppo: {} × {} envs, {} steps per env per rollout, {} rollouts, 10 epochs of minibatches of 64, {} threads, load average {}", args.envs, args.env, args.rollout, args.rollouts, args.threads, super::load_average())
    }

    /// Measure both sides, alternating them `rounds` times.
    pub fn run(&self) -> anyhow::Result<PpoReport> {
        let args = &self.args;
        let (mut ours, mut theirs) = (0.0f64, 0.0f64);
        for round in 0..args.rounds.max(1) {
            ours = ours.max(time_ours(args)?);
            let r = python_json(
                "bench_ppo_torch.py",
                &[
                    "--env",
                    &args.env,
                    "--envs",
                    &args.envs.to_string(),
                    "--rollout",
                    &args.rollout.to_string(),
                    "--rollouts",
                    &args.rollouts.to_string(),
                    "--threads",
                    &args.threads.to_string(),
                ],
            )?;
            theirs = theirs.max(r["steps_per_s"].as_f64().context("bench_ppo_torch.py printed no steps_per_s")?);
            eprintln!(
                "round {}: ours {ours:.0} env steps/s, PyTorch + Gymnasium {theirs:.0} (best so far), load {}",
                round + 1,
                super::load_average()
            );
        }
        Ok(PpoReport { ours_steps_per_s: ours, pytorch_steps_per_s: theirs, options: args.clone() })
    }
}

impl PpoReport {
    /// The table `o2o bench ppo` prints.
    pub fn table(&self) -> String {
        let (ours, theirs) = (self.ours_steps_per_s, self.pytorch_steps_per_s);
        format!(
            "{:<6} {:>14} {:>14} {:>7}\n{:<6} {:>14.0} {:>14.0} {:>6.2}x",
            "",
            "ours steps/s",
            "torch steps/s",
            "ratio",
            "ppo",
            ours,
            theirs,
            ours / theirs
        )
    }

    /// The JSON object `o2o bench ppo --json` prints last.
    pub fn json(&self) -> serde_json::Value {
        let (ours, theirs, args) = (self.ours_steps_per_s, self.pytorch_steps_per_s, &self.options);
        json!({"ours_steps_per_s": ours, "pytorch_steps_per_s": theirs, "ratio": ours / theirs, "envs": args.envs, "rollout": args.rollout, "threads": args.threads, "env": args.env})
    }
}

/// One run of `ppo-hopper` on `args`' shape in a scratch runs folder; the median rollout rate.
fn time_ours(args: &PpoOptions) -> anyhow::Result<f64> {
    let runs = super::TempDir::new("ppo")?;
    let rows = args.envs * args.rollout;
    let overrides = [
        format!("env={}", args.env),
        format!("rollout.num_envs={}", args.envs),
        format!("rollout.steps={}", args.rollout),
        format!("rollout.threads={}", args.threads),
        format!("train.online_steps={}", rows * args.rollouts),
        format!("eval.every={}", rows * args.rollouts * 10),
        "eval.episodes=1".into(),
        "eval.at_phase_end=false".into(),
        format!("checkpoint.every={}", rows * args.rollouts * 10),
        "agent.minibatch_size=64".into(),
    ];
    let outcome = Run::preset("ppo-hopper")?
        .set(overrides.iter().map(String::as_str))?
        .runs_dir(runs.path())
        .device(tch::Device::Cpu)
        .rerun(RerunArgs { rerun: "off".into(), ..RerunArgs::default() })
        .progress(ProgressOptions::off())
        .run()?;
    median_rollout_rate(&outcome.dir.join("metrics.jsonl"))
}

/// The median `perf/steps_per_s` of a run's rollouts after the first.
fn median_rollout_rate(metrics: &Path) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(metrics).with_context(|| format!("reading {}", metrics.display()))?;
    let mut rates: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["perf/steps_per_s"].as_f64())
        .skip(1)
        .collect();
    if rates.is_empty() {
        bail!("{} has no perf/steps_per_s after the first rollout", metrics.display());
    }
    rates.sort_by(f64::total_cmp);
    Ok(rates[rates.len() / 2])
}
