//! The on-policy loop (PPO, Uni-O4 online), next to the off-policy one in `runner.rs` and
//! sharing its preparation, evaluation, checkpoints, metrics and progress: collect a rollout of
//! `rollout.steps × rollout.num_envs` transitions from a vector env, hand it to the agent's
//! [`OnPolicy::update_rollout`], log, evaluate, checkpoint; until `train.online_steps` env steps
//! (rounded up to whole rollouts).
//!
//! Per step: observations are normalized by the agent (its running statistics updated, unless
//! frozen at the dataset's), the agent samples `a`, `log π(a|s)` and `V(s)`, the vector env steps
//! every env with `a` clipped into its box. Each row's `V(s')` is the next step's `V(s)` of the
//! same env, except where the episode ended: a termination needs none, a time-limit cut takes
//! `V` of the episode's true last observation (`final_obs`), so GAE bootstraps through the cut.
//!
//! **Exact resume at rollout boundaries.** Episodes run across rollouts, so a checkpoint falls
//! mid-episode, and an env's physics state cannot be saved through the `Env` trait. Instead every
//! env is wrapped in [`Replayable`]: episode k of env i is reset with a seed derived from the run
//! seed, i and k, and the actions since that reset are logged. A checkpoint stores, per env, the
//! episode index, those actions, the running return and length and the current observation
//! (`onpolicy.json`); a resumed run resets each env with the same seed and replays its actions,
//! which puts a deterministic simulator (MuJoCo is one) back into the same state, and checks the
//! observation it reaches against the stored one bit for bit.

use super::actor::{derive_seed, stream, ActionScale};
use super::checkpoint::{self, truncate_metrics};
use super::eval::{evaluate_run, EvalHooks};
use super::learner::namespaced;
use super::prepare::{Prepared, Start};
use super::progress::{Progress, ProgressOptions};
use super::rundir::{write_atomic, Summary, SUMMARY};
use super::state::{PhaseEval, RunnerState};
use super::{fault, interrupt};
use crate::logging::{JsonlSink, Logger, MetricSink};
use anyhow::{bail, Context, Result};
use o2o_agents::{Agent, AgentConfig, OnPolicy, Phase};
use o2o_datasets::RolloutBuffer;
use o2o_envs::env::{BoxSpace, EnvSpec, Step};
use o2o_envs::{Env, EnvError, VecEnv};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tch::Tensor;

/// The on-policy loop's part of a checkpoint folder.
pub const STATE_FILE: &str = "onpolicy.json";

/// One env's episode in progress, as a checkpoint stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EnvEpisode {
    /// Index k of the episode in progress (episodes this env finished).
    pub episode: u64,
    /// Actions given to the env since the episode's reset, row-major, in the env's units.
    pub actions: Vec<f32>,
    /// The observation the env is at.
    pub obs: Vec<f32>,
    /// Undiscounted return so far (the env's reward).
    pub ret: f64,
    /// Steps so far.
    pub length: u64,
}

/// `onpolicy.json`: every env's episode in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnPolicyState {
    /// One per env, in env order.
    pub envs: Vec<EnvEpisode>,
}

/// What [`Replayable`] shares with the loop: the episode index, the actions since the reset and,
/// on resume, the actions to replay at the next reset.
#[derive(Debug)]
struct EpisodeLog {
    run_seed: u64,
    index: u64,
    episode: u64,
    actions: Vec<f32>,
    replay: Option<Vec<f32>>,
}

impl EpisodeLog {
    /// The reset seed of this env's episode k: independent of the thread count and of resumes.
    fn seed(&self) -> u64 {
        derive_seed(self.run_seed, stream::ROLLOUT_EPISODE, (self.index << 40) | self.episode)
    }
}

/// An env whose episodes start from derived seeds and whose actions are logged, so its state
/// can be rebuilt by replay (see the module docs). `reset` ignores the seed it is given.
struct Replayable {
    inner: Box<dyn Env>,
    log: Arc<Mutex<EpisodeLog>>,
}

impl Env for Replayable {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }

    fn observation_space(&self) -> &BoxSpace {
        self.inner.observation_space()
    }

    fn action_space(&self) -> &BoxSpace {
        self.inner.action_space()
    }

    fn reset(&mut self, _seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        let mut log = self.log.lock().map_err(|_| EnvError::Other("a rollout env's log was poisoned".into()))?;
        let mut obs = self.inner.reset(Some(log.seed()))?;
        log.actions.clear();
        if let Some(actions) = log.replay.take() {
            let dim = self.inner.action_space().dim();
            for (k, a) in actions.chunks(dim).enumerate() {
                let s = self.inner.step(a)?;
                if s.done() {
                    return Err(EnvError::Other(format!("rollout env {}: episode {} ended at step {k} of replaying its checkpointed actions; the env is not deterministic, so this run cannot resume exactly", log.index, log.episode)));
                }
                obs = s.obs;
            }
            log.actions = actions;
        }
        Ok(obs)
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let s = self.inner.step(action)?;
        let mut log = self.log.lock().map_err(|_| EnvError::Other("a rollout env's log was poisoned".into()))?;
        if s.done() {
            log.episode += 1;
            log.actions.clear();
        } else {
            log.actions.extend_from_slice(action);
        }
        Ok(s)
    }
}

/// Tensors ↔ rows.
fn rows(t: &Tensor) -> Result<Vec<f32>> {
    Vec::<f32>::try_from(&t.to_device(tch::Device::Cpu).to_kind(tch::Kind::Float).flatten(0, -1))
        .context("reading a tensor back from the agent")
}

fn on_policy(agent: &mut dyn Agent) -> &mut dyn OnPolicy {
    agent.on_policy().expect("the on-policy loop runs on-policy agents only")
}

/// Run (or continue) an on-policy run to its end; see the module docs.
pub(super) fn run(
    p: Prepared<'_>,
    dir: &Path,
    extra_sinks: Vec<Box<dyn MetricSink>>,
    progress: ProgressOptions,
) -> Result<Summary> {
    let Prepared {
        config,
        device,
        start,
        mut eval_env,
        registry_env,
        offline,
        reward,
        mut agent,
        mut state,
        mut on_eval,
        mut on_checkpoint,
        warnings,
        rollout_envs,
        ..
    } = p;
    let config = &config;
    let t0 = Instant::now();
    let total = config.train.online_steps;
    let metrics_path = dir.join(super::rundir::METRICS);
    if matches!(start, Start::Resume { .. }) {
        truncate_metrics(&metrics_path, state.metrics_len)?;
    }
    let mut notes = None;
    if registry_env && extra_sinks.iter().any(|s| s.episode_logger().is_some()) {
        (eval_env, notes) = crate::logging::eval_env(&config.env, &extra_sinks)
            .with_context(|| format!("making the evaluation env {}", config.env))?;
    }
    let rng = state.rng()?;
    let mut sinks: Vec<Box<dyn MetricSink>> = vec![Box::new(JsonlSink::append(&metrics_path)?)];
    sinks.extend(extra_sinks);
    let mut logger = Logger::new(sinks);
    let progress = Progress::new(total, state.step, progress);
    let mut hooks = EvalHooks { on_eval: on_eval.take(), notes, potential: None };
    agent.set_phase(Phase::Online);
    // The dataset's statistics, when the agent normalizes with them (Uni-O4).
    if let Some(o) = &offline {
        let (mean, std) = super::unio4::column_stats(o.buffer.observations(), o.buffer.obs_dim());
        on_policy(&mut *agent).use_dataset_stats(&mean, &std);
    }

    // Uni-O4: its offline stages (cached in the run directory) and the hand-over first.
    if let (Start::Fresh, AgentConfig::Unio4(c)) = (&start, &config.agent) {
        let data = offline.as_ref().context("algo `unio4` needs a [dataset]")?;
        agent.set_phase(Phase::Offline);
        state.grad_step = super::unio4::offline(
            dir,
            c,
            data,
            &config.env,
            &mut *eval_env,
            &mut *agent,
            config.eval.episodes,
            config.seed,
            device,
            &mut logger,
        )?;
        if config.eval.at_phase_end {
            let r = evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
            state.phase_evals.push(PhaseEval {
                phase: "offline".into(),
                eval: r,
                env_step: 0,
                wall_s: t0.elapsed().as_secs_f64(),
            });
        }
    }
    // The vector env of replayable envs, at the episodes the checkpoint left (or fresh ones).
    let n = rollout_envs.len();
    let saved = match &start {
        Start::Resume { checkpoint } => {
            let path = checkpoint.join(STATE_FILE);
            let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let s: OnPolicyState =
                serde_json::from_str(&text).with_context(|| format!("{} is not an on-policy state", path.display()))?;
            if s.envs.len() != n {
                bail!("{} holds {} envs, but [rollout] num_envs is {n}", path.display(), s.envs.len());
            }
            s.envs
        }
        _ => vec![EnvEpisode::default(); n],
    };
    let logs: Vec<Arc<Mutex<EpisodeLog>>> = saved
        .iter()
        .enumerate()
        .map(|(i, e)| {
            Arc::new(Mutex::new(EpisodeLog {
                run_seed: config.seed,
                index: i as u64,
                episode: e.episode,
                actions: Vec::new(),
                replay: (!e.actions.is_empty()).then(|| e.actions.clone()),
            }))
        })
        .collect();
    let envs: Vec<Box<dyn Env>> = rollout_envs
        .into_iter()
        .zip(&logs)
        .map(|(inner, log)| Box::new(Replayable { inner, log: log.clone() }) as Box<dyn Env>)
        .collect();
    let mut venv = VecEnv::new(envs, config.rollout.threads).context("making the rollout vector env")?;
    let (obs_dim, act_dim) = (venv.single_observation_space().dim(), venv.single_action_space().dim());
    let scale = ActionScale::new(venv.single_action_space(), &config.env)?;
    let mut obs = venv.reset(None).context("resetting the rollout envs")?;
    if matches!(start, Start::Resume { .. }) {
        for (i, e) in saved.iter().enumerate() {
            if !e.obs.is_empty() && e.obs[..] != obs[i * obs_dim..(i + 1) * obs_dim] {
                bail!("rollout env {i}: replaying the checkpointed episode did not reach the checkpointed observation; {} is not deterministic, so this run cannot resume exactly", config.env);
            }
        }
    }
    let mut ep_ret: Vec<f64> = saved.iter().map(|e| e.ret).collect();
    let mut ep_len: Vec<u64> = saved.iter().map(|e| e.length).collect();

    if config.eval.at_start && state.step == 0 {
        let r = evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
        state.phase_evals.push(PhaseEval {
            phase: "start".into(),
            eval: r,
            env_step: state.env_step,
            wall_s: t0.elapsed().as_secs_f64(),
        });
    }
    if state.step == 0 {
        agent.begin_online();
    }

    let steps = config.rollout.steps;
    let mut buffer = RolloutBuffer::new(steps, n, obs_dim, act_dim);
    let mut last_episode_return = None;
    let crossed = |every: u64, from: u64, to: u64| every > 0 && to / every > from / every;
    while state.env_step < total {
        let t_rollout = Instant::now();
        let from = state.env_step;
        buffer.clear();
        // 1. Collect T steps of N envs.
        for t in 0..steps {
            let raw = Tensor::from_slice(&obs).view([n as i64, obs_dim as i64]);
            let nobs = on_policy(&mut *agent).normalize_obs(&raw, true);
            let (a, logp, v) = on_policy(&mut *agent).act_value(&nobs);
            let (a, logp, v, nobs) = (rows(&a)?, rows(&logp)?, rows(&v)?, rows(&nobs)?);
            if t > 0 {
                // V(s') of the previous step's rows whose episode went on.
                buffer.set_continuing_next_values(t - 1, &v);
            }
            let env_actions: Vec<f32> = a.chunks(act_dim).flat_map(|row| scale.to_env(row)).collect();
            let s = venv.step(&env_actions).context("stepping the rollout envs")?;
            let r: Vec<f32> = s.reward.iter().map(|x| reward.apply(*x) as f32).collect();
            buffer
                .push_step(&nobs, &a, &logp, &v, &r, &s.terminated, &s.truncated)
                .context("storing a rollout step")?;
            for i in 0..n {
                ep_ret[i] += s.reward[i];
                ep_len[i] += 1;
                if s.terminated[i] || s.truncated[i] {
                    if !s.terminated[i] {
                        // A time-limit cut: bootstrap from the episode's true last observation.
                        let last = Tensor::from_slice(s.next_obs(i)).view([1, obs_dim as i64]);
                        let nl = on_policy(&mut *agent).normalize_obs(&last, false);
                        let vl = rows(&on_policy(&mut *agent).value(&nl))?[0];
                        buffer.set_next_value(t, i, vl);
                    }
                    let mut values =
                        vec![("train/episode_return", ep_ret[i]), ("train/episode_length", ep_len[i] as f64)];
                    if let Some(ok) = s.infos[i].success {
                        values.push(("train/episode_success", if ok { 1.0 } else { 0.0 }));
                    }
                    logger.log(state.grad_step, state.env_step + i as u64 + 1, &values)?;
                    last_episode_return = Some(ep_ret[i]);
                    (ep_ret[i], ep_len[i]) = (0.0, 0);
                }
            }
            obs = s.obs;
            state.env_step += n as u64;
            state.step = state.env_step;
            progress.set(state.step, "online");
        }
        // V(s') of the last step's rows that go on into the next rollout.
        let raw = Tensor::from_slice(&obs).view([n as i64, obs_dim as i64]);
        let nl = on_policy(&mut *agent).normalize_obs(&raw, false);
        let v_last = rows(&on_policy(&mut *agent).value(&nl))?;
        buffer.set_continuing_next_values(steps - 1, &v_last);
        let collect_s = t_rollout.elapsed().as_secs_f64();
        // 2. Learn from it.
        let metrics = on_policy(&mut *agent).update_rollout(&buffer, from, total);
        state.grad_step += metrics.iter().find(|(k, _)| *k == "minibatch_updates").map_or(0, |(_, v)| *v as u64);
        state.episode = logs.iter().map(|l| l.lock().map(|l| l.episode).unwrap_or(0)).sum();
        let secs = t_rollout.elapsed().as_secs_f64().max(1e-9);
        let named: Vec<(String, f64)> = metrics.iter().map(|(k, v)| (namespaced(k), *v)).collect();
        let mut values: Vec<(&str, f64)> = vec![
            ("perf/steps_per_s", (state.env_step - from) as f64 / secs),
            ("perf/collect_s", collect_s),
            ("perf/update_s", secs - collect_s),
        ];
        values.extend(named.iter().map(|(k, v)| (k.as_str(), *v)));
        logger.log(state.grad_step, state.env_step, &values)?;
        progress.show(last_episode_return, state.last_eval.as_ref());
        // 3. Evaluate and checkpoint at the rollout boundary.
        let finished = state.env_step >= total;
        if crossed(config.eval.every, from, state.env_step) || (finished && config.eval.at_phase_end) {
            let r = evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
            if finished {
                state.phase_evals.push(PhaseEval {
                    phase: "online".into(),
                    eval: r,
                    env_step: state.env_step,
                    wall_s: t0.elapsed().as_secs_f64(),
                });
            }
            progress.show(last_episode_return, state.last_eval.as_ref());
        }
        let stop = interrupt::requested();
        if (crossed(config.checkpoint.every, from, state.env_step) || stop) && !finished {
            let envs = envs_state(&logs, &obs, obs_dim, &ep_ret, &ep_len)?;
            let ckpt = save(dir, config.checkpoint.keep, &mut state, &rng, &*agent, &envs, &mut logger)?;
            if let Some(f) = on_checkpoint.as_mut() {
                f(&ckpt, &state)?;
            }
            if stop {
                progress.finish();
                return Err(
                    interrupt::Interrupted { dir: dir.to_path_buf(), checkpoint: ckpt, step: state.step }.into()
                );
            }
        }
        fault::point("step");
    }

    // The end: a last evaluation unless one just ran, the final checkpoint, the summary.
    if state.last_eval.as_ref().is_none_or(|e| e.step != state.step) {
        evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
    }
    state.finished = true;
    let envs = envs_state(&logs, &obs, obs_dim, &ep_ret, &ep_len)?;
    let ckpt = save(dir, config.checkpoint.keep, &mut state, &rng, &*agent, &envs, &mut logger)?;
    if let Some(f) = on_checkpoint.as_mut() {
        f(&ckpt, &state)?;
    }
    progress.finish();
    let summary = Summary::finished(dir, &ckpt, &state, t0.elapsed().as_secs_f64(), warnings);
    fault::point("summary");
    super::rundir::write_json(&dir.join(SUMMARY), &summary)?;
    Ok(summary)
}

/// Every env's episode in progress, from the loop's logs.
fn envs_state(
    logs: &[Arc<Mutex<EpisodeLog>>],
    obs: &[f32],
    obs_dim: usize,
    ret: &[f64],
    len: &[u64],
) -> Result<OnPolicyState> {
    let mut envs = Vec::with_capacity(logs.len());
    for (i, log) in logs.iter().enumerate() {
        let l = log.lock().map_err(|_| anyhow::anyhow!("rollout env {i}'s log was poisoned"))?;
        envs.push(EnvEpisode {
            episode: l.episode,
            actions: l.actions.clone(),
            obs: obs[i * obs_dim..(i + 1) * obs_dim].to_vec(),
            ret: ret[i],
            length: len[i],
        });
    }
    Ok(OnPolicyState { envs })
}

/// Flush the metrics, record their length, write the checkpoint folder (agent + envs' episodes).
fn save(
    dir: &Path,
    keep: usize,
    state: &mut RunnerState,
    rng: &rand_chacha::ChaCha8Rng,
    agent: &dyn Agent,
    envs: &OnPolicyState,
    logger: &mut Logger,
) -> Result<std::path::PathBuf> {
    checkpoint::mark(dir, state, rng, logger)?;
    checkpoint::write(dir, state, keep, |tmp| {
        agent.save(&tmp.join(checkpoint::AGENT)).context("saving the agent")?;
        write_atomic(&tmp.join(STATE_FILE), serde_json::to_string(envs)?.as_bytes())
    })
}
