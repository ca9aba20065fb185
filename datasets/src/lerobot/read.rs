//! The LeRobotDataset reader: episode metadata (v3.0 Parquet or v2.x JSON lines), the data
//! files named by `data_path`, and the mapping of features to a [`D4rlDataset`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::info::{Feature, Info};
use super::parquet_io::{read_table, Table};
use super::{LeRobotKeys, DEFAULT_ACTION, DEFAULT_DONE, DEFAULT_INTERVENTION, DEFAULT_OBSERVATION, DEFAULT_REWARD};
use crate::d4rl::D4rlDataset;
use crate::error::{DatasetError, Result};
use crate::h5util::{Column, Dtype};

/// One episode as the metadata lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeMeta {
    /// `episode_index`.
    pub index: i64,
    /// `length`: frames.
    pub length: usize,
    /// Its data file as the metadata names it, relative to the dataset root (frames are found
    /// by `episode_index` in every data file, so this is informational).
    pub data_file: PathBuf,
    /// Its tasks (natural-language instructions).
    pub tasks: Vec<String>,
}

/// A LeRobotDataset read into o2o's columns.
#[derive(Debug, Clone)]
pub struct LeRobotDataset {
    /// The folder.
    pub root: PathBuf,
    /// `meta/info.json`.
    pub info: Info,
    /// Tasks, by `task_index`.
    pub tasks: Vec<String>,
    /// Episodes, by `episode_index`.
    pub episodes: Vec<EpisodeMeta>,
    /// The data files read (every file `data_path` matches), relative to the root, sorted.
    pub data_files: Vec<PathBuf>,
    /// The features that became observations, in order.
    pub observation_keys: Vec<String>,
    /// The action feature.
    pub action_key: String,
    /// The reward feature, when the dataset has one.
    pub reward_key: Option<String>,
    /// The termination feature, when the dataset has one.
    pub done_key: Option<String>,
    /// The intervention feature, when the dataset has one.
    pub intervention_key: Option<String>,
    /// Features not read: video and image streams (never decoded) and numeric features that no
    /// key maps.
    pub skipped: Vec<String>,
    /// Things a user should know (no rewards, counts that differ from `info.json`, …).
    pub warnings: Vec<String>,
    /// The frames as D4RL-layout columns: `terminals` from the done flag, `timeouts` on the last
    /// frame of each episode that does not terminate, no `next_observations`, and
    /// `infos/intervention` when the intervention flag is present.
    pub d4rl: D4rlDataset,
}

/// A mapped key: the feature key and its width.
struct Mapped {
    key: String,
    width: usize,
}

/// The features each o2o column reads, checked against `info.json`.
struct Mapping {
    observation: Vec<Mapped>,
    action: Mapped,
    reward: Option<Mapped>,
    done: Option<Mapped>,
    intervention: Option<Mapped>,
}

impl Mapping {
    fn resolve(info: &Info, keys: &LeRobotKeys) -> Result<Self> {
        let observation =
            if keys.observation.is_empty() { vec![DEFAULT_OBSERVATION.to_string()] } else { keys.observation.clone() };
        let mut obs = Vec::new();
        for k in &observation {
            obs.push(lookup(info, k, true, "observation", false)?.ok_or_else(|| missing(info, k, "observation"))?);
        }
        let action_key = keys.action.as_deref().unwrap_or(DEFAULT_ACTION);
        let action =
            lookup(info, action_key, true, "action", false)?.ok_or_else(|| missing(info, action_key, "action"))?;
        let optional = |given: &Option<String>, default: &str, role: &str| match given {
            Some(k) => lookup(info, k, true, role, true)?.map(Some).ok_or_else(|| missing(info, k, role)),
            None => lookup(info, default, false, role, true),
        };
        Ok(Self {
            observation: obs,
            action,
            reward: optional(&keys.reward, DEFAULT_REWARD, "reward")?,
            done: optional(&keys.done, DEFAULT_DONE, "termination flag")?,
            intervention: optional(&keys.intervention, DEFAULT_INTERVENTION, "intervention flag")?,
        })
    }

    fn keys(&self) -> Vec<&str> {
        let mut k: Vec<&str> = self.observation.iter().map(|m| m.key.as_str()).collect();
        k.push(&self.action.key);
        k.extend([&self.reward, &self.done, &self.intervention].into_iter().flatten().map(|m| m.key.as_str()));
        k
    }
}

fn missing(info: &Info, key: &str, role: &str) -> DatasetError {
    let numeric: Vec<&str> = info.features.iter().filter(|(_, f)| f.is_numeric()).map(|(k, _)| k.as_str()).collect();
    DatasetError::MissingKey {
        path: info.path.clone(),
        key: format!("features.{key}"),
        expected: format!("the {role} feature; the numeric features are {numeric:?}"),
    }
}

/// The feature `key` for `role`, checked: numeric, a vector, and one value per frame when
/// `scalar`. `Ok(None)` when absent and not `required`.
fn lookup(info: &Info, key: &str, required: bool, role: &str, scalar: bool) -> Result<Option<Mapped>> {
    let Some(f): Option<&Feature> = info.features.get(key) else {
        return if required { Err(missing(info, key, role)) } else { Ok(None) };
    };
    if !f.is_numeric() {
        return Err(DatasetError::WrongDtype {
            path: info.path.clone(),
            key: format!("features.{key}.dtype"),
            expected: format!(
                "a numeric or bool dtype for the {role}{}",
                if f.is_visual() { " (o2o does not decode video or image features)" } else { "" }
            ),
            found: f.dtype.clone(),
        });
    }
    let width = f.width();
    if f.shape.len() > 1 || (scalar && width != 1) || width == 0 {
        return Err(DatasetError::WrongShape {
            path: info.path.clone(),
            key: format!("features.{key}.shape"),
            expected: if scalar {
                format!("[1]: one value per frame for the {role}")
            } else {
                format!("[n]: a vector for the {role}")
            },
            found: f.shape.clone(),
        });
    }
    Ok(Some(Mapped { key: key.to_string(), width }))
}

/// Frames read from the data files, in file order.
#[derive(Default)]
struct Frames {
    episode: Vec<i64>,
    frame: Vec<i64>,
    observations: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    done: Vec<f32>,
    intervention: Vec<f32>,
    /// `(first row, file)` of each file read.
    files: Vec<(usize, PathBuf)>,
}

impl Frames {
    fn file_of(&self, row: usize) -> PathBuf {
        let i = self.files.partition_point(|(start, _)| *start <= row).saturating_sub(1);
        self.files.get(i).map(|(_, f)| f.clone()).unwrap_or_default()
    }

    fn append(&mut self, t: &Table, m: &Mapping) -> Result<()> {
        let first = self.episode.len();
        let episode = t.i64_column("episode_index")?;
        let frame = if t.has("frame_index") { t.i64_column("frame_index")? } else { (0..t.rows as i64).collect() };
        let obs_width: usize = m.observation.iter().map(|o| o.width).sum();
        let parts = m
            .observation
            .iter()
            .map(|o| Ok((t.finite_f32_rows(&o.key, o.width, first)?, o.width)))
            .collect::<Result<Vec<_>>>()?;
        self.observations.reserve(t.rows * obs_width);
        for row in 0..t.rows {
            for (values, w) in &parts {
                self.observations.extend_from_slice(&values[row * w..(row + 1) * w]);
            }
        }
        self.actions.extend(t.finite_f32_rows(&m.action.key, m.action.width, first)?);
        let flag_or = |mapped: &Option<Mapped>, finite: bool| -> Result<Vec<f32>> {
            match mapped {
                Some(k) if finite => t.finite_f32_rows(&k.key, 1, first),
                Some(k) => Ok(t.f32_rows(&k.key, 1)?.into_iter().map(|v| if v != 0.0 { 1.0 } else { 0.0 }).collect()),
                None => Ok(vec![0.0; t.rows]),
            }
        };
        self.rewards.extend(flag_or(&m.reward, true)?);
        self.done.extend(flag_or(&m.done, false)?);
        self.intervention.extend(flag_or(&m.intervention, false)?);
        self.episode.extend(episode);
        self.frame.extend(frame);
        self.files.push((first, t.path.clone()));
        Ok(())
    }
}

impl LeRobotDataset {
    /// Reads the LeRobotDataset folder `root` (v3.0, v2.1 or v2.0) with the feature mapping
    /// `keys`. Every failure names the file and key.
    pub fn read(root: &Path, keys: &LeRobotKeys) -> Result<Self> {
        let info = Info::read(root)?;
        let mapping = Mapping::resolve(&info, keys)?;
        let (episodes, tasks) = if info.is_v3() {
            (episodes_v3(root, &info)?, tasks_v3(root)?)
        } else {
            (episodes_v2(root, &info)?, tasks_v2(root)?)
        };
        // Every file `data_path` can name, as LeRobot reads every data file: frames are found by
        // their episode_index, so an episode's data/file_index (which lerobot's own v2.1 → v3.0
        // converter can get wrong by one when files roll over) is not trusted.
        let data_files = template_files(root, &info.data_path)?;
        if data_files.is_empty() {
            return Err(DatasetError::MissingFile {
                path: root.join("data"),
                expected: format!("data files matching `data_path` {:?} of meta/info.json", info.data_path),
            });
        }
        let mut frames = Frames::default();
        let wanted = mapping.keys();
        let required: Vec<&str> = ["episode_index"].into_iter().chain(wanted.iter().copied()).collect();
        for rel in &data_files {
            let path = root.join(rel);
            let table = read_table(&path, &required, &["frame_index"])?;
            frames.append(&table, &mapping)?;
        }
        let d4rl = assemble(root, &info, &mapping, &episodes, &frames)?;

        let mapped: Vec<&str> = wanted.clone();
        let skipped = info
            .features
            .iter()
            .filter(|(k, f)| {
                !mapped.contains(&k.as_str()) && (f.is_visual() || !super::IMPLICIT_COLUMNS.contains(&k.as_str()))
            })
            .map(|(k, f)| format!("{k} ({}{:?})", f.dtype, f.shape))
            .collect();
        let mut warnings = Vec::new();
        if mapping.reward.is_none() {
            warnings.push(format!(
                "no `{DEFAULT_REWARD}` feature: every reward is 0 (map another feature with the reward key)"
            ));
        }
        if mapping.done.is_none() {
            warnings
                .push(format!("no `{DEFAULT_DONE}` feature: no frame terminates; every episode ends as a time limit"));
        }
        let early = early_done_count(&episodes, &d4rl);
        if early > 0 {
            warnings.push(format!(
                "{early} frames have the done flag set before their episode's last frame; o2o's episodes end there"
            ));
        }
        if info.total_frames != d4rl.len() || info.total_episodes != episodes.len() {
            warnings.push(format!(
                "meta/info.json says {} episodes and {} frames, the data has {} and {}",
                info.total_episodes,
                info.total_frames,
                episodes.len(),
                d4rl.len()
            ));
        }
        Ok(Self {
            root: root.to_path_buf(),
            tasks,
            episodes,
            data_files,
            observation_keys: mapping.observation.iter().map(|m| m.key.clone()).collect(),
            action_key: mapping.action.key.clone(),
            reward_key: mapping.reward.as_ref().map(|m| m.key.clone()),
            done_key: mapping.done.as_ref().map(|m| m.key.clone()),
            intervention_key: mapping.intervention.as_ref().map(|m| m.key.clone()),
            skipped,
            warnings,
            info,
            d4rl,
        })
    }

    /// Total frames.
    pub fn len(&self) -> usize {
        self.d4rl.len()
    }

    /// Whether the dataset has no frames.
    pub fn is_empty(&self) -> bool {
        self.d4rl.is_empty()
    }
}

fn early_done_count(episodes: &[EpisodeMeta], d: &D4rlDataset) -> usize {
    let mut start = 0;
    let mut n = 0;
    for e in episodes {
        n += d.terminals[start..start + e.length.saturating_sub(1)].iter().filter(|t| **t != 0.0).count();
        start += e.length;
    }
    n
}

/// The frames of each listed episode, in episode order, as D4RL columns.
fn assemble(root: &Path, info: &Info, m: &Mapping, episodes: &[EpisodeMeta], f: &Frames) -> Result<D4rlDataset> {
    // Contiguous runs of one episode index.
    let mut runs: HashMap<i64, (usize, usize)> = HashMap::new();
    let mut start = 0;
    for i in 1..=f.episode.len() {
        if i == f.episode.len() || f.episode[i] != f.episode[start] {
            let ep = f.episode[start];
            if runs.insert(ep, (start, i)).is_some() {
                return Err(DatasetError::BadValue {
                    path: f.file_of(i - 1),
                    key: "episode_index".into(),
                    expected: "the frames of each episode in one contiguous run".into(),
                    found: format!("episode {ep} in two separate runs of rows"),
                });
            }
            start = i;
        }
    }
    let listed: HashMap<i64, &EpisodeMeta> = episodes.iter().map(|e| (e.index, e)).collect();
    if let Some((ep, (s, _))) = runs.iter().find(|(ep, _)| !listed.contains_key(ep)) {
        return Err(DatasetError::BadValue {
            path: f.file_of(*s),
            key: "episode_index".into(),
            expected: "only episodes the episode metadata lists".into(),
            found: format!("frames of episode {ep}"),
        });
    }
    let obs_dim: usize = m.observation.iter().map(|o| o.width).sum();
    let act_dim = m.action.width;
    let mut d = D4rlDataset::empty(root.to_path_buf(), obs_dim, act_dim);
    d.next_observations = None;
    let n = f.episode.len();
    d.observations.reserve(n * obs_dim);
    d.actions.reserve(n * act_dim);
    let mut timeouts = Vec::with_capacity(n);
    let mut intervention = Vec::with_capacity(n);
    for e in episodes {
        let Some(&(s, t)) = runs.get(&e.index) else {
            return Err(DatasetError::BadValue {
                path: root.join(&e.data_file),
                key: "episode_index".into(),
                expected: format!(
                    "{} frames of episode {} (as the episode metadata says) in the data files",
                    e.length, e.index
                ),
                found: "none".into(),
            });
        };
        if t - s != e.length {
            return Err(DatasetError::BadValue {
                path: f.file_of(s),
                key: "episode_index".into(),
                expected: format!("{} frames of episode {} (as the episode metadata says)", e.length, e.index),
                found: format!("{} frames", t - s),
            });
        }
        if let Some(i) = (s + 1..t).find(|&i| f.frame[i] <= f.frame[i - 1]) {
            return Err(DatasetError::BadValue {
                path: f.file_of(i),
                key: "frame_index".into(),
                expected: format!("increasing frame indices within episode {}", e.index),
                found: format!("{} after {}", f.frame[i], f.frame[i - 1]),
            });
        }
        d.observations.extend_from_slice(&f.observations[s * obs_dim..t * obs_dim]);
        d.actions.extend_from_slice(&f.actions[s * act_dim..t * act_dim]);
        d.rewards.extend_from_slice(&f.rewards[s..t]);
        d.terminals.extend_from_slice(&f.done[s..t]);
        intervention.extend_from_slice(&f.intervention[s..t]);
        for i in s..t {
            timeouts.push(if i + 1 == t && f.done[i] == 0.0 { 1.0 } else { 0.0 });
        }
    }
    d.timeouts = Some(timeouts);
    for key in ["observations", "actions", "rewards"] {
        d.dtypes.insert(key.into(), Dtype::Float32);
    }
    for key in ["terminals", "timeouts"] {
        d.dtypes.insert(key.into(), Dtype::Bool);
    }
    if m.intervention.is_some() {
        let n = intervention.len();
        d.infos
            .insert("infos/intervention".into(), Column { shape: vec![n], dtype: Dtype::Float32, data: intervention });
    }
    d.metadata
        .insert("metadata/lerobot_codebase_version".into(), crate::d4rl::MetaValue::Str(info.codebase_version.clone()));
    Ok(d)
}

/// `meta/episodes/chunk-*/file-*.parquet`, sorted (as LeRobot reads them).
fn episodes_v3(root: &Path, info: &Info) -> Result<Vec<EpisodeMeta>> {
    let dir = root.join("meta/episodes");
    let mut files = Vec::new();
    if dir.is_dir() {
        for chunk in read_dir_sorted(&dir)? {
            if chunk.is_dir() {
                files.extend(
                    read_dir_sorted(&chunk)?.into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")),
                );
            }
        }
    }
    if files.is_empty() {
        return Err(DatasetError::MissingFile {
            path: dir,
            expected: "the v3.0 episode metadata, meta/episodes/chunk-*/file-*.parquet".into(),
        });
    }
    let mut out = Vec::new();
    for path in files {
        let t = read_table(&path, &["episode_index", "length", "data/chunk_index", "data/file_index"], &["tasks"])?;
        let index = t.i64_column("episode_index")?;
        let length = t.i64_column("length")?;
        let chunk = t.i64_column("data/chunk_index")?;
        let file = t.i64_column("data/file_index")?;
        let tasks = if t.has("tasks") { t.string_list_column("tasks")? } else { vec![Vec::new(); t.rows] };
        for (i, tasks) in tasks.into_iter().enumerate() {
            let non_negative = |key: &str, v: i64| {
                u64::try_from(v).map_err(|_| DatasetError::BadValue {
                    path: path.clone(),
                    key: key.into(),
                    expected: "a non-negative integer".into(),
                    found: format!("{v} (row {i})"),
                })
            };
            let (c, f) = (non_negative("data/chunk_index", chunk[i])?, non_negative("data/file_index", file[i])?);
            out.push(EpisodeMeta {
                index: index[i],
                length: non_negative("length", length[i])? as usize,
                data_file: info.data_file(&[("chunk_index", c), ("file_index", f)])?,
                tasks,
            });
        }
    }
    sort_unique(out, &root.join("meta/episodes"))
}

/// `meta/episodes.jsonl` (v2.x): one JSON object per line.
fn episodes_v2(root: &Path, info: &Info) -> Result<Vec<EpisodeMeta>> {
    let path = root.join("meta/episodes.jsonl");
    let mut out = Vec::new();
    for (line, v) in
        json_lines(&path, "the v2.x episode list, one {\"episode_index\", \"tasks\", \"length\"} per line")?
    {
        let int = |key: &str| {
            v.get(key).and_then(Value::as_u64).ok_or_else(|| DatasetError::BadValue {
                path: path.clone(),
                key: key.into(),
                expected: "a non-negative integer".into(),
                found: format!("{} (line {line})", v.get(key).map_or("nothing".into(), |x| x.to_string())),
            })
        };
        let index = int("episode_index")?;
        let tasks = v
            .get("tasks")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        out.push(EpisodeMeta {
            index: index as i64,
            length: int("length")? as usize,
            data_file: info
                .data_file(&[("episode_chunk", index / info.chunks_size as u64), ("episode_index", index)])?,
            tasks,
        });
    }
    sort_unique(out, &path)
}

fn sort_unique(mut episodes: Vec<EpisodeMeta>, path: &Path) -> Result<Vec<EpisodeMeta>> {
    episodes.sort_by_key(|e| e.index);
    if let Some(w) = episodes.windows(2).find(|w| w[0].index == w[1].index) {
        return Err(DatasetError::BadValue {
            path: path.into(),
            key: "episode_index".into(),
            expected: "each episode listed once".into(),
            found: format!("episode {} twice", w[0].index),
        });
    }
    Ok(episodes)
}

/// `meta/tasks.parquet`: pandas writes the task strings as the frame's index
/// (`__index_level_0__`), newer writers as a `task` column.
fn tasks_v3(root: &Path) -> Result<Vec<String>> {
    let path = root.join("meta/tasks.parquet");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let t = read_table(&path, &["task_index"], &["task", "__index_level_0__"])?;
    let key = if t.has("task") { "task" } else { "__index_level_0__" };
    if !t.has(key) {
        return Err(DatasetError::MissingKey {
            path,
            key: "task".into(),
            expected: "the task strings, as a `task` column or the pandas index".into(),
        });
    }
    by_index(t.i64_column("task_index")?.into_iter().zip(t.string_column(key)?))
}

/// `meta/tasks.jsonl` (v2.x).
fn tasks_v2(root: &Path) -> Result<Vec<String>> {
    let path = root.join("meta/tasks.jsonl");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let pairs = json_lines(&path, "")?
        .into_iter()
        .filter_map(|(_, v)| Some((v.get("task_index")?.as_i64()?, v.get("task")?.as_str()?.to_string())));
    by_index(pairs)
}

fn by_index(pairs: impl Iterator<Item = (i64, String)>) -> Result<Vec<String>> {
    let map: BTreeMap<i64, String> = pairs.collect();
    Ok(map.into_values().collect())
}

fn json_lines(path: &Path, expected: &str) -> Result<Vec<(usize, Value)>> {
    if !path.is_file() {
        return Err(DatasetError::MissingFile { path: path.into(), expected: expected.into() });
    }
    let text = std::fs::read_to_string(path).map_err(|e| DatasetError::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| (i + 1, v))
                .map_err(|e| DatasetError::BadMetadata { path: path.into(), message: format!("line {}: {e}", i + 1) })
        })
        .collect()
}

/// The files under `root` whose relative path matches the Python format template `template`
/// (`{name}` and `{name:03d}` fields match one or more digits), sorted.
fn template_files(root: &Path, template: &str) -> Result<Vec<PathBuf>> {
    let parts: Vec<&str> = template.split('/').filter(|p| !p.is_empty()).collect();
    let mut found = vec![PathBuf::new()];
    for (depth, part) in parts.iter().enumerate() {
        let last = depth + 1 == parts.len();
        let mut next = Vec::new();
        for rel in &found {
            let dir = root.join(rel);
            if !part.contains('{') {
                let p = rel.join(part);
                if (last && root.join(&p).is_file()) || (!last && root.join(&p).is_dir()) {
                    next.push(p);
                }
                continue;
            }
            if !dir.is_dir() {
                continue;
            }
            for entry in read_dir_sorted(&dir)? {
                let name = entry.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                if (if last { entry.is_file() } else { entry.is_dir() }) && matches_fields(part, &name) {
                    next.push(rel.join(name));
                }
            }
        }
        found = next;
    }
    found.sort();
    Ok(found)
}

/// Whether `name` matches one path component of a format template.
fn matches_fields(pattern: &str, name: &str) -> bool {
    match pattern.find('{') {
        None => pattern == name,
        Some(open) => {
            let Some(close) = pattern[open..].find('}').map(|c| open + c) else { return false };
            let Some(rest) = name.strip_prefix(&pattern[..open]) else { return false };
            let after = &pattern[close + 1..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            (1..=digits).any(|k| matches_fields(after, &rest[k..]))
        }
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v = std::fs::read_dir(dir)
        .map_err(|e| DatasetError::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|e| DatasetError::io(dir, e)))
        .collect::<Result<Vec<_>>>()?;
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_components_match_digit_fields() {
        assert!(matches_fields("file-{file_index:03d}.parquet", "file-012.parquet"));
        assert!(matches_fields("episode_{episode_index:06d}.parquet", "episode_1234567.parquet"));
        assert!(matches_fields("part-{c:01d}{f:01d}.parquet", "part-10.parquet"));
        assert!(!matches_fields("part-{c:01d}{f:01d}.parquet", "part-1.parquet"));
        assert!(!matches_fields("file-{file_index:03d}.parquet", "file-.parquet"));
        assert!(!matches_fields("file-{file_index:03d}.parquet", "file-001.parquet.tmp"));
        assert!(!matches_fields("chunk-{chunk_index:03d}", "chunk-abc"));
    }
}
