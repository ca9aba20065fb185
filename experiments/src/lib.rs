//! o2o-experiments: the runner as a library, and the `o2o` command-line tool on top of it.
//!
//! A run takes a config (a preset, a TOML file or a [`RunConfig`] value, with `key=value`
//! overrides), an env (a MuJoCo task from the registry or any [`o2o_envs::Env`] you write)
//! and optionally offline data (a D4RL/Minari file or a dataset built in memory), and trains an
//! agent through its phases — offline gradient steps, random and warm-up env steps, online
//! fine-tuning — into a self-describing run directory: `config.toml`, `manifest.json`,
//! `metrics.jsonl`, `checkpoints/`, `recording.rrd`, `summary.json`. A run killed at any moment
//! continues exactly from its newest checkpoint.
//!
//! [`Run`] is the entry point; the rest is public so that other programs can host a part of the
//! loop (a robot driver the acting half, another process the learning half):
//!
//! - [`run`]: the builder [`Run`], preparing a run ([`run::prepare`]), the loop ([`run::runner`]), the acting half
//!   ([`run::actor`]: [`Actor`], [`Policy`], [`TransitionSink`]), the learning half
//!   ([`run::learner`]), evaluation, checkpoints, run directories, presets, the TOML config;
//! - [`logging`]: the metric sinks (`metrics.jsonl`, Rerun) and [`MetricSink`], the trait a
//!   sink of your own implements;
//! - [`report`]: scores over seeds from run directories (`o2o report`);
//! - [`export`]: a run's deterministic policy as a TorchScript file (`o2o export`);
//! - [`benchmarks`]: benchmark datasets made here, D4RL-style locomotion, mixed-quality,
//!   AntMaze, Adroit and ImagineBench files with their manifests (`o2o dataset make-benchmark`);
//! - [`bench`]: speed benchmarks against references measured in the same run (`o2o bench`);
//! - [`studies`]: multi-run studies over seeds, ablations and paper claims, each into one
//!   output folder with a table, curves and results (`o2o experiment`);
//! - [`errors`]: [`Error`], what the entry points return: a variant to match for a bad config,
//!   bad data, a damaged checkpoint, a directory that is not a run, a run in use, a stop;
//! - [`paths`]: where the set-up installed libtorch, the virtualenv and the scripts;
//! - [`robot`]: runs on a robot (env ids `robot:<config.toml>`, its recording and safety report).
//!
//! ```no_run
//! use o2o_experiments::Run;
//!
//! // SAC on Hopper-v5 for 20k env steps, into runs/sac-hopper-0-<time>/.
//! let done = Run::preset("sac-hopper")?.set(["train.online_steps=20000"])?.seed(0)?.run()?;
//! println!("{}: final return {:?}", done.dir.display(), done.summary.final_eval.map(|e| e.mean_return));
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! See `experiments/examples/` for an env of your own, a dataset built in memory and an exact
//! resume, and docs/library.md for the whole API.

#![warn(missing_docs)]

pub mod bench;
pub mod benchmarks;
pub mod errors;
pub mod export;
pub mod fleet;
pub mod logging;
pub mod paths;
pub mod report;
pub mod robot;
pub mod run;
pub mod studies;

pub use errors::Error;
pub use logging::{MetricSink, Record};
pub use run::actor::{Actor, Policy, Transition, TransitionSink};
pub use run::builder::{EnvFactory, Outcome, Run};
pub use run::config::RunConfig;
pub use run::rundir::Summary;
pub use run::state::EvalResult;
pub use run::state::RunnerState;
