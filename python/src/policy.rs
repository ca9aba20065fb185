//! `o2o.load_policy` and `o2o.export`: a run's deterministic policy, as a callable from NumPy to
//! NumPy or as a TorchScript or ONNX file.
//!
//! The agent is loaded as `o2o eval` and `o2o export` load it
//! ([`load_checkpoint_agent`]) and acts as o2o's evaluation acts: the agent's mode in
//! `[-1, 1]`, mapped to the env's bounds by [`ActionScale::to_env`].

use crate::convert;
use crate::env::PyEnvSource;
use crate::errors::{no_panic, to_py, Error};
use numpy::{PyArray1, PyArray2, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use o2o_agents::Agent;
use o2o_envs::Env;
use o2o_experiments::export::{BetaChoice, Format};
use o2o_experiments::run::actor::ActionScale;
use o2o_experiments::run::prepare::{load_checkpoint_agent, CheckpointAgent};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Mutex;
use tch::{Device, Tensor};

/// A run's deterministic policy: `policy(obs)` maps observations `(obs_dim,)` or
/// `(B, obs_dim)` to float32 actions `(act_dim,)` or `(B, act_dim)` in the env's bounds.
#[pyclass(module = "o2o", frozen)]
pub struct Policy {
    agent: Mutex<Box<dyn Agent>>,
    scale: ActionScale,
    device: Device,
    obs_dim: usize,
    env: String,
    algo: String,
    checkpoint: PathBuf,
    step: u64,
}

/// The env a policy is loaded for: the run's registry env (`None`), or one of a Python env's.
fn policy_env(py: Python<'_>, env: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Box<dyn Env>>> {
    match env {
        None => Ok(None),
        Some(e) if e.is_none() => Ok(None),
        Some(e) => PyEnvSource::new(e)?.make_one(py).map(Some),
    }
}

/// The deterministic policy of the run in `run_dir`, from its checkpoint `checkpoint`
/// (`"step-N"`) or the newest, on `device`; `env` (a Python env or a factory) for a run of an
/// env written in Python.
#[pyfunction]
#[pyo3(signature = (run_dir, checkpoint = None, device = "cpu", env = None))]
pub fn load_policy(
    py: Python<'_>,
    run_dir: PathBuf,
    checkpoint: Option<String>,
    device: &str,
    env: Option<&Bound<'_, PyAny>>,
) -> PyResult<Policy> {
    let device = convert::device(device)?;
    let env = policy_env(py, env)?;
    let loaded = no_panic(|| {
        py.detach(|| {
            let CheckpointAgent { config, folder, state, env, agent } =
                load_checkpoint_agent(&run_dir, checkpoint.as_deref(), env, device)?;
            let scale = ActionScale::new(env.action_space(), &config.env)?;
            let obs_dim = env.observation_space().dim();
            anyhow::Ok(Policy {
                agent: Mutex::new(agent),
                scale,
                device,
                obs_dim,
                env: config.env,
                algo: config.algo,
                checkpoint: folder,
                step: state.step,
            })
        })
        .map_err(to_py)
    })?;
    Ok(loaded)
}

/// Write the run's deterministic policy as TorchScript or ONNX (`o2o export`): `out` (default
/// `<run_dir>/export/policy.pt` or `policy.onnx`) and a JSON description beside it; returns the
/// file's path. `beta` (ONNX, FamO2O): `"agent"` (the balance model's β inside the graph, the
/// default), `"input"` (a second input) or a number. `env` as for [`load_policy`].
#[pyfunction]
#[pyo3(signature = (run_dir, to = "torchscript", out = None, checkpoint = None, env = None, beta = None))]
pub fn export<'py>(
    py: Python<'py>,
    run_dir: PathBuf,
    to: &str,
    out: Option<PathBuf>,
    checkpoint: Option<String>,
    env: Option<&Bound<'_, PyAny>>,
    beta: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let format = match to {
        "torchscript" => Format::Torchscript,
        "onnx" => Format::Onnx,
        _ => return Err(PyValueError::new_err(format!("export to {to:?}: o2o writes \"torchscript\" or \"onnx\""))),
    };
    let beta: BetaChoice = match beta {
        None => BetaChoice::Agent,
        Some(b) if b.is_none() => BetaChoice::Agent,
        Some(b) => b.str()?.to_string().parse().map_err(PyValueError::new_err)?,
    };
    let out = out.unwrap_or_else(|| run_dir.join("export").join(format.default_file()));
    let env = policy_env(py, env)?;
    let written = no_panic(|| {
        py.detach(|| o2o_experiments::export::export(&run_dir, checkpoint.as_deref(), &out, env, format, beta))
            .map_err(to_py)
    })?;
    convert::path(py, &written.module)
}

#[pymethods]
impl Policy {
    /// Actions for observations `(obs_dim,)` or `(B, obs_dim)`.
    fn __call__<'py>(&self, py: Python<'py>, obs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let np = py.import("numpy")?;
        let a = np.call_method1("ascontiguousarray", (obs, np.getattr("float32")?)).map_err(|e| {
            PyValueError::new_err(format!("the policy takes float observations (obs_dim {}): {e}", self.obs_dim))
        })?;
        let a = a.cast::<PyArrayDyn<f32>>().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let shape = a.shape().to_vec();
        let rows = match shape.as_slice() {
            [d] if *d == self.obs_dim => None,
            [b, d] if *d == self.obs_dim => Some(*b),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "observations of shape {shape:?}: the policy of {} takes ({},) or (B, {})",
                    self.env, self.obs_dim, self.obs_dim
                )))
            }
        };
        let values = a.to_vec()?;
        let n = rows.unwrap_or(1);
        let actions = no_panic(|| {
            py.detach(|| {
                let obs = Tensor::from_slice(&values).view([n as i64, self.obs_dim as i64]).to_device(self.device);
                let mut agent = self.agent.lock().unwrap_or_else(|p| p.into_inner());
                let a = tch::no_grad(|| agent.act(&obs, true)).to_device(Device::Cpu).contiguous().flatten(0, -1);
                Vec::<f32>::try_from(&a).map_err(|e| Error::new_err(format!("cannot read the agent's actions: {e}")))
            })
        })?;
        let act_dim = self.scale.dim();
        if actions.len() != n * act_dim {
            return Err(Error::new_err(format!(
                "the agent gave {} action values for {n} observations of {} (expected {act_dim} each)",
                actions.len(),
                self.env
            )));
        }
        let scaled: Vec<Vec<f32>> = actions.chunks(act_dim).map(|row| self.scale.to_env(row)).collect();
        match rows {
            None => Ok(PyArray1::from_vec(py, scaled.concat()).into_any()),
            Some(_) => Ok(PyArray2::from_vec2(py, &scaled).map_err(|e| Error::new_err(e.to_string()))?.into_any()),
        }
    }

    /// Observation size.
    #[getter]
    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// Action size.
    #[getter]
    fn act_dim(&self) -> usize {
        self.scale.dim()
    }

    /// The env's action bounds `(low, high)`, float32 arrays: the policy's actions lie in them.
    #[getter]
    fn action_bounds<'py>(&self, py: Python<'py>) -> (Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<f32>>) {
        let (low, high) = self.scale.bounds();
        (PyArray1::from_slice(py, low), PyArray1::from_slice(py, high))
    }

    /// The env the policy was trained in.
    #[getter]
    fn env(&self) -> &str {
        &self.env
    }

    /// The algorithm.
    #[getter]
    fn algo(&self) -> &str {
        &self.algo
    }

    /// The checkpoint folder it was loaded from.
    #[getter]
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::path(py, &self.checkpoint)
    }

    /// The loop step of that checkpoint.
    #[getter]
    fn step(&self) -> u64 {
        self.step
    }

    fn __repr__(&self) -> String {
        format!(
            "Policy({} on {}, obs_dim={}, act_dim={}, {})",
            self.algo,
            self.env,
            self.obs_dim,
            self.scale.dim(),
            self.checkpoint.display()
        )
    }
}
