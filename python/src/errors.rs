//! o2o's errors as Python exceptions, with the text the CLI prints.

use o2o_experiments::errors::without_cpp_frames;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
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

/// `err` as `o2o.Error`.
pub fn to_py(err: anyhow::Error) -> PyErr {
    Error::new_err(message(&err))
}

/// `err` as `ValueError` (the input the caller gave is wrong: an array, an override).
pub fn to_value_error(err: anyhow::Error) -> PyErr {
    PyValueError::new_err(message(&err))
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
