//! o2o-robot: running policies on physical robots.
//!
//! Every robot is an [`o2o_envs::Env`] behind a [`SafetyEnvelope`], so the loop that trains in
//! simulation trains on hardware unchanged. Drivers for specific robots and the real-time
//! control loop build on this.

pub mod safety;

pub use safety::{SafetyEnvelope, SafetyError, SafetyLimits};
