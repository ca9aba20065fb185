//! `o2o dataset make-benchmark imaginebench-mujoco [--scale small] [--out DIR] [--seed S]`:
//! a small ImagineBench-layout file made here, to test and demo the whole path without the
//! release files.
//!
//! - **Real rollouts** of the four real tasks, in o2o's ImagineBench env (success terminates,
//!   200-step limit): open-loop sinusoidal gaits a_j(t) = clip(b_j + A_j sin(ω t + φ_j), −1, 1)
//!   whose 19 parameters are optimised by the cross-entropy method in our HalfCheetah for the
//!   distance run forward or backward in 100 steps, played with per-episode Gaussian action
//!   noise (σ ~ U(0.05, 0.4)) and a random phase start. The jumps use the same gaits and end at
//!   their success (S ≷ 0 at t ≥ 5).
//! - **Imaginary rollouts** of the held-out tasks (rephrase, easy, hard), standing in for
//!   ImagineBench's LLM-imagined ones: rollouts of a dynamics model learned from the real rows
//!   (an MLP predicting Δx and the change of the 17 state numbers from state and action), under
//!   scripted action plans per task (rephrase: the real gaits; fast: amplitude ×1.2 and
//!   frequency ×1.15; turn-arounds: forward then backward gait or the reverse, switching at
//!   step 100; jump in place: the gaits at a quarter amplitude, alternating every 8 steps).
//!   Rewards and terminations follow each task's rule on the *predicted* Δx. These are **not
//!   LLM-generated**: the benchmark's imaginary data come from an LLM fine-tuned on environment
//!   data, and o2o has neither such a model nor the network or GPU to run one here; the file's
//!   `metadata/imaginary_source` and `manifest.json` say so.
//!
//! The manifest also records, per held-out task, how often the imagined rollouts succeed by the
//! task's rule and how often the same action sequences succeed when replayed in the simulator
//! from the same start: the gap is how far the imagination is from the truth.

use super::locomotion::Scale;
use super::normal;
use crate::run::actor::derive_seed;
use crate::run::rundir;
use anyhow::{bail, Context, Result};
use o2o_datasets::imaginebench::ImagineBenchDataset;
use o2o_envs::imaginebench::{History, ImagineBenchEnv, ImagineBenchOptions, Instructions, Level, TaskKind, STATE_DIM};
use o2o_envs::Env;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{nn, nn::Module, nn::OptimizerConfig, Device, Kind, Tensor};

/// The file the command writes into `--out` (with `manifest.json`).
pub const FILE: &str = "mujoco-small.hdf5";

/// HalfCheetah's env step in seconds (reward_run = Δx / DT).
const DT: f64 = 0.05;
/// Actions per step.
const ACT: usize = 6;
/// State numbers after Δx.
const OBS: usize = STATE_DIM - 1;

/// How much of everything.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ImagineSizes {
    /// CEM iterations per gait.
    pub cem_iterations: usize,
    /// CEM candidates per iteration.
    pub cem_population: usize,
    /// Real episodes per real task.
    pub real_episodes: usize,
    /// Imagined episodes per held-out task.
    pub imagined_episodes: usize,
    /// Gradient steps of the dynamics model.
    pub model_steps: usize,
}

impl ImagineSizes {
    /// The sizes of a scale: small finishes in about a minute on 2 cores.
    pub fn of(scale: Scale) -> Self {
        match scale {
            Scale::Small => Self {
                cem_iterations: 10,
                cem_population: 32,
                real_episodes: 30,
                imagined_episodes: 20,
                model_steps: 3000,
            },
            Scale::Full => Self {
                cem_iterations: 30,
                cem_population: 64,
                real_episodes: 500,
                imagined_episodes: 500,
                model_steps: 30000,
            },
        }
    }
}

/// An open-loop gait: a_j(t) = clip(b_j + A_j sin(ω t + φ_j), −1, 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gait {
    /// A_j.
    pub amplitude: [f64; ACT],
    /// φ_j.
    pub phase: [f64; ACT],
    /// b_j.
    pub offset: [f64; ACT],
    /// ω, radians per step.
    pub omega: f64,
}

impl Gait {
    const N: usize = 3 * ACT + 1;

    fn from_params(p: &[f64]) -> Self {
        let mut g =
            Gait { amplitude: [0.0; ACT], phase: [0.0; ACT], offset: [0.0; ACT], omega: p[3 * ACT].clamp(0.2, 2.0) };
        for j in 0..ACT {
            g.amplitude[j] = p[j].clamp(0.0, 1.0);
            g.phase[j] = p[ACT + j];
            g.offset[j] = p[2 * ACT + j].clamp(-0.6, 0.6);
        }
        g
    }

    /// The action at (real-valued) step `t`, amplitude scaled by `gain`, frequency by `speed`.
    fn action(&self, t: f64, gain: f64, speed: f64) -> [f64; ACT] {
        let mut a = [0.0; ACT];
        for j in 0..ACT {
            a[j] = (self.offset[j] + gain * self.amplitude[j] * (speed * self.omega * t + self.phase[j]).sin())
                .clamp(-1.0, 1.0);
        }
        a
    }
}

/// Distance run in `steps` steps of HalfCheetah with `gait` from a seeded reset.
fn distance(gait: &Gait, steps: usize, seed: u64) -> Result<f64> {
    let mut env = o2o_envs::make_unwrapped("HalfCheetah-v5")?;
    env.reset(Some(seed))?;
    let x0 = env.qpos()[0];
    for t in 0..steps {
        let a = gait.action(t as f64, 1.0, 1.0).map(|v| v as f32);
        env.step(&a)?;
    }
    Ok(env.qpos()[0] - x0)
}

/// The cross-entropy method over the gait's 19 parameters for `sign` × distance in 100 steps
/// (mean over two reset seeds); returns the best gait and its mean distance.
fn cem_gait(sign: f64, sizes: &ImagineSizes, rng: &mut ChaCha8Rng) -> Result<(Gait, f64)> {
    let mut mean: Vec<f64> = [vec![0.6; ACT], vec![0.0; ACT], vec![0.0; ACT], vec![0.8]].concat();
    let mut std: Vec<f64> = [vec![0.3; ACT], vec![1.5; ACT], vec![0.2; ACT], vec![0.3]].concat();
    let elites = (sizes.cem_population / 5).max(2);
    let mut best = (Gait::from_params(&mean), f64::NEG_INFINITY);
    for it in 0..sizes.cem_iterations {
        let mut scored: Vec<(f64, Vec<f64>)> = Vec::with_capacity(sizes.cem_population);
        for _ in 0..sizes.cem_population {
            let p: Vec<f64> = mean.iter().zip(&std).map(|(m, s)| m + s * normal(rng)).collect();
            let g = Gait::from_params(&p);
            let score = sign * (distance(&g, 100, 2 * it as u64)? + distance(&g, 100, 2 * it as u64 + 1)?) / 2.0;
            if score > best.1 {
                best = (g, score);
            }
            scored.push((score, p));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        for k in 0..Gait::N {
            let xs: Vec<f64> = scored[..elites].iter().map(|(_, p)| p[k]).collect();
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
            mean[k] = m;
            std[k] = v.sqrt().max(0.02);
        }
    }
    Ok(best)
}

/// How an episode chooses its actions: a gait schedule plus noise.
#[derive(Clone, Copy)]
struct Plan {
    first: Gait,
    /// The gait from step `switch` on (and back every `switch` steps when `alternate`).
    second: Gait,
    switch: usize,
    alternate: bool,
    gain: f64,
    speed: f64,
}

impl Plan {
    fn single(g: Gait) -> Self {
        Self { first: g, second: g, switch: usize::MAX, alternate: false, gain: 1.0, speed: 1.0 }
    }

    fn action(&self, t: usize, t0: f64, sigma: f64, rng: &mut ChaCha8Rng) -> [f32; ACT] {
        let second = if self.alternate { (t / self.switch) % 2 == 1 } else { t >= self.switch };
        let g = if second { self.second } else { self.first };
        g.action(t as f64 + t0, self.gain, self.speed).map(|v| (v + sigma * normal(rng)).clamp(-1.0, 1.0) as f32)
    }
}

/// The plan of a task (module docs), from the forward and backward gaits.
fn plan_for(task: TaskKind, fwd: Gait, bwd: Gait) -> Plan {
    use TaskKind::*;
    match task {
        JumpForward | MoveForward | RepJumpForward | RepMoveForward => Plan::single(fwd),
        JumpBackward | MoveBackward | RepJumpBackward | RepMoveBackward => Plan::single(bwd),
        MoveForwardFast => Plan { gain: 1.2, speed: 1.15, ..Plan::single(fwd) },
        MoveBackwardFast => Plan { gain: 1.2, speed: 1.15, ..Plan::single(bwd) },
        MoveForwardBackward => Plan { first: fwd, second: bwd, switch: 100, alternate: false, gain: 1.0, speed: 1.0 },
        MoveBackwardForward => Plan { first: bwd, second: fwd, switch: 100, alternate: false, gain: 1.0, speed: 1.0 },
        JumpInPlace => Plan { first: fwd, second: bwd, switch: 8, alternate: true, gain: 0.25, speed: 1.0 },
    }
}

/// Rows being collected, in ImagineBench's layout (18 state numbers per row).
#[derive(Default)]
struct Rows {
    ds: Option<ImagineBenchDataset>,
    texts: BTreeMap<String, usize>,
    trajectories: [u32; 2],
}

impl Rows {
    fn ds(&mut self) -> &mut ImagineBenchDataset {
        self.ds.get_or_insert_with(|| ImagineBenchDataset {
            source: PathBuf::from(FILE),
            obs_dim: STATE_DIM,
            act_dim: ACT,
            embed_dim: 0,
            observations: vec![],
            actions: vec![],
            rewards: vec![],
            next_observations: vec![],
            terminals: vec![],
            imaginary: vec![],
            trajectory: vec![],
            instruction_id: vec![],
            instructions: vec![],
            embeddings: vec![],
            metadata: vec![],
        })
    }

    /// Add one trajectory: `obs` has one more row than `actions`.
    fn push(&mut self, imaginary: bool, sentence: &str, obs: &[Vec<f32>], actions: &[[f32; ACT]], rewards: &[f32]) {
        let next_id = self.texts.len();
        let iid = *self.texts.entry(sentence.to_string()).or_insert(next_id);
        let traj = self.trajectories[imaginary as usize];
        self.trajectories[imaginary as usize] += 1;
        let ds = self.ds();
        if iid == ds.instructions.len() {
            ds.instructions.push(sentence.to_string());
        }
        for t in 0..actions.len() {
            ds.observations.extend_from_slice(&obs[t]);
            ds.next_observations.extend_from_slice(&obs[t + 1]);
            ds.actions.extend_from_slice(&actions[t]);
            ds.rewards.push(rewards[t]);
            ds.terminals.push(if t + 1 == actions.len() { 1.0 } else { 0.0 });
            ds.imaginary.push(imaginary);
            ds.trajectory.push(traj);
            ds.instruction_id.push(iid);
        }
    }
}

/// One task's numbers in the manifest.
#[derive(Debug, Serialize)]
pub struct TaskRecord {
    /// `<level>/<task>`.
    pub task: String,
    /// `real` or `imaginary`.
    pub kind: &'static str,
    /// Episodes and rows.
    pub episodes: usize,
    /// Rows.
    pub rows: usize,
    /// Fraction of episodes that end in success by the task's rule (imaginary: on the
    /// predicted Δx).
    pub success_rate: f64,
    /// Imaginary only: the same action sequences replayed in the simulator from the same starts.
    pub replayed_success_rate: Option<f64>,
}

/// `manifest.json` of the folder.
#[derive(Debug, Serialize)]
pub struct ImagineManifest {
    /// How it was made.
    pub generator: String,
    /// The scale.
    pub scale: String,
    /// The seed.
    pub seed: u64,
    /// The sizes.
    pub sizes: ImagineSizes,
    /// What the real rows are.
    pub real_source: String,
    /// What the imaginary rows are (and are not).
    pub imaginary_source: String,
    /// The forward and backward gaits and their distance in 100 steps.
    pub gaits: [(Gait, f64); 2],
    /// Held-out mean squared error of the dynamics model (standardized targets).
    pub model_validation_mse: f64,
    /// Per task.
    pub tasks: Vec<TaskRecord>,
    /// Seconds.
    pub wall_s: f64,
}

const REAL_SOURCE: &str = "o2o's ImagineBench env (HalfCheetah on MuJoCo 3.17): open-loop sinusoidal gaits optimised by the cross-entropy method for forward / backward distance, played with per-episode Gaussian action noise";
const IMAGINARY_SOURCE: &str = "NOT LLM-generated. Rollouts of an MLP dynamics model learned from this file's real rows, under scripted action plans per held-out task; rewards and terminations from each task's rule on the predicted Δx. ImagineBench's imaginary rollouts come from an LLM fine-tuned on environment data; o2o has no such model (no weights, no network access, CPU-only machines), so this is a stand-in with the same layout and roles, for testing and demos only.";

/// Roll one real episode of `task` in the simulator; returns (sentence, obs rows, actions,
/// rewards, success).
#[allow(clippy::type_complexity)]
fn real_episode(
    task: TaskKind,
    plan: &Plan,
    seed: u64,
    sigma: f64,
    t0: f64,
    rng: &mut ChaCha8Rng,
) -> Result<(String, Vec<Vec<f32>>, Vec<[f32; ACT]>, Vec<f32>, bool)> {
    let mut env = ImagineBenchEnv::new(ImagineBenchOptions {
        level: Some(task.level()),
        tasks: Some(vec![task]),
        instructions: Instructions::Fixed,
        ..Default::default()
    })?;
    let o = env.reset(Some(seed))?;
    let mut obs = vec![o[..STATE_DIM].to_vec()];
    let (mut acts, mut rews) = (Vec::new(), Vec::new());
    let mut ok = false;
    for t in 0..o2o_envs::imaginebench::MAX_EPISODE_STEPS {
        let a = plan.action(t, t0, sigma, rng);
        let s = env.step(&a)?;
        obs.push(s.obs[..STATE_DIM].to_vec());
        acts.push(a);
        rews.push(s.reward as f32);
        if s.terminated {
            ok = true;
            break;
        }
    }
    Ok((env.instruction().to_string(), obs, acts, rews, ok))
}

/// Input / target standardization of the dynamics model.
struct Norm {
    mean: Tensor,
    std: Tensor,
}

impl Norm {
    fn of(x: &Tensor) -> Self {
        Self { mean: x.mean_dim(0, true, Kind::Float), std: x.std_dim(0, false, true).clamp_min(1e-3) }
    }
    fn apply(&self, x: &Tensor) -> Tensor {
        (x - &self.mean) / &self.std
    }
    fn undo(&self, y: &Tensor) -> Tensor {
        y * &self.std + &self.mean
    }
}

/// The learned dynamics: [obs₁₇, a] → [Δx, obs₁₇' − obs₁₇].
struct Dynamics {
    net: nn::Sequential,
    input: Norm,
    target: Norm,
    low: Tensor,
    high: Tensor,
}

impl Dynamics {
    /// Fit on the real rows by mean squared error on standardized targets; returns the model
    /// and its MSE on a held-out tenth.
    fn fit(ds: &ImagineBenchDataset, steps: usize, seed: u64) -> Result<(Self, f64)> {
        tch::manual_seed(seed as i64);
        let n = ds.len() as i64;
        if n < 20 {
            bail!("too few real rows ({n}) to learn a dynamics model");
        }
        let obs = Tensor::from_slice(&ds.observations).view([n, STATE_DIM as i64]);
        let next = Tensor::from_slice(&ds.next_observations).view([n, STATE_DIM as i64]);
        let act = Tensor::from_slice(&ds.actions).view([n, ACT as i64]);
        let x = Tensor::cat(&[obs.narrow(1, 1, OBS as i64), act], 1);
        let y = Tensor::cat(&[next.narrow(1, 0, 1), next.narrow(1, 1, OBS as i64) - obs.narrow(1, 1, OBS as i64)], 1);
        let perm = Tensor::randperm(n, (Kind::Int64, Device::Cpu));
        let n_val = (n / 10).max(1);
        let (val, train) = (perm.narrow(0, 0, n_val), perm.narrow(0, n_val, n - n_val));
        let (input, target) = (Norm::of(&x.index_select(0, &train)), Norm::of(&y.index_select(0, &train)));
        let (xs, ys) = (input.apply(&x), target.apply(&y));
        let vs = nn::VarStore::new(Device::Cpu);
        let p = vs.root();
        let w = 200;
        let net = nn::seq()
            .add(nn::linear(&p / "l1", (OBS + ACT) as i64, w, Default::default()))
            .add_fn(|t| t.relu())
            .add(nn::linear(&p / "l2", w, w, Default::default()))
            .add_fn(|t| t.relu())
            .add(nn::linear(&p / "l3", w, (OBS + 1) as i64, Default::default()));
        let mut opt = nn::Adam::default().build(&vs, 1e-3)?;
        let n_train = train.size()[0];
        for _ in 0..steps {
            let idx = train.index_select(0, &Tensor::randint(n_train, [256], (Kind::Int64, Device::Cpu)));
            let loss = (net.forward(&xs.index_select(0, &idx)) - ys.index_select(0, &idx)).square().mean(Kind::Float);
            opt.backward_step(&loss);
        }
        let mse = tch::no_grad(|| {
            (net.forward(&xs.index_select(0, &val)) - ys.index_select(0, &val))
                .square()
                .mean(Kind::Float)
                .double_value(&[])
        });
        // Imagined states are kept inside the real rows' range widened by half of it.
        let s = obs.narrow(1, 1, OBS as i64);
        let (lo, hi) = (s.amin(0, false), s.amax(0, false));
        let margin = (&hi - &lo) * 0.5;
        Ok((Self { net, input, target, low: &lo - &margin, high: &hi + &margin }, mse))
    }

    /// One imagined step for a batch: `[B, 17]` states and `[B, 6]` actions → (Δx `[B]`,
    /// next states `[B, 17]`).
    fn step(&self, s: &Tensor, a: &Tensor) -> (Tensor, Tensor) {
        tch::no_grad(|| {
            let y = self.target.undo(&self.net.forward(&self.input.apply(&Tensor::cat(&[s, a], 1))));
            let next = (s + y.narrow(1, 1, OBS as i64)).clamp_tensor(Some(&self.low), Some(&self.high));
            (y.select(1, 0), next)
        })
    }
}

/// Arguments for [`generate`].
#[derive(Debug, Clone)]
pub struct ImagineSpec {
    /// small or full.
    pub scale: Scale,
    /// Seed of everything.
    pub seed: u64,
    /// Output folder.
    pub out: PathBuf,
}

/// Make `<out>/mujoco-small.hdf5` and `<out>/manifest.json` (module docs).
pub fn generate(spec: &ImagineSpec) -> Result<ImagineManifest> {
    let t0 = Instant::now();
    let sizes = ImagineSizes::of(spec.scale);
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(spec.seed, 201, 0));
    eprintln!(
        "make-benchmark imaginebench-mujoco: [1/4] gaits by CEM ({} × {} candidates each)",
        sizes.cem_iterations, sizes.cem_population
    );
    let fwd = cem_gait(1.0, &sizes, &mut rng)?;
    let bwd = cem_gait(-1.0, &sizes, &mut rng)?;
    eprintln!("  forward gait: {:.2} m in 100 steps; backward gait: {:.2} m", fwd.1, -bwd.1);

    eprintln!(
        "make-benchmark imaginebench-mujoco: [2/4] real rollouts, {} episodes per real task",
        sizes.real_episodes
    );
    let mut rows = Rows::default();
    let mut tasks = Vec::new();
    for (k, task) in Level::Real.tasks().iter().enumerate() {
        let plan = plan_for(*task, fwd.0, bwd.0);
        let (mut ok, mut n_rows) = (0, 0);
        for e in 0..sizes.real_episodes {
            let (sigma, t0) = (rng.gen_range(0.05..0.4), rng.gen_range(0.0..std::f64::consts::TAU));
            let seed = derive_seed(spec.seed, 202, (k * 100_000 + e) as u64);
            let (sentence, obs, acts, rews, success) = real_episode(*task, &plan, seed, sigma, t0, &mut rng)?;
            ok += success as usize;
            n_rows += acts.len();
            rows.push(false, &sentence, &obs, &acts, &rews);
        }
        tasks.push(TaskRecord {
            task: task.key().into(),
            kind: "real",
            episodes: sizes.real_episodes,
            rows: n_rows,
            success_rate: ok as f64 / sizes.real_episodes as f64,
            replayed_success_rate: None,
        });
    }

    eprintln!("make-benchmark imaginebench-mujoco: [3/4] dynamics model, {} gradient steps", sizes.model_steps);
    let (model, mse) = Dynamics::fit(rows.ds(), sizes.model_steps, derive_seed(spec.seed, 203, 0))?;
    eprintln!("  held-out MSE (standardized) {mse:.4}");

    eprintln!(
        "make-benchmark imaginebench-mujoco: [4/4] imagined rollouts, {} episodes per held-out task",
        sizes.imagined_episodes
    );
    for (k, task) in [Level::Rephrase, Level::Easy, Level::Hard].iter().flat_map(|l| l.tasks()).enumerate() {
        let rec = imagine_task(
            *task,
            &plan_for(*task, fwd.0, bwd.0),
            &model,
            &sizes,
            derive_seed(spec.seed, 204, k as u64),
            &mut rows,
            &mut rng,
        )?;
        tasks.push(rec);
    }
    let mut ds = rows.ds.take().context("no rows were collected")?;
    ds.metadata = vec![
        (
            "generator".into(),
            format!(
                "o2o dataset make-benchmark imaginebench-mujoco --scale {} --seed {}",
                spec.scale.name(),
                spec.seed
            ),
        ),
        ("real_source".into(), REAL_SOURCE.into()),
        ("imaginary_source".into(), IMAGINARY_SOURCE.into()),
    ];
    ds.embeddings = vec![];
    std::fs::create_dir_all(&spec.out).with_context(|| format!("cannot create {}", spec.out.display()))?;
    let path = spec.out.join(FILE);
    ds.write(&path).with_context(|| format!("writing {}", path.display()))?;
    let m = ImagineManifest {
        generator: "o2o dataset make-benchmark imaginebench-mujoco".into(),
        scale: spec.scale.name().into(),
        seed: spec.seed,
        sizes,
        real_source: REAL_SOURCE.into(),
        imaginary_source: IMAGINARY_SOURCE.into(),
        gaits: [fwd, (bwd.0, -bwd.1)],
        model_validation_mse: mse,
        tasks,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    rundir::write_json(&spec.out.join("manifest.json"), &m)?;
    Ok(m)
}

/// Imagine `sizes.imagined_episodes` episodes of `task` in the model (all at once, as a batch),
/// add them to `rows`, and replay their action sequences in the simulator.
fn imagine_task(
    task: TaskKind,
    plan: &Plan,
    model: &Dynamics,
    sizes: &ImagineSizes,
    seed: u64,
    rows: &mut Rows,
    rng: &mut ChaCha8Rng,
) -> Result<TaskRecord> {
    let b = sizes.imagined_episodes;
    let mut env = ImagineBenchEnv::new(ImagineBenchOptions {
        level: Some(task.level()),
        tasks: Some(vec![task]),
        ..Default::default()
    })?;
    // Start states and sentences from the env's own resets.
    let (mut starts, mut sentences, mut seeds) = (Vec::new(), Vec::new(), Vec::new());
    for e in 0..b {
        let s = derive_seed(seed, 0, e as u64);
        let o = env.reset(Some(s))?;
        starts.push(o[..STATE_DIM].to_vec());
        sentences.push(env.instruction().to_string());
        seeds.push(s);
    }
    let noise: Vec<(f64, f64)> =
        (0..b).map(|_| (rng.gen_range(0.05..0.4), rng.gen_range(0.0..std::f64::consts::TAU))).collect();
    let mut state = Tensor::from_slice(&starts.iter().flat_map(|o| o[1..].to_vec()).collect::<Vec<f32>>())
        .view([b as i64, OBS as i64]);
    let mut obs: Vec<Vec<Vec<f32>>> = starts.iter().map(|o| vec![o.clone()]).collect();
    let mut acts: Vec<Vec<[f32; ACT]>> = vec![Vec::new(); b];
    let mut rews: Vec<Vec<f32>> = vec![Vec::new(); b];
    let mut hist = vec![History::default(); b];
    let mut alive = vec![true; b];
    let mut ok = 0;
    for t in 0..o2o_envs::imaginebench::MAX_EPISODE_STEPS {
        if !alive.iter().any(|a| *a) {
            break;
        }
        let a: Vec<[f32; ACT]> = (0..b).map(|e| plan.action(t, noise[e].1, noise[e].0, rng)).collect();
        let at = Tensor::from_slice(&a.concat()).view([b as i64, ACT as i64]);
        let (dx, next) = model.step(&state, &at);
        let dx: Vec<f32> = Vec::try_from(&dx)?;
        let next_rows: Vec<f32> = Vec::try_from(&next.contiguous().view([-1]))?;
        for e in 0..b {
            if !alive[e] {
                continue;
            }
            let ctrl = -0.1 * a[e].iter().map(|v| (*v as f64).powi(2)).sum::<f64>();
            hist[e].push(dx[e] as f64);
            let mut row = vec![dx[e]];
            row.extend_from_slice(&next_rows[e * OBS..(e + 1) * OBS]);
            obs[e].push(row);
            acts[e].push(a[e]);
            rews[e].push(task.reward(dx[e] as f64 / DT, ctrl) as f32);
            if task.success(&hist[e]) {
                ok += 1;
                alive[e] = false;
            }
        }
        state = next;
    }
    let mut n_rows = 0;
    let mut replayed_ok = 0;
    for e in 0..b {
        n_rows += acts[e].len();
        rows.push(true, &sentences[e], &obs[e], &acts[e], &rews[e]);
        // The same actions in the simulator, from the same start.
        env.reset(Some(seeds[e]))?;
        for a in &acts[e] {
            let s = env.step(a)?;
            if s.terminated {
                replayed_ok += 1;
                break;
            }
        }
    }
    Ok(TaskRecord {
        task: task.key().into(),
        kind: "imaginary",
        episodes: b,
        rows: n_rows,
        success_rate: ok as f64 / b as f64,
        replayed_success_rate: Some(replayed_ok as f64 / b as f64),
    })
}

/// What `o2o dataset make-benchmark imaginebench-mujoco` prints about the folder `out` it made:
/// the gaits and the model, then a line per task.
pub fn summary(out: &Path, m: &ImagineManifest) -> String {
    let mut lines = vec![format!(
        "{}: {FILE} in {:.0} s; forward gait {:.2} m / 100 steps, backward {:.2} m; model MSE {:.4}",
        out.display(),
        m.wall_s,
        m.gaits[0].1,
        m.gaits[1].1,
        m.model_validation_mse
    )];
    for t in &m.tasks {
        let replay = t
            .replayed_success_rate
            .map_or(String::new(), |r| format!("  (replayed in the simulator: {:.0}%)", 100.0 * r));
        lines.push(format!(
            "  {:<10} {:<30} {:>4} episodes {:>7} rows  success {:>4.0}%{replay}",
            t.kind,
            t.task,
            t.episodes,
            t.rows,
            100.0 * t.success_rate
        ));
    }
    lines.join("\n")
}
