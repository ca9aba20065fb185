//! Replay: an offline dataset buffer, an online ring buffer, mixed sampling, and hindsight
//! relabelling (HER) of the online buffer's goal-conditioned rows.
//!
//! All buffers store contiguous `f32` columns and gather sampled rows straight into
//! preallocated tensors (no per-row allocation). Buffers hold no random state: every `sample`
//! takes the caller's RNG, so the run that owns the RNG can checkpoint it and resume exactly.

mod columns;
mod her;
mod mixed;
mod offline;
mod ring;

pub use columns::MC_PENDING;
pub use her::{GoalReward, GoalSlices, Her};
pub use mixed::{sample_union, sample_weighted, MixedSampler};
pub use offline::OfflineBuffer;
pub use ring::ReplayBuffer;
