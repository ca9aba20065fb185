//! The runner: one run of an agent through its phases, into a run directory.
//!
//! - [`builder`]: [`Run`](builder::Run), the public way to configure and start, continue or
//!   fine-tune a run;
//! - [`prepare`]: everything a run needs, made and checked before it starts;
//! - [`runner`]: the loop itself, read top to bottom (act, learn, log, evaluate, checkpoint), and
//!   [`onpolicy`], the on-policy loop;
//! - [`actor`] and [`learner`]: the acting and learning halves, each usable without the other;
//! - [`config`], [`presets`], [`phases`]: what a run does;
//! - [`state`], [`rundir`], [`checkpoint`], [`data`], [`eval`], [`progress`], [`stages`]: the
//!   pieces the loops share;
//! - [`device`]: `--device auto|cpu|cuda`, resolved when used.
//!
//! See docs/runs.md for the run directory and the exact-resume guarantee.

pub mod actor;
pub mod builder;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod device;
pub mod eval;
pub mod fault;
pub mod her;
pub mod imaginebench;
pub mod interrupt;
pub mod learner;
pub mod onpolicy;
pub mod parent;
pub mod phases;
pub mod prepare;
pub mod presets;
pub mod progress;
pub mod rundir;
pub mod runner;
pub mod shaping;
pub mod stages;
pub mod state;
pub mod unio4;
