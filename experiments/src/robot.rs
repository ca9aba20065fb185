//! Robots in runs: an env id `robot:<config.toml>` names a robot ([`o2o_robot::RobotConfig`]),
//! and a [`RobotSession`] gives the run its env factory and keeps the robot's recording.
//!
//! Every command that runs a config (`o2o train`, `o2o run`, `o2o finetune`, `o2o resume`,
//! `o2o robot run`) goes through the same runner as simulation; with a robot env it also
//! writes, into the run directory,
//! - `robot.hdf5`: every transition the robot made (acting and evaluating), D4RL format, with
//!   the executed action and `infos/intervention`, `infos/label`, `infos/success`, the
//!   envelope's clips and rejections, safety stops and the loop period
//!   ([`o2o_robot::recording`]); rewritten at each episode end once the directory exists;
//! - `robot.interventions.hdf5`: the intervened transitions alone (HIL-SERL's intervention
//!   buffer), to serve as the next run's demonstrations (`dataset.path`);
//! - `robot.json`: each env's safety counters, loop timing and final latch;
//!
//! and, in the run's Rerun recording, every control step of each env under `robot/arm<k>/`
//! on the `robot_step` timeline (joint states, commands before and after the envelope, clips,
//! interventions, loop timing: `logging::rerun_sink::RobotLoopLogger`).

use crate::run::builder::{EnvFactory, Run};
use crate::run::rundir;
use anyhow::{Context, Result};
use o2o_envs::Env;
use o2o_robot::{EnvReport, Recording, ReportSink, RobotConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The prefix of robot env ids.
pub const ENV_PREFIX: &str = "robot:";

/// The recording file in a run directory.
pub const RECORDING: &str = "robot.hdf5";

/// The safety report in a run directory.
pub const REPORT: &str = "robot.json";

/// The env id of the robot config at `path` (made absolute, so a run resumes from anywhere).
pub fn env_id(path: &Path) -> Result<String> {
    let abs = std::fs::canonicalize(path).with_context(|| format!("robot config {} does not exist", path.display()))?;
    Ok(format!("{ENV_PREFIX}{}", abs.display()))
}

/// The config path an env id names, when it is a robot's.
pub fn config_path(env_id: &str) -> Option<PathBuf> {
    env_id.strip_prefix(ENV_PREFIX).map(PathBuf::from)
}

/// What a robot run did: per env, its safety counters and loop timing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RobotReport {
    /// The robot config.
    pub config: String,
    /// The recording, when one was written.
    pub recording: Option<String>,
    /// Transitions recorded (acting and evaluating, this session and earlier ones of the run).
    pub transitions: usize,
    /// Intervened transitions recorded.
    pub interventions: usize,
    /// One entry per env that stepped (acting, evaluating).
    pub envs: Vec<EnvReport>,
}

/// A robot for one run: the env factory, the shared recording, the envs' reports.
#[derive(Clone)]
pub struct RobotSession {
    path: PathBuf,
    id: String,
    config: RobotConfig,
    recording: Arc<Mutex<Option<Arc<Mutex<Recording>>>>>,
    reports: ReportSink,
    made: Arc<std::sync::atomic::AtomicU64>,
    /// The run's Rerun logger of the control loop, once the run's sinks are up.
    observer: o2o_robot::ObserverSlot,
}

impl RobotSession {
    /// The session for env id `env_id`, when it names a robot.
    pub fn for_env(env_id: &str) -> Result<Option<Self>> {
        match config_path(env_id) {
            Some(path) => Ok(Some(Self::open(&path)?)),
            None => Ok(None),
        }
    }

    /// The session for the robot config at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let config = RobotConfig::read(path)?;
        Ok(Self {
            id: env_id(path)?,
            path: path.to_path_buf(),
            config,
            recording: Arc::new(Mutex::new(None)),
            reports: Arc::new(Mutex::new(Vec::new())),
            made: Arc::new(0.into()),
            observer: Arc::new(Mutex::new(None)),
        })
    }

    /// The run's env id for this robot.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The config.
    pub fn config(&self) -> &RobotConfig {
        &self.config
    }

    /// Connect the robot and make its env (shared recording and report sink attached). The
    /// k-th simulated arm of the session draws its injected faults from seed `faults.seed + k`,
    /// so the acting and the evaluation arm do not fail in lock-step.
    pub fn make_env(&self) -> Result<o2o_robot::RobotEnv<Box<dyn o2o_robot::Robot>>> {
        let k = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut config = self.config.clone();
        if let o2o_robot::config::DriverConfig::Sim(sim) = &mut config.driver {
            sim.faults.seed = sim.faults.seed.wrapping_add(k);
        }
        let env = config.build(&self.id, &self.path)?;
        let (o, a) = (env.observation_space().dim(), env.action_space().dim());
        let rec = self
            .recording
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| Arc::new(Mutex::new(Recording::in_memory(o, a))))
            .clone();
        Ok(env.with_recording(rec).with_report_sink(self.reports.clone()).with_observer(self.observer.clone(), k))
    }

    /// The factory the runner calls for its acting and evaluation envs.
    pub fn factory(&self) -> EnvFactory {
        let s = self.clone();
        Arc::new(move || s.make_env().map(|e| Box::new(e) as Box<dyn Env>))
    }

    /// `run` on this robot: its env factory, and the recording written into the run
    /// directory at every checkpoint (a resumed run appends to its own).
    pub fn attach<'a>(&self, run: Run<'a>) -> Run<'a> {
        let s = self.clone();
        run.env_factory(self.factory()).loop_observer_slot(self.observer.clone()).on_checkpoint(move |ckpt, _| {
            // <run>/checkpoints/step-N
            match ckpt.parent().and_then(Path::parent) {
                Some(dir) => s.flush_into(dir),
                None => Ok(()),
            }
        })
    }

    /// Write the recording into `dir` (adopting it as the file from now on).
    pub fn flush_into(&self, dir: &Path) -> Result<()> {
        if let Some(rec) = self.recording.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let path = dir.join(RECORDING);
            rec.lock()
                .unwrap_or_else(|p| p.into_inner())
                .adopt(&path)
                .with_context(|| format!("writing the robot recording {}", path.display()))?;
        }
        Ok(())
    }

    /// After the run: the recording in `dir`, the envs' reports in `dir/robot.json`.
    pub fn finish(&self, dir: &Path) -> Result<RobotReport> {
        self.flush_into(dir)?;
        let (recording, transitions, interventions) =
            match self.recording.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                Some(r) => {
                    let r = r.lock().unwrap_or_else(|p| p.into_inner());
                    (r.path().map(|p| p.display().to_string()), r.len(), r.interventions())
                }
                None => (None, 0, 0),
            };
        let envs: Vec<EnvReport> = self
            .reports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|r| r.timing.steps > 0)
            .cloned()
            .collect();
        let report =
            RobotReport { config: self.path.display().to_string(), recording, transitions, interventions, envs };
        rundir::write_json(&dir.join(REPORT), &report)?;
        Ok(report)
    }
}
