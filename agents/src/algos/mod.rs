//! Algorithms, one file each, readable top to bottom against the paper.

pub mod iql;
pub mod sac;
