//! o2o-envs: Gymnasium-style environments.
//!
//! The [`Env`] trait follows Gymnasium's `reset`/`step` API with `terminated` and `truncated`
//! kept apart. MuJoCo tasks load Gymnasium's own XML assets from the set-up's virtualenv, so
//! "is your HalfCheetah the same HalfCheetah?" has a checkable answer (`o2o env parity`).

pub mod assets;
pub mod env;
pub mod error;

pub use env::{BoxSpace, Env, EnvSpec, Info, Step};
pub use error::EnvError;

/// The MuJoCo version of the linked library, e.g. `"3.17.0"`.
pub fn mujoco_version() -> String {
    mujoco_rs::mujoco_version().to_string()
}
