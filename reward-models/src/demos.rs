//! Demonstrations with keyframes: recording scripted Fetch demos into D4RL-format files, the
//! keyframe sidecar that attaches sub-task boundaries to any D4RL dataset, and loading both
//! into [`Demo`]s for the progress model.
//!
//! **Sidecar** (`<dataset>.keyframes.json`, or any `.json` / `.toml` path given explicitly):
//! per episode (its index in the file's episode order, episodes split at `terminals` /
//! `timeouts`), the list of sub-tasks with frame ids counted from the episode's first row:
//!
//! ```json
//! {"format": "o2o-keyframes/1",
//!  "episodes": [{"episode": 0, "subtasks": [
//!     {"start_frame_id": 0, "end_frame_id": 9, "annotation": "approach"},
//!     {"start_frame_id": 9, "end_frame_id": 31, "annotation": "push"}]}]}
//! ```
//!
//! ```toml
//! format = "o2o-keyframes/1"
//! [[episodes]]
//! episode = 0
//! [[episodes.subtasks]]
//! start_frame_id = 0
//! end_frame_id = 9
//! ```
//!
//! An episode the sidecar does not list is one sub-task over all its frames.

use crate::labels::SubTask;
use crate::progress::{Demo, ViewSpec};
use crate::RewardModelError;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use o2o_envs::mujoco::{FetchEnv, FetchScript, FetchTask};
use o2o_envs::wrappers::TimeLimit;
use o2o_envs::Env;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The sidecar's format tag.
pub const KEYFRAMES_FORMAT: &str = "o2o-keyframes/1";

/// One episode's keyframes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeKeyframes {
    /// Episode index in the dataset.
    pub episode: usize,
    /// Its sub-tasks, frame ids from the episode's first row.
    pub subtasks: Vec<SubTask>,
}

/// A keyframe sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keyframes {
    /// [`KEYFRAMES_FORMAT`].
    pub format: String,
    /// Episodes with keyframes.
    pub episodes: Vec<EpisodeKeyframes>,
}

impl Keyframes {
    /// The default sidecar path of a dataset: `<dataset>.keyframes.json`.
    pub fn sidecar_of(dataset: &Path) -> PathBuf {
        let mut s = dataset.as_os_str().to_owned();
        s.push(".keyframes.json");
        PathBuf::from(s)
    }

    /// Read a `.json` or `.toml` sidecar.
    pub fn read(path: &Path) -> Result<Self, RewardModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| RewardModelError::Io { path: path.into(), source: e })?;
        let bad = |message: String| RewardModelError::Keyframes { episode: path.display().to_string(), message };
        let k: Keyframes = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?,
            Some("toml") => toml::from_str(&text).map_err(|e| bad(e.to_string()))?,
            other => return Err(bad(format!("expected a .json or .toml sidecar, found extension {other:?}"))),
        };
        if k.format != KEYFRAMES_FORMAT {
            return Err(bad(format!("expected format \"{KEYFRAMES_FORMAT}\", found \"{}\"", k.format)));
        }
        Ok(k)
    }

    /// Write as JSON, atomically.
    pub fn write(&self, path: &Path) -> Result<(), RewardModelError> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| RewardModelError::Keyframes { episode: path.display().to_string(), message: e.to_string() })?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            RewardModelError::Io { path: path.into(), source: e }
        })
    }

    fn of(&self, episode: usize) -> Option<Vec<SubTask>> {
        self.episodes.iter().find(|e| e.episode == episode).map(|e| e.subtasks.clone())
    }
}

/// What a scripted recording did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordReport {
    /// Episodes tried.
    pub attempted: usize,
    /// Episodes that ended in success (the ones written).
    pub kept: usize,
}

/// Record `episodes` successful scripted demonstrations of a Fetch task (seeds `seed`,
/// `seed + 1`, …; failed attempts are skipped, at most `2 × episodes` tries) into a D4RL
/// dataset with `infos/stage` and `infos/success` columns, plus their keyframes: sub-task k
/// starts at the first row whose controller stage is ≥ k, and the last one ends at the frame
/// where the task is first achieved.
pub fn record_fetch(
    env: &mut TimeLimit<FetchEnv>,
    task: FetchTask,
    episodes: usize,
    seed: u64,
    source: &Path,
) -> Result<(D4rlDataset, Keyframes, RecordReport), RewardModelError> {
    record_fetch_at_speed(env, task, episodes, seed, 1.0, source)
}

/// [`record_fetch`] with the controller's position commands clipped to ±`speed`
/// ([`FetchScript::with_speed`]): slower demonstrations with more frames per sub-task.
pub fn record_fetch_at_speed(
    env: &mut TimeLimit<FetchEnv>,
    task: FetchTask,
    episodes: usize,
    seed: u64,
    speed: f32,
    source: &Path,
) -> Result<(D4rlDataset, Keyframes, RecordReport), RewardModelError> {
    let obs_dim = env.observation_space().dim();
    let mut data = D4rlDataset::empty(source.to_path_buf(), obs_dim, 4);
    let (mut stages_col, mut success_col) = (Vec::new(), Vec::new());
    let mut keyframes = Vec::new();
    let stages = FetchScript::stages(task);
    let env_err = |e: o2o_envs::EnvError| RewardModelError::Demo { demo: "scripted".into(), message: e.to_string() };
    let mut attempted = 0;
    while keyframes.len() < episodes && attempted < 2 * episodes {
        let mut obs = env.reset(Some(seed + attempted as u64)).map_err(env_err)?;
        attempted += 1;
        let mut script = FetchScript::with_speed(task, speed);
        let mut rows: Vec<(Vec<f32>, [f32; 4], f64, Vec<f32>, bool, usize, bool)> = Vec::new();
        loop {
            let action = script.act(&obs);
            let stage = stages.iter().position(|s| *s == script.stage()).unwrap_or(0);
            let step = env.step(&action).map_err(env_err)?;
            let success = step.info.success == Some(true);
            rows.push((obs, action, step.reward, step.obs.clone(), step.truncated, stage, success));
            obs = step.obs;
            if step.terminated || step.truncated {
                break;
            }
        }
        if !rows.last().is_some_and(|r| r.6) {
            continue;
        }
        // Keyframes: first row of each stage (monotone), the end at the first success frame.
        let n = rows.len();
        let first_success = rows.iter().position(|r| r.6).map(|t| (t + 1).min(n - 1)).unwrap_or(n - 1);
        let mut starts = vec![0usize];
        for k in 1..stages.len() {
            match rows.iter().position(|r| r.5 >= k) {
                Some(s) => starts.push(s),
                None => break,
            }
        }
        if starts.len() < stages.len() {
            continue; // a stage was skipped: no clean sub-task boundaries
        }
        let mut subtasks = Vec::new();
        for k in 0..stages.len() {
            let end = if k + 1 < stages.len() { starts[k + 1] } else { first_success };
            subtasks.push(SubTask {
                start_frame_id: starts[k],
                end_frame_id: end,
                annotation: Some(stages[k].name().into()),
            });
        }
        if subtasks.iter().any(|t| t.end_frame_id <= t.start_frame_id) {
            continue; // solved too fast to have every stage: not a useful demo
        }
        keyframes.push(EpisodeKeyframes { episode: keyframes.len(), subtasks });
        for (o, a, r, next, truncated, stage, success) in rows {
            data.observations.extend_from_slice(&o);
            data.actions.extend_from_slice(&a);
            data.rewards.push(r as f32);
            data.terminals.push(0.0);
            if let Some(t) = data.timeouts.as_mut() {
                t.push(truncated as u8 as f32);
            }
            if let Some(nx) = data.next_observations.as_mut() {
                nx.extend_from_slice(&next);
            }
            stages_col.push(stage as f32);
            success_col.push(success as u8 as f32);
        }
    }
    let n = data.rewards.len();
    data.infos.insert("infos/stage".into(), Column { shape: vec![n], dtype: Dtype::Int32, data: stages_col });
    data.infos.insert("infos/success".into(), Column { shape: vec![n], dtype: Dtype::Bool, data: success_col });
    let kept = keyframes.len();
    Ok((data, Keyframes { format: KEYFRAMES_FORMAT.into(), episodes: keyframes }, RecordReport { attempted, kept }))
}

/// Every episode of `data` as a [`Demo`] over `views` (slices of the observation), with
/// keyframes from `keyframes` where it lists the episode.
pub fn demos_from_dataset(
    data: &D4rlDataset,
    keyframes: Option<&Keyframes>,
    views: &[ViewSpec],
) -> Result<Vec<Demo>, RewardModelError> {
    let mut out = Vec::new();
    for (i, ep) in data.episodes(None).iter().enumerate() {
        let obs = &data.observations[ep.rows.start * data.obs_dim..ep.rows.end * data.obs_dim];
        let name = format!("{}#{i}", data.source.display());
        out.push(Demo::from_observations(&name, obs, data.obs_dim, views, keyframes.and_then(|k| k.of(i)))?);
    }
    Ok(out)
}
