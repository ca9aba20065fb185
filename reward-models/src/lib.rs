//! o2o-reward-models: rewards computed from learned models.
//!
//! Today: potential-based shaping ([`shaping`]), the policy-invariant way to use a progress
//! estimate as a dense reward. The process reward model that estimates task progress and the
//! success classifier build on it.

pub mod shaping;

pub use shaping::{success_from_progress, PotentialShaping, ShapingError};
