//! One module per `o2o` subcommand (or group of subcommands).

pub mod doctor;
pub mod env;
