//! `o2o export`: a run's deterministic policy as a TorchScript file that runs without o2o —
//! `torch.jit.load(path)` in Python, `tch::CModule::load(path)` in Rust — plus a JSON file that
//! describes its input and output (d3rlpy's `save_policy` is the model).
//!
//! The module maps observations `float32 [B, obs_dim]` to actions `float32 [B, act_dim]` in
//! the env's own bounds: the actor's mode in `[-1, 1]`, clipped, then
//! `low + (a + 1) / 2 · (high − low)`, exactly what o2o's evaluation does. o2o's runner feeds
//! observations to the agent as the env gives them (no normalization), so there is no
//! normalization to bake in; the JSON says so. It is made by tracing the actor's forward pass
//! on detached copies of its weights, so the weights are constants of the module.

use crate::run::actor::ActionScale;
use crate::run::prepare::{load_checkpoint_agent, CheckpointAgent};
use crate::run::rundir::write_atomic;
use anyhow::{Context, Result};
use o2o_envs::{BoxSpace, Env};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::{CModule, Device, Kind, Tensor};

/// Format name of the JSON description.
pub const SPEC_FORMAT: &str = "o2o-policy-v1";

/// One side of the policy: its name, dtype, shape (`-1` = any batch size) and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// `observation` or `action`.
    pub name: String,
    /// Always `float32`.
    pub dtype: String,
    /// `[-1, dim]`.
    pub shape: Vec<i64>,
    /// Lower bounds per dimension; `null` where unbounded.
    pub low: Vec<Option<f64>>,
    /// Upper bounds per dimension; `null` where unbounded.
    pub high: Vec<Option<f64>>,
}

/// The JSON file written beside the TorchScript module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    /// [`SPEC_FORMAT`].
    pub format: String,
    /// The TorchScript file, relative to this JSON file.
    pub module: String,
    /// The module's method to call (`forward`).
    pub method: String,
    /// The env the policy was trained in.
    pub env: String,
    /// The algorithm.
    pub algo: String,
    /// The run directory and checkpoint it came from.
    pub run_dir: String,
    /// The checkpoint folder.
    pub checkpoint: String,
    /// Loop step of that checkpoint.
    pub step: u64,
    /// What the module takes.
    pub input: TensorSpec,
    /// What it returns (actions in the env's bounds).
    pub output: TensorSpec,
    /// How observations are normalized inside the module (`none`: taken as the env gives them).
    pub observation_normalization: String,
    /// The o2o version that wrote it.
    pub o2o_version: String,
}

/// What [`export_torchscript`] wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The TorchScript file.
    pub module: PathBuf,
    /// The JSON description.
    pub spec_path: PathBuf,
    /// Its contents.
    pub spec: PolicySpec,
}

/// Write the deterministic policy of the run in `run_dir` (its checkpoint `checkpoint`, or the
/// newest) to `out` as TorchScript, and `out` with the extension `.json` beside it. `env`
/// gives the observation and action spaces; `None` makes the run's env from the registry.
pub fn export_torchscript(
    run_dir: &Path,
    checkpoint: Option<&str>,
    out: &Path,
    env: Option<Box<dyn Env>>,
) -> Result<Exported> {
    let CheckpointAgent { config, folder: ckpt, state, env, agent } =
        load_checkpoint_agent(run_dir, checkpoint, env, Device::Cpu)?;
    let (obs_space, act_space) = (env.observation_space().clone(), env.action_space().clone());
    let scale = ActionScale::new(&act_space, &config.env)?;
    let (obs_dim, act_dim) = (obs_space.dim(), act_space.dim());
    let policy = agent
        .deterministic_policy()
        .with_context(|| format!("the {} agent cannot give a deterministic policy to export", config.algo))?;

    // a_env = low + (clip(a, −1, 1) + 1) / 2 · (high − low), as ActionScale::to_env does.
    let (low, high) = scale.bounds();
    let low_t = Tensor::from_slice(low).view([1, act_dim as i64]);
    let half_range = Tensor::from_slice(&low.iter().zip(high).map(|(l, h)| 0.5 * (h - l)).collect::<Vec<f32>>())
        .view([1, act_dim as i64]);
    let example = Tensor::zeros([2, obs_dim as i64], (Kind::Float, Device::Cpu));
    let module = tch::no_grad(|| {
        CModule::create_by_tracing("O2oPolicy", "forward", &[example], &mut |inputs: &[Tensor]| {
            let a = policy(&inputs[0]).clamp(-1.0, 1.0);
            vec![&low_t + (a + 1.0) * &half_range]
        })
    })
    .map_err(|e| {
        anyhow::anyhow!("tracing the {} policy into TorchScript failed: {}", config.algo, first_line(&e.to_string()))
    })?;

    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let tmp = out.with_extension("pt.tmp");
    module.save(&tmp).map_err(|e| anyhow::anyhow!("cannot write {}: {}", tmp.display(), first_line(&e.to_string())))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot move {} to {}", tmp.display(), out.display()))?;

    let bounds = |v: &[f32]| v.iter().map(|x| x.is_finite().then_some(*x as f64)).collect::<Vec<_>>();
    let side = |name: &str, dim: usize, space: &BoxSpace| TensorSpec {
        name: name.into(),
        dtype: "float32".into(),
        shape: vec![-1, dim as i64],
        low: bounds(&space.low),
        high: bounds(&space.high),
    };
    let spec = PolicySpec {
        format: SPEC_FORMAT.into(),
        module: out.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default(),
        method: "forward".into(),
        env: config.env.clone(),
        algo: config.algo.clone(),
        run_dir: run_dir.display().to_string(),
        checkpoint: ckpt.display().to_string(),
        step: state.step,
        input: side("observation", obs_dim, &obs_space),
        output: side("action", act_dim, &act_space),
        observation_normalization: agent.observation_normalization(),
        o2o_version: env!("CARGO_PKG_VERSION").into(),
    };
    let spec_path = out.with_extension("json");
    write_atomic(&spec_path, (serde_json::to_string_pretty(&spec)? + "\n").as_bytes())?;
    Ok(Exported { module: out.to_path_buf(), spec_path, spec })
}

/// libtorch errors carry a C++ backtrace after the first line; users need the first.
fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
