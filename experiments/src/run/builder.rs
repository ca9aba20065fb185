//! [`Run`]: configure a run, then start it, continue it or fine-tune from it — the same calls
//! the `o2o` CLI makes.
//!
//! ```no_run
//! use o2o_experiments::Run;
//!
//! // A preset (or a .toml file), with `--set`-style overrides.
//! let run = Run::preset("iql-hopper-medium")?.set(["train.offline_steps=10000", "eval.episodes=5"])?.seed(1)?;
//! // Offline only (d3rlpy's `fit`), then online from that run's final agent (`fit_online`).
//! let offline = run.fit(10_000)?;
//! let online = Run::preset("iql-hopper-medium")?.starting_from(&offline.dir)?.fit_online(5_000)?;
//! println!("{:?}", online.summary.final_eval);
//! # Ok::<(), o2o_experiments::Error>(())
//! ```
//!
//! Every run writes a run directory under [`Run::runs_dir`] (default `runs/`) and returns an
//! [`Outcome`]: the directory and its [`Summary`]. A run of your own env or of data built in
//! memory is resumed from code the same way it was started: [`Run::resume`] plus the same
//! [`Run::env`] / [`Run::dataset`].
//!
//! Every call returns an [`Error`] a caller can match ([`Error::BadConfig`] for a bad preset,
//! key or value, [`Error::BadDataset`], [`Error::DamagedCheckpoint`], [`Error::RunDir`],
//! [`Error::RunInUse`], [`Error::Interrupted`], …); `?` turns it into an `anyhow::Error`.

use super::checkpoint;
use super::config::{self, RunConfig};
use super::parent::ParentRun;
pub use super::prepare::EnvFactory;
use super::prepare::{self, budget_warnings, Hooks, OnCheckpoint, OnEval, Start};
use super::presets;
use super::progress::ProgressOptions;
use super::rundir::{self, DatasetInfo, Manifest, ParentInfo, ResumeInfo, Seeds, Summary};
use super::state::{EvalResult, RunnerState};
use crate::logging::{MetricSink, RerunArgs};
use crate::Error;
use anyhow::{anyhow, Context};
use o2o_agents::Agent;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::Env;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tch::Device;

/// A finished run: where it is and how it ended.
#[derive(Debug)]
pub struct Outcome {
    /// The run directory.
    pub dir: PathBuf,
    /// Its `summary.json`.
    pub summary: Summary,
    /// True when nothing ran: [`Run::reuse_finished`] found this config already finished, or
    /// [`Run::resume`] found the run finished.
    pub reused: bool,
}

/// A new run, or a run to continue.
enum Mode {
    /// A new run directory named `<name>-<seed>-<time>`.
    New { name: String },
    /// Continue the run in this directory.
    Resume { dir: PathBuf },
}

/// A run being configured. Build it with [`Run::preset`], [`Run::from_config`],
/// [`Run::finetune`] or [`Run::resume`]; adjust it with the builder calls; start it with
/// [`Run::run`] (the config's phases), [`Run::fit`] (offline only) or [`Run::fit_online`].
pub struct Run<'a> {
    table: toml::Table,
    origin: String,
    mode: Mode,
    runs_dir: PathBuf,
    device: Device,
    rerun: RerunArgs,
    env: Option<EnvFactory>,
    dataset: Option<D4rlDataset>,
    sinks: Vec<Box<dyn MetricSink>>,
    on_eval: Option<Box<OnEval<'a>>>,
    on_checkpoint: Option<Box<OnCheckpoint<'a>>>,
    parent: Option<ParentRun>,
    reuse: bool,
    progress: ProgressOptions,
    resume_from: Option<String>,
    /// Where a robot's envs look for the run's loop observer ([`Run::loop_observer_slot`]).
    loop_observer: Option<o2o_robot::ObserverSlot>,
}

impl<'a> Run<'a> {
    fn with_table(table: toml::Table, origin: String, mode: Mode) -> Result<Self, Error> {
        draft(&table, &origin)?;
        Ok(Self {
            table,
            origin,
            mode,
            runs_dir: PathBuf::from("runs"),
            device: Device::cuda_if_available(),
            rerun: RerunArgs::default(),
            env: None,
            dataset: None,
            sinks: Vec::new(),
            on_eval: None,
            on_checkpoint: None,
            parent: None,
            reuse: false,
            progress: ProgressOptions::default(),
            resume_from: None,
            loop_observer: None,
        })
    }

    /// A run of an embedded preset (`o2o train --list-presets`) or of a `.toml` file.
    pub fn preset(name_or_path: &str) -> Result<Self, Error> {
        let (name, mut table) = presets::load(name_or_path).map_err(|e| Error::bad_config(name_or_path, e))?;
        table.insert("preset".into(), toml::Value::String(name.clone()));
        Self::with_table(table, format!("preset {name} with --set overrides"), Mode::New { name })
    }

    /// A run of a config written as TOML text (a preset's format, `extends` included); `name`
    /// names the run directories, as a preset's file name does.
    pub fn from_toml_str(name: &str, text: &str) -> Result<Self, Error> {
        let origin = format!("config {name}");
        let mut table = presets::resolve_text(text, &origin).map_err(|e| Error::bad_config(&origin, e))?;
        table.insert("preset".into(), toml::Value::String(name.to_string()));
        Self::with_table(table, origin, Mode::New { name: name.to_string() })
    }

    /// A run of a config value (e.g. one built in code, or read from another run).
    pub fn from_config(config: &RunConfig) -> Result<Self, Error> {
        let origin = format!("config {}", config.preset);
        let table = as_table(config, "re-reading the config as TOML").map_err(|e| Error::bad_config(&origin, e))?;
        Self::with_table(table, origin, Mode::New { name: config.preset.clone() })
    }

    /// A new run that fine-tunes `parent`'s final agent online with the parent's own config
    /// (`o2o finetune`): no offline, random or warm-up steps, an evaluation of the starting
    /// point, `online_steps` as the parent had them (set them with [`Run::fit_online`] or
    /// `train.online_steps`). IQL keeps its actor learning rate constant online (§6.1).
    pub fn finetune(parent: impl AsRef<Path>) -> Result<Self, Error> {
        let parent_dir = parent.as_ref();
        let p = ParentRun::read(parent_dir)?;
        let mut table = as_table(&p.config, "re-reading the parent's config")?;
        let mut overrides = vec![
            "train.offline_steps=0".to_string(),
            "train.random_steps=0".to_string(),
            "train.warmup_steps=0".to_string(),
            "eval.at_start=true".to_string(),
        ];
        if p.config.algo == "iql" {
            // IQL decays the actor LR only offline; fine-tuning keeps it constant (§6.1).
            overrides.push("agent.actor_lr_decay_steps=0".to_string());
        }
        config::apply_overrides(&mut table, &overrides)?;
        table.insert("parent".into(), p.config_entry()?);
        let name = format!("{}-finetune", p.config.preset);
        let mut run =
            Self::with_table(table, format!("fine-tuning config from {}", parent_dir.display()), Mode::New { name })?;
        run.parent = Some(p);
        Ok(run)
    }

    /// Continue the run in `dir` from its newest checkpoint (`o2o resume`), exactly where it
    /// stopped. A run of an env of your own or of data handed over in memory needs the same
    /// [`Run::env`] / [`Run::dataset`] again.
    pub fn resume(dir: impl AsRef<Path>) -> Result<Self, Error> {
        let dir = dir.as_ref().to_path_buf();
        let config = rundir::read_config(&dir)?;
        let table = as_table(&config, "re-reading the run's config")?;
        Self::with_table(table, dir.join(rundir::CONFIG).display().to_string(), Mode::Resume { dir })
    }

    /// Override config keys, `key=value` each as `o2o train --set` takes them
    /// (`train.online_steps=20000`, `agent.actor_lr=1e-4`, `env=Walker2d-v5`). An unknown key
    /// or a bad value is an error naming it.
    pub fn set<I, S>(mut self, overrides: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if let Mode::Resume { dir } = &self.mode {
            let text =
                anyhow!("{} is resumed with the config it started with; start a new run to change it", dir.display());
            return Err(Error::bad_config(&self.origin, text));
        }
        let overrides: Vec<String> = overrides.into_iter().map(|s| s.as_ref().to_string()).collect();
        config::apply_overrides(&mut self.table, &overrides).map_err(|e| Error::bad_config(&self.origin, e))?;
        draft(&self.table, &self.origin)?;
        Ok(self)
    }

    /// The run seed (every random source is derived from it).
    pub fn seed(self, seed: u64) -> Result<Self, Error> {
        self.set([format!("seed={seed}")])
    }

    /// Start from another run's agent — its newest checkpoint, or the checkpoint folder given
    /// (`<run>/checkpoints/step-N`) — with its whole state (weights, optimizer moments,
    /// temperature), skipping this config's offline phase and evaluating the starting point
    /// (`o2o run --from`).
    pub fn starting_from(mut self, run_or_checkpoint: impl AsRef<Path>) -> Result<Self, Error> {
        let path = run_or_checkpoint.as_ref();
        let p = ParentRun::read(path).with_context(|| format!("starting from {}", path.display()))?;
        // The parent's offline training replaces this config's (whatever was set).
        let mut run = self.set(["train.offline_steps=0", "eval.at_start=true"])?;
        run.table.insert("parent".into(), p.config_entry()?);
        run.parent = Some(p);
        self = run;
        Ok(self)
    }

    /// Where new run directories are created (default `runs/` in the current directory).
    pub fn runs_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.runs_dir = dir.into();
        self
    }

    /// Where to compute (default: CUDA when available, else the CPU).
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The Rerun recording: `recording.rrd` in the run directory by default;
    /// [`RerunArgs::off`] for none, or spawn / connect a viewer (see [`RerunArgs`]).
    pub fn rerun(mut self, rerun: RerunArgs) -> Self {
        self.rerun = rerun;
        self
    }

    /// Train and evaluate on envs this function makes (an env of your own, a wrapped task)
    /// instead of the registry's `env`; the config's `env` becomes the made env's id. It is
    /// called for the acting env and for the evaluation env, and again on every resume.
    pub fn env<F, E>(mut self, make: F) -> Self
    where
        F: Fn() -> anyhow::Result<E> + Send + Sync + 'static,
        E: Env + 'static,
    {
        self.env = Some(Arc::new(move || make().map(|e| Box::new(e) as Box<dyn Env>)));
        self
    }

    /// [`Run::env`] for a factory that already returns boxed envs.
    pub fn env_factory(mut self, make: EnvFactory) -> Self {
        self.env = Some(make);
        self
    }

    /// Offline data built in memory (e.g. [`D4rlDataset::from_columns`]) instead of a file:
    /// actions in the env's units, rewards as the env gives them. The `[dataset]` section keeps
    /// its `reward` and `transitions` settings; the manifest records the data's content hash.
    pub fn dataset(mut self, data: D4rlDataset) -> Result<Self, Error> {
        let section = self.table.entry("dataset").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(t) = section.as_table_mut() else {
            return Err(Error::bad_config(&self.origin, anyhow!("key `dataset` is not a table")));
        };
        t.remove("id");
        t.remove("path");
        t.insert("in_memory".into(), toml::Value::Boolean(true));
        draft(&self.table, &self.origin)?;
        self.dataset = Some(data);
        Ok(self)
    }

    /// Hand the run's robot-loop observer (its Rerun sink's, when it has one) to `slot` once
    /// the sinks are up: robot envs made with that slot log their control loop there.
    pub fn loop_observer_slot(mut self, slot: o2o_robot::ObserverSlot) -> Self {
        self.loop_observer = Some(slot);
        self
    }

    fn connect_loop_observer(&self, sinks: &[Box<dyn MetricSink>]) {
        if let Some(slot) = &self.loop_observer {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = sinks.iter().find_map(|s| s.loop_observer());
        }
    }

    /// Also send every logged record to `sink` (besides `metrics.jsonl` and Rerun).
    pub fn sink(mut self, sink: Box<dyn MetricSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Call `f` after every evaluation with its result, the agent as evaluated and the runner's
    /// counters; an error from `f` stops the run (its last checkpoint stays resumable).
    pub fn on_eval(mut self, f: impl FnMut(&EvalResult, &dyn Agent, &RunnerState) -> anyhow::Result<()> + 'a) -> Self {
        self.on_eval = Some(Box::new(f));
        self
    }

    /// Call `f` after every checkpoint with its folder and the counters it holds.
    pub fn on_checkpoint(mut self, f: impl FnMut(&Path, &RunnerState) -> anyhow::Result<()> + 'a) -> Self {
        self.on_checkpoint = Some(Box::new(f));
        self
    }

    /// How progress is shown (a bar on a terminal, plain lines otherwise, by default).
    pub fn progress(mut self, progress: ProgressOptions) -> Self {
        self.progress = progress;
        self
    }

    /// For [`Run::resume`]: continue from this checkpoint (`step-N`) instead of the newest;
    /// the newer ones are moved aside (`checkpoints/.discarded-step-…`).
    pub fn from_checkpoint(mut self, name: &str) -> Self {
        self.resume_from = Some(name.to_string());
        self
    }

    /// When `runs_dir` already holds a finished run of exactly this resolved config, return it
    /// instead of running again (`o2o run --reuse`, `make demo`).
    pub fn reuse_finished(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// The resolved config as it stands (every key, the agent's defaults filled in), checked
    /// as a run's config is at launch (it must have steps).
    pub fn config(&self) -> Result<RunConfig, Error> {
        RunConfig::from_table(self.table.clone(), &self.origin).map_err(|e| Error::bad_config(&self.origin, e))
    }

    /// [`Run::config`] before the step counts are set (e.g. by `fit`): every check but that one.
    pub fn draft_config(&self) -> Result<RunConfig, Error> {
        draft(&self.table, &self.origin)
    }

    /// Train offline only, `steps` gradient steps on the dataset (d3rlpy's `fit`).
    pub fn fit(self, steps: u64) -> Result<Outcome, Error> {
        self.set([
            format!("train.offline_steps={steps}"),
            "train.random_steps=0".into(),
            "train.warmup_steps=0".into(),
            "train.online_steps=0".into(),
        ])?
        .run()
    }

    /// Train online only, `steps` env steps with updates (d3rlpy's `fit_online`), after the
    /// config's random and warm-up steps; from the agent of [`Run::starting_from`] or
    /// [`Run::finetune`] when given, else from scratch.
    pub fn fit_online(self, steps: u64) -> Result<Outcome, Error> {
        self.set(["train.offline_steps=0".to_string(), format!("train.online_steps={steps}")])?.run()
    }

    /// Run the config's phases to the end (or continue a resumed run to its end).
    pub fn run(mut self) -> Result<Outcome, Error> {
        if !matches!(self.mode, Mode::Resume { .. }) {
            if let Some(make) = &self.env {
                // The config names the env the factory makes (a resumed run's config already does).
                let id = make().context("making the env with the run's env factory")?.spec().id.clone();
                self.table.insert("env".into(), toml::Value::String(id));
            }
            absolute_dataset_path(&mut self.table)?;
        }
        let config = self.config()?;
        let done = match std::mem::replace(&mut self.mode, Mode::New { name: String::new() }) {
            Mode::Resume { dir } => self.continue_run(&dir, &config),
            Mode::New { name } => self.start(&name, &config),
        };
        done.map_err(Error::from)
    }

    /// A new run: everything made and checked first, then the run directory created whole
    /// (config and manifest in place, locked), then the loop.
    fn start(mut self, name: &str, config: &RunConfig) -> anyhow::Result<Outcome> {
        if self.reuse {
            if let Some((dir, summary)) = finished_run_with(&self.runs_dir, config) {
                eprintln!(
                    "{} already holds a finished run of this config: {} (delete it to run again)",
                    self.runs_dir.display(),
                    dir.display()
                );
                return Ok(Outcome { dir, summary, reused: true });
            }
        }
        if config.dataset.as_ref().is_some_and(|d| d.in_memory) && self.dataset.is_none() {
            let text = anyhow!("the config says `dataset.in_memory = true` but no dataset was given (Run::dataset)");
            return Err(Error::bad_dataset(None, text).into());
        }
        let (start, parent) = match self.parent.take() {
            Some(p) => (Start::FromParent { checkpoint: p.checkpoint }, Some(p.info)),
            None => (Start::Fresh, None),
        };
        let (mut on_eval, mut on_checkpoint) = (self.on_eval.take(), self.on_checkpoint.take());
        let device = self.device;
        let hooks = hooks(&self.env, self.dataset.take(), &mut on_eval, &mut on_checkpoint);
        let prepared = prepare::prepare(config, device, start, hooks)?;
        warn(prepared.warnings());
        let mut manifest = new_manifest(config, device, parent);
        manifest.dataset = prepared.dataset_info().cloned();
        manifest.instruction_embeddings = prepared.instruction_embeddings().map(str::to_string);
        let (dir, _lock) = rundir::create(&self.runs_dir, name, config.seed, |tmp| {
            rundir::write_config(tmp, config)?;
            rundir::write_json(&tmp.join(rundir::MANIFEST), &manifest)
        })?;
        eprintln!("run directory: {}", dir.display());
        let mut sinks = crate::logging::sinks_for_run(&dir, &self.rerun, config)?;
        sinks.append(&mut self.sinks);
        self.connect_loop_observer(&sinks);
        let summary = prepared.run(&dir, sinks, self.progress.clone())?;
        Ok(Outcome { dir, summary, reused: false })
    }

    /// Continue the run in `dir`: locked first; the newest checkpoint that loads (a damaged one
    /// is moved aside with a note), or the one [`Run::from_checkpoint`] chose (newer ones
    /// moved aside); a run killed before its first checkpoint starts over from step 0.
    fn continue_run(mut self, dir: &Path, config: &RunConfig) -> anyhow::Result<Outcome> {
        let _lock = rundir::RunLock::acquire(dir)?;
        checkpoint::remove_partial(dir)?;
        let manifest_path = dir.join(rundir::MANIFEST);
        let mut manifest = read_manifest(&manifest_path).map_err(|e| Error::run_dir(dir, e))?;
        let mut candidates = checkpoint::list(dir)?;
        if let Some(name) = self.resume_from.clone() {
            let chosen = checkpoint::find(dir, Some(&name))?;
            let newer: Vec<PathBuf> = candidates.iter().filter(|c| **c > chosen).cloned().collect();
            for c in newer {
                let aside = checkpoint::set_aside(&c, "discarded")?;
                eprintln!(
                    "note: resuming from {}: moved the newer {} to {}",
                    chosen.display(),
                    c.display(),
                    aside.display()
                );
            }
            candidates = checkpoint::list(dir)?;
        }
        let (mut on_eval, mut on_checkpoint) = (self.on_eval.take(), self.on_checkpoint.take());
        let device = self.device;
        let mut any_damaged = false;
        // `restart`: no checkpoint to continue from, so the run starts over from step 0.
        let (prepared, from, restart) = loop {
            let Some(checkpoint) = candidates.pop() else {
                if any_damaged {
                    eprintln!("note: no checkpoint of {} loads; restarting it from step 0", dir.display());
                }
                eprintln!("{} has no checkpoint yet; restarting it from step 0", dir.display());
                let (start, from) = match &config.parent {
                    Some(p) => (
                        Start::FromParent { checkpoint: p.checkpoint.clone() },
                        format!("step 0 (parent {})", p.checkpoint.display()),
                    ),
                    None => (Start::Fresh, "step 0".to_string()),
                };
                let hooks = hooks(&self.env, self.dataset.take(), &mut on_eval, &mut on_checkpoint);
                break (prepare::prepare(config, device, start, hooks)?, from, true);
            };
            let state = checkpoint::read_state(&checkpoint);
            if let Ok(s) = &state {
                if s.finished && !any_damaged {
                    let summary = match read_summary(dir) {
                        Ok(summary) => summary,
                        // Killed between the final checkpoint and the summary: write it now.
                        Err(_) => finish_from_checkpoint(dir, config, &checkpoint, s)?,
                    };
                    return Ok(Outcome { dir: dir.to_path_buf(), summary, reused: true });
                }
            }
            let hooks = hooks(&self.env, self.dataset.take(), &mut on_eval, &mut on_checkpoint);
            match prepare::prepare(config, device, Start::Resume { checkpoint: checkpoint.clone() }, hooks) {
                Ok(p) => {
                    eprintln!("resuming {} from {} (step {})", dir.display(), checkpoint.display(), p.state().step);
                    break (p, checkpoint.display().to_string(), false);
                }
                Err(e) if checkpoint::is_damaged(&e, &checkpoint) => {
                    let aside = checkpoint::set_aside(&checkpoint, "damaged")?;
                    eprintln!(
                        "note: {} is damaged ({}); moved it to {} and trying the one before",
                        checkpoint.display(),
                        crate::errors::first_lines(&e),
                        aside.display()
                    );
                    any_damaged = true;
                    // The in-memory dataset went into the failed attempt: it is gone.
                    if config.dataset.as_ref().is_some_and(|d| d.in_memory) {
                        let text = anyhow!("{} is damaged and the run's in-memory dataset was consumed by the attempt; resume again (Run::resume) with the data", checkpoint.display());
                        return Err(Error::damaged_checkpoint(&checkpoint, text).into());
                    }
                }
                Err(e) => return Err(e),
            }
        };
        if restart {
            std::fs::write(dir.join(rundir::METRICS), b"")
                .with_context(|| format!("cannot reset {}/{}", dir.display(), rundir::METRICS))?;
        }
        // A resumed run must see the data it started with, or it would not continue exactly.
        check_same_dataset(&manifest_path, manifest.dataset.as_ref(), prepared.dataset_info())?;
        warn(prepared.warnings());
        manifest.resumes.push(ResumeInfo {
            at_utc: rundir::utc_timestamp(),
            checkpoint: from,
            device: format!("{:?}", self.device),
        });
        if manifest.dataset.is_none() {
            manifest.dataset = prepared.dataset_info().cloned();
        }
        rundir::write_json(&manifest_path, &manifest)?;
        let mut sinks = crate::logging::sinks_for_run(dir, &self.rerun, config)?;
        sinks.append(&mut self.sinks);
        self.connect_loop_observer(&sinks);
        let summary = prepared.run(dir, sinks, self.progress.clone())?;
        Ok(Outcome { dir: dir.to_path_buf(), summary, reused: false })
    }
}

/// The config of `table` from `origin` with every check but "has steps"
/// ([`RunConfig::from_table_without_steps`]).
fn draft(table: &toml::Table, origin: &str) -> Result<RunConfig, Error> {
    RunConfig::from_table_without_steps(table.clone(), origin).map_err(|e| Error::bad_config(origin, e))
}

/// `config` as a TOML table again (`what` says which, in the message).
fn as_table(config: &RunConfig, what: &str) -> anyhow::Result<toml::Table> {
    config.to_toml_string()?.parse().with_context(|| what.to_string())
}

/// A run's `manifest.json`.
fn read_manifest(path: &Path) -> anyhow::Result<Manifest> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}: the run directory is incomplete", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a run manifest", path.display()))
}

/// A relative `dataset.path` made absolute, so the run (and runs started from it elsewhere)
/// finds its file from any folder; [`Error::BadDataset`] when there is no such file.
fn absolute_dataset_path(table: &mut toml::Table) -> Result<(), Error> {
    let Some(toml::Value::Table(d)) = table.get_mut("dataset") else { return Ok(()) };
    let Some(toml::Value::String(p)) = d.get("path") else { return Ok(()) };
    let path = PathBuf::from(p);
    if path.is_relative() {
        let abs = std::fs::canonicalize(&path).with_context(|| {
            format!(
                "dataset.path {} does not exist (relative to {})",
                path.display(),
                std::env::current_dir().map(|c| c.display().to_string()).unwrap_or_default()
            )
        });
        let abs = abs.map_err(|e| Error::bad_dataset(Some(path.clone()), e))?;
        d.insert("path".into(), toml::Value::String(abs.display().to_string()));
    }
    Ok(())
}

/// The runner's hooks from a builder's parts.
fn hooks<'h, 'a: 'h>(
    env: &Option<EnvFactory>,
    dataset: Option<D4rlDataset>,
    on_eval: &'h mut Option<Box<OnEval<'a>>>,
    on_checkpoint: &'h mut Option<Box<OnCheckpoint<'a>>>,
) -> Hooks<'h> {
    Hooks {
        env: env.clone(),
        actor_env: None,
        dataset,
        on_eval: on_eval.as_mut().map(|f| &mut **f as &mut OnEval<'h>),
        on_checkpoint: on_checkpoint.as_mut().map(|f| &mut **f as &mut OnCheckpoint<'h>),
    }
}

/// Budget warnings on stderr.
fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// On resume: the offline data loaded now is the data the run's manifest recorded (same
/// sha256); [`Error::BadDataset`] when it is not.
fn check_same_dataset(manifest: &Path, then: Option<&DatasetInfo>, now: Option<&DatasetInfo>) -> anyhow::Result<()> {
    match (then, now) {
        (Some(then), Some(now)) if then.sha256 != now.sha256 => {
            let text = anyhow!(
                "the offline data changed since the run started: {} records {} with sha256 {}, found {} with sha256 {}; resume with the same data",
                manifest.display(),
                then.path,
                then.sha256,
                now.path,
                now.sha256
            );
            Err(Error::bad_dataset(Some(PathBuf::from(&now.path)), text).into())
        }
        _ => Ok(()),
    }
}

/// The manifest of a new run (the runner fills in the dataset once it is loaded).
pub(crate) fn new_manifest(config: &RunConfig, device: Device, parent: Option<ParentInfo>) -> Manifest {
    use super::actor::{derive_seed, stream};
    Manifest {
        provenance: rundir::Provenance::now(),
        preset: config.preset.clone(),
        algo: config.algo.clone(),
        env: config.env.clone(),
        seeds: Seeds {
            run: config.seed,
            agent: derive_seed(config.seed, stream::AGENT, 0),
            runner_rng: derive_seed(config.seed, stream::RUNNER_RNG, 0),
            episode_seed_rule: "train episode k: derive_seed(run, 1, k); eval episode k: derive_seed(run, 2, k)".into(),
        },
        dataset: None,
        parent,
        device: format!("{device:?}"),
        torch_threads: tch::get_num_threads() as i64,
        machine: rundir::Machine::current(),
        resumes: Vec::new(),
        instruction_embeddings: None,
        trainer: None,
    }
}

/// The end of a run whose final checkpoint was written but whose `summary.json` (and recorded
/// dataset) were not: both from that checkpoint, as the run would have written them.
fn finish_from_checkpoint(dir: &Path, config: &RunConfig, ckpt: &Path, state: &RunnerState) -> anyhow::Result<Summary> {
    let recorded = ckpt.join(checkpoint::DATASET);
    if config.train.record_dataset && recorded.is_file() {
        let dest = dir.join(rundir::DATASET);
        let tmp = dir.join(".dataset.hdf5.tmp");
        std::fs::copy(&recorded, &tmp).with_context(|| format!("cannot copy {}", recorded.display()))?;
        std::fs::rename(&tmp, &dest).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    // (its wall time is unknown: the process that ran it was killed)
    let summary = Summary::finished(dir, ckpt, state, 0.0, budget_warnings(config));
    rundir::write_json(&dir.join(rundir::SUMMARY), &summary)?;
    Ok(summary)
}

/// A run directory's `summary.json`.
fn read_summary(dir: &Path) -> anyhow::Result<Summary> {
    let path = dir.join(rundir::SUMMARY);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a run summary", path.display()))
}

/// The newest finished run in `runs_dir` whose resolved config equals `config`, with its summary.
fn finished_run_with(runs_dir: &Path, config: &RunConfig) -> Option<(PathBuf, Summary)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs_dir).ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    dirs.into_iter().rev().find_map(|dir| {
        let summary = read_summary(&dir).ok()?;
        let theirs = RunConfig::read(&dir.join(rundir::CONFIG)).ok()?;
        (summary.finished && theirs == *config).then_some((dir, summary))
    })
}
