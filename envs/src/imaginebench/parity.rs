//! Parity of the ImagineBench tasks against a Python implementation of the same documented
//! rules on Gymnasium's HalfCheetah-v4 (`scripts/imaginebench_parity.py`; the benchmark's own
//! package pins gym 0.26 and does not install beside Gymnasium 1.4).
//!
//! Our env generates the episodes exactly as [`crate::parity`] does (seeded resets, actions from
//! the action box widened by 20%), cycling through the level's tasks; each episode's task name,
//! start `qpos`/`qvel` and actions go to the script, which replays them from that state and
//! returns the 18 state numbers ([x₀ or Δx, obs₁₇]), the task reward, `terminated` (= success)
//! and `truncated` (200 steps, or the check's shorter limit). The instruction vector is not
//! compared (the script has no encoder; the vector is a constant per episode).

use crate::env::Env;
use crate::error::EnvError;
use crate::imaginebench::{ImagineBenchEnv, ImagineBenchOptions};
use crate::parity::harness::{compare, run_reference, widened_action, ParityOptions, ParityReport, Trace};
use crate::wrappers::TimeLimit;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Serialize)]
struct RequestEpisode {
    task: &'static str,
    qpos: Vec<f64>,
    qvel: Vec<f64>,
    actions: Vec<Vec<f32>>,
}

#[derive(Serialize)]
struct Request<'a> {
    max_episode_steps: usize,
    episodes: &'a [RequestEpisode],
}

#[derive(Deserialize)]
struct Reply {
    gymnasium: String,
    mujoco: String,
    episodes: Vec<Trace>,
}

/// Compare the ImagineBench env `id` with the Python oracle `script`, run by `python`.
pub fn check(id: &str, opts: &ParityOptions, python: &Path, script: &Path) -> Result<ParityReport, EnvError> {
    let level = super::level_of_env_id(id).ok_or_else(|| EnvError::UnknownId {
        id: id.into(),
        known: super::env_ids().iter().map(|s| s.to_string()).collect(),
    })?;
    if opts.steps == 0 || opts.max_episode_steps == Some(0) {
        return Err(EnvError::Other(format!(
            "parity of {id}: steps ({}) and max_episode_steps ({:?}) must be at least 1",
            opts.steps, opts.max_episode_steps
        )));
    }
    let max_steps = opts.max_episode_steps.unwrap_or(super::MAX_EPISODE_STEPS);
    let mut env = TimeLimit::new(ImagineBenchEnv::new(ImagineBenchOptions { level, ..Default::default() })?, max_steps);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
    let space = env.action_space().clone();
    let (mut requests, mut ours) = (Vec::new(), Vec::new());
    let (mut done, mut seed) = (0, Some(opts.seed));
    while done < opts.steps {
        env.reset(seed.take())?;
        let raw = env.inner();
        let x0 = raw.physics().qpos()[0];
        let mut req = RequestEpisode {
            task: raw.task().name(),
            qpos: raw.physics().qpos().to_vec(),
            qvel: raw.physics().qvel().to_vec(),
            actions: Vec::new(),
        };
        let mut trace = Trace { obs0: raw.state_f64(x0), ..Default::default() };
        while done < opts.steps {
            let action = widened_action(&space, &mut rng);
            let step = env.step(&action)?;
            done += 1;
            req.actions.push(action);
            let dx = step.info.get("x_delta").unwrap_or(f64::NAN);
            trace.push(env.inner().state_f64(dx), &step);
            if step.done() {
                break;
            }
        }
        requests.push(req);
        ours.push(trace);
    }
    let reply: Reply = run_reference(python, script, &Request { max_episode_steps: max_steps, episodes: &requests })?;
    if reply.episodes.len() != ours.len() {
        return Err(EnvError::Reference {
            python: python.to_path_buf(),
            message: format!("sent {} episodes, got {} back", ours.len(), reply.episodes.len()),
        });
    }
    let reference = format!(
        "scripts/imaginebench_parity.py (the documented rules) on Gymnasium {} `HalfCheetah-v4`, MuJoCo {}",
        reply.gymnasium, reply.mujoco
    );
    let traces: Vec<&Trace> = ours.iter().collect();
    compare(id, reference, &traces, &reply.episodes, None)
}
