//! Fault injection for the crash tests: `O2O_FAULT=<point>:<n>` kills the process with SIGKILL
//! the n-th time it passes `point` (1-based), exactly as `kill -9` would at that moment, so a
//! test can stop a run inside start-up, a step, a checkpoint or an evaluation on purpose.
//!
//! Points: `created` (a new run directory is in place, nothing else written yet), `step` (end
//! of a loop step), `checkpoint` (the checkpoint's files are written, not yet renamed into
//! place), `eval` (between two evaluation episodes), `summary` (before `summary.json`). Unset,
//! every call is one relaxed atomic load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static TARGET: OnceLock<Option<(String, u64)>> = OnceLock::new();
static HITS: AtomicU64 = AtomicU64::new(0);

fn target() -> &'static Option<(String, u64)> {
    TARGET.get_or_init(|| {
        let v = std::env::var("O2O_FAULT").ok()?;
        let (point, n) = v.split_once(':')?;
        Some((point.to_string(), n.parse().ok()?))
    })
}

/// Pass the fault point `name`.
pub fn point(name: &str) {
    if let Some((p, n)) = target() {
        if p == name && HITS.fetch_add(1, Ordering::Relaxed) + 1 == *n {
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}
