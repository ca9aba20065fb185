//! The crate's one error type.

use std::path::PathBuf;

/// Errors from labels, progress models and the remote reward-model client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewardModelError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A configuration value is out of range.
    #[error("config key `{key}`: expected {expected}, found {found}")]
    Config {
        /// Dotted key, e.g. `labels.sample_factor`.
        key: String,
        /// What is allowed.
        expected: String,
        /// What was given.
        found: String,
    },
    /// Keyframes that do not fit their episode.
    #[error("keyframes of {episode}: {message}")]
    Keyframes {
        /// The episode or sidecar file.
        episode: String,
        /// What is wrong.
        message: String,
    },
    /// Demonstration data that does not fit the model's views.
    #[error("demonstration {demo}: {message}")]
    Demo {
        /// Which demonstration (index or name).
        demo: String,
        /// What is wrong.
        message: String,
    },
    /// A progress-model file that cannot be used.
    #[error("progress model {path}: {message}")]
    ModelFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (missing tensor, shape, config).
        message: String,
    },
    /// A libtorch error at the boundary.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// The reward-model server did not answer in time.
    #[error("reward-model server {url}: no answer within {secs:.1} s")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The per-request timeout.
        secs: f64,
    },
    /// The server answered with an error status or could not be reached.
    #[error("reward-model server {url}: {message}")]
    Server {
        /// The endpoint.
        url: String,
        /// Status or transport error.
        message: String,
    },
    /// The request queue is full; the request was not accepted.
    #[error("reward-model queue is full ({capacity} requests waiting)")]
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
}
