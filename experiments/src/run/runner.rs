//! One run, read top to bottom: [`prepare`] (in `prepare.rs`) builds the envs, data and agent
//! and restores or starts the state (everything that can fail on bad input, before the run
//! directory exists); [`Prepared::run`] loops over the phases (act, learn, log, evaluate,
//! checkpoint) and finishes with a last evaluation, a final checkpoint and `summary.json`. An
//! on-policy agent runs the on-policy loop instead (`onpolicy.rs`); both share evaluation
//! (`eval.rs`), checkpoints (`checkpoint.rs`) and the runner's state (`state.rs`).
//!
//! Exact resume: everything random goes through the runner RNG (batch draws, random actions),
//! the agent's own RNG (inside its checkpoint) or per-episode env seeds derived from the run
//! seed; online checkpoints are taken at episode boundaries; `metrics.jsonl` is cut back to its
//! length at the checkpoint. So a run killed and resumed writes the same numbers as one that
//! never stopped (wall-time fields `wall_s` and `perf/*` aside).

use super::actor::{AgentPolicy, Policy, TransitionSink, UniformPolicy};
use super::checkpoint::{self, truncate_metrics};
use super::config::{OfflineMix, RunConfig, TrainConfig};
use super::data::Tee;
use super::eval::{diagnose, evaluate_run, EvalHooks};
use super::learner::{self, namespaced, ReplaySink, Source};
use super::phases::{self, PhaseKind};
use super::prepare::{prepare, Hooks, Prepared, Start};
use super::progress::{Progress, ProgressOptions};
use super::rundir::{self, Manifest, Summary, DATASET, MANIFEST, METRICS, SUMMARY};
use super::shaping::{ShapedEpisode, ShapingSink};
use super::state::PhaseEval;
use super::{fault, interrupt};
use crate::logging::{JsonlSink, Logger, MetricSink};
use anyhow::{Context, Result};
use o2o_agents::{Metrics, Phase};
use o2o_datasets::MixedSampler;
use std::path::Path;
use std::time::Instant;
use tch::Device;

/// Online rows the replay buffer needs before the first online update: the online share of a
/// batch (RLPD and WSRL wait for `batch · (1 − ratio)` online rows, fidelity-audit D21), one row
/// when the dataset and the online data are sampled as one buffer, the whole batch otherwise.
/// A non-finite action is the agent's doing: say so with the update number and the newest
/// update's losses (other errors pass unchanged).
fn blame_the_agent(e: anyhow::Error, grad_step: u64, last: Option<&(u64, Metrics)>) -> anyhow::Error {
    if e.downcast_ref::<super::actor::NonFiniteAction>().is_none() {
        return e;
    }
    let losses = match last {
        Some((at, m)) => {
            let shown: Vec<String> = m.iter().map(|(k, v)| format!("{k} = {v:.4e}")).collect();
            format!("the losses of update {at}: {}", shown.join(", "))
        }
        None => "no update has run yet".to_string(),
    };
    e.context(format!(
        "after {grad_step} updates the agent's output is not finite; {losses} \
         (a learning rate too large or a diverged critic; see metrics.jsonl)"
    ))
}

fn online_rows_needed(train: &TrainConfig, has_offline_data: bool) -> usize {
    let batch = train.online_batch();
    match (has_offline_data, train.offline_mix) {
        (true, OfflineMix::Proportional) => 1,
        (true, OfflineMix::Fixed) if train.offline_ratio > 0.0 => {
            let offline_rows = MixedSampler::new(train.offline_ratio).map_or(0, |m| m.offline_count(batch));
            (batch - offline_rows).max(1)
        }
        _ => batch,
    }
}

impl Prepared<'_> {
    /// Run (or continue) the run in `dir` to its end, logging to `metrics.jsonl` and
    /// `extra_sinks`. Stops early with [`Interrupted`](super::interrupt::Interrupted) (a checkpoint written) when a stop was
    /// requested ([`super::interrupt`]).
    pub fn run(
        mut self,
        dir: &Path,
        extra_sinks: Vec<Box<dyn MetricSink>>,
        progress: ProgressOptions,
    ) -> Result<Summary> {
        if self.agent.on_policy().is_some() {
            return super::onpolicy::run(self, dir, extra_sinks, progress);
        }
        let Prepared {
            config,
            device,
            start,
            mut eval_env,
            registry_env,
            mut actor,
            offline,
            reward,
            mut agent,
            sera,
            mut replay,
            mut interventions,
            mut recorder,
            mut shaper,
            eval_potential,
            mut state,
            mut on_eval,
            mut on_checkpoint,
            warnings,
            rollout_envs: _,
            instruction_embeddings: _,
        } = self;
        let config = &config;
        let t0 = Instant::now();
        let plan = phases::plan(&config.train);
        let total = phases::total_steps(&plan);
        let metrics_path = dir.join(METRICS);
        if matches!(start, Start::Resume { .. }) {
            truncate_metrics(&metrics_path, state.metrics_len)?;
        }
        // With a Rerun sink, the evaluation env also records episode 0 of each evaluation in 3D.
        let mut notes = None;
        if registry_env && extra_sinks.iter().any(|s| s.episode_logger().is_some()) {
            (eval_env, notes) = crate::logging::eval_env(&config.env, &extra_sinks)
                .with_context(|| format!("making the evaluation env {}", config.env))?;
        }
        let mut rng = state.rng()?;
        let mut sinks: Vec<Box<dyn MetricSink>> = vec![Box::new(JsonlSink::append(&metrics_path)?)];
        sinks.extend(extra_sinks);
        let mut logger = Logger::new(sinks);
        let progress = Progress::new(total, state.step, progress);
        let mut last_episode_return = None;
        let mut shaped_episode = ShapedEpisode::default();
        let mut hooks = EvalHooks { on_eval: on_eval.take(), notes, potential: eval_potential };

        // The offline→online switch: the first env step after offline training (step 0 for a run
        // that starts from an offline parent or learns online from scratch).
        let switch_step = plan.iter().position(|p| p.kind.steps_env()).map(|i| phases::total_steps(&plan[..i]));
        let wall = |t0: Instant| t0.elapsed().as_secs_f64();
        if config.eval.at_start && state.step == 0 {
            let r = evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
            state.phase_evals.push(PhaseEval {
                phase: "start".into(),
                eval: r,
                env_step: state.env_step,
                wall_s: wall(t0),
            });
            diagnose(&mut *agent, offline.as_ref(), replay.as_ref(), config, &state, &mut logger, device)?;
        }

        // The loop: one iteration is one gradient step (offline) or one env step (online).
        let mut pending_checkpoint = false;
        let mut last_log = (Instant::now(), state.step);
        // Seconds sampling and updating since the last log line (`perf/sample_s`, `perf/update_s`).
        let mut learn_time = learner::LearnTime::default();
        let mut agent_phase = None;
        // The newest update's losses and its update number, named if the agent's action turns
        // non-finite (a diverged agent, not the env, is then to blame).
        let mut last_losses: Option<(u64, Metrics)> = None;
        while state.step < total {
            let phase = phases::phase_at(&plan, state.step).expect("step < total");
            // The agent applies its phase-paired settings (Cal-QL's online calibration switch).
            let now = if phase.kind == PhaseKind::Offline { Phase::Offline } else { Phase::Online };
            if agent_phase != Some(now) {
                agent.set_phase(now);
                agent_phase = Some(now);
            }
            if Some(state.step) == switch_step {
                agent.begin_online();
            }
            let mut metrics: Option<Metrics> = None;
            match phase.kind {
                PhaseKind::Offline => {
                    let data = offline.as_ref().context("an offline phase needs [dataset]")?;
                    metrics = Some(learner::learn_timed(
                        &mut *agent,
                        &data.source(),
                        config.train.batch_size,
                        1,
                        &mut rng,
                        device,
                        None,
                        &mut learn_time,
                    )?);
                    state.grad_step += 1;
                }
                PhaseKind::Random | PhaseKind::Warmup | PhaseKind::Online => {
                    let (actor, replay) = (
                        actor.as_mut().expect("env phases have an actor"),
                        replay.as_mut().expect("and a replay buffer"),
                    );
                    let mut replay_sink = ReplaySink { replay, reward, interventions: interventions.as_mut() };
                    let mut sink: &mut dyn TransitionSink = &mut replay_sink;
                    let mut shaped;
                    if let Some(shaper) = shaper.as_mut() {
                        shaped = ShapingSink { inner: sink, shaper, episode: &mut shaped_episode };
                        sink = &mut shaped;
                    }
                    let mut tee;
                    if let Some(rec) = recorder.as_mut() {
                        tee = Tee { first: sink, second: rec };
                        sink = &mut tee;
                    }
                    let ended = if phase.kind == PhaseKind::Random {
                        let dim = actor.act_dim();
                        actor.step(&mut UniformPolicy { rng: &mut rng, dim }, sink)?
                    } else {
                        actor
                            .step(
                                &mut AgentPolicy { agent: &mut *agent, device, deterministic: false }
                                    as &mut dyn Policy,
                                sink,
                            )
                            .map_err(|e| blame_the_agent(e, state.grad_step, last_losses.as_ref()))?
                    };
                    let replay = replay_sink.replay;
                    let interventions = replay_sink.interventions;
                    state.env_step += 1;
                    state.episode = actor.episode();
                    if let Some(ep) = ended {
                        let mut values =
                            vec![("train/episode_return", ep.ret), ("train/episode_length", ep.length as f64)];
                        if let Some(s) = ep.success {
                            values.push(("train/episode_success", if s { 1.0 } else { 0.0 }));
                        }
                        if shaper.is_some() {
                            values.extend(shaped_episode.take_metrics());
                        }
                        logger.log(state.grad_step, state.env_step, &values)?;
                        last_episode_return = Some(ep.ret);
                    }
                    let batch_size = config.train.online_batch();
                    if phase.kind == PhaseKind::Online
                        && replay.sampleable_len()
                            >= online_rows_needed(&config.train, offline.is_some()).min(replay.capacity())
                    {
                        let source = match offline.as_ref() {
                            Some(o) if config.train.offline_mix == OfflineMix::Proportional => {
                                Source::Union { offline: &o.buffer, online: replay }
                            }
                            Some(o) if config.train.offline_ratio > 0.0 => Source::Mixed {
                                offline: &o.buffer,
                                online: replay,
                                sampler: MixedSampler::new(config.train.offline_ratio)?,
                            },
                            _ => Source::Online(replay),
                        };
                        let source = match interventions.as_deref() {
                            Some(b) => Source::Interventions {
                                base: Box::new(source),
                                interventions: b,
                                share: config.train.intervention_share,
                            },
                            None => source,
                        };
                        let n = config.train.updates_per_step;
                        metrics = Some(learner::learn_timed(
                            &mut *agent,
                            &source,
                            batch_size,
                            n,
                            &mut rng,
                            device,
                            sera.as_ref(),
                            &mut learn_time,
                        )?);
                        state.grad_step += n as u64;
                    }
                }
            }
            if let Some(m) = &metrics {
                last_losses = Some((state.grad_step, m.clone()));
            }
            state.step += 1;
            progress.set(state.step, phase.kind.name());

            if state.step % config.train.log_every == 0 {
                let secs = last_log.0.elapsed().as_secs_f64().max(1e-9);
                let mut values: Vec<(&str, f64)> = vec![
                    ("perf/steps_per_s", (state.step - last_log.1) as f64 / secs),
                    ("perf/sample_s", learn_time.sample_s),
                    ("perf/update_s", learn_time.update_s),
                ];
                learn_time = learner::LearnTime::default();
                // Only metrics of an update made at this very step, so the log depends on nothing
                // but the step (and a resumed run logs exactly the same).
                let named: Vec<(String, f64)> = metrics.iter().flatten().map(|(k, v)| (namespaced(k), *v)).collect();
                values.extend(named.iter().map(|(k, v)| (k.as_str(), *v)));
                logger.log(state.grad_step, state.env_step, &values)?;
                last_log = (Instant::now(), state.step);
                progress.show(last_episode_return, state.last_eval.as_ref());
            }
            let phase_ended = phases::phase_at(&plan, state.step).map(|p| p.kind) != Some(phase.kind);
            let periodic = config.eval.every > 0 && state.step % config.eval.every == 0;
            if periodic || (phase_ended && config.eval.at_phase_end) {
                let r = evaluate_run(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
                if phase_ended {
                    state.phase_evals.push(PhaseEval {
                        phase: phase.kind.name().into(),
                        eval: r,
                        env_step: state.env_step,
                        wall_s: wall(t0),
                    });
                }
                progress.show(last_episode_return, state.last_eval.as_ref());
            }
            let d = &config.diagnostics;
            let near_switch = switch_step.is_some_and(|s| state.step.abs_diff(s) <= d.window);
            if d.every > 0
                && (state.step % d.every == 0 || (near_switch && state.step % d.dense_every == 0) || periodic)
            {
                diagnose(&mut *agent, offline.as_ref(), replay.as_ref(), config, &state, &mut logger, device)?;
            }
            if config.checkpoint.every > 0 && state.step % config.checkpoint.every == 0 {
                pending_checkpoint = true;
            }
            // Online, wait for the episode to end: the env's mid-episode state is never saved.
            let at_boundary =
                actor.as_ref().is_none_or(|a| a.at_episode_boundary()) || phase.kind == PhaseKind::Offline;
            let stop = interrupt::requested();
            if (pending_checkpoint || stop) && at_boundary && state.step < total {
                let ckpt = checkpoint::save(
                    dir,
                    config,
                    &mut state,
                    &rng,
                    &*agent,
                    replay.as_ref(),
                    interventions.as_ref(),
                    recorder.as_ref(),
                    &mut logger,
                )?;
                if let Some(f) = on_checkpoint.as_mut() {
                    f(&ckpt, &state)?;
                }
                pending_checkpoint = false;
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
            diagnose(&mut *agent, offline.as_ref(), replay.as_ref(), config, &state, &mut logger, device)?;
        }
        state.finished = true;
        let ckpt = checkpoint::save(
            dir,
            config,
            &mut state,
            &rng,
            &*agent,
            replay.as_ref(),
            interventions.as_ref(),
            recorder.as_ref(),
            &mut logger,
        )?;
        if let Some(f) = on_checkpoint.as_mut() {
            f(&ckpt, &state)?;
        }
        if let Some(rec) = &recorder {
            rec.write(&dir.join(DATASET))?;
        }
        progress.finish();
        let summary = Summary::finished(dir, &ckpt, &state, t0.elapsed().as_secs_f64(), warnings);
        fault::point("summary");
        rundir::write_json(&dir.join(SUMMARY), &summary)?;
        Ok(summary)
    }
}

/// Run (or continue) the run in `dir` to its end: [`prepare`], then [`Prepared::run`].
/// `manifest` is written (with the dataset's details filled in) for a new run; a resumed run
/// passes `None` and keeps its manifest.
pub fn execute_with(
    dir: &Path,
    config: &RunConfig,
    device: Device,
    start: Start,
    extra_sinks: Vec<Box<dyn MetricSink>>,
    manifest: Option<Manifest>,
    hooks: Hooks,
) -> Result<Summary> {
    let prepared = prepare(config, device, start, hooks)?;
    if let Some(mut m) = manifest {
        m.dataset = prepared.dataset_info().cloned();
        m.instruction_embeddings = prepared.instruction_embeddings().map(str::to_string);
        rundir::write_json(&dir.join(MANIFEST), &m)?;
    }
    prepared.run(dir, extra_sinks, ProgressOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first online update waits for the online share of a batch only (fidelity-audit D21):
    /// RLPD's 20 × 256 rows half offline need 2560 online rows, not 5120.
    #[test]
    fn first_update_waits_for_the_online_share_only() {
        let t = |ratio: f64, mix: OfflineMix| TrainConfig {
            batch_size: 5120,
            offline_ratio: ratio,
            offline_mix: mix,
            ..TrainConfig::default()
        };
        assert_eq!(online_rows_needed(&t(0.5, OfflineMix::Fixed), true), 2560);
        assert_eq!(online_rows_needed(&t(0.5, OfflineMix::Fixed), false), 5120);
        assert_eq!(online_rows_needed(&t(0.0, OfflineMix::Fixed), true), 5120);
        assert_eq!(online_rows_needed(&t(1.0, OfflineMix::Fixed), true), 1);
        assert_eq!(online_rows_needed(&t(0.0, OfflineMix::Proportional), true), 1);
    }
}
