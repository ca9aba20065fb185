//! o2o-envs: Gymnasium-style environments.
//!
//! The [`Env`] trait follows Gymnasium's `reset`/`step` API with `terminated` and `truncated`
//! kept apart. MuJoCo tasks ([`mujoco::MujocoEnv`]) load Gymnasium's own XML assets from the
//! set-up's virtualenv and reproduce its `-v5` tasks and the `-v2` tasks the D4RL datasets were
//! logged in, so "is your HalfCheetah the same HalfCheetah?" has a checkable answer
//! (`o2o env parity`, [`parity`]). [`make`] builds a registered task in its time limit;
//! [`wrappers`] adapt actions, observations and rewards; [`vector::VecEnv`] steps many envs on
//! a fixed set of threads with results that do not depend on the thread count.
//!
//! ```no_run
//! use o2o_envs::{make, Env};
//! # fn main() -> Result<(), o2o_envs::EnvError> {
//! let mut env = make("Hopper-v5")?; // truncates at 1000 steps, like gymnasium.make
//! let mut obs = env.reset(Some(0))?;
//! loop {
//!     let action = vec![0.0f32; env.action_space().dim()];
//!     let step = env.step(&action)?;
//!     // `terminated`: do not bootstrap from step.obs; `truncated`: do.
//!     if step.terminated || step.truncated {
//!         break;
//!     }
//!     obs = step.obs;
//! }
//! # let _ = obs;
//! # Ok(())
//! # }
//! ```
//!
//! Design choice: the tasks are re-implemented in Rust on the same MuJoCo library rather than
//! driven through Python, because the physics is the cost floor (Gymnasium's HalfCheetah-v5 spends
//! two thirds of its step in `mj_step`) and a Rust step has no GIL, so a vector env scales with
//! cores. Parity with the Python oracle is checked, not assumed.

#![deny(missing_docs)]

pub mod assets;
pub mod bench;
pub mod env;
pub mod error;
pub mod imaginebench;
pub mod mujoco;
pub mod parity;
pub mod registry;
pub mod vector;
pub mod wrappers;

pub use env::{BoxSpace, Env, EnvSpec, GoalLayout, GoalSpec, Info, Step};
pub use error::EnvError;
pub use registry::{known_ids, make, make_mujoco, make_unwrapped, spec};
pub use vector::{VecEnv, VecStep};

/// The MuJoCo version of the linked library, e.g. `"3.17.0"`.
pub fn mujoco_version() -> String {
    mujoco_rs::mujoco_version().to_string()
}
