//! `o2o env …`: list the registered tasks, and check one against Gymnasium.
//!
//! `o2o env parity <ID>` runs our env and Gymnasium's Python env (the set-up's venv python
//! driving `scripts/gym_parity.py`) from the same initial `qpos`/`qvel` with the same actions,
//! across terminations, truncations and resets, and exits non-zero when any observation or
//! reward differs by more than 1e-6 (relative above 1) or any `terminated`/`truncated` differs.
//! What is compared for each id is in `o2o_envs::parity`'s docs and docs/envs.md.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use o2o_envs::parity::{check, reference_for, Oracle, ParityOptions};
use o2o_envs::Env;

/// Arguments of `o2o env`.
#[derive(Args)]
pub struct EnvArgs {
    #[command(subcommand)]
    pub command: EnvCommand,
}

/// The `o2o env` subcommands.
#[derive(Subcommand)]
pub enum EnvCommand {
    /// List the registered tasks with their sizes, time limits and D4RL normalization family.
    List,
    /// Compare a task with Gymnasium's Python env step by step; non-zero exit on a mismatch.
    Parity(ParityArgs),
}

/// Arguments of `o2o env parity`.
#[derive(Args)]
pub struct ParityArgs {
    /// Task id, e.g. Hopper-v5, hopper-v2 or imaginebench-mujoco-hard-v0 (see `o2o env list`).
    pub id: String,
    /// Total env steps (episodes restart until this many steps were compared).
    #[arg(long, default_value_t = 3000)]
    pub steps: usize,
    /// Seed of our resets and of the random action sequence.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Time limit for this check (default: the task's, 1000); a short one crosses more truncations.
    #[arg(long)]
    pub max_episode_steps: Option<usize>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Run `o2o env …`.
pub fn run(args: EnvArgs) -> Result<()> {
    match args.command {
        EnvCommand::List => list(),
        EnvCommand::Parity(a) => parity(a),
    }
}

fn list() -> Result<()> {
    println!(
        "{:<25} {:>4} {:>4} {:>6} {:>6}  {:<12} parity reference",
        "id", "obs", "act", "dt", "steps", "d4rl family"
    );
    for id in o2o_envs::known_ids() {
        if o2o_envs::registry::is_fetch(id) {
            let env = o2o_envs::registry::make_fetch(id).with_context(|| format!("making {id}"))?;
            let reference =
                reference_for(id).map(|r| format!("{} (gymnasium-robotics 1.4.2, joint-type shim)", r.gym_id));
            let steps = env.spec().max_episode_steps.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
            println!(
                "{:<21} {:>4} {:>4} {:>6.3} {:>6}  {:<12} {}",
                id,
                env.observation_space().dim(),
                env.action_space().dim(),
                0.04,
                steps,
                "-",
                reference.unwrap_or_else(|| "-".into())
            );
            continue;
        }
        let env = o2o_envs::make_mujoco(id).with_context(|| format!("making {id}"))?;
        let spec = env.spec();
        let reference = reference_for(id).map(|r| {
            let note = match r.oracle {
                Oracle::D4rlAntMaze => " (D4RL 1.1's own code)",
                Oracle::Adroit => " (D4RL's reward sign)",
                Oracle::AdroitBinary => " (binary: success − 1, ends at the goal)",
                Oracle::Gymnasium if r.clip_action => " (actions clipped, D4RL)",
                Oracle::Gymnasium => "",
            };
            format!("{}{note}", r.gym_id)
        });
        println!(
            "{:<25} {:>4} {:>4} {:>6.3} {:>6}  {:<12} {}",
            id,
            env.observation_space().dim(),
            env.action_space().dim(),
            env.inner().dt(),
            spec.max_episode_steps.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            spec.normalization_family.as_deref().unwrap_or("-"),
            reference.unwrap_or_else(|| "-".into()),
        );
    }
    for id in o2o_envs::imaginebench::env_ids() {
        let env = o2o_envs::make(id).with_context(|| format!("making {id}"))?;
        let steps = env.spec().max_episode_steps.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{:<21} {:>4} {:>4} {:>6.3} {:>6}  {:<12} {}",
            id,
            env.observation_space().dim(),
            env.action_space().dim(),
            0.05,
            steps,
            "-",
            "scripts/imaginebench_parity.py on HalfCheetah-v4"
        );
    }
    Ok(())
}

fn parity(a: ParityArgs) -> Result<()> {
    let python = o2o_experiments::paths::venv_python();
    // ImagineBench's tasks are checked against a Python implementation of their documented rules.
    let oracle = if o2o_envs::imaginebench::is_env_id(&a.id) { "imaginebench_parity.py" } else { "gym_parity.py" };
    let script = o2o_experiments::paths::scripts_dir().join(oracle);
    let opts = ParityOptions { steps: a.steps, seed: a.seed, max_episode_steps: a.max_episode_steps };
    let r = check(&a.id, &opts, &python, &script).with_context(|| format!("parity check of {}", a.id))?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!("{} vs {}", r.id, r.reference);
        println!(
            "  {} steps, {} episodes ({} terminated, {} truncated)",
            r.steps, r.episodes, r.terminations, r.truncations
        );
        println!("  max |obs diff|     {:.3e}  (relative {:.3e})", r.max_obs_abs_diff, r.max_obs_rel_diff);
        println!("  max |reward diff|  {:.3e}  (relative {:.3e})", r.max_reward_abs_diff, r.max_reward_rel_diff);
        println!(
            "  terminated mismatches {}, truncated mismatches {}",
            r.terminated_mismatches, r.truncated_mismatches
        );
        if let Some(k) = r.first_flag_mismatch {
            println!("  first flag mismatch at step {k}");
        }
        if r.nonzero_padding > 0 {
            println!("  {} padded observation numbers were not 0", r.nonzero_padding);
        }
        println!("  {} (tolerance {:e}, relative above 1)", if r.passed() { "PASS" } else { "FAIL" }, r.tolerance);
    }
    if !r.passed() {
        bail!("{} differs from {} beyond tolerance {:e}", r.id, r.reference, r.tolerance);
    }
    Ok(())
}
