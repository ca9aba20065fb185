//! Conversions at the boundary: Python values to `--set` overrides, JSON to Python objects,
//! paths to `pathlib.Path`, device names to [`Device`].

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::path::Path;
use tch::Device;

/// `key=value` overrides from what `Run.set` takes: `"key=value"`, a mapping `{key: value}`, or
/// a list of `"key=value"` strings. A mapping's values are written as TOML literals, so
/// `{"env": "true"}` sets the string `"true"` and `{"agent.critic.hidden": [64, 64]}` an array.
pub fn overrides(item: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(vec![s.extract::<String>()?]);
    }
    if let Ok(d) = item.cast::<PyDict>() {
        let mut out = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key: String = k.extract().map_err(|_| {
                PyValueError::new_err(format!("Run.set: keys must be strings like \"train.online_steps\", found {k}"))
            })?;
            let value = toml_value(&v).map_err(|e| PyValueError::new_err(format!("Run.set: key {key:?}: {e}")))?;
            out.push(format!("{key}={value}"));
        }
        return Ok(out);
    }
    if item.cast::<PyList>().is_ok() || item.cast::<PyTuple>().is_ok() {
        let mut out = Vec::new();
        for x in item.try_iter()? {
            let x = x?;
            let s = x.cast::<PyString>().map_err(|_| {
                PyValueError::new_err(format!("Run.set: a list holds \"key=value\" strings, found {x}"))
            })?;
            out.push(s.extract::<String>()?);
        }
        return Ok(out);
    }
    Err(PyValueError::new_err(format!(
        "Run.set takes \"key=value\", a dict {{key: value}} or a list of \"key=value\" strings, found {}",
        item.get_type().name()?
    )))
}

/// A Python value (bool, int, float, str, list/tuple, dict, or a NumPy scalar) as a TOML value.
fn toml_value(v: &Bound<'_, PyAny>) -> Result<toml::Value, String> {
    if v.is_none() {
        return Err("None is not a config value".into());
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if v.cast::<PyInt>().is_ok() {
        return v.extract::<i64>().map(toml::Value::Integer).map_err(|e| e.to_string());
    }
    if v.cast::<PyFloat>().is_ok() {
        return v.extract::<f64>().map(toml::Value::Float).map_err(|e| e.to_string());
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(toml::Value::String(s.extract::<String>().map_err(|e| e.to_string())?));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut t = toml::Table::new();
        for (k, x) in d.iter() {
            let k: String = k.extract().map_err(|_| format!("table keys must be strings, found {k}"))?;
            t.insert(k, toml_value(&x)?);
        }
        return Ok(toml::Value::Table(t));
    }
    if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        let items = v.try_iter().map_err(|e| e.to_string())?;
        return items
            .map(|x| x.map_err(|e| e.to_string()).and_then(|x| toml_value(&x)))
            .collect::<Result<Vec<_>, _>>()
            .map(toml::Value::Array);
    }
    // NumPy scalars and other numbers: a bool, an integer (`__index__`) or a float.
    let kind = v.getattr("dtype").and_then(|d| d.getattr("kind")).and_then(|k| k.extract::<String>()).ok();
    match kind.as_deref() {
        Some("b") => v.is_truthy().map(toml::Value::Boolean).map_err(|e| e.to_string()),
        Some("i" | "u") => v.extract::<i64>().map(toml::Value::Integer).map_err(|e| e.to_string()),
        Some("f") => v.extract::<f64>().map(toml::Value::Float).map_err(|e| e.to_string()),
        _ => Err(format!(
            "{} is not a config value (bool, int, float, str, list or dict)",
            v.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )),
    }
}

/// JSON text as Python objects (`json.loads`).
pub fn json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// A serializable value as Python objects, through JSON.
pub fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| crate::errors::Error::new_err(e.to_string()))?;
    json(py, &text)
}

/// `path` as a `pathlib.Path`.
pub fn path<'py>(py: Python<'py>, path: &Path) -> PyResult<Bound<'py, PyAny>> {
    py.import("pathlib")?.getattr("Path")?.call1((path,))
}

/// `"auto"` (CUDA when available), `"cpu"`, `"cuda"` or `"cuda:N"`.
pub fn device(name: &str) -> PyResult<Device> {
    let cuda = |n: usize| {
        let count = tch::Cuda::device_count() as usize;
        if n < count {
            Ok(Device::Cuda(n))
        } else if count == 0 {
            Err(PyValueError::new_err(format!(
                "device {name:?}: no CUDA device is available (libtorch sees none); use \"cpu\" or \"auto\""
            )))
        } else {
            Err(PyValueError::new_err(format!("device {name:?}: libtorch sees {count} CUDA devices (0..{count})")))
        }
    };
    match name {
        "auto" => Ok(Device::cuda_if_available()),
        "cpu" => Ok(Device::Cpu),
        "cuda" => cuda(0),
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => cuda(n),
            _ => Err(PyValueError::new_err(format!(
                "device {name:?}: expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\""
            ))),
        },
    }
}
