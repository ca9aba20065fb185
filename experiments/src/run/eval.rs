//! Deterministic evaluation: N episodes with the policy's mode on a separate env.
//!
//! Episode k of every evaluation is reset with the same seed (derived from the run seed and k),
//! so evaluations differ only through the policy, and an evaluation never touches the training
//! env or the runner's RNG (so it cannot perturb an exact resume).
//!
//! A run with a `[shaping]` section also follows its potential Φ along the evaluation episodes
//! (a read-only probe: no random draw): `eval/potential_start`, `eval/potential_mean` and
//! `eval/potential_end` (Φ of the first state, of every state, of the state the episode ended
//! in, averaged over episodes), with `eval/goal_distance_end` (the env's `distance` at the last
//! step, on goal tasks), and Φ(s_t) with each step of a recorded episode (`episode/potential` in
//! Rerun). A policy that farms progress shows as a high `potential_end` with a full-length,
//! unsuccessful episode that ends near, not at, the goal.

use super::actor::{derive_seed, stream, ActionScale, AgentPolicy, Policy};
use super::config::RunConfig;
use super::data::OfflineData;
use super::prepare::{load_checkpoint_agent, OnEval};
use super::state::{EvalResult, RunnerState};
use crate::logging::{Logger, StepNotes};
use crate::report::stats::{mean, std_dev};
use anyhow::{Context, Result};
use o2o_agents::Agent;
use o2o_datasets::ReplayBuffer;
use o2o_envs::Env;
use o2o_reward_models::Potential;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use tch::Device;

/// Run `episodes` deterministic episodes of `agent` on `env`.
pub fn evaluate(
    env: &mut dyn Env,
    agent: &mut dyn Agent,
    device: Device,
    run_seed: u64,
    episodes: usize,
    step: u64,
) -> Result<EvalResult> {
    evaluate_noted(env, agent, device, run_seed, episodes, step, None)
}

/// [`evaluate`], handing what the agent chose with each action (`Agent::act_info`: FamO2O's β)
/// to `notes` before the step, for a recording env to draw along the episode.
pub fn evaluate_noted(
    env: &mut dyn Env,
    agent: &mut dyn Agent,
    device: Device,
    run_seed: u64,
    episodes: usize,
    step: u64,
    notes: Option<&StepNotes>,
) -> Result<EvalResult> {
    Ok(evaluate_per_task(env, agent, device, run_seed, episodes, step, notes, None)?.0)
}

/// Φ along one evaluation episode.
#[derive(Default)]
struct PotentialTrace {
    start: f64,
    sum: f64,
    count: usize,
    last: f64,
    /// The env's `distance` (goal tasks) at the episode's last step.
    distance_end: Option<f64>,
}

impl PotentialTrace {
    fn push(&mut self, phi: f64) {
        if self.count == 0 {
            self.start = phi;
        }
        self.sum += phi;
        self.count += 1;
        self.last = phi;
    }
}

/// [`evaluate_noted`], with the success rate of each task of a multi-task env (episodes whose
/// last step names its task, `Info::task` = `<level>/<task>`): `eval/success/<level>/<task>`
/// over that task's episodes and `eval/success/<level>` over the level's, sorted by key (none
/// for single-task envs). This is ImagineBench's per-level, per-task report. With `potential`,
/// Φ along the episodes too (`eval/potential_start`, `_mean`, `_end`; `potential` in the notes).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_per_task(
    env: &mut dyn Env,
    agent: &mut dyn Agent,
    device: Device,
    run_seed: u64,
    episodes: usize,
    step: u64,
    notes: Option<&StepNotes>,
    mut potential: Option<&mut Potential>,
) -> Result<(EvalResult, Vec<(String, f64)>)> {
    let mut by_key: std::collections::BTreeMap<String, Vec<f64>> = std::collections::BTreeMap::new();
    let scale = ActionScale::new(env.action_space(), &env.spec().id)?;
    let mut policy = AgentPolicy { agent, device, deterministic: true };
    let mut returns = Vec::with_capacity(episodes);
    let mut lengths = Vec::with_capacity(episodes);
    let mut successes = Vec::new();
    let mut traces = Vec::new();
    for k in 0..episodes {
        let mut obs = env
            .reset(Some(derive_seed(run_seed, stream::EVAL_EPISODE, k as u64)))
            .with_context(|| format!("resetting {} for evaluation", env.spec().id))?;
        let (mut ret, mut len) = (0.0, 0u64);
        let mut trace = PotentialTrace::default();
        let mut phi = match potential.as_deref_mut() {
            Some(p) => Some(p.reset(&obs).context("Φ of an evaluation episode's first state")?),
            None => None,
        };
        loop {
            let action = policy.act(&obs)?;
            if let Some(phi) = phi {
                trace.push(phi);
            }
            if let Some(n) = notes {
                let mut values: Vec<(String, f64)> = policy
                    .agent
                    .act_info()
                    .into_iter()
                    .filter_map(|(k, v)| v.first().map(|x| (k.to_string(), *x as f64)))
                    .collect();
                values.extend(phi.map(|p| ("potential".to_string(), p)));
                n.set(values);
            }
            let s = env
                .step(&scale.to_env(&action))
                .with_context(|| format!("stepping {} in evaluation", env.spec().id))?;
            ret += s.reward;
            len += 1;
            if let Some(p) = potential.as_deref_mut() {
                phi = Some(p.step(&s.obs).context("Φ along an evaluation episode")?);
            }
            if s.done() {
                if let Some(ok) = s.info.success {
                    let v = if ok { 1.0 } else { 0.0 };
                    successes.push(v);
                    if let Some(task) = s.info.task {
                        by_key.entry(format!("eval/success/{task}")).or_default().push(v);
                        if let Some((level, _)) = task.split_once('/') {
                            by_key.entry(format!("eval/success/{level}")).or_default().push(v);
                        }
                    }
                }
                if let Some(phi) = phi {
                    trace.push(phi);
                    trace.distance_end = s.info.get("distance");
                }
                break;
            }
            obs = s.obs;
        }
        if trace.count > 0 {
            traces.push(trace);
        }
        returns.push(ret);
        lengths.push(len as f64);
        super::fault::point("eval");
    }
    let mean_return = mean(&returns);
    let std_return = std_dev(&returns);
    let normalized_score = env.spec().normalization_family.as_deref().and_then(|f| normalized_score(f, mean_return));
    let result = EvalResult {
        step,
        mean_return,
        std_return,
        mean_length: mean(&lengths),
        normalized_score,
        success_rate: (!successes.is_empty()).then(|| mean(&successes)),
    };
    let mut extra: Vec<(String, f64)> = by_key.into_iter().map(|(k, v)| (k, mean(&v))).collect();
    if !traces.is_empty() {
        let of = |f: fn(&PotentialTrace) -> f64| mean(&traces.iter().map(f).collect::<Vec<_>>());
        extra.push(("eval/potential_start".into(), of(|t| t.start)));
        extra.push(("eval/potential_mean".into(), of(|t| t.sum / t.count as f64)));
        extra.push(("eval/potential_end".into(), of(|t| t.last)));
        let distances: Vec<f64> = traces.iter().filter_map(|t| t.distance_end).collect();
        if !distances.is_empty() {
            extra.push(("eval/goal_distance_end".into(), mean(&distances)));
        }
    }
    Ok((result, extra))
}

/// Evaluate a run's checkpoint (`o2o eval`): the run's agent loaded from `checkpoint` (`step-N`,
/// or the newest), `episodes` deterministic episodes on `env` (default: a new registry env of
/// the run) with reset seeds derived from `seed`. Returns the checkpoint used and the result; a
/// run or checkpoint that cannot be read is an [`Error::RunDir`](crate::Error::RunDir) or
/// [`Error::DamagedCheckpoint`](crate::Error::DamagedCheckpoint).
pub fn evaluate_checkpoint(
    run_dir: &Path,
    checkpoint: Option<&str>,
    episodes: usize,
    seed: u64,
    env: Option<Box<dyn Env>>,
    device: Device,
) -> Result<(PathBuf, EvalResult), crate::Error> {
    if episodes == 0 {
        return Err(anyhow::anyhow!("--episodes: expected at least 1, found 0").into());
    }
    let mut loaded = load_checkpoint_agent(run_dir, checkpoint, env, device)?;
    let r = evaluate(&mut *loaded.env, &mut *loaded.agent, device, seed, episodes, loaded.state.step)?;
    Ok((loaded.folder, r))
}

/// The evaluation callback, where [`evaluate_run`] can reach it.
pub(super) struct EvalHooks<'a> {
    pub(super) on_eval: Option<&'a mut OnEval<'a>>,
    /// Where the agent's per-step choices go for the recorded evaluation episode.
    pub(super) notes: Option<crate::logging::StepNotes>,
    /// The `[shaping]` Φ, followed along evaluation episodes.
    pub(super) potential: Option<Potential>,
}

/// Evaluate the run's agent ([`evaluate_per_task`]), log under `eval/`, remember the last and
/// best results in `state`, and call the hook.
pub(super) fn evaluate_run(
    env: &mut dyn o2o_envs::Env,
    agent: &mut dyn Agent,
    device: Device,
    config: &RunConfig,
    state: &mut RunnerState,
    logger: &mut Logger,
    hooks: &mut EvalHooks,
) -> Result<EvalResult> {
    let (r, per_task) = evaluate_per_task(
        env,
        agent,
        device,
        config.seed,
        config.eval.episodes,
        state.step,
        hooks.notes.as_ref(),
        hooks.potential.as_mut(),
    )?;
    let mut values = r.values();
    values.extend(per_task.iter().map(|(k, v)| (k.as_str(), *v)));
    logger.log(state.grad_step, state.env_step, &values)?;
    // Someone may be following metrics.jsonl (`tail -f`, `o2o report` on a live run).
    logger.flush()?;
    state.record_eval(r);
    if let Some(on_eval) = hooks.on_eval.as_mut() {
        on_eval(&r, agent, state)?;
    }
    Ok(r)
}

/// The agent's read-only diagnostics on a batch of online data and on a batch of the dataset,
/// logged under `diag/online/` and `diag/offline/`. Batches come from their own RNG stream
/// (seeded by the step), so diagnostics change nothing else in the run.
pub(super) fn diagnose(
    agent: &mut dyn Agent,
    offline: Option<&OfflineData>,
    replay: Option<&ReplayBuffer>,
    config: &RunConfig,
    state: &RunnerState,
    logger: &mut Logger,
    device: Device,
) -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(config.seed, stream::DIAGNOSTICS, state.step));
    let rows = config.diagnostics.batch;
    let mut values: Vec<(String, f64)> = Vec::new();
    // A buffer that hands out finished episodes only (Cal-QL's Monte-Carlo returns) has nothing
    // to sample before the first episode ends (1000 steps on HalfCheetah): no online record then.
    if let Some(r) = replay.filter(|r| r.sampleable_len() > 0) {
        let b = r
            .sample(rows.min(r.sampleable_len()), &mut rng, device)
            .context("sampling a diagnostic batch of online data")?;
        values.extend(agent.diagnose(&b).into_iter().map(|(k, v)| (format!("diag/online/{k}"), v)));
        for s in agent.diagnose_rows(&b) {
            logger.scatter(state.grad_step, state.env_step, &format!("diag/online/{}", s.name), &s.x, &s.y)?;
        }
    }
    if let Some(o) = offline {
        let b = o.buffer.sample(rows, &mut rng, device).context("sampling a diagnostic batch of the dataset")?;
        values.extend(agent.diagnose(&b).into_iter().map(|(k, v)| (format!("diag/offline/{k}"), v)));
        for s in agent.diagnose_rows(&b) {
            logger.scatter(state.grad_step, state.env_step, &format!("diag/offline/{}", s.name), &s.x, &s.y)?;
        }
    }
    if !values.is_empty() {
        let named: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        logger.log(state.grad_step, state.env_step, &named)?;
    }
    Ok(())
}

/// D4RL normalized score ×100 (algorithms.md §7.1), from the datasets crate's table.
fn normalized_score(family: &str, ret: f64) -> Option<f64> {
    o2o_datasets::scores::normalized_score(family, ret).ok()
}
