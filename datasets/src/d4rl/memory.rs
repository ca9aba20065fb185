//! D4RL datasets built in memory: transitions a program already holds (a robot's own logs, a
//! simulator's rollouts), checked as strictly as a file is, and a content hash that identifies
//! them in a run's manifest the way a file's sha256 does.

use super::read::D4rlDataset;
use crate::error::{DatasetError, Result};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Row-major columns of a dataset, as a program holds them (`N` rows).
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// `[N * obs_dim]`.
    pub observations: Vec<f32>,
    /// `[N * act_dim]`, in the env's own units.
    pub actions: Vec<f32>,
    /// `[N]`.
    pub rewards: Vec<f32>,
    /// `[N]`: true where the episode really ended (no bootstrapping).
    pub terminals: Vec<bool>,
    /// `[N]`: true where a time limit cut the episode.
    pub timeouts: Vec<bool>,
    /// `[N * obs_dim]`: the true next states; `None` takes them from the following row.
    pub next_observations: Option<Vec<f32>>,
}

/// Where an in-memory dataset's errors say they come from.
pub const IN_MEMORY: &str = "(in-memory dataset)";

impl D4rlDataset {
    /// A dataset from columns, with the checks [`D4rlDataset::read`] makes on a file: every
    /// column has `N` rows of the right width, and every value is finite.
    pub fn from_columns(c: Columns) -> Result<Self> {
        let path = PathBuf::from(IN_MEMORY);
        if c.obs_dim == 0 || c.act_dim == 0 {
            return Err(DatasetError::Invalid(format!(
                "{IN_MEMORY}: obs_dim and act_dim must be at least 1, found {} and {}",
                c.obs_dim, c.act_dim
            )));
        }
        let n = c.rewards.len();
        let rows = |key: &str, len: usize, width: usize| -> Result<()> {
            if len % width != 0 || len / width != n {
                return Err(DatasetError::WrongShape {
                    path: path.clone(),
                    key: key.into(),
                    expected: format!("({n}, {width}): one row per reward, {width} values each"),
                    found: vec![len / width, len % width],
                });
            }
            Ok(())
        };
        rows("observations", c.observations.len(), c.obs_dim)?;
        rows("actions", c.actions.len(), c.act_dim)?;
        if let Some(next) = &c.next_observations {
            rows("next_observations", next.len(), c.obs_dim)?;
        }
        for (key, len) in [("terminals", c.terminals.len()), ("timeouts", c.timeouts.len())] {
            if len != n {
                return Err(DatasetError::LengthMismatch {
                    path: path.clone(),
                    key: key.into(),
                    reference: "rewards".into(),
                    expected: n,
                    found: len,
                });
            }
        }
        let finite = |key: &str, values: &[f32], width: usize| -> Result<()> {
            match values.iter().position(|v| !v.is_finite()) {
                None => Ok(()),
                Some(i) => Err(DatasetError::NonFinite {
                    path: path.clone(),
                    key: key.into(),
                    row: i / width,
                    column: i % width,
                    value: values[i] as f64,
                }),
            }
        };
        finite("observations", &c.observations, c.obs_dim)?;
        finite("actions", &c.actions, c.act_dim)?;
        finite("rewards", &c.rewards, 1)?;
        if let Some(next) = &c.next_observations {
            finite("next_observations", next, c.obs_dim)?;
        }
        let flags = |v: Vec<bool>| v.into_iter().map(|b| if b { 1.0 } else { 0.0 }).collect::<Vec<f32>>();
        let mut ds = D4rlDataset::empty(path, c.obs_dim, c.act_dim);
        ds.observations = c.observations;
        ds.actions = c.actions;
        ds.rewards = c.rewards;
        ds.terminals = flags(c.terminals);
        ds.timeouts = Some(flags(c.timeouts));
        ds.next_observations = c.next_observations;
        Ok(ds)
    }

    /// sha256 of the dataset's contents (sizes and the main columns, in a fixed order), so a
    /// dataset handed over in memory is identified in a manifest as a file is by its bytes.
    pub fn content_sha256(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"o2o-d4rl-columns-v1");
        h.update((self.obs_dim as u64).to_le_bytes());
        h.update((self.act_dim as u64).to_le_bytes());
        let mut column = |name: &str, values: Option<&[f32]>| {
            h.update(name.as_bytes());
            match values {
                None => h.update([0u8]),
                Some(v) => {
                    h.update([1u8]);
                    h.update((v.len() as u64).to_le_bytes());
                    for x in v {
                        h.update(x.to_le_bytes());
                    }
                }
            }
        };
        column("observations", Some(&self.observations));
        column("actions", Some(&self.actions));
        column("rewards", Some(&self.rewards));
        column("terminals", Some(&self.terminals));
        column("timeouts", self.timeouts.as_deref());
        column("next_observations", self.next_observations.as_deref());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(n: usize) -> Columns {
        Columns {
            obs_dim: 2,
            act_dim: 1,
            observations: (0..2 * n).map(|i| i as f32).collect(),
            actions: vec![0.5; n],
            rewards: vec![1.0; n],
            terminals: (0..n).map(|i| i == n - 1).collect(),
            timeouts: vec![false; n],
            next_observations: None,
        }
    }

    #[test]
    fn columns_become_a_dataset_with_flags_and_episodes() {
        let ds = D4rlDataset::from_columns(columns(4)).unwrap();
        assert_eq!(ds.len(), 4);
        assert_eq!(ds.terminals, vec![0.0, 0.0, 0.0, 1.0]);
        assert_eq!(ds.episodes(None).len(), 1);
        assert_eq!(ds.obs(1), &[2.0, 3.0]);
    }

    #[test]
    fn bad_columns_are_refused_with_the_key() {
        let mut c = columns(3);
        c.actions.push(0.0);
        let e = D4rlDataset::from_columns(c).unwrap_err().to_string();
        assert!(e.contains("`actions`") && e.contains("(3, 1)"), "{e}");
        let mut c = columns(3);
        c.timeouts.pop();
        let e = D4rlDataset::from_columns(c).unwrap_err().to_string();
        assert!(e.contains("`timeouts` has 2 rows, expected 3"), "{e}");
        let mut c = columns(3);
        c.observations[3] = f32::NAN;
        let e = D4rlDataset::from_columns(c).unwrap_err().to_string();
        assert!(e.contains("`observations`") && e.contains("row 1, column 1"), "{e}");
    }

    #[test]
    fn content_hash_follows_the_values() {
        let a = D4rlDataset::from_columns(columns(3)).unwrap();
        let mut c = columns(3);
        assert_eq!(a.content_sha256(), D4rlDataset::from_columns(c.clone()).unwrap().content_sha256());
        c.rewards[2] = 1.5;
        assert_ne!(a.content_sha256(), D4rlDataset::from_columns(c).unwrap().content_sha256());
        assert_eq!(a.content_sha256().len(), 64);
    }
}
