//! Everything a run needs, made and checked before it starts: [`prepare`] builds the envs, the
//! offline data and the agent, and restores or starts the state, so that a bad env id, dataset,
//! parent checkpoint or agent config fails before the run directory exists (a new run) or is
//! touched (a resumed one). [`Prepared::run`](super::runner) then runs it.
//!
//! Also here: what a caller can put into a run besides its config ([`Hooks`]), building the agent
//! a config describes ([`build_agent`]), and a run's agent as one of its checkpoints left it
//! ([`load_checkpoint_agent`], what `o2o eval` and `o2o export` start from).

use super::actor::{derive_seed, stream, ActionScale, Actor};
use super::checkpoint;
use super::config::RunConfig;
use super::data::{self, OfflineData, Recorder};
use super::learner::RewardTransform;
use super::rundir::{self, DatasetInfo};
use super::shaping;
use super::state::{self, EvalResult, RunnerState};
use super::{her, imaginebench, phases};
use crate::Error;
use anyhow::{bail, Context, Result};
use o2o_agents::sera::Sera;
use o2o_agents::{Agent, AgentError};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::scores::RewardPreset;
use o2o_datasets::ReplayBuffer;
use o2o_envs::Env;
use o2o_reward_models::{Potential, Shaper};
use std::path::{Path, PathBuf};
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

/// `err`, the failure to load the offline data `d`, as an [`Error::BadDataset`] naming its file.
fn bad_dataset(d: &super::config::DatasetConfig, err: anyhow::Error) -> anyhow::Error {
    Error::bad_dataset(data::resolve_path(d).ok(), err).into()
}

/// Build the agent a config describes, on `device`, seeded from the run seed.
pub fn build_agent(config: &RunConfig, obs_dim: usize, act_dim: usize, device: Device) -> Result<Box<dyn Agent>> {
    o2o_agents::build(&config.agent, obs_dim, act_dim, device, derive_seed(config.seed, stream::AGENT, 0))
        .with_context(|| format!("building the {} agent from [agent] in the config", config.algo))
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
    /// The `[shaping]` Φ (enabled or not), followed along evaluation episodes of a run that
    /// steps an env.
    pub(super) eval_potential: Option<Potential>,
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
    let on_policy = config.agent.is_on_policy();
    let needs_env = plan.iter().any(|p| p.kind.steps_env()) && !on_policy;

    // ImagineBench: the env is built from `[imaginebench]` with the run's instruction encoder,
    // which the dataset's rows get their vectors from too.
    let ib_encoder = match imaginebench::env_options(config)? {
        Some(opts) => {
            if hooks.env.is_none() {
                hooks.env = env_factory(config)?;
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
    let gamma = data::returns_gamma(&config.agent);
    let mc = data::mc_config(config, gamma);
    let needs_data = config.train.offline_steps > 0 || config.train.mixes_offline_data();
    // The agent (its own seeded random stream: building it first changes no draw).
    let mut agent = build_agent(config, obs_dim, act_dim, device)?;
    // `[shaping]`: one shaper, with the built agent's discount (E12), for the online rows and
    // for the dataset's rows at load (E10), so every row of a mixed batch carries its F.
    let mut shaper = match &config.shaping {
        Some(s) if s.enabled && (needs_env || needs_data) => {
            Some(shaping::shaper_for_goal(s, &*agent, obs_dim, eval_env.spec().goal.as_ref())?)
        }
        _ => None,
    };
    let eval_potential = match needs_env {
        true => shaping::eval_potential(config.shaping.as_ref(), obs_dim, eval_env.spec().goal.as_ref())?,
        false => None,
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
                None => imaginebench::encoder(config)?,
            };
            let mc = data::dataset_mc_config(config, gamma);
            let loaded =
                imaginebench::load(d, &encoder, eval_env.action_space(), &config.env, obs_dim, act_dim, Some(mc));
            Some(loaded.map_err(|e| bad_dataset(d, e))?)
        }
        Some(d) => match data::load_shaped(
            d,
            hooks.dataset.take(),
            eval_env.action_space(),
            &config.env,
            obs_dim,
            act_dim,
            eval_env.spec().max_episode_steps,
            Some(data::dataset_mc_config(config, gamma)),
            shaper.as_mut(),
        ) {
            Ok(o) => Some(o),
            // Data handed over in memory is part of the run (its diagnostics too): never optional.
            Err(e) if needs_data || d.in_memory => return Err(bad_dataset(d, e)),
            Err(e) if d.reward != RewardPreset::None => {
                let why = format!(
                    "the dataset sets the reward transform `{}` that online rewards must get too",
                    d.reward.name()
                );
                return Err(bad_dataset(d, e.context(why)));
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
            state::fresh(config.seed)
        }
        Start::FromParent { checkpoint } => {
            load_agent(&mut *agent, checkpoint, "loading the parent agent from")?;
            state::fresh(config.seed)
        }
        Start::Resume { checkpoint } => {
            // Whatever of this checkpoint fails to load, it is damaged: the resume falls back.
            let damaged = |e: anyhow::Error| checkpoint::damaged(checkpoint, e);
            let state = checkpoint::read_state(checkpoint).map_err(damaged)?;
            let p = checkpoint.join(checkpoint::AGENT);
            agent.load(&p).with_context(|| format!("loading the agent from {}", p.display())).map_err(damaged)?;
            if let Some(r) = replay.as_mut() {
                let p = checkpoint.join(checkpoint::REPLAY);
                if state.env_step > 0 || p.exists() {
                    *r = ReplayBuffer::load(&p)
                        .with_context(|| format!("loading the replay buffer from {}", p.display()))
                        .map_err(damaged)?;
                }
            }
            if let Some(b) = interventions.as_mut() {
                let p = checkpoint.join(checkpoint::INTERVENTIONS);
                if p.exists() {
                    *b = ReplayBuffer::load(&p)
                        .with_context(|| format!("loading the intervention buffer from {}", p.display()))
                        .map_err(damaged)?;
                }
            }
            state
        }
    };
    // Hindsight relabelling of online batches (`[replay] her`), from the env's goal layout, and
    // rows of the episode in progress left out of online batches when the agent uses MC returns
    // or HER relabels (`[replay] closed_episodes_only`, fidelity-audit D13, fidelity-audit-2 E13).
    if let Some(r) = replay.as_mut() {
        her::configure_replay(r, config, eval_env.spec(), obs_dim, reward, mc.is_some())?;
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
                .map_err(|e| checkpoint::damaged(checkpoint, e))?,
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
        eval_potential,
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
        // With no offline rows in the online batches, the first update waits for a full batch of
        // online rows: a warm-up that ends before that changes nothing (WSRL's code starts
        // updating after max(warm-up, batch) steps the same way).
        let no_retention = t.offline_ratio == 0.0 && t.offline_mix == super::config::OfflineMix::Fixed;
        if t.warmup_steps > 0 && no_retention && t.random_steps + t.warmup_steps <= need && collected >= need {
            w.push(format!(
                "the warm-up ({} steps) ends before the first online batch fills ({need} rows): updates start after {need} env steps with or without it, so it changes nothing; raise train.warmup_steps above {need}",
                t.warmup_steps
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
}

/// The env factory the config itself calls for: the ImagineBench env built from `[imaginebench]`
/// with the run's instruction encoder (`None` for other envs: the registry makes those).
pub fn env_factory(config: &RunConfig) -> Result<Option<EnvFactory>> {
    let Some(opts) = imaginebench::env_options(config)? else { return Ok(None) };
    // Fail now, not in the first reset: the table must cover every sentence of the level.
    o2o_envs::registry::make_imaginebench(opts.clone()).with_context(|| format!("making the env {}", config.env))?;
    Ok(Some(std::sync::Arc::new(move || {
        o2o_envs::registry::make_imaginebench(opts.clone()).map_err(anyhow::Error::from)
    })))
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
) -> Result<CheckpointAgent, Error> {
    let config = rundir::read_config(run_dir)?;
    let folder = checkpoint::find(run_dir, checkpoint)?;
    let state = checkpoint::read_state(&folder)?;
    let env = match env {
        Some(e) => e,
        None if imaginebench::is_imaginebench_env(&config.env) => {
            let make = env_factory(&config)?.context("an ImagineBench env factory")?;
            make()?
        }
        None => o2o_envs::make(&config.env)
            .with_context(|| format!("making the run's env {} (an env of your own: pass it from Rust)", config.env))?,
    };
    let mut agent = build_agent(&config, env.observation_space().dim(), env.action_space().dim(), device)?;
    load_agent(&mut *agent, &folder, "loading the agent from")?;
    Ok(CheckpointAgent { config, folder, state, env, agent })
}

/// Load the agent file of the checkpoint folder `folder` into `agent` (`what` says which, in
/// the message). A file that cannot be read — missing, truncated, not a checkpoint, another
/// algorithm's — is an [`Error::DamagedCheckpoint`]; one whose tensors do not fit the agent's
/// networks stays the agent's error.
fn load_agent(agent: &mut dyn Agent, folder: &Path, what: &str) -> Result<()> {
    let file = folder.join(checkpoint::AGENT);
    let Err(e) = agent.load(&file) else { return Ok(()) };
    let unreadable = matches!(e, AgentError::Checkpoint { .. } | AgentError::Torch(_) | AgentError::Io(_));
    let err = anyhow::Error::from(e).context(format!("{what} {}", file.display()));
    Err(if unreadable { Error::damaged_checkpoint(folder, err).into() } else { err })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wsrl(warmup: u64, online_batch: u64, offline_ratio: f64) -> RunConfig {
        let text = format!(
            "preset = \"t\"\nalgo = \"sac\"\nenv = \"Hopper-v5\"\n[train]\nwarmup_steps = {warmup}\nonline_steps = 5000\nbatch_size = 256\nonline_batch_size = {online_batch}\noffline_ratio = {offline_ratio}\n[dataset]\npath = \"data.hdf5\"\n"
        );
        RunConfig::from_toml_str(&text, "test").unwrap()
    }

    /// A warm-up that ends before the first online batch fills is named: with no retained data
    /// the updates start at the same step with or without it (the sparse WSRL ablation's
    /// 1000-step warm-up against a 1024-row batch made its two variants the same run).
    #[test]
    fn a_warmup_shorter_than_the_online_batch_is_named() {
        let has = |c: &RunConfig| budget_warnings(c).iter().any(|w| w.contains("changes nothing"));
        assert!(has(&wsrl(1000, 1024, 0.0)));
        assert!(has(&wsrl(1024, 1024, 0.0)));
        assert!(!has(&wsrl(2500, 1024, 0.0)));
        assert!(!has(&wsrl(0, 1024, 0.0)), "no warm-up asked for");
        assert!(!has(&wsrl(1000, 1024, 0.5)), "retained rows fill the batch from the start");
    }
}
