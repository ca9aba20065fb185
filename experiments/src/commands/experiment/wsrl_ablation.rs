//! `o2o experiment wsrl-ablation`: why WSRL works (algorithms.md §1, the paper's Figs. on
//! warm-up and data retention), on one dataset, one online budget and several seeds:
//!
//! | variant | start | warm-up | online updates | offline data online |
//! |---|---|---|---|---|
//! | `wsrl` | Cal-QL pre-training | K frozen-policy steps | SAC, UTD 4 × 256, 10 critics | none |
//! | `wsrl-no-warmup` | the same checkpoint | none | the same | none |
//! | `calql-retain` | the same checkpoint | none | Cal-QL (regularizer kept), UTD 1 × 256 | 50/50 |
//! | `rlpd` | nothing (from scratch) | K uniformly random steps | RLPD, UTD 4 × 256 | 50/50 |
//!
//! Every variant gets the same env-step budget (K + N) and the same networks. Pre-training runs
//! once per seed, and the three pre-trained variants start from that one checkpoint, so they
//! differ only in what they do online. Pre-training uses Cal-QL (WSRL's recipe on AntMaze,
//! Adroit and Kitchen) so that the `calql-retain` baseline is Cal-QL proper; the `wsrl-*`
//! presets use CQL for locomotion, as the paper does. RLPD runs with UTD 4 on 1024-row batches
//! (WSRL's re-implementation of it, §1.6) rather than its own UTD 20, to match WSRL's compute.
//!
//! Runs are separate `o2o run` / `o2o train` processes (`--jobs` at a time, `--threads` torch
//! threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused, so
//! an interrupted experiment continues where it stopped. The output folder gets `table.md`
//! (mean ± std over seeds of the normalized score at fixed env steps), `curves.png` and
//! `results.json`.

use o2o_experiments::report::plot::{plot_curves, Line};
use o2o_experiments::report::runs::read_curve;
use o2o_experiments::report::stats::{mean, std_dev};
use crate::commands::run::DeviceArg;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Budget scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// The shipped small dataset and a 2-core budget (about an hour for 3 seeds).
    Small,
    /// D4RL's dataset and the paper's budget (a GPU job).
    Full,
}

/// Arguments of `o2o experiment wsrl-ablation`.
#[derive(Args, Debug)]
pub struct AblationArgs {
    /// D4RL task, e.g. `hopper-medium` (small scale: `data/<env>-small/<task>-v2.hdf5` must
    /// exist, see `o2o dataset make-benchmark`; full scale: the registry's `<task>-v2`).
    #[arg(long, default_value = "hopper-medium")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// `small` or `full`.
    #[arg(long, value_enum, default_value = "small")]
    pub scale: Scale,
    /// Output folder (default `experiments-out/wsrl-ablation-<task>-<scale>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs at a time.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Torch threads per run.
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// cpu, cuda, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// A config override for every run (e.g. a shorter budget), as in `o2o run --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The four variants, in table order.
pub const VARIANTS: [&str; 4] = ["wsrl", "wsrl-no-warmup", "calql-retain", "rlpd"];

/// Step counts of one scale (after `--set` overrides of the same keys).
#[derive(Debug, Clone, Copy)]
struct Budget {
    offline: u64,
    warmup: u64,
    online: u64,
    eval_every: u64,
}

/// One process to run.
struct Job {
    variant: &'static str,
    seed: u64,
    args: Vec<String>,
    /// Index of the job whose run directory this one starts from (`--from`).
    parent: Option<usize>,
    runs_dir: PathBuf,
}

/// `o2o experiment wsrl-ablation`.
pub fn run(args: AblationArgs) -> Result<()> {
    if args.seeds == 0 || args.jobs == 0 || args.threads < 1 {
        bail!("--seeds, --jobs and --threads must be at least 1");
    }
    let env_name = args.task.split('-').next().unwrap_or_default().to_string();
    let env = format!("{env_name}-v2");
    let scale = match args.scale {
        Scale::Small => "small",
        Scale::Full => "full",
    };
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/wsrl-ablation-{}-{scale}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;

    // The base preset and the settings every run shares.
    let (preset, mut shared): (String, Vec<String>) = match args.scale {
        Scale::Small => {
            let file = PathBuf::from(format!("data/{env_name}-small/{}-v2.hdf5", args.task));
            let file = std::fs::canonicalize(&file).with_context(|| {
                format!("the small-scale dataset {} is missing; make it with `o2o dataset make-benchmark {env_name} --scale small --out data/{env_name}-small`", file.display())
            })?;
            ("wsrl-hopper-small".into(), vec![format!("env={env}"), format!("dataset.path={:?}", file.display().to_string())])
        }
        Scale::Full => (format!("wsrl-{}", args.task), Vec::new()),
    };
    let base = o2o_experiments::run::presets::load(&preset).with_context(|| format!("no WSRL preset for task {}", args.task))?.1;
    shared.extend(args.set.iter().cloned());
    let budget = budget_of(&base, &shared)?;
    let (k, n) = (budget.warmup, budget.online);

    // Jobs: per seed, the pre-training, the three variants that start from it, and RLPD.
    let mut jobs: Vec<Job> = Vec::new();
    let runs_dir = |variant: &str, seed: u64| out.join("runs").join(variant).join(format!("seed-{seed}"));
    let mut pretrain = Vec::new();
    for seed in 0..args.seeds {
        pretrain.push(jobs.len());
        let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
        sets(&mut a, &shared);
        sets(&mut a, &["agent.pretrain=calql".into(), "train.warmup_steps=0".into(), "train.online_steps=0".into()]);
        jobs.push(Job { variant: "pretrain", seed, args: a, parent: None, runs_dir: runs_dir("pretrain", seed) });
    }
    for seed in 0..args.seeds {
        // RLPD from scratch, same networks and budget: K random steps, then N online steps.
        let mut a = vec!["train".to_string(), "--preset".into(), format!("rlpd-{}", args.task), "--seed".into(), seed.to_string()];
        let width = base.get("agent").and_then(|t| t.get("critic")).and_then(|c| c.get("hidden")).map(|h| h.to_string()).unwrap_or_else(|| "[256, 256]".into());
        sets(&mut a, &shared);
        sets(
            &mut a,
            &[
                "train.offline_steps=0".into(),
                "train.warmup_steps=0".into(),
                format!("train.random_steps={k}"),
                format!("train.online_steps={n}"),
                "train.batch_size=1024".into(),
                "train.offline_ratio=0.5".into(),
                "agent.critic_steps=4".into(),
                format!("agent.critic.hidden={width}"),
                format!("agent.actor.mlp.hidden={width}"),
                format!("eval.every={}", budget.eval_every),
                "eval.at_start=true".into(),
            ],
        );
        jobs.push(Job { variant: "rlpd", seed, args: a, parent: None, runs_dir: runs_dir("rlpd", seed) });
    }
    for seed in 0..args.seeds {
        let p = pretrain[seed as usize];
        let variant_sets: [(&'static str, Vec<String>); 3] = [
            ("wsrl", vec![]),
            ("wsrl-no-warmup", vec!["train.warmup_steps=0".into(), format!("train.online_steps={}", k + n)]),
            (
                "calql-retain",
                vec![
                    "train.warmup_steps=0".into(),
                    format!("train.online_steps={}", k + n),
                    "train.offline_ratio=0.5".into(),
                    "train.online_batch_size=256".into(),
                    "agent.pretrain=calql".into(),
                    "agent.online_conservative=true".into(),
                    "agent.online_critic_steps=1".into(),
                ],
            ),
        ];
        for (variant, extra) in variant_sets {
            let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
            sets(&mut a, &shared);
            sets(&mut a, &["agent.pretrain=calql".into()]);
            sets(&mut a, &extra);
            jobs.push(Job { variant, seed, args: a, parent: Some(p), runs_dir: runs_dir(variant, seed) });
        }
    }

    eprintln!(
        "wsrl-ablation: task {} ({scale}), seeds 0..{}, {} runs, {} at a time; budget: {} offline steps, {k} warm-up + {n} online env steps; output {}",
        args.task,
        args.seeds,
        jobs.len(),
        args.jobs,
        budget.offline,
        out.display()
    );
    let t0 = Instant::now();
    let dirs = run_jobs(&jobs, &args, &out)?;
    let cpu_s = children_cpu_seconds();
    eprintln!("all runs done in {:.0} s ({cpu_s:.0} s of CPU in the runs this process started)", t0.elapsed().as_secs_f64());

    // Curves: normalized score against env steps, per variant and seed.
    let mut curves: BTreeMap<&str, Vec<Vec<(f64, f64)>>> = BTreeMap::new();
    for (job, dir) in jobs.iter().zip(&dirs) {
        if job.variant == "pretrain" {
            continue;
        }
        let metrics = dir.join("metrics.jsonl");
        let curve = read_curve(&metrics, "eval/normalized_score", "env_step").or_else(|_| read_curve(&metrics, "eval/return", "env_step"))?;
        curves.entry(job.variant).or_default().push(curve);
    }
    let total = k + n;
    let mut steps: Vec<u64> = (0..=total).step_by(budget.eval_every.max(1) as usize).collect();
    if steps.last() != Some(&total) {
        steps.push(total);
    }
    let command = std::iter::once("o2o".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
    let table = table(&curves, &steps, &args.task, scale, args.seeds, &budget, &command, t0.elapsed().as_secs_f64(), cpu_s);
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(&out.join("curves.png"), &curves, &format!("WSRL ablation, {} ({scale}), {} seeds", args.task, args.seeds))?;
    let json = serde_json::json!({
        "task": args.task, "scale": scale, "seeds": args.seeds, "command": command,
        "budget": {"offline_steps": budget.offline, "warmup_steps": k, "online_steps": n, "eval_every": budget.eval_every},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&json)?)?;
    println!("{table}");
    println!("written: {}/table.md, {}/curves.png, {}/results.json", out.display(), out.display(), out.display());
    Ok(())
}

/// Append `--set s` for each override.
fn sets(args: &mut Vec<String>, overrides: &[String]) {
    for s in overrides {
        args.push("--set".into());
        args.push(s.clone());
    }
}

/// The step counts a preset table plus overrides resolve to.
fn budget_of(base: &toml::Table, overrides: &[String]) -> Result<Budget> {
    let mut t = base.clone();
    o2o_experiments::run::config::apply_overrides(&mut t, overrides)?;
    let get = |section: &str, key: &str| t.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64;
    let b = Budget { offline: get("train", "offline_steps"), warmup: get("train", "warmup_steps"), online: get("train", "online_steps"), eval_every: get("eval", "every") };
    if b.online == 0 || b.eval_every == 0 {
        bail!("the ablation needs train.online_steps and eval.every above 0");
    }
    Ok(b)
}

/// A finished run in `runs_dir` (one with `summary.json`), if any.
fn finished_run(runs_dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(runs_dir).ok()?;
    entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("summary.json").is_file()).max()
}

/// Run every job (parents before children, `--jobs` at a time); returns each job's run dir.
fn run_jobs(jobs: &[Job], args: &AblationArgs, out: &Path) -> Result<Vec<PathBuf>> {
    let exe = std::env::current_exe().context("cannot find the o2o executable")?;
    // Per job: None = not started, Some(Ok(dir)) done, Some(Err) failed.
    type Slot = Option<std::result::Result<PathBuf, String>>;
    let state: Arc<(Mutex<(Vec<Slot>, Vec<bool>)>, Condvar)> = Arc::new((Mutex::new((vec![None; jobs.len()], vec![false; jobs.len()])), Condvar::new()));
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
                        if taken.iter().all(|t| *t) {
                            return;
                        }
                        let ready = (0..jobs.len()).find(|&i| !taken[i] && jobs[i].parent.is_none_or(|p| slots[p].is_some()));
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
                    Ok(dir) => eprintln!("[{:>5.0} s] {} seed {} done: {}", t0.elapsed().as_secs_f64(), job.variant, job.seed, dir.display()),
                    Err(e) => eprintln!("[{:>5.0} s] {} seed {} FAILED: {e}", t0.elapsed().as_secs_f64(), job.variant, job.seed),
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
    for (job, slot) in jobs.iter().zip(slots) {
        match slot {
            Some(Ok(d)) => dirs.push(d),
            Some(Err(e)) => failed.push(format!("{} seed {}: {e}", job.variant, job.seed)),
            None => failed.push(format!("{} seed {}: not run", job.variant, job.seed)),
        }
    }
    if !failed.is_empty() {
        bail!("{} of {} runs failed (logs in {}/logs):\n  {}", failed.len(), jobs.len(), out.display(), failed.join("\n  "));
    }
    Ok(dirs)
}

/// One `o2o` process for `job` (or the finished run already there).
fn run_one(exe: &Path, job: &Job, parent: Option<&Path>, args: &AblationArgs, out: &Path) -> std::result::Result<PathBuf, String> {
    if let Some(done) = finished_run(&job.runs_dir) {
        return Ok(done);
    }
    let log_path = out.join("logs").join(format!("{}-seed{}.log", job.variant, job.seed));
    let log = std::fs::File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let mut c = Command::new(exe);
    c.args(&job.args);
    if let Some(p) = parent {
        c.arg("--from").arg(p);
    }
    let device = format!("{:?}", args.device).to_lowercase();
    c.args(["--device", &device, "--threads", &args.threads.to_string(), "--rerun=off", "--runs-dir"]).arg(&job.runs_dir);
    c.stdin(Stdio::null()).stdout(log.try_clone().map_err(|e| e.to_string())?).stderr(log);
    let status = c.status().map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    if !status.success() {
        return Err(format!("exited with {status}; see {}", log_path.display()));
    }
    finished_run(&job.runs_dir).ok_or_else(|| format!("no finished run in {}", job.runs_dir.display()))
}

/// User + system CPU seconds of this process's finished child processes (the runs).
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Mean and population standard deviation.
fn mean_std(v: &[f64]) -> (f64, f64) {
    (mean(v), std_dev(v))
}

/// The value of `curve` at env step `x` (the evaluation taken exactly there, the last if two).
fn at(curve: &[(f64, f64)], x: u64) -> Option<f64> {
    curve.iter().rev().find(|(s, _)| *s as u64 == x).map(|(_, y)| *y)
}

/// The markdown table: mean ± std over seeds at each of `steps`.
#[allow(clippy::too_many_arguments)]
fn table(curves: &BTreeMap<&str, Vec<Vec<(f64, f64)>>>, steps: &[u64], task: &str, scale: &str, seeds: u64, b: &Budget, command: &str, wall_s: f64, cpu_s: f64) -> String {
    let mut s = format!(
        "# WSRL ablation: {task} ({scale})\n\nD4RL normalized score (×100), mean ± std over {seeds} seeds, at fixed env steps of the online budget \
         ({} warm-up or random steps + {} online steps; step 0 is the offline policy). Pre-training: {} Cal-QL gradient steps, shared by the \
         three pre-trained variants of a seed.\n\nCommand: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the runs it started, \
         finished runs it reused not counted)\n\n| variant |",
        b.warmup, b.online, b.offline
    );
    for x in steps {
        s.push_str(&format!(" {x} |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(steps.len()));
    s.push('\n');
    for v in VARIANTS {
        let Some(runs) = curves.get(v) else { continue };
        s.push_str(&format!("| {v} |"));
        for &x in steps {
            let vals: Vec<f64> = runs.iter().filter_map(|c| at(c, x)).collect();
            if vals.is_empty() {
                s.push_str(" – |");
            } else {
                let (m, sd) = mean_std(&vals);
                s.push_str(&format!(" {m:.1} ± {sd:.1} |"));
            }
        }
        s.push('\n');
    }
    s
}

/// `curves.png`: each variant's mean over seeds (bold) and its seeds (faint).
fn plot(path: &Path, curves: &BTreeMap<&str, Vec<Vec<(f64, f64)>>>, title: &str) -> Result<()> {
    let mut lines = Vec::new();
    for (color, v) in VARIANTS.iter().enumerate() {
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
    plot_curves(path, title, "env steps (warm-up included)", "normalized score", &lines, (900, 560))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_takes_mean_and_std_at_fixed_steps() {
        let mut curves = BTreeMap::new();
        curves.insert("wsrl", vec![vec![(0.0, 10.0), (100.0, 20.0)], vec![(0.0, 20.0), (100.0, 40.0)]]);
        curves.insert("rlpd", vec![vec![(0.0, 1.0)], vec![(0.0, 3.0), (100.0, 5.0)]]);
        let b = Budget { offline: 5, warmup: 50, online: 50, eval_every: 100 };
        let t = table(&curves, &[0, 100], "hopper-medium", "small", 2, &b, "o2o experiment", 1.0, 2.0);
        assert!(t.contains("| wsrl | 15.0 ± 5.0 | 30.0 ± 10.0 |"), "{t}");
        assert!(t.contains("| rlpd | 2.0 ± 1.0 | 5.0 ± 0.0 |"), "{t}");
        let wsrl = t.find("| wsrl |").unwrap();
        assert!(wsrl < t.find("| rlpd |").unwrap(), "variants in table order");
    }

    #[test]
    fn budget_reads_the_preset_with_overrides() {
        let (_, base) = o2o_experiments::run::presets::load("wsrl-hopper-small").unwrap();
        let b = budget_of(&base, &["train.online_steps=7".into()]).unwrap();
        assert_eq!((b.warmup, b.online), (2500, 7));
        assert!(budget_of(&base, &["train.online_steps=0".into()]).is_err());
    }
}
