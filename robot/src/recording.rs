//! [`Recording`]: every robot transition as a D4RL-format HDF5 dataset, so robot logs pretrain
//! the next agent (`o2o dataset info`, `o2o train` with `dataset.path`).
//!
//! Two files: the whole run (`path`) and the intervened transitions alone (`path` with
//! `.interventions.hdf5` in place of `.hdf5`), HIL-SERL's intervention buffer, served to the
//! next run as demonstrations. Besides the D4RL keys (`observations`, `actions` — the executed
//! action, in the env's units —, `rewards`, `terminals`, `timeouts`, `next_observations`), each
//! row has `infos/intervention` (1 when an operator took over), `infos/label` (1 success, 0
//! failure, −1 no label from the operator), `infos/success` (the label, else the task's own
//! success), `infos/clipped` (dimensions the envelope clipped), `infos/rejected` (a NaN/∞
//! command), `infos/latched` (the step ended in a safety stop), `infos/period_ms` (the loop
//! period, 0 at an episode's first step). Files are rewritten atomically at every episode end
//! and when the env is dropped.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use o2o_envs::Step;
use std::path::{Path, PathBuf};

/// The per-row info columns, in file order.
pub const INFO_KEYS: [&str; 7] = [
    "infos/intervention",
    "infos/label",
    "infos/success",
    "infos/clipped",
    "infos/rejected",
    "infos/latched",
    "infos/period_ms",
];

/// One transition to record.
pub struct StepRecord<'a> {
    /// Observation before the step.
    pub obs: &'a [f32],
    /// The executed action (env units).
    pub action: &'a [f32],
    /// The step.
    pub step: &'a Step,
    /// An operator took over.
    pub intervention: bool,
    /// The operator's label.
    pub label: Option<bool>,
}

/// A dataset being recorded, with its intervention-only twin.
pub struct Recording {
    path: Option<PathBuf>,
    all: D4rlDataset,
    interventions: D4rlDataset,
}

/// The intervention buffer's file beside `path`.
pub fn interventions_path(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "robot".into());
    path.with_file_name(format!("{stem}.interventions.hdf5"))
}

/// Rows of `src` appended to `dst` (same shapes and info keys).
fn append(dst: &mut D4rlDataset, src: &D4rlDataset) {
    dst.observations.extend_from_slice(&src.observations);
    dst.actions.extend_from_slice(&src.actions);
    dst.rewards.extend_from_slice(&src.rewards);
    dst.terminals.extend_from_slice(&src.terminals);
    dst.timeouts.get_or_insert_with(Vec::new).extend(src.timeouts.iter().flatten());
    dst.next_observations.get_or_insert_with(Vec::new).extend(src.next_observations.iter().flatten());
    for k in INFO_KEYS {
        if let (Some(d), Some(s)) = (dst.infos.get_mut(k), src.infos.get(k)) {
            d.data.extend_from_slice(&s.data);
            d.shape = vec![d.data.len()];
        }
    }
}

/// The recording at `p`: read when the file exists (shapes checked), else empty.
fn load(p: &Path, obs_dim: usize, act_dim: usize) -> Result<D4rlDataset, o2o_datasets::DatasetError> {
    if !p.is_file() {
        return Ok(empty(p, obs_dim, act_dim));
    }
    let d = D4rlDataset::read(p)?;
    if d.obs_dim != obs_dim || d.act_dim != act_dim || INFO_KEYS.iter().any(|k| !d.infos.contains_key(*k)) {
        return Err(o2o_datasets::DatasetError::Invalid(format!(
            "{}: cannot continue this robot recording: it has {} observation and {} action dims and infos {:?}; the robot has {obs_dim} and {act_dim} and needs {INFO_KEYS:?}",
            p.display(),
            d.obs_dim,
            d.act_dim,
            d.infos.keys().collect::<Vec<_>>()
        )));
    }
    Ok(d)
}

fn empty(path: &Path, obs_dim: usize, act_dim: usize) -> D4rlDataset {
    let mut d = D4rlDataset::empty(path.to_path_buf(), obs_dim, act_dim);
    for k in INFO_KEYS {
        d.infos.insert(k.to_string(), Column { shape: vec![0], dtype: Dtype::Float32, data: Vec::new() });
    }
    d
}

impl Recording {
    /// A new recording at `path` (continued when the file exists and has the same shapes, so a
    /// resumed run appends to its own log).
    pub fn open(path: &Path, obs_dim: usize, act_dim: usize) -> Result<Self, o2o_datasets::DatasetError> {
        Ok(Self {
            path: Some(path.to_path_buf()),
            all: load(path, obs_dim, act_dim)?,
            interventions: load(&interventions_path(path), obs_dim, act_dim)?,
        })
    }

    /// A recording kept in memory until [`Recording::adopt`] gives it a file (a run whose
    /// directory does not exist yet when the robot connects).
    pub fn in_memory(obs_dim: usize, act_dim: usize) -> Self {
        let p = Path::new("robot.hdf5");
        Self { path: None, all: empty(p, obs_dim, act_dim), interventions: empty(p, obs_dim, act_dim) }
    }

    /// Write to `path` from now on: rows already in that file come first (a resumed run), the
    /// rows recorded so far after them; then both files are written. No-op when `path` is
    /// already the file.
    pub fn adopt(&mut self, path: &Path) -> Result<(), o2o_datasets::DatasetError> {
        if self.path.as_deref() == Some(path) {
            return Ok(());
        }
        let (o, a) = (self.all.obs_dim, self.all.act_dim);
        let mut all = load(path, o, a)?;
        let mut interventions = load(&interventions_path(path), o, a)?;
        append(&mut all, &self.all);
        append(&mut interventions, &self.interventions);
        (self.all, self.interventions, self.path) = (all, interventions, Some(path.to_path_buf()));
        self.flush()
    }

    /// Where the whole run is written (`None` while in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Transitions recorded.
    pub fn len(&self) -> usize {
        self.all.rewards.len()
    }

    /// Whether nothing is recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Intervened transitions recorded.
    pub fn interventions(&self) -> usize {
        self.interventions.rewards.len()
    }

    /// The recording so far (what the file holds after a flush).
    pub fn dataset(&self) -> &D4rlDataset {
        &self.all
    }

    /// The intervention buffer so far.
    pub fn intervention_dataset(&self) -> &D4rlDataset {
        &self.interventions
    }

    /// Add one transition (and write both files when it ends an episode).
    pub fn push(&mut self, r: &StepRecord<'_>) {
        let info = &r.step.info;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let values = [
            flag(r.intervention),
            r.label.map_or(-1.0, flag),
            flag(info.success.unwrap_or(false)),
            info.get("safety/clipped").unwrap_or(0.0) as f32,
            info.get("safety/rejected").unwrap_or(0.0) as f32,
            info.get("safety/latched").unwrap_or(0.0) as f32,
            info.get("loop/period_ms").unwrap_or(0.0) as f32,
        ];
        let mut targets = vec![&mut self.all];
        if r.intervention {
            targets.push(&mut self.interventions);
        }
        for d in targets {
            d.observations.extend_from_slice(r.obs);
            d.actions.extend_from_slice(r.action);
            d.rewards.push(r.step.reward as f32);
            d.terminals.push(flag(r.step.terminated));
            d.timeouts.get_or_insert_with(Vec::new).push(flag(r.step.truncated && !r.step.terminated));
            d.next_observations.get_or_insert_with(Vec::new).extend_from_slice(&r.step.obs);
            for (k, v) in INFO_KEYS.iter().zip(values) {
                if let Some(c) = d.infos.get_mut(*k) {
                    c.data.push(v);
                    c.shape = vec![c.data.len()];
                }
            }
        }
        if r.step.done() {
            if let Err(e) = self.flush() {
                eprintln!(
                    "warning: could not write the robot recording {}: {e}",
                    self.path.as_deref().unwrap_or(Path::new("(in memory)")).display()
                );
            }
        }
    }

    /// Write both files (atomically), when they have rows and the recording has a file.
    pub fn flush(&mut self) -> Result<(), o2o_datasets::DatasetError> {
        let Some(path) = &self.path else { return Ok(()) };
        if !self.all.rewards.is_empty() {
            self.all.write(path)?;
        }
        if !self.interventions.rewards.is_empty() {
            self.interventions.write(&interventions_path(path))?;
        }
        Ok(())
    }
}
