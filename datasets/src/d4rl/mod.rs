//! D4RL: reader, writer and transition builders (formats.md §1).

mod qlearning;
mod read;
mod write;

pub use qlearning::BuildOptions;
pub use read::{D4rlDataset, Episode, MetaValue, REQUIRED_KEYS};
