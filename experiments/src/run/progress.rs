//! Progress while a run trains: phase, steps, throughput, the latest episode and evaluation, and
//! the time left.
//!
//! On a terminal, a bar on stderr (`--progress bar`, the default there); elsewhere — nohup, a
//! batch scheduler, `2>log` — one plain line every `--progress-every` seconds (`--progress
//! plain`, the default when stderr is not a terminal); or nothing (`--progress off`).
//! Everything shown is also in `metrics.jsonl`.

use super::state::EvalResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, plain lines otherwise.
    #[default]
    Auto,
    /// A bar (drawn only on a terminal).
    Bar,
    /// One plain line every `every`.
    Plain,
    /// Nothing.
    Off,
}

/// [`ProgressMode`] and the interval of plain lines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressOptions {
    /// How.
    pub mode: ProgressMode,
    /// Between two plain lines.
    pub every: Duration,
}

impl Default for ProgressOptions {
    fn default() -> Self {
        Self { mode: ProgressMode::Auto, every: Duration::from_secs(30) }
    }
}

enum Shown {
    Bar(ProgressBar),
    Plain { every: Duration, last: Cell<Instant> },
    Off,
}

/// Progress over a run's loop steps.
pub struct Progress {
    shown: Shown,
    total: u64,
    /// Where this process started and when (for the rate and the time left).
    start: (u64, Instant),
    step: Cell<u64>,
    phase: Cell<&'static str>,
    /// Position and time of the last `show`, and the throughput measured there.
    last: Cell<(u64, Instant, f64)>,
    message: Cell<(Option<f64>, Option<EvalResult>)>,
}

impl Progress {
    /// Progress over `total` loop steps, starting at `done` (a resumed run).
    pub fn new(total: u64, done: u64, opts: ProgressOptions) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let shown = match opts.mode {
            ProgressMode::Off => Shown::Off,
            ProgressMode::Plain => Shown::Plain { every: opts.every, last: Cell::new(Instant::now()) },
            ProgressMode::Auto if !terminal => Shown::Plain { every: opts.every, last: Cell::new(Instant::now()) },
            ProgressMode::Auto | ProgressMode::Bar => {
                let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
                let style = ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} eta {eta} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
                bar.set_style(style);
                bar.set_position(done);
                bar.reset_eta();
                Shown::Bar(bar)
            }
        };
        let now = Instant::now();
        Self {
            shown,
            total,
            start: (done, now),
            step: Cell::new(done),
            phase: Cell::new(""),
            last: Cell::new((done, now, 0.0)),
            message: Cell::new((None, None)),
        }
    }

    /// Move to `step` within `phase`.
    pub fn set(&self, step: u64, phase: &'static str) {
        self.step.set(step);
        self.phase.set(phase);
        match &self.shown {
            Shown::Bar(bar) => {
                bar.set_position(step);
                bar.set_prefix(phase);
            }
            Shown::Plain { every, last } if last.get().elapsed() >= *every => {
                last.set(Instant::now());
                eprintln!("{}", self.plain_line());
            }
            _ => {}
        }
    }

    /// Show the latest episode and evaluation.
    pub fn show(&self, last_episode_return: Option<f64>, eval: Option<&EvalResult>) {
        self.message.set((last_episode_return, eval.copied()));
        let (pos, now) = (self.step.get(), Instant::now());
        let (p0, t0, mut rate) = self.last.get();
        if pos > p0 {
            rate = (pos - p0) as f64 / now.duration_since(t0).as_secs_f64().max(1e-9);
            self.last.set((pos, now, rate));
        }
        if let Shown::Bar(bar) = &self.shown {
            bar.set_message(format!("{rate:.0} steps/s  {}", self.latest()));
        }
    }

    /// `train return … eval return … (score …)`.
    fn latest(&self) -> String {
        let (ret, eval) = self.message.get();
        let mut msg = String::new();
        if let Some(r) = ret {
            msg.push_str(&format!("train return {r:.1}"));
        }
        if let Some(e) = eval {
            msg.push_str(&format!("  eval return {:.1}", e.mean_return));
            if let Some(s) = e.normalized_score {
                msg.push_str(&format!(" (score {s:.1})"));
            }
        }
        msg
    }

    /// `o2o: step 1200/5000 (online) · 350 steps/s · train return … · ETA 3m10s`.
    fn plain_line(&self) -> String {
        let step = self.step.get();
        let secs = self.start.1.elapsed().as_secs_f64().max(1e-9);
        let rate = step.saturating_sub(self.start.0) as f64 / secs;
        let eta = if rate > 0.0 { format_secs(self.total.saturating_sub(step) as f64 / rate) } else { "?".into() };
        let latest = self.latest();
        let latest = if latest.is_empty() { String::new() } else { format!(" · {}", latest.trim()) };
        format!("o2o: step {step}/{} ({}) · {rate:.0} steps/s{latest} · ETA {eta}", self.total, self.phase.get())
    }

    /// Leave the bar as it is (a last plain line for plain progress).
    pub fn finish(&self) {
        match &self.shown {
            Shown::Bar(bar) => bar.finish(),
            Shown::Plain { .. } => eprintln!("{}", self.plain_line()),
            Shown::Off => {}
        }
    }
}

/// `3h05m`, `4m10s`, `12s`.
fn format_secs(s: f64) -> String {
    let s = s.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}
