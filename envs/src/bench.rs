//! Env speed: single-thread env steps per second against two references measured in the same
//! run, plus the vector env's thread scaling (`o2o bench env <ID>`).
//!
//! 1. **ours**: `make_mujoco(id)` (time limit included), pre-drawn uniform actions in the action
//!    box, resetting on episode end;
//! 2. **physics bound**: a bare `MjData` on the same model doing only `ctrl = a` and `mj_step` ×
//!    frame skip with the same actions, restarted from the same states where ours reset: the
//!    floor any env built on this MuJoCo can reach;
//! 3. **Gymnasium**: `scripts/bench_gym.py` (the set-up's python) timing
//!    `gymnasium.make(id).step` on the same task (the v4 class for `-v2` ids) and its own raw
//!    `mj_step` × frame skip;
//! 4. **vector env**: a [`VecEnv`] of `num_envs` envs on 1 and on 2 threads, env steps per second,
//!    next to the machine's own bound at that moment: two uncoordinated threads stepping one env
//!    each, over one thread (on a shared, loaded machine this is what limits the scaling).
//!
//! Each figure is the best of `repeats` timed runs (the machines are shared; the best run is the
//! least disturbed), and ours and the physics bound alternate in blocks of 500 steps so a
//! disturbance hits both alike.

use crate::env::Env;
use crate::error::EnvError;
use crate::parity::reference_for;
use crate::vector::VecEnv;
use mujoco_rs::prelude::*;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Timed env steps per measurement.
    pub steps: usize,
    /// Timed runs per measurement; the best is reported.
    pub repeats: usize,
    /// Envs in the vector env.
    pub num_envs: usize,
    /// Seed of the actions and resets.
    pub seed: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self { steps: 20_000, repeats: 3, num_envs: 8, seed: 0 }
    }
}

/// The figures of one run (env steps per second unless named otherwise).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Our id.
    pub env: String,
    /// Our env, one thread.
    pub ours_steps_per_s: f64,
    /// Bare `mj_step` × frame skip on the same model and trajectories.
    pub physics_steps_per_s: f64,
    /// Gymnasium's `env.step` (Python).
    pub gymnasium_steps_per_s: f64,
    /// `VecEnv` with 1 thread.
    pub vec_1_thread_steps_per_s: f64,
    /// `VecEnv` with 2 threads.
    pub vec_2_threads_steps_per_s: f64,
    /// Python's raw `mj_step` × frame skip.
    pub python_mj_step_steps_per_s: f64,
    /// ours / physics.
    pub ours_over_physics: f64,
    /// ours / Gymnasium.
    pub ours_over_gymnasium: f64,
    /// 2 threads / 1 thread.
    pub vec_2_over_1: f64,
    /// The machine's two-thread bound at the time: two uncoordinated threads each stepping its
    /// own env, over one thread. `vec_2_over_1` cannot exceed it.
    pub machine_2_over_1: f64,
    /// The Gymnasium id timed.
    pub gymnasium_id: String,
    /// Envs in the vector env.
    pub num_envs: usize,
    /// Timed steps per measurement.
    pub steps: usize,
    /// Timed runs per measurement.
    pub repeats: usize,
    /// `/proc/loadavg` (1, 5, 15 min) before the run.
    pub load_avg_before: Option<String>,
    /// `/proc/loadavg` after the run.
    pub load_avg_after: Option<String>,
}

impl BenchReport {
    /// A human-readable table.
    pub fn table(&self) -> String {
        let us = |r: f64| 1e6 / r;
        let mut s = format!(
            "o2o bench env {}  ({} steps, best of {}, load avg {} -> {})\n",
            self.env,
            self.steps,
            self.repeats,
            self.load_avg_before.as_deref().unwrap_or("?"),
            self.load_avg_after.as_deref().unwrap_or("?")
        );
        s += &format!(
            "  ours (o2o, Rust)            {:>9.0} steps/s  {:>6.1} us/step\n",
            self.ours_steps_per_s,
            us(self.ours_steps_per_s)
        );
        s += &format!(
            "  physics bound (mj_step x fs) {:>8.0} steps/s  {:>6.1} us/step   ours/physics = {:.3}\n",
            self.physics_steps_per_s,
            us(self.physics_steps_per_s),
            self.ours_over_physics
        );
        s += &format!(
            "  Gymnasium {:<17} {:>9.0} steps/s  {:>6.1} us/step   ours/gymnasium = {:.2}\n",
            self.gymnasium_id,
            self.gymnasium_steps_per_s,
            us(self.gymnasium_steps_per_s),
            self.ours_over_gymnasium
        );
        s += &format!(
            "  Python mj_step x fs         {:>9.0} steps/s  {:>6.1} us/step\n",
            self.python_mj_step_steps_per_s,
            us(self.python_mj_step_steps_per_s)
        );
        s += &format!("  VecEnv {} envs, 1 thread     {:>9.0} steps/s\n", self.num_envs, self.vec_1_thread_steps_per_s);
        s += &format!(
            "  VecEnv {} envs, 2 threads    {:>9.0} steps/s   2 threads / 1 = {:.2}\n",
            self.num_envs, self.vec_2_threads_steps_per_s, self.vec_2_over_1
        );
        s += &format!(
            "  machine bound: 2 free threads / 1 = {:.2} (no vector env can beat this now)",
            self.machine_2_over_1
        );
        s
    }
}

/// Where one episode of run 1 started: step index and state.
struct Restart {
    at: usize,
    qpos: Vec<f64>,
    qvel: Vec<f64>,
}

fn actions(n: usize, low: &[f32], high: &[f32], seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).flat_map(|_| low.iter().zip(high).map(|(l, h)| l + (h - l) * rng.gen::<f32>()).collect::<Vec<_>>()).collect()
}

/// Steps per second of our env and of the physics bound over `acts`, timed in alternating blocks
/// of `BLOCK` steps: ours runs a block, then a bare `MjData` replays the same block (same
/// actions, restarted from the same states where ours reset). Alternating every few
/// milliseconds exposes both to the same load on a shared machine, which back-to-back runs do not.
fn time_ours_and_physics(id: &str, acts: &[f32], act_dim: usize, seed: u64) -> Result<(f64, f64), EnvError> {
    const BLOCK: usize = 500;
    let mut env = crate::registry::make_mujoco(id)?;
    let fs = env.inner().frame_skip();
    let bare = crate::registry::make_unwrapped(id)?;
    let mut data = MjData::new(bare.model());
    let mut ctrl = vec![0.0f64; act_dim];
    env.reset(Some(seed))?;
    let mut restarts = vec![Restart { at: 0, qpos: env.inner().qpos().to_vec(), qvel: env.inner().qvel().to_vec() }];
    let (mut t_ours, mut t_phys) = (0.0f64, 0.0f64);
    let steps: Vec<&[f32]> = acts.chunks(act_dim).collect();
    for (b, block) in steps.chunks(BLOCK).enumerate() {
        let base = b * BLOCK;
        let t0 = Instant::now();
        for (k, a) in block.iter().enumerate() {
            let s = env.step(a)?;
            if s.terminated || s.truncated {
                env.reset(None)?;
                restarts.push(Restart {
                    at: base + k + 1,
                    qpos: env.inner().qpos().to_vec(),
                    qvel: env.inner().qvel().to_vec(),
                });
            }
        }
        t_ours += t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        for (k, a) in block.iter().enumerate() {
            if let Some(r) = restarts.iter().find(|r| r.at == base + k) {
                // What a reset costs the bare loop: set the state, recompute the derived quantities.
                data.reset();
                data.qpos_mut().copy_from_slice(&r.qpos);
                data.qvel_mut().copy_from_slice(&r.qvel);
                data.forward();
            }
            for (c, v) in ctrl.iter_mut().zip(a.iter()) {
                *c = *v as f64;
            }
            data.ctrl_mut().copy_from_slice(&ctrl);
            for _ in 0..fs {
                data.step();
            }
        }
        t_phys += t0.elapsed().as_secs_f64();
        restarts.retain(|r| r.at > base + block.len() - 1);
    }
    Ok((steps.len() as f64 / t_ours, steps.len() as f64 / t_phys))
}

/// Env steps per second of a `VecEnv` of `num_envs` on `threads` threads.
fn time_vec(
    id: &str,
    num_envs: usize,
    threads: usize,
    acts: &[f32],
    act_dim: usize,
    seed: u64,
) -> Result<f64, EnvError> {
    let mut v = VecEnv::make(id, num_envs, threads)?;
    v.reset(Some(seed))?;
    let row = num_envs * act_dim;
    let calls = acts.len() / row;
    let t0 = Instant::now();
    for k in 0..calls {
        v.step(&acts[k * row..(k + 1) * row])?;
    }
    Ok((calls * num_envs) as f64 / t0.elapsed().as_secs_f64())
}

/// The machine's own two-thread bound right now: two threads, each stepping its own env through
/// half of `acts` with no coordination at all, against one thread doing all of it. No vector env
/// can scale better than this ratio; on a loaded machine it shows how many cores were free.
fn time_independent(id: &str, threads: usize, acts: &[f32], act_dim: usize, seed: u64) -> Result<f64, EnvError> {
    let per = acts.len() / act_dim / threads;
    let mut envs = (0..threads).map(|_| crate::registry::make_mujoco(id)).collect::<Result<Vec<_>, _>>()?;
    for (i, e) in envs.iter_mut().enumerate() {
        e.reset(Some(seed + i as u64))?;
    }
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = envs
            .iter_mut()
            .enumerate()
            .map(|(i, env)| {
                let part = &acts[i * per * act_dim..(i + 1) * per * act_dim];
                scope.spawn(move || -> Result<(), EnvError> {
                    for a in part.chunks(act_dim) {
                        let s = env.step(a)?;
                        if s.terminated || s.truncated {
                            env.reset(None)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err(EnvError::Other("a bench thread panicked".into()))))
    })?;
    Ok((per * threads) as f64 / t0.elapsed().as_secs_f64())
}

fn best(repeats: usize, mut f: impl FnMut() -> Result<f64, EnvError>) -> Result<f64, EnvError> {
    let mut top = 0.0f64;
    for _ in 0..repeats.max(1) {
        top = top.max(f()?);
    }
    Ok(top)
}

/// Run `script` (`scripts/bench_gym.py`) with `python` and return (Gymnasium steps/s, Python
/// `mj_step` × frame skip steps/s). `episodes` are extra arguments that give the reference our
/// episode ends (Adroit: our time limit, and D4RL's pen-drop termination for pen), so both sides
/// pay for the same number of resets.
fn gymnasium(
    python: &Path,
    script: &Path,
    gym_id: &str,
    o: &BenchOptions,
    episodes: &[String],
) -> Result<(f64, f64), EnvError> {
    let fail = |message: String| EnvError::Reference { python: python.to_path_buf(), message };
    if !python.exists() {
        return Err(fail(format!("the Python interpreter does not exist; {}", crate::assets::INSTALL_HINT)));
    }
    let out = Command::new(python)
        .arg(script)
        .arg(gym_id)
        .args(["--steps", &o.steps.to_string(), "--repeats", &o.repeats.to_string(), "--seed", &o.seed.to_string()])
        .args(episodes)
        .output()
        .map_err(|e| fail(format!("cannot run {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(fail(format!(
            "{} exited with {}:\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| fail("bench_gym.py printed no JSON".into()))?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| fail(format!("cannot parse `{line}`: {e}")))?;
    let gym =
        v["gymnasium_steps_per_s"].as_f64().ok_or_else(|| fail(format!("no gymnasium_steps_per_s in `{line}`")))?;
    Ok((gym, v["python_mj_step_steps_per_s"].as_f64().unwrap_or(f64::NAN)))
}

fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Measure everything for `id`; `python` runs `script` (`scripts/bench_gym.py`).
pub fn run(id: &str, o: &BenchOptions, python: &Path, script: &Path) -> Result<BenchReport, EnvError> {
    let reference = reference_for(id).ok_or_else(|| EnvError::UnknownId {
        id: id.to_string(),
        known: crate::registry::known_ids().iter().map(|s| s.to_string()).collect(),
    })?;
    if o.repeats == 0 || o.num_envs == 0 || o.steps < 2 * o.num_envs {
        return Err(EnvError::Other(format!(
            "bench of {id}: need repeats >= 1, num_envs >= 1 and steps >= 2 x num_envs; got repeats {}, num_envs {}, steps {}",
            o.repeats, o.num_envs, o.steps
        )));
    }
    let probe = crate::registry::make(id)?;
    let (act_dim, low, high) =
        (probe.action_space().dim(), probe.action_space().low.clone(), probe.action_space().high.clone());
    let acts = actions(o.steps, &low, &high, o.seed);
    let load_avg_before = load_average();

    // Warm-up (page in the model, settle the CPU clock).
    time_ours_and_physics(id, &acts[..act_dim * o.steps.min(2000)], act_dim, o.seed)?;
    let (mut ours, mut physics) = (0.0f64, 0.0f64);
    for _ in 0..o.repeats.max(1) {
        let (a, b) = time_ours_and_physics(id, &acts, act_dim, o.seed)?;
        ours = ours.max(a);
        physics = physics.max(b);
    }
    let vec1 = best(o.repeats, || time_vec(id, o.num_envs, 1, &acts, act_dim, o.seed))?;
    let vec2 = best(o.repeats, || time_vec(id, o.num_envs, 2, &acts, act_dim, o.seed))?;
    let free1 = best(o.repeats, || time_independent(id, 1, &acts, act_dim, o.seed))?;
    let free2 = best(o.repeats, || time_independent(id, 2, &acts, act_dim, o.seed))?;
    // Gymnasium-Robotics' Adroit has a 200-step pen and no pen-drop termination; with random
    // actions the D4RL pen drops within tens of steps, so without these the reference would
    // reset several times less often than ours.
    let mut episodes = Vec::new();
    if matches!(reference.oracle, crate::parity::Oracle::Adroit | crate::parity::Oracle::AdroitBinary) {
        let limit = probe.spec().max_episode_steps.unwrap_or(200);
        episodes.extend(["--max-episode-steps".to_string(), limit.to_string()]);
        if id == "pen-v1" {
            episodes.push("--pen-drop-termination".into());
        }
    }
    let (gym, py_mj) = gymnasium(python, script, reference.gym_id, o, &episodes)?;
    Ok(BenchReport {
        env: id.to_string(),
        ours_steps_per_s: ours,
        physics_steps_per_s: physics,
        gymnasium_steps_per_s: gym,
        vec_1_thread_steps_per_s: vec1,
        vec_2_threads_steps_per_s: vec2,
        python_mj_step_steps_per_s: py_mj,
        ours_over_physics: ours / physics,
        ours_over_gymnasium: ours / gym,
        vec_2_over_1: vec2 / vec1,
        machine_2_over_1: free2 / free1,
        gymnasium_id: reference.gym_id.to_string(),
        num_envs: o.num_envs,
        steps: o.steps,
        repeats: o.repeats,
        load_avg_before,
        load_avg_after: load_average(),
    })
}
