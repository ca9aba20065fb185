//! Algorithms, one file each, readable top to bottom against the paper.

pub mod calql;
pub mod cql;
mod flat;
pub mod iql;
pub mod rlpd;
pub mod sac;
pub mod wsrl;
