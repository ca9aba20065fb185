//! Where a run's numbers go: `metrics.jsonl` always, plus any other sinks (a Rerun recording:
//! `rerun_sink.rs`, chosen by `--rerun` in `sinks.rs`).
//!
//! The runner talks only to [`Logger`]; each sink decides how to store what it is given. A sink
//! must never block the training loop for long (a slow viewer is a sink's problem, handled by
//! dropping, not by stalling a robot's control loop).

pub mod inspect;
pub mod layout;
pub mod markers;
pub mod queue;
pub mod record_env;
pub mod rerun_sink;
pub mod scene;
pub mod shapes;
pub mod sinks;

pub use record_env::{eval_env, StepNotes};
pub use rerun_sink::{EpisodeLogger, RerunSink};
pub use shapes::{Geom, GeomKind, ModelGeometry, Pose};
pub use sinks::{open_run_sinks, sinks_for_run, RerunArgs, RunSinks};

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// The step counter a record is indexed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    /// Gradient updates since the run started (offline and online together).
    GradStep,
    /// Environment steps since the online phase started.
    EnvStep,
}

impl Timeline {
    /// The timeline's name in recordings and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Timeline::GradStep => "grad_step",
            Timeline::EnvStep => "env_step",
        }
    }
}

/// One logged record: a set of named scalars at one point of both timelines.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// Gradient updates done.
    pub grad_step: u64,
    /// Env steps done.
    pub env_step: u64,
    /// Seconds since the logger was created.
    pub wall_s: f64,
    /// Names are namespaced: `train/…`, `eval/…`, `online/…`, `offline/…`.
    pub values: &'a [(&'a str, f64)],
}

/// A destination for records.
pub trait MetricSink: Send {
    /// Take one record (never block for long: drop rather than stall the loop).
    fn record(&mut self, record: &Record<'_>) -> Result<()>;
    /// Write out what is buffered.
    fn flush(&mut self) -> Result<()>;
    /// A logger for evaluation episodes feeding this sink, if it draws them (the Rerun sink).
    fn episode_logger(&self) -> Option<EpisodeLogger> {
        None
    }
    /// An observer of robot control loops feeding this sink, if it draws them (the Rerun sink).
    fn loop_observer(&self) -> Option<Box<dyn o2o_robot::LoopObserver>> {
        None
    }
    /// Paired per-row values `(x_i, y_i)` to draw as points at `path` (the Rerun sink; others
    /// keep only scalars).
    fn scatter(&mut self, grad_step: u64, env_step: u64, path: &str, x: &[f32], y: &[f32]) -> Result<()> {
        let _ = (grad_step, env_step, path, x, y);
        Ok(())
    }
}

/// Appends one JSON object per record to a file (`metrics.jsonl`).
pub struct JsonlSink {
    file: std::io::BufWriter<std::fs::File>,
}

impl JsonlSink {
    /// Open `path` for appending (a resumed run continues its file).
    pub fn append(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {} for appending", path.display()))?;
        Ok(Self { file: std::io::BufWriter::new(file) })
    }
}

impl MetricSink for JsonlSink {
    fn record(&mut self, r: &Record<'_>) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("grad_step".into(), r.grad_step.into());
        obj.insert("env_step".into(), r.env_step.into());
        obj.insert("wall_s".into(), serde_json::Value::from(r.wall_s));
        for (k, v) in r.values {
            // JSON has no NaN/inf; store them as null rather than writing an unreadable line.
            let v = if v.is_finite() { serde_json::Value::from(*v) } else { serde_json::Value::Null };
            obj.insert((*k).to_string(), v);
        }
        serde_json::to_writer(&mut self.file, &obj)?;
        self.file.write_all(b"\n")?;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.file.flush()?;
        Ok(())
    }
}

/// Fans records out to every sink.
pub struct Logger {
    sinks: Vec<Box<dyn MetricSink>>,
    start: Instant,
}

impl Logger {
    /// A logger over `sinks`; `wall_s` counts from now.
    pub fn new(sinks: Vec<Box<dyn MetricSink>>) -> Self {
        Self { sinks, start: Instant::now() }
    }

    /// Log `values` at the given step counters.
    pub fn log(&mut self, grad_step: u64, env_step: u64, values: &[(&str, f64)]) -> Result<()> {
        let record = Record { grad_step, env_step, wall_s: self.start.elapsed().as_secs_f64(), values };
        for s in &mut self.sinks {
            s.record(&record)?;
        }
        Ok(())
    }

    /// Draw `(x_i, y_i)` as points at `path` in the sinks that draw (see [`MetricSink::scatter`]).
    pub fn scatter(&mut self, grad_step: u64, env_step: u64, path: &str, x: &[f32], y: &[f32]) -> Result<()> {
        for s in &mut self.sinks {
            s.scatter(grad_step, env_step, path, x, y)?;
        }
        Ok(())
    }

    /// Flush every sink.
    pub fn flush(&mut self) -> Result<()> {
        for s in &mut self.sinks {
            s.flush()?;
        }
        Ok(())
    }
}
