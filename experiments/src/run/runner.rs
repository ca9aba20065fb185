//! One run, read top to bottom: [`prepare`] builds the envs, data and agent and restores or
//! starts the state (everything that can fail on bad input, before the run directory exists);
//! [`Prepared::run`] loops over the phases (act, learn, log, evaluate, checkpoint) and finishes
//! with a last evaluation, a final checkpoint and `summary.json`.
//!
//! Exact resume: everything random goes through the runner RNG (batch draws, random actions),
//! the agent's own RNG (inside its checkpoint) or per-episode env seeds derived from the run
//! seed; online checkpoints are taken at episode boundaries; `metrics.jsonl` is cut back to its
//! length at the checkpoint. So a run killed and resumed writes the same numbers as one that
//! never stopped (wall-time fields `wall_s` and `perf/*` aside).

use super::actor::{derive_seed, stream, ActionScale, Actor, AgentPolicy, Policy, TransitionSink, UniformPolicy};
use super::checkpoint::{self, PhaseEval, RunnerState};
use super::config::{OfflineMix, RunConfig};
use super::data::{self, OfflineData, Recorder, Tee};
use super::eval::{self, EvalResult};
use super::learner::{self, ReplaySink, RewardTransform, Source};
use super::phases::{self, PhaseKind};
use super::progress::{Progress, ProgressOptions};
use super::rundir::{self, DatasetInfo, Manifest, DATASET, MANIFEST, METRICS, SUMMARY};
use super::shaping::{self, ShapedEpisode, ShapingSink};
use super::{fault, interrupt};
use crate::logging::{JsonlSink, Logger, MetricSink};
use anyhow::{bail, Context, Result};
use o2o_agents::sera::Sera;
use o2o_agents::{Agent, Metrics, Phase};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::{MixedSampler, ReplayBuffer};
use o2o_envs::Env;
use o2o_reward_models::Shaper;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// How a run begins.
pub enum Start {
    /// Step 0 with a freshly initialized agent.
    Fresh,
    /// Step 0 with the agent state of another run's checkpoint (fine-tuning).
    FromParent {
        /// The parent's checkpoint folder.
        checkpoint: PathBuf,
    },
    /// Where a checkpoint of this run left off.
    Resume {
        /// The checkpoint folder to continue from.
        checkpoint: PathBuf,
    },
}

/// `summary.json`: how the run ended.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Summary {
    /// The run reached its last step.
    pub finished: bool,
    /// Loop steps done.
    pub steps: u64,
    /// Gradient updates done.
    pub grad_steps: u64,
    /// Env steps done.
    pub env_steps: u64,
    /// Training episodes finished.
    pub episodes: u64,
    /// Seconds this process ran (a resumed run counts only its own part).
    pub wall_s: f64,
    /// The last evaluation.
    pub final_eval: Option<EvalResult>,
    /// The best evaluation (by mean return).
    pub best_eval: Option<EvalResult>,
    /// Evaluations at the start and at the end of each phase (`eval.at_start`,
    /// `eval.at_phase_end`).
    pub phase_evals: Vec<PhaseEval>,
    /// The final checkpoint, relative to the run directory.
    pub checkpoint: String,
    /// What the budget made useless (e.g. a fine-tuning phase with no updates).
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Summary {
    /// The summary of a run that finished with the checkpoint `ckpt` holding `state`.
    pub fn finished(dir: &Path, ckpt: &Path, state: &RunnerState, wall_s: f64, warnings: Vec<String>) -> Self {
        Self {
            finished: true,
            steps: state.step,
            grad_steps: state.grad_step,
            env_steps: state.env_step,
            episodes: state.episode,
            wall_s,
            final_eval: state.last_eval,
            best_eval: state.best_eval,
            phase_evals: state.phase_evals.clone(),
            checkpoint: ckpt.strip_prefix(dir).unwrap_or(ckpt).display().to_string(),
            warnings,
        }
    }
}

/// A function that makes a fresh env of the run: called once for the env the agent acts in and
/// once for the evaluation env (never the same env, so evaluation cannot disturb a training
/// episode), and again whenever the run is resumed.
pub type EnvFactory = std::sync::Arc<dyn Fn() -> Result<Box<dyn Env>> + Send + Sync>;

/// Called after every evaluation (the final one included) with its result, the agent as
/// evaluated and the runner's counters at that moment.
pub type OnEval<'a> = dyn FnMut(&EvalResult, &dyn Agent, &RunnerState) -> Result<()> + 'a;

/// Called after every checkpoint (the final one included) with its folder and the runner's
/// counters it holds.
pub type OnCheckpoint<'a> = dyn FnMut(&Path, &RunnerState) -> Result<()> + 'a;

/// What a caller can put into a run besides its config. `Hooks::default()` is a plain run of
/// registry envs and dataset files (`o2o train`); [`Run`](super::builder::Run) fills them from
/// its builder calls, and `o2o dataset make-benchmark` snapshots the policy at evaluations and
/// records simulator states through them.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Makes the run's envs, instead of `o2o_envs::make(config.env)`; each env's id must be
    /// `config.env`.
    pub env: Option<EnvFactory>,
    /// The env to act in, instead of a new one (e.g. one wrapped to log qpos/qvel); it must be
    /// the config's env.
    pub actor_env: Option<Box<dyn Env>>,
    /// The offline data of a config with `dataset.in_memory = true`.
    pub dataset: Option<D4rlDataset>,
    /// See [`OnEval`].
    pub on_eval: Option<&'a mut OnEval<'a>>,
    /// See [`OnCheckpoint`].
    pub on_checkpoint: Option<&'a mut OnCheckpoint<'a>>,
}

impl Hooks<'_> {
    /// A new env of the run: from the factory, or the registry's env `id`.
    fn make_env(&self, id: &str) -> Result<Box<dyn Env>> {
        let env = match &self.env {
            Some(make) => make().with_context(|| format!("making the env {id} with the run's env factory"))?,
            None => return o2o_envs::make(id).with_context(|| format!("making the env {id}{}", custom_env_hint(id))),
        };
        if env.spec().id != id {
            bail!("the env factory made an env with id {:?}, but the run's config says env = {id:?}", env.spec().id);
        }
        Ok(env)
    }
}

/// For an id the registry does not know: how a run on an env of one's own continues.
fn custom_env_hint(id: &str) -> String {
    if id.to_ascii_lowercase().starts_with("antmaze") {
        return " — AntMaze ids are D4RL's: antmaze-{umaze,umaze-diverse,medium-play,medium-diverse,large-play,large-diverse}-{v2,v0}".into();
    }
    if o2o_envs::make(id).is_err() {
        format!(" (if {id} is an env of your own, continue the run from Rust: Run::resume(dir)?.env(make_env).run())")
    } else {
        String::new()
    }
}

/// Build the agent a config describes, on `device`, seeded from the run seed.
pub fn build_agent(config: &RunConfig, obs_dim: usize, act_dim: usize, device: Device) -> Result<Box<dyn Agent>> {
    let agent_config = config.agent_config()?;
    o2o_agents::build(&agent_config, obs_dim, act_dim, device, derive_seed(config.seed, stream::AGENT, 0))
        .with_context(|| format!("building the {} agent from [agent] in the config", config.algo))
}

/// A checkpoint that could not be loaded (truncated, missing a file, not this agent's): the
/// context of the error [`prepare`] returns, so a caller can fall back to an older checkpoint.
#[derive(Debug, Clone)]
pub struct DamagedCheckpoint {
    /// The checkpoint folder.
    pub path: PathBuf,
}

impl std::fmt::Display for DamagedCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "checkpoint {} cannot be loaded", self.path.display())
    }
}

/// Everything a run needs, made and checked before its run directory is created (a new run) or
/// touched (a resumed one): the envs, the offline data, the agent with its starting state, the
/// replay buffer and the runner's counters. A bad env id, dataset, parent checkpoint or agent
/// config fails here, leaving nothing behind.
pub struct Prepared<'a> {
    pub(super) config: RunConfig,
    pub(super) device: Device,
    pub(super) start: Start,
    pub(super) eval_env: Box<dyn Env>,
    /// The eval env is the registry's (so a Rerun sink may record it in 3D).
    pub(super) registry_env: bool,
    pub(super) actor: Option<Actor>,
    pub(super) offline: Option<OfflineData>,
    pub(super) reward: RewardTransform,
    pub(super) agent: Box<dyn Agent>,
    /// SERA's bonus for online batches, when `[sera] enabled`.
    pub(super) sera: Option<Sera>,
    pub(super) replay: Option<ReplayBuffer>,
    /// HIL-SERL's intervention buffer, when `train.intervention_share > 0`.
    pub(super) interventions: Option<ReplayBuffer>,
    pub(super) recorder: Option<Recorder>,
    /// The `[shaping]` reward of online transitions (the dataset's rows were shaped at load).
    pub(super) shaper: Option<Shaper>,
    pub(super) state: RunnerState,
    pub(super) on_eval: Option<&'a mut OnEval<'a>>,
    pub(super) on_checkpoint: Option<&'a mut OnCheckpoint<'a>>,
    pub(super) warnings: Vec<String>,
    /// The on-policy loop's envs (`rollout.num_envs` of them), for an on-policy agent.
    pub(super) rollout_envs: Vec<Box<dyn Env>>,
    /// ImagineBench: where the instruction vectors came from, in words.
    pub(super) instruction_embeddings: Option<String>,
}

/// Make and check everything the run `config` needs (see [`Prepared`]).
pub fn prepare<'a>(config: &RunConfig, device: Device, start: Start, mut hooks: Hooks<'a>) -> Result<Prepared<'a>> {
    let plan = phases::plan(&config.train);
    // An on-policy agent (PPO) collects rollouts from a vector env instead (`onpolicy.rs`): no
    // replay buffer, no single acting env.
    let on_policy = config.agent_config()?.is_on_policy();
    let needs_env = plan.iter().any(|p| p.kind.steps_env()) && !on_policy;

    // ImagineBench: the env is built from `[imaginebench]` with the run's instruction encoder,
    // which the dataset's rows get their vectors from too.
    let ib_encoder = match super::imaginebench::env_options(config)? {
        Some(opts) => {
            if hooks.env.is_none() {
                hooks.env = super::imaginebench::env_factory(config)?;
            }
            Some(opts.encoder)
        }
        None => None,
    };
    let instruction_embeddings = ib_encoder.as_ref().map(|e| e.describe());

    // Envs: one to act in, one to evaluate on (never the same, so evaluation cannot disturb
    // the training episode).
    let registry_env = hooks.env.is_none();
    let eval_env = hooks.make_env(&config.env).context("making the evaluation env")?;
    let obs_dim = eval_env.observation_space().dim();
    let act_dim = eval_env.action_space().dim();

    // Monte-Carlo returns-to-go in the agent's rewards, for algorithms that need them (Cal-QL):
    // computed for the dataset here and for online episodes by the replay buffer.
    let gamma = config.agent.get("gamma").and_then(|g| g.as_float()).unwrap_or(0.99) as f32;
    let mc = data::mc_config(config, gamma)?;
    let needs_data = config.train.offline_steps > 0 || config.train.mixes_offline_data();
    // The agent (its own seeded random stream: building it first changes no draw).
    let mut agent = build_agent(config, obs_dim, act_dim, device)?;
    // `[shaping]`: one shaper, with the built agent's discount (E12), for the online rows and
    // for the dataset's rows at load (E10), so every row of a mixed batch carries its F.
    let mut shaper = match &config.shaping {
        Some(s) if s.enabled && (needs_env || needs_data) => Some(shaping::shaper(s, &*agent, obs_dim)?),
        _ => None,
    };
    // Offline data, with its reward transform (which online rewards get too), and its MC
    // returns (for Cal-QL, and for diagnostics). A run that trains on online data only still
    // loads the dataset when it can, for the reward transform and the `diag/offline/` values;
    // without the file it goes on unless the reward preset needs the data.
    let offline: Option<OfflineData> = match &config.dataset {
        None => None,
        Some(d) if d.is_imaginebench() => {
            let encoder = match &ib_encoder {
                Some(e) => e.clone(),
                None => super::imaginebench::encoder(config)?,
            };
            Some(super::imaginebench::load(
                d,
                &encoder,
                eval_env.action_space(),
                &config.env,
                obs_dim,
                act_dim,
                Some(data::dataset_mc_config(config, gamma)?),
            )?)
        }
        Some(d) => match data::load_shaped(
            d,
            hooks.dataset.take(),
            eval_env.action_space(),
            &config.env,
            obs_dim,
            act_dim,
            eval_env.spec().max_episode_steps,
            Some(data::dataset_mc_config(config, gamma)?),
            shaper.as_mut(),
        ) {
            Ok(o) => Some(o),
            // Data handed over in memory is part of the run (its diagnostics too): never optional.
            Err(e) if needs_data || d.in_memory => return Err(e),
            Err(e) if d.reward != "none" => {
                return Err(e.context(format!(
                    "the dataset sets the reward transform `{}` that online rewards must get too",
                    d.reward
                )))
            }
            Err(e) => {
                eprintln!("note: no offline data in this run ({e:#}); diagnostics on dataset actions are skipped");
                None
            }
        },
    };
    let reward = offline.as_ref().map_or(RewardTransform::IDENTITY, |o| o.reward);

    // Replay buffer, runner state.
    let mut replay = if needs_env {
        let mc = mc.unwrap_or(McConfig::dense(gamma));
        Some(
            ReplayBuffer::with_mc(config.train.replay_capacity, obs_dim, act_dim, mc)
                .context("creating the replay buffer")?,
        )
    } else {
        None
    };
    let mut interventions = if needs_env && config.train.intervention_share > 0.0 {
        let mc = mc.unwrap_or(McConfig::dense(gamma));
        Some(
            ReplayBuffer::with_mc(config.train.replay_capacity, obs_dim, act_dim, mc)
                .context("creating the intervention buffer")?,
        )
    } else {
        None
    };
    let state = match &start {
        Start::Fresh => {
            // Algorithms that normalize states take the offline data's statistics (TD3+BC, BC).
            if let Some(o) = &offline {
                let (mean, std) = o.state_stats();
                agent.set_state_stats(&mean, &std).context("handing the dataset's state statistics to the agent")?;
            }
            initial_state(config)
        }
        Start::FromParent { checkpoint } => {
            let p = checkpoint.join(checkpoint::AGENT);
            agent.load(&p).with_context(|| format!("loading the parent agent from {}", p.display()))?;
            initial_state(config)
        }
        Start::Resume { checkpoint } => {
            let damaged = || DamagedCheckpoint { path: checkpoint.clone() };
            let state = checkpoint::read_state(checkpoint).context(damaged())?;
            let p = checkpoint.join(checkpoint::AGENT);
            agent.load(&p).with_context(|| format!("loading the agent from {}", p.display())).context(damaged())?;
            if let Some(r) = replay.as_mut() {
                let p = checkpoint.join(checkpoint::REPLAY);
                if state.env_step > 0 || p.exists() {
                    *r = ReplayBuffer::load(&p)
                        .with_context(|| format!("loading the replay buffer from {}", p.display()))
                        .context(damaged())?;
                }
            }
            if let Some(b) = interventions.as_mut() {
                let p = checkpoint.join(checkpoint::INTERVENTIONS);
                if p.exists() {
                    *b = ReplayBuffer::load(&p)
                        .with_context(|| format!("loading the intervention buffer from {}", p.display()))
                        .context(damaged())?;
                }
            }
            state
        }
    };
    // Hindsight relabelling of online batches (`[replay] her`), from the env's goal layout, and
    // rows of the episode in progress left out of online batches when the agent uses MC returns
    // or HER relabels (`[replay] closed_episodes_only`, fidelity-audit D13, fidelity-audit-2 E13).
    if let Some(r) = replay.as_mut() {
        super::her::configure_replay(r, config, eval_env.spec(), obs_dim, reward, mc.is_some())?;
    } else if config.replay.her_enabled() {
        bail!("key `replay.her` = \"future\" relabels the online replay buffer, but this run has no online steps");
    }
    if let Some(b) = interventions.as_mut() {
        b.set_closed_episodes_only(config.replay.closed_episodes_only_for(mc.is_some()));
    }
    // The run's own experience as a D4RL dataset, when asked for (continued on resume).
    let recorder = if config.train.record_dataset && needs_env {
        let scale = ActionScale::new(eval_env.action_space(), &config.env)?;
        Some(match &start {
            Start::Resume { checkpoint } => Recorder::resume(&checkpoint.join(checkpoint::DATASET), scale)
                .context(DamagedCheckpoint { path: checkpoint.clone() })?,
            _ => Recorder::new(obs_dim, scale),
        })
    } else {
        None
    };
    let actor = if needs_env {
        let env = match hooks.actor_env.take() {
            Some(env) => env,
            None => hooks.make_env(&config.env)?,
        };
        Some(Actor::new(env, config.seed, state.episode)?)
    } else {
        None
    };
    let rollout_envs = if on_policy {
        (0..config.rollout.num_envs)
            .map(|i| hooks.make_env(&config.env).with_context(|| format!("making rollout env {i}")))
            .collect::<Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    let sera = if config.sera.enabled {
        Some(sera_for(config, &*agent, offline.as_ref(), obs_dim, act_dim, device)?)
    } else {
        None
    };
    // The online rows are shaped only when the run steps an env.
    let shaper = if needs_env { shaper } else { None };
    let warnings = budget_warnings(config);
    Ok(Prepared {
        config: config.clone(),
        device,
        start,
        eval_env,
        registry_env,
        actor,
        offline,
        reward,
        agent,
        sera,
        replay,
        interventions,
        recorder,
        shaper,
        state,
        on_eval: hooks.on_eval,
        on_checkpoint: hooks.on_checkpoint,
        warnings,
        rollout_envs,
        instruction_embeddings,
    })
}

/// SERA's bonus for this run: the `[sera]` config, the dataset's state statistics when it
/// standardizes states, and a check that the agent has a critic to condition on.
fn sera_for(
    config: &RunConfig,
    agent: &dyn Agent,
    offline: Option<&OfflineData>,
    obs_dim: usize,
    act_dim: usize,
    device: Device,
) -> Result<Sera> {
    let obs =
        offline.map(|o| Tensor::from_slice(o.buffer.observations()).view([o.buffer.len() as i64, obs_dim as i64]));
    let sera = Sera::new(config.sera.clone(), obs.as_ref())?;
    let probe = (
        Tensor::zeros([1, obs_dim as i64], (Kind::Float, device)),
        Tensor::zeros([1, act_dim as i64], (Kind::Float, device)),
    );
    if agent.critic_values(&probe.0, &probe.1).is_none() {
        bail!("[sera] is enabled, but algorithm `{}` has no critic Q(s, a) for its bonus to condition on", config.algo);
    }
    Ok(sera)
}

/// The runner's state at step 0.
/// Online rows the replay buffer needs before the first online update: the online share of a
/// batch (RLPD and WSRL wait for `batch · (1 − ratio)` online rows, fidelity-audit D21), one row
/// when the dataset and the online data are sampled as one buffer, the whole batch otherwise.
fn online_rows_needed(train: &super::config::TrainConfig, has_offline_data: bool) -> usize {
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

pub(super) fn initial_state(config: &RunConfig) -> RunnerState {
    checkpoint::initial_state(&ChaCha8Rng::seed_from_u64(derive_seed(config.seed, stream::RUNNER_RNG, 0)))
}

/// What a budget makes silently useless: an online phase whose batch never fills makes no
/// update at all (e.g. WSRL's 1024-row online batch with fewer env steps than that).
pub fn budget_warnings(config: &RunConfig) -> Vec<String> {
    let t = &config.train;
    let mut w = Vec::new();
    if config.sera.enabled && t.online_steps == 0 {
        w.push(
            "[sera] is enabled, but the run has no online steps: SERA's bonus applies to online batches only".into(),
        );
    }
    if t.online_steps > 0 {
        let collected = t.random_steps + t.warmup_steps + t.online_steps;
        let need = (t.online_batch() as u64).min(t.replay_capacity as u64);
        if collected < need {
            w.push(format!(
                "fine-tuning makes no updates: an online batch needs {need} transitions in the replay buffer, and the run collects only {collected} (random {}, warm-up {}, online {}); lower train.online_batch_size / train.batch_size or raise train.online_steps",
                t.random_steps, t.warmup_steps, t.online_steps
            ));
        }
    }
    w
}

impl Prepared<'_> {
    /// The offline data's details, as the manifest records them.
    pub fn dataset_info(&self) -> Option<&DatasetInfo> {
        self.offline.as_ref().map(|o| &o.info)
    }

    /// ImagineBench runs: where the instruction vectors came from (built-in encoding or which
    /// table), as the manifest records it.
    pub fn instruction_embeddings(&self) -> Option<&str> {
        self.instruction_embeddings.as_deref()
    }

    /// The offline data as the run trains on it (rewards shaped at load under `[shaping]`).
    pub fn offline(&self) -> Option<&OfflineData> {
        self.offline.as_ref()
    }

    /// The `[shaping]` shaper of online transitions (the run steps an env and shapes).
    pub fn shaper(&self) -> Option<&Shaper> {
        self.shaper.as_ref()
    }

    /// Budget warnings (see [`budget_warnings`]); they also go into `summary.json`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The runner's counters the run starts from.
    pub fn state(&self) -> &RunnerState {
        &self.state
    }

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
        let mut hooks = EvalHooks { on_eval: on_eval.take(), notes };

        // The offline→online switch: the first env step after offline training (step 0 for a run
        // that starts from an offline parent or learns online from scratch).
        let switch_step = plan.iter().position(|p| p.kind.steps_env()).map(|i| phases::total_steps(&plan[..i]));
        let wall = |t0: Instant| t0.elapsed().as_secs_f64();
        if config.eval.at_start && state.step == 0 {
            let r = evaluate(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
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
                        actor.step(
                            &mut AgentPolicy { agent: &mut *agent, device, deterministic: false } as &mut dyn Policy,
                            sink,
                        )?
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
                let r = evaluate(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
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
                let ckpt = save_checkpoint(
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
            evaluate(&mut *eval_env, &mut *agent, device, config, &mut state, &mut logger, &mut hooks)?;
            diagnose(&mut *agent, offline.as_ref(), replay.as_ref(), config, &state, &mut logger, device)?;
        }
        state.finished = true;
        let ckpt = save_checkpoint(
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

/// A run's agent as one of its checkpoints left it, with what it was loaded from.
pub struct CheckpointAgent {
    /// The run's config.
    pub config: RunConfig,
    /// The checkpoint folder.
    pub folder: PathBuf,
    /// The runner's counters in that checkpoint.
    pub state: RunnerState,
    /// The env whose spaces the agent was built for.
    pub env: Box<dyn Env>,
    /// The agent, its whole state loaded.
    pub agent: Box<dyn Agent>,
}

/// Load the agent of the run in `run_dir` from its checkpoint `checkpoint` (`step-N`, or the
/// newest), built for `env` (default: a new registry env of the run) on `device` — what
/// `o2o eval` and `o2o export` start from.
pub fn load_checkpoint_agent(
    run_dir: &Path,
    checkpoint: Option<&str>,
    env: Option<Box<dyn Env>>,
    device: Device,
) -> Result<CheckpointAgent> {
    let config = RunConfig::read(&run_dir.join(rundir::CONFIG))
        .with_context(|| format!("{} is not a run directory", run_dir.display()))?;
    let folder = checkpoint::find(run_dir, checkpoint)?;
    let state = checkpoint::read_state(&folder)?;
    let env = match env {
        Some(e) => e,
        None if super::imaginebench::is_imaginebench_env(&config.env) => {
            let make = super::imaginebench::env_factory(&config)?.context("an ImagineBench env factory")?;
            make()?
        }
        None => o2o_envs::make(&config.env)
            .with_context(|| format!("making the run's env {} (an env of your own: pass it from Rust)", config.env))?,
    };
    let mut agent = build_agent(&config, env.observation_space().dim(), env.action_space().dim(), device)?;
    let file = folder.join(checkpoint::AGENT);
    agent.load(&file).with_context(|| format!("loading the agent from {}", file.display()))?;
    Ok(CheckpointAgent { config, folder, state, env, agent })
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

/// The evaluation callback, where [`evaluate`] can reach it.
pub(super) struct EvalHooks<'a> {
    pub(super) on_eval: Option<&'a mut OnEval<'a>>,
    /// Where the agent's per-step choices go for the recorded evaluation episode.
    pub(super) notes: Option<crate::logging::StepNotes>,
}

/// Evaluate, log under `eval/`, remember the last and best results, and call the hook.
pub(super) fn evaluate(
    env: &mut dyn o2o_envs::Env,
    agent: &mut dyn Agent,
    device: Device,
    config: &RunConfig,
    state: &mut RunnerState,
    logger: &mut Logger,
    hooks: &mut EvalHooks,
) -> Result<EvalResult> {
    let (r, per_task) = eval::evaluate_per_task(
        env,
        agent,
        device,
        config.seed,
        config.eval.episodes,
        state.step,
        hooks.notes.as_ref(),
    )?;
    let mut values = r.values();
    values.extend(per_task.iter().map(|(k, v)| (k.as_str(), *v)));
    logger.log(state.grad_step, state.env_step, &values)?;
    // Someone may be following metrics.jsonl (`tail -f`, `o2o report` on a live run).
    logger.flush()?;
    if state.best_eval.as_ref().is_none_or(|b| r.mean_return > b.mean_return) {
        state.best_eval = Some(r);
    }
    state.last_eval = Some(r);
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

/// Flush the metrics, record their length, and write the checkpoint folder.
fn save_checkpoint(
    dir: &Path,
    config: &RunConfig,
    state: &mut RunnerState,
    rng: &ChaCha8Rng,
    agent: &dyn Agent,
    replay: Option<&ReplayBuffer>,
    interventions: Option<&ReplayBuffer>,
    recorder: Option<&Recorder>,
    logger: &mut Logger,
) -> Result<PathBuf> {
    logger.flush()?;
    let metrics = dir.join(METRICS);
    state.metrics_len =
        std::fs::metadata(&metrics).with_context(|| format!("cannot stat {}", metrics.display()))?.len();
    state.set_rng(rng);
    checkpoint::write(dir, state, config.checkpoint.keep, |tmp| {
        agent.save(&tmp.join(checkpoint::AGENT)).context("saving the agent")?;
        if let Some(r) = replay {
            r.save(&tmp.join(checkpoint::REPLAY)).context("saving the replay buffer")?;
        }
        if let Some(b) = interventions {
            b.save(&tmp.join(checkpoint::INTERVENTIONS)).context("saving the intervention buffer")?;
        }
        if let Some(r) = recorder {
            r.write(&tmp.join(checkpoint::DATASET))?;
        }
        Ok(())
    })
}

/// Cut `metrics.jsonl` back to `len` bytes (what it held at the checkpoint being resumed).
pub(crate) fn truncate_metrics(path: &Path, len: u64) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let found = file.metadata()?.len();
    if found < len {
        bail!("{} has {found} bytes, fewer than the {len} recorded at the checkpoint; it was modified", path.display());
    }
    file.set_len(len).with_context(|| format!("cannot truncate {}", path.display()))?;
    file.sync_all()?;
    Ok(())
}

/// Agent metric names go under `train/` unless they carry their own namespace.
pub(super) fn namespaced(name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("train/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::config::TrainConfig;

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
