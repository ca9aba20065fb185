//! SERA — Sample Efficient Reward Augmentation (Zhang, Xiong, Zhuang, Liu, Wang; arXiv
//! 2310.19805, also titled QCSE): during online fine-tuning, an intrinsic reward that estimates
//! the state entropy conditioned on the pre-trained critic's value, H(s | Q̂), is added to every
//! sampled batch's reward, so the agent is pushed towards states it has covered little *among
//! states of similar value*.
//!
//! **Why it lives here and not in `o2o-reward-models`.** That crate holds reward transforms that
//! are a function of a transition as it is stored (shaping potentials, progress models). SERA's
//! bonus is not: it is a function of a whole sampled *batch* (its k-NN structure) and of the
//! critic being fine-tuned, recomputed at every update with the critic of that update. It needs
//! the agent's critic ([`Agent::critic_values`]) and runs on tensors next to the update, so it
//! sits beside the agents; the runner applies it to each online batch in one place
//! (`o2o_experiments::run::learner`), for every off-policy agent alike.
//!
//! **What it computes** (the k-NN estimator of VCSE, Kim et al. NeurIPS 2023, which SERA
//! adapts by conditioning on Q̂(s, a) instead of V(s); `shared/reference/algorithms-next.md` §3):
//! for the batch's N states s_i and q_i = Q̂(s_i, a_i) (the critic's ensemble reduced by `min`
//! or `mean`, no gradient), both scaled first as VCSE's code scales them (`VCSE_SAC/agent/sac.py`):
//! q standardized over the neighbour set (a fresh LayerNorm without affine: mean 0, variance 1,
//! ε = 1e-5) and the states divided by their dimension d_s. Without that scaling, Q̂'s spread of
//! O(100) on locomotion dominates every distance and tanh(r_int) ≈ 0.97 on every state: a
//! constant alive bonus, not a novelty signal (fidelity-audit-2 E8).
//!
//! - D_ij = max(‖s_i − s_j‖₂, |q_i − q_j|)                         (joint distance)
//! - ε_i = the k-th smallest D_ij over j, self (D_ii = 0) counted
//! - n_v(i) = #{j : |q_i − q_j| < ε_i}                               (self counted)
//! - r_int_i = ψ(n_v(i) + 1) / d_s + log(2 ε_i + 1e-5)               (`ksg`, paper Eq. 2 in
//!   VCSE's form), or ψ(n_v(i) + 1) / d_s + log(2) · ε_i             (`log2_max`, Eq. 2 read
//!   literally)
//! - r ← r + λ · tanh(r_int)                                         (Eq. 1; `normalization`)
//!
//! The bonus goes on the online rows of a batch (`bonus_rows = "online"`, the paper's "during
//! online fine-tuning"); offline rows of a mixed batch keep their rewards, so Cal-QL's floor
//! max(Q, G), whose G is the env's return on those rows, stays consistent with what they learn.
//! On online rows the floor and Q differ by the discounted bonus, whose sign is the mean bonus's
//! (logged as `train/sera/bonus_mean`).
//!
//! The paper's ambiguities and the choice made for each are the config's fields below and are
//! listed in `docs/agents.md` (section SERA).

use crate::{Agent, AgentError, Metrics};
use o2o_datasets::TransitionBatch;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tch::{Kind, Tensor};

/// The small constant inside the KSG logarithm, log(2ε + 1e-5), as in VCSE's code: a finite
/// bonus when the k-th neighbour coincides.
pub const LOG_GUARD: f64 = 1e-5;

/// How the critic ensemble's members are reduced to one Q̂(s, a).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QReduction {
    /// The minimum over members (VCSE's min(Q₁, Q₂); the pessimistic value the TD target uses).
    Min,
    /// The mean over members.
    Mean,
}

/// How r_int becomes the bonus added to the reward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Normalization {
    /// λ · tanh(r_int): bounded in (−λ, λ) (the reviewers' reading of Eq. 1).
    Tanh,
    /// λ · r_int, unbounded (VCSE's r_ext + β r_int).
    None,
}

/// Which samples the k nearest neighbours are searched among.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Neighbours {
    /// The sampled minibatch itself (VCSE; the paper does not say).
    Batch,
    /// The minibatch plus `neighbour_samples` transitions drawn from the online replay buffer
    /// (a denser estimate of the online state distribution; costs one more critic pass).
    OnlineSample,
}

/// How states are scaled before distances are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateScaling {
    /// s / d_s, VCSE's `obs / obs.shape[-1]` (the default).
    Dimension,
    /// Raw observations (the paper does not mention scaling).
    None,
    /// (s − μ) / σ per dimension, μ and σ of the offline dataset's observations (so a joint
    /// angle and a velocity count alike).
    Dataset,
}

/// How Q̂ is scaled before distances are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QScaling {
    /// (q − mean) / √(var + 1e-5) over the neighbour set, the biased variance: VCSE's fresh
    /// `LayerNorm` over the batch's Q (no affine). The default.
    BatchStandardize,
    /// Raw Q̂ (o2o before fidelity-audit-2 E8).
    None,
}

/// Which rows of a batch get the bonus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BonusRows {
    /// Rows drawn from the online buffer only (a batch's `is_offline` flag 0; every row of a
    /// batch that has no flags). The default: the paper adds the bonus during online fine-tuning.
    Online,
    /// Every row, offline rows of a mixed batch included.
    All,
}

/// The ε of VCSE's LayerNorm: q̃ = (q − mean) / √(var + 1e-5).
pub const Q_SCALING_EPS: f64 = 1e-5;

/// Below this per-batch standard deviation of tanh(r_int) the bonus is close to a constant
/// (fidelity-audit-2 E8 measured ≈ 0.97 ± small on raw hopper values).
pub const CONSTANT_BONUS_STD: f64 = 0.05;

/// Consecutive batches with a spread below [`CONSTANT_BONUS_STD`] before the runner warns.
pub const CONSTANT_BONUS_PATIENCE: usize = 1000;

/// The form of the distance term of r_int.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogForm {
    /// log(2ε + 1e-5): the KSG estimator's term, as VCSE's code computes it.
    Ksg,
    /// log(2) · ε: the paper's "log 2 · max(…)" read literally.
    Log2Max,
}

/// The `[sera]` section of a run's config. Off by default; every field has the paper-faithful
/// default (or, where the paper is silent, VCSE's choice).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeraConfig {
    /// Add the bonus to online batches.
    pub enabled: bool,
    /// λ, the bonus scale ("λ = 1 is generally sufficient").
    pub lambda: f64,
    /// k of the k-NN (the paper's ablation: hopper 10, walker2d 20, antmaze ≈ 25).
    pub k: i64,
    /// `min` or `mean` over the critic ensemble.
    pub q_reduction: QReduction,
    /// `tanh` or `none`.
    pub normalization: Normalization,
    /// `batch` or `online-sample`.
    pub neighbours: Neighbours,
    /// Online transitions added to the neighbour set with `neighbours = "online-sample"`.
    pub neighbour_samples: usize,
    /// `dimension` (s / d_s, VCSE), `none` or `dataset`.
    pub state_scaling: StateScaling,
    /// `batch-standardize` (VCSE) or `none`.
    pub q_scaling: QScaling,
    /// `online` (rows from the online buffer) or `all`.
    pub bonus_rows: BonusRows,
    /// `ksg` or `log2-max`.
    pub log_form: LogForm,
}

impl Default for SeraConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            lambda: 1.0,
            k: 10,
            q_reduction: QReduction::Min,
            normalization: Normalization::Tanh,
            neighbours: Neighbours::Batch,
            neighbour_samples: 4096,
            state_scaling: StateScaling::Dimension,
            q_scaling: QScaling::BatchStandardize,
            bonus_rows: BonusRows::Online,
            log_form: LogForm::Ksg,
        }
    }
}

impl SeraConfig {
    /// Reject settings that cannot work, naming the field. `batch_size` is the online batch.
    pub fn validate(&self, batch_size: usize) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::Config(m));
        if !self.lambda.is_finite() || self.lambda < 0.0 {
            return bad(format!("key `sera.lambda`: expected a finite number ≥ 0, found {}", self.lambda));
        }
        if self.k < 1 {
            return bad(format!("key `sera.k`: expected at least 1, found {}", self.k));
        }
        let pool = batch_size + if self.neighbours == Neighbours::OnlineSample { self.neighbour_samples } else { 0 };
        if self.k as usize > pool {
            return bad(format!("key `sera.k`: k = {} exceeds the {pool} samples the neighbours are searched among (the online batch{})", self.k, if self.neighbours == Neighbours::OnlineSample { " plus sera.neighbour_samples" } else { "" }));
        }
        if self.neighbours == Neighbours::OnlineSample && self.neighbour_samples == 0 {
            return bad(
                "key `sera.neighbour_samples`: expected at least 1 with neighbours = \"online-sample\", found 0".into(),
            );
        }
        Ok(())
    }
}

/// r_int of a batch and the pieces it is made of, each `[N]`.
pub struct Intrinsic {
    /// The intrinsic reward r_int.
    pub reward: Tensor,
    /// ε_i, the k-th smallest joint distance.
    pub epsilon: Tensor,
    /// n_v(i), the samples within ε_i in Q alone (int64).
    pub n_v: Tensor,
}

/// r_int for `states` `[N, d]` with values `q` `[N]`, the neighbours searched among
/// `ref_states` `[M, d]` / `ref_q` `[M]`, which must contain the N samples themselves (self
/// counted, as in VCSE; pass the batch itself for `neighbours = "batch"`). No gradient.
///
/// The state distances come from one float64 Gram matrix (states centred first, so
/// ‖s_i‖² + ‖s_j‖² − 2 s_i·s_j loses nothing that matters at float32 precision); the k-th
/// smallest joint distance and the counts run on the CPU in [`knn`]: libtorch's
/// `topk`/`kthvalue` over the N × M matrix cost more than the update they serve.
pub fn intrinsic_reward(
    states: &Tensor,
    q: &Tensor,
    ref_states: &Tensor,
    ref_q: &Tensor,
    k: i64,
    log_form: LogForm,
) -> Intrinsic {
    tch::no_grad(|| {
        let device = states.device();
        let d_s = states.size()[1];
        let centre = ref_states.to_kind(Kind::Double).mean_dim(0, true, Kind::Double);
        let (s, r) = (states.to_kind(Kind::Double) - &centre, ref_states.to_kind(Kind::Double) - &centre);
        let vec64 = |t: Tensor| {
            Vec::<f64>::try_from(t.to_device(tch::Device::Cpu).contiguous().view(-1)).expect("a double tensor")
        };
        let vec32 = |t: &Tensor| {
            Vec::<f32>::try_from(t.to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous().view(-1))
                .expect("a float tensor")
        };
        let norms = |t: &Tensor| vec64(t.square().sum_dim_intlist(1, false, Kind::Double));
        let gram = vec64(s.matmul(&r.transpose(0, 1)));
        let (eps_sq, n_v) = knn(&gram, &norms(&s), &norms(&r), &vec32(q), &vec32(ref_q), k as usize);
        let epsilon = Tensor::from_slice(&eps_sq).sqrt();
        let n_v = Tensor::from_slice(&n_v);
        let count_term = (n_v.to_kind(Kind::Double) + 1.0).digamma() / d_s as f64;
        let distance_term = match log_form {
            LogForm::Ksg => (&epsilon * 2.0 + LOG_GUARD).log(),
            LogForm::Log2Max => &epsilon * std::f64::consts::LN_2,
        };
        let reward = (count_term + distance_term).to_kind(states.kind()).to_device(device);
        Intrinsic { reward, epsilon: epsilon.to_kind(Kind::Float).to_device(device), n_v: n_v.to_device(device) }
    })
}

/// The k-NN of the estimator on plain slices, for N samples against a reference set of M:
/// `gram` `[N, M]` (s_i · s_j), the squared norms ‖s_i‖² `[N]` and ‖s_j‖² `[M]`, the values
/// `q` `[N]` and `ref_q` `[M]`. Returns, per row i, ε_i² = the k-th smallest over j of
/// max(‖s_i − s_j‖², (q_i − q_j)²), and n_v(i) = #{j : (q_i − q_j)² < ε_i²}. Squared distances
/// throughout (the order is the same, and no square root is taken per pair). Rows are split
/// over libtorch's OpenMP team when the matrix is large enough to pay for it.
pub fn knn(gram: &[f64], norms: &[f64], ref_norms: &[f64], q: &[f32], ref_q: &[f32], k: usize) -> (Vec<f64>, Vec<i64>) {
    let (n, m) = (q.len(), ref_q.len());
    assert!(
        gram.len() == n * m && norms.len() == n && ref_norms.len() == m && (1..=m).contains(&k),
        "knn: gram [{n}, {m}], k = {k}"
    );
    let mut eps_sq = vec![0f64; n];
    let mut n_v = vec![0i64; n];
    let threads = crate::nn::team::pieces(n * m, 1 << 14).min(n);
    let per = n.div_ceil(threads);
    let rows = |first: usize, eps: &mut [f64], counts: &mut [i64]| {
        // Each row as the bit patterns of its (non-negative) f64 values, whose integer order
        // is their numeric order: `select_nth_unstable` on u64 is the fastest selection here.
        let mut row = vec![0u64; m];
        for (o, (e, c)) in eps.iter_mut().zip(counts.iter_mut()).enumerate() {
            let i = first + o;
            let (qi, ni) = (q[i] as f64, norms[i]);
            for (((r, &g), &nj), &qj) in row.iter_mut().zip(&gram[i * m..(i + 1) * m]).zip(ref_norms).zip(ref_q) {
                let ds = ni + nj - 2.0 * g;
                let dv = (qj as f64 - qi) * (qj as f64 - qi);
                // dv ≥ +0, so the max is never negative (a rounding-negative ds loses).
                *r = (if ds > dv { ds } else { dv }).to_bits();
            }
            let kth = f64::from_bits(*row.select_nth_unstable(k - 1).1);
            *e = kth;
            *c = ref_q.iter().map(|&qj| ((qj as f64 - qi) * (qj as f64 - qi) < *e) as i64).sum();
        }
    };
    // On libtorch's own OpenMP team (`nn::team`): threads of ours would share their cores with
    // the team's threads spinning after the update's last op.
    let pieces: Vec<(usize, &mut [f64], &mut [i64])> =
        eps_sq.chunks_mut(per).zip(n_v.chunks_mut(per)).enumerate().map(|(t, (e, c))| (t * per, e, c)).collect();
    crate::nn::team::run(pieces, |(first, e, c)| rows(first, e, c));
    (eps_sq, n_v)
}

/// The bonus applied to batches: the config plus the state scaling taken from the dataset.
pub struct Sera {
    cfg: SeraConfig,
    /// μ and σ (`[d]`) for `state_scaling = "dataset"`.
    scaling: Option<(Tensor, Tensor)>,
    /// Consecutive batches whose tanh(r_int) spread was below [`CONSTANT_BONUS_STD`].
    flat_batches: AtomicUsize,
    /// The constant-bonus warning has been handed out.
    warned: AtomicBool,
}

impl Sera {
    /// `dataset_obs` (`[rows, d]`) gives the scaling for `state_scaling = "dataset"` and is
    /// required then; it is ignored otherwise.
    pub fn new(cfg: SeraConfig, dataset_obs: Option<&Tensor>) -> Result<Self, AgentError> {
        let scaling = match cfg.state_scaling {
            StateScaling::None | StateScaling::Dimension => None,
            StateScaling::Dataset => {
                let obs = dataset_obs.ok_or_else(|| AgentError::Config("key `sera.state_scaling`: \"dataset\" needs the run's offline dataset ([dataset]), and this run has none; use \"none\"".into()))?;
                let obs = obs.to_kind(Kind::Float);
                let mean = obs.mean_dim(0, false, Kind::Float);
                // A constant dimension keeps its raw scale instead of dividing by zero.
                let std = obs.std_dim(0, false, false);
                let std = std.where_self(&std.gt(1e-6), &Tensor::ones_like(&std));
                Some((mean, std))
            }
        };
        Ok(Self { cfg, scaling, flat_batches: AtomicUsize::new(0), warned: AtomicBool::new(false) })
    }

    /// The config.
    pub fn config(&self) -> &SeraConfig {
        &self.cfg
    }

    /// Q̂ from every member's `Q_i(s, a)` `[E, B]`: the ensemble reduced, `[B]`.
    fn reduce(&self, q: &Tensor) -> Tensor {
        match self.cfg.q_reduction {
            QReduction::Min => q.amin(0, false),
            QReduction::Mean => q.mean_dim(0, false, Kind::Float),
        }
    }

    /// States as the distances see them: `[B, d]`.
    fn scaled(&self, obs: &Tensor) -> Tensor {
        match (&self.scaling, self.cfg.state_scaling) {
            (Some((mean, std)), _) => (obs - mean.to_device(obs.device())) / std.to_device(obs.device()),
            (None, StateScaling::Dimension) => obs / obs.size()[1] as f64,
            (None, _) => obs.shallow_clone(),
        }
    }

    /// `q` `[N]` and the neighbours' `ref_q` `[M]` as the distances see them: with
    /// `q_scaling = "batch-standardize"` both standardized by the mean and biased variance of
    /// `ref_q` (the neighbour set, which holds the batch), VCSE's LayerNorm.
    pub fn scaled_q(&self, q: &Tensor, ref_q: &Tensor) -> (Tensor, Tensor) {
        match self.cfg.q_scaling {
            QScaling::None => (q.shallow_clone(), ref_q.shallow_clone()),
            QScaling::BatchStandardize => {
                let r = ref_q.to_kind(Kind::Double);
                let mean = r.mean(Kind::Double);
                let scale = (r.var(false) + Q_SCALING_EPS).sqrt();
                let z = |t: &Tensor| ((t.to_kind(Kind::Double) - &mean) / &scale).to_kind(q.kind());
                (z(q), z(ref_q))
            }
        }
    }

    /// The warning to print once when the bonus has stayed nearly constant: a per-batch
    /// standard deviation of tanh(r_int) below [`CONSTANT_BONUS_STD`] for
    /// [`CONSTANT_BONUS_PATIENCE`] batches in a row. `Some` at most once per `Sera`.
    pub fn take_warning(&self) -> Option<String> {
        if self.flat_batches.load(Ordering::Relaxed) < CONSTANT_BONUS_PATIENCE
            || self.warned.swap(true, Ordering::Relaxed)
        {
            return None;
        }
        Some(format!(
            "[sera]: the bonus has been nearly constant for {CONSTANT_BONUS_PATIENCE} batches in a row (per-batch std of tanh(r_int) < {CONSTANT_BONUS_STD}, see train/sera/bonus_spread): on a terminating task it acts as an alive bonus, not a novelty signal; check sera.q_scaling and sera.state_scaling (q_scaling = {:?}, state_scaling = {:?})",
            self.cfg.q_scaling, self.cfg.state_scaling
        ))
    }

    /// The extra neighbours of `neighbours = "online-sample"`: `extra`'s scaled states and their
    /// Q̂ under `agent`'s critic.
    pub fn neighbourhood(&self, agent: &dyn Agent, extra: &TransitionBatch) -> Result<Neighbourhood, AgentError> {
        let q =
            tch::no_grad(|| agent.critic_values(&extra.obs, &extra.action)).ok_or_else(|| no_critic(agent.name()))?;
        Ok(Neighbourhood { states: self.scaled(&extra.obs), q: self.reduce(&q) })
    }

    /// r_int `[B]` for `batch`'s states and reduced values `q` `[B]`, the neighbours searched in
    /// the batch plus `extra`, both scaled per `state_scaling` and `q_scaling`.
    pub fn r_int(&self, q: &Tensor, batch: &TransitionBatch, extra: Option<&Neighbourhood>) -> Tensor {
        let states = self.scaled(&batch.obs);
        let (ref_states, ref_q) = match extra {
            Some(e) => (
                Tensor::cat(&[&states, &e.states.to_device(states.device())], 0),
                Tensor::cat(&[q, &e.q.to_device(q.device())], 0),
            ),
            None => (states.shallow_clone(), q.shallow_clone()),
        };
        let (q, ref_q) = self.scaled_q(q, &ref_q);
        intrinsic_reward(&states, &q, &ref_states, &ref_q, self.cfg.k, self.cfg.log_form).reward
    }

    /// The bonus λ·tanh(r_int) `[B]` for `batch`, given its critic values `q` `[E, B]`, the
    /// neighbours searched in the batch plus `extra`, zero on offline rows under
    /// `bonus_rows = "online"`; and the statistics `train/sera/r_int_mean`, `train/sera/r_int_std`,
    /// `train/sera/bonus_spread` (the std of tanh(r_int) over the rows that get the bonus: near 0
    /// means a constant bonus), `train/sera/bonus_mean` (the mean bonus on those rows) and
    /// `train/sera/bonus_share` (Σ|bonus| / (Σ|r| + Σ|bonus|)).
    pub fn bonus(&self, q: &Tensor, batch: &TransitionBatch, extra: Option<&Neighbourhood>) -> (Tensor, Metrics) {
        let r_int = self.r_int(&self.reduce(q), batch, extra);
        let normalized = match self.cfg.normalization {
            Normalization::Tanh => r_int.tanh(),
            Normalization::None => r_int.shallow_clone(),
        };
        // 1 on the rows that get the bonus.
        let online = match (self.cfg.bonus_rows, &batch.is_offline) {
            (BonusRows::Online, Some(flags)) => Some(1.0 - flags.to_device(r_int.device()).to_kind(normalized.kind())),
            _ => None,
        };
        let bonus = match &online {
            Some(mask) => &normalized * mask * self.cfg.lambda,
            None => &normalized * self.cfg.lambda,
        };
        let receiving = match &online {
            Some(mask) => normalized.masked_select(&mask.gt(0.5)),
            None => normalized.shallow_clone(),
        };
        let spread = if receiving.size()[0] > 1 {
            receiving.to_kind(Kind::Double).std(false).double_value(&[])
        } else {
            f64::NAN
        };
        if spread.is_finite() {
            if spread < CONSTANT_BONUS_STD {
                self.flat_batches.fetch_add(1, Ordering::Relaxed);
            } else {
                self.flat_batches.store(0, Ordering::Relaxed);
            }
        }
        let (ext, added) =
            (batch.reward.abs().sum(Kind::Double).double_value(&[]), bonus.abs().sum(Kind::Double).double_value(&[]));
        let share = if ext + added > 0.0 { added / (ext + added) } else { 0.0 };
        let bonus_mean = if receiving.size()[0] > 0 {
            receiving.to_kind(Kind::Double).mean(Kind::Double).double_value(&[]) * self.cfg.lambda
        } else {
            f64::NAN
        };
        let mut stats = vec![
            ("train/sera/r_int_mean", r_int.mean(Kind::Double).double_value(&[])),
            ("train/sera/r_int_std", if r_int.size()[0] > 1 { r_int.std(false).double_value(&[]) } else { 0.0 }),
            ("train/sera/bonus_share", share),
        ];
        if spread.is_finite() {
            stats.push(("train/sera/bonus_spread", spread));
        }
        // The mean bonus on the rows that get it: away from 0 it is a per-step reward (or cost)
        // on top of the novelty signal, shifting Q by about its value / (1 − γ).
        if bonus_mean.is_finite() {
            stats.push(("train/sera/bonus_mean", bonus_mean));
        }
        (bonus, stats)
    }

    /// One update of `agent` on `batch` with the bonus on its rewards (computed with the
    /// critic as it is before this update, [`Agent::update_with_bonus`]), the neighbours in
    /// the batch plus `extra` (the online sample of `neighbours = "online-sample"`). Returns the
    /// update's metrics followed by the `train/sera/…` statistics. The runner's one call.
    pub fn update(
        &self,
        agent: &mut dyn Agent,
        batch: &TransitionBatch,
        extra: Option<&TransitionBatch>,
    ) -> Result<Metrics, AgentError> {
        let hood = extra.map(|e| self.neighbourhood(&*agent, e)).transpose()?;
        let mut stats = Metrics::new();
        let name = agent.name();
        let mut metrics = agent
            .update_with_bonus(batch, &mut |q| {
                let (bonus, s) = self.bonus(q, batch, hood.as_ref());
                stats = s;
                bonus
            })
            .ok_or_else(|| no_critic(name))?;
        metrics.extend(stats);
        Ok(metrics)
    }
}

/// Scaled states and Q̂ of extra neighbours (see [`Sera::neighbourhood`]).
pub struct Neighbourhood {
    states: Tensor,
    q: Tensor,
}

fn no_critic(agent: &str) -> AgentError {
    AgentError::Config(format!("[sera] is enabled but agent `{agent}` exposes no critic Q(s, a) to condition on"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    fn t(rows: &[&[f32]]) -> Tensor {
        let d = rows[0].len() as i64;
        Tensor::from_slice(&rows.concat()).view([rows.len() as i64, d])
    }

    fn r_int(states: &Tensor, q: &Tensor, k: i64) -> Intrinsic {
        intrinsic_reward(states, q, states, q, k, LogForm::Ksg)
    }

    #[test]
    fn an_isolated_state_gets_a_larger_bonus_than_clustered_ones_at_equal_q() {
        let mut rows: Vec<Vec<f32>> = (0..7).map(|i| vec![1e-4 * i as f32, -1e-4 * i as f32]).collect();
        rows.push(vec![10.0, 0.0]);
        let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        let s = t(&refs);
        let q = Tensor::zeros([8], (Kind::Float, Device::Cpu));
        let out = r_int(&s, &q, 3);
        let r: Vec<f32> = Vec::try_from(&out.reward).unwrap();
        let n_v: Vec<i64> = Vec::try_from(&out.n_v).unwrap();
        assert_eq!(n_v, vec![8; 8], "equal Q: every sample is within ε in Q");
        let clustered_max = r[..7].iter().cloned().fold(f32::MIN, f32::max);
        assert!(r[7] > clustered_max + 5.0, "isolated {} vs clustered max {clustered_max}", r[7]);
        // ε of the isolated state is its 3rd-nearest joint distance: about 10.
        let eps: Vec<f32> = Vec::try_from(&out.epsilon).unwrap();
        assert!((eps[7] - 10.0).abs() < 1e-2, "{}", eps[7]);
    }

    #[test]
    fn a_q_outlier_gets_the_largest_epsilon_and_bonus_at_identical_states() {
        let s = Tensor::ones([6, 3], (Kind::Float, Device::Cpu));
        let q = Tensor::from_slice(&[0.0f32, 0.1, 0.2, 0.1, 0.0, 50.0]);
        let out = r_int(&s, &q, 2);
        let eps: Vec<f32> = Vec::try_from(&out.epsilon).unwrap();
        let r: Vec<f32> = Vec::try_from(&out.reward).unwrap();
        let (emax, rmax) = (eps.iter().cloned().fold(f32::MIN, f32::max), r.iter().cloned().fold(f32::MIN, f32::max));
        assert_eq!(eps[5], emax);
        assert!((eps[5] - 49.8).abs() < 1e-3, "2nd nearest in Q of 50 is 0.2: {}", eps[5]);
        assert_eq!(r[5], rmax);
        assert!(r.iter().take(5).all(|&x| x < r[5] - 3.0), "{r:?}");
    }

    #[test]
    fn n_v_counts_self_and_epsilon_counts_self_as_the_first_neighbour() {
        // 1-D states 0, 1, 3 and Q 0, .5, .5: every joint distance D = max(|Δs|, |Δq|) is known.
        let s = t(&[&[0.0], &[1.0], &[3.0]]);
        let q = Tensor::from_slice(&[0.0f32, 0.5, 0.5]);
        // k = 1: the nearest with self counted is self, ε = 0 → the guard keeps it finite.
        let k1 = r_int(&s, &q, 1);
        let eps: Vec<f32> = Vec::try_from(&k1.epsilon).unwrap();
        assert_eq!(eps, vec![0.0, 0.0, 0.0]);
        let r: Vec<f32> = Vec::try_from(&k1.reward).unwrap();
        assert!(r.iter().all(|x| x.is_finite()));
        // ε = 0: no |Δq| < 0, so n_v = 0 and r = ψ(1)/1 + log(1e-5).
        let expected = -0.577_215_7 + (1e-5f64).ln() as f32;
        assert!((r[0] - expected).abs() < 1e-4, "{} vs {expected}", r[0]);
        // k = 2: ε = [1, 1, 2] (row 0: D to 1 = max(1, .5) = 1; row 2: D to 1 = 2).
        let k2 = r_int(&s, &q, 2);
        let eps: Vec<f32> = Vec::try_from(&k2.epsilon).unwrap();
        assert_eq!(eps, vec![1.0, 1.0, 2.0]);
        // n_v: row 0 → |Δq| = [0, .5, .5] < 1 → 3 (self included); row 2 → 3.
        let n_v: Vec<i64> = Vec::try_from(&k2.n_v).unwrap();
        assert_eq!(n_v, vec![3, 3, 3]);
        let r: Vec<f32> = Vec::try_from(&k2.reward).unwrap();
        // ψ(4) = 1 + 1/2 + 1/3 − γ.
        let psi4 = 1.0 + 0.5 + 1.0 / 3.0 - 0.577_215_664_9;
        assert!((r[2] as f64 - (psi4 + (4.0f64 + 1e-5).ln())).abs() < 1e-5, "{}", r[2]);
    }

    #[test]
    fn coincident_states_give_a_finite_bonus() {
        let s = Tensor::zeros([16, 5], (Kind::Float, Device::Cpu));
        let q = Tensor::zeros([16], (Kind::Float, Device::Cpu));
        let out = r_int(&s, &q, 10);
        let r: Vec<f32> = Vec::try_from(&out.reward).unwrap();
        // ε = 0 for all; n_v = 0; r = ψ(1)/5 + log(1e-5).
        let expected = (-0.577_215_664_9 / 5.0 + (1e-5f64).ln()) as f32;
        assert!(r.iter().all(|&x| (x - expected).abs() < 1e-4), "{r:?}");
    }

    #[test]
    fn scaling_all_states_by_c_shifts_every_bonus_by_log_c_at_equal_q() {
        let s = crate::rng::AgentRng::new(7).normal(&[64, 4], Device::Cpu);
        let q = Tensor::full([64], 3.0, (Kind::Float, Device::Cpu));
        let c = 7.5f64;
        let a = r_int(&s, &q, 5).reward;
        let b = r_int(&(&s * c), &q, 5).reward;
        let shift = (b - a).to_kind(Kind::Double);
        let (lo, hi) = (shift.min().double_value(&[]), shift.max().double_value(&[]));
        // Exact up to the 1e-5 guard (ε here is ≥ ~0.05, so the guard moves it by < 1e-3).
        assert!((lo - c.ln()).abs() < 2e-3 && (hi - c.ln()).abs() < 2e-3, "shift in [{lo}, {hi}], log c = {}", c.ln());
    }

    #[test]
    fn the_literal_form_is_log2_times_epsilon() {
        let s = t(&[&[0.0], &[2.0]]);
        let q = Tensor::from_slice(&[0.0f32, 0.0]);
        let out = intrinsic_reward(&s, &q, &s, &q, 2, LogForm::Log2Max);
        let r: Vec<f32> = Vec::try_from(&out.reward).unwrap();
        // ε = 2, n_v = 2: ψ(3) + 2 ln 2 = (1.5 − γ) + 1.3863.
        let expected = 1.5 - 0.577_215_664_9 + 2.0 * std::f64::consts::LN_2;
        assert!((r[0] as f64 - expected).abs() < 1e-5, "{} vs {expected}", r[0]);
    }

    #[test]
    fn neighbours_in_a_larger_set_shrink_epsilon() {
        let mut rng = crate::rng::AgentRng::new(3);
        let s = rng.normal(&[32, 3], Device::Cpu);
        let extra = rng.normal(&[512, 3], Device::Cpu);
        let q = Tensor::zeros([32], (Kind::Float, Device::Cpu));
        let refs = Tensor::cat(&[&s, &extra], 0);
        let rq = Tensor::zeros([544], (Kind::Float, Device::Cpu));
        let alone = r_int(&s, &q, 5).epsilon;
        let dense = intrinsic_reward(&s, &q, &refs, &rq, 5, LogForm::Ksg).epsilon;
        assert!(bool::try_from(dense.le_tensor(&alone).all()).unwrap());
        assert!(dense.mean(Kind::Float).double_value(&[]) < 0.6 * alone.mean(Kind::Float).double_value(&[]));
    }

    /// The same quantities with libtorch's dense ops (cdist without the mm expansion, kthvalue).
    fn dense_reference(s: &Tensor, q: &Tensor, rs: &Tensor, rq: &Tensor, k: i64) -> (Tensor, Tensor) {
        let joint = Tensor::cdist(s, rs, 2.0, 2).maximum(&(q.unsqueeze(1) - rq.unsqueeze(0)).abs());
        let (eps, _) = joint.kthvalue(k, 1, false);
        let n_v = (q.unsqueeze(1) - rq.unsqueeze(0)).abs().lt_tensor(&eps.unsqueeze(1)).sum_dim_intlist(
            1,
            false,
            Kind::Int64,
        );
        (eps, n_v)
    }

    #[test]
    fn the_knn_kernel_matches_dense_libtorch_ops() {
        let mut rng = crate::rng::AgentRng::new(11);
        for (n, extra, d, k) in [(256, 0, 17, 10), (64, 300, 5, 25), (33, 0, 1, 1)] {
            let s = rng.normal(&[n, d], Device::Cpu) * 3.0;
            // Q on a coarse grid, so ties in |Δq| occur.
            let q = (rng.normal(&[n], Device::Cpu) * 4.0).round();
            let (rs, rq) = if extra > 0 {
                (
                    Tensor::cat(&[&s, &rng.normal(&[extra, d], Device::Cpu)], 0),
                    Tensor::cat(&[&q, &rng.normal(&[extra], Device::Cpu).round()], 0),
                )
            } else {
                (s.shallow_clone(), q.shallow_clone())
            };
            let ours = intrinsic_reward(&s, &q, &rs, &rq, k, LogForm::Ksg);
            let (eps, n_v) = dense_reference(&s, &q, &rs, &rq, k);
            let diff = (&ours.epsilon - &eps).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "n {n} d {d} k {k}: ε differs by {diff}");
            let counts_differ = ours.n_v.ne_tensor(&n_v).sum(Kind::Int64).int64_value(&[]);
            assert_eq!(counts_differ, 0, "n {n} d {d} k {k}: n_v differs in {counts_differ} rows");
        }
    }

    /// SAC's and Cal-QL's bonus from the critic step's own pass equals the default path (one
    /// extra critic pass, then the update on the augmented batch).
    #[test]
    fn the_critic_steps_own_q_gives_the_default_paths_update() {
        use crate::calql::{self, CalQlConfig};
        use crate::sac::{Sac, SacConfig};
        let mut rng = crate::rng::AgentRng::new(5);
        let n = 64;
        let batch = TransitionBatch {
            obs: rng.normal(&[n, 5], Device::Cpu),
            action: rng.normal(&[n, 2], Device::Cpu).tanh(),
            reward: rng.normal(&[n], Device::Cpu),
            next_obs: rng.normal(&[n, 5], Device::Cpu),
            terminal: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            mc_return: Some(rng.normal(&[n], Device::Cpu)),
            is_offline: None,
        };
        let sera = Sera::new(SeraConfig { enabled: true, k: 5, ..SeraConfig::default() }, None).unwrap();
        let build: [&dyn Fn() -> Box<dyn Agent>; 3] = [
            &|| Box::new(Sac::new(SacConfig::default(), 5, 2, Device::Cpu, 1).unwrap()),
            &|| {
                Box::new(Sac::new(SacConfig { critic_steps: 2, ..SacConfig::default() }, 5, 2, Device::Cpu, 1).unwrap())
            },
            &|| Box::new(calql::new(CalQlConfig::default(), 5, 2, Device::Cpu, 1).unwrap()),
        ];
        for make in build {
            let (mut fast, mut plain) = (make(), make());
            for _ in 0..3 {
                let ours = sera.update(&mut *fast, &batch, None).unwrap();
                let q = plain.critic_values(&batch.obs, &batch.action).unwrap();
                let (bonus, _) = sera.bonus(&q, &batch, None);
                let mut augmented = batch.map_columns(|t| t.shallow_clone());
                augmented.reward = &batch.reward + bonus;
                let reference = plain.update(&augmented);
                for (name, x) in &reference {
                    let y = ours.iter().find(|(k, _)| k == name).unwrap().1;
                    assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "{}: {name} {x} vs {y}", fast.name());
                }
                assert!(ours.iter().any(|(k, v)| *k == "train/sera/bonus_share" && *v > 0.0));
            }
        }
    }

    fn batch_of(obs: Tensor, is_offline: Option<Tensor>) -> TransitionBatch {
        let n = obs.size()[0];
        let z = || Tensor::zeros([n], (Kind::Float, Device::Cpu));
        TransitionBatch {
            action: Tensor::zeros([n, 1], (Kind::Float, Device::Cpu)),
            reward: z(),
            next_obs: obs.shallow_clone(),
            terminal: z(),
            obs,
            mc_return: None,
            is_offline,
        }
    }

    fn spread(v: &Tensor) -> f64 {
        v.to_kind(Kind::Double).std(false).double_value(&[])
    }

    /// fidelity-audit-2 E8: with raw values, a Q̂ spread 100× the state spread fills every
    /// joint distance, and tanh(r_int) is the same ≈ 1 on every row (an alive bonus). VCSE's
    /// scaling (the defaults) gives a bonus that varies across rows.
    #[test]
    fn a_q_spread_100x_the_state_spread_still_gives_a_varying_bonus() {
        let mut rng = crate::rng::AgentRng::new(21);
        let (n, d) = (256, 11);
        let obs = rng.normal(&[n, d], Device::Cpu);
        let q = (rng.normal(&[n], Device::Cpu) * 100.0 + 300.0).unsqueeze(0);
        let batch = batch_of(obs, None);
        let faithful = Sera::new(SeraConfig { enabled: true, ..SeraConfig::default() }, None).unwrap();
        let raw = Sera::new(
            SeraConfig {
                enabled: true,
                q_scaling: QScaling::None,
                state_scaling: StateScaling::None,
                ..SeraConfig::default()
            },
            None,
        )
        .unwrap();
        let (b_faithful, stats) = faithful.bonus(&q, &batch, None);
        let (b_raw, _) = raw.bonus(&q, &batch, None);
        let (s_faithful, s_raw) = (spread(&b_faithful), spread(&b_raw));
        assert!(s_raw < CONSTANT_BONUS_STD, "raw values: the bonus should be nearly constant, std {s_raw}");
        assert!(b_raw.mean(Kind::Double).double_value(&[]) > 0.9, "raw values: tanh(r_int) ≈ 1");
        assert!(
            s_faithful > CONSTANT_BONUS_STD,
            "scaled values: the bonus should vary across rows (not be flagged constant), std {s_faithful}"
        );
        let logged = stats.iter().find(|(k, _)| *k == "train/sera/bonus_spread").unwrap().1;
        assert!((logged - s_faithful).abs() < 1e-6, "logged spread {logged} vs {s_faithful} (λ = 1)");
        let mean = stats.iter().find(|(k, _)| *k == "train/sera/bonus_mean").unwrap().1;
        assert!((mean - b_faithful.mean(Kind::Double).double_value(&[])).abs() < 1e-6, "logged mean {mean}");
    }

    /// The scaled estimator against a hand computation. States [0, 0], [2, 0], [6, 0] (d_s = 2,
    /// so s / d_s puts them at 0, 1, 3 on the first axis) and Q̂ = 0, 10, 30, standardized to
    /// q̃ = (q − 40/3) / √(1400/9 + 1e-5) ≈ −1.06904, −0.26726, 1.33631. With k = 2:
    /// row 0: D = [0, max(1, .80178), max(3, 2.40535)] → ε = 1, |Δq̃| < 1 for itself and row 1 → n_v = 2;
    /// row 1: D = [1, 0, max(2, 1.60357)] → ε = 1, n_v = 2 (itself, row 0);
    /// row 2: D = [3, 2, 0] → ε = 2, n_v = 2 (itself, row 1).
    /// r_int = ψ(3)/2 + log(2ε + 1e-5).
    #[test]
    fn the_scaled_estimator_equals_a_hand_computation() {
        let obs = t(&[&[0.0, 0.0], &[2.0, 0.0], &[6.0, 0.0]]);
        let q = Tensor::from_slice(&[0.0f32, 10.0, 30.0]).unsqueeze(0);
        let sera = Sera::new(SeraConfig { enabled: true, k: 2, ..SeraConfig::default() }, None).unwrap();
        let (qs, _) = sera.scaled_q(&q.squeeze_dim(0), &q.squeeze_dim(0));
        let scale = (1400.0f64 / 9.0 + 1e-5).sqrt();
        for (i, raw) in [0.0f64, 10.0, 30.0].iter().enumerate() {
            let want = (raw - 40.0 / 3.0) / scale;
            assert!(
                (qs.double_value(&[i as i64]) - want).abs() < 1e-6,
                "q̃[{i}] = {} vs {want}",
                qs.double_value(&[i as i64])
            );
        }
        let psi3 = 1.5 - 0.577_215_664_9;
        let want =
            [psi3 / 2.0 + (2.0f64 + 1e-5).ln(), psi3 / 2.0 + (2.0f64 + 1e-5).ln(), psi3 / 2.0 + (4.0f64 + 1e-5).ln()];
        let (bonus, _) = sera.bonus(&q, &batch_of(obs.shallow_clone(), None), None);
        let r = sera.r_int(&q.squeeze_dim(0), &batch_of(obs, None), None);
        for i in 0..3 {
            assert!(
                (r.double_value(&[i]) - want[i as usize]).abs() < 1e-5,
                "r_int[{i}] = {} vs {}",
                r.double_value(&[i]),
                want[i as usize]
            );
            assert!((bonus.double_value(&[i]) - want[i as usize].tanh()).abs() < 1e-5);
        }
    }

    /// `bonus_rows = "online"` (the default) leaves offline rows' rewards alone; `"all"` does not.
    #[test]
    fn offline_rows_get_no_bonus_by_default() {
        let mut rng = crate::rng::AgentRng::new(4);
        let obs = rng.normal(&[64, 3], Device::Cpu);
        let q = rng.normal(&[2, 64], Device::Cpu);
        let flags = Tensor::cat(
            &[Tensor::ones([32], (Kind::Float, Device::Cpu)), Tensor::zeros([32], (Kind::Float, Device::Cpu))],
            0,
        );
        let batch = batch_of(obs, Some(flags));
        let online = Sera::new(SeraConfig { enabled: true, k: 5, ..SeraConfig::default() }, None).unwrap();
        let all =
            Sera::new(SeraConfig { enabled: true, k: 5, bonus_rows: BonusRows::All, ..SeraConfig::default() }, None)
                .unwrap();
        let (b_online, _) = online.bonus(&q, &batch, None);
        let (b_all, _) = all.bonus(&q, &batch, None);
        assert_eq!(b_online.narrow(0, 0, 32).abs().max().double_value(&[]), 0.0, "offline rows got a bonus");
        assert!(
            b_online.narrow(0, 32, 32).ne_tensor(&b_all.narrow(0, 32, 32)).sum(Kind::Int64).int64_value(&[]) == 0,
            "online rows: the same bonus either way"
        );
        assert!(b_all.narrow(0, 0, 32).abs().max().double_value(&[]) > 0.0);
    }

    /// The warning comes once, after the patience, and a varying batch resets the count.
    #[test]
    fn a_constant_bonus_is_warned_about_once() {
        let obs = Tensor::zeros([16, 2], (Kind::Float, Device::Cpu));
        let q = Tensor::zeros([1, 16], (Kind::Float, Device::Cpu));
        let sera = Sera::new(SeraConfig { enabled: true, k: 3, ..SeraConfig::default() }, None).unwrap();
        let batch = batch_of(obs, None);
        for _ in 0..CONSTANT_BONUS_PATIENCE - 1 {
            let _ = sera.bonus(&q, &batch, None);
        }
        assert!(sera.take_warning().is_none());
        let _ = sera.bonus(&q, &batch, None);
        let w = sera.take_warning().expect("a warning after the patience");
        assert!(w.contains("q_scaling") && w.contains("bonus_spread"), "{w}");
        let _ = sera.bonus(&q, &batch, None);
        assert!(sera.take_warning().is_none(), "warned twice");
    }

    #[test]
    fn bad_settings_are_rejected_naming_the_key() {
        let err = |c: SeraConfig| c.validate(256).unwrap_err().to_string();
        assert!(err(SeraConfig { k: 0, ..Default::default() }).contains("sera.k"));
        assert!(err(SeraConfig { k: 300, ..Default::default() }).contains("exceeds the 256"));
        assert!(err(SeraConfig { lambda: -1.0, ..Default::default() }).contains("sera.lambda"));
        assert!(SeraConfig { k: 300, neighbours: Neighbours::OnlineSample, ..Default::default() }
            .validate(256)
            .is_ok());
        let toml_err = toml::from_str::<SeraConfig>("normalisation = \"tanh\"").unwrap_err().to_string();
        assert!(toml_err.contains("normalisation"), "{toml_err}");
        let parsed: SeraConfig = toml::from_str(
            "enabled = true\nlog_form = \"log2-max\"\nneighbours = \"online-sample\"\nq_reduction = \"mean\"",
        )
        .unwrap();
        assert_eq!(
            (parsed.log_form, parsed.neighbours, parsed.q_reduction),
            (LogForm::Log2Max, Neighbours::OnlineSample, QReduction::Mean)
        );
        let parsed: SeraConfig =
            toml::from_str("q_scaling = \"none\"\nstate_scaling = \"none\"\nbonus_rows = \"all\"").unwrap();
        assert_eq!(
            (parsed.q_scaling, parsed.state_scaling, parsed.bonus_rows),
            (QScaling::None, StateScaling::None, BonusRows::All)
        );
        let d = SeraConfig::default();
        assert_eq!(
            (d.q_scaling, d.state_scaling, d.bonus_rows),
            (QScaling::BatchStandardize, StateScaling::Dimension, BonusRows::Online),
            "VCSE's scaling and online rows are the defaults"
        );
    }
}
