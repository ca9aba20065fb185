//! `o2o.Run`: the Rust builder ([`o2o_experiments::Run`]) from Python.
//!
//! A Python `Run` is a recipe: where the config comes from and the builder calls made on it.
//! Each call returns a new `Run` (the old one is unchanged) and is checked at once by replaying
//! the recipe on the Rust builder, so a bad key fails at `.set(...)`, as it does in Rust. The
//! run itself ([`Run::run`], [`Run::fit`], [`Run::fit_online`]) replays the recipe once more on
//! a thread of its own and trains there; the calling thread releases the GIL and wakes every
//! [`POLL`] to let Python handle signals. A `KeyboardInterrupt` (Ctrl-C) asks the runner to
//! stop at its next safe point (`interrupt::request`, as the CLI's signal handler does); the
//! runner writes a checkpoint and returns, and the interrupt is raised naming the run to resume.

use crate::convert;
use crate::dataset::Dataset;
use crate::env::PyEnvSource;
use crate::errors::{self, keep, to_py, to_value_error, Raised};
use crate::outcome::Outcome;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_experiments::logging::RerunArgs;
use o2o_experiments::run::interrupt;
use o2o_experiments::run::progress::{ProgressMode, ProgressOptions, ProgressSink, ProgressUpdate, DEFAULT_EVERY};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tch::Device;

/// How often a waiting `run()` lets Python handle signals (Ctrl-C).
pub const POLL: Duration = Duration::from_millis(50);

/// Where a run's config comes from.
#[derive(Clone, Debug)]
enum Origin {
    Preset(String),
    Toml { name: String, text: String },
    Finetune(PathBuf),
    Resume(PathBuf),
}

/// The builder calls made so far, replayed on [`o2o_experiments::Run`].
#[derive(Clone)]
struct Recipe {
    origin: Origin,
    overrides: Vec<String>,
    runs_dir: Option<PathBuf>,
    device: Option<Device>,
    threads: Option<i32>,
    rerun: Option<String>,
    /// `Run.progress`: the mode and the seconds between updates as given (unset: the default
    /// of wherever the updates go, decided when the run starts).
    progress: Option<(ProgressMode, Option<f64>)>,
    /// Where progress updates go instead of stderr; resolved to a callable when the run starts.
    progress_to: Option<ProgressTo>,
    dataset: Option<Arc<D4rlDataset>>,
    /// Envs written in Python (`Run.env` with an env or a factory); an id is an override.
    env: Option<Arc<PyEnvSource>>,
    /// `Run.starting_from`: the run or checkpoint whose agent this run starts from.
    starting_from: Option<PathBuf>,
    on_eval: Option<Arc<Py<PyAny>>>,
    on_checkpoint: Option<Arc<Py<PyAny>>>,
}

/// Progress given to Python rather than drawn on the process's stderr.
#[derive(Clone)]
enum ProgressTo {
    /// `callback(update: dict)`.
    Callback(Arc<Py<PyAny>>),
    /// `o2o._progress.NotebookBar()`, made afresh for each run.
    Notebook,
}

/// Between two updates handed to Python: a bar redrawn twice a second.
const PY_PROGRESS_EVERY: f64 = 0.5;

/// Which phases to run.
#[derive(Clone, Copy)]
enum Phases {
    /// The config's.
    All,
    /// Offline only, this many gradient steps.
    Fit(u64),
    /// Online only, this many env steps.
    FitOnline(u64),
}

impl Recipe {
    fn new(origin: Origin) -> Self {
        Self {
            origin,
            overrides: Vec::new(),
            runs_dir: None,
            device: None,
            threads: None,
            rerun: None,
            progress: None,
            progress_to: None,
            dataset: None,
            env: None,
            starting_from: None,
            on_eval: None,
            on_checkpoint: None,
        }
    }

    /// The Rust builder with every recorded call but the callbacks; with the dataset (a copy of
    /// its columns) only when `with_data`.
    fn builder(&self, with_data: bool) -> anyhow::Result<o2o_experiments::Run<'static>> {
        use o2o_experiments::Run;
        let mut run = match &self.origin {
            Origin::Preset(name) => Run::preset(name)?,
            Origin::Toml { name, text } => Run::from_toml_str(name, text)?,
            Origin::Finetune(parent) => Run::finetune(parent)?,
            Origin::Resume(dir) => Run::resume(dir)?,
        };
        if !self.overrides.is_empty() {
            run = run.set(&self.overrides)?;
        }
        if let Some(from) = &self.starting_from {
            run = run.starting_from(from)?;
        }
        if let Some(dir) = &self.runs_dir {
            run = run.runs_dir(dir.clone());
        }
        if let Some(device) = self.device {
            run = run.device(device);
        }
        if let Some(mode) = &self.rerun {
            run = run.rerun(RerunArgs { rerun: mode.clone(), ..RerunArgs::default() });
        }
        if let Some((mode, every)) = self.progress {
            run = run.progress(ProgressOptions::new(
                mode,
                Duration::from_secs_f64(every.unwrap_or(DEFAULT_EVERY.as_secs_f64())),
            ));
        }
        if with_data {
            if let Some(data) = &self.dataset {
                run = run.dataset(D4rlDataset::clone(data))?;
            }
        }
        Ok(run)
    }

    /// This recipe with `change` made, checked on the Rust builder; a bad call is a `ValueError`.
    fn with(&self, change: impl FnOnce(&mut Recipe)) -> PyResult<Run> {
        let mut next = self.clone();
        change(&mut next);
        errors::no_panic(|| next.builder(false).map(drop).map_err(to_value_error))?;
        Ok(Run { recipe: next })
    }
}

/// A run being configured: a preset or a config, overrides, where and on what to run. Every
/// method returns a new `Run`; `run()`, `fit()` and `fit_online()` start it.
#[pyclass(module = "o2o", frozen)]
pub struct Run {
    recipe: Recipe,
}

#[pymethods]
impl Run {
    /// A run of an embedded preset (`o2o.list_presets()`) or of a `.toml` file.
    #[staticmethod]
    fn preset(name_or_path: PathBuf) -> PyResult<Run> {
        Run::checked(Recipe::new(Origin::Preset(name_or_path.to_string_lossy().into_owned())), to_py)
    }

    /// A run of a config written as TOML text, in a preset's format; `name` names the run
    /// directories.
    #[staticmethod]
    fn from_toml(name: &str, text: &str) -> PyResult<Run> {
        Run::checked(Recipe::new(Origin::Toml { name: name.to_string(), text: text.to_string() }), to_value_error)
    }

    /// A new run fine-tuning `parent`'s final agent online with the parent's config
    /// (`o2o finetune`).
    #[staticmethod]
    fn finetune(parent: PathBuf) -> PyResult<Run> {
        Run::checked(Recipe::new(Origin::Finetune(parent)), to_py)
    }

    /// Continue the run in `dir` from its newest checkpoint, exactly (`o2o resume`).
    #[staticmethod]
    fn resume(dir: PathBuf) -> PyResult<Run> {
        Run::checked(Recipe::new(Origin::Resume(dir)), to_py)
    }

    /// Override config keys: `"key=value"`, a dict `{key: value}`, or a list of `"key=value"`.
    #[pyo3(signature = (*overrides))]
    fn set(&self, overrides: Vec<Bound<'_, PyAny>>) -> PyResult<Run> {
        let mut more = Vec::new();
        for item in &overrides {
            more.extend(convert::overrides(item)?);
        }
        self.recipe.with(|r| r.overrides.extend(more))
    }

    /// The run seed (`set("seed=N")`).
    fn seed(&self, seed: u64) -> PyResult<Run> {
        self.recipe.with(|r| r.overrides.push(format!("seed={seed}")))
    }

    /// The folder new run directories are created in (default `runs/`).
    fn runs_dir(&self, dir: PathBuf) -> PyResult<Run> {
        self.recipe.with(|r| r.runs_dir = Some(dir))
    }

    /// `"auto"` (the default: CUDA when available), `"cpu"`, `"cuda"` or `"cuda:N"`.
    fn device(&self, device: &str) -> PyResult<Run> {
        let device = convert::device(device)?;
        self.recipe.with(|r| r.device = Some(device))
    }

    /// Torch intra-op threads for this run (default: libtorch's choice, usually the cores).
    fn threads(&self, n: i32) -> PyResult<Run> {
        if n < 1 {
            return Err(PyValueError::new_err(format!("threads: expected at least 1, found {n}")));
        }
        self.recipe.with(|r| r.threads = Some(n))
    }

    /// The env to train and evaluate in: an o2o env id (stepped in Rust), a `gymnasium.Env`
    /// (copied for each env the run makes), or a function of no arguments that makes one
    /// (called for each); Python envs are stepped from the Rust loop, the GIL taken per call.
    fn env(&self, env: &Bound<'_, PyAny>) -> PyResult<Run> {
        if let Ok(id) = env.extract::<String>() {
            o2o_envs::spec(&id).map_err(|e| PyValueError::new_err(format!("Run.env({id:?}): {e}")))?;
            let set = format!("env={}", toml::Value::String(id));
            return self.recipe.with(|r| {
                r.env = None;
                r.overrides.push(set);
            });
        }
        let source = Arc::new(PyEnvSource::new(env)?);
        let resumed = matches!(self.recipe.origin, Origin::Resume(_));
        // The config names the env's id (a resumed run's config already does, and the run
        // checks that the env made is that one).
        let set = format!("env={}", toml::Value::String(source.id.clone()));
        self.recipe.with(|r| {
            r.env = Some(source);
            if !resumed {
                r.overrides.push(set);
            }
        })
    }

    /// Start from another run's agent (its newest checkpoint, or the checkpoint folder
    /// `<run>/checkpoints/step-N`) with its whole state, skipping this config's offline phase
    /// and evaluating the starting point (`o2o run --from`).
    fn starting_from(&self, run_or_checkpoint: PathBuf) -> PyResult<Run> {
        self.recipe.with(|r| r.starting_from = Some(run_or_checkpoint))
    }

    /// Offline data built in memory (`Dataset.from_arrays`) instead of the config's file.
    fn dataset(&self, data: PyRef<'_, Dataset>) -> PyResult<Run> {
        let data = data.shared();
        self.recipe.with(|r| r.dataset = Some(data))
    }

    /// The Rerun recording: `"save"` (`recording.rrd` in the run directory, the default),
    /// `"off"`, `"spawn"`, or `"connect"` / `"connect=ADDR"`.
    fn rerun(&self, mode: &str) -> PyResult<Run> {
        RerunArgs { rerun: mode.to_string(), ..RerunArgs::default() }.target().map_err(to_value_error)?;
        let mode = mode.to_string();
        self.recipe.with(|r| r.rerun = Some(mode))
    }

    /// How progress is shown: `"auto"` (the default: a bar on a terminal, plain lines when
    /// stderr is not one, the notebook bar inside Jupyter), `"bar"`, `"plain"` (a line every
    /// `every` seconds, 30 by default), `"notebook"` (drawn through Python's `sys.stderr`, with
    /// tqdm where installed), `"off"`; or a callable, called with a dict per update (`step`,
    /// `total`, `phase`, `steps_per_s`, `eta_s`, `train_return`, `eval_return`, `eval_score`,
    /// `done`) at most every `every` seconds (0.5 by default) and once at the end.
    #[pyo3(signature = (mode, every = None))]
    fn progress(&self, mode: &Bound<'_, PyAny>, every: Option<f64>) -> PyResult<Run> {
        use clap::ValueEnum;
        if let Some(every) = every.filter(|e| !(e.is_finite() && *e >= 0.0)) {
            return Err(PyValueError::new_err(format!(
                "progress every: expected a number of seconds >= 0, found {every}"
            )));
        }
        let (mode, to) = if mode.is_callable() {
            (ProgressMode::Auto, Some(ProgressTo::Callback(Arc::new(mode.clone().unbind()))))
        } else {
            let name: String = mode.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "progress {}: expected auto, bar, plain, notebook, off or a callable",
                    mode.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
            match name.to_ascii_lowercase().as_str() {
                "notebook" => (ProgressMode::Auto, Some(ProgressTo::Notebook)),
                other => (
                    ProgressMode::from_str(other, true).map_err(|_| {
                        PyValueError::new_err(format!(
                            "progress {name:?}: expected auto, bar, plain, notebook, off or a callable"
                        ))
                    })?,
                    None,
                ),
            }
        };
        self.recipe.with(|r| {
            r.progress = Some((mode, every));
            r.progress_to = to;
        })
    }

    /// Call `callback(result: dict, state: dict)` after every evaluation; an exception it
    /// raises stops the run (its last checkpoint stays resumable) and is raised by `run()`.
    fn on_eval(&self, callback: Py<PyAny>) -> PyResult<Run> {
        self.recipe.with(|r| r.on_eval = Some(Arc::new(callback)))
    }

    /// Call `callback(checkpoint: pathlib.Path, state: dict)` after every checkpoint; an
    /// exception it raises stops the run and is raised by `run()`.
    fn on_checkpoint(&self, callback: Py<PyAny>) -> PyResult<Run> {
        self.recipe.with(|r| r.on_checkpoint = Some(Arc::new(callback)))
    }

    /// The resolved config as it stands, every default filled in, as a dict (`--print-config`).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let config = errors::no_panic(|| {
            self.recipe.builder(false).and_then(|r| r.draft_config().map_err(anyhow::Error::from)).map_err(to_py)
        })?;
        convert::to_python(py, &config)
    }

    /// Run the config's phases to the end (or continue a resumed run to its end).
    fn run(&self, py: Python<'_>) -> PyResult<Outcome> {
        execute(py, &self.recipe, Phases::All)
    }

    /// Train offline only: `steps` gradient steps on the dataset (d3rlpy's `fit`).
    fn fit(&self, py: Python<'_>, steps: u64) -> PyResult<Outcome> {
        execute(py, &self.recipe, Phases::Fit(steps))
    }

    /// Train online only: `steps` env steps (d3rlpy's `fit_online`), after the config's random
    /// and warm-up steps.
    fn fit_online(&self, py: Python<'_>, steps: u64) -> PyResult<Outcome> {
        execute(py, &self.recipe, Phases::FitOnline(steps))
    }

    fn __repr__(&self) -> String {
        let r = &self.recipe;
        let origin = match &r.origin {
            Origin::Preset(name) => format!("Run.preset({name:?})"),
            Origin::Toml { name, .. } => format!("Run.from_toml({name:?}, ...)"),
            Origin::Finetune(p) => format!("Run.finetune({:?})", p.display().to_string()),
            Origin::Resume(p) => format!("Run.resume({:?})", p.display().to_string()),
        };
        let set = if r.overrides.is_empty() { String::new() } else { format!(".set({:?})", r.overrides) };
        let data = r.dataset.as_ref().map_or(String::new(), |d| format!(".dataset(<{} rows>)", d.len()));
        let env = r.env.as_ref().map_or(String::new(), |e| format!(".env(<Python env {}>)", e.id));
        let from = r
            .starting_from
            .as_ref()
            .map_or(String::new(), |p| format!(".starting_from({:?})", p.display().to_string()));
        format!("{origin}{set}{from}{env}{data}")
    }
}

impl Run {
    /// A `Run` of `recipe` once the Rust builder accepts it; its error through `error`.
    fn checked(recipe: Recipe, error: fn(anyhow::Error) -> PyErr) -> PyResult<Run> {
        errors::no_panic(|| recipe.builder(false).map(drop).map_err(error))?;
        Ok(Run { recipe })
    }
}

/// Run the recipe on a thread of its own and wait for it, handling signals meanwhile.
fn execute(py: Python<'_>, recipe: &Recipe, phases: Phases) -> PyResult<Outcome> {
    let raised: Raised = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    let mut work = recipe.clone();
    work.progress_to = progress_callable(py, recipe)?.map(|f| ProgressTo::Callback(Arc::new(f)));
    let slot = raised.clone();
    interrupt::clear();
    let handle = std::thread::Builder::new()
        .name("o2o-run".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| train(work, phases, slot)));
            let _ = tx.send(result);
        })
        .map_err(|e| errors::Error::new_err(format!("cannot start a thread for the run: {e}")))?;

    // Wait with the GIL released; between waits, let Python run its signal handlers.
    let mut rx = rx;
    let mut signal: Option<PyErr> = None;
    let result = loop {
        let (got, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match got {
            Ok(result) => break Some(result),
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) => {
                if signal.is_none() {
                    if let Err(e) = py.check_signals() {
                        // Ctrl-C: the runner stops at its next safe point with a checkpoint.
                        interrupt::request();
                        signal = Some(e);
                    }
                }
            }
        }
    };
    let _ = py.detach(move || handle.join());
    interrupt::clear();

    let result = match result {
        Some(Ok(result)) => result,
        Some(Err(panic)) => return Err(errors::from_panic(panic)),
        None => return Err(errors::Error::new_err("the run's thread ended without a result")),
    };
    if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    match result {
        Ok(done) => match signal {
            // The run ended before it reached a safe point: the interrupt still stands.
            Some(e) => Err(e),
            None => Outcome::new(py, done),
        },
        Err(o2o_experiments::Error::Interrupted { dir, checkpoint, step, .. }) => {
            let text = format!(
                "stopped at step {step} with a checkpoint ({}); continue with o2o.Run.resume({:?}).run()",
                checkpoint.display(),
                dir.display().to_string()
            );
            match signal {
                Some(e) if !e.is_instance_of::<PyKeyboardInterrupt>(py) => Err(e),
                _ => Err(PyKeyboardInterrupt::new_err(text)),
            }
        }
        Err(e) => Err(to_py(e)),
    }
}

/// The callable that gets this run's progress updates, if any: the user's, or a fresh
/// `o2o._progress.NotebookBar()` for `"notebook"` and for `"auto"` inside a Jupyter kernel
/// (where the process's stderr does not reach the cell).
fn progress_callable(py: Python<'_>, recipe: &Recipe) -> PyResult<Option<Py<PyAny>>> {
    let mode = recipe.progress.map_or(ProgressMode::Auto, |(mode, _)| mode);
    if let Some(ProgressTo::Callback(f)) = &recipe.progress_to {
        return Ok(Some(f.clone_ref(py)));
    }
    if mode == ProgressMode::Off {
        return Ok(None);
    }
    let module = py.import("o2o._progress")?;
    let notebook = match &recipe.progress_to {
        Some(_) => true,
        None => mode == ProgressMode::Auto && module.getattr("in_notebook")?.call0()?.is_truthy()?,
    };
    if !notebook {
        return Ok(None);
    }
    Ok(Some(module.getattr("NotebookBar")?.call0()?.unbind()))
}

/// The run itself, on its own thread: the builder with the callbacks, then the phases.
fn train(recipe: Recipe, phases: Phases, raised: Raised) -> Result<o2o_experiments::Outcome, o2o_experiments::Error> {
    if let Some(n) = recipe.threads {
        // Intra-op threads are set per calling thread (OpenMP); this is the thread that trains.
        tch::set_num_threads(n);
    }
    let mut run = recipe.builder(true)?;
    if let Some(ProgressTo::Callback(callback)) = recipe.progress_to.clone() {
        // A callable (the notebook bar too) is redrawn every PY_PROGRESS_EVERY unless told.
        let (mode, every) = recipe.progress.unwrap_or((ProgressMode::Auto, None));
        let every = Duration::from_secs_f64(every.unwrap_or(PY_PROGRESS_EVERY));
        run = run
            .progress(ProgressOptions { sink: Some(python_progress(callback)), ..ProgressOptions::new(mode, every) });
    }
    if let Some(source) = &recipe.env {
        run = run.env_factory(source.factory(raised.clone()));
    }
    if let Some(callback) = recipe.on_eval.clone() {
        let raised = raised.clone();
        run = run.on_eval(move |result, _agent, state| {
            python_callback(&callback, &raised, "on_eval", |py| {
                Ok((convert::to_python(py, result)?, convert::to_python(py, state)?))
            })
        });
    }
    if let Some(callback) = recipe.on_checkpoint.clone() {
        let raised = raised.clone();
        run = run.on_checkpoint(move |folder: &Path, state| {
            python_callback(&callback, &raised, "on_checkpoint", |py| {
                Ok((convert::path(py, folder)?, convert::to_python(py, state)?))
            })
        });
    }
    match phases {
        Phases::All => run.run(),
        Phases::Fit(steps) => run.fit(steps),
        Phases::FitOnline(steps) => run.fit_online(steps),
    }
}

/// A sink calling `callback(update: dict)` with the GIL. Progress must not stop a run: an
/// exception it raises is reported as unraisable (printed, as Python does for `__del__`) and the
/// callback is not called again in this run.
fn python_progress(callback: Arc<Py<PyAny>>) -> ProgressSink {
    let failed = AtomicBool::new(false);
    ProgressSink::new(move |u: &ProgressUpdate| {
        if failed.load(Ordering::Relaxed) {
            return;
        }
        Python::attach(|py| {
            let call = || -> PyResult<()> {
                let d = PyDict::new(py);
                d.set_item("step", u.step)?;
                d.set_item("total", u.total)?;
                d.set_item("phase", u.phase)?;
                d.set_item("steps_per_s", u.steps_per_s)?;
                d.set_item("eta_s", u.eta_s)?;
                d.set_item("train_return", u.train_return)?;
                d.set_item("eval_return", u.eval_return)?;
                d.set_item("eval_score", u.eval_score)?;
                d.set_item("done", u.done)?;
                callback.bind(py).call1((d,)).map(drop)
            };
            if let Err(e) = call() {
                failed.store(true, Ordering::Relaxed);
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        })
    })
}

/// Call `callback(*args(py))` with the GIL; an exception is kept in `raised` and becomes the
/// error that stops the run.
fn python_callback(
    callback: &Py<PyAny>,
    raised: &Raised,
    name: &str,
    args: impl for<'py> FnOnce(Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
) -> anyhow::Result<()> {
    Python::attach(|py| {
        let outcome = args(py).and_then(|a| callback.bind(py).call1(a));
        outcome.map(drop).map_err(|e| keep(raised, e, &format!("the {name} callback raised")))
    })
}
