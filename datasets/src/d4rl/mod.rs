//! D4RL: reader, writer and transition builders (formats.md §1).

mod memory;
mod qlearning;
mod read;
mod write;

pub use memory::{Columns, IN_MEMORY};
pub use qlearning::BuildOptions;
pub use read::{D4rlDataset, Episode, MetaValue, REQUIRED_KEYS};
