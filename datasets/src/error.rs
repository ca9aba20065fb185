//! Errors returned by o2o-datasets. Every message names the file (or URL, or dataset id), the
//! key, and what was expected against what was found, so a bad dataset is fixable from the
//! message alone.

use std::path::PathBuf;

/// Everything that can go wrong reading, writing, downloading or sampling a dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// An operating-system error on a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not a readable HDF5 file (truncated, corrupt, or another format).
    #[error("{}: not a readable HDF5 file (truncated or corrupt?): {message}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What HDF5 (or our own parser) said.
        message: String,
    },
    /// An HDF5 call on one key failed.
    #[error("{}: key `{key}`: {message}", path.display())]
    Hdf5 {
        /// The file.
        path: PathBuf,
        /// The key (HDF5 path inside the file).
        key: String,
        /// What HDF5 said.
        message: String,
    },
    /// A required key is absent.
    #[error("{}: missing key `{key}` (expected {expected})", path.display())]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The missing key.
        key: String,
        /// What should have been there.
        expected: String,
    },
    /// A key's first dimension differs from the others'.
    #[error("{}: key `{key}` has {found} rows, expected {expected} (the length of `{reference}`)", path.display())]
    LengthMismatch {
        /// The file.
        path: PathBuf,
        /// The key whose length is wrong.
        key: String,
        /// The key whose length was taken as the reference.
        reference: String,
        /// Expected number of rows.
        expected: usize,
        /// Found number of rows.
        found: usize,
    },
    /// A key has the wrong number of dimensions or the wrong shape.
    #[error("{}: key `{key}` has shape {found:?}, expected {expected}", path.display())]
    WrongShape {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Expected shape, in words (e.g. "rank 2: (N, obs_dim)").
        expected: String,
        /// Found shape.
        found: Vec<usize>,
    },
    /// A key's element type cannot be used.
    #[error("{}: key `{key}` has dtype {found}, expected {expected}", path.display())]
    WrongDtype {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Expected dtype(s).
        expected: String,
        /// Found dtype.
        found: String,
    },
    /// A NaN or infinite value where finite numbers are required.
    #[error("{}: key `{key}` has a non-finite value {value} at row {row}, column {column} (expected finite numbers)", path.display())]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// Row (transition) index.
        row: usize,
        /// Column index inside the row.
        column: usize,
        /// The value found.
        value: f64,
    },
    /// The dataset's observation or action size does not fit the chosen env.
    #[error("{}: key `{key}` has {found} columns, but env `{env}` expects {expected}", path.display())]
    EnvMismatch {
        /// The file.
        path: PathBuf,
        /// `observations` or `actions`.
        key: String,
        /// The env (or registry id) checked against.
        env: String,
        /// Size the env expects.
        expected: usize,
        /// Size found in the file.
        found: usize,
    },
    /// A metadata file (Minari `metadata.json`, a replay-buffer header) could not be parsed.
    #[error("{}: {message}", path.display())]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// A required file of a dataset folder is absent (a LeRobot folder without `meta/info.json`).
    #[error("{}: missing (expected {expected})", path.display())]
    MissingFile {
        /// The file that should exist.
        path: PathBuf,
        /// What it should hold.
        expected: String,
    },
    /// A metadata value that is present but not usable (a `codebase_version` we do not read, a
    /// path template with an unknown field, a flag that is out of order).
    #[error("{}: key `{key}`: expected {expected}, found {found}", path.display())]
    BadValue {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// What was expected, in words.
        expected: String,
        /// What was found.
        found: String,
    },
    /// A Parquet file could not be read or written.
    #[error("{}: Parquet: {message}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What the parquet crate said.
        message: String,
    },
    /// An id that is not in the registry.
    #[error(
        "unknown dataset id `{id}`; run `o2o dataset download --list` or see docs/datasets.md for the known ids{hint}"
    )]
    UnknownId {
        /// The id asked for.
        id: String,
        /// A suggestion, e.g. ", did you mean `hopper-medium-v2`?".
        hint: String,
    },
    /// The server answered with an HTTP error status.
    #[error("{url}: HTTP status {status} (expected 200 or 206)")]
    HttpStatus {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The server stopped sending data for longer than the timeout.
    #[error("{url}: no data for {secs} s (timeout); the partial file is kept at {} and the next download resumes from it", partial.display())]
    Timeout {
        /// The URL.
        url: String,
        /// The timeout in seconds.
        secs: u64,
        /// The partial file kept for resuming.
        partial: PathBuf,
    },
    /// A network error other than a timeout or an HTTP status.
    #[error("{url}: {message}")]
    Network {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The downloaded file's SHA-256 differs from the registry's.
    #[error("{url}: sha256 mismatch: expected {expected}, found {found}; the partial file {} was deleted", partial.display())]
    ChecksumMismatch {
        /// The URL.
        url: String,
        /// Expected hex digest.
        expected: String,
        /// Found hex digest.
        found: String,
        /// The (deleted) partial file.
        partial: PathBuf,
    },
    /// The downloaded size differs from the registry's or the server's announced size.
    #[error("{url}: downloaded {found} bytes, expected {expected}")]
    SizeMismatch {
        /// The URL.
        url: String,
        /// Expected bytes.
        expected: u64,
        /// Found bytes.
        found: u64,
    },
    /// A buffer was asked for a sample but holds no transitions.
    #[error("cannot sample from the {what}: it holds no transitions")]
    EmptyBuffer {
        /// Which buffer.
        what: String,
    },
    /// A value given to a buffer or builder does not fit its dimensions.
    #[error("{what}: expected {expected}, found {found}")]
    Dimension {
        /// What was being checked.
        what: String,
        /// Expected size.
        expected: usize,
        /// Found size.
        found: usize,
    },
    /// An argument outside its valid range.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A tensor operation failed (shapes from outside are checked before this can happen).
    #[error("tensor error: {0}")]
    Tensor(#[from] tch::TchError),
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, DatasetError>;

impl DatasetError {
    /// An [`DatasetError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DatasetError::Io { path: path.into(), source }
    }
}
