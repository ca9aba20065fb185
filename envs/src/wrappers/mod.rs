//! Wrappers: each takes an env and is an env. None of them merges `terminated` and `truncated`.

mod time_limit;

pub use time_limit::TimeLimit;
