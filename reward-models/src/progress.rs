//! The step-aware progress model: a network H(s_p, s_q) → [−1, 1] predicting the hop from a
//! BEFORE state to an AFTER state, trained on the labels of [`crate::labels`] from
//! demonstrations, and turned into a potential Φ by [`crate::reconstruct`].
//!
//! A state is one or more named **views**, each a feature vector: proprioception, object
//! state, or an image embedding the user computes. Views are normalized per dimension with the
//! training demos' mean and standard deviation, concatenated into x, and the network sees
//! [x_p, x_q, x_q − x_p]:
//!
//!   H(s_p, s_q) = tanh(MLP([x_p, x_q, x_q − x_p])),  MLP = (Linear → LayerNorm → ReLU)ⁿ → Linear
//!
//! Loss (the paper's adaptation loss; the released VLM uses token cross-entropy on the score
//! text instead, which has no analogue for a regression head):
//!
//!   L = E_(p,q,h) [ (H(s_p, s_q) − h)² ]
//!
//! The released GRM also sees reference START/END images; here the anchors enter only through
//! the forward (H(s_0, s_t)) and backward (H(s_goal, s_t)) reconstructions. The backward anchor
//! defaults to the mean final state of the training demos, stored in the model file.
//!
//! Design choice: this crate sits beside `o2o-agents` in the dependency graph, so the network
//! is a small `tch::nn` sequence here rather than the agents' building blocks.

use crate::labels::{checked_subtasks, sample_frames, sample_pairs, LabelConfig, SubTask};
use crate::reconstruct::{Estimate, Fusion, StepHops, Tracker};
use crate::RewardModelError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

/// File-format tag stored in every model file.
const FORMAT: &str = "o2o-progress-model/1";

/// One named feature view of a state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewSpec {
    /// Name, e.g. `proprio`, `object`, `camera-embedding`.
    pub name: String,
    /// Feature width.
    pub dim: usize,
    /// Where the view sits in a flat environment observation, `[start, end)`, when it is a
    /// slice of it (needed to shape an online run from env observations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obs_slice: Option<[usize; 2]>,
    /// A relative view: `obs[obs_slice] − obs[minus]` (same width), e.g. the gripper's offset
    /// from a goal task's desired goal. Goal-conditioned tasks need one: the backward estimate
    /// compares a state with the demos' mean final state, which holds some other episode's goal,
    /// so absolute goal and gripper views put every such pair out of the training distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minus: Option<[usize; 2]>,
}

impl ViewSpec {
    /// The view `obs[start..end]` named `name`.
    pub fn slice(name: &str, [start, end]: [usize; 2]) -> Self {
        Self { name: name.into(), dim: end.saturating_sub(start), obs_slice: Some([start, end]), minus: None }
    }

    /// Append the view of the flat observation `row` to `out`; the message says what is wrong.
    pub fn read_into(&self, row: &[f32], out: &mut Vec<f32>) -> Result<(), String> {
        let [a, b] = self.obs_slice.ok_or_else(|| format!("view `{}` has no obs_slice", self.name))?;
        let past = |[s, e]: [usize; 2]| {
            format!("view `{}` reads [{s}, {e}) but the observation has {} numbers", self.name, row.len())
        };
        let x = row.get(a..b).ok_or_else(|| past([a, b]))?;
        match self.minus {
            None => out.extend_from_slice(x),
            Some([c, d]) => {
                let y = row.get(c..d).ok_or_else(|| past([c, d]))?;
                out.extend(x.iter().zip(y).map(|(p, q)| p - q));
            }
        }
        Ok(())
    }
}

/// Everything that defines and trains a progress model; stored in the model file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProgressModelConfig {
    /// The views, in the order they are concatenated.
    pub views: Vec<ViewSpec>,
    /// Hidden layer widths of the MLP.
    pub hidden: Vec<i64>,
    /// Adam learning rate.
    pub lr: f64,
    /// Minibatch size (pairs).
    pub batch_size: usize,
    /// Gradient steps.
    pub steps: usize,
    /// Seed of initialization and minibatch sampling.
    pub seed: u64,
    /// The label pipeline.
    pub labels: LabelConfig,
    /// Which estimate is the potential Φ.
    pub fusion: Fusion,
    /// Consistency sharpness α (20 in the paper's LIBERO runs).
    pub consistency_alpha: f64,
    /// ε in the consistency weight's denominator.
    pub consistency_eps: f64,
    /// Success when Φ ≥ 1 − δ.
    pub success_delta: f64,
}

impl Default for ProgressModelConfig {
    fn default() -> Self {
        Self {
            views: Vec::new(),
            hidden: vec![256, 256],
            lr: 3e-4,
            batch_size: 256,
            steps: 3000,
            seed: 0,
            labels: LabelConfig::default(),
            fusion: Fusion::Mean,
            consistency_alpha: 20.0,
            consistency_eps: 1e-3,
            success_delta: 0.05,
        }
    }
}

impl ProgressModelConfig {
    /// Width of the concatenated views.
    pub fn input_dim(&self) -> usize {
        self.views.iter().map(|v| v.dim).sum()
    }

    /// Check every field; errors name the key.
    pub fn validate(&self) -> Result<(), RewardModelError> {
        let bad = |key: &str, expected: &str, found: String| {
            Err(RewardModelError::Config { key: key.into(), expected: expected.into(), found })
        };
        if self.views.is_empty() {
            return bad("views", "at least one view", "none".into());
        }
        for (i, v) in self.views.iter().enumerate() {
            if v.dim == 0 {
                return bad(&format!("views[{i}].dim"), "≥ 1", "0".into());
            }
            if let Some([a, b]) = v.obs_slice {
                if b <= a || b - a != v.dim {
                    return bad(
                        &format!("views[{i}].obs_slice"),
                        &format!("[start, start + {}]", v.dim),
                        format!("[{a}, {b}]"),
                    );
                }
            }
            if let Some([c, d]) = v.minus {
                if v.obs_slice.is_none() || d <= c || d - c != v.dim {
                    return bad(
                        &format!("views[{i}].minus"),
                        &format!("a [start, start + {}] slice beside obs_slice", v.dim),
                        format!("[{c}, {d}]"),
                    );
                }
            }
        }
        if self.hidden.iter().any(|&h| h <= 0) {
            return bad("hidden", "positive widths", format!("{:?}", self.hidden));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return bad("lr", "> 0", self.lr.to_string());
        }
        if self.batch_size == 0 {
            return bad("batch_size", "≥ 1", "0".into());
        }
        if !(0.0..1.0).contains(&self.success_delta) {
            return bad("success_delta", "in [0, 1)", self.success_delta.to_string());
        }
        if !(self.consistency_alpha >= 0.0 && self.consistency_eps >= 0.0) {
            return bad("consistency_alpha/eps", "≥ 0", format!("{}/{}", self.consistency_alpha, self.consistency_eps));
        }
        self.labels.validate()
    }
}

/// One demonstration: per frame, the concatenated views (`len × input_dim`, row-major), and
/// its keyframes (`None`: one sub-task over the whole episode).
#[derive(Debug, Clone, PartialEq)]
pub struct Demo {
    /// Name used in errors and reports.
    pub name: String,
    /// Frames, `len × input_dim` row-major.
    pub features: Vec<f32>,
    /// Number of frames.
    pub len: usize,
    /// Sub-task boundaries.
    pub keyframes: Option<Vec<SubTask>>,
}

impl Demo {
    /// Build from flat observations (`len × obs_dim`) by slicing each view's `obs_slice`.
    pub fn from_observations(
        name: &str,
        obs: &[f32],
        obs_dim: usize,
        views: &[ViewSpec],
        keyframes: Option<Vec<SubTask>>,
    ) -> Result<Self, RewardModelError> {
        let bad = |message: String| RewardModelError::Demo { demo: name.into(), message };
        if obs_dim == 0 || obs.len() % obs_dim != 0 {
            return Err(bad(format!("{} observation values do not split into rows of {obs_dim}", obs.len())));
        }
        let len = obs.len() / obs_dim;
        let mut features = Vec::with_capacity(len * views.iter().map(|v| v.dim).sum::<usize>());
        for row in obs.chunks(obs_dim) {
            for v in views {
                v.read_into(row, &mut features).map_err(bad)?;
            }
        }
        Ok(Self { name: name.into(), features, len, keyframes })
    }

    fn frame(&self, i: usize, dim: usize) -> &[f32] {
        &self.features[i * dim..(i + 1) * dim]
    }
}

/// What training did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainReport {
    /// Labelled pairs over all demos.
    pub pairs: usize,
    /// Mean squared hop error over each tenth of training.
    pub loss_curve: Vec<f64>,
    /// Mean squared hop error on all training pairs at the end.
    pub final_loss: f64,
}

/// A trained (or untrained) progress model: config, normalization, goal anchor and network.
#[derive(Debug)]
pub struct ProgressModel {
    config: ProgressModelConfig,
    vs: nn::VarStore,
    net: nn::Sequential,
    mean: Tensor,
    std: Tensor,
    goal: Tensor,
}

fn build_net(p: &nn::Path, input: i64, hidden: &[i64]) -> nn::Sequential {
    let mut seq = nn::seq();
    let mut width = 3 * input;
    for (i, &h) in hidden.iter().enumerate() {
        seq = seq
            .add(nn::linear(p / format!("l{i}"), width, h, Default::default()))
            .add(nn::layer_norm(p / format!("ln{i}"), vec![h], Default::default()))
            .add_fn(|x| x.relu());
        width = h;
    }
    seq.add(nn::linear(p / "head", width, 1, Default::default()))
}

impl ProgressModel {
    /// A fresh model for `config`, with normalization and goal taken from `demos`.
    pub fn new(config: ProgressModelConfig, demos: &[Demo], device: Device) -> Result<Self, RewardModelError> {
        config.validate()?;
        let dim = config.input_dim();
        check_demos(demos, dim)?;
        tch::manual_seed(config.seed as i64);
        let vs = nn::VarStore::new(device);
        let net = build_net(&(vs.root() / "net"), dim as i64, &config.hidden);
        // Per-dimension statistics over every training frame; the std is floored so constant
        // features (a fixed object height) do not blow up.
        let all: Vec<f32> = demos.iter().flat_map(|d| d.features.iter().copied()).collect();
        let x = Tensor::from_slice(&all).view([-1, dim as i64]).to_kind(Kind::Float);
        let mean = x.mean_dim(0, false, Kind::Float);
        let std = x.std_dim(0, false, false).clamp_min(1e-3);
        let last: Vec<f32> = demos.iter().flat_map(|d| d.frame(d.len - 1, dim).iter().copied()).collect();
        let goal = Tensor::from_slice(&last).view([-1, dim as i64]).mean_dim(0, false, Kind::Float);
        Ok(Self {
            config,
            vs,
            net,
            mean: mean.to_device(device),
            std: std.to_device(device),
            goal: goal.to_device(device),
        })
    }

    /// Build and train on `demos` for `config.steps` steps.
    pub fn train(
        config: ProgressModelConfig,
        demos: &[Demo],
        device: Device,
    ) -> Result<(Self, TrainReport), RewardModelError> {
        let mut model = Self::new(config, demos, device)?;
        let (steps, lr, seed) = (model.config.steps, model.config.lr, model.config.seed);
        let report = model.fit(demos, steps, lr, seed)?;
        Ok((model, report))
    }

    /// The model's config.
    pub fn config(&self) -> &ProgressModelConfig {
        &self.config
    }

    /// Width of a state (all views).
    pub fn input_dim(&self) -> usize {
        self.config.input_dim()
    }

    /// Continue training on `demos` (normalization and goal anchor stay as they are): the
    /// pretraining run, and the one-shot adaptation to a single demo of a new task.
    ///
    /// L = E[(H(s_p, s_q) − h)²] over the label pipeline's pairs.
    pub fn fit(&mut self, demos: &[Demo], steps: usize, lr: f64, seed: u64) -> Result<TrainReport, RewardModelError> {
        let dim = self.input_dim();
        check_demos(demos, dim)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (feats, before, after, hops) = self.pair_tensors(demos, &mut rng)?;
        let n = hops.size()[0];
        if n == 0 {
            return Err(RewardModelError::Demo { demo: "all".into(), message: "no labelled pairs: every demo has fewer than 3 sample frames (make demos longer or lower labels.sample_factor)".into() });
        }
        let mut opt = nn::Adam::default().build(&self.vs, lr)?;
        let bs = self.config.batch_size as i64;
        let mut curve = Vec::new();
        let chunk = (steps / 10).max(1);
        let mut acc = Tensor::zeros([], (Kind::Float, feats.device()));
        for step in 0..steps {
            let idx: Vec<i64> = (0..bs).map(|_| rng.gen_range(0..n)).collect();
            let idx = Tensor::from_slice(&idx).to_device(feats.device());
            let pred = self.hop_normalized(
                &feats.index_select(0, &before.index_select(0, &idx)),
                &feats.index_select(0, &after.index_select(0, &idx)),
            );
            let loss = (pred - hops.index_select(0, &idx)).square().mean(Kind::Float);
            opt.backward_step(&loss);
            acc += loss.detach();
            if (step + 1) % chunk == 0 || step + 1 == steps {
                let k = ((step % chunk) + 1) as f64;
                curve.push(acc.double_value(&[]) / k);
                acc = acc.zeros_like();
            }
        }
        let final_loss = tch::no_grad(|| {
            let pred = self.hop_normalized(&feats.index_select(0, &before), &feats.index_select(0, &after));
            (pred - &hops).square().mean(Kind::Float).double_value(&[])
        });
        Ok(TrainReport { pairs: n as usize, loss_curve: curve, final_loss })
    }

    /// Normalized frames of all demos and the (before, after, hop) index tensors of their pairs.
    fn pair_tensors(
        &self,
        demos: &[Demo],
        rng: &mut ChaCha8Rng,
    ) -> Result<(Tensor, Tensor, Tensor, Tensor), RewardModelError> {
        let dim = self.input_dim() as i64;
        let mut all = Vec::new();
        let (mut b, mut a, mut h) = (Vec::new(), Vec::new(), Vec::new());
        let mut offset = 0i64;
        for d in demos {
            let subtasks = checked_subtasks(d.keyframes.as_deref(), d.len, &d.name)?;
            let frames = sample_frames(&subtasks, self.config.labels.sample_factor);
            for p in sample_pairs(&frames, &self.config.labels, rng) {
                b.push(offset + p.before as i64);
                a.push(offset + p.after as i64);
                h.push(p.hop as f32);
            }
            all.extend_from_slice(&d.features);
            offset += d.len as i64;
        }
        let dev = self.vs.device();
        let feats = self.normalize(&Tensor::from_slice(&all).view([-1, dim]).to_device(dev));
        Ok((
            feats,
            Tensor::from_slice(&b).to_device(dev),
            Tensor::from_slice(&a).to_device(dev),
            Tensor::from_slice(&h).to_device(dev),
        ))
    }

    fn normalize(&self, x: &Tensor) -> Tensor {
        (x.to_kind(Kind::Float) - &self.mean) / &self.std
    }

    /// H on normalized states `[B, D]` → `[B]`.
    fn hop_normalized(&self, xp: &Tensor, xq: &Tensor) -> Tensor {
        let input = Tensor::cat(&[xp, xq, &(xq - xp)], 1);
        self.net.forward(&input).squeeze_dim(1).tanh()
    }

    /// H(s_p, s_q) for raw states `[B, D]` → `[B]` in [−1, 1].
    pub fn hops(&self, before: &Tensor, after: &Tensor) -> Tensor {
        tch::no_grad(|| self.hop_normalized(&self.normalize(before), &self.normalize(after)))
    }

    /// H(s_p, s_q) for one pair of raw states.
    pub fn hop(&self, before: &[f32], after: &[f32]) -> Result<f64, RewardModelError> {
        let d = self.input_dim();
        if before.len() != d || after.len() != d {
            return Err(RewardModelError::Demo {
                demo: "query".into(),
                message: format!("expected states of width {d}, found {} and {}", before.len(), after.len()),
            });
        }
        let dev = self.vs.device();
        let t = |x: &[f32]| Tensor::from_slice(x).view([1, d as i64]).to_device(dev);
        Ok(self.hops(&t(before), &t(after)).double_value(&[0]))
    }

    /// The default backward anchor (mean final state of the training demos), raw units.
    pub fn goal(&self) -> Vec<f32> {
        Vec::<f32>::try_from(self.goal.to_device(Device::Cpu)).unwrap_or_default()
    }

    /// Every estimate of Φ along one episode of `len` frames (`features` row-major), anchored
    /// at its first frame and at `goal` (default: the model's goal anchor).
    pub fn progress_curve(&self, features: &[f32], goal: Option<&[f32]>) -> Result<Vec<Estimate>, RewardModelError> {
        let d = self.input_dim();
        if features.is_empty() || features.len() % d != 0 {
            return Err(RewardModelError::Demo {
                demo: "curve".into(),
                message: format!("{} values do not split into frames of width {d}", features.len()),
            });
        }
        let dev = self.vs.device();
        let x = Tensor::from_slice(features).view([-1, d as i64]).to_device(dev);
        let t = x.size()[0];
        let g = match goal {
            Some(g) if g.len() == d => Tensor::from_slice(g).view([1, d as i64]).to_device(dev),
            Some(g) => {
                return Err(RewardModelError::Demo {
                    demo: "curve".into(),
                    message: format!("goal has width {}, expected {d}", g.len()),
                })
            }
            None => self.goal.view([1, d as i64]),
        };
        let prev = Tensor::cat(&[x.narrow(0, 0, 1), x.narrow(0, 0, t - 1)], 0);
        let inc = Vec::<f64>::try_from(self.hops(&prev, &x).to_kind(Kind::Double).to_device(Device::Cpu))?;
        let fwd = Vec::<f64>::try_from(
            self.hops(&x.narrow(0, 0, 1).expand([t, d as i64], false), &x).to_kind(Kind::Double).to_device(Device::Cpu),
        )?;
        let bwd = Vec::<f64>::try_from(
            self.hops(&g.expand([t, d as i64], false), &x).to_kind(Kind::Double).to_device(Device::Cpu),
        )?;
        let mut tracker = Tracker::new(self.config.consistency_alpha, self.config.consistency_eps);
        Ok((0..t as usize)
            .map(|i| {
                // s_0 has no predecessor: its incremental hop is 0, so Φ_I(s_0) = 0.
                let h = if i == 0 { 0.0 } else { inc[i] };
                tracker.step(StepHops { incremental: h, from_start: fwd[i], from_goal: bwd[i] })
            })
            .collect())
    }

    /// Write the model (config, normalization, goal, weights) to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), RewardModelError> {
        let err = |message: String| RewardModelError::ModelFile { path: path.into(), message };
        let json = serde_json::to_string(&self.config).map_err(|e| err(e.to_string()))?;
        let mut named: Vec<(String, Tensor)> = vec![
            ("meta/format".into(), Tensor::from_slice(FORMAT.as_bytes())),
            ("meta/config".into(), Tensor::from_slice(json.as_bytes())),
            ("norm/mean".into(), self.mean.to_device(Device::Cpu)),
            ("norm/std".into(), self.std.to_device(Device::Cpu)),
            ("anchor/goal".into(), self.goal.to_device(Device::Cpu)),
        ];
        let mut vars: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        named.extend(vars.into_iter().map(|(n, t)| (format!("var/{n}"), t.detach().to_device(Device::Cpu))));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| RewardModelError::Io { path: dir.into(), source: e })?;
        }
        let name = path.file_name().ok_or_else(|| err("not a file path".into()))?;
        let tmp = path.with_file_name(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
        if let Err(e) = Tensor::save_multi(&named, &tmp) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(format!("writing {}: {e}", tmp.display())));
        }
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(format!("renaming {} into place: {e}", tmp.display()))
        })
    }

    /// Read a model file; every name and shape is checked before anything is used.
    pub fn load(path: &Path, device: Device) -> Result<Self, RewardModelError> {
        let err = |message: String| RewardModelError::ModelFile { path: path.into(), message };
        if !path.is_file() {
            return Err(err("no such file".into()));
        }
        let list = Tensor::load_multi_with_device(path, Device::Cpu)
            .map_err(|e| err(format!("not a readable model file: {e}")))?;
        let map: std::collections::HashMap<String, Tensor> = list.into_iter().collect();
        let get = |name: &str| map.get(name).ok_or_else(|| err(format!("missing tensor `{name}`")));
        let text = |name: &str| -> Result<String, RewardModelError> {
            let bytes = Vec::<u8>::try_from(get(name)?).map_err(|e| err(format!("`{name}`: {e}")))?;
            String::from_utf8(bytes).map_err(|_| err(format!("`{name}` is not UTF-8")))
        };
        let format = text("meta/format")?;
        if format != FORMAT {
            return Err(err(format!("expected format `{FORMAT}`, found `{format}`")));
        }
        let config: ProgressModelConfig =
            serde_json::from_str(&text("meta/config")?).map_err(|e| err(format!("config: {e}")))?;
        config.validate().map_err(|e| err(e.to_string()))?;
        let dim = config.input_dim() as i64;
        let vector = |name: &str| -> Result<Tensor, RewardModelError> {
            let t = get(name)?;
            if t.size() != [dim] {
                return Err(err(format!("`{name}`: expected shape [{dim}], found {:?}", t.size())));
            }
            Ok(t.to_kind(Kind::Float).to_device(device))
        };
        let (mean, std, goal) = (vector("norm/mean")?, vector("norm/std")?, vector("anchor/goal")?);
        let vs = nn::VarStore::new(device);
        let net = build_net(&(vs.root() / "net"), dim, &config.hidden);
        let mut vars = vs.variables();
        for (name, var) in vars.iter_mut() {
            let stored = get(&format!("var/{name}"))?;
            if stored.size() != var.size() {
                return Err(err(format!("`var/{name}`: expected shape {:?}, found {:?}", var.size(), stored.size())));
            }
            tch::no_grad(|| var.copy_(stored));
        }
        Ok(Self { config, vs, net, mean, std, goal })
    }
}

fn check_demos(demos: &[Demo], dim: usize) -> Result<(), RewardModelError> {
    if demos.is_empty() {
        return Err(RewardModelError::Demo { demo: "all".into(), message: "no demonstrations given".into() });
    }
    for d in demos {
        if d.features.len() != d.len * dim {
            return Err(RewardModelError::Demo {
                demo: d.name.clone(),
                message: format!(
                    "expected {} × {dim} = {} feature values, found {}",
                    d.len,
                    d.len * dim,
                    d.features.len()
                ),
            });
        }
        if let Some(i) = d.features.iter().position(|v| !v.is_finite()) {
            return Err(RewardModelError::Demo {
                demo: d.name.clone(),
                message: format!("non-finite feature at frame {}, column {}", i / dim, i % dim),
            });
        }
    }
    Ok(())
}

/// Value–order correlation: Spearman's rank correlation of a progress sequence with time
/// (ties get their average rank), as the released benchmark's VOC. 1 = strictly increasing.
pub fn voc(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let ranks = |v: &[f64]| -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            let avg = (i + j) as f64 / 2.0;
            for &k in &idx[i..=j] {
                r[k] = avg;
            }
            i = j + 1;
        }
        r
    };
    let (rx, ry) = (ranks(&(0..n).map(|i| i as f64).collect::<Vec<_>>()), ranks(values));
    let mx = rx.iter().sum::<f64>() / n as f64;
    let my = ry.iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        sxy += (rx[i] - mx) * (ry[i] - my);
        sxx += (rx[i] - mx).powi(2);
        syy += (ry[i] - my).powi(2);
    }
    if syy == 0.0 {
        return 0.0;
    }
    sxy / (sxx * syy).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voc_examples() {
        assert!((voc(&[0.0, 0.1, 0.2, 0.9]) - 1.0).abs() < 1e-12);
        assert!((voc(&[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(voc(&[0.5, 0.5, 0.5]), 0.0);
        // ranks of [0, 2, 1, 3] against [0, 1, 2, 3]: 1 − 6·2/(4·15) = 0.8
        assert!((voc(&[0.0, 2.0, 1.0, 3.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn config_errors_name_the_key() {
        let mut c = ProgressModelConfig::default();
        assert!(c.validate().unwrap_err().to_string().contains("`views`"));
        c.views = vec![ViewSpec { name: "p".into(), dim: 3, obs_slice: Some([2, 4]), minus: None }];
        assert!(c.validate().unwrap_err().to_string().contains("views[0].obs_slice"));
    }
}
