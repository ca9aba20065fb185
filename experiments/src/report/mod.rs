//! `o2o report <run-dir ...> [--out dir]`: scores over seeds, with confidence intervals.
//!
//! Runs are grouped by preset and task. For each run, the final and the best value of the score
//! (`eval/normalized_score` by default) are read from `metrics.jsonl`; for each group, the mean
//! and the interquartile mean (IQM) over seeds with 95 % stratified-bootstrap confidence
//! intervals, computed as rliable does (`stats.rs`). Presets run on several tasks also get an
//! aggregate over tasks (runs resampled within each task). Output: `report.md` (also printed) and
//! one `curves-<task>.png` per task in `--out`.

pub mod plot;
pub mod runs;
pub mod stats;

use anyhow::{bail, Context, Result};
use clap::Args;
use runs::{load_run, Run};
use stats::{aggregate_iqm, aggregate_mean, stratified_bootstrap, Estimate, DEFAULT_REPS};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `o2o report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run directories; a directory without metrics.jsonl stands for its sub-directories that have one (e.g. `runs/`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Where report.md and the PNG curves are written.
    #[arg(long, default_value = "report")]
    pub out: PathBuf,
    /// The metrics.jsonl key to aggregate.
    #[arg(long, default_value = "eval/normalized_score")]
    pub metric: String,
    /// The x axis of the curves: grad_step, env_step or wall_s.
    #[arg(long, default_value = "grad_step")]
    pub x: String,
    /// Bootstrap replicates for the 95% confidence intervals (rliable's default is 50000).
    #[arg(long, default_value_t = DEFAULT_REPS)]
    pub reps: usize,
    /// Seed of the bootstrap's random generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Confidence level of every interval in the report.
const CI_SIZE: f64 = 0.95;

/// Expand directories that hold runs (but are not runs) into their run sub-directories.
fn expand_run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.join("metrics.jsonl").exists() {
            out.push(p.clone());
            continue;
        }
        if !p.is_dir() {
            bail!("{} is not a directory", p.display());
        }
        let mut subs: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("cannot list {}", p.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|s| s.join("metrics.jsonl").exists())
            .collect();
        if subs.is_empty() {
            bail!("{} has no metrics.jsonl, and none of its sub-directories has one", p.display());
        }
        subs.sort();
        out.extend(subs);
    }
    Ok(out)
}

/// The numbers of one group of runs.
#[derive(Debug)]
pub struct GroupStats {
    /// Runs in the group.
    pub runs: usize,
    /// Mean of the final scores.
    pub final_mean: Estimate,
    /// Interquartile mean of the final scores.
    pub final_iqm: Estimate,
    /// Mean of the best scores.
    pub best_mean: Estimate,
    /// Interquartile mean of the best scores.
    pub best_iqm: Estimate,
}

/// Mean and IQM with CIs for final and best scores; `tasks[m]` holds the runs of task m.
pub fn group_stats(final_by_task: &[Vec<f64>], best_by_task: &[Vec<f64>], reps: usize, seed: u64) -> GroupStats {
    GroupStats {
        runs: final_by_task.iter().map(Vec::len).sum(),
        final_mean: stratified_bootstrap(final_by_task, aggregate_mean, reps, CI_SIZE, seed),
        final_iqm: stratified_bootstrap(final_by_task, aggregate_iqm, reps, CI_SIZE, seed),
        best_mean: stratified_bootstrap(best_by_task, aggregate_mean, reps, CI_SIZE, seed),
        best_iqm: stratified_bootstrap(best_by_task, aggregate_iqm, reps, CI_SIZE, seed),
    }
}

fn fmt_est(e: &Estimate) -> String {
    format!("{:.1} [{:.1}, {:.1}]", e.point, e.lo, e.hi)
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "—".into())
}

/// A file-name-safe version of a task name.
fn file_stem(task: &str) -> String {
    task.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

/// Mean curve over runs: the mean at every x that all runs logged, or, if the runs share fewer
/// than two x values, at every x any run logged (averaging the runs that have it).
fn mean_curve(runs: &[&Run]) -> Vec<(f64, f64)> {
    let mut by_x: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for (x, y) in &r.curve {
            by_x.entry(x.to_bits()).or_default().push(*y);
        }
    }
    let all: Vec<(f64, f64)> = by_x.iter().map(|(x, ys)| (f64::from_bits(*x), stats::mean(ys))).collect();
    let shared: Vec<(f64, f64)> =
        by_x.iter().filter(|(_, ys)| ys.len() == runs.len()).map(|(x, ys)| (f64::from_bits(*x), stats::mean(ys))).collect();
    let mut curve = if shared.len() >= 2 { shared } else { all };
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    curve
}

/// Build the report for `runs` (already loaded): the markdown text and the curves' PNG files.
pub fn build_report(runs: &[Run], args: &ReportArgs) -> Result<String> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    // preset → task → runs, in name order.
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&Run>>> = BTreeMap::new();
    for r in runs {
        groups.entry(&r.preset).or_default().entry(&r.task).or_default().push(r);
    }
    let mut md = String::new();
    writeln!(md, "# o2o report\n")?;
    writeln!(
        md,
        "Score: `{}` from each run's metrics.jsonl; *final* is its last value, *best* its highest. \
         Intervals are 95% stratified percentile-bootstrap confidence intervals (rliable's method: \
         runs resampled within each task), {} replicates, seed {}. IQM is the 25% trimmed mean.\n",
        args.metric, args.reps, args.seed
    )?;
    writeln!(md, "## By preset and task\n")?;
    writeln!(md, "| preset | task | runs | final: mean [CI] | final: IQM [CI] | best: mean [CI] | best: IQM [CI] |")?;
    writeln!(md, "|---|---|---:|---|---|---|---|")?;
    let mut multi_task = Vec::new();
    for (preset, tasks) in &groups {
        let (mut finals_all, mut bests_all) = (Vec::new(), Vec::new());
        for (task, rs) in tasks {
            let finals: Vec<f64> = rs.iter().filter_map(|r| r.final_score()).collect();
            let bests: Vec<f64> = rs.iter().filter_map(|r| r.best_score()).collect();
            if finals.is_empty() {
                writeln!(md, "| {preset} | {task} | 0 | — | — | — | — |")?;
                continue;
            }
            let g = group_stats(&[finals.clone()], &[bests.clone()], args.reps, args.seed);
            writeln!(
                md,
                "| {preset} | {task} | {} | {} | {} | {} | {} |",
                g.runs,
                fmt_est(&g.final_mean),
                fmt_est(&g.final_iqm),
                fmt_est(&g.best_mean),
                fmt_est(&g.best_iqm)
            )?;
            finals_all.push(finals);
            bests_all.push(bests);
        }
        if finals_all.len() > 1 {
            multi_task.push((preset, group_stats(&finals_all, &bests_all, args.reps, args.seed), finals_all.len()));
        }
    }
    if !multi_task.is_empty() {
        writeln!(md, "\n## By preset, over tasks\n")?;
        writeln!(md, "Mean = mean of per-task means; IQM over all runs of all tasks; runs resampled within each task.\n")?;
        writeln!(md, "| preset | tasks | runs | final: mean [CI] | final: IQM [CI] | best: mean [CI] | best: IQM [CI] |")?;
        writeln!(md, "|---|---:|---:|---|---|---|---|")?;
        for (preset, g, n_tasks) in &multi_task {
            writeln!(
                md,
                "| {preset} | {n_tasks} | {} | {} | {} | {} | {} |",
                g.runs,
                fmt_est(&g.final_mean),
                fmt_est(&g.final_iqm),
                fmt_est(&g.best_mean),
                fmt_est(&g.best_iqm)
            )?;
        }
    }
    writeln!(md, "\n## Runs\n")?;
    writeln!(md, "| run | preset | task | seed | final | best | evaluations |")?;
    writeln!(md, "|---|---|---|---:|---:|---:|---:|")?;
    for r in runs {
        let seed = r.seed.map(|s| s.to_string()).unwrap_or_else(|| "—".into());
        writeln!(
            md,
            "| {} | {} | {} | {seed} | {} | {} | {} |",
            r.dir.display(),
            r.preset,
            r.task,
            fmt_opt(r.final_score()),
            fmt_opt(r.best_score()),
            r.curve.len()
        )?;
    }
    // One plot per task: a bold mean line per preset over its seeds' faint lines.
    let mut by_task: BTreeMap<&str, Vec<(&str, Vec<&Run>)>> = BTreeMap::new();
    for (preset, tasks) in &groups {
        for (task, rs) in tasks {
            by_task.entry(task).or_default().push((preset, rs.clone()));
        }
    }
    let mut pictures = String::new();
    for (task, presets) in &by_task {
        let mut lines = Vec::new();
        for (i, (preset, rs)) in presets.iter().enumerate() {
            for r in rs.iter().filter(|r| !r.curve.is_empty()) {
                lines.push(plot::Line { label: None, color: i, points: r.curve.clone(), faint: true });
            }
            let mean = mean_curve(rs);
            if !mean.is_empty() {
                lines.push(plot::Line { label: Some(format!("{preset} ({} runs)", rs.len())), color: i, points: mean, faint: false });
            }
        }
        if lines.is_empty() {
            continue;
        }
        let name = format!("curves-{}.png", file_stem(task));
        match plot::plot_curves(&args.out.join(&name), task, &args.x, &args.metric, &lines, (900, 560)) {
            Ok(()) => writeln!(pictures, "![{task}]({name})\n")?,
            Err(e) => eprintln!("o2o report: no curves for {task}: {e:#}"),
        }
    }
    if !pictures.is_empty() {
        writeln!(md, "\n## Curves\n\nBold: mean over runs; faint: each run.\n\n{pictures}")?;
    }
    Ok(md)
}

/// Write `text` to `path` through a temporary file, so no half-written report is left behind.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// `o2o report`.
pub fn run(args: ReportArgs) -> Result<()> {
    if !["grad_step", "env_step", "wall_s"].contains(&args.x.as_str()) {
        bail!("--x must be grad_step, env_step or wall_s, found {:?}", args.x);
    }
    let dirs = expand_run_dirs(&args.runs)?;
    let runs = dirs.iter().map(|d| load_run(d, &args.metric, &args.x)).collect::<Result<Vec<_>>>()?;
    if runs.iter().all(|r| r.curve.is_empty()) {
        bail!("none of the {} runs logged {}", runs.len(), args.metric);
    }
    let md = build_report(&runs, &args)?;
    let path = args.out.join("report.md");
    write_atomic(&path, &md)?;
    print!("{md}");
    eprintln!("o2o report: wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(preset: &str, task: &str, seed: i64, curve: &[(f64, f64)]) -> Run {
        Run { dir: PathBuf::from(format!("runs/{preset}-{task}-{seed}")), preset: preset.into(), task: task.into(), seed: Some(seed), curve: curve.to_vec() }
    }

    #[test]
    fn mean_curve_uses_shared_steps() {
        let a = run("p", "t", 0, &[(0.0, 0.0), (10.0, 10.0), (20.0, 30.0)]);
        let b = run("p", "t", 1, &[(0.0, 2.0), (10.0, 20.0)]);
        assert_eq!(mean_curve(&[&a, &b]), vec![(0.0, 1.0), (10.0, 15.0)]);
    }

    #[test]
    fn report_table_holds_hand_computed_numbers() {
        let d = tempfile::tempdir().unwrap();
        // Final scores 0, 1, 2, 10 (see stats.rs for the hand enumeration); best scores 20, 20, 20, 20.
        let runs: Vec<Run> = [0.0, 1.0, 2.0, 10.0]
            .iter()
            .enumerate()
            .map(|(i, f)| run("iql", "hopper-medium-v2", i as i64, &[(0.0, 20.0), (100.0, *f)]))
            .collect();
        let args = ReportArgs { runs: vec![], out: d.path().to_path_buf(), metric: "eval/normalized_score".into(), x: "grad_step".into(), reps: DEFAULT_REPS, seed: 1 };
        let md = build_report(&runs, &args).unwrap();
        assert!(
            md.contains("| iql | hopper-medium-v2 | 4 | 3.2 [0.5, 7.8] | 1.5 [0.0, 10.0] | 20.0 [20.0, 20.0] | 20.0 [20.0, 20.0] |"),
            "{md}"
        );
        assert!(md.contains("| runs/iql-hopper-medium-v2-3 | iql | hopper-medium-v2 | 3 | 10.0 | 20.0 | 2 |"), "{md}");
        assert!(d.path().join("curves-hopper-medium-v2.png").exists());
    }
}
