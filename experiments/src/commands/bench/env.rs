//! `o2o bench env <ID>`: single-thread env steps per second against two references measured in
//! the same run, plus the vector env's thread scaling.
//!
//! 1. **ours**: `make_mujoco(id)` (time limit included), pre-drawn uniform actions in the action
//!    box, resetting on episode end;
//! 2. **physics bound**: a bare `MjData` on the same model doing only `ctrl = a` and `mj_step` ×
//!    frame skip with the same actions, restarted from the same states where ours reset — the
//!    floor any env built on this MuJoCo can reach;
//! 3. **Gymnasium**: `scripts/bench_gym.py` (venv python) timing `gymnasium.make(id).step` on the
//!    same task (the v4 class for `-v2` ids), and its own raw `mj_step` × frame skip;
//! 4. **vector env**: `VecEnv` of `--num-envs` envs on 1 and 2 threads, env steps per second.
//!
//! Each figure is the best of `--repeats` timed runs (the machines are shared; the best run is
//! the least disturbed). With `--json` the last line is one JSON object with keys `env`,
//! `ours_steps_per_s`, `physics_steps_per_s`, `gymnasium_steps_per_s`,
//! `vec_1_thread_steps_per_s`, `vec_2_threads_steps_per_s` (and the ratios and settings).

use anyhow::{bail, Context, Result};
use mujoco_rs::prelude::*;
use o2o_envs::parity::reference_for;
use o2o_envs::{Env, VecEnv};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::process::Command;
use std::time::Instant;

/// Arguments of `o2o bench env`.
#[derive(clap::Args)]
pub struct EnvBenchArgs {
    /// Task id, e.g. HalfCheetah-v5.
    pub id: String,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Timed env steps per measurement.
    #[arg(long, default_value_t = 20_000)]
    pub steps: usize,
    /// Timed runs per measurement; the best is reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Envs in the vector env.
    #[arg(long, default_value_t = 8)]
    pub num_envs: usize,
    /// Seed of the actions and resets.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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

/// Steps per second of our env over `acts`; returns the episode starts it went through.
fn time_ours(id: &str, acts: &[f32], act_dim: usize, seed: u64) -> Result<(f64, Vec<Restart>)> {
    let mut env = o2o_envs::make_mujoco(id)?;
    let mut restarts = Vec::new();
    env.reset(Some(seed))?;
    restarts.push(Restart { at: 0, qpos: env.inner().qpos().to_vec(), qvel: env.inner().qvel().to_vec() });
    let t0 = Instant::now();
    for (k, a) in acts.chunks(act_dim).enumerate() {
        let s = env.step(a)?;
        if s.terminated || s.truncated {
            env.reset(None)?;
            restarts.push(Restart { at: k + 1, qpos: env.inner().qpos().to_vec(), qvel: env.inner().qvel().to_vec() });
        }
    }
    let rate = (acts.len() / act_dim) as f64 / t0.elapsed().as_secs_f64();
    Ok((rate, restarts))
}

/// Steps per second of bare `mj_step` × frame skip along the same episodes.
fn time_physics(id: &str, acts: &[f32], act_dim: usize, restarts: &[Restart]) -> Result<f64> {
    let env = o2o_envs::make_unwrapped(id)?;
    let fs = env.frame_skip();
    let mut data = MjData::new(env.model());
    let mut ctrl = vec![0.0f64; act_dim];
    let mut next = 0;
    let t0 = Instant::now();
    for (k, a) in acts.chunks(act_dim).enumerate() {
        if next < restarts.len() && restarts[next].at == k {
            data.qpos_mut().copy_from_slice(&restarts[next].qpos);
            data.qvel_mut().copy_from_slice(&restarts[next].qvel);
            data.forward();
            next += 1;
        }
        for (c, v) in ctrl.iter_mut().zip(a) {
            *c = *v as f64;
        }
        data.ctrl_mut().copy_from_slice(&ctrl);
        for _ in 0..fs {
            data.step();
        }
    }
    Ok((acts.len() / act_dim) as f64 / t0.elapsed().as_secs_f64())
}

/// Env steps per second of a `VecEnv` of `num_envs` on `threads` threads.
fn time_vec(id: &str, num_envs: usize, threads: usize, acts: &[f32], act_dim: usize, seed: u64) -> Result<f64> {
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

fn best(repeats: usize, mut f: impl FnMut() -> Result<f64>) -> Result<f64> {
    let mut top = 0.0f64;
    for _ in 0..repeats.max(1) {
        top = top.max(f()?);
    }
    Ok(top)
}

fn gymnasium(gym_id: &str, steps: usize, repeats: usize, seed: u64) -> Result<serde_json::Value> {
    let python = crate::paths::venv_python();
    let script = crate::paths::scripts_dir().join("bench_gym.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(gym_id)
        .args(["--steps", &steps.to_string(), "--repeats", &repeats.to_string(), "--seed", &seed.to_string()])
        .output()
        .with_context(|| format!("running {} {} (run `make setup` if the venv is missing)", python.display(), script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({}):\n{}", script.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).context("bench_gym.py printed no JSON")?;
    serde_json::from_str(line).with_context(|| format!("parsing bench_gym.py output `{line}`"))
}

fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// Run `o2o bench env`.
pub fn run(a: EnvBenchArgs) -> Result<()> {
    let reference = reference_for(&a.id).with_context(|| format!("unknown env id `{}`; see `o2o env list`", a.id))?;
    let probe = o2o_envs::make(&a.id)?;
    let (act_dim, low, high) = (probe.action_space().dim(), probe.action_space().low.clone(), probe.action_space().high.clone());
    let acts = actions(a.steps, &low, &high, a.seed);
    let load_before = load_average();

    // Warm-up (page in the model, settle the CPU clock).
    time_ours(&a.id, &acts[..act_dim * a.steps.min(2000)], act_dim, a.seed)?;
    // Ours and the physics bound alternate, so a disturbance hits both.
    let (mut ours, mut physics) = (0.0f64, 0.0f64);
    for _ in 0..a.repeats.max(1) {
        let (rate, restarts) = time_ours(&a.id, &acts, act_dim, a.seed)?;
        ours = ours.max(rate);
        physics = physics.max(time_physics(&a.id, &acts, act_dim, &restarts)?);
    }
    let vec1 = best(a.repeats, || time_vec(&a.id, a.num_envs, 1, &acts, act_dim, a.seed))?;
    let vec2 = best(a.repeats, || time_vec(&a.id, a.num_envs, 2, &acts, act_dim, a.seed))?;
    let gym = gymnasium(reference.gym_id, a.steps, a.repeats, a.seed)?;
    let gym_rate = gym["gymnasium_steps_per_s"].as_f64().context("bench_gym.py: no gymnasium_steps_per_s")?;
    let py_mj = gym["python_mj_step_steps_per_s"].as_f64().unwrap_or(f64::NAN);
    let load_after = load_average();

    let us = |r: f64| 1e6 / r;
    println!("o2o bench env {}  ({} steps × best of {}, load avg {} → {})", a.id, a.steps, a.repeats,
        load_before.as_deref().unwrap_or("?"), load_after.as_deref().unwrap_or("?"));
    println!("  ours (o2o, Rust)           {:>9.0} steps/s  {:>6.1} µs/step", ours, us(ours));
    println!("  physics bound (mj_step×fs) {:>9.0} steps/s  {:>6.1} µs/step   ours/physics = {:.3}", physics, us(physics), ours / physics);
    println!("  Gymnasium {:<16} {:>9.0} steps/s  {:>6.1} µs/step   ours/gymnasium = {:.2}", reference.gym_id, gym_rate, us(gym_rate), ours / gym_rate);
    println!("  Python mj_step×fs          {:>9.0} steps/s  {:>6.1} µs/step", py_mj, us(py_mj));
    println!("  VecEnv {} envs, 1 thread    {:>9.0} steps/s", a.num_envs, vec1);
    println!("  VecEnv {} envs, 2 threads   {:>9.0} steps/s   2 threads / 1 = {:.2}", a.num_envs, vec2, vec2 / vec1);
    if a.json {
        println!(
            "{}",
            json!({
                "env": a.id,
                "ours_steps_per_s": ours,
                "physics_steps_per_s": physics,
                "gymnasium_steps_per_s": gym_rate,
                "vec_1_thread_steps_per_s": vec1,
                "vec_2_threads_steps_per_s": vec2,
                "python_mj_step_steps_per_s": py_mj,
                "ours_over_physics": ours / physics,
                "ours_over_gymnasium": ours / gym_rate,
                "vec_2_over_1": vec2 / vec1,
                "gymnasium_id": reference.gym_id,
                "num_envs": a.num_envs,
                "steps": a.steps,
                "repeats": a.repeats,
                "load_avg_before": load_before,
                "load_avg_after": load_after,
            })
        );
    }
    Ok(())
}
