//! o2o-datasets: offline datasets and replay.
//!
//! Reads D4RL and Minari HDF5 files and LeRobotDataset folders natively (no Python), writes
//! them back, and turns them into [`TransitionBatch`]es for the agents.
//!
//! - [`transitions::Transitions`]: flat `(s, a, r, s', terminal)` columns;
//! - [`mc_returns`]: Monte-Carlo returns-to-go (Cal-QL's reference values);
//! - [`reward_scaling`]: rewards divided by a running std of the discounted return (Uni-O4's
//!   `dynamic` scaling);
//! - [`replay`]: [`OfflineBuffer`], the online [`ReplayBuffer`] and the [`MixedSampler`].
//!
//! Design choice: every buffer keeps plain `f32` columns in host memory and builds one tensor
//! per column per batch. Writing an env step into a `Vec` costs nanoseconds, while a per-step
//! tensor write costs microseconds of dispatch; and a host copy keeps checkpoints simple.

#![deny(missing_docs)]

pub mod adroit_binary;
pub mod atomic;
pub mod batch;
pub mod d4rl;
pub mod download;
pub mod error;
pub mod h5util;
pub mod imaginebench;
pub mod lerobot;
pub mod mc_returns;
pub mod minari;
pub mod registry;
pub mod replay;
pub mod reward_scaling;
pub mod rollout;
pub mod scores;
pub mod transitions;

pub use batch::TransitionBatch;
pub use error::{DatasetError, Result};
pub use replay::{MixedSampler, OfflineBuffer, ReplayBuffer};
pub use rollout::RolloutBuffer;
pub use transitions::Transitions;

/// The version of the HDF5 library this crate is linked against, e.g. `"1.10.8"`.
pub fn hdf5_version() -> String {
    let (a, b, c) = hdf5_metno::library_version();
    format!("{a}.{b}.{c}")
}
