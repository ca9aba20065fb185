//! Parity against Gymnasium: run one of our tasks and Gymnasium's Python env from the same
//! initial `qpos`/`qvel` with the same actions, and compare observations, rewards and flags.
//!
//! Our side generates the episodes: reset with the seed (later resets continue the stream),
//! record the start state, step with actions drawn uniformly from the action box widened by 20%
//! on each side (so out-of-range actions exercise the control-cost and clipping rules), until
//! the episode terminates or hits the time limit, then reset again, `steps` steps in all. The
//! reference side (`scripts/gym_parity.py`, run by the set-up's Python) replays each episode
//! from the recorded start state and returns what it saw.
//!
//! References: `-v5` ids against the same Gymnasium 1.4.0 id. `-v2` ids against Gymnasium's
//! `-v4` class, which uses the v2 XML (`walker2d.xml`), the v2 healthy-reward rule (paid on the
//! terminal step) and, for Ant, the 27-number observation without contact cost; the script clips
//! the action first, as D4RL's `NormalizedBoxEnv` did. For `ant-v2` the first 27 numbers are
//! compared and the 84 trailing ones must be exactly 0.
//!
//! `antmaze-*` ids are compared against D4RL 1.1's own AntMaze code (`ant.py`, `maze_env.py`,
//! `goal_reaching_env.py`, `NormalizedBoxEnv`), run on the `mujoco` bindings by
//! `scripts/d4rl_antmaze_parity.py` (found beside the Gymnasium script) with stand-ins for old gym
//! and mujoco_py. Each episode also carries its goal. So that goal hits are exercised (a random
//! ant never reaches the maze's goal), every odd episode places the goal 0.3–0.7 from the start
//! (`MujocoEnv::set_goal`), where random actions cross the 0.5 radius or not; D4RL's own start and
//! goal draws from 200 resets of its own come back, and ours are checked to lie in their box
//! ([`ParityReport::start_outside_support`]).
//!
//! Adroit ids (`pen-v1`, `door-v1`, `hammer-v1`, `relocate-v1`) are compared against
//! Gymnasium-Robotics 1.4.2's `AdroitHand*-v1` (`scripts/adroit_parity.py`), started from our
//! qpos/qvel and our episode's model values (`initial_state_dict`), with the reference's dense
//! reward corrected to D4RL's sign of the hand–object term and D4RL's pen-drop termination added.
//!
//! Observations are compared in `f64` (`MujocoEnv::observation_f64`, of which the `f32`
//! observation `step` returns is the rounding). A value passes when |ours − theirs| ≤
//! tol · max(1, |theirs|): absolute for small values, relative for large ones.

use crate::env::Env;
use crate::error::EnvError;
use crate::mujoco::{FetchEnv, MujocoEnv};
use crate::wrappers::TimeLimit;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub(crate) mod harness;

use harness::{compare, run_reference, widened_action, Trace};
pub use harness::{ParityOptions, ParityReport, DEFAULT_TOLERANCE};

/// The Gymnasium env our id is compared against.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Gymnasium id, e.g. `Hopper-v4`.
    pub gym_id: &'static str,
    /// Whether the reference clips the action to the bounds before stepping (D4RL).
    pub clip_action: bool,
    /// How many leading observation numbers the reference has (the rest of ours must be 0).
    pub compared_obs_dims: Option<usize>,
    /// Which oracle replays the episodes.
    pub oracle: Oracle,
}

/// The Python program on the other side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oracle {
    /// Gymnasium's own env (`scripts/gym_parity.py`).
    Gymnasium,
    /// D4RL 1.1's own AntMaze code on the mujoco bindings (`scripts/d4rl_antmaze_parity.py`).
    D4rlAntMaze,
    /// Gymnasium-Robotics 1.4.2's `AdroitHand*-v1` with D4RL's reward sign and pen-drop
    /// termination restored (`scripts/adroit_parity.py`).
    Adroit,
    /// The same oracle with the binary reward of the `*-binary-v0` ids: `1[info.success] − 1`,
    /// terminated at the goal, no pen-drop termination (`scripts/adroit_parity.py`, `binary_reward`).
    AdroitBinary,
}

impl Oracle {
    /// The oracle's script, beside the Gymnasium one (`gym_script`).
    pub fn script(self, gym_script: &Path) -> std::path::PathBuf {
        match self {
            Oracle::Gymnasium => gym_script.to_path_buf(),
            Oracle::D4rlAntMaze => gym_script.with_file_name("d4rl_antmaze_parity.py"),
            Oracle::Adroit | Oracle::AdroitBinary => gym_script.with_file_name("adroit_parity.py"),
        }
    }
}

/// The reference for each of our ids.
pub fn reference_for(id: &str) -> Option<Reference> {
    if crate::registry::NO_PARITY_ORACLE.contains(&id) {
        return None;
    }
    if id.starts_with("antmaze-") {
        let gym_id = crate::registry::known_ids().into_iter().find(|k| *k == id)?;
        return Some(Reference { gym_id, clip_action: false, compared_obs_dims: None, oracle: Oracle::D4rlAntMaze });
    }
    let adroit = match id {
        "pen-v1" => Some(("AdroitHandPen-v1", Oracle::Adroit)),
        "door-v1" => Some(("AdroitHandDoor-v1", Oracle::Adroit)),
        "hammer-v1" => Some(("AdroitHandHammer-v1", Oracle::Adroit)),
        "relocate-v1" => Some(("AdroitHandRelocate-v1", Oracle::Adroit)),
        "pen-binary-v0" => Some(("AdroitHandPen-v1", Oracle::AdroitBinary)),
        "door-binary-v0" => Some(("AdroitHandDoor-v1", Oracle::AdroitBinary)),
        "relocate-binary-v0" => Some(("AdroitHandRelocate-v1", Oracle::AdroitBinary)),
        _ => None,
    };
    if let Some((gym_id, oracle)) = adroit {
        return Some(Reference { gym_id, clip_action: false, compared_obs_dims: None, oracle });
    }
    let (gym_id, clip_action, compared_obs_dims) = match id {
        "HalfCheetah-v5" | "Hopper-v5" | "Walker2d-v5" | "Ant-v5" | "InvertedPendulum-v5" => {
            (crate::registry::known_ids().into_iter().find(|k| *k == id)?, false, None)
        }
        "halfcheetah-v2" => ("HalfCheetah-v4", true, None),
        "hopper-v2" => ("Hopper-v4", true, None),
        "walker2d-v2" => ("Walker2d-v4", true, None),
        "ant-v2" => ("Ant-v4", true, Some(27)),
        id if crate::registry::is_fetch(id) => {
            (crate::registry::known_ids().into_iter().find(|k| *k == id)?, false, None)
        }
        _ => return None,
    };
    Some(Reference { gym_id, clip_action, compared_obs_dims, oracle: Oracle::Gymnasium })
}

#[derive(Serialize, Clone)]
struct RequestEpisode {
    qpos: Vec<f64>,
    qvel: Vec<f64>,
    /// The episode's goal: Fetch's desired goal (3-D), AntMaze's target (2-D).
    #[serde(skip_serializing_if = "Option::is_none")]
    goal: Option<Vec<f64>>,
    /// The task's per-episode model values (Adroit), by Gymnasium-Robotics' state-dict key.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    state: std::collections::BTreeMap<String, Vec<f64>>,
    actions: Vec<Vec<f32>>,
}

/// What parity needs from an env beside [`Env`]: the state an episode starts from, the
/// observation in `f64`, and (goal-reaching tasks) the goal the reset sampled and a way to move it.
trait Replay: Env {
    fn start(&self) -> RequestEpisode;
    fn observation(&self) -> Vec<f64>;
    /// The 2-D goal the last reset sampled, for tasks whose goal parity may place (AntMaze).
    fn sampled_goal(&self) -> Option<[f64; 2]> {
        None
    }
    /// Place the goal at `r` from the start's (x, y), at angle `th`.
    fn place_goal(&mut self, _r: f64, _th: f64) -> Result<(), EnvError> {
        Err(EnvError::Other("this task has no goal to place".into()))
    }
}

impl Replay for MujocoEnv {
    fn start(&self) -> RequestEpisode {
        RequestEpisode {
            qpos: self.qpos().to_vec(),
            qvel: self.qvel().to_vec(),
            goal: self.task().goal().map(|g| g.to_vec()),
            state: self.task().episode_state().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            actions: Vec::new(),
        }
    }
    fn observation(&self) -> Vec<f64> {
        self.observation_f64()
    }
    fn sampled_goal(&self) -> Option<[f64; 2]> {
        self.task().goal()
    }
    fn place_goal(&mut self, r: f64, th: f64) -> Result<(), EnvError> {
        let q = self.qpos();
        let placed = [q[0] + r * th.cos(), q[1] + r * th.sin()];
        self.set_goal(placed)
    }
}

impl Replay for FetchEnv {
    fn start(&self) -> RequestEpisode {
        RequestEpisode {
            qpos: self.qpos().to_vec(),
            qvel: self.qvel().to_vec(),
            goal: Some(self.goal().to_vec()),
            state: Default::default(),
            actions: Vec::new(),
        }
    }
    fn observation(&self) -> Vec<f64> {
        self.observation_f64()
    }
}

#[derive(Serialize)]
struct Request<'a> {
    /// gymnasium-robotics ids: register them and apply the MuJoCo 3.17 joint-type shim.
    robotics: bool,
    gym_id: &'a str,
    clip_action: bool,
    max_episode_steps: usize,
    episodes: &'a [RequestEpisode],
    /// Adroit's binary reward (`scripts/adroit_parity.py`); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    binary_reward: bool,
}

#[derive(Deserialize)]
struct Reply {
    /// The Python env's settled start state (Fetch: after `_env_setup`).
    #[serde(default)]
    initial_qpos: Option<Vec<f64>>,
    gymnasium: String,
    mujoco: String,
    /// The oracle in words, when it is not a Gymnasium env.
    #[serde(default)]
    oracle: Option<String>,
    /// The oracle's own start states and goals (D4RL), one per episode.
    #[serde(default)]
    d4rl_starts: Vec<ReplyStart>,
    episodes: Vec<Trace>,
}

#[derive(Deserialize)]
struct ReplyStart {
    qpos: Vec<f64>,
    qvel: Vec<f64>,
    goal: [f64; 2],
}

/// Our side of one episode.
struct OurEpisode {
    request: RequestEpisode,
    trace: Trace,
}

/// Run our env for `opts.steps` steps and record every episode.
fn run_ours<E: Replay>(
    env: &mut TimeLimit<E>,
    opts: &ParityOptions,
    sampled_goals: &mut Vec<[f64; 2]>,
) -> Result<Vec<OurEpisode>, EnvError> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
    let space = env.action_space().clone();
    let mut episodes = Vec::new();
    let mut done = 0;
    let mut seed = Some(opts.seed);
    while done < opts.steps {
        env.reset(seed.take())?;
        if let Some(g) = env.inner().sampled_goal() {
            sampled_goals.push(g);
            if episodes.len() % 2 == 1 {
                // Place the goal 0.3–0.7 from the start, so goal hits (and near misses) happen.
                let (r, th) = (0.3 + 0.4 * rng.gen::<f64>(), std::f64::consts::TAU * rng.gen::<f64>());
                env.inner_mut().place_goal(r, th)?;
            }
        }
        let raw = env.inner();
        let obs0 = raw.observation();
        let mut ep = OurEpisode { request: raw.start(), trace: Trace { obs0, ..Default::default() } };
        while done < opts.steps {
            let action = widened_action(&space, &mut rng);
            let step = env.step(&action)?;
            done += 1;
            ep.request.actions.push(action);
            let obs64 = env.inner().observation();
            // The f32 observation the agent sees must be the rounding of the one compared here.
            if obs64.iter().zip(&step.obs).any(|(x, y)| (*x as f32).to_bits() != y.to_bits()) {
                return Err(EnvError::Other(format!(
                    "{}: step() observation is not the f32 rounding of observation_f64()",
                    env.spec().id
                )));
            }
            ep.trace.push(obs64, &step);
            if step.terminated || step.truncated {
                break;
            }
        }
        episodes.push(ep);
    }
    Ok(episodes)
}

/// How many numbers of `ours` (rows of [qpos, qvel, goal]) fall outside the per-column box of
/// `theirs` widened by 10% of its width. qvel columns are Gaussian (unbounded), so they are
/// checked against ±6σ of the oracle's own sample instead, σ = 0.1 (both draw 0.1·N(0, 1)).
fn outside_support(ours: &[Vec<f64>], theirs: &[Vec<f64>], nq: usize, nv: usize) -> usize {
    let cols = theirs.first().map_or(0, |r| r.len());
    let mut bad = 0;
    for c in 0..cols {
        let vals: Vec<f64> = theirs.iter().map(|r| r[c]).collect();
        let (lo, hi) = if (nq..nq + nv).contains(&c) {
            (-0.6, 0.6)
        } else {
            let (lo, hi) = vals.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
            let pad = 0.1 * (hi - lo).max(1e-12);
            (lo - pad, hi + pad)
        };
        bad += ours.iter().filter(|r| r.get(c).is_some_and(|v| *v < lo || *v > hi)).count();
    }
    bad
}

/// Compare our env `id` with its Gymnasium reference; `python` runs `script`
/// (`scripts/gym_parity.py`; for the ImagineBench ids `scripts/imaginebench_parity.py`, see
/// [`crate::imaginebench::parity`]).
pub fn check(id: &str, opts: &ParityOptions, python: &Path, script: &Path) -> Result<ParityReport, EnvError> {
    if crate::imaginebench::is_env_id(id) {
        return crate::imaginebench::parity::check(id, opts, python, script);
    }
    if crate::registry::NO_PARITY_ORACLE.contains(&id) {
        return Err(EnvError::Other(format!(
            "{id} is o2o's own task (no Gymnasium or D4RL counterpart): it has no parity oracle"
        )));
    }
    let reference = reference_for(id).ok_or_else(|| EnvError::UnknownId {
        id: id.to_string(),
        known: crate::registry::known_ids().iter().map(|s| s.to_string()).collect(),
    })?;
    if opts.steps == 0 || opts.max_episode_steps == Some(0) {
        return Err(EnvError::Other(format!(
            "parity of {id}: steps ({}) and max_episode_steps ({:?}) must be at least 1",
            opts.steps, opts.max_episode_steps
        )));
    }
    let spec = crate::registry::spec(id)?;
    let max_steps = opts.max_episode_steps.or(spec.max_episode_steps).unwrap_or(1000);
    let robotics = crate::registry::is_fetch(id);
    let mut sampled_goals = Vec::new();
    let (ours, settled) = if robotics {
        let mut env = TimeLimit::new(crate::registry::make_fetch_unwrapped(id)?, max_steps);
        let settled = env.inner().initial_qpos().to_vec();
        (run_ours(&mut env, opts, &mut sampled_goals)?, Some(settled))
    } else {
        let mut env = TimeLimit::new(crate::registry::make_unwrapped(id)?, max_steps);
        (run_ours(&mut env, opts, &mut sampled_goals)?, None)
    };
    let requests: Vec<RequestEpisode> = ours.iter().map(|e| e.request.clone()).collect();
    let binary_reward = reference.oracle == Oracle::AdroitBinary;
    let req = Request {
        robotics,
        gym_id: reference.gym_id,
        clip_action: reference.clip_action,
        max_episode_steps: max_steps,
        episodes: &requests,
        binary_reward,
    };
    let reply: Reply = run_reference(python, &reference.oracle.script(script), &req)?;
    if reply.episodes.len() != ours.len() {
        return Err(EnvError::Reference {
            python: python.to_path_buf(),
            message: format!("sent {} episodes, got {} back", ours.len(), reply.episodes.len()),
        });
    }

    let reference_text = match &reply.oracle {
        Some(oracle) => format!("{oracle} on MuJoCo {}", reply.mujoco),
        None => format!(
            "Gymnasium {} `{}` on MuJoCo {}{}",
            reply.gymnasium,
            reference.gym_id,
            reply.mujoco,
            if reference.clip_action { ", actions clipped to the bounds first (D4RL)" } else { "" }
        ),
    };
    let traces: Vec<&Trace> = ours.iter().map(|e| &e.trace).collect();
    let mut report = compare(id, reference_text, &traces, &reply.episodes, reference.compared_obs_dims)?;
    if !reply.d4rl_starts.is_empty() {
        let theirs: Vec<Vec<f64>> =
            reply.d4rl_starts.iter().map(|s| s.qpos.iter().chain(&s.qvel).chain(&s.goal).copied().collect()).collect();
        let mine: Vec<Vec<f64>> = ours
            .iter()
            .zip(&sampled_goals)
            .map(|(e, g)| e.request.qpos.iter().chain(&e.request.qvel).chain(g).copied().collect())
            .collect();
        report.start_outside_support =
            outside_support(&mine, &theirs, ours[0].request.qpos.len(), ours[0].request.qvel.len());
    }
    if let Some(ours) = &settled {
        let theirs = reply.initial_qpos.as_ref().ok_or_else(|| EnvError::Reference {
            python: python.to_path_buf(),
            message: "the reply has no initial_qpos for a Fetch task".into(),
        })?;
        if theirs.len() != ours.len() {
            return Err(EnvError::Shape {
                what: format!("{id}: reference initial_qpos"),
                expected: ours.len(),
                found: theirs.len(),
            });
        }
        report.max_initial_state_diff = Some(ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_has_a_reference() {
        for id in crate::registry::known_ids().into_iter().filter(|id| !crate::registry::NO_PARITY_ORACLE.contains(id))
        {
            assert!(reference_for(id).is_some(), "{id}");
        }
        assert_eq!(reference_for("ant-v2").unwrap().compared_obs_dims, Some(27));
        assert!(reference_for("walker2d-v2").unwrap().clip_action);
        assert!(!reference_for("Ant-v5").unwrap().clip_action);
    }
}
