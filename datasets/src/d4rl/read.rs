//! The D4RL HDF5 reader (formats.md §1): every gym-mujoco, AntMaze, Adroit and Kitchen variant.
//!
//! Accepts float32 or float64 floats, bool (HDF5 enum) or float flags, `rewards`/`terminals`
//! shaped `(N,)` or `(N, 1)`, files without `next_observations` (AntMaze) or without `timeouts`
//! (Kitchen), every `infos/*` array and `metadata/*` value (scalars, strings, policy weights).
//! Validation is strict and each failure is a typed error naming the file, key, expected and
//! found: missing key, wrong rank or width, keys of different lengths, NaN or infinity.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{DatasetError, Result};
use crate::h5util::{self, Column, Dtype};

/// A `metadata/*` value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// A string scalar (e.g. `metadata/algorithm`).
    Str(String),
    /// A numeric scalar or array (e.g. `metadata/iteration`, policy weights).
    Array(Column),
}

/// One episode: rows `rows` of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    /// Row range in the file.
    pub rows: Range<usize>,
    /// Ended by a true termination (`terminals` on its last row).
    pub terminated: bool,
    /// Ended by a time limit (`timeouts`, or the step count when the file has no `timeouts`).
    pub truncated: bool,
}

/// A D4RL dataset in memory: columns as `f32`, plus the stored dtypes so the writer can write
/// the same file back.
#[derive(Debug, Clone, PartialEq)]
pub struct D4rlDataset {
    /// Where it was read from (for messages).
    pub source: PathBuf,
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// `[N * obs_dim]`.
    pub observations: Vec<f32>,
    /// `[N * act_dim]`.
    pub actions: Vec<f32>,
    /// `[N]`.
    pub rewards: Vec<f32>,
    /// `[N]`, 1.0 on a true termination.
    pub terminals: Vec<f32>,
    /// `[N]`, 1.0 on a time-limit end; `None` when the file has no `timeouts` (Kitchen).
    pub timeouts: Option<Vec<f32>>,
    /// `[N * obs_dim]` true next states; `None` when absent (AntMaze).
    pub next_observations: Option<Vec<f32>>,
    /// Every `infos*` array, keyed by its path (`infos/qpos`, or `infos` for Kitchen).
    pub infos: BTreeMap<String, Column>,
    /// Every `metadata/*` value, keyed by its path.
    pub metadata: BTreeMap<String, MetaValue>,
    /// Stored dtype of each main key (`observations`, `terminals`, …).
    pub dtypes: BTreeMap<String, Dtype>,
}

/// The keys every D4RL file has.
pub const REQUIRED_KEYS: [&str; 4] = ["observations", "actions", "rewards", "terminals"];

impl D4rlDataset {
    /// A dataset with no rows yet, with `timeouts` and `next_observations` columns, to be
    /// filled step by step (a run's recorder, scripted controllers in tests) and written.
    pub fn empty(source: PathBuf, obs_dim: usize, act_dim: usize) -> Self {
        Self {
            source,
            obs_dim,
            act_dim,
            observations: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            terminals: Vec::new(),
            timeouts: Some(Vec::new()),
            next_observations: Some(Vec::new()),
            infos: BTreeMap::new(),
            metadata: BTreeMap::new(),
            dtypes: BTreeMap::new(),
        }
    }

    /// Reads and validates a D4RL-format HDF5 file.
    pub fn read(path: &Path) -> Result<Self> {
        let file = h5util::open(path)?;
        let root: &hdf5_metno::Group = &file;
        for key in REQUIRED_KEYS {
            if !h5util::has(root, key) {
                return Err(DatasetError::MissingKey {
                    path: path.into(),
                    key: key.into(),
                    expected: "a D4RL dataset (observations, actions, rewards, terminals)".into(),
                });
            }
        }
        // Read every main key; NaN/∞ scans run on a helper thread while HDF5 reads the next key.
        let has_timeouts = h5util::has(root, "timeouts");
        let has_next = h5util::has(root, "next_observations");
        let mut keys = vec!["observations", "actions", "rewards", "terminals"];
        keys.extend(has_timeouts.then_some("timeouts"));
        keys.extend(has_next.then_some("next_observations"));
        let mut scanned = h5util::read_numeric_scanned(path, root, &keys)?.into_iter();
        let mut dtypes = BTreeMap::new();
        let mut bad_values = Vec::new();
        let mut take = |key: &str, float: bool| -> Result<Column> {
            let (c, bad) = scanned.next().ok_or_else(|| {
                DatasetError::Invalid(format!("{}: internal: key `{key}` was not read", path.display()))
            })?;
            if float && !matches!(c.dtype, Dtype::Float32 | Dtype::Float64) {
                return Err(DatasetError::WrongDtype {
                    path: path.into(),
                    key: key.into(),
                    expected: "float32 or float64".into(),
                    found: c.dtype.to_string(),
                });
            }
            if let Some((row, column, value)) = bad {
                bad_values.push(DatasetError::NonFinite { path: path.into(), key: key.into(), row, column, value });
            }
            dtypes.insert(key.to_string(), c.dtype);
            Ok(c)
        };
        let obs = take("observations", true)?;
        let act = take("actions", true)?;
        let rew = take("rewards", true)?;
        let term = take("terminals", false)?;
        let timeouts = if has_timeouts { Some(take("timeouts", false)?) } else { None };
        let next = if has_next { Some(take("next_observations", true)?) } else { None };

        let n = rank2(path, "observations", &obs.shape)?.0;
        let obs_dim = obs.shape[1];
        let (na, act_dim) = rank2(path, "actions", &act.shape)?;
        check_len(path, "actions", n, na)?;
        check_len(path, "rewards", n, rank1(path, "rewards", &rew.shape)?)?;
        check_len(path, "terminals", n, rank1(path, "terminals", &term.shape)?)?;
        if let Some(t) = &timeouts {
            check_len(path, "timeouts", n, rank1(path, "timeouts", &t.shape)?)?;
        }
        if let Some(c) = &next {
            if c.shape.len() != 2 || c.shape[1] != obs_dim {
                return Err(DatasetError::WrongShape {
                    path: path.into(),
                    key: "next_observations".into(),
                    expected: format!("(N, {obs_dim}) like observations"),
                    found: c.shape.clone(),
                });
            }
            check_len(path, "next_observations", n, c.shape[0])?;
        }
        // Shapes first, then values: report the first NaN/∞ in key order.
        if let Some(e) = bad_values.into_iter().next() {
            return Err(e);
        }

        let mut infos = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for key in h5util::walk_datasets(path, root)? {
            if key == "infos" || key.starts_with("infos/") {
                let c = h5util::read_numeric(path, root, &key)?;
                if c.shape.first() != Some(&n) {
                    return Err(DatasetError::LengthMismatch {
                        path: path.into(),
                        key,
                        reference: "observations".into(),
                        expected: n,
                        found: c.shape.first().copied().unwrap_or(0),
                    });
                }
                infos.insert(key, c);
            } else if key.starts_with("metadata/") {
                let ds = root.dataset(&key).map_err(|e| h5util::h5err(path, &key, e))?;
                let value = match h5util::dtype_of(path, &key, &ds)? {
                    Dtype::Str => MetaValue::Str(h5util::read_string(path, root, &key)?),
                    Dtype::Other => continue,
                    _ => MetaValue::Array(h5util::read_numeric(path, root, &key)?),
                };
                metadata.insert(key, value);
            }
        }
        let flag = |c: Column| c.data.into_iter().map(|v| if v != 0.0 { 1.0 } else { 0.0 }).collect::<Vec<f32>>();
        Ok(Self {
            source: path.to_path_buf(),
            obs_dim,
            act_dim,
            observations: obs.data,
            actions: act.data,
            rewards: rew.data,
            terminals: flag(term),
            timeouts: timeouts.map(flag),
            next_observations: next.map(|c| c.data),
            infos,
            metadata,
            dtypes,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether the file has no rows.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Row `i` of `observations`.
    pub fn obs(&self, i: usize) -> &[f32] {
        &self.observations[i * self.obs_dim..(i + 1) * self.obs_dim]
    }

    /// Splits the rows into episodes, as D4RL's `sequence_dataset` does: an episode ends on a
    /// row with `terminals` or `timeouts`; a file without `timeouts` ends episodes after
    /// `max_episode_steps` rows (when given). Unlike `sequence_dataset`, trailing rows with no
    /// flag are returned as a last episode with neither flag set.
    pub fn episodes(&self, max_episode_steps: Option<usize>) -> Vec<Episode> {
        let mut out = Vec::new();
        let mut start = 0;
        for i in 0..self.len() {
            let terminated = self.terminals[i] != 0.0;
            let truncated = match &self.timeouts {
                Some(t) => t[i] != 0.0,
                None => max_episode_steps.is_some_and(|m| i + 1 - start >= m),
            };
            if terminated || truncated {
                out.push(Episode { rows: start..i + 1, terminated, truncated: truncated && !terminated });
                start = i + 1;
            }
        }
        if start < self.len() {
            out.push(Episode { rows: start..self.len(), terminated: false, truncated: false });
        }
        out
    }

    /// Undiscounted return of each episode.
    pub fn episode_returns(&self, max_episode_steps: Option<usize>) -> Vec<f64> {
        self.episodes(max_episode_steps)
            .iter()
            .map(|e| self.rewards[e.rows.clone()].iter().map(|&r| r as f64).sum())
            .collect()
    }

    /// Checks that observations and actions fit an env with `obs_dim` / `act_dim`.
    pub fn check_env(&self, env: &str, obs_dim: usize, act_dim: usize) -> Result<()> {
        for (key, expected, found) in [("observations", obs_dim, self.obs_dim), ("actions", act_dim, self.act_dim)] {
            if expected != found {
                return Err(DatasetError::EnvMismatch {
                    path: self.source.clone(),
                    key: key.into(),
                    env: env.into(),
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Actions outside an env's action box `[low, high]` (which training clips to the box): for
    /// each dimension with any, the fraction of rows outside and the range found. Empty when
    /// every action fits.
    pub fn action_range_warnings(&self, low: &[f32], high: &[f32]) -> Vec<String> {
        let n = self.len();
        if n == 0 || low.len() != self.act_dim || high.len() != self.act_dim {
            return Vec::new();
        }
        let mut w = Vec::new();
        for j in 0..self.act_dim {
            let col = (0..n).map(|i| self.actions[i * self.act_dim + j]);
            let (mut outside, mut lo, mut hi) = (0usize, f32::INFINITY, f32::NEG_INFINITY);
            for a in col {
                outside += usize::from(a < low[j] || a > high[j]);
                lo = lo.min(a);
                hi = hi.max(a);
            }
            if outside > 0 {
                w.push(format!(
                    "actions[:, {j}]: {:.1}% of rows ({outside} of {n}) lie outside the env's action range [{}, {}] (found [{lo}, {hi}]); training clips them to the range",
                    100.0 * outside as f64 / n as f64,
                    low[j],
                    high[j]
                ));
            }
        }
        w
    }

    /// Data-quality warnings that are not errors (e.g. an unflagged trailing episode, the
    /// timeout-and-terminal overlap, constant columns like Ant's zero contact forces).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.is_empty() {
            w.push("the dataset has 0 rows: nothing to train on".into());
            return w;
        }
        let eps = self.episodes(None);
        if let Some(last) = eps.last() {
            if !last.terminated && !last.truncated {
                w.push(format!("the last {} rows end with neither `terminals` nor `timeouts` (a partial episode; D4RL's sequence_dataset drops it)", last.rows.len()));
            }
        }
        if self.timeouts.is_none() {
            w.push(
                "no `timeouts` key: episode ends are only known from terminals (and the env's max_episode_steps)"
                    .into(),
            );
        }
        if self.next_observations.is_none() {
            w.push("no `next_observations` key: next states are taken from the following row, so an episode's last transition has no true s'".into());
        }
        if let Some(t) = &self.timeouts {
            let both = t.iter().zip(&self.terminals).filter(|(a, b)| **a != 0.0 && **b != 0.0).count();
            if both > 0 {
                w.push(format!("{both} rows have both `terminals` and `timeouts` set"));
            }
        }
        let zero_cols = (0..self.obs_dim)
            .filter(|&j| (0..self.len()).all(|i| self.observations[i * self.obs_dim + j] == 0.0))
            .count();
        if zero_cols > 0 && !self.is_empty() {
            w.push(format!(
                "{zero_cols} of {} observation columns are all zero (e.g. D4RL Ant's contact forces)",
                self.obs_dim
            ));
        }
        w
    }
}

fn rank2(path: &Path, key: &str, shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() != 2 {
        return Err(DatasetError::WrongShape {
            path: path.into(),
            key: key.into(),
            expected: "rank 2: (N, dim)".into(),
            found: shape.to_vec(),
        });
    }
    Ok((shape[0], shape[1]))
}

/// `(N,)` or `(N, 1)` (squeezed, as D4RL does).
fn rank1(path: &Path, key: &str, shape: &[usize]) -> Result<usize> {
    match shape {
        [n] | [n, 1] => Ok(*n),
        _ => Err(DatasetError::WrongShape {
            path: path.into(),
            key: key.into(),
            expected: "rank 1: (N,) or (N, 1)".into(),
            found: shape.to_vec(),
        }),
    }
}

fn check_len(path: &Path, key: &str, expected: usize, found: usize) -> Result<()> {
    if expected != found {
        return Err(DatasetError::LengthMismatch {
            path: path.into(),
            key: key.into(),
            reference: "observations".into(),
            expected,
            found,
        });
    }
    Ok(())
}
