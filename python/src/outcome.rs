//! `o2o.Outcome`: a finished run's directory, its `summary.json` and its `metrics.jsonl`.

use crate::convert;
use crate::errors::Error;
use numpy::PyArray1;
use o2o_experiments::run::rundir;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A finished run: where it is and how it ended.
#[pyclass(module = "o2o", frozen)]
pub struct Outcome {
    dir: PathBuf,
    summary: String,
    reused: bool,
}

impl Outcome {
    /// From the Rust builder's outcome.
    pub fn new(_py: Python<'_>, done: o2o_experiments::Outcome) -> PyResult<Self> {
        let summary = serde_json::to_string(&done.summary).map_err(|e| Error::new_err(e.to_string()))?;
        Ok(Self { dir: done.dir, summary, reused: done.reused })
    }

    /// `metrics.jsonl`, one JSON object a line.
    fn metrics_text(&self) -> PyResult<String> {
        let path = self.dir.join(rundir::METRICS);
        std::fs::read_to_string(&path).map_err(|e| Error::new_err(format!("cannot read {}: {e}", path.display())))
    }
}

#[pymethods]
impl Outcome {
    /// The run directory (config.toml, manifest.json, metrics.jsonl, checkpoints/, summary.json).
    #[getter]
    fn dir<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::path(py, &self.dir)
    }

    /// `summary.json` as a dict: `finished`, step counts, `final_eval`, `best_eval`,
    /// `phase_evals`, the final `checkpoint`, `warnings`.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::json(py, &self.summary)
    }

    /// True when nothing ran: `Run.resume` found the run already finished.
    #[getter]
    fn reused(&self) -> bool {
        self.reused
    }

    /// Every record of `metrics.jsonl`, in order, as dicts (`grad_step`, `env_step`, and the
    /// named values logged then).
    #[getter]
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.metrics_text()?;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        convert::json(py, &format!("[{}]", lines.join(",")))
    }

    /// `metrics.jsonl` as columns: a dict from each numeric key to a float64 array with one
    /// entry per record (NaN where a record lacks the key). Keys whose values are not numbers
    /// (text) are left out.
    fn metrics_arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let text = self.metrics_text()?;
        let mut columns: Vec<(String, Vec<f64>)> = Vec::new();
        let mut text_keys: Vec<String> = Vec::new();
        let mut rows = 0usize;
        for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let record: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).map_err(|e| {
                Error::new_err(format!("{}: line {}: {e}", self.dir.join(rundir::METRICS).display(), i + 1))
            })?;
            for (key, value) in record {
                let x = match value {
                    serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    serde_json::Value::Bool(b) => f64::from(u8::from(b)),
                    serde_json::Value::Null => f64::NAN,
                    _ => {
                        text_keys.push(key);
                        continue;
                    }
                };
                let column = match columns.iter().position(|(k, _)| *k == key) {
                    Some(c) => &mut columns[c].1,
                    None => {
                        columns.push((key, vec![f64::NAN; rows]));
                        &mut columns.last_mut().expect("just pushed").1
                    }
                };
                column.resize(rows, f64::NAN);
                column.push(x);
            }
            rows += 1;
        }
        let out = PyDict::new(py);
        for (key, mut values) in columns {
            if text_keys.contains(&key) {
                continue;
            }
            values.resize(rows, f64::NAN);
            out.set_item(key, PyArray1::from_vec(py, values))?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "Outcome(dir={:?}, reused={})",
            self.dir.display().to_string(),
            if self.reused { "True" } else { "False" }
        )
    }
}
