//! `o2o.Dataset`: offline data from NumPy arrays, checked as a D4RL file is.
//!
//! The shapes and dtypes are checked here with the errors the file reader gives
//! ([`DatasetError`], the in-memory dataset named in place of a file); the rows, widths and
//! values are checked by `D4rlDataset::from_columns`. Every refusal is a `ValueError` naming
//! the key (and the row and column of a bad value).

use numpy::prelude::*;
use numpy::{PyArrayDyn, PyUntypedArray};
use o2o_datasets::d4rl::{Columns, D4rlDataset, IN_MEMORY};
use o2o_datasets::DatasetError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

/// Offline transitions in D4RL's layout, held by o2o (hand it to a run with `Run.dataset`).
#[pyclass(module = "o2o", frozen)]
pub struct Dataset {
    data: Arc<D4rlDataset>,
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
        Ok(Dataset { data: Arc::new(data) })
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
