//! Progress while a run trains: phase, steps, throughput, the latest episode and evaluation, and
//! the time left.
//!
//! On a terminal, a bar on stderr (`--progress bar`, the default there); elsewhere — nohup, a
//! batch scheduler, `2>log` — one plain line every `--progress-every` seconds (`--progress
//! plain`, the default when stderr is not a terminal); or nothing (`--progress off`). A library
//! user can instead receive each update ([`ProgressSink`]): the Python package draws its notebook
//! bar from them. Everything shown is also in `metrics.jsonl`.

use super::state::EvalResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::fmt;
use std::io::IsTerminal;
use std::sync::Arc;
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
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressOptions {
    /// How.
    pub mode: ProgressMode,
    /// Between two plain lines (or two calls of the sink).
    pub every: Duration,
    /// Where updates go instead of stderr, unless `mode` is [`ProgressMode::Off`].
    pub sink: Option<ProgressSink>,
}

impl ProgressOptions {
    /// `mode`, a plain line every `every`, no sink.
    pub fn new(mode: ProgressMode, every: Duration) -> Self {
        Self { mode, every, sink: None }
    }

    /// Nothing shown.
    pub fn off() -> Self {
        Self::new(ProgressMode::Off, DEFAULT_EVERY)
    }
}

impl Default for ProgressOptions {
    fn default() -> Self {
        Self::new(ProgressMode::Auto, DEFAULT_EVERY)
    }
}

/// Between two plain lines by default.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(30);

/// One progress update, as a sink receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// Loop step reached.
    pub step: u64,
    /// Loop steps in the whole run.
    pub total: u64,
    /// The phase (`offline`, `warmup`, `online`, …).
    pub phase: &'static str,
    /// Loop steps per second since this process started.
    pub steps_per_s: f64,
    /// Seconds left at that rate (`None` before any step).
    pub eta_s: Option<f64>,
    /// Return of the latest finished training episode.
    pub train_return: Option<f64>,
    /// Mean return of the latest evaluation.
    pub eval_return: Option<f64>,
    /// Its normalized score, where the env has reference scores.
    pub eval_score: Option<f64>,
    /// The last update of the run (its loop ended or stopped).
    pub done: bool,
}

/// A receiver of [`ProgressUpdate`]s, called on the training thread at most once per
/// [`ProgressOptions::every`] and once at the end.
#[derive(Clone)]
pub struct ProgressSink(pub Arc<dyn Fn(&ProgressUpdate) + Send + Sync>);

impl ProgressSink {
    /// A sink calling `f`.
    pub fn new(f: impl Fn(&ProgressUpdate) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressSink(..)")
    }
}

impl PartialEq for ProgressSink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

enum Shown {
    Bar(ProgressBar),
    Plain { every: Duration, last: Cell<Instant> },
    Sink { sink: ProgressSink, every: Duration, last: Cell<Option<Instant>> },
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
        let every = opts.every;
        let plain = || Shown::Plain { every, last: Cell::new(Instant::now()) };
        let shown = match (opts.mode, opts.sink) {
            (ProgressMode::Off, _) => Shown::Off,
            (_, Some(sink)) => Shown::Sink { sink, every, last: Cell::new(None) },
            (ProgressMode::Plain, None) => plain(),
            (ProgressMode::Auto, None) if !terminal => plain(),
            (ProgressMode::Auto | ProgressMode::Bar, None) => {
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
            Shown::Sink { sink, every, last } if last.get().is_none_or(|t| t.elapsed() >= *every) => {
                last.set(Some(Instant::now()));
                (sink.0)(&self.update(false));
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

    /// Loop steps per second since this process started, and the seconds left at that rate.
    fn rate_and_eta(&self) -> (f64, Option<f64>) {
        let step = self.step.get();
        let secs = self.start.1.elapsed().as_secs_f64().max(1e-9);
        let rate = step.saturating_sub(self.start.0) as f64 / secs;
        (rate, (rate > 0.0).then(|| self.total.saturating_sub(step) as f64 / rate))
    }

    /// `o2o: step 1200/5000 (online) · 350 steps/s · train return … · ETA 3m10s`.
    fn plain_line(&self) -> String {
        let step = self.step.get();
        let (rate, eta) = self.rate_and_eta();
        let eta = eta.map_or_else(|| "?".into(), format_secs);
        let latest = self.latest();
        let latest = if latest.is_empty() { String::new() } else { format!(" · {}", latest.trim()) };
        format!("o2o: step {step}/{} ({}) · {rate:.0} steps/s{latest} · ETA {eta}", self.total, self.phase.get())
    }

    /// The state as a sink receives it.
    fn update(&self, done: bool) -> ProgressUpdate {
        let (rate, eta) = self.rate_and_eta();
        let (ret, eval) = self.message.get();
        ProgressUpdate {
            step: self.step.get(),
            total: self.total,
            phase: self.phase.get(),
            steps_per_s: rate,
            eta_s: eta,
            train_return: ret,
            eval_return: eval.map(|e| e.mean_return),
            eval_score: eval.and_then(|e| e.normalized_score),
            done,
        }
    }

    /// Leave the bar as it is (a last plain line for plain progress).
    pub fn finish(&self) {
        match &self.shown {
            Shown::Bar(bar) => bar.finish(),
            Shown::Plain { .. } => eprintln!("{}", self.plain_line()),
            Shown::Sink { sink, .. } => (sink.0)(&self.update(true)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn eval(mean_return: f64, score: Option<f64>) -> EvalResult {
        EvalResult {
            step: 0,
            mean_return,
            std_return: 0.0,
            mean_length: 1.0,
            normalized_score: score,
            success_rate: None,
        }
    }

    /// A sink gets the step, phase, latest returns, at most one update per `every`, and a last
    /// update marked done; `off` silences it.
    #[test]
    fn a_sink_receives_throttled_updates_and_a_final_one() {
        let got = Arc::new(Mutex::new(Vec::<ProgressUpdate>::new()));
        let into = got.clone();
        let sink = ProgressSink::new(move |u| into.lock().unwrap().push(u.clone()));
        let opts =
            ProgressOptions { sink: Some(sink.clone()), ..ProgressOptions::new(ProgressMode::Auto, Duration::ZERO) };
        let p = Progress::new(10, 2, opts);
        p.set(3, "offline");
        p.show(Some(5.0), Some(&eval(7.0, Some(12.5))));
        p.set(4, "online");
        p.finish();
        let got = got.lock().unwrap().clone();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[0].step, got[0].total, got[0].phase, got[0].done), (3, 10, "offline", false));
        assert_eq!(got[0].train_return, None);
        assert_eq!((got[1].step, got[1].phase), (4, "online"));
        assert_eq!((got[1].train_return, got[1].eval_return, got[1].eval_score), (Some(5.0), Some(7.0), Some(12.5)));
        assert!(got[2].done && got[2].step == 4);
        assert!(got[2].steps_per_s > 0.0 && got[2].eta_s.is_some_and(|s| s >= 0.0));

        // Throttled: with an hour between updates only the first and the final one come.
        let got = Arc::new(Mutex::new(0usize));
        let into = got.clone();
        let opts = ProgressOptions {
            sink: Some(ProgressSink::new(move |_| *into.lock().unwrap() += 1)),
            ..ProgressOptions::new(ProgressMode::Plain, Duration::from_secs(3600))
        };
        let p = Progress::new(100, 0, opts);
        (1..=50).for_each(|s| p.set(s, "online"));
        p.finish();
        assert_eq!(*got.lock().unwrap(), 2);

        // Off wins over a sink.
        let calls = Arc::new(Mutex::new(0usize));
        let into = calls.clone();
        let opts = ProgressOptions {
            sink: Some(ProgressSink::new(move |_| *into.lock().unwrap() += 1)),
            ..ProgressOptions::off()
        };
        let p = Progress::new(10, 0, opts);
        p.set(1, "online");
        p.finish();
        assert_eq!(*calls.lock().unwrap(), 0);
        assert_eq!(sink, sink.clone());
    }
}
