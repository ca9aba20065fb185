//! `o2o export`: a run's deterministic policy as a file that runs without o2o, plus a JSON
//! file that describes its inputs and outputs (d3rlpy's `save_policy` is the model).
//!
//! Two formats, both mapping observations `float32 [B, obs_dim]` to actions
//! `float32 [B, act_dim]` in the env's bounds — the actor's mode in `[-1, 1]`, clipped, then
//! `low + (a + 1) / 2 · (high − low)`, exactly what o2o's evaluation does — with the agent's own
//! observation normalization inside:
//!
//! - **TorchScript** (`torch.jit.load(path)` in Python, `tch::CModule::load(path)` in Rust): made
//!   by tracing the agent's [`o2o_agents::Agent::deterministic_policy`] on detached copies of its
//!   weights, so the weights are constants of the module;
//! - **ONNX** ([`onnx`]: onnxruntime, tract, TensorRT, …): written from the agent's
//!   [`o2o_agents::Agent::policy_graph`], its layers as data, by a small protocol-buffers writer
//!   (libtorch cannot write ONNX). A β-conditioned FamO2O policy takes β from its balance model
//!   inside the graph, as o2o acts ([`BetaChoice::Agent`]), or from a second input, or a β fixed
//!   at export.
//!
//! o2o's runner feeds observations to an agent as the env gives them; an agent that normalizes
//! them (BC and TD3+BC with the dataset's statistics, PPO and Uni-O4 with their own) does so in
//! its policy, so the exported file does too, and the JSON says how.

pub mod onnx;
mod proto;

use crate::run::actor::ActionScale;
use crate::run::prepare::{load_checkpoint_agent, CheckpointAgent};
use crate::run::rundir::write_atomic;
use crate::Error;
use anyhow::{bail, Context, Result};
use o2o_agents::nn::{BetaSource, Layer, PolicyGraph};
use o2o_agents::Agent;
use o2o_envs::{BoxSpace, Env};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tch::{CModule, Device, Kind, Tensor};

/// Format name of the JSON description.
pub const SPEC_FORMAT: &str = "o2o-policy-v1";

/// The file formats `o2o export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A TorchScript module (`.pt`).
    Torchscript,
    /// An ONNX model (`.onnx`).
    Onnx,
}

impl Format {
    /// `torchscript` or `onnx`, as the JSON names it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Torchscript => "torchscript",
            Format::Onnx => "onnx",
        }
    }

    /// The default file name in `<run-dir>/export/`.
    pub fn default_file(self) -> &'static str {
        match self {
            Format::Torchscript => "policy.pt",
            Format::Onnx => "policy.onnx",
        }
    }
}

/// Where an exported β-conditioned (FamO2O) policy takes β from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum BetaChoice {
    /// As the agent acts: its balance model's β(s) inside the graph, or the β its config fixes
    /// (FamO2O-CQL's `fixed_beta`). The default, and the only choice for other agents.
    #[default]
    Agent,
    /// A second input `beta`, `float32 [B]`.
    Input,
    /// This β for every observation.
    Fixed(f64),
}

impl std::str::FromStr for BetaChoice {
    type Err = String;

    /// `agent`, `input` or a number.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "agent" => Ok(BetaChoice::Agent),
            "input" => Ok(BetaChoice::Input),
            _ => s.parse::<f64>().ok().filter(|b| b.is_finite()).map(BetaChoice::Fixed).ok_or_else(|| {
                format!("β must be `agent` (the agent's own, the default), `input` or a number, found {s:?}")
            }),
        }
    }
}

/// One side of the policy: its name, dtype, shape (`-1` = any batch size), units and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// `observation`, `action` or `beta`.
    pub name: String,
    /// Always `float32`.
    pub dtype: String,
    /// `[-1, dim]` (`[-1]` for β).
    pub shape: Vec<i64>,
    /// What the numbers are, in words.
    #[serde(default)]
    pub units: String,
    /// Lower bounds per dimension; `null` where unbounded.
    pub low: Vec<Option<f64>>,
    /// Upper bounds per dimension; `null` where unbounded.
    pub high: Vec<Option<f64>>,
}

/// How a β-conditioned policy gets β.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BetaSpec {
    /// In words: the balance model inside the graph, a fixed value, or the input.
    pub source: String,
    /// The second input, when β is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<TensorSpec>,
}

/// The JSON file written beside the exported file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    /// [`SPEC_FORMAT`].
    pub format: String,
    /// `torchscript` or `onnx`.
    #[serde(default = "torchscript")]
    pub module_format: String,
    /// The exported file, relative to this JSON file.
    pub module: String,
    /// The TorchScript module's method to call (`forward`); none for ONNX.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
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
    /// What the policy takes (observations; for ONNX, the graph input of that name).
    pub input: TensorSpec,
    /// What it returns (actions in the env's bounds).
    pub output: TensorSpec,
    /// A β-conditioned policy's β; absent for other policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<BetaSpec>,
    /// How observations are normalized inside the policy (`none`: taken as the env gives them).
    pub observation_normalization: String,
    /// The o2o version that wrote it.
    pub o2o_version: String,
}

fn torchscript() -> String {
    Format::Torchscript.name().into()
}

/// What [`export_torchscript`] or [`export_onnx`] wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The TorchScript or ONNX file.
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
) -> Result<Exported, Error> {
    export(run_dir, checkpoint, out, env, Format::Torchscript, BetaChoice::Agent)
}

/// [`export_torchscript`] as an ONNX model ([`onnx`]), with β from `beta` for a β-conditioned
/// policy (`Err` for another policy unless [`BetaChoice::Agent`]).
pub fn export_onnx(
    run_dir: &Path,
    checkpoint: Option<&str>,
    out: &Path,
    env: Option<Box<dyn Env>>,
    beta: BetaChoice,
) -> Result<Exported, Error> {
    export(run_dir, checkpoint, out, env, Format::Onnx, beta)
}

/// The run's policy written as `format`, and its JSON description. A run directory or
/// checkpoint that cannot be read is an [`Error::RunDir`] or [`Error::DamagedCheckpoint`].
pub fn export(
    run_dir: &Path,
    checkpoint: Option<&str>,
    out: &Path,
    env: Option<Box<dyn Env>>,
    format: Format,
    beta: BetaChoice,
) -> Result<Exported, Error> {
    if format == Format::Torchscript && beta != BetaChoice::Agent {
        let text = "a choice of β applies to ONNX export only (--to onnx); TorchScript takes β as the agent acts";
        return Err(anyhow::anyhow!(text).into());
    }
    let CheckpointAgent { config, folder: ckpt, state, env, agent } =
        load_checkpoint_agent(run_dir, checkpoint, env, Device::Cpu)?;
    let (obs_space, act_space) = (env.observation_space().clone(), env.action_space().clone());
    let scale = ActionScale::new(&act_space, &config.env)?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let beta = match format {
        Format::Torchscript => {
            write_torchscript(&*agent, &config.algo, &scale, obs_space.dim(), out)?;
            None
        }
        Format::Onnx => {
            let policy = onnx_policy(&*agent, &config.algo, &scale, beta, &[("env", config.env.clone())])?;
            write_atomic(out, &policy.bytes)?;
            policy.beta
        }
    };

    let bounds = |v: &[f32]| v.iter().map(|x| x.is_finite().then_some(*x as f64)).collect::<Vec<_>>();
    let side = |name: &str, space: &BoxSpace, units: &str| TensorSpec {
        name: name.into(),
        dtype: "float32".into(),
        shape: vec![-1, space.dim() as i64],
        units: units.into(),
        low: bounds(&space.low),
        high: bounds(&space.high),
    };
    let spec = PolicySpec {
        format: SPEC_FORMAT.into(),
        module_format: format.name().into(),
        module: out.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default(),
        method: (format == Format::Torchscript).then(|| "forward".into()),
        env: config.env.clone(),
        algo: config.algo.clone(),
        run_dir: run_dir.display().to_string(),
        checkpoint: ckpt.display().to_string(),
        step: state.step,
        input: side(
            "observation",
            &obs_space,
            "the env's observations, as it gives them (any normalization is inside)",
        ),
        output: side("action", &act_space, "the env's action units, within [low, high]: send to env.step as they are"),
        beta,
        observation_normalization: agent.observation_normalization(),
        o2o_version: env!("CARGO_PKG_VERSION").into(),
    };
    let spec_path = out.with_extension("json");
    let text = serde_json::to_string_pretty(&spec).map_err(anyhow::Error::from)?;
    write_atomic(&spec_path, (text + "\n").as_bytes())?;
    Ok(Exported { module: out.to_path_buf(), spec_path, spec })
}

/// Trace `agent`'s deterministic policy, clipped and rescaled, into a TorchScript file `out`.
fn write_torchscript(agent: &dyn Agent, algo: &str, scale: &ActionScale, obs_dim: usize, out: &Path) -> Result<()> {
    let policy = agent
        .deterministic_policy()
        .with_context(|| format!("the {algo} agent cannot give a deterministic policy to export"))?;
    // a_env = low + (clip(a, −1, 1) + 1) / 2 · (high − low), as ActionScale::to_env does.
    let (low, high) = scale.bounds();
    let act_dim = low.len() as i64;
    let low_t = Tensor::from_slice(low).view([1, act_dim]);
    let half_range =
        Tensor::from_slice(&low.iter().zip(high).map(|(l, h)| 0.5 * (h - l)).collect::<Vec<f32>>()).view([1, act_dim]);
    let example = Tensor::zeros([2, obs_dim as i64], (Kind::Float, Device::Cpu));
    let module = tch::no_grad(|| {
        CModule::create_by_tracing("O2oPolicy", "forward", &[example], &mut |inputs: &[Tensor]| {
            let a = policy(&inputs[0]).clamp(-1.0, 1.0);
            vec![&low_t + (a + 1.0) * &half_range]
        })
    })
    .map_err(|e| {
        anyhow::anyhow!("tracing the {algo} policy into TorchScript failed: {}", first_line(&e.to_string()))
    })?;
    let tmp = out.with_extension("pt.tmp");
    module.save(&tmp).map_err(|e| anyhow::anyhow!("cannot write {}: {}", tmp.display(), first_line(&e.to_string())))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot move {} to {}", tmp.display(), out.display()))
}

/// An agent's policy as ONNX bytes ([`onnx_policy`]).
#[derive(Debug, Clone)]
pub struct OnnxPolicy {
    /// The serialized `ModelProto`.
    pub bytes: Vec<u8>,
    /// How it takes β, for a β-conditioned policy.
    pub beta: Option<BetaSpec>,
}

/// `agent`'s deterministic policy (an `algo` agent) as an ONNX model whose actions are rescaled
/// to `scale`'s bounds, β from `beta`; `metadata` joins the model's key–value metadata.
pub fn onnx_policy(
    agent: &dyn Agent,
    algo: &str,
    scale: &ActionScale,
    beta: BetaChoice,
    metadata: &[(&str, String)],
) -> Result<OnnxPolicy> {
    let graph = agent.policy_graph().with_context(|| {
        format!(
            "the {algo} agent cannot be exported to ONNX: it does not describe its deterministic policy as \
             layers (Agent::policy_graph); --to torchscript traces its network code instead"
        )
    })?;
    let (graph, beta) = choose_beta(graph, beta).with_context(|| format!("exporting the {algo} policy"))?;
    let (low, high) = scale.bounds();
    let mut meta = vec![("algo", algo.to_string())];
    meta.extend(metadata.iter().cloned());
    let bytes = onnx::model(&graph, low, high, &meta)
        .map_err(|e| anyhow::anyhow!("the {algo} policy does not fit an ONNX graph: {e}"))?;
    Ok(OnnxPolicy { bytes, beta })
}

/// `graph` with its β taken per `choice`, and the JSON's words for it.
fn choose_beta(graph: PolicyGraph, choice: BetaChoice) -> Result<(PolicyGraph, Option<BetaSpec>)> {
    let own = graph.layers.iter().find_map(|l| match l {
        Layer::AppendBeta { beta, .. } => Some(beta.clone()),
        _ => None,
    });
    let Some(own) = own else {
        if choice != BetaChoice::Agent {
            bail!("the policy is not conditioned on β, so β cannot be an input or fixed");
        }
        return Ok((graph, None));
    };
    // The balance model's range, for the input's bounds.
    let range = match &own {
        BetaSource::Model { range, .. } => Some(range.bounds()),
        _ => None,
    };
    let describe = |b: &BetaSource| match b {
        BetaSource::Model { .. } => "the balance model's β(s), inside the graph (as o2o acts)".to_string(),
        BetaSource::Fixed(v) => format!("fixed at {v}"),
        BetaSource::Input => "the second input `beta`, one per observation".to_string(),
    };
    let source = match choice {
        BetaChoice::Agent => own,
        BetaChoice::Input => BetaSource::Input,
        BetaChoice::Fixed(v) => BetaSource::Fixed(v),
    };
    let input = (source == BetaSource::Input).then(|| TensorSpec {
        name: onnx::BETA.into(),
        dtype: "float32".into(),
        shape: vec![-1],
        units: "the balance coefficient β per observation; low and high: the balance model's range".into(),
        low: vec![range.map(|r| r.0)],
        high: vec![range.map(|r| r.1)],
    });
    let spec = BetaSpec { source: describe(&source), input };
    let graph = graph.with_beta(source).map_err(anyhow::Error::msg)?;
    Ok((graph, Some(spec)))
}

/// libtorch errors carry a C++ backtrace after the first line; users need the first.
fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use o2o_agents::rng::AgentRng;
    use o2o_agents::{Metrics, Part, Stateful};
    use o2o_datasets::TransitionBatch;

    /// An agent of someone's own that acts but does not describe its policy as layers.
    struct Opaque(AgentRng);

    impl Stateful for Opaque {
        fn name(&self) -> &'static str {
            "opaque"
        }
        fn parts(&self) -> Vec<Part<'_>> {
            Vec::new()
        }
        fn progress(&self) -> (i64, &AgentRng) {
            (0, &self.0)
        }
        fn set_progress(&mut self, _: i64, rng: AgentRng) {
            self.0 = rng;
        }
    }

    impl Agent for Opaque {
        fn gamma(&self) -> Option<f64> {
            None
        }
        fn act(&mut self, obs: &Tensor, _: bool) -> Tensor {
            obs.zeros_like()
        }
        fn update(&mut self, _: &TransitionBatch) -> Metrics {
            Metrics::new()
        }
    }

    #[test]
    fn an_agent_without_a_policy_graph_gets_an_error_naming_it() {
        let scale = ActionScale::new(&BoxSpace::new(vec![-1.0], vec![1.0]), "test").unwrap();
        let e = onnx_policy(&Opaque(AgentRng::new(0)), "opaque", &scale, BetaChoice::Agent, &[]).unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("the opaque agent cannot be exported to ONNX") && e.contains("--to torchscript"), "{e}");
    }

    #[test]
    fn beta_choices_parse_and_apply_only_to_beta_conditioned_policies() {
        assert_eq!("agent".parse(), Ok(BetaChoice::Agent));
        assert_eq!("input".parse(), Ok(BetaChoice::Input));
        assert_eq!("1.5".parse(), Ok(BetaChoice::Fixed(1.5)));
        assert!("inf".parse::<BetaChoice>().is_err() && "lots".parse::<BetaChoice>().is_err());
        let plain = PolicyGraph::new(1, vec![Layer::Clip { low: -1.0, high: 1.0 }]);
        assert!(choose_beta(plain.clone(), BetaChoice::Agent).unwrap().1.is_none());
        let e = choose_beta(plain, BetaChoice::Input).unwrap_err().to_string();
        assert!(e.contains("not conditioned on β"), "{e}");
    }
}
