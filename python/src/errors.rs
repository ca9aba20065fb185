//! o2o's errors as Python exceptions, with the text the CLI prints: `o2o.Error`, and a subclass
//! of it for each kind of [`o2o_experiments::Error`] a caller can fix (`o2o.BadConfig`,
//! `o2o.BadDataset`, `o2o.DamagedCheckpoint`, `o2o.RunDir`, `o2o.RunInUse`), so that
//! `except o2o.DamagedCheckpoint` picks one out and `except o2o.Error` still takes them all.

use o2o_experiments::errors::without_cpp_frames;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::PyErr;
use std::any::Any;
use std::sync::{Arc, Mutex};

pyo3::create_exception!(
    o2o,
    Error,
    PyRuntimeError,
    "An error o2o reported (a missing file, a run that cannot continue, an env that fails); the \
     message is the one the o2o command line prints, causes included."
);

pyo3::create_exception!(
    o2o,
    BadDataset,
    Error,
    "Offline data that cannot be used: a missing or unreadable file, a missing key, columns that do \
     not fit the env, in-memory data not given, data that changed since the run started."
);

pyo3::create_exception!(
    o2o,
    DamagedCheckpoint,
    Error,
    "A checkpoint that cannot be read or loaded: truncated, a file missing, not a checkpoint, \
     written by another algorithm."
);

pyo3::create_exception!(
    o2o,
    RunDir,
    Error,
    "A directory that is not a run, or not one that can be used as asked (no config.toml or \
     manifest.json, no complete checkpoint, not the checkpoint asked for)."
);

pyo3::create_exception!(o2o, RunInUse, Error, "A run that another live process holds (trains or resumes it).");

/// `o2o.BadConfig`: a config, preset or override that cannot be used. It is an `o2o.Error` and
/// a `ValueError` both, as a bad override was a `ValueError` before it had a class of its own;
/// made once, by `type(...)`, since an exception class of pyo3's macro has one base.
pub fn bad_config(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    static TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let made = TYPE.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(py, [py.get_type::<Error>(), py.get_type::<PyValueError>()])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "o2o")?;
        namespace.set_item(
            "__doc__",
            "A config, preset or override that cannot be used: an unknown preset or key, a file that is not \
             TOML, a value out of range, an override that is not key=value.",
        )?;
        let class = py.get_type::<PyType>().call1(("BadConfig", bases, namespace))?;
        Ok(class.cast_into::<PyType>()?.unbind())
    })?;
    Ok(made.bind(py).clone())
}

/// The kinds of error that have a class of their own.
enum Kind {
    BadConfig,
    BadDataset,
    DamagedCheckpoint,
    RunDir,
    RunInUse,
}

/// The kind of the outermost [`o2o_experiments::Error`] in `err`'s chain, when it has a class.
fn kind(err: &anyhow::Error) -> Option<Kind> {
    use o2o_experiments::Error as E;
    err.chain().find_map(|c| c.downcast_ref::<E>()).and_then(|e| match e {
        E::BadConfig { .. } => Some(Kind::BadConfig),
        E::BadDataset { .. } => Some(Kind::BadDataset),
        E::DamagedCheckpoint { .. } => Some(Kind::DamagedCheckpoint),
        E::RunDir { .. } => Some(Kind::RunDir),
        E::RunInUse { .. } => Some(Kind::RunInUse),
        _ => None,
    })
}

/// The message the CLI prints for `err` (without its `error: ` prefix): the error, then each
/// cause on a line of its own, without libtorch's C++ frames.
pub fn message(err: &anyhow::Error) -> String {
    let mut out = without_cpp_frames(&err.to_string());
    for cause in err.chain().skip(1) {
        out.push_str("\n  caused by: ");
        out.push_str(&without_cpp_frames(&cause.to_string()));
    }
    out
}

/// `err` as `o2o.Error`, or the subclass of its kind.
pub fn to_py<E: Into<anyhow::Error>>(err: E) -> PyErr {
    let err = err.into();
    let text = message(&err);
    match kind(&err) {
        Some(Kind::BadConfig) => Python::attach(|py| match bad_config(py) {
            Ok(class) => PyErr::from_type(class, text),
            Err(e) => e,
        }),
        Some(Kind::BadDataset) => BadDataset::new_err(text),
        Some(Kind::DamagedCheckpoint) => DamagedCheckpoint::new_err(text),
        Some(Kind::RunDir) => RunDir::new_err(text),
        Some(Kind::RunInUse) => RunInUse::new_err(text),
        None => Error::new_err(text),
    }
}

/// `err` as `ValueError` (the input the caller gave is wrong: an array, an override); a bad
/// config as `o2o.BadConfig`, which is one.
pub fn to_value_error<E: Into<anyhow::Error>>(err: E) -> PyErr {
    let err = err.into();
    match kind(&err) {
        Some(Kind::BadConfig) => to_py(err),
        _ => PyValueError::new_err(message(&err)),
    }
}

/// A panic caught at the boundary, as `o2o.Error`.
pub fn from_panic(payload: Box<dyn Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    Error::new_err(format!("o2o failed unexpectedly (a bug in o2o, please report it): {}", without_cpp_frames(&what)))
}

/// Run `f`, turning a panic into `o2o.Error` (so none unwinds into the interpreter).
pub fn no_panic<T>(f: impl FnOnce() -> Result<T, PyErr>) -> Result<T, PyErr> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| Err(from_panic(p)))
}

/// The Python exception that stopped a run (a callback's, or a Python env's), kept for `run()`
/// to raise as it was raised.
pub type Raised = Arc<Mutex<Option<PyErr>>>;

/// Keep `err` in `slot` (the first one stays) and describe it for the error that stops the run.
pub fn keep(slot: &Raised, err: PyErr, context: &str) -> anyhow::Error {
    let text = format!("{context}: {err}");
    let mut kept = slot.lock().unwrap_or_else(|p| p.into_inner());
    if kept.is_none() {
        *kept = Some(err);
    }
    anyhow::anyhow!(text)
}
