//! What every `o2o experiment` shares: jobs that are `o2o` processes (children started from
//! their parent's run directory with `--from`), run `--jobs` at a time and reused when a
//! finished run is already in their folder (so an interrupted experiment continues where it
//! stopped); the score table at fixed env steps and the curves plot.

use crate::report::plot::{plot_curves, Line};
use crate::report::stats::{mean, std_dev};
use crate::run::device::DeviceArg;
use crate::run::interrupt;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How the jobs' processes run (the experiments' `--jobs/--threads/--device` flags), and which
/// executable they are.
#[derive(Debug, Clone)]
pub struct Processes {
    /// Runs at a time.
    pub jobs: usize,
    /// Torch threads per run.
    pub threads: i32,
    /// cpu, cuda, or auto: each run's `--device`.
    pub device: DeviceArg,
    /// The `o2o` executable each job runs (the command line passes its own).
    pub exe: PathBuf,
}

impl Processes {
    /// Refuses a study with no seeds, no jobs or no threads, before anything runs.
    pub fn check(&self, seeds: u64) -> Result<()> {
        if seeds == 0 || self.jobs == 0 || self.threads < 1 {
            bail!("--seeds, --jobs and --threads must be at least 1");
        }
        Ok(())
    }
}

/// Curves per variant: one `(env step, score)` list per seed.
pub type Curves = BTreeMap<&'static str, Vec<Vec<(f64, f64)>>>;

/// One process to run.
pub struct Job {
    /// Variant name (the table row and the runs folder).
    pub variant: &'static str,
    /// The run seed.
    pub seed: u64,
    /// `o2o` arguments (`run --preset … --set …`).
    pub args: Vec<String>,
    /// Index of the job whose run directory this one starts from (`--from`).
    pub parent: Option<usize>,
    /// Where the run's directory goes.
    pub runs_dir: PathBuf,
}

/// Preset `name` (for `--task task`) with every run's overrides: `(shared, resolved)`, where
/// `shared` is the preset's relative data path made absolute (the runs record where their data
/// was; left out when `set` gives `dataset.path` itself) followed by `set`, and `resolved` the
/// preset table with `shared` applied (what the experiment reads its budget from).
pub fn preset_overrides(name: &str, task: &str, set: &[String]) -> Result<(Vec<String>, toml::Table)> {
    let (_, base) = crate::run::presets::load(name).with_context(|| format!("--task {task}: no preset {name}"))?;
    let mut shared = Vec::new();
    let path_given = set.iter().any(|s| s.trim_start().starts_with("dataset.path"));
    if let Some(path) = base.get("dataset").and_then(|d| d.get("path")).and_then(|p| p.as_str()).filter(|_| !path_given)
    {
        let file = std::fs::canonicalize(path).with_context(|| format!("the dataset {path} of preset {name} is missing (run from the repository root, or pass --set dataset.path=…)"))?;
        shared.push(format!("dataset.path={:?}", file.display().to_string()));
    }
    shared.extend(set.iter().cloned());
    let mut resolved = base;
    crate::run::config::apply_overrides(&mut resolved, &shared)?;
    Ok((shared, resolved))
}

/// Append `--set s` for each override.
pub fn sets(args: &mut Vec<String>, overrides: &[String]) {
    for s in overrides {
        args.push("--set".into());
        args.push(s.clone());
    }
}

/// A finished run in `runs_dir` (one with `summary.json`), if any.
pub fn finished_run(runs_dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(runs_dir).ok()?;
    entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("summary.json").is_file()).max()
}

/// The newest unfinished run in `runs_dir` (no `summary.json`) that has a complete checkpoint:
/// a run an earlier experiment process left when it was stopped, which `o2o resume` continues.
pub fn interrupted_run(runs_dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(runs_dir).ok()?;
    let mut unfinished: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.join("summary.json").is_file())
        .collect();
    // Run directories end in their start time, so the newest sorts last.
    unfinished.sort();
    unfinished.into_iter().rev().find(|p| crate::run::checkpoint::list(p).is_ok_and(|c| !c.is_empty()))
}

/// Run every job (parents before children, `--jobs` at a time); returns each job's run dir.
pub fn run_jobs(jobs: &[Job], args: &Processes, out: &Path) -> Result<Vec<PathBuf>> {
    let exe = args.exe.clone();
    // Per job: None = not started, Some(Ok(dir)) done, Some(Err) failed.
    type Slot = Option<std::result::Result<PathBuf, String>>;
    let state: Arc<(Mutex<(Vec<Slot>, Vec<bool>)>, Condvar)> =
        Arc::new((Mutex::new((vec![None; jobs.len()], vec![false; jobs.len()])), Condvar::new()));
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.min(jobs.len()) {
            let state = Arc::clone(&state);
            let exe = exe.clone();
            scope.spawn(move || loop {
                // Pick the first job not taken whose parent is done; stop when none is left.
                let (i, parent_dir) = {
                    let (lock, cv) = &*state;
                    let mut g = lock.lock().expect("job table");
                    loop {
                        let (slots, taken) = &mut *g;
                        // A stop (Ctrl-C, SIGTERM to this process) starts nothing new.
                        if taken.iter().all(|t| *t) || interrupt::requested() {
                            return;
                        }
                        let ready =
                            (0..jobs.len()).find(|&i| !taken[i] && jobs[i].parent.is_none_or(|p| slots[p].is_some()));
                        if let Some(i) = ready {
                            taken[i] = true;
                            let parent = jobs[i].parent.map(|p| slots[p].clone().expect("checked"));
                            break (i, parent);
                        }
                        g = cv.wait(g).expect("job table");
                    }
                };
                let job = &jobs[i];
                let result = match parent_dir {
                    Some(Err(e)) => Err(format!("its pre-training failed: {e}")),
                    parent => run_one(&exe, job, parent.and_then(|p| p.ok()).as_deref(), args, out),
                };
                match &result {
                    Ok(dir) => eprintln!(
                        "[{:>5.0} s] {} seed {} done: {}",
                        t0.elapsed().as_secs_f64(),
                        job.variant,
                        job.seed,
                        dir.display()
                    ),
                    Err(e) if e == NOT_STARTED => {}
                    Err(e) if e == STOPPED => eprintln!(
                        "[{:>5.0} s] {} seed {} stopped with a checkpoint",
                        t0.elapsed().as_secs_f64(),
                        job.variant,
                        job.seed
                    ),
                    Err(e) => eprintln!(
                        "[{:>5.0} s] {} seed {} FAILED: {e}",
                        t0.elapsed().as_secs_f64(),
                        job.variant,
                        job.seed
                    ),
                }
                let (lock, cv) = &*state;
                lock.lock().expect("job table").0[i] = Some(result);
                cv.notify_all();
            });
        }
    });
    let (lock, _) = &*state;
    let slots = std::mem::take(&mut lock.lock().expect("job table").0);
    let mut dirs = Vec::new();
    let mut failed = Vec::new();
    let (mut stopped, mut not_started) = (0, 0);
    for (job, slot) in jobs.iter().zip(slots) {
        match slot {
            Some(Ok(d)) => dirs.push(d),
            Some(Err(e)) if e == STOPPED => stopped += 1,
            Some(Err(e)) if e == NOT_STARTED => not_started += 1,
            Some(Err(e)) => failed.push(format!("{} seed {}: {e}", job.variant, job.seed)),
            None if interrupt::requested() => not_started += 1,
            None => failed.push(format!("{} seed {}: not run", job.variant, job.seed)),
        }
    }
    if interrupt::requested() {
        if !failed.is_empty() {
            eprintln!("failed before the stop:\n  {}", failed.join("\n  "));
        }
        return Err(StudyStopped { finished: dirs.len(), stopped, not_started }.into());
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} runs failed (logs in {}/logs):\n  {}",
            failed.len(),
            jobs.len(),
            out.display(),
            failed.join("\n  ")
        );
    }
    Ok(dirs)
}

/// [`run_jobs`], timed: each job's run dir, the wall seconds and the CPU seconds of the runs this
/// process started (finished runs it reused not counted), also said on stderr.
pub fn run_jobs_timed(jobs: &[Job], args: &Processes, out: &Path) -> Result<(Vec<PathBuf>, f64, f64)> {
    let t0 = Instant::now();
    let dirs = run_jobs(jobs, args, out)?;
    let (wall_s, cpu_s) = (t0.elapsed().as_secs_f64(), children_cpu_seconds());
    eprintln!("all runs done in {wall_s:.0} s ({cpu_s:.0} s of CPU in the runs this process started)");
    Ok((dirs, wall_s, cpu_s))
}

/// What [`run_one`] returns for a run that stopped on request with a checkpoint.
const STOPPED: &str = "stopped on request";
/// What [`run_one`] returns for a job a stop kept from starting (or ended before it had begun).
const NOT_STARTED: &str = "not started (stopped)";

/// An experiment stopped by a signal (Ctrl-C, SIGTERM to its PID): its running runs were asked to
/// stop and wrote checkpoints, nothing new started. Rerunning the same command continues: finished
/// runs are reused and a stopped one resumes from its checkpoint. The CLI exits with 130.
#[derive(Debug, thiserror::Error)]
#[error("the experiment was stopped: {finished} run(s) finished, {stopped} stopped with a checkpoint, {not_started} not started; run the same command again to continue")]
pub struct StudyStopped {
    /// Runs finished (now or by an earlier process).
    pub finished: usize,
    /// Runs that stopped with a checkpoint.
    pub stopped: usize,
    /// Runs not started.
    pub not_started: usize,
}

/// One `o2o` process for `job` (or the finished run already there). The child is stopped only
/// through this process ([`interrupt::child_stopped_with_parent`]): a stop asked of the experiment
/// is forwarded to it once, and it ends with a checkpoint ([`STOPPED`]).
fn run_one(
    exe: &Path,
    job: &Job,
    parent: Option<&Path>,
    args: &Processes,
    out: &Path,
) -> std::result::Result<PathBuf, String> {
    if let Some(done) = finished_run(&job.runs_dir) {
        return Ok(done);
    }
    if interrupt::requested() {
        // Taken just before the stop arrived: leave it for the next invocation.
        return Err(NOT_STARTED.to_string());
    }
    let log_path = out.join("logs").join(format!("{}-seed{}.log", job.variant, job.seed));
    let mut c = Command::new(exe);
    let device = format!("{:?}", args.device).to_lowercase();
    let log = if let Some(stopped) = interrupted_run(&job.runs_dir) {
        // Continue where an earlier process was stopped (exact resume: the same results as an
        // uninterrupted run), appending to its log.
        eprintln!("{} seed {}: continuing the interrupted run {}", job.variant, job.seed, stopped.display());
        c.arg("resume").arg(&stopped).args([
            "--device",
            &device,
            "--threads",
            &args.threads.to_string(),
            "--rerun=off",
        ]);
        std::fs::OpenOptions::new().create(true).append(true).open(&log_path)
    } else {
        c.args(&job.args);
        if let Some(p) = parent {
            c.arg("--from").arg(p);
        }
        c.args(["--device", &device, "--threads", &args.threads.to_string(), "--rerun=off", "--runs-dir"])
            .arg(&job.runs_dir);
        std::fs::File::create(&log_path)
    };
    let log = log.map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    c.stdin(Stdio::null()).stdout(log.try_clone().map_err(|e| e.to_string())?).stderr(log);
    let (status, forwarded) = wait_forwarding(&mut c).map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    if forwarded && status.code() == Some(130) && interrupted_run(&job.runs_dir).is_some() {
        return Err(STOPPED.to_string());
    }
    if forwarded && std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGTERM) {
        // Stopped while still loading, before it could catch the signal: nothing to resume.
        return Err(NOT_STARTED.to_string());
    }
    if !status.success() {
        return Err(format!("exited with {status}; see {}", log_path.display()));
    }
    finished_run(&job.runs_dir).ok_or_else(|| format!("no finished run in {}", job.runs_dir.display()))
}

/// Start `c` as a child stopped only through this process
/// ([`interrupt::child_stopped_with_parent`]) and wait for it, forwarding a stop asked of this
/// process once; returns its exit status and whether a stop was forwarded.
pub fn wait_forwarding(c: &mut Command) -> std::io::Result<(std::process::ExitStatus, bool)> {
    interrupt::child_stopped_with_parent(c);
    let mut child = c.spawn()?;
    let mut forwarded = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, forwarded));
        }
        if interrupt::requested() && !forwarded {
            forwarded = true;
            interrupt::forward(&child);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// User + system CPU seconds of this process's finished child processes (the runs).
pub fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Mean and population standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    (mean(v), std_dev(v))
}

/// The value of `curve` at env step `x` (the evaluation taken exactly there, the last if two).
pub fn at(curve: &[(f64, f64)], x: u64) -> Option<f64> {
    curve.iter().rev().find(|(s, _)| *s as u64 == x).map(|(_, y)| *y)
}

/// The markdown rows of the score table: mean ± std over seeds at each of `steps`, one row per
/// variant in `order` (variants without curves left out).
pub fn score_rows(curves: &Curves, steps: &[u64], order: &[&str]) -> String {
    rows_with(curves, steps, order, at, |m, sd| format!("{m:.1} ± {sd:.1}"))
}

/// [`score_rows`] with the value of a curve at a step read by `pick` and a cell's mean and std
/// written by `cell`.
pub fn rows_with(
    curves: &Curves,
    steps: &[u64],
    order: &[&str],
    pick: impl Fn(&[(f64, f64)], u64) -> Option<f64>,
    cell: impl Fn(f64, f64) -> String,
) -> String {
    let mut s = String::from("| variant |");
    for x in steps {
        s.push_str(&format!(" {x} |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(steps.len()));
    s.push('\n');
    for v in order {
        let Some(runs) = curves.get(v) else { continue };
        s.push_str(&format!("| {v} |"));
        for &x in steps {
            let vals: Vec<f64> = runs.iter().filter_map(|c| pick(c, x)).collect();
            if vals.is_empty() {
                s.push_str(" – |");
            } else {
                let (m, sd) = mean_std(&vals);
                s.push_str(&format!(" {} |", cell(m, sd)));
            }
        }
        s.push('\n');
    }
    s
}

/// `curves.png`: each variant's mean over seeds (bold) and its seeds (faint), in `order`.
pub fn plot(path: &Path, curves: &Curves, order: &[&str], title: &str, x_label: &str) -> Result<()> {
    plot_with_y(path, curves, order, title, x_label, "normalized score")
}

/// [`plot`] with the y axis named `y_label`.
pub fn plot_with_y(
    path: &Path,
    curves: &Curves,
    order: &[&str],
    title: &str,
    x_label: &str,
    y_label: &str,
) -> Result<()> {
    let mut lines = Vec::new();
    for (color, v) in order.iter().enumerate() {
        let Some(runs) = curves.get(v) else { continue };
        for c in runs {
            lines.push(Line { label: None, color, points: c.clone(), faint: true });
        }
        let xs: Vec<f64> = runs[0].iter().map(|(x, _)| *x).collect();
        let mean: Vec<(f64, f64)> = xs
            .iter()
            .filter_map(|&x| {
                let vals: Vec<f64> = runs.iter().filter_map(|c| at(c, x as u64)).collect();
                (vals.len() == runs.len()).then(|| (x, mean_std(&vals).0))
            })
            .collect();
        lines.push(Line { label: Some(v.to_string()), color, points: mean, faint: false });
    }
    plot_curves(path, title, x_label, y_label, &lines, (900, 560))
}

/// Per-seed values of each variant: variant → (seed → value).
pub type PerSeed = BTreeMap<&'static str, BTreeMap<u64, f64>>;

/// A paired comparison over seeds: `variant − reference` per seed (the seeds both have), their
/// mean with a 95 % bootstrap interval (seeds resampled with replacement, 50 000 replicates, as
/// `o2o report`'s intervals), and what the interval says.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Paired {
    /// The variant.
    pub variant: String,
    /// What it is compared against.
    pub reference: String,
    /// The seeds both have, ascending.
    pub seeds: Vec<u64>,
    /// `variant − reference`, per seed.
    pub diffs: Vec<f64>,
    /// Mean difference.
    pub mean: f64,
    /// 95 % interval of the mean difference.
    pub ci: (f64, f64),
    /// `higher` (the interval above 0), `lower` (below 0) or `inconclusive` (it spans 0).
    pub direction: &'static str,
}

/// [`Paired`] of `variant` against `reference` in `values`; `None` without a common seed.
pub fn paired(values: &PerSeed, variant: &str, reference: &str) -> Option<Paired> {
    use crate::report::stats::{aggregate_mean, stratified_bootstrap, DEFAULT_REPS};
    let (a, b) = (values.get(variant)?, values.get(reference)?);
    let seeds: Vec<u64> = a.keys().filter(|s| b.contains_key(s)).copied().collect();
    if seeds.is_empty() {
        return None;
    }
    let diffs: Vec<f64> = seeds.iter().map(|s| a[s] - b[s]).collect();
    let e = stratified_bootstrap(std::slice::from_ref(&diffs), aggregate_mean, DEFAULT_REPS, 0.95, 0);
    let direction = if e.lo > 0.0 {
        "higher"
    } else if e.hi < 0.0 {
        "lower"
    } else {
        "inconclusive"
    };
    Some(Paired {
        variant: variant.into(),
        reference: reference.into(),
        seeds,
        diffs,
        mean: e.point,
        ci: (e.lo, e.hi),
        direction,
    })
}

/// Markdown rows `| measure | variant − reference | mean [95 % CI] | per seed | direction |` for
/// each `(measure, values)` and each variant of `order` other than `reference`.
pub fn paired_rows(measures: &[(&str, &PerSeed)], reference: &str, order: &[&str]) -> (String, Vec<(String, Paired)>) {
    let mut s = String::from(
        "| measure | comparison | mean difference [95% CI] | per seed | direction |\n|---|---|---|---|---|\n",
    );
    let mut all = Vec::new();
    for (measure, values) in measures {
        for v in order.iter().filter(|v| **v != reference) {
            if let Some(p) = paired(values, v, reference) {
                let per: Vec<String> = p.seeds.iter().zip(&p.diffs).map(|(s, d)| format!("{s}: {d:+.1}")).collect();
                s.push_str(&format!(
                    "| {measure} | {v} − {reference} | {:+.1} [{:+.1}, {:+.1}] | {} | {} |\n",
                    p.mean,
                    p.ci.0,
                    p.ci.1,
                    per.join(", "),
                    p.direction
                ));
                all.push((measure.to_string(), p));
            }
        }
    }
    (s, all)
}

/// The mean of `curve`'s values at env steps in `(from, to]` (the evaluations of the online
/// phase after its start): the area under the learning curve per evaluation, the measure of how
/// fast a variant improves. `None` when no evaluation falls there.
pub fn mean_between(curve: &[(f64, f64)], from: u64, to: u64) -> Option<f64> {
    let v: Vec<f64> = curve.iter().filter(|(x, _)| (*x as u64) > from && (*x as u64) <= to).map(|(_, y)| *y).collect();
    (!v.is_empty()).then(|| mean(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stopped run is continued only when it has a complete checkpoint; of several, the
    /// newest; a finished run is never taken for one.
    #[test]
    fn an_interrupted_run_is_the_newest_unfinished_one_with_a_checkpoint() {
        let dir = std::env::temp_dir().join(format!("o2o-interrupted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mk = |name: &str, checkpoint: bool, finished: bool| {
            let run = dir.join(name);
            std::fs::create_dir_all(run.join("checkpoints/step-0000000100")).unwrap();
            if checkpoint {
                std::fs::write(run.join("checkpoints/step-0000000100").join(crate::run::checkpoint::STATE), "{}")
                    .unwrap();
            }
            if finished {
                std::fs::write(run.join("summary.json"), "{}").unwrap();
            }
        };
        assert_eq!(interrupted_run(&dir), None, "no runs dir");
        mk("run-0-20260101T000000Z", true, true);
        assert_eq!(interrupted_run(&dir), None, "a finished run is not interrupted");
        mk("run-0-20260101T000001Z", true, false);
        mk("run-0-20260101T000002Z", false, false);
        assert_eq!(interrupted_run(&dir), Some(dir.join("run-0-20260101T000001Z")), "the newest one with a checkpoint");
        mk("run-0-20260101T000003Z", true, false);
        assert_eq!(interrupted_run(&dir), Some(dir.join("run-0-20260101T000003Z")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Differences are taken per seed over the seeds both variants have; the interval of a
    /// consistent gain lies above 0, of mixed signs spans it.
    #[test]
    fn paired_differences_are_per_seed_with_a_bootstrap_interval() {
        let mut v = PerSeed::new();
        v.insert("a", (0..5).map(|s| (s, 10.0 + s as f64)).collect());
        v.insert("b", (1..6).map(|s| (s, 8.0 + s as f64)).collect());
        v.insert("c", (0..5).map(|s| (s, if s % 2 == 0 { 14.0 } else { 6.0 } + s as f64)).collect());
        let p = paired(&v, "a", "b").unwrap();
        assert_eq!(p.seeds, vec![1, 2, 3, 4]);
        assert_eq!(p.diffs, vec![2.0; 4]);
        assert_eq!((p.mean, p.ci, p.direction), (2.0, (2.0, 2.0), "higher"));
        let q = paired(&v, "c", "a").unwrap();
        assert_eq!(q.direction, "inconclusive", "{q:?}");
        assert!(q.ci.0 < 0.0 && q.ci.1 > 0.0);
        assert!(paired(&v, "a", "missing").is_none());
        let (rows, all) = paired_rows(&[("final", &v)], "a", &["a", "b", "c"]);
        assert_eq!(all.len(), 2);
        assert!(
            rows.contains("| final | b − a | -2.0 [-2.0, -2.0] | 1: -2.0, 2: -2.0, 3: -2.0, 4: -2.0 | lower |"),
            "{rows}"
        );
        assert_eq!(mean_between(&[(0.0, 1.0), (10.0, 3.0), (20.0, 5.0)], 0, 20), Some(4.0));
        assert_eq!(mean_between(&[(0.0, 1.0)], 0, 20), None);
    }

    #[test]
    fn score_rows_take_mean_and_std_at_fixed_steps_in_order() {
        let mut curves = Curves::new();
        curves.insert("wsrl", vec![vec![(0.0, 10.0), (100.0, 20.0)], vec![(0.0, 20.0), (100.0, 40.0)]]);
        curves.insert("rlpd", vec![vec![(0.0, 1.0)], vec![(0.0, 3.0), (100.0, 5.0)]]);
        let t = score_rows(&curves, &[0, 100], &["wsrl", "rlpd"]);
        assert!(t.contains("| wsrl | 15.0 ± 5.0 | 30.0 ± 10.0 |"), "{t}");
        assert!(t.contains("| rlpd | 2.0 ± 1.0 | 5.0 ± 0.0 |"), "{t}");
        assert!(t.find("| wsrl |").unwrap() < t.find("| rlpd |").unwrap(), "variants in the given order");
    }
}
