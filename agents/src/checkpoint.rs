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

use crate::nn::{Adam, Frozen, ParamSet, Trained};
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

/// One part of an agent's state, as its checkpoint names it: the first component of each name
/// (`actor`, `critic_target`, `actor_opt`, …) is the part a partial load selects.
pub enum Part<'a> {
    /// Weights and the Adam that trains them; its moments are written as `{opt}/m/…` and
    /// `{opt}/v/…`, its step count as `{opt}/step`.
    Trained {
        /// The optimizer's checkpoint prefix (`actor_opt`).
        opt: &'static str,
        /// The weights.
        params: &'a ParamSet,
        /// Their optimizer.
        adam: &'a Adam,
    },
    /// Weights no optimizer steps (a target network, state statistics).
    Frozen(&'a ParamSet),
    /// Other live tensors, by name (running observation statistics).
    Tensors(Vec<(String, Tensor)>),
    /// The parts of a state this one is built on (CQL's SAC core), written together in their
    /// own order at this place.
    Group(Vec<Part<'a>>),
}

impl<'a> Part<'a> {
    /// A [`Trained`] network whose optimizer is written under `opt`.
    pub fn trained<N>(opt: &'static str, t: &'a Trained<N>) -> Self {
        Part::Trained { opt, params: &t.params, adam: &t.opt }
    }

    /// A [`Frozen`] network.
    pub fn frozen<N>(f: &'a Frozen<N>) -> Self {
        Part::Frozen(&f.params)
    }
}

/// The live tensors of `parts`: every part's weights in order (a group's whole state at its
/// place), then every optimizer's moments, then the other live tensors.
fn live_tensors(parts: &[Part<'_>]) -> Vec<(String, Tensor)> {
    let named = |set: &ParamSet| set.named().iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect::<Vec<_>>();
    let mut v = Vec::new();
    for part in parts {
        match part {
            Part::Trained { params, .. } | Part::Frozen(params) => v.extend(named(params)),
            Part::Group(inner) => v.extend(live_tensors(inner)),
            Part::Tensors(_) => {}
        }
    }
    for part in parts {
        if let Part::Trained { opt, params, adam } = part {
            v.extend(adam.state(opt, params));
        }
    }
    for part in parts {
        if let Part::Tensors(t) = part {
            v.extend(t.iter().map(|(n, t)| (n.clone(), t.shallow_clone())));
        }
    }
    v
}

/// Every optimizer of `parts` with its prefix, in order (a group's at its place).
fn optimizers<'a>(parts: &[Part<'a>]) -> Vec<(&'static str, &'a Adam)> {
    let mut v = Vec::new();
    for part in parts {
        match part {
            Part::Trained { opt, adam, .. } => v.push((*opt, *adam)),
            Part::Group(inner) => v.extend(optimizers(inner)),
            Part::Frozen(_) | Part::Tensors(_) => {}
        }
    }
    v
}

/// A state made of parts listed once ([`Stateful::parts`]), plus an update counter and a random
/// stream: what every agent (and every stage of Uni-O4's offline pipeline) is. Its named
/// tensors, checkpoint, full and partial loads and optimizer resets follow from the list.
///
/// A checkpoint holds the live tensors ([`Stateful::named_tensors`]), then
/// [`Stateful::written_only`], each optimizer's `{opt}/step`, and `meta/algo` (the name),
/// `meta/step` and `meta/rng`.
pub trait Stateful {
    /// Short algorithm name, e.g. `"sac"`; checkpoints record it as `meta/algo`.
    fn name(&self) -> &'static str;
    /// Every part of the state, in checkpoint order.
    fn parts(&self) -> Vec<Part<'_>>;
    /// The update counter and the random stream (`meta/step`, `meta/rng`).
    fn progress(&self) -> (i64, &AgentRng);
    /// Put back the update counter and the random stream a checkpoint held.
    fn set_progress(&mut self, step: i64, rng: AgentRng);

    /// Tensors written after the live ones that a load does not copy into place (counters, a
    /// state whose shape varies), read back by the state's own `load`; none by default.
    fn written_only(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Every live tensor of the state, by checkpoint name: the parts' weights, the optimizers'
    /// moments, other live tensors.
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        live_tensors(&self.parts())
    }

    /// Write the full state to `path` atomically (temp file, then rename).
    fn save(&self, path: &Path) -> Result<(), AgentError> {
        let mut all = self.named_tensors();
        all.extend(self.written_only());
        for (prefix, opt) in optimizers(&self.parts()) {
            all.push((format!("{prefix}/step"), opt.step_tensor()));
        }
        let (step, rng) = self.progress();
        all.push(("meta/algo".into(), algo_tensor(self.name())));
        all.push(("meta/step".into(), Tensor::from_slice(&[step])));
        all.push(("meta/rng".into(), rng.state_tensor()));
        save(path, &all)
    }

    /// Restore the full state written by `save`.
    fn load(&mut self, path: &Path) -> Result<(), AgentError> {
        self.restore(path, self.name(), None)
    }

    /// Restore only some parts of a checkpoint written by a state of the same architecture
    /// (parts are the first components of the tensor names: `actor`, `critic`,
    /// `critic_target`, `actor_opt`, `meta`, …) — warm-starting by part.
    fn load_parts(&mut self, path: &Path, parts: &[&str]) -> Result<(), AgentError> {
        self.restore(path, self.name(), Some(parts))
    }

    /// Restore `parts` (`None` = everything, which also checks that `meta/algo` is
    /// `written_by`) of a checkpoint. Optimizer step counts are restored with their optimizer's
    /// part, the counter and random stream with `meta`. Nothing changes unless every check
    /// passes.
    fn restore(&mut self, path: &Path, written_by: &str, parts: Option<&[&str]>) -> Result<(), AgentError> {
        let state = self.parts();
        let meta = load_agent(path, written_by, &live_tensors(&state), &optimizers(&state), parts)?;
        drop(state);
        if let Some(Meta { step, rng }) = meta {
            self.set_progress(step, rng);
        }
        Ok(())
    }

    /// Forget every optimizer's moments and step count (warm-started weights, fresh Adam).
    fn reset_optimizers(&mut self) {
        for (_, opt) in optimizers(&self.parts()) {
            opt.reset();
        }
    }
}

/// [`Stateful::progress`] and [`Stateful::set_progress`] of a state whose update counter and
/// random stream are its fields `step: i64` and `rng: AgentRng`, as every agent's are.
macro_rules! progress_in_fields {
    () => {
        fn progress(&self) -> (i64, &$crate::rng::AgentRng) {
            (self.step, &self.rng)
        }

        fn set_progress(&mut self, step: i64, rng: $crate::rng::AgentRng) {
            (self.step, self.rng) = (step, rng);
        }
    };
}
pub(crate) use progress_in_fields;

/// What [`load_agent`] restored besides tensors: the update counter and RNG, when the `meta`
/// part was selected.
struct Meta {
    step: i64,
    rng: AgentRng,
}

/// Restore a state written by [`Stateful::save`]. `parts` selects name prefixes (`None` =
/// everything, which also checks `meta/algo == algo`). Optimizer step counts are restored with
/// their optimizer's part. Nothing is changed unless every check passes.
fn load_agent(
    path: &Path,
    algo: &str,
    live: &[(String, Tensor)],
    optimizers: &[(&str, &Adam)],
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
    for (prefix, _) in optimizers {
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
    for ((_, opt), s) in optimizers.iter().zip(steps) {
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
