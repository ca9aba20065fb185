//! The progress bar: phase, steps, throughput, and the latest evaluation.
//!
//! Drawn on stderr only when it is a terminal (indicatif hides it otherwise), so logs and tests
//! see nothing; everything it shows is also in `metrics.jsonl`.

use super::eval::EvalResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::time::Instant;

/// A progress bar over a run's loop steps.
pub struct Progress {
    bar: ProgressBar,
    /// Position and time of the last `show`, and the throughput measured there.
    last: Cell<(u64, Instant, f64)>,
}

impl Progress {
    /// A bar of `total` loop steps, starting at `done` (a resumed run).
    pub fn new(total: u64, done: u64) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
        let style = ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} eta {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_position(done);
        bar.reset_eta();
        Self { bar, last: Cell::new((done, Instant::now(), 0.0)) }
    }

    /// Move to `step` within `phase`.
    pub fn set(&self, step: u64, phase: &'static str) {
        self.bar.set_position(step);
        self.bar.set_prefix(phase);
    }

    /// Show the latest episode and evaluation.
    pub fn show(&self, last_episode_return: Option<f64>, eval: Option<&EvalResult>) {
        let (pos, now) = (self.bar.position(), Instant::now());
        let (p0, t0, mut rate) = self.last.get();
        if pos > p0 {
            rate = (pos - p0) as f64 / now.duration_since(t0).as_secs_f64().max(1e-9);
            self.last.set((pos, now, rate));
        }
        let mut msg = format!("{rate:.0} steps/s  ");
        if let Some(r) = last_episode_return {
            msg.push_str(&format!("train return {r:.1}"));
        }
        if let Some(e) = eval {
            msg.push_str(&format!("  eval return {:.1}", e.mean_return));
            if let Some(s) = e.normalized_score {
                msg.push_str(&format!(" (score {s:.1})"));
            }
        }
        self.bar.set_message(msg);
    }

    /// Leave the bar as it is.
    pub fn finish(&self) {
        self.bar.finish();
    }
}
