//! o2o-reward-models: rewards computed from learned models.
//!
//! Dopamine-style process rewards, in four layers:
//!
//! - [`labels`]: progress and hop labels from demonstrations and their keyframes, built the way
//!   Robo-Dopamine's released pipeline builds them (index-based progress on keyframe-stratified
//!   sample frames, hop × gap bin-balanced pairs, 5 % zero-hop pairs);
//! - [`progress`]: a step-aware progress model H(s_p, s_q) → [−1, 1] over named feature views,
//!   trained with libtorch, saved to one file with its config;
//! - [`reconstruct`]: Φ from hops (incremental, forward- and backward-anchored, their mean,
//!   the consistency-weighted update) and success detection Φ ≥ 1 − δ;
//! - [`evaluate`]: progress curves against the label ground truth and VOC per mode;
//! - [`potential`]: a progress model (or a goal task's true distance) as an online run's
//!   potential, and the shaped reward (PBRS, or the naive and per-step progress comparisons,
//!   r_gold from the env or from success detection);
//! - [`shaping`]: potential-based shaping r' = r + γΦ(s') − Φ(s), the policy-invariant way to
//!   use Φ as a dense reward;
//! - [`demos`]: scripted Fetch demonstrations with their keyframes, D4RL datasets plus a
//!   keyframe sidecar as training demos;
//! - [`grm`]: a client for the released vision-language reward model served behind an
//!   OpenAI-compatible chat endpoint (vLLM), with a bounded queue.
//!
//! Design choice: the potential enters the reward only through shaping. Using progress gained
//! as the reward (Φ(s') − Φ(s)) rewards lingering in high-progress states; shaping telescopes
//! to −Φ(s₀) over every terminated episode, so the optimal policy of the sparse task is kept.
#![deny(missing_docs)]

pub mod demos;
pub mod error;
pub mod evaluate;
pub mod grm;
pub mod labels;
pub mod potential;
pub mod progress;
pub mod reconstruct;
pub mod shaping;

pub use error::RewardModelError;
pub use potential::{GoalDistance, GoldReward, Potential, ProgressPotential, Shaper, ShapingMode};
pub use progress::{voc, Demo, ProgressModel, ProgressModelConfig, TrainReport, ViewSpec};
pub use reconstruct::{Estimate, Fusion, Tracker};
pub use shaping::{naive_reward, progress_reward, success_from_progress, PotentialShaping, ShapingError};
