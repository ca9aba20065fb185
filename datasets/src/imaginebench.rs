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

use crate::error::{DatasetError, Result};
use crate::h5util;
use crate::mc_returns::{returns_to_go, McConfig};
use crate::replay::OfflineBuffer;
use crate::transitions::Transitions;

/// Which rows to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Real rollouts only.
    Real,
    /// Imaginary (LLM-generated) rollouts only.
    Imaginary,
    /// Both.
    All,
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
}

impl ImagineBenchDataset {
    /// Reads and validates a converted file.
    pub fn read(path: &Path) -> Result<Self> {
        let file = h5util::open(path)?;
        let root: &hdf5_metno::Group = &file;
        let keys = ["observations", "actions", "rewards", "next_observations", "terminals", "source", "trajectory", "instruction_id", "instructions/text", "instructions/embedding"];
        for key in keys {
            if !h5util::has(root, key) {
                return Err(DatasetError::MissingKey { path: path.into(), key: key.into(), expected: "an o2o ImagineBench file (run scripts/imaginebench_convert.py)".into() });
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
                _ => Err(DatasetError::WrongShape { path: path.into(), key: k.into(), expected: "rank 2: (N, dim)".into(), found: s.to_vec() }),
            }
        };
        let (n, obs_dim) = wide("observations", &obs.shape)?;
        let (na, act_dim) = wide("actions", &act.shape)?;
        let (k_emb, embed_dim) = wide("instructions/embedding", &emb.shape)?;
        if next.shape != obs.shape {
            return Err(DatasetError::WrongShape { path: path.into(), key: "next_observations".into(), expected: format!("({n}, {obs_dim}) like observations"), found: next.shape });
        }
        let len_check = |key: &str, found: usize| {
            if found == n {
                Ok(())
            } else {
                Err(DatasetError::LengthMismatch { path: path.into(), key: key.into(), reference: "observations".into(), expected: n, found })
            }
        };
        len_check("actions", na)?;
        let mut cols = Vec::new();
        for key in ["rewards", "terminals", "source", "trajectory", "instruction_id"] {
            let c = read(key)?;
            len_check(key, c.shape.first().copied().unwrap_or(0))?;
            cols.push(c.data);
        }
        let [rewards, terminals, source, trajectory, iid]: [Vec<f32>; 5] = cols.try_into().map_err(|_| DatasetError::Invalid("internal: column count".into()))?;
        for (key, data, w) in [("observations", &obs.data, obs_dim), ("actions", &act.data, act_dim), ("rewards", &rewards, 1), ("next_observations", &next.data, obs_dim), ("instructions/embedding", &emb.data, embed_dim)] {
            if let Some((row, column, value)) = h5util::first_non_finite(data, w) {
                return Err(DatasetError::NonFinite { path: path.into(), key: key.into(), row, column, value });
            }
        }
        let text_ds = root.dataset("instructions/text").map_err(|e| h5util::h5err(path, "instructions/text", e))?;
        let texts: Vec<VarLenUnicode> = text_ds.read_raw().map_err(|e| h5util::h5err(path, "instructions/text", e))?;
        let instructions: Vec<String> = texts.iter().map(|s| s.as_str().to_string()).collect();
        if instructions.len() != k_emb {
            return Err(DatasetError::LengthMismatch { path: path.into(), key: "instructions/embedding".into(), reference: "instructions/text".into(), expected: instructions.len(), found: k_emb });
        }
        let instruction_id: Vec<usize> = iid.iter().map(|&v| v as usize).collect();
        if let Some((row, &bad)) = instruction_id.iter().enumerate().find(|(_, &i)| i >= k_emb) {
            return Err(DatasetError::WrongShape { path: path.into(), key: "instruction_id".into(), expected: format!("values < {k_emb} (the number of instructions); row {row}"), found: vec![bad] });
        }
        Ok(Self {
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
        Ok((OfflineBuffer::new(self.transitions(Rows::Real, with_instruction, mc)?)?, OfflineBuffer::new(self.transitions(Rows::Imaginary, with_instruction, mc)?)?))
    }
}
