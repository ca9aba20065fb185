//! `o2o dataset make-benchmark <pen|door|hammer|relocate>`: a small Adroit file in D4RL's v1
//! layout (formats.md §1.4), collected in o2o's `<task>-v1` env by a **scripted hold-pose
//! controller with Gaussian noise**: every actuator is a position servo, and the controller's
//! action sets each one's target to its joint's start position (qpos0 mapped into the
//! actuator's [−1, 1] range), plus σ·N(0, 1) per step, clipped to [−1, 1].
//!
//! This is far from D4RL's Adroit files: `human` holds 25 teleoperated demos, `expert` a
//! DAPG-trained policy's rollouts and `cloned` a BC policy's; none of those policies exists here
//! and the time to train one on 2 cores does not either. The hold-pose controller does not try
//! the task: it succeeds only where the task starts solved or close to it (pen: a target
//! orientation near the pen's start), and `manifest.json` records the measured success rate and
//! returns, so the file serves as a layout-exact, low-quality dataset (a "random"-like file),
//! not as a stand-in for D4RL's scores.
//!
//! Keys: `observations`, `actions`, `rewards` (D4RL's dense reward of the env), `terminals`
//! (the pen's drop termination), `timeouts` (each episode's last step at the time limit),
//! `infos/qpos`, `infos/qvel` (the state before the step) and the task's per-episode body key
//! (`infos/desired_orien`, `infos/door_body_pos`, `infos/board_pos`, `infos/obj_pos` +
//! `infos/target_pos`), as D4RL's files carry them.

use super::normal;
use crate::run::actor::derive_seed;
use crate::run::rundir::{self, Provenance};
use anyhow::{bail, Result};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use o2o_envs::mujoco::AdroitKind;
use o2o_envs::Env;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Value of the manifest's `format` field.
pub const FORMAT: &str = "o2o-benchmark-adroit/1";

/// The task's name (`pen`, …) → kind.
pub fn parse(s: &str) -> Option<AdroitKind> {
    [
        ("pen", AdroitKind::Pen),
        ("door", AdroitKind::Door),
        ("hammer", AdroitKind::Hammer),
        ("relocate", AdroitKind::Relocate),
    ]
    .into_iter()
    .find(|(n, _)| *n == s)
    .map(|(_, k)| k)
}

/// The task's name: `pen`, `door`, `hammer`, `relocate`.
pub fn parse_name(kind: AdroitKind) -> &'static str {
    match kind {
        AdroitKind::Pen => "pen",
        AdroitKind::Door => "door",
        AdroitKind::Hammer => "hammer",
        AdroitKind::Relocate => "relocate",
    }
}

/// Everything [`generate`] needs.
#[derive(Debug, Clone)]
pub struct AdroitSpec {
    /// The task.
    pub kind: AdroitKind,
    /// The folder the file and `manifest.json` go to.
    pub out: PathBuf,
    /// Seed of the episode resets and the action noise.
    pub seed: u64,
    /// Complete episodes of the env's horizon (pen 100 steps, the others 200).
    pub episodes: usize,
    /// σ of the action noise.
    pub action_noise: f64,
    /// gzip level of the columns (`None`: uncompressed).
    pub gzip: Option<u8>,
}

/// The manifest.
#[derive(Debug, Clone, Serialize)]
pub struct AdroitManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// The env the file was collected in, e.g. `pen-v1`.
    pub env: String,
    /// The file's name inside the folder.
    pub file: String,
    /// Who made it, when, from which revision.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// `--seed`.
    pub seed: u64,
    /// The controller, in words.
    pub controller: String,
    /// σ of the action noise.
    pub action_noise: f64,
    /// Rows of the file.
    pub rows: usize,
    /// Complete episodes of the env's horizon.
    pub episodes: usize,
    /// Share of episodes with `info.success` at some step.
    pub success_rate: f64,
    /// Mean undiscounted return of the episodes.
    pub mean_return: f64,
    /// D4RL normalized score ×100 of the mean return.
    pub normalized_score: f64,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// How this file differs from D4RL's, in words.
    pub differences_from_d4rl: String,
    /// Seconds the whole command took.
    pub wall_s: f64,
}

/// The hold-pose action: for each actuator, its joint's qpos0 in the actuator's [−1, 1] range.
fn hold_action(env: &o2o_envs::mujoco::MujocoEnv) -> Vec<f64> {
    let m = env.model();
    let (trn, adr, q0, range) = (m.actuator_trnid(), m.jnt_qposadr(), m.qpos0(), m.actuator_ctrlrange());
    (0..range.len())
        .map(|a| {
            let [lo, hi] = range[a];
            let q = q0[adr[trn[a][0] as usize] as usize];
            ((q - 0.5 * (lo + hi)) / (0.5 * (hi - lo))).clamp(-1.0, 1.0)
        })
        .collect()
}

/// Write `<out>/<task>-scripted-v1.hdf5` and `manifest.json`.
pub fn generate(spec: &AdroitSpec) -> Result<AdroitManifest> {
    if spec.episodes == 0 || !(spec.action_noise >= 0.0) {
        bail!(
            "adroit sizes: expected positive episodes and a non-negative noise, found {} and {}",
            spec.episodes,
            spec.action_noise
        );
    }
    let t0 = Instant::now();
    let id = format!("{}-v1", parse_name(spec.kind));
    let horizon = o2o_envs::spec(&id)?.max_episode_steps.unwrap_or(200);
    let mut env = o2o_envs::make_unwrapped(&id)?;
    let hold = hold_action(&env);
    let obs_dim = env.observation_space().dim();
    let act_dim = hold.len();
    let mut ds = D4rlDataset::empty(PathBuf::new(), obs_dim, act_dim);
    ds.next_observations = None;
    let (mut qpos, mut qvel, mut body): (Vec<f32>, Vec<f32>, BTreeMap<&'static str, Vec<f32>>) =
        (Vec::new(), Vec::new(), BTreeMap::new());
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(spec.seed, 301, 0));
    let (mut successes, mut returns) = (0usize, Vec::new());
    for k in 0..spec.episodes {
        let mut obs = env.reset(Some(derive_seed(spec.seed, 1, k as u64)))?;
        let state = env.task().episode_state();
        let (mut ret, mut success) = (0.0, false);
        for t in 0..horizon {
            let a: Vec<f32> =
                hold.iter().map(|h| (h + spec.action_noise * normal(&mut rng)).clamp(-1.0, 1.0) as f32).collect();
            qpos.extend(env.qpos().iter().map(|v| *v as f32));
            qvel.extend(env.qvel().iter().map(|v| *v as f32));
            for (key, v) in &state {
                body.entry(key).or_default().extend(v.iter().map(|x| *x as f32));
            }
            let step = env.step(&a)?;
            ds.observations.extend_from_slice(&obs);
            ds.actions.extend_from_slice(&a);
            ds.rewards.push(step.reward as f32);
            ds.terminals.push(if step.terminated { 1.0 } else { 0.0 });
            let last = step.terminated || t + 1 == horizon;
            ds.timeouts.as_mut().expect("empty() has timeouts").push(if last && !step.terminated { 1.0 } else { 0.0 });
            ret += step.reward;
            success |= step.info.success == Some(true);
            if last {
                break;
            }
            obs = step.obs;
        }
        successes += success as usize;
        returns.push(ret);
    }
    let n = ds.len();
    let col = |data: Vec<f32>| Column { shape: vec![n, data.len() / n], dtype: Dtype::Float32, data };
    ds.infos.insert("infos/qpos".into(), col(qpos));
    ds.infos.insert("infos/qvel".into(), col(qvel));
    for (key, v) in body {
        ds.infos.insert(format!("infos/{key}"), col(v));
    }
    std::fs::create_dir_all(&spec.out)?;
    let file = format!("{}-scripted-v1.hdf5", parse_name(spec.kind));
    let path = spec.out.join(&file);
    ds.source = path.clone();
    ds.write_gzip(&path, spec.gzip)?;
    let (sha256, bytes) = o2o_datasets::download::hash_file(&path)?;
    let mean_return = returns.iter().sum::<f64>() / returns.len() as f64;
    let manifest = AdroitManifest {
        format: FORMAT.into(),
        env: id,
        file,
        provenance: Provenance::now(),
        seed: spec.seed,
        controller: "scripted hold-pose: every position servo's target at its joint's qpos0, plus σ·N(0, 1) per action, clipped to [-1, 1]".into(),
        action_noise: spec.action_noise,
        rows: n,
        episodes: spec.episodes,
        success_rate: successes as f64 / spec.episodes as f64,
        mean_return,
        normalized_score: o2o_datasets::scores::normalized_score(parse_name(spec.kind), mean_return)?,
        bytes,
        sha256,
        differences_from_d4rl: "D4RL's human/cloned/expert files come from teleoperated demos, a BC policy and a DAPG expert; this file's controller does not attempt the task (see success_rate), so it is a layout-exact, low-quality dataset".into(),
        wall_s: t0.elapsed().as_secs_f64(),
    };
    rundir::write_json(&spec.out.join("manifest.json"), &manifest)?;
    Ok(manifest)
}

/// What `o2o dataset make-benchmark pen|door|hammer|relocate` prints about the folder `out` it
/// made: the file, its size and the controller's success and return.
pub fn summary(out: &Path, m: &AdroitManifest) -> String {
    format!(
        "{}: {} ({} rows, {} episodes, {} bytes) in {:.1} s; success in {:.1}% of episodes, mean return {:.1} (normalized {:.1})",
        out.display(), m.file, m.rows, m.episodes, m.bytes, m.wall_s, 100.0 * m.success_rate, m.mean_return, m.normalized_score
    )
}
