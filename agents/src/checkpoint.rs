//! Checkpoint files: one file of named tensors (libtorch's `save_multi` format, readable by
//! `tch::Tensor::load_multi`), holding an agent's whole state.
//!
//! Names are `part/…` paths: `actor/l0/weight`, `critic_target/head/bias`,
//! `critic_opt/m/critic/l0/weight`, `meta/algo`, `meta/rng`, … The first component is the part
//! a partial load selects (e.g. `actor` and `critic` from an offline agent into an online one).
//! Scalars and counters are small `i64` tensors; the algorithm name is its UTF-8 bytes as a
//! `u8` tensor. Files are written to a temporary file in the same folder and renamed, so a
//! crash never leaves a half-written checkpoint. Loading validates every name and shape before
//! it copies anything, so a bad file leaves the agent untouched and returns a typed error.

use crate::nn::{Adam, ParamSet};
use crate::rng::AgentRng;
use crate::AgentError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

/// Tensors read from a checkpoint file, by name (on the CPU).
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    tensors: HashMap<String, Tensor>,
}

/// Write `tensors` to `path` atomically (temp file in the same folder, then rename). Tensors
/// are copied to the CPU first, so a CUDA agent's checkpoint loads anywhere.
pub fn save(path: &Path, tensors: &[(String, Tensor)]) -> Result<(), AgentError> {
    let err = |message: String| AgentError::Checkpoint { path: path.to_path_buf(), message };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file_name = path.file_name().ok_or_else(|| err("not a file path".into()))?;
    let tmp = path.with_file_name(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
    let cpu: Vec<(String, Tensor)> =
        tensors.iter().map(|(n, t)| (n.clone(), t.detach().to_device(Device::Cpu))).collect();
    if let Err(e) = Tensor::save_multi(&cpu, &tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(format!("writing {}: {e}", tmp.display())));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(format!("renaming {} into place: {e}", tmp.display()))
    })
}

/// The algorithm name stored as `meta/algo`.
pub fn algo_tensor(name: &str) -> Tensor {
    Tensor::from_slice(name.as_bytes())
}

impl Checkpoint {
    /// Read a checkpoint file.
    pub fn read(path: &Path) -> Result<Self, AgentError> {
        if !path.is_file() {
            return Err(AgentError::Checkpoint { path: path.to_path_buf(), message: "no such file".into() });
        }
        let list = Tensor::load_multi_with_device(path, Device::Cpu).map_err(|e| AgentError::Checkpoint {
            path: path.to_path_buf(),
            message: format!("not a readable checkpoint: {e}"),
        })?;
        Ok(Self { path: path.to_path_buf(), tensors: list.into_iter().collect() })
    }

    /// The file this came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Names stored, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.tensors.keys().map(String::as_str).collect();
        v.sort();
        v
    }

    /// The tensor `name`, or `MissingTensor`.
    pub fn get(&self, name: &str) -> Result<&Tensor, AgentError> {
        self.tensors
            .get(name)
            .ok_or_else(|| AgentError::MissingTensor { path: self.path.clone(), name: name.to_string() })
    }

    /// The algorithm that wrote the checkpoint (`meta/algo`).
    pub fn algo(&self) -> Result<String, AgentError> {
        let t = self.get("meta/algo")?;
        let bytes = Vec::<u8>::try_from(t.to_kind(Kind::Uint8).flatten(0, -1)).unwrap_or_default();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Check that `meta/algo` says `algo`.
    pub fn expect_algo(&self, algo: &str) -> Result<(), AgentError> {
        let found = self.algo()?;
        if found != algo {
            return Err(AgentError::Checkpoint {
                path: self.path.clone(),
                message: format!("written by algorithm `{found}`, expected `{algo}`"),
            });
        }
        Ok(())
    }

    /// `i64` counters stored under `name` (exactly `len` of them).
    pub fn i64s(&self, name: &str, len: usize) -> Result<Vec<i64>, AgentError> {
        let t = self.get(name)?;
        if t.kind() != Kind::Int64 || t.numel() != len {
            return Err(AgentError::ShapeMismatch {
                path: self.path.clone(),
                name: name.into(),
                expected: vec![len as i64],
                found: t.size(),
            });
        }
        Ok(Vec::<i64>::try_from(t.flatten(0, -1)).unwrap_or_default())
    }

    /// Copy stored values into `targets` (live tensors of an agent) whose names start with one
    /// of `parts` (`None` = all). Every selected name must exist with the same shape; all are
    /// checked before anything is copied.
    pub fn restore(&self, targets: &[(String, Tensor)], parts: Option<&[&str]>) -> Result<usize, AgentError> {
        let selected: Vec<&(String, Tensor)> = targets
            .iter()
            .filter(|(n, _)| parts.is_none_or(|ps| ps.iter().any(|p| n.split('/').next() == Some(p))))
            .collect();
        for (name, t) in &selected {
            let src = self.get(name)?;
            if src.size() != t.size() {
                return Err(AgentError::ShapeMismatch {
                    path: self.path.clone(),
                    name: name.clone(),
                    expected: t.size(),
                    found: src.size(),
                });
            }
            if src.kind() != t.kind() {
                return Err(AgentError::Checkpoint {
                    path: self.path.clone(),
                    message: format!("tensor `{name}` has kind {:?}, expected {:?}", src.kind(), t.kind()),
                });
            }
        }
        tch::no_grad(|| {
            for (name, t) in &selected {
                t.shallow_clone().copy_(&self.tensors[name.as_str()]);
            }
        });
        Ok(selected.len())
    }
}

/// The live tensors of an agent made of parameter `sets` and `optimizers` (`(prefix, Adam, the
/// set it updates)`): every parameter by name, then each optimizer's moments under its prefix.
pub(crate) fn state_tensors(sets: &[&ParamSet], optimizers: &[(&str, &Adam, &ParamSet)]) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = Vec::new();
    for set in sets {
        v.extend(set.named().iter().map(|(n, t)| (n.clone(), t.shallow_clone())));
    }
    for (prefix, opt, params) in optimizers {
        v.extend(opt.state(prefix, params));
    }
    v
}

/// Write an agent's state: its live tensors (weights, targets, temperature, optimizer moments),
/// each optimizer's step count as `{prefix}/step`, and `meta/algo`, `meta/step`, `meta/rng`.
pub(crate) fn save_agent(
    path: &Path,
    algo: &str,
    live: &[(String, Tensor)],
    optimizers: &[(&str, &Adam)],
    step: i64,
    rng: &AgentRng,
) -> Result<(), AgentError> {
    let mut all: Vec<(String, Tensor)> = live.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    for (prefix, opt) in optimizers {
        all.push((format!("{prefix}/step"), opt.step_tensor()));
    }
    all.push(("meta/algo".into(), algo_tensor(algo)));
    all.push(("meta/step".into(), Tensor::from_slice(&[step])));
    all.push(("meta/rng".into(), rng.state_tensor()));
    save(path, &all)
}

/// What [`load_agent`] restored besides tensors: the update counter and RNG, when the `meta`
/// part was selected.
pub(crate) struct Meta {
    pub step: i64,
    pub rng: AgentRng,
}

/// Restore an agent's state written by [`save_agent`]. `parts` selects name prefixes
/// (`None` = everything, which also checks `meta/algo == algo`). Optimizer step counts are
/// restored with their optimizer's part. Nothing is changed unless every check passes.
pub(crate) fn load_agent(
    path: &Path,
    algo: &str,
    live: &[(String, Tensor)],
    optimizers: &mut [(&str, &mut Adam)],
    parts: Option<&[&str]>,
) -> Result<Option<Meta>, AgentError> {
    if let Some(ps) = parts {
        let mut known: Vec<&str> = live.iter().filter_map(|(n, _)| n.split('/').next()).collect();
        known.push("meta");
        known.dedup();
        if let Some(p) = ps.iter().find(|p| !known.contains(p)) {
            return Err(AgentError::Config(format!(
                "unknown checkpoint part `{p}`; this {algo} agent has {}",
                known.join(", ")
            )));
        }
    }
    let ck = Checkpoint::read(path)?;
    let wanted = |p: &str| parts.is_none_or(|ps| ps.contains(&p));
    if parts.is_none() {
        ck.expect_algo(algo)?;
    }
    // Validate every counter first, then tensors (restore checks all before copying).
    let mut steps = Vec::new();
    for (prefix, _) in optimizers.iter() {
        if wanted(prefix) {
            steps.push(Some(ck.i64s(&format!("{prefix}/step"), 1)?[0]));
        } else {
            steps.push(None);
        }
    }
    let meta = if wanted("meta") {
        let step = ck.i64s("meta/step", 1)?[0];
        let rng = AgentRng::from_state_tensor(ck.get("meta/rng")?).ok_or_else(|| AgentError::ShapeMismatch {
            path: path.to_path_buf(),
            name: "meta/rng".into(),
            expected: vec![4],
            found: ck.tensors["meta/rng"].size(),
        })?;
        Some(Meta { step, rng })
    } else {
        None
    };
    ck.restore(live, parts)?;
    for ((_, opt), s) in optimizers.iter_mut().zip(steps) {
        if let Some(s) = s {
            opt.set_steps(s);
        }
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ck.ot");
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).view([3, 1]);
        save(
            &path,
            &[
                ("x/a".into(), a.shallow_clone()),
                ("meta/algo".into(), algo_tensor("sac")),
                ("meta/n".into(), Tensor::from_slice(&[7i64])),
            ],
        )
        .unwrap();
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temp file left");
        let ck = Checkpoint::read(&path).unwrap();
        ck.expect_algo("sac").unwrap();
        assert!(matches!(ck.expect_algo("iql"), Err(AgentError::Checkpoint { .. })));
        assert_eq!(ck.i64s("meta/n", 1).unwrap(), vec![7]);
        let live = Tensor::zeros([3, 1], (Kind::Float, Device::Cpu));
        ck.restore(&[("x/a".into(), live.shallow_clone())], None).unwrap();
        assert_eq!((&live - &a).abs().max().double_value(&[]), 0.0);
        // Wrong shape: typed error, target untouched.
        let wrong = Tensor::zeros([4], (Kind::Float, Device::Cpu));
        let e = ck.restore(&[("x/a".into(), wrong.shallow_clone())], None).unwrap_err();
        assert!(
            matches!(e, AgentError::ShapeMismatch { ref name, ref expected, ref found, .. } if name == "x/a" && expected == &vec![4] && found == &vec![3, 1]),
            "{e}"
        );
        assert_eq!(wrong.abs().sum(Kind::Float).double_value(&[]), 0.0);
        // Missing tensor, but not when its part is not selected.
        let e = ck.restore(&[("y/b".into(), wrong.shallow_clone())], None).unwrap_err();
        assert!(matches!(e, AgentError::MissingTensor { ref name, .. } if name == "y/b"));
        assert_eq!(
            ck.restore(&[("y/b".into(), wrong.shallow_clone()), ("x/a".into(), live.shallow_clone())], Some(&["x"]))
                .unwrap(),
            1
        );
        // Garbage and absent files.
        let junk = dir.path().join("junk.ot");
        std::fs::write(&junk, b"not a checkpoint").unwrap();
        assert!(matches!(Checkpoint::read(&junk), Err(AgentError::Checkpoint { .. })));
        assert!(matches!(Checkpoint::read(&dir.path().join("none.ot")), Err(AgentError::Checkpoint { .. })));
    }
}
