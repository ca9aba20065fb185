//! Uni-O4's offline pipeline inside a run (`algo = "unio4"`): the stages of
//! [`o2o_agents::unio4`] in order, each cached in the run directory under `unio4/`, then the
//! hand-over into the run's online PPO agent. The on-policy loop (`onpolicy.rs`) calls
//! [`offline`] before its first rollout of a fresh run.
//!
//! | stage | file when done | resumable inside the stage |
//! |---|---|---|
//! | critic (IQL Q, V; or V on MC returns then SARSA Q) | `critic.ot` | every `save_every` steps (`critic.partial.ot`) |
//! | dynamics ensemble | `dynamics.ot` | no (minutes; retrained from its seed) |
//! | BC ensemble | `bc.ot` | every `save_every` steps (`policy.partial.ot`) |
//! | BPPO + AM-Q gating | `bppo.ot` + `bppo.json` | every `save_every` steps, at an OPE boundary |
//! | V refit on MC returns (`value_refit`, optional; `dynamic` scaling's statistic handed on) | `value_refit.ot` | every `save_every` steps |
//! | hand-over | `handover.json` | — |
//!
//! Each stage's logged records are saved with it (`<stage>.records.json`) and re-logged when a
//! resumed run finds the stage done, so `metrics.jsonl` of a killed and resumed run has every
//! offline record. Metrics: `unio4/critic/*`, `unio4/dynamics/holdout/<member>` (per epoch),
//! `unio4/bc/*`, `unio4/bppo/*`, `unio4/value_refit/*` (with `dynamic` scaling, the last record
//! has the statistic handed online: `reward_scaling_std`, `reward_scaling_count`), `unio4/ope/score/<member>`, `unio4/ope/best/<member>`,
//! `unio4/ope/accepted/<member>` (1 when π_old was replaced), `unio4/ope/disagreement` (spread
//! of the members' mean actions on the start states), and at the hand-over
//! `unio4/handover/real_return/<member>` next to `unio4/handover/last_ope/<member>`, the rank
//! correlation `unio4/handover/ope_rank_corr`, and `unio4/handover/chosen`.

use super::actor::{derive_seed, stream};
use super::data::OfflineData;
use super::eval;
use super::rundir::write_atomic;
use crate::logging::Logger;
use anyhow::{Context, Result};
use o2o_agents::ppo::Ppo;
use o2o_agents::rng::AgentRng;
use o2o_agents::unio4::bc::PolicyEnsemble;
use o2o_agents::unio4::dynamics::{Dynamics, Termination};
use o2o_agents::unio4::ope::{am_q_with_length, Rollout};
use o2o_agents::unio4::value_refit::ValueRefit;
use o2o_agents::unio4::{handover_candidates, offline_critic, Data, OfflineCritic, Unio4Config};
use o2o_agents::{Agent, Stateful};
use o2o_envs::Env;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::{Device, Tensor};

/// Logged records of a stage: `(grad_step, [(key, value)])`.
type Records = Vec<(u64, Vec<(String, f64)>)>;

/// BPPO's gating state, saved with the policy ensemble.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Gate {
    best: Vec<f64>,
    last: Vec<f64>,
}

/// What the hand-over decided.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handover {
    /// Each member's last AM-Q score.
    pub last_ope: Vec<f64>,
    /// The members evaluated as candidates (top-k by last AM-Q, ties kept).
    pub candidates: Vec<usize>,
    /// Each member's short real evaluation return.
    pub real_return: Vec<f64>,
    /// The member the online phase starts from.
    pub chosen: usize,
}

/// The pipeline's place in the run: its folder, the logger, the grad-step counter.
struct Stages<'a> {
    dir: PathBuf,
    logger: &'a mut Logger,
    grad_step: u64,
}

impl Stages<'_> {
    fn log(&mut self, records: &mut Records, values: Vec<(String, f64)>) -> Result<()> {
        let named: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        self.logger.log(self.grad_step, 0, &named)?;
        records.push((self.grad_step, values));
        Ok(())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn save_records(&self, stage: &str, records: &Records) -> Result<()> {
        write_atomic(&self.path(&format!("{stage}.records.json")), serde_json::to_string(records)?.as_bytes())
    }

    /// The records saved with a stage, re-logged (a resumed run), and the grad-step counter
    /// moved past them.
    fn replay_records(&mut self, stage: &str) -> Result<Records> {
        let p = self.path(&format!("{stage}.records.json"));
        let records: Records = match std::fs::read_to_string(&p) {
            Ok(text) => {
                serde_json::from_str(&text).with_context(|| format!("{} is not a stage's records", p.display()))?
            }
            Err(_) => Vec::new(),
        };
        for (step, values) in &records {
            let named: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            self.logger.log(*step, 0, &named)?;
        }
        // Every stage ends (and saves) right after a record, so its last record's step is where
        // the counter stood.
        if let Some((step, _)) = records.last() {
            self.grad_step = self.grad_step.max(*step);
        }
        Ok(records)
    }
}

fn prefixed(prefix: &str, m: &[(&'static str, f64)]) -> Vec<(String, f64)> {
    m.iter().map(|(k, v)| (format!("{prefix}/{k}"), *v)).collect()
}

/// The dataset as the pipeline's tensors.
fn data_of(offline: &OfflineData, device: Device) -> Result<Data> {
    let b = &offline.buffer;
    Ok(Data::new(
        b.observations(),
        b.actions(),
        b.rewards(),
        b.next_observations(),
        b.terminals(),
        &offline.episode_ends,
        b.obs_dim(),
        b.act_dim(),
        device,
    )?)
}

/// Run the offline stages (continuing cached ones), evaluate the members, hand the chosen one
/// and V to `agent` (the run's online PPO). Returns the grad steps done offline.
#[allow(clippy::too_many_arguments)]
pub(super) fn offline(
    run_dir: &Path,
    cfg: &Unio4Config,
    offline: &OfflineData,
    env_id: &str,
    eval_env: &mut dyn Env,
    agent: &mut dyn Agent,
    eval_episodes: usize,
    seed: u64,
    device: Device,
    logger: &mut Logger,
) -> Result<u64> {
    let dir = run_dir.join("unio4");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut st = Stages { dir, logger, grad_step: 0 };
    let data = data_of(offline, device)?;
    let (o, a) = (offline.buffer.obs_dim() as i64, offline.buffer.act_dim() as i64);
    let norm = cfg.state_norm;
    let sub = |k: u64| derive_seed(seed, stream::AGENT, 100 + k);

    // 1. Critic (IQL's, or V on MC returns then SARSA Q: `critic.path`).
    let mut critic = offline_critic(&cfg.critic, &data, device, sub(1))?;
    let mut records = resume_stage(&mut st, "critic", |p| critic.load(p))?;
    let critic_steps = critic.total_steps();
    while critic.steps() < critic_steps {
        let m = critic.update(&data, norm);
        st.grad_step += 1;
        let t = critic.steps();
        if t % cfg.log_every == 0 || t == critic_steps {
            st.log(&mut records, prefixed("unio4/critic", &m))?;
        }
        if t % cfg.save_every == 0 && t < critic_steps {
            save_partial(&st, "critic", &records, |p| critic.save(p))?;
        }
    }
    finish_stage(&st, "critic", &records, |p| critic.save(p))?;

    // 2. Dynamics (raw states).
    let mut rng = AgentRng::new(sub(2));
    let mut dynamics = Dynamics::new(cfg.dynamics.clone(), o, a, device, &mut rng)?;
    if st.path("dynamics.ot").is_file() {
        dynamics.load(&st.path("dynamics.ot"))?;
        st.replay_records("dynamics")?;
    } else {
        let mut records = Records::new();
        let mut reports = Vec::new();
        dynamics.train(&data, &mut rng, |r| reports.push(r.clone()))?;
        for r in reports {
            st.grad_step += 1;
            let mut v: Vec<(String, f64)> =
                r.holdout.iter().enumerate().map(|(e, l)| (format!("unio4/dynamics/holdout/{e}"), *l)).collect();
            v.push(("unio4/dynamics/train_loss".into(), r.train_loss));
            st.log(&mut records, v)?;
        }
        let mut v: Vec<(String, f64)> = dynamics
            .holdout_losses()
            .iter()
            .enumerate()
            .map(|(e, l)| (format!("unio4/dynamics/best_holdout/{e}"), *l))
            .collect();
        v.push(("unio4/dynamics/elites".into(), dynamics.elites().len() as f64));
        st.log(&mut records, v)?;
        finish_stage(&st, "dynamics", &records, |p| dynamics.save(p))?;
    }

    // 3. BC ensemble, then 4. BPPO with AM-Q gating.
    let p = &cfg.policy;
    let mut policy = PolicyEnsemble::new(p.clone(), o, a, device, sub(3))?;
    let mut records = resume_stage(&mut st, "bc", |path| policy.load(path))?;
    while (policy.steps().0 as u64) < p.bc_steps {
        let m = policy.bc_update(&data, norm);
        st.grad_step += 1;
        let t = policy.steps().0 as u64;
        if t % cfg.log_every == 0 || t == p.bc_steps {
            st.log(&mut records, prefixed("unio4/bc", &m))?;
        }
        if t % cfg.save_every == 0 && t < p.bc_steps {
            save_partial(&st, "bc", &records, |path| policy.save(path))?;
        }
    }
    finish_stage(&st, "bc", &records, |path| policy.save(path))?;

    let term = Termination::for_env(env_id);
    let members = p.members as usize;
    let gate_path = st.path("bppo.json");
    let mut records = resume_stage(&mut st, "bppo", |path| policy.load(path))?;
    let mut gate: Gate = match std::fs::read_to_string(&gate_path) {
        Ok(t) if policy.steps().1 > 0 => {
            serde_json::from_str(&t).with_context(|| format!("{} is not BPPO's gate", gate_path.display()))?
        }
        _ => {
            // The BC policies' AM-Q scores are each member's first best.
            let s =
                (0..members).map(|e| score(&mut policy, e, &*critic, &dynamics, term, &data, cfg)).collect::<Vec<_>>();
            st.log(&mut records, s.iter().enumerate().map(|(e, v)| (format!("unio4/ope/score/{e}"), *v)).collect())?;
            Gate { best: s.clone(), last: s }
        }
    };
    while (policy.steps().1 as u64) < p.bppo_steps {
        let weight = critic.advantage_weight();
        let m = policy.bppo_update(&data, norm, &mut |s, a| critic.q(s, a) - critic.value(s), weight);
        st.grad_step += 1;
        let t = policy.steps().1 as u64;
        if t % cfg.log_every == 0 {
            st.log(&mut records, prefixed("unio4/bppo", &m))?;
        }
        if t % cfg.ope.eval_step == 0 || t == p.bppo_steps {
            let scores: Vec<f64> =
                (0..members).map(|e| score(&mut policy, e, &*critic, &dynamics, term, &data, cfg)).collect();
            let improved: Vec<bool> = scores.iter().zip(&gate.best).map(|(s, b)| s > b).collect();
            policy.accept(&improved);
            let mut v = Vec::new();
            for e in 0..members {
                if improved[e] {
                    gate.best[e] = scores[e];
                }
                v.push((format!("unio4/ope/score/{e}"), scores[e]));
                v.push((format!("unio4/ope/best/{e}"), gate.best[e]));
                v.push((format!("unio4/ope/accepted/{e}"), if improved[e] { 1.0 } else { 0.0 }));
            }
            let idx = policy.rng_mut().indices(data.len(), cfg.ope.start_states, true, device);
            v.push((
                "unio4/ope/disagreement".into(),
                policy.disagreement(&data.norm_obs(&data.obs.index_select(0, &idx), norm)),
            ));
            gate.last = scores;
            st.log(&mut records, v)?;
            if t % cfg.save_every < cfg.ope.eval_step && t < p.bppo_steps {
                write_atomic(&gate_path, serde_json::to_string(&gate)?.as_bytes())?;
                save_partial(&st, "bppo", &records, |path| policy.save(path))?;
            }
        }
    }
    write_atomic(&gate_path, serde_json::to_string(&gate)?.as_bytes())?;
    finish_stage(&st, "bppo", &records, |path| policy.save(path))?;

    // 5. Optionally, a fresh V on Monte-Carlo returns of rescaled rewards for the online critic.
    let refit = match &cfg.value_refit {
        None => None,
        Some(rc) => {
            let mut refit = ValueRefit::new(rc.clone(), &data, device, sub(4))?;
            let mut records = resume_stage(&mut st, "value_refit", |path| refit.load(path))?;
            while refit.steps() < rc.steps {
                let mut m = refit.update(&data, norm);
                st.grad_step += 1;
                let t = refit.steps();
                if let (Some(sc), true) = (refit.scaler(), t == rc.steps) {
                    // The `dynamic` statistic the online phase continues from.
                    m.extend([("reward_scaling_std", sc.std()), ("reward_scaling_count", sc.stats()[0])]);
                }
                if t % cfg.log_every == 0 || t == rc.steps {
                    st.log(&mut records, prefixed("unio4/value_refit", &m))?;
                }
                if t % cfg.save_every == 0 && t < rc.steps {
                    save_partial(&st, "value_refit", &records, |path| refit.save(path))?;
                }
            }
            finish_stage(&st, "value_refit", &records, |path| refit.save(path))?;
            Some(refit)
        }
    };
    let mut value: Vec<(String, Tensor)> = match &refit {
        Some(r) => r.params().named().iter().map(|(n, t)| (n.clone(), t.detach())).collect(),
        None => {
            critic.value_params().named().iter().map(|(n, t)| (n.replacen("value", "critic", 1), t.detach())).collect()
        }
    };
    // `dynamic` scaling: the statistic of the dataset pass continues online.
    value.extend(Ppo::reward_scaling_tensors(refit.as_ref().and_then(|r| r.scaler())));

    // 6. Hand-over: every member's short real evaluation (the OPE ranking against real
    // returns), the best real return among the top-k by last AM-Q.
    let candidates = handover_candidates(&gate.last, cfg.handover_top_k);
    let tmp = st.path("member.ot");
    let mut real = Vec::with_capacity(members);
    for e in 0..members {
        load_member(agent, &policy, &value, e as i64, &tmp)?;
        let r = eval::evaluate(eval_env, agent, device, seed, eval_episodes, 0)
            .with_context(|| format!("evaluating Uni-O4 member {e}"))?;
        real.push(r.mean_return);
    }
    let chosen = *candidates.iter().max_by(|&&x, &&y| real[x].total_cmp(&real[y])).unwrap_or(&0);
    load_member(agent, &policy, &value, chosen as i64, &tmp)?;
    let _ = std::fs::remove_file(&tmp);
    let mut v: Vec<(String, f64)> = Vec::new();
    for e in 0..members {
        v.push((format!("unio4/handover/real_return/{e}"), real[e]));
        v.push((format!("unio4/handover/last_ope/{e}"), gate.last[e]));
    }
    v.push(("unio4/handover/ope_rank_corr".into(), spearman(&gate.last, &real)));
    v.push(("unio4/handover/chosen".into(), chosen as f64));
    let named: Vec<(&str, f64)> = v.iter().map(|(k, x)| (k.as_str(), *x)).collect();
    st.logger.log(st.grad_step, 0, &named)?;
    let h = Handover { last_ope: gate.last.clone(), candidates, real_return: real, chosen };
    write_atomic(&st.path("handover.json"), serde_json::to_string_pretty(&h)?.as_bytes())?;
    Ok(st.grad_step)
}

/// Member `e`'s AM-Q score (fresh start states from the ensemble's stream).
fn score(
    policy: &mut PolicyEnsemble,
    e: usize,
    critic: &dyn OfflineCritic,
    dynamics: &Dynamics,
    term: Termination,
    data: &Data,
    cfg: &Unio4Config,
) -> f64 {
    let idx = policy.rng_mut().indices(data.len(), cfg.ope.start_states, true, data.obs.device());
    let start = data.obs.index_select(0, &idx);
    let mut model_rng = AgentRng::new(policy.rng_mut().below(u64::MAX));
    let m = Model { critic, dynamics, term, data, state_norm: cfg.state_norm };
    m.am_q(policy, e, &start, cfg.ope.horizon, &mut model_rng).0
}

/// What AM-Q rolls a member through: the critic, the dynamics and the termination rule, on the
/// dataset's (optionally normalized) states.
struct Model<'a> {
    critic: &'a dyn OfflineCritic,
    dynamics: &'a Dynamics,
    term: Termination,
    data: &'a Data,
    state_norm: bool,
}

impl Model<'_> {
    /// Member `e`'s AM-Q from `start` over `horizon` model steps, the model's noise drawn from
    /// `model_rng`, and the mean number of steps a rollout lasted.
    fn am_q(
        &self,
        policy: &PolicyEnsemble,
        e: usize,
        start: &Tensor,
        horizon: usize,
        model_rng: &mut AgentRng,
    ) -> (f64, f64) {
        let (data, norm) = (self.data, self.state_norm);
        let mut act = |s: &Tensor| policy.mean_action(e as i64, &data.norm_obs(s, norm));
        let mut q = |s: &Tensor, a: &Tensor| self.critic.q(&data.norm_obs(s, norm), a);
        let mut step = |s: &Tensor, a: &Tensor| self.dynamics.step(s, a, model_rng).0;
        let done = |s: &Tensor| self.term.done(s);
        am_q_with_length(start, horizon, Rollout { policy: &mut act, q: &mut q, step: &mut step, done: &done })
    }
}

/// Copy member `e` (as the actor) and the online critic's start (`critic/…` tensors: the offline
/// V or the refit one) into the online agent, through a partial checkpoint file.
fn load_member(
    agent: &mut dyn Agent,
    policy: &PolicyEnsemble,
    value: &[(String, Tensor)],
    e: i64,
    tmp: &Path,
) -> Result<()> {
    let mut tensors = policy.member_tensors(e, "actor");
    tensors.extend(value.iter().map(|(n, t)| (n.clone(), t.shallow_clone())));
    let scaling = value.iter().any(|(n, _)| n.starts_with("reward_scaling/"));
    o2o_agents::checkpoint::save(tmp, &tensors)?;
    let parts: &[&str] = if scaling { &["actor", "critic", "reward_scaling"] } else { &["actor", "critic"] };
    agent.load_parts(tmp, parts).context("handing the chosen Uni-O4 member and V to the online agent")
}

/// A stage's saved state, if any (the finished file first, else the partial one), loaded with
/// `load`; returns its records (re-logged).
fn resume_stage(
    st: &mut Stages<'_>,
    stage: &str,
    load: impl FnOnce(&Path) -> Result<(), o2o_agents::AgentError>,
) -> Result<Records> {
    for name in [format!("{stage}.ot"), format!("{stage}.partial.ot")] {
        let p = st.path(&name);
        if p.is_file() {
            load(&p).with_context(|| format!("loading the cached Uni-O4 stage {}", p.display()))?;
            return st.replay_records(stage);
        }
    }
    Ok(Records::new())
}

fn save_partial(
    st: &Stages<'_>,
    stage: &str,
    records: &Records,
    save: impl FnOnce(&Path) -> Result<(), o2o_agents::AgentError>,
) -> Result<()> {
    st.save_records(stage, records)?;
    save(&st.path(&format!("{stage}.partial.ot")))?;
    Ok(())
}

fn finish_stage(
    st: &Stages<'_>,
    stage: &str,
    records: &Records,
    save: impl FnOnce(&Path) -> Result<(), o2o_agents::AgentError>,
) -> Result<()> {
    st.save_records(stage, records)?;
    save(&st.path(&format!("{stage}.ot")))?;
    let _ = std::fs::remove_file(st.path(&format!("{stage}.partial.ot")));
    Ok(())
}

/// One policy of a finished Uni-O4 run, re-scored by [`ope_probe`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbedPolicy {
    /// `bc` (the BC ensemble's member) or `bppo` (the member handed over).
    pub stage: String,
    /// The member's index.
    pub member: usize,
    /// Mean real return over the probe's episodes.
    pub real_return: f64,
    /// Its standard deviation over episodes.
    pub real_return_std: f64,
    /// Mean real episode length.
    pub real_length: f64,
    /// AM-Q at each of the probe's horizons.
    pub am_q: Vec<f64>,
    /// Mean model steps a rollout lasted before the termination rule, at each horizon.
    pub model_length: Vec<f64>,
}

/// What [`ope_probe`] found for one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpeProbe {
    /// The run directory.
    pub run: PathBuf,
    /// The horizons H scored.
    pub horizons: Vec<usize>,
    /// Start states per rollout batch (one shared batch for every policy and horizon).
    pub start_states: usize,
    /// Real episodes per policy.
    pub episodes: usize,
    /// The BC members, then the BPPO members.
    pub policies: Vec<ProbedPolicy>,
    /// Spearman correlation of AM-Q with the real return at each horizon, over the BPPO members
    /// (what the hand-over ranks).
    pub rank_corr_bppo: Vec<f64>,
    /// The same over every probed policy (BC and BPPO members).
    pub rank_corr_all: Vec<f64>,
}

/// Re-score the members of a finished Uni-O4 run: for the BC ensemble (`unio4/bc.ot`) and the
/// BPPO ensemble the hand-over chose from (`unio4/bppo.ot`), AM-Q at each of `horizons` with the
/// run's critic and dynamics (`critic.ot`, `dynamics.ot`) from one shared batch of
/// `start_states` dataset states and one model noise stream (common random numbers, so the
/// policies differ only by their actions), and the real return over `episodes` episodes reset
/// as the run's hand-over evaluation resets them. The run is read, never written.
pub fn ope_probe(
    run_dir: &Path,
    horizons: &[usize],
    start_states: usize,
    episodes: usize,
    device: Device,
) -> Result<OpeProbe> {
    if horizons.is_empty() || horizons.contains(&0) || start_states == 0 || episodes == 0 {
        anyhow::bail!(
            "ope probe: horizons, start states and episodes must be ≥ 1, found {horizons:?}, {start_states}, {episodes}"
        );
    }
    let config = super::rundir::read_config(run_dir)?;
    let o2o_agents::AgentConfig::Unio4(cfg) = &config.agent else {
        anyhow::bail!("{}: algo `{}` is not `unio4`", run_dir.display(), config.algo);
    };
    let dir = run_dir.join("unio4");
    for stage in ["critic", "dynamics", "bc", "bppo"] {
        let f = dir.join(format!("{stage}.ot"));
        if !f.is_file() {
            anyhow::bail!("{}: the stage file is missing (the run's offline part did not finish here)", f.display());
        }
    }
    let dataset = config.dataset.as_ref().context("algo `unio4` needs a [dataset]")?;
    let mut env = o2o_envs::make(&config.env).with_context(|| format!("making the run's env {}", config.env))?;
    let env = &mut *env;
    let (od, ad) = (env.observation_space().dim(), env.action_space().dim());
    let offline =
        super::data::load(dataset, None, env.action_space(), &config.env, od, ad, env.spec().max_episode_steps, None)?;
    let data = data_of(&offline, device)?;
    // The run's online agent as it stood at the hand-over: built from the config, normalizing
    // states with the dataset's frozen statistics (the on-policy loop's first step).
    let mut agent = super::prepare::build_agent(&config, od, ad, device)?;
    let (mean, std) = column_stats(offline.buffer.observations(), od);
    agent.on_policy().context("Uni-O4's online agent is on-policy")?.use_dataset_stats(&mean, &std);
    let (o, a) = (od as i64, ad as i64);
    let sub = |k: u64| derive_seed(config.seed, stream::AGENT, 100 + k);
    let mut critic = offline_critic(&cfg.critic, &data, device, sub(1))?;
    critic.load(&dir.join("critic.ot"))?;
    let mut dynamics = Dynamics::new(cfg.dynamics.clone(), o, a, device, &mut AgentRng::new(sub(2)))?;
    dynamics.load(&dir.join("dynamics.ot"))?;
    let model = Model {
        critic: &*critic,
        dynamics: &dynamics,
        term: Termination::for_env(&config.env),
        data: &data,
        state_norm: cfg.state_norm,
    };

    // One batch of start states and one model stream for every policy and horizon.
    let mut probe_rng = AgentRng::new(derive_seed(config.seed, stream::AGENT, 900));
    let idx = probe_rng.indices(data.len(), start_states, true, device);
    let start = data.obs.index_select(0, &idx);
    let model_seed = probe_rng.below(u64::MAX);
    let tmp = std::env::temp_dir().join(format!("o2o-ope-probe-{}.ot", std::process::id()));
    let mut policies = Vec::new();
    for stage in ["bc", "bppo"] {
        let mut ensemble = PolicyEnsemble::new(cfg.policy.clone(), o, a, device, sub(3))?;
        ensemble.load(&dir.join(format!("{stage}.ot")))?;
        for e in 0..cfg.policy.members as usize {
            let (mut am, mut len) = (Vec::new(), Vec::new());
            for &h in horizons {
                let (score, length) = model.am_q(&ensemble, e, &start, h, &mut AgentRng::new(model_seed));
                am.push(score);
                len.push(length);
            }
            // Only the actor acts in an evaluation: the member's weights into the agent.
            o2o_agents::checkpoint::save(&tmp, &ensemble.member_tensors(e as i64, "actor"))?;
            agent.load_parts(&tmp, &["actor"]).context("loading a member as the run's actor")?;
            let r = eval::evaluate(env, &mut *agent, device, config.seed, episodes, 0)
                .with_context(|| format!("evaluating {stage} member {e}"))?;
            policies.push(ProbedPolicy {
                stage: stage.into(),
                member: e,
                real_return: r.mean_return,
                real_return_std: r.std_return,
                real_length: r.mean_length,
                am_q: am,
                model_length: len,
            });
        }
    }
    let _ = std::fs::remove_file(&tmp);
    let corr = |which: &dyn Fn(&ProbedPolicy) -> bool, k: usize| {
        let chosen: Vec<&ProbedPolicy> = policies.iter().filter(|p| which(p)).collect();
        let x: Vec<f64> = chosen.iter().map(|p| p.am_q[k]).collect();
        let y: Vec<f64> = chosen.iter().map(|p| p.real_return).collect();
        spearman(&x, &y)
    };
    let rank_corr_bppo = (0..horizons.len()).map(|k| corr(&|p| p.stage == "bppo", k)).collect();
    let rank_corr_all = (0..horizons.len()).map(|k| corr(&|_| true, k)).collect();
    Ok(OpeProbe {
        run: run_dir.to_path_buf(),
        horizons: horizons.to_vec(),
        start_states,
        episodes,
        policies,
        rank_corr_bppo,
        rank_corr_all,
    })
}

/// Per-dimension mean and std of `obs` rows of width `dim` (float64 sums; the std floored at
/// 1e-3, as Uni-O4's offline stages standardize, so a constant dimension does not blow up).
pub fn column_stats(obs: &[f32], dim: usize) -> (Vec<f32>, Vec<f32>) {
    let n = (obs.len() / dim.max(1)).max(1) as f64;
    let mut mean = vec![0.0f64; dim];
    for row in obs.chunks(dim) {
        row.iter().zip(mean.iter_mut()).for_each(|(x, m)| *m += *x as f64 / n);
    }
    let mut var = vec![0.0f64; dim];
    for row in obs.chunks(dim) {
        row.iter().zip(var.iter_mut()).zip(&mean).for_each(|((x, v), m)| *v += (*x as f64 - m).powi(2) / n);
    }
    (mean.iter().map(|m| *m as f32).collect(), var.iter().map(|v| v.sqrt().max(1e-3) as f32).collect())
}

/// Spearman rank correlation of two equally long lists (NaN when either is constant).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    let ranks = |v: &[f64]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
        let mut r = vec![0.0; v.len()];
        for (rank, i) in idx.into_iter().enumerate() {
            r[i] = rank as f64;
        }
        r
    };
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy): (f64, f64) = (rx.iter().map(|a| (a - mx).powi(2)).sum(), ry.iter().map(|b| (b - my).powi(2)).sum());
    cov / (vx * vy).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stage records and the AM-Q gate are kept as JSON and read back on resume, so every f64
    /// must survive the trip bit for bit (serde_json's `float_roundtrip`: its default parser put
    /// this AM-Q score, seen in a resumed run, 1 ulp off), here and over many random values.
    #[test]
    fn json_keeps_every_f64_exactly() {
        let mut rng = o2o_agents::rng::AgentRng::new(7);
        let values: Vec<f64> = std::iter::once(2.0388873375952246)
            .chain((0..20_000).map(|_| f64::from_bits(rng.below(u64::MAX) >> 2) * 1e-300 + rng.uniform() * 10.0))
            .collect();
        for x in values {
            let back: f64 = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e} read back as {back:e}");
        }
    }

    #[test]
    fn column_stats_of_two_rows() {
        let (m, s) = column_stats(&[1.0, 10.0, 3.0, 10.0], 2);
        assert_eq!(m, vec![2.0, 10.0]);
        assert_eq!(s, vec![1.0, 1e-3]);
    }

    #[test]
    fn spearman_of_orders() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    }
}
