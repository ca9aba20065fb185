//! o2o-datasets: offline datasets and replay.
//!
//! Reads D4RL and Minari HDF5 files natively (no Python), writes them back, and turns them
//! into [`TransitionBatch`]es for the agents.

pub mod batch;

pub use batch::TransitionBatch;

/// The version of the HDF5 library this crate is linked against, e.g. `"1.10.8"`.
pub fn hdf5_version() -> String {
    let (a, b, c) = hdf5_metno::library_version();
    format!("{a}.{b}.{c}")
}
