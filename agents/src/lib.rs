//! o2o-agents: networks, algorithms and the agent contract.
//!
//! - [`Agent`] (in [`agent`]): `act`, `update(batch) -> Metrics`, full-state `save`/`load`.
//! - [`build`] / [`AgentConfig`] (in [`config`]): the runner's one constructor. A preset's
//!   `[agent]` table is TOML of `AgentConfig` (`algo = "sac"` or `"iql"` plus that
//!   algorithm's fields, see [`sac::SacConfig`] and [`iql::IqlConfig`]); call
//!   `build(&cfg, obs_dim, act_dim, device, seed)`. Also `"cql"`, `"calql"`, `"rlpd"`, `"wsrl"`,
//!   `"famo2o-iql"`, `"famo2o-cql"`.
//! - [`sac`], [`iql`], [`cql`], [`calql`], [`rlpd`], [`wsrl`] (files under `algos/`): one
//!   algorithm per file; CQL, Cal-QL, RLPD and WSRL reuse SAC's update and add or change one
//!   piece. [`famo2o_iql`] and [`famo2o_cql`] (FamO2O over IQL and CQL): a β-conditioned
//!   universal policy and a per-state balance model on top of each base algorithm's critic.
//! - [`nn`]: MLP, batched critic ensemble, actors, Polyak, temperature, Adam.
//! - [`sera`]: SERA's Q-conditioned state-entropy bonus, added by the runner to online batches.
//! - [`checkpoint`]: the one-file checkpoint format and [`Stateful`], the list of an agent's
//!   parts ([`nn::Trained`] networks, [`nn::Frozen`] ones) from which its save, load, partial
//!   load and optimizer reset follow; [`rng`]: the agent's random stream.
//!
//! The key design decision is that an agent owns *all* of its state — including Adam's moments
//! (our own [`nn::Adam`]) and its random stream (a ChaCha8 generator, [`rng::AgentRng`], never
//! libtorch's global one) — so that a checkpoint restores it exactly: on the CPU, "N updates"
//! and "N/2 updates, save, load into a fresh agent, N/2 updates" give bit-identical weights and
//! metrics, and warm-starting an online agent from an offline one is the same `load`.

#![deny(missing_docs)]

pub mod agent;
pub mod algos;
pub mod alloc;
pub mod checkpoint;
pub mod config;
pub mod nn;
pub mod rng;
pub mod sera;

pub use agent::{Agent, AgentError, DeterministicPolicy, MetricKeys, Metrics, OnPolicy, Phase, RewardBonus, Scatter};
pub use algos::{calql, cql, famo2o_cql, famo2o_iql, iql, ppo, rlpd, sac, unio4, wsrl};
pub use checkpoint::{Part, Stateful};
pub use config::{build, AgentConfig};
