//! ImagineBench (formats.md §3) in o2o's HDF5 layout, written by
//! `scripts/imaginebench_convert.py` from the released pickled-numpy files.
//!
//! Layout (also in docs/datasets.md): flat transitions `observations`, `actions`, `rewards`,
//! `next_observations`, `terminals` (1 on each trajectory's last valid step), a `source` flag
//! (0 real, 1 imaginary), `trajectory` and `instruction_id` per row, and
//! `instructions/text` + `instructions/embedding` (one row per distinct sentence). The policy's
//! observation is the env observation followed by its instruction's embedding (ImagineBench's
//! loader concatenates them; for Mujoco-v0 that is 18 + 768 = 786); [`ImagineBenchDataset::transitions`]
//! builds it on request, so the file stores each embedding once.
//!
//! Real and imaginary rows become two [`OfflineBuffer`]s, and
//! [`crate::replay::sample_weighted`] draws a chosen fraction of each batch from the real one
//! (the paper's 1:1, or the released code's proportional-to-size with `real / total`).

use std::path::{Path, PathBuf};

use hdf5_metno::types::VarLenUnicode;

use crate::atomic::write_atomic;
use crate::error::{DatasetError, Result};
use crate::h5util::{self, Dtype};
use crate::mc_returns::{returns_to_go, McConfig};
use crate::replay::OfflineBuffer;
use crate::transitions::Transitions;
use serde::{Deserialize, Serialize};

/// Which rows to take; in a run config (`[dataset] rows`) `real`, `imaginary` or `both`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rows {
    /// Real rollouts only.
    Real,
    /// Imaginary (LLM-generated) rollouts only.
    Imaginary,
    /// Both.
    #[serde(rename = "both")]
    All,
}

impl Rows {
    /// The name a run config gives it (`both` for [`Rows::All`]).
    pub fn name(self) -> &'static str {
        match self {
            Rows::Real => "real",
            Rows::Imaginary => "imaginary",
            Rows::All => "both",
        }
    }
}

/// An ImagineBench dataset in o2o's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagineBenchDataset {
    /// The file it was read from.
    pub source: PathBuf,
    /// Env observation size (without the instruction embedding).
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// Instruction embedding size (0 when the file has none).
    pub embed_dim: usize,
    /// `[N * obs_dim]`.
    pub observations: Vec<f32>,
    /// `[N * act_dim]`.
    pub actions: Vec<f32>,
    /// `[N]`.
    pub rewards: Vec<f32>,
    /// `[N * obs_dim]`.
    pub next_observations: Vec<f32>,
    /// `[N]`, 1.0 on each trajectory's last step.
    pub terminals: Vec<f32>,
    /// `[N]`, true for imaginary rows.
    pub imaginary: Vec<bool>,
    /// `[N]`, trajectory index within its source file.
    pub trajectory: Vec<u32>,
    /// `[N]`, row of `instructions` / `embeddings`.
    pub instruction_id: Vec<usize>,
    /// Distinct instruction sentences.
    pub instructions: Vec<String>,
    /// `[K * embed_dim]` instruction embeddings.
    pub embeddings: Vec<f32>,
    /// `metadata/<name>` strings (how the file was made; e.g. `o2o dataset make-benchmark`
    /// says there that its imaginary rows are not LLM-generated).
    pub metadata: Vec<(String, String)>,
}

impl ImagineBenchDataset {
    /// Reads and validates a converted file.
    pub fn read(path: &Path) -> Result<Self> {
        let file = h5util::open(path)?;
        let root: &hdf5_metno::Group = &file;
        let keys = [
            "observations",
            "actions",
            "rewards",
            "next_observations",
            "terminals",
            "source",
            "trajectory",
            "instruction_id",
            "instructions/text",
            "instructions/embedding",
        ];
        for key in keys {
            if !h5util::has(root, key) {
                return Err(DatasetError::MissingKey {
                    path: path.into(),
                    key: key.into(),
                    expected: "an o2o ImagineBench file (run scripts/imaginebench_convert.py)".into(),
                });
            }
        }
        let read = |k: &str| h5util::read_numeric(path, root, k);
        let obs = read("observations")?;
        let act = read("actions")?;
        let next = read("next_observations")?;
        let emb = read("instructions/embedding")?;
        let wide = |k: &str, s: &[usize]| -> Result<(usize, usize)> {
            match s {
                [n, d] => Ok((*n, *d)),
                _ => Err(DatasetError::WrongShape {
                    path: path.into(),
                    key: k.into(),
                    expected: "rank 2: (N, dim)".into(),
                    found: s.to_vec(),
                }),
            }
        };
        let (n, obs_dim) = wide("observations", &obs.shape)?;
        let (na, act_dim) = wide("actions", &act.shape)?;
        let (k_emb, embed_dim) = wide("instructions/embedding", &emb.shape)?;
        if next.shape != obs.shape {
            return Err(DatasetError::WrongShape {
                path: path.into(),
                key: "next_observations".into(),
                expected: format!("({n}, {obs_dim}) like observations"),
                found: next.shape,
            });
        }
        let len_check = |key: &str, found: usize| {
            if found == n {
                Ok(())
            } else {
                Err(DatasetError::LengthMismatch {
                    path: path.into(),
                    key: key.into(),
                    reference: "observations".into(),
                    expected: n,
                    found,
                })
            }
        };
        len_check("actions", na)?;
        let mut cols = Vec::new();
        for key in ["rewards", "terminals", "source", "trajectory", "instruction_id"] {
            let c = read(key)?;
            len_check(key, c.shape.first().copied().unwrap_or(0))?;
            cols.push(c.data);
        }
        let [rewards, terminals, source, trajectory, iid]: [Vec<f32>; 5] =
            cols.try_into().map_err(|_| DatasetError::Invalid("internal: column count".into()))?;
        for (key, data, w) in [
            ("observations", &obs.data, obs_dim),
            ("actions", &act.data, act_dim),
            ("rewards", &rewards, 1),
            ("next_observations", &next.data, obs_dim),
            ("instructions/embedding", &emb.data, embed_dim),
        ] {
            if let Some((row, column, value)) = h5util::first_non_finite(data, w) {
                return Err(DatasetError::NonFinite { path: path.into(), key: key.into(), row, column, value });
            }
        }
        let text_ds = root.dataset("instructions/text").map_err(|e| h5util::h5err(path, "instructions/text", e))?;
        let texts: Vec<VarLenUnicode> = text_ds.read_raw().map_err(|e| h5util::h5err(path, "instructions/text", e))?;
        let instructions: Vec<String> = texts.iter().map(|s| s.as_str().to_string()).collect();
        if instructions.len() != k_emb {
            return Err(DatasetError::LengthMismatch {
                path: path.into(),
                key: "instructions/embedding".into(),
                reference: "instructions/text".into(),
                expected: instructions.len(),
                found: k_emb,
            });
        }
        let instruction_id: Vec<usize> = iid.iter().map(|&v| v as usize).collect();
        if let Some((row, &bad)) = instruction_id.iter().enumerate().find(|(_, &i)| i >= k_emb) {
            return Err(DatasetError::WrongShape {
                path: path.into(),
                key: "instruction_id".into(),
                expected: format!("values < {k_emb} (the number of instructions); row {row}"),
                found: vec![bad],
            });
        }
        let mut metadata = Vec::new();
        for key in h5util::walk_datasets(path, root)?.into_iter().filter(|k| k.starts_with("metadata/")) {
            if let Ok(v) = h5util::read_string(path, root, &key) {
                metadata.push((key.trim_start_matches("metadata/").to_string(), v));
            }
        }
        Ok(Self {
            metadata,
            source: path.to_path_buf(),
            obs_dim,
            act_dim,
            embed_dim,
            observations: obs.data,
            actions: act.data,
            rewards,
            next_observations: next.data,
            terminals: terminals.iter().map(|&v| (v != 0.0) as u8 as f32).collect(),
            imaginary: source.iter().map(|&v| v != 0.0).collect(),
            trajectory: trajectory.iter().map(|&v| v as u32).collect(),
            instruction_id,
            instructions,
            embeddings: emb.data,
        })
    }

    /// Write the file in the layout [`ImagineBenchDataset::read`] reads (atomically; the
    /// `metadata` pairs as `metadata/<name>` strings).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, |tmp| {
            let file = h5util::create(tmp)?;
            let n = self.len();
            let col = |key: &str, shape: &[usize], dtype: Dtype, data: &[f32]| {
                h5util::write_column_gzip(tmp, &file, key, shape, dtype, data, Some(4))
            };
            col("observations", &[n, self.obs_dim], Dtype::Float32, &self.observations)?;
            col("actions", &[n, self.act_dim], Dtype::Float32, &self.actions)?;
            col("rewards", &[n], Dtype::Float32, &self.rewards)?;
            col("next_observations", &[n, self.obs_dim], Dtype::Float32, &self.next_observations)?;
            col("terminals", &[n], Dtype::Bool, &self.terminals)?;
            let source: Vec<u8> = self.imaginary.iter().map(|&b| b as u8).collect();
            h5util::write_typed_gzip(tmp, &file, "source", &[n], &source, Some(4))?;
            let traj: Vec<i32> = self.trajectory.iter().map(|&t| t as i32).collect();
            h5util::write_typed_gzip(tmp, &file, "trajectory", &[n], &traj, Some(4))?;
            let iid: Vec<i32> = self.instruction_id.iter().map(|&i| i as i32).collect();
            h5util::write_typed_gzip(tmp, &file, "instruction_id", &[n], &iid, Some(4))?;
            let texts = self
                .instructions
                .iter()
                .map(|t| {
                    t.parse::<VarLenUnicode>()
                        .map_err(|e| DatasetError::Invalid(format!("instruction {t:?} is not storable in HDF5: {e}")))
                })
                .collect::<Result<Vec<_>>>()?;
            h5util::write_typed(tmp, &file, "instructions/text", &[texts.len()], &texts)?;
            h5util::write_column(
                tmp,
                &file,
                "instructions/embedding",
                &[self.instructions.len(), self.embed_dim],
                Dtype::Float32,
                &self.embeddings,
            )?;
            for (k, v) in &self.metadata {
                h5util::write_string(tmp, &file, &format!("metadata/{k}"), v)?;
            }
            file.close().map_err(|e| h5util::h5err(tmp, "/", e))
        })
    }

    /// Replace the instruction embeddings (`[K * dim]`, one row per `instructions` entry), e.g.
    /// with the vectors of the encoder the run's env uses, so data and env agree.
    pub fn set_embeddings(&mut self, dim: usize, embeddings: Vec<f32>) -> Result<()> {
        if embeddings.len() != self.instructions.len() * dim {
            return Err(DatasetError::Dimension {
                what: format!(
                    "{}: instruction embeddings ({} sentences × {dim})",
                    self.source.display(),
                    self.instructions.len()
                ),
                expected: self.instructions.len() * dim,
                found: embeddings.len(),
            });
        }
        self.embed_dim = dim;
        self.embeddings = embeddings;
        Ok(())
    }

    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether there are no transitions.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Number of imaginary transitions.
    pub fn n_imaginary(&self) -> usize {
        self.imaginary.iter().filter(|&&b| b).count()
    }

    /// Flat transitions of `rows`. With `with_instruction`, observations and next observations
    /// are followed by the row's instruction embedding (the policy's input). Each trajectory's
    /// last step is terminal; MC returns, when asked, are per trajectory.
    pub fn transitions(&self, rows: Rows, with_instruction: bool, mc: Option<McConfig>) -> Result<Transitions> {
        let (od, ad, ed) = (self.obs_dim, self.act_dim, if with_instruction { self.embed_dim } else { 0 });
        let mut t = Transitions { obs_dim: od + ed, act_dim: ad, ..Default::default() };
        for i in 0..self.len() {
            let keep = match rows {
                Rows::Real => !self.imaginary[i],
                Rows::Imaginary => self.imaginary[i],
                Rows::All => true,
            };
            if !keep {
                continue;
            }
            let e = &self.embeddings[self.instruction_id[i] * self.embed_dim..][..ed];
            t.observations.extend_from_slice(&self.observations[i * od..(i + 1) * od]);
            t.observations.extend_from_slice(e);
            t.next_observations.extend_from_slice(&self.next_observations[i * od..(i + 1) * od]);
            t.next_observations.extend_from_slice(e);
            t.actions.extend_from_slice(&self.actions[i * ad..(i + 1) * ad]);
            t.rewards.push(self.rewards[i]);
            t.terminals.push(self.terminals[i]);
            t.episode_ends.push(self.terminals[i]);
        }
        if let Some(cfg) = mc {
            t.mc_returns = Some(returns_to_go(&t.rewards, &t.episode_ends, &cfg)?);
        }
        t.validate()?;
        Ok(t)
    }

    /// `(real, imaginary)` offline buffers, for [`crate::replay::sample_weighted`].
    pub fn buffers(&self, with_instruction: bool, mc: Option<McConfig>) -> Result<(OfflineBuffer, OfflineBuffer)> {
        Ok((
            OfflineBuffer::new(self.transitions(Rows::Real, with_instruction, mc)?)?,
            OfflineBuffer::new(self.transitions(Rows::Imaginary, with_instruction, mc)?)?,
        ))
    }
}

/// ImagineBench's `{sentence → vector}` table from a converted file: a dataset file, or a
/// table-only file (`scripts/imaginebench_convert.py --encodings mujoco_encode.npy --out
/// table.hdf5`); both keep it as `instructions/text` + `instructions/embedding`. Returns
/// `(sentences, dim, [K * dim] vectors)`.
pub fn read_instruction_table(path: &Path) -> Result<(Vec<String>, usize, Vec<f32>)> {
    let file = h5util::open(path)?;
    let root: &hdf5_metno::Group = &file;
    for key in ["instructions/text", "instructions/embedding"] {
        if !h5util::has(root, key) {
            return Err(DatasetError::MissingKey {
                path: path.into(),
                key: key.into(),
                expected: "an instruction table (scripts/imaginebench_convert.py --encodings …)".into(),
            });
        }
    }
    let emb = h5util::read_numeric(path, root, "instructions/embedding")?;
    let (k, dim) = match emb.shape[..] {
        [k, d] => (k, d),
        _ => {
            return Err(DatasetError::WrongShape {
                path: path.into(),
                key: "instructions/embedding".into(),
                expected: "rank 2: (K, dim)".into(),
                found: emb.shape.clone(),
            })
        }
    };
    let ds = root.dataset("instructions/text").map_err(|e| h5util::h5err(path, "instructions/text", e))?;
    let texts: Vec<VarLenUnicode> = ds.read_raw().map_err(|e| h5util::h5err(path, "instructions/text", e))?;
    if texts.len() != k {
        return Err(DatasetError::LengthMismatch {
            path: path.into(),
            key: "instructions/embedding".into(),
            reference: "instructions/text".into(),
            expected: texts.len(),
            found: k,
        });
    }
    if let Some((row, column, value)) = h5util::first_non_finite(&emb.data, dim) {
        return Err(DatasetError::NonFinite {
            path: path.into(),
            key: "instructions/embedding".into(),
            row,
            column,
            value,
        });
    }
    Ok((texts.iter().map(|s| s.as_str().to_string()).collect(), dim, emb.data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trajectories (one real of 2 steps, one imaginary of 1), written and read back.
    pub(crate) fn tiny() -> ImagineBenchDataset {
        ImagineBenchDataset {
            source: PathBuf::from("tiny"),
            obs_dim: 2,
            act_dim: 1,
            embed_dim: 0,
            observations: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            actions: vec![0.5, -0.5, 1.0],
            rewards: vec![1.0, 2.0, 3.0],
            next_observations: vec![2.0, 3.0, 2.0, 3.0, 6.0, 7.0],
            terminals: vec![0.0, 1.0, 1.0],
            imaginary: vec![false, false, true],
            trajectory: vec![0, 0, 0],
            instruction_id: vec![0, 0, 1],
            instructions: vec!["Run forward.".into(), "Move forward faster.".into()],
            embeddings: vec![],
            metadata: vec![("imaginary_source".into(), "a test".into())],
        }
    }

    #[test]
    fn write_read_round_trip_and_embeddings_follow_the_instruction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ib.hdf5");
        let mut ds = tiny();
        ds.set_embeddings(2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        assert!(ds.set_embeddings(3, vec![0.0; 4]).is_err());
        ds.write(&path).unwrap();
        let back = ImagineBenchDataset::read(&path).unwrap();
        assert_eq!(back.source, path);
        assert_eq!(ImagineBenchDataset { source: ds.source.clone(), ..back.clone() }, ds);
        let t = back.transitions(Rows::All, true, None).unwrap();
        assert_eq!(t.obs_dim, 4);
        assert_eq!(&t.observations[8..12], &[4.0, 5.0, 0.0, 1.0], "row 2 is followed by instruction 1's vector");
        assert_eq!(back.transitions(Rows::Real, true, None).unwrap().len(), 2);
        assert_eq!(back.transitions(Rows::Imaginary, false, None).unwrap().rewards, vec![3.0]);
        let (texts, dim, v) = read_instruction_table(&path).unwrap();
        assert_eq!((texts.len(), dim, v.len()), (2, 2, 4));
    }
}
