//! Benchmark datasets made by o2o (`o2o dataset make-benchmark`), one file per family, each with
//! a spec (what to make), a `generate` that writes the file(s) and `manifest.json` into the
//! spec's folder and returns the manifest, and a `summary` of that manifest, the text the
//! command prints:
//!
//! - [`locomotion`]: D4RL-style `random`, `medium`, `medium-replay` and `expert` files of
//!   hopper, halfcheetah or walker2d, from SAC trained here (manifest [`manifest`]);
//! - [`mixed`]: one locomotion file whose quality differs by state region (a trained policy in
//!   one region, random actions elsewhere), FamO2O's claim data;
//! - [`antmaze`]: AntMaze files from a waypoint planner driving a goal-reaching ant controller;
//! - [`adroit`]: Adroit-layout files from a scripted hold-pose controller;
//! - [`imaginebench`]: an ImagineBench-layout file of real and model-imagined rollouts.
//!
//! The pieces they share are here: the work folder removed afterwards ([`with_work_dir`]), a
//! policy's rollout recorded in D4RL format with its MuJoCo states ([`rollout`], [`states`]),
//! a D4RL file written and described for a manifest ([`write_file`]), and the normal draws of
//! the scripted controllers' noise ([`normal`]).

pub mod adroit;
pub mod antmaze;
pub mod imaginebench;
pub mod locomotion;
pub mod manifest;
pub mod mixed;
pub mod states;

use crate::run::actor::{ActionScale, Actor, Policy};
use crate::run::data::Recorder;
use crate::run::progress::Progress;
use anyhow::{Context, Result};
use manifest::{FileRecord, Stats};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::Dtype;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;

/// Run `make` in a fresh work folder `<out>/.make-benchmark-<pid>` that is removed afterwards,
/// also on error; when `make` succeeds, the work folder's sub-folder `keep` (if given and
/// present) is first moved to `<out>/<keep>`.
pub fn with_work_dir<T>(out: &Path, keep: Option<&str>, make: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let work = out.join(format!(".make-benchmark-{}", std::process::id()));
    let result = make(&work);
    if let Some(name) = keep.filter(|k| result.is_ok() && work.join(k).is_dir()) {
        let kept = out.join(name);
        let _ = std::fs::remove_dir_all(&kept);
        if let Err(e) = std::fs::rename(work.join(name), &kept) {
            let _ = std::fs::remove_dir_all(&work);
            return Err(e).with_context(|| format!("cannot move {name} to {}", kept.display()));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// `rows` env steps of `policy` with the runner's actor (episode k resets with
/// `derive_seed(seed, 1, k)`), recorded in D4RL format with the states before each step. The
/// last episode is cut at `rows`, as in D4RL's files.
pub fn rollout(
    env_id: &str,
    policy: &mut dyn Policy,
    rows: usize,
    seed: u64,
    label: &'static str,
) -> Result<D4rlDataset> {
    let (env, log) = states::make_logged(env_id)?;
    let obs_dim = env.observation_space().dim();
    let scale = ActionScale::new(env.action_space(), env_id)?;
    let mut actor = Actor::new(env, seed, 0)?;
    let mut recorder = Recorder::new(obs_dim, scale);
    let progress = Progress::new(rows as u64, 0, Default::default());
    for i in 0..rows {
        actor.step(policy, &mut recorder)?;
        if i % 1000 == 0 {
            progress.set(i as u64, label);
        }
    }
    progress.finish();
    let mut ds = recorder.into_dataset();
    ds.infos = states::lock(&log).columns(0, rows, Dtype::Float32)?;
    Ok(ds)
}

/// Write `<out>/<task>-<role>-v2.hdf5` (atomically) and describe it for the manifest.
pub fn write_file(
    out: &Path,
    task: &str,
    role: &str,
    policy: &str,
    ds: &mut D4rlDataset,
    float: Dtype,
    gzip: Option<u8>,
) -> Result<FileRecord> {
    let id = format!("{task}-{role}-v2");
    let file = format!("{id}.hdf5");
    let path = out.join(&file);
    ds.source = path.clone();
    for k in ["observations", "actions", "rewards", "next_observations"] {
        ds.dtypes.insert(k.to_string(), float);
    }
    ds.write_gzip(&path, gzip).with_context(|| format!("writing {}", path.display()))?;
    let (sha256, bytes) = o2o_datasets::download::hash_file(&path)?;
    let eps: Vec<_> = ds.episodes(None).into_iter().filter(|e| e.terminated || e.truncated).collect();
    let returns: Vec<f64> = eps.iter().map(|e| ds.rewards[e.rows.clone()].iter().map(|&r| r as f64).sum()).collect();
    let stats = Stats::of(&returns);
    let (lo, hi) = o2o_datasets::scores::ref_scores(task)?;
    let normalized_score = stats.map(|s| s.map(|r| 100.0 * (r - lo) / (hi - lo)));
    eprintln!(
        "  {file}: {} rows, {} episodes, mean return {}, {bytes} bytes",
        ds.len(),
        eps.len(),
        stats.map_or("-".to_string(), |s| format!("{:.1}", s.mean))
    );
    Ok(FileRecord {
        file,
        id,
        role: role.to_string(),
        policy: policy.to_string(),
        rows: ds.len(),
        episodes: eps.len(),
        returns: stats,
        normalized_score,
        bytes,
        sha256,
        gzip: gzip.unwrap_or(0),
    })
}

/// One N(0, 1) draw (Box–Muller).
pub fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u1, u2) = (1.0 - rng.gen::<f64>(), rng.gen::<f64>());
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
