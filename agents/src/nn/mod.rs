//! Shared network pieces: one building block per file, each stating its equation and shapes.
//!
//! - [`ParamSet`]: named trainable tensors (what one optimizer and one checkpoint part hold);
//! - [`Mlp`]: dense layers with optional LayerNorm and dropout, orthogonal init;
//! - [`EnsembleMlp`]: `E` MLPs as one module, weights `[E, in, out]`, one `baddbmm` per layer,
//!   with its taped passes and one regression step with weight decay (`decayed_fit`, Uni-O4's
//!   dynamics);
//! - [`TanhGaussianActor`] (SAC) and [`GaussianActor`] (IQL, tanh'd mean);
//! - [`polyak_update`], [`Temperature`] (log-α or softplus), [`Adam`] with checkpointable moments;
//! - [`Trained`] (a network with its parameters and Adam) and [`Frozen`] (one no optimizer
//!   steps: a target network, π_old): the parts an agent is made of;
//! - [`BetaEncoding`], [`Conditioned`], [`BalanceModel`]: FamO2O's β encoding, β-conditioned
//!   policies and per-state balance model;
//! - `mlp_pass`: one network's training pass on the ensemble's CPU fast path (actors, V);
//! - `critic`: a critic ensemble with its Polyak target, built together, the TD target and one
//!   critic step;
//! - `value`: a state value V(s) fitted by expectile regression (IQL);
//! - [`cql`]: CQL's out-of-distribution log-sum-exp over sampled actions, in chunks;
//! - [`StateNorm`]: fixed dataset state statistics (TD3+BC, BC);
//! - [`PolicyGraph`]: a deterministic policy as data, its layers and weights (ONNX export);
//! - `silu`: a hidden layer's bias and SiLU fused into one CPU pass, forward and backward (the
//!   dynamics ensemble).
//! - `floats`: the float32 view of a contiguous CPU tensor that every fused CPU pass reads and
//!   writes through.
//! - `gemm`: batched float32 products on AVX-512 for the taped passes and the dynamics step
//!   (libtorch's MKL runs AVX2 kernels on AMD CPUs); [`fma_peak_gflops`], the cores' FMA ceiling.
//! - [`path`]: the one switch every fast-path gate above asks: [`force_generic`] sends the CPU
//!   down the device-generic path (the one CUDA takes), so tests can check it against the fast
//!   path; [`fast_hits`] counts the fast path's choices.

pub mod adam;
pub mod cql;
pub(crate) mod critic;
pub mod ensemble;
pub mod family;
pub(crate) mod floats;
pub mod gaussian;
pub(crate) mod gemm;
pub mod init;
pub(crate) mod mkl;
pub mod mlp;
pub(crate) mod mlp_pass;
pub mod obs_norm;
pub mod params;
pub mod path;
pub mod policy_graph;
pub mod polyak;
pub(crate) mod silu;
pub mod state_norm;
pub mod tanh_gaussian;
pub(crate) mod team;
pub mod temperature;
pub mod trained;
pub(crate) mod value;

pub use adam::{clip_grad_norm, Adam};
pub use ensemble::EnsembleMlp;
pub use family::{BalanceHeadInit, BalanceModel, BetaEncoding, BetaMap, BetaRange, Conditioned};
pub use gaussian::{GaussianActor, GaussianConfig};
pub use gemm::{avx512_products, fma_peak_gflops};
pub use init::WeightInit;
pub use mlp::{Activation, Dense, Mlp, MlpConfig};
pub use obs_norm::{ObsNorm, ObsNormConfig, ObsNormMode};
pub use params::ParamSet;
pub use path::{fast_hits, force_generic, generic_forced};
pub use policy_graph::{BetaSource, Layer, PolicyGraph};
pub use polyak::polyak_update;
pub use state_norm::StateNorm;
pub use tanh_gaussian::{TanhGaussianActor, TanhGaussianConfig};
pub use temperature::{Temperature, TemperatureForm};
pub use trained::{Frozen, Trained};
