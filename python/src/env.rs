//! `Run.env(...)`: a Gymnasium env written in Python, stepped from o2o's Rust loop.
//!
//! [`PyEnv`] implements [`o2o_envs::Env`] over a Python object with Gymnasium 1.x's API:
//! `reset(seed=...)` returns `(obs, info)`, `step(action)` returns
//! `(obs, reward, terminated, truncated, info)`, and the two ends stay apart. Each call takes
//! the GIL for itself; between calls the run's thread holds no Python state. The spaces must be
//! `Box`es (flattened to vectors; the action bounds finite); `info["is_success"]` (or
//! `info["success"]`) is the step's success flag.
//!
//! An exception the env raises (or its factory) is kept in the run's [`Raised`] slot and the
//! step fails with an [`EnvError`] naming it; the run stops as on any env error, and `run()`
//! raises the exception itself.
//!
//! A run makes several envs (one to act in, one to evaluate on): [`PyEnvSource`] is a factory
//! of them, from a zero-argument callable, or from one env object, which is copied
//! (`copy.deepcopy`, else `gymnasium.make(env.spec)`) so that the user's object is never
//! stepped by the run.

use crate::errors::{keep, Raised};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods};
use o2o_envs::{BoxSpace, Env, EnvError, EnvSpec, Info, Step};
use o2o_experiments::EnvFactory;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Arc;

/// Where a run's Python envs come from.
enum Maker {
    /// A callable of no arguments returning a fresh env.
    Factory(Py<PyAny>),
    /// One env object, copied for each env the run makes.
    Copies(Py<PyAny>),
}

/// A factory of [`PyEnv`]s, checked once when it is given (`Run.env`).
pub struct PyEnvSource {
    maker: Maker,
    /// The id the envs report (`env.spec.id`, else the env's class name).
    pub id: String,
}

/// Whether `obj` looks like a Gymnasium env (has `reset`, `step` and the two spaces).
fn is_env(obj: &Bound<'_, PyAny>) -> bool {
    ["reset", "step", "observation_space", "action_space"].iter().all(|a| obj.hasattr(*a).unwrap_or(false))
}

fn describe(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "<unprintable object>".into())
}

impl PyEnvSource {
    /// From `obj`: a `gymnasium.Env` (copied for each env of the run) or a zero-argument
    /// callable returning one (called for each). The env is made once here and its spaces are
    /// checked, so a wrong env fails at `Run.env`, not when the run starts.
    pub fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (maker, probe, owned) = if is_env(obj) {
            (Maker::Copies(obj.clone().unbind()), obj.clone(), false)
        } else if obj.is_callable() {
            let env = obj.call0()?;
            if !is_env(&env) {
                return Err(PyTypeError::new_err(format!(
                    "Run.env: the factory {} returned {}, not a Gymnasium env (reset, step, observation_space, action_space)",
                    describe(obj),
                    describe(&env)
                )));
            }
            (Maker::Factory(obj.clone().unbind()), env, true)
        } else {
            return Err(PyTypeError::new_err(format!(
                "Run.env takes an o2o env id (str), a gymnasium.Env, or a function of no arguments that makes one; found {}",
                describe(obj)
            )));
        };
        // The probe is closed when its wrapper drops if the factory made it; the user's env is
        // left as it is.
        let mut env = PyEnv::wrap(probe, None);
        if let Ok(e) = env.as_mut() {
            e.close_on_drop = owned;
        }
        Ok(Self { maker, id: env?.spec.id.clone() })
    }

    /// A new env object: the factory's, or a copy of the given env.
    fn make<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.maker {
            Maker::Factory(f) => {
                let env = f.bind(py).call0()?;
                if !is_env(&env) {
                    return Err(PyTypeError::new_err(format!(
                        "the env factory returned {}, not a Gymnasium env",
                        describe(&env)
                    )));
                }
                Ok(env)
            }
            Maker::Copies(env) => {
                let env = env.bind(py);
                match py.import("copy")?.call_method1("deepcopy", (env,)) {
                    Ok(copy) => Ok(copy),
                    Err(copy_err) => {
                        let spec = env.getattr("spec")?;
                        if spec.is_none() {
                            return Err(PyValueError::new_err(format!(
                                "the env {} cannot be copied ({copy_err}) and has no spec to make it again; \
                                 pass a function that makes the env instead (Run.env(lambda: MyEnv()))",
                                describe(env)
                            )));
                        }
                        py.import("gymnasium")?.call_method1("make", (spec,))
                    }
                }
            }
        }
    }

    /// The run's env factory: each env made with the GIL, its errors kept in `raised`.
    pub fn factory(self: &Arc<Self>, raised: Raised) -> EnvFactory {
        let source = self.clone();
        Arc::new(move || {
            Python::attach(|py| {
                let context = format!("making the Python env {}", source.id);
                let env = source.make(py).map_err(|e| keep(&raised, e, &context))?;
                PyEnv::wrap(env, Some(raised.clone()))
                    .map(|e| Box::new(e) as Box<dyn Env>)
                    .map_err(|e| keep(&raised, e, &context))
            })
        })
    }

    /// One env of this source, for loading a policy (`load_policy(..., env=...)`); its errors
    /// are raised as they are.
    pub fn make_one(&self, py: Python<'_>) -> PyResult<Box<dyn Env>> {
        let env = self.make(py)?;
        Ok(Box::new(PyEnv::wrap(env, None)?))
    }
}

/// A Gymnasium env object as an [`Env`].
pub struct PyEnv {
    env: Py<PyAny>,
    spec: EnvSpec,
    obs_space: BoxSpace,
    act_space: BoxSpace,
    /// The action space's dtype is float64 (actions are handed over as float64 then).
    act_f64: bool,
    /// Where an exception the env raises goes (`None`: it is only described in the error).
    raised: Option<Raised>,
    /// Whether dropping this closes the env (it was made for the run).
    close_on_drop: bool,
}

/// `space` (a `Box`) as bounds, flattened.
fn box_space(env: &Bound<'_, PyAny>, which: &str, id: &str) -> PyResult<(BoxSpace, bool)> {
    let py = env.py();
    let space = env.getattr(which)?;
    let has = |a: &str| space.hasattr(a).unwrap_or(false);
    if !(has("low") && has("high") && has("shape")) {
        return Err(PyValueError::new_err(format!(
            "the env {id}: o2o takes gymnasium.spaces.Box spaces; its {which} is {}",
            describe(&space)
        )));
    }
    let np = py.import("numpy")?;
    let flat = |a: &str| -> PyResult<Vec<f32>> {
        let v =
            np.call_method1("ravel", (np.call_method1("asarray", (space.getattr(a)?, np.getattr("float32")?))?,))?;
        Ok(v.cast_into::<PyArrayDyn<f32>>()?.to_vec()?)
    };
    let (low, high) = (flat("low")?, flat("high")?);
    if low.len() != high.len() || low.is_empty() {
        return Err(PyValueError::new_err(format!(
            "the env {id}: its {which} {} has bounds of {} and {} numbers (expected the same, at least one)",
            describe(&space),
            low.len(),
            high.len()
        )));
    }
    let f64_dtype = space
        .getattr("dtype")
        .and_then(|d| d.getattr("name"))
        .and_then(|n| n.extract::<String>())
        .is_ok_and(|n| n == "float64");
    Ok((BoxSpace::new(low, high), f64_dtype))
}

/// Numbers as `f32`: a float32 or float64 NumPy array read directly, anything else through
/// `numpy.asarray(x, float32)`; flattened.
fn numbers(x: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    if let Ok(a) = x.cast::<PyArrayDyn<f32>>() {
        return Ok(a.readonly().as_array().iter().copied().collect());
    }
    if let Ok(a) = x.cast::<PyArrayDyn<f64>>() {
        return Ok(a.readonly().as_array().iter().map(|v| *v as f32).collect());
    }
    let np = x.py().import("numpy")?;
    let a = np.call_method1("asarray", (x, np.getattr("float32")?))?;
    Ok(a.cast_into::<PyArrayDyn<f32>>()?.readonly().as_array().iter().copied().collect())
}

impl PyEnv {
    /// `env` checked (Box spaces, finite action bounds) and described.
    fn wrap(env: Bound<'_, PyAny>, raised: Option<Raised>) -> PyResult<Self> {
        let spec_obj = env.getattr("spec").ok().filter(|s| !s.is_none());
        let spec_id = spec_obj.as_ref().and_then(|s| s.getattr("id").ok()).and_then(|i| i.extract::<String>().ok());
        let id = match spec_id {
            Some(id) => id,
            None => {
                let inner = env.getattr("unwrapped").unwrap_or_else(|_| env.clone());
                inner.get_type().name()?.to_string()
            }
        };
        let max_episode_steps = spec_obj
            .as_ref()
            .and_then(|s| s.getattr("max_episode_steps").ok())
            .and_then(|m| m.extract::<Option<usize>>().ok())
            .flatten();
        let (obs_space, _) = box_space(&env, "observation_space", &id)?;
        let (act_space, act_f64) = box_space(&env, "action_space", &id)?;
        if !act_space.is_bounded() {
            return Err(PyValueError::new_err(format!(
                "the env {id}: its action_space has infinite bounds; o2o's agents act in [-1, 1] mapped to finite bounds"
            )));
        }
        let spec = EnvSpec { id, max_episode_steps, normalization_family: None, goal: None };
        Ok(Self { env: env.unbind(), spec, obs_space, act_space, act_f64, raised, close_on_drop: true })
    }

    /// A Python error of `env.<what>` as an [`EnvError`], the exception kept for `run()`.
    fn fail(&self, err: PyErr, what: &str) -> EnvError {
        let context = format!("the Python env {} raised an exception in {what}", self.spec.id);
        match &self.raised {
            Some(slot) => EnvError::Other(format!("{:#}", keep(slot, err, &context))),
            None => EnvError::Other(format!("{context}: {err}")),
        }
    }

    /// An observation of the env, checked against the observation space's size.
    fn obs(&self, x: &Bound<'_, PyAny>, what: &str) -> Result<Vec<f32>, EnvError> {
        let obs = numbers(x).map_err(|e| self.fail(e, what))?;
        if obs.len() != self.obs_space.dim() {
            return Err(EnvError::Shape {
                what: format!("the observation {what} of the Python env {} returned", self.spec.id),
                expected: self.obs_space.dim(),
                found: obs.len(),
            });
        }
        Ok(obs)
    }

    /// `result` as a tuple of `n` values.
    fn tuple<'py>(
        &self,
        result: &Bound<'py, PyAny>,
        n: usize,
        what: &str,
        shape: &str,
    ) -> Result<Vec<Bound<'py, PyAny>>, EnvError> {
        let bad = || {
            EnvError::Other(format!(
                "the Python env {}: {what} returned {}, expected a tuple {shape} (Gymnasium 1.x)",
                self.spec.id,
                describe(result)
            ))
        };
        let t = result.cast::<PyTuple>().map_err(|_| bad())?;
        if t.len() != n {
            return Err(bad());
        }
        Ok(t.iter().collect())
    }
}

/// `info["is_success"]` or `info["success"]`, when the info is a dict holding one.
fn success(info: &Bound<'_, PyAny>) -> Option<bool> {
    let d = info.cast::<PyDict>().ok()?;
    let v = d.get_item("is_success").ok().flatten().or_else(|| d.get_item("success").ok().flatten())?;
    v.is_truthy().ok()
}

impl Env for PyEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn observation_space(&self) -> &BoxSpace {
        &self.obs_space
    }

    fn action_space(&self) -> &BoxSpace {
        &self.act_space
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        Python::attach(|py| {
            let env = self.env.bind(py);
            let kwargs = PyDict::new(py);
            kwargs.set_item("seed", seed).map_err(|e| self.fail(e, "reset()"))?;
            let result = env.call_method("reset", (), Some(&kwargs)).map_err(|e| self.fail(e, "reset()"))?;
            let parts = self.tuple(&result, 2, "reset()", "(obs, info)")?;
            self.obs(&parts[0], "reset()")
        })
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        if action.len() != self.act_space.dim() {
            return Err(EnvError::ActionLength {
                env: self.spec.id.clone(),
                expected: self.act_space.dim(),
                found: action.len(),
            });
        }
        Python::attach(|py| {
            let env = self.env.bind(py);
            let a = if self.act_f64 {
                PyArray1::from_iter(py, action.iter().map(|v| *v as f64)).into_any()
            } else {
                PyArray1::from_slice(py, action).into_any()
            };
            let result = env.call_method1("step", (a,)).map_err(|e| self.fail(e, "step()"))?;
            let parts = self.tuple(&result, 5, "step()", "(obs, reward, terminated, truncated, info)")?;
            let obs = self.obs(&parts[0], "step()")?;
            let reward = parts[1].extract::<f64>().map_err(|e| self.fail(e, "step() (its reward)"))?;
            let terminated = parts[2].is_truthy().map_err(|e| self.fail(e, "step() (its terminated)"))?;
            let truncated = parts[3].is_truthy().map_err(|e| self.fail(e, "step() (its truncated)"))?;
            let info = Info { values: Vec::new(), success: success(&parts[4]), task: None };
            Ok(Step { obs, reward, terminated, truncated, info })
        })
    }
}

impl Drop for PyEnv {
    /// An env made for the run (by the factory, or a copy) is closed, with the GIL.
    fn drop(&mut self) {
        if self.close_on_drop {
            Python::attach(|py| {
                let _ = self.env.bind(py).call_method0("close");
            });
        }
    }
}
