//! Configuration checks that name the field: `require(ok, field, must, found)` is an
//! [`AgentError::Config`] saying `{field} must be {must}, found {found}` unless `ok`.

use crate::AgentError;
use std::fmt::Display;

/// `Ok` when `ok`, else the error naming `field`, what it `must` be and the value `found`.
pub(crate) fn require(ok: bool, field: &str, must: &str, found: impl Display) -> Result<(), AgentError> {
    match ok {
        true => Ok(()),
        false => Err(AgentError::Config(format!("{field} must be {must}, found {found}"))),
    }
}

/// τ and γ in `[0, 1]`, prefixed with the algorithm's name (`sac.tau`).
pub(crate) fn tau_and_gamma(algo: &str, tau: f64, gamma: f64) -> Result<(), AgentError> {
    require((0.0..=1.0).contains(&tau), &format!("{algo}.tau"), "in [0, 1]", tau)?;
    require((0.0..=1.0).contains(&gamma), &format!("{algo}.gamma"), "in [0, 1]", gamma)
}

/// A dropout probability in `[0, 1)`.
pub(crate) fn dropout(field: &str, p: f64) -> Result<(), AgentError> {
    require((0.0..1.0).contains(&p), field, "in [0, 1)", p)
}
