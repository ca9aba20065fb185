//! One module per `o2o` subcommand (or group of subcommands).

pub mod dataset;
pub mod bench;
pub mod doctor;
pub mod env;
pub mod report;
pub mod run;
pub mod view;
