//! One module per `o2o` subcommand (or group of subcommands).

pub mod bench;
pub mod dataset;
pub mod doctor;
pub mod env;
pub mod eval;
pub mod experiment;
pub mod export;
pub mod fleet;
pub mod reward;
pub mod robot;
pub mod run;
pub mod view;
