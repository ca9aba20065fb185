//! The D4RL-format writer: the original keys and dtypes (formats.md §1.2), so D4RL code and
//! h5py read our files as they read the originals.
//!
//! Main keys are written with the dtype they were read with (`dtypes`), defaulting to the
//! gym-mujoco v2 layout: float32 `observations`, `actions`, `rewards`, `next_observations`,
//! `infos/*`, and bool (h5py's enum FALSE/TRUE) `terminals` and `timeouts`. Strings in
//! `metadata/*` are written as variable-length UTF-8 (D4RL wrote fixed-length bytes; h5py reads
//! both). Values pass through `f32`, so a float64 file round-trips exactly only when its values
//! are representable in `f32`. The file is written to a temp file and renamed into place.

use std::path::Path;

use super::read::{D4rlDataset, MetaValue};
use crate::atomic::write_atomic;
use crate::error::Result;
use crate::h5util::{self, Dtype};

impl D4rlDataset {
    /// Writes this dataset to `path` in D4RL format (atomically).
    pub fn write(&self, path: &Path) -> Result<()> {
        self.write_gzip(path, None)
    }

    /// [`write`](Self::write), with the row columns (main keys and `infos/*`) gzip-compressed at
    /// `Some(level)` (shuffle + deflate, chunked; any HDF5 reader decompresses transparently).
    pub fn write_gzip(&self, path: &Path, gzip: Option<u8>) -> Result<()> {
        write_atomic(path, |tmp| self.write_to(tmp, gzip))
    }

    fn write_to(&self, tmp: &Path, gzip: Option<u8>) -> Result<()> {
        let file = h5util::create(tmp)?;
        let n = self.len();
        let dtype = |key: &str, default: Dtype| self.dtypes.get(key).copied().unwrap_or(default);
        let col = |key: &str, shape: &[usize], default: Dtype, data: &[f32]| {
            h5util::write_column_gzip(tmp, &file, key, shape, dtype(key, default), data, gzip)
        };
        col("observations", &[n, self.obs_dim], Dtype::Float32, &self.observations)?;
        col("actions", &[n, self.act_dim], Dtype::Float32, &self.actions)?;
        col("rewards", &[n], Dtype::Float32, &self.rewards)?;
        col("terminals", &[n], Dtype::Bool, &self.terminals)?;
        if let Some(t) = &self.timeouts {
            col("timeouts", &[n], Dtype::Bool, t)?;
        }
        if let Some(next) = &self.next_observations {
            col("next_observations", &[n, self.obs_dim], Dtype::Float32, next)?;
        }
        for (key, c) in &self.infos {
            h5util::write_column_gzip(tmp, &file, key, &c.shape, c.dtype, &c.data, gzip)?;
        }
        for (key, v) in &self.metadata {
            match v {
                MetaValue::Str(s) => h5util::write_string(tmp, &file, key, s)?,
                MetaValue::Array(c) if c.shape.is_empty() => match c.dtype {
                    Dtype::Float64 => h5util::write_scalar(tmp, &file, key, &(c.data[0] as f64))?,
                    Dtype::Float32 => h5util::write_scalar(tmp, &file, key, &c.data[0])?,
                    Dtype::Bool => h5util::write_scalar(tmp, &file, key, &(c.data[0] != 0.0))?,
                    Dtype::Int32 => h5util::write_scalar(tmp, &file, key, &(c.data[0] as i32))?,
                    _ => h5util::write_scalar(tmp, &file, key, &(c.data[0] as i64))?,
                },
                MetaValue::Array(c) => h5util::write_column(tmp, &file, key, &c.shape, c.dtype, &c.data)?,
            }
        }
        file.close().map_err(|e| h5util::h5err(tmp, "/", e))
    }
}
