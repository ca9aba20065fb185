//! `o2o.Dataset`: offline data from NumPy arrays, checked as a D4RL file is, or read from a
//! D4RL-format file or a Minari dataset folder by o2o's readers.
//!
//! The shapes and dtypes are checked here with the errors the file reader gives
//! ([`DatasetError`], the in-memory dataset named in place of a file); the rows, widths and
//! values are checked by `D4rlDataset::from_columns`. Every refusal is a `ValueError` naming
//! the key (and the row and column of a bad value).

use numpy::prelude::*;
use numpy::{PyArrayDyn, PyUntypedArray};
use o2o_datasets::d4rl::{Columns, D4rlDataset, IN_MEMORY};
use o2o_datasets::minari::MinariDataset;
use o2o_datasets::DatasetError;
use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Offline transitions in D4RL's layout, held by o2o (hand it to a run with `Run.dataset`).
#[pyclass(module = "o2o", frozen)]
pub struct Dataset {
    data: Arc<D4rlDataset>,
    /// The env the data was recorded in, when the file says (a registry file name, Minari's
    /// `env_spec`).
    env: Option<String>,
    /// The file or folder it was read from.
    source: Option<PathBuf>,
}

impl Dataset {
    /// The data, shared (a run copies it when it starts).
    pub fn shared(&self) -> Arc<D4rlDataset> {
        self.data.clone()
    }
}

fn refuse(e: DatasetError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Nothing at `path`: `FileNotFoundError` (before the reader says it in HDF5's words); what
/// the reader refuses in a file or folder that is there is a `ValueError` naming file and key.
fn exists(path: &Path, what: &str) -> PyResult<()> {
    if path.exists() {
        Ok(())
    } else {
        Err(PyFileNotFoundError::new_err(format!("{}: no such {what}", path.display())))
    }
}

/// The env id in a Minari `metadata.json`: `env_spec` (a JSON text, or an object) → `id`.
fn minari_env(data: &MinariDataset) -> Option<String> {
    let spec = data.metadata.get("env_spec")?;
    let spec = match spec {
        serde_json::Value::String(text) => serde_json::from_str::<serde_json::Value>(text).ok()?,
        other => other.clone(),
    };
    spec.get("id")?.as_str().map(str::to_string)
}

fn in_memory() -> PathBuf {
    PathBuf::from(IN_MEMORY)
}

/// `value` as a NumPy array (`numpy.asarray`), with its shape and dtype kind.
fn array<'py>(key: &str, value: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyUntypedArray>, Vec<usize>, u8)> {
    let np = value.py().import("numpy")?;
    let a = np
        .call_method1("asarray", (value,))
        .map_err(|e| PyValueError::new_err(format!("{IN_MEMORY}: key `{key}` is not an array of numbers: {e}")))?;
    let a = a.cast_into::<PyUntypedArray>().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let shape = a.shape().to_vec();
    let kind = a.dtype().kind();
    Ok((a, shape, kind))
}

/// A number column of rank `rank` (2: `(N, width)`; 1: `(N,)` or `(N, 1)`), as float32 values
/// and its width.
fn floats(key: &str, value: &Bound<'_, PyAny>, rank: usize) -> PyResult<(Vec<f32>, usize)> {
    let (a, shape, kind) = array(key, value)?;
    // Floats, as in a file; integers too (Gymnasium's InvertedPendulum rewards are ints).
    if !matches!(kind, b'f' | b'i' | b'u') {
        return Err(refuse(DatasetError::WrongDtype {
            path: in_memory(),
            key: key.into(),
            expected: "float or integer numbers".into(),
            found: a.dtype().str()?.to_string(),
        }));
    }
    let width = match (rank, shape.as_slice()) {
        (2, [_, w]) => *w,
        (1, [_] | [_, 1]) => 1,
        _ => {
            let expected = if rank == 2 { "rank 2: (N, dim)" } else { "rank 1: (N,) or (N, 1)" };
            return Err(refuse(DatasetError::WrongShape {
                path: in_memory(),
                key: key.into(),
                expected: expected.into(),
                found: shape,
            }));
        }
    };
    let np = value.py().import("numpy")?;
    let f32_array = np.call_method1("ascontiguousarray", (a, np.getattr("float32")?))?;
    let values = f32_array.cast::<PyArrayDyn<f32>>().map_err(|e| PyValueError::new_err(e.to_string()))?.to_vec()?;
    Ok((values, width))
}

/// A flag column (`terminals`, `timeouts`): bool, or numbers where non-zero is set (as the file
/// reader takes them); `(N,)` or `(N, 1)`.
fn flags(key: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
    let (a, shape, kind) = array(key, value)?;
    if !matches!(shape.as_slice(), [_] | [_, 1]) {
        return Err(refuse(DatasetError::WrongShape {
            path: in_memory(),
            key: key.into(),
            expected: "rank 1: (N,) or (N, 1)".into(),
            found: shape,
        }));
    }
    let np = value.py().import("numpy")?;
    match kind {
        b'b' => {
            let b = np.call_method1("ascontiguousarray", (a, np.getattr("bool_")?))?;
            Ok(b.cast::<PyArrayDyn<bool>>().map_err(|e| PyValueError::new_err(e.to_string()))?.to_vec()?)
        }
        b'i' | b'u' | b'f' => {
            let f = np.call_method1("ascontiguousarray", (a, np.getattr("float64")?))?;
            let values = f.cast::<PyArrayDyn<f64>>().map_err(|e| PyValueError::new_err(e.to_string()))?.to_vec()?;
            if let Some(row) = values.iter().position(|v| !v.is_finite()) {
                return Err(refuse(DatasetError::NonFinite {
                    path: in_memory(),
                    key: key.into(),
                    row,
                    column: 0,
                    value: values[row],
                }));
            }
            Ok(values.into_iter().map(|v| v != 0.0).collect())
        }
        _ => Err(refuse(DatasetError::WrongDtype {
            path: in_memory(),
            key: key.into(),
            expected: "bool, integer or float flags".into(),
            found: a.dtype().str()?.to_string(),
        })),
    }
}

#[pymethods]
impl Dataset {
    /// Transitions from arrays: `observations` `(N, obs_dim)`, `actions` `(N, act_dim)` in the
    /// env's units, `rewards` `(N,)`, `terminals` `(N,)` (true ends) and `timeouts` `(N,)`
    /// (time-limit ends); `next_observations` `(N, obs_dim)` when rows do not follow each other.
    /// The checks a D4RL file gets; a `ValueError` names the key, and the row and column of a
    /// bad value.
    #[staticmethod]
    #[pyo3(signature = (*, observations, actions, rewards, terminals, timeouts, next_observations = None))]
    fn from_arrays(
        py: Python<'_>,
        observations: &Bound<'_, PyAny>,
        actions: &Bound<'_, PyAny>,
        rewards: &Bound<'_, PyAny>,
        terminals: &Bound<'_, PyAny>,
        timeouts: &Bound<'_, PyAny>,
        next_observations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Dataset> {
        let (observations, obs_dim) = floats("observations", observations, 2)?;
        let (actions, act_dim) = floats("actions", actions, 2)?;
        let (rewards, _) = floats("rewards", rewards, 1)?;
        let terminals = flags("terminals", terminals)?;
        let timeouts = flags("timeouts", timeouts)?;
        let next_observations = match next_observations {
            Some(n) => Some(floats("next_observations", n, 2)?.0),
            None => None,
        };
        let columns =
            Columns { obs_dim, act_dim, observations, actions, rewards, terminals, timeouts, next_observations };
        let data = crate::errors::no_panic(|| py.detach(|| D4rlDataset::from_columns(columns)).map_err(refuse))?;
        Ok(Dataset { data: Arc::new(data), env: None, source: None })
    }

    /// A D4RL-format HDF5 file (`observations`, `actions`, `rewards`, `terminals`, and
    /// `timeouts`, `next_observations` when present), read and checked as a run reads it.
    /// `FileNotFoundError` when there is no file; a `ValueError` naming the file and key when
    /// it is not D4RL data.
    #[staticmethod]
    fn from_d4rl(py: Python<'_>, path: PathBuf) -> PyResult<Dataset> {
        exists(&path, "file")?;
        let data = crate::errors::no_panic(|| py.detach(|| D4rlDataset::read(&path)).map_err(refuse))?;
        let env = path
            .file_name()
            .and_then(|n| o2o_datasets::registry::lookup_file(&n.to_string_lossy()))
            .map(|entry| entry.env_id);
        Ok(Dataset { data: Arc::new(data), env, source: Some(path) })
    }

    /// A Minari dataset folder (`<id>/` or `<id>/data/`, with `metadata.json` and
    /// `main_data.hdf5`; flat `Box` observations and actions), one row per step:
    /// `terminals` from `terminations`, `timeouts` from `truncations`, `next_observations` from
    /// each episode's next observation.
    #[staticmethod]
    fn from_minari(py: Python<'_>, path: PathBuf) -> PyResult<Dataset> {
        exists(&path, "folder")?;
        let (data, env) = crate::errors::no_panic(|| {
            py.detach(|| MinariDataset::read(&path).map(|m| (m.to_d4rl(), minari_env(&m)))).map_err(refuse)
        })?;
        Ok(Dataset { data: Arc::new(data), env, source: Some(path) })
    }

    /// Rows (transitions).
    fn __len__(&self) -> usize {
        self.data.len()
    }

    /// Observation size.
    #[getter]
    fn obs_dim(&self) -> usize {
        self.data.obs_dim
    }

    /// Action size.
    #[getter]
    fn act_dim(&self) -> usize {
        self.data.act_dim
    }

    /// Episodes (runs of rows ended by `terminals` or `timeouts`; a trailing partial one counts).
    #[getter]
    fn episodes(&self) -> usize {
        self.data.episodes(None).len()
    }

    /// sha256 of the contents: what a run's manifest records for it, and what a resume checks.
    #[getter]
    fn sha256(&self) -> String {
        self.data.content_sha256()
    }

    /// The env the data was recorded in, when the file names it (a registry file such as
    /// `hopper-medium-v2.hdf5`, a Minari dataset's `env_spec`); `None` otherwise.
    #[getter]
    fn env(&self) -> Option<&str> {
        self.env.as_deref()
    }

    /// The file or folder the data was read from (`None` for arrays).
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.source.as_deref().map(|p| crate::convert::path(py, p)).transpose()
    }

    /// Data-quality warnings that are not errors (e.g. a trailing partial episode).
    fn warnings(&self) -> Vec<String> {
        self.data.warnings()
    }

    fn __repr__(&self) -> String {
        format!(
            "Dataset({} rows, obs_dim={}, act_dim={}, sha256={}…)",
            self.data.len(),
            self.data.obs_dim,
            self.data.act_dim,
            &self.data.content_sha256()[..12]
        )
    }
}
