//! Errors returned by envs. Every message names what was wrong, and what was expected.

use std::path::PathBuf;

/// Everything that can go wrong making or stepping an env.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)]
pub enum EnvError {
    #[error("unknown env id `{id}`; known ids: {}", known.join(", "))]
    UnknownId { id: String, known: Vec<String> },
    #[error("action has {found} numbers, but {env} expects {expected}")]
    ActionLength { env: String, expected: usize, found: usize },
    #[error("action for {env} is not finite at index {index}: {value}")]
    NonFiniteAction { env: String, index: usize, value: f32 },
    #[error("step() called on {env} before reset() or after the episode ended; call reset() first")]
    NeedsReset { env: String },
    #[error("MuJoCo asset `{}` not found: {hint}", path.display())]
    MissingAsset { path: PathBuf, hint: String },
    #[error("MuJoCo could not load `{}`: {message}", path.display())]
    ModelLoad { path: PathBuf, message: String },
    #[error("parity reference (Gymnasium through `{}`) failed: {message}", python.display())]
    Reference { python: PathBuf, message: String },
    #[error("sub-env {index} of the vector env: {source}")]
    SubEnv { index: usize, source: Box<EnvError> },
    #[error("{what}: expected {expected} numbers, found {found}")]
    Shape { what: String, expected: usize, found: usize },
    #[error("{0}")]
    Other(String),
}
