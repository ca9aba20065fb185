//! `o2o report <run-dir ...> [--out dir]`: scores over seeds, with confidence intervals.
//!
//! Runs are grouped by what makes them comparable: algorithm, env, dataset (with its sha256 from
//! the manifest), budget (the four step counts) and trainer (a run of `o2o fleet learner` is
//! marked and kept apart from single-process runs), then split on any `agent.*`/`train.*` setting
//! whose values differ (named in the group); other settings that still differ inside a group
//! are named in its notes. A group counts finished runs only (stopped or running ones are listed
//! and left out) and each seed once (the newest run of a repeated seed). For each run, the final
//! and the best value of the score (`eval/normalized_score` by default) are read from
//! `metrics.jsonl`; for each group, the mean and the interquartile mean (IQM) over seeds with
//! 95 % stratified-bootstrap confidence intervals, computed as rliable does (`stats.rs`).
//! Output: `report.md` (also printed), one `curves-<n>.png` per group and, with several groups,
//! `curves-all.png` (every group's mean) in `--out`.

pub mod coverage;
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
    /// A config key (dotted, e.g. `agent.critic.init`) whose value also splits groups: runs that
    /// differ in it are compared side by side instead of being counted as seeds of one group.
    /// Repeatable; a run whose config lacks the key shows `unset`.
    #[arg(long = "split-by", value_name = "KEY")]
    pub split_by: Vec<String>,
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

/// Mean curve over runs: the mean at every x that all runs logged, or, if the runs share fewer
/// than two x values, at every x any run logged (averaging the runs that have it). A run with
/// two evaluations at one x (WSRL's end of pre-training and end of warm-up share a gradient
/// step) keeps both: points are matched by x and by their order at that x.
fn mean_curve(runs: &[&Run]) -> Vec<(f64, f64)> {
    let mut by_x: BTreeMap<(u64, usize), Vec<f64>> = BTreeMap::new();
    for r in runs {
        let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
        for (x, y) in &r.curve {
            let k = seen.entry(x.to_bits()).or_default();
            by_x.entry((x.to_bits(), *k)).or_default().push(*y);
            *k += 1;
        }
    }
    let point = |((x, _), ys): (&(u64, usize), &Vec<f64>)| (f64::from_bits(*x), stats::mean(ys));
    let all: Vec<(f64, f64)> = by_x.iter().map(point).collect();
    let shared: Vec<(f64, f64)> = by_x.iter().filter(|(_, ys)| ys.len() == runs.len()).map(point).collect();
    let mut curve = if shared.len() >= 2 { shared } else { all };
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    curve
}

/// One group of comparable runs: which are counted, and why others are not.
struct Group<'a> {
    name: &'a str,
    /// Counted: finished, one per seed (the newest when a seed repeats).
    counted: Vec<&'a Run>,
    notes: Vec<String>,
}

/// Group runs by [`Run::group`], count finished runs once per seed, and say what differs.
fn groups<'a>(runs: &'a [Run], metric: &str) -> Vec<Group<'a>> {
    let mut by: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in runs {
        by.entry(&r.group).or_default().push(r);
    }
    by.into_iter()
        .map(|(name, rs)| {
            let mut notes = Vec::new();
            let unfinished: Vec<&&Run> = rs.iter().filter(|r| r.status != "finished").collect();
            if !unfinished.is_empty() {
                let list: Vec<String> =
                    unfinished.iter().map(|r| format!("{} ({})", r.dir.display(), r.status)).collect();
                notes.push(format!("left out {} unfinished: {}", unfinished.len(), list.join(", ")));
            }
            // One run per seed: the newest (run directories sort by creation time).
            let mut per_seed: BTreeMap<Option<i64>, Vec<&Run>> = BTreeMap::new();
            for r in rs.iter().filter(|r| r.status == "finished") {
                per_seed.entry(r.seed).or_default().push(r);
            }
            let mut counted = Vec::new();
            for (seed, mut same) in per_seed {
                same.sort_by(|a, b| a.dir.cmp(&b.dir));
                let keep = same.pop().expect("non-empty");
                if !same.is_empty() {
                    let seed = seed.map_or("unknown".to_string(), |s| s.to_string());
                    let dropped: Vec<String> = same.iter().map(|r| r.dir.display().to_string()).collect();
                    notes.push(format!(
                        "duplicate seed {seed}: counted {}, left out {}",
                        keep.dir.display(),
                        dropped.join(", ")
                    ));
                }
                counted.push(keep);
            }
            // Settings that differ between counted runs make them less comparable: say which.
            let mut differ = Vec::new();
            if counted.len() > 1 {
                let keys: std::collections::BTreeSet<&String> =
                    counted.iter().flat_map(|r| r.settings.keys()).collect();
                for k in keys {
                    let values: std::collections::BTreeSet<String> =
                        counted.iter().map(|r| r.settings.get(k).cloned().unwrap_or_else(|| "unset".into())).collect();
                    if values.len() > 1 {
                        differ.push(format!("{k} ({})", values.into_iter().collect::<Vec<_>>().join(" | ")));
                    }
                }
            }
            if !differ.is_empty() {
                notes.push(format!("settings differ: {}", differ.join(", ")));
            }
            let without: Vec<String> =
                counted.iter().filter(|r| r.curve.is_empty()).map(|r| r.dir.display().to_string()).collect();
            if !without.is_empty() {
                notes.push(format!("no {metric} in {}", without.join(", ")));
            }
            Group { name, counted, notes }
        })
        .collect()
}

/// Build the report for `runs` (already loaded): the markdown text and the curves' PNG files.
pub fn build_report(runs: &[Run], args: &ReportArgs) -> Result<String> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let groups = groups(runs, &args.metric);
    let mut md = String::new();
    writeln!(md, "# o2o report\n")?;
    writeln!(
        md,
        "Score: `{}` from each run's metrics.jsonl; *final* is its last value, *best* its highest. \
         Runs are grouped by what makes them comparable (algorithm · env · dataset (sha256) · budget); \
         runs trained by `o2o fleet learner` (actor processes feeding a learner) form groups of their own, \
         marked *fleet learner*. A group counts finished runs only, one per seed. \
         Intervals are 95% stratified percentile-bootstrap confidence intervals (rliable's method: \
         runs resampled within each task), {} replicates, seed {}. IQM is the 25% trimmed mean.\n",
        args.metric, args.reps, args.seed
    )?;
    writeln!(md, "## By group\n")?;
    writeln!(
        md,
        "| group | presets | runs | final: mean [CI] | final: IQM [CI] | best: mean [CI] | best: IQM [CI] | notes |"
    )?;
    writeln!(md, "|---|---|---:|---|---|---|---|---|")?;
    for g in &groups {
        let presets: std::collections::BTreeSet<&str> = g.counted.iter().map(|r| r.preset.as_str()).collect();
        let presets = presets.into_iter().collect::<Vec<_>>().join(", ");
        let notes = if g.notes.is_empty() { "—".to_string() } else { g.notes.join("; ") };
        let finals: Vec<f64> = g.counted.iter().filter_map(|r| r.final_score()).collect();
        let bests: Vec<f64> = g.counted.iter().filter_map(|r| r.best_score()).collect();
        if finals.is_empty() {
            writeln!(md, "| {} | {presets} | 0 | — | — | — | — | {notes} |", g.name)?;
            continue;
        }
        let st = group_stats(&[finals], &[bests], args.reps, args.seed);
        writeln!(
            md,
            "| {} | {presets} | {} | {} | {} | {} | {} | {notes} |",
            g.name,
            st.runs,
            fmt_est(&st.final_mean),
            fmt_est(&st.final_iqm),
            fmt_est(&st.best_mean),
            fmt_est(&st.best_iqm)
        )?;
    }
    writeln!(md, "\n## Runs\n")?;
    writeln!(md, "| run | group | seed | status | counted | final | best | evaluations |")?;
    writeln!(md, "|---|---|---:|---|---|---:|---:|---:|")?;
    let counted: std::collections::BTreeSet<&Path> =
        groups.iter().flat_map(|g| g.counted.iter().map(|r| r.dir.as_path())).collect();
    for r in runs {
        let seed = r.seed.map(|s| s.to_string()).unwrap_or_else(|| "—".into());
        writeln!(
            md,
            "| {} | {} | {seed} | {} | {} | {} | {} | {} |",
            r.dir.display(),
            r.group,
            r.status,
            if counted.contains(r.dir.as_path()) { "yes" } else { "no" },
            fmt_opt(r.final_score()),
            fmt_opt(r.best_score()),
            r.curve.len()
        )?;
    }
    success_by_task(&mut md, &groups)?;
    // One plot per group: the mean over its counted runs, bold, over each run's faint line.
    let mut pictures = String::new();
    for (i, g) in groups.iter().enumerate() {
        let mut lines = Vec::new();
        for r in g.counted.iter().filter(|r| !r.curve.is_empty()) {
            lines.push(plot::Line { label: None, color: 0, points: r.curve.clone(), faint: true });
        }
        let mean = mean_curve(&g.counted);
        if !mean.is_empty() {
            lines.push(plot::Line {
                label: Some(format!("mean of {} runs", g.counted.len())),
                color: 0,
                points: mean,
                faint: false,
            });
        }
        if lines.is_empty() {
            continue;
        }
        let name = format!("curves-{}.png", i + 1);
        match plot::plot_curves(&args.out.join(&name), g.name, &args.x, &args.metric, &lines, (900, 560)) {
            Ok(()) => writeln!(pictures, "![{}]({name})\n", g.name)?,
            Err(e) => eprintln!("o2o report: no curves for {}: {e:#}", g.name),
        }
    }
    // With several groups, one plot of every group's mean, so they can be compared at a glance.
    let means: Vec<plot::Line> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| plot::Line {
            label: Some(format!("{} ({} runs)", g.name, g.counted.len())),
            color: i,
            points: mean_curve(&g.counted),
            faint: false,
        })
        .filter(|l| !l.points.is_empty())
        .collect();
    if means.len() > 1 {
        match plot::plot_curves(
            &args.out.join("curves-all.png"),
            "mean of each group",
            &args.x,
            &args.metric,
            &means,
            (1100, 640),
        ) {
            Ok(()) => writeln!(pictures, "![every group's mean](curves-all.png)\n")?,
            Err(e) => eprintln!("o2o report: no combined curves: {e:#}"),
        }
    }
    if !pictures.is_empty() {
        let all = if pictures.contains("](curves-all.png)") { " `curves-all.png`: each group's mean." } else { "" };
        writeln!(md, "\n## Curves\n\nBold: mean over counted runs; faint: each run.{all}\n\n{pictures}")?;
    }
    Ok(md)
}

/// ImagineBench-style runs log `eval/success/<level>/<task>` and `eval/success/<level>`: one
/// table of their final values (×100, mean over a group's counted runs), a column per key.
fn success_by_task(md: &mut String, groups: &[Group]) -> Result<()> {
    let mut rows: Vec<(&str, usize, BTreeMap<String, f64>)> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for g in groups {
        let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for r in &g.counted {
            for (k, v) in runs::last_values(&r.dir.join("metrics.jsonl"), "eval/success/")? {
                let e = sums.entry(k.trim_start_matches("eval/success/").to_string()).or_default();
                *e = (e.0 + v, e.1 + 1);
            }
        }
        if sums.is_empty() {
            continue;
        }
        keys.extend(sums.keys().cloned());
        rows.push((g.name, g.counted.len(), sums.into_iter().map(|(k, (s, n))| (k, 100.0 * s / n as f64)).collect()));
    }
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(md, "\n## Success by level and task\n")?;
    writeln!(md, "Final `eval/success/<level>[/<task>]` of each counted run, ×100, mean over the group's runs.\n")?;
    writeln!(md, "| group | runs | {} |", keys.iter().cloned().collect::<Vec<_>>().join(" | "))?;
    writeln!(md, "|---|---:|{}", "---:|".repeat(keys.len()))?;
    for (name, n, values) in rows {
        let cells: Vec<String> = keys.iter().map(|k| fmt_opt(values.get(k).copied())).collect();
        writeln!(md, "| {name} | {n} | {} |", cells.join(" | "))?;
    }
    Ok(())
}

/// Write `text` to `path` through a temporary file, so no half-written report is left behind.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Append ` · key=value` to each run's group for every `--split-by` key.
fn split_groups(runs: &mut [Run], keys: &[String]) {
    for r in runs.iter_mut() {
        for k in keys {
            let v = r.settings.get(k).map(|v| v.trim_matches('"').to_string()).unwrap_or_else(|| "unset".into());
            r.group = format!("{} · {k}={v}", r.group);
        }
    }
}

/// Runs of one group that differ in an `agent.*` or `train.*` setting are not seeds of one
/// experiment (a different learning rate is a different method): each such key splits the
/// group, named with its value as `--split-by` names it, instead of one run being left out as
/// a duplicate seed. Other settings that differ (evaluation, logging) stay in the group's notes.
fn split_on_learning_settings(runs: &mut [Run]) {
    let learning = |k: &str| k.starts_with("agent.") || k.starts_with("train.");
    let mut by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        by.entry(r.group.clone()).or_default().push(i);
    }
    for members in by.values() {
        let keys: std::collections::BTreeSet<&String> =
            members.iter().flat_map(|&i| runs[i].settings.keys().filter(|k| learning(k))).collect();
        let value = |i: usize, k: &str| {
            runs[i].settings.get(k).map(|v| v.trim_matches('"').to_string()).unwrap_or_else(|| "unset".into())
        };
        let differing: Vec<String> = keys
            .into_iter()
            .filter(|k| members.iter().map(|&i| value(i, k)).collect::<std::collections::BTreeSet<_>>().len() > 1)
            .cloned()
            .collect();
        let names: Vec<(usize, String)> = members
            .iter()
            .map(|&i| {
                let mut name = runs[i].group.clone();
                for k in &differing {
                    name = format!("{name} · {k}={}", value(i, k));
                }
                (i, name)
            })
            .collect();
        for (i, name) in names {
            runs[i].group = name;
        }
    }
}

/// `o2o report`.
pub fn run(args: ReportArgs) -> Result<()> {
    if !["grad_step", "env_step", "wall_s"].contains(&args.x.as_str()) {
        bail!("--x must be grad_step, env_step or wall_s, found {:?}", args.x);
    }
    let dirs = expand_run_dirs(&args.runs)?;
    let mut runs = dirs.iter().map(|d| load_run(d, &args.metric, &args.x)).collect::<Result<Vec<_>>>()?;
    split_groups(&mut runs, &args.split_by);
    split_on_learning_settings(&mut runs);
    if runs.iter().all(|r| r.curve.is_empty()) {
        let hint = if args.metric == "eval/normalized_score" {
            " (their envs have no D4RL score); use --metric eval/return, or --metric eval/success_rate for tasks with a success flag"
        } else {
            "; check the key in their metrics.jsonl (eval/return, eval/normalized_score, eval/success_rate, …)"
        };
        bail!("none of the {} runs logged {}{hint}", runs.len(), args.metric);
    }
    if args.metric == "eval/normalized_score" && runs.iter().any(|r| r.curve.is_empty()) {
        eprintln!("o2o report: some runs have no eval/normalized_score (envs without a D4RL score); --metric eval/return compares them all");
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

    fn run(group: &str, seed: i64, curve: &[(f64, f64)]) -> Run {
        Run {
            dir: PathBuf::from(format!("runs/{group}-{seed}")),
            preset: "iql".into(),
            task: "hopper-medium-v2".into(),
            seed: Some(seed),
            curve: curve.to_vec(),
            group: group.into(),
            status: "finished".into(),
            settings: BTreeMap::new(),
            fleet: false,
        }
    }

    /// The arguments of a report into `out` of `metric` against `x`, with `reps` replicates and seed 1.
    fn report_args(out: PathBuf, metric: &str, x: &str, reps: usize) -> ReportArgs {
        ReportArgs { runs: vec![], out, metric: metric.into(), x: x.into(), reps, seed: 1, split_by: vec![] }
    }

    #[test]
    fn mean_curve_uses_shared_steps_and_keeps_two_evaluations_at_one_step() {
        let a = run("p", 0, &[(0.0, 0.0), (10.0, 10.0), (20.0, 30.0)]);
        let b = run("p", 1, &[(0.0, 2.0), (10.0, 20.0)]);
        assert_eq!(mean_curve(&[&a, &b]), vec![(0.0, 1.0), (10.0, 15.0)]);
        // WSRL: evaluations at the end of pre-training and of the warm-up share a step.
        let a = run("p", 0, &[(0.0, 1.0), (100.0, 2.0), (100.0, 4.0), (200.0, 6.0)]);
        let b = run("p", 1, &[(0.0, 3.0), (100.0, 4.0), (100.0, 6.0), (200.0, 8.0)]);
        assert_eq!(mean_curve(&[&a, &b]), vec![(0.0, 2.0), (100.0, 3.0), (100.0, 5.0), (200.0, 7.0)]);
    }

    #[test]
    fn report_table_holds_hand_computed_numbers() {
        let d = tempfile::tempdir().unwrap();
        // Final scores 0, 1, 2, 10 (see stats.rs for the hand enumeration); best scores 20, 20, 20, 20.
        let runs: Vec<Run> = [0.0, 1.0, 2.0, 10.0]
            .iter()
            .enumerate()
            .map(|(i, f)| run("iql · hopper-v2", i as i64, &[(0.0, 20.0), (100.0, *f)]))
            .collect();
        let args = report_args(d.path().to_path_buf(), "eval/normalized_score", "grad_step", DEFAULT_REPS);
        let md = build_report(&runs, &args).unwrap();
        assert!(md.contains("| iql · hopper-v2 | iql | 4 | 3.2 [0.5, 7.8] | 1.5 [0.0, 10.0] | 20.0 [20.0, 20.0] | 20.0 [20.0, 20.0] | — |"), "{md}");
        assert!(
            md.contains("| runs/iql · hopper-v2-3 | iql · hopper-v2 | 3 | finished | yes | 10.0 | 20.0 | 2 |"),
            "{md}"
        );
        assert!(d.path().join("curves-1.png").exists());
        assert!(!d.path().join("curves-all.png").exists(), "one group needs no combined plot");
        assert!(!md.contains("curves-all.png"), "and the report names no file it did not write: {md}");
        let mut two = runs.clone();
        two.push(run("cql · hopper-v2", 0, &[(0.0, 5.0), (100.0, 6.0)]));
        let md = build_report(&two, &args).unwrap();
        assert!(d.path().join("curves-all.png").exists() && md.contains("](curves-all.png)"), "{md}");
    }

    /// Runs that differ in algorithm, env, dataset bytes or budget land in different groups;
    /// seeds of one experiment (and a fine-tune's parent pointer) do not split a group.
    /// `--split-by` keeps runs that differ in the named setting apart (the same seed in both is
    /// then counted in each, not dropped as a duplicate), and names the value in the group.
    #[test]
    fn split_by_separates_runs_that_differ_in_a_setting() {
        let d = tempfile::tempdir().unwrap();
        let make = |name: &str, init: Option<&str>| {
            let dir = d.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            let init = init.map(|i| format!("[agent.critic]\ninit = \"{i}\"\n")).unwrap_or_default();
            std::fs::write(
                dir.join("config.toml"),
                format!("preset = \"p\"\nalgo = \"sac\"\nenv = \"Hopper-v5\"\nseed = 0\n{init}"),
            )
            .unwrap();
            std::fs::write(dir.join("metrics.jsonl"), "{\"grad_step\":100,\"env_step\":0,\"eval/return\":1.0}\n")
                .unwrap();
            std::fs::write(dir.join("summary.json"), r#"{"finished": true}"#).unwrap();
            load_run(&dir, "eval/return", "grad_step").unwrap()
        };
        let mut runs = vec![make("a", Some("orthogonal")), make("b", Some("fan_in_uniform")), make("c", None)];
        assert_eq!(groups(&runs, "eval/return").len(), 1, "without --split-by the three are one group");
        split_groups(&mut runs, &["agent.critic.init".to_string()]);
        let g = groups(&runs, "eval/return");
        assert_eq!(g.len(), 3);
        assert!(g.iter().all(|g| g.counted.len() == 1), "each keeps its seed-0 run");
        let names: Vec<&str> = g.iter().map(|g| g.name).collect();
        assert!(names.iter().any(|n| n.ends_with("agent.critic.init=orthogonal")), "{names:?}");
        assert!(names.iter().any(|n| n.ends_with("agent.critic.init=unset")), "{names:?}");
    }

    #[test]
    fn runs_group_by_algorithm_env_dataset_and_budget() {
        let d = tempfile::tempdir().unwrap();
        let make = |name: &str, algo: &str, env: &str, sha: &str, online: u64, seed: u64| {
            let dir = d.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            let config = format!("preset = \"p\"\nalgo = \"{algo}\"\nenv = \"{env}\"\nseed = {seed}\n[dataset]\npath = \"/data/{sha}.hdf5\"\n[train]\noffline_steps = 100\nonline_steps = {online}\n");
            std::fs::write(dir.join("config.toml"), config).unwrap();
            std::fs::write(
                dir.join("manifest.json"),
                format!(r#"{{"seeds": {{"run": {seed}}}, "dataset": {{"sha256": "{sha}"}}}}"#),
            )
            .unwrap();
            std::fs::write(dir.join("metrics.jsonl"), "{\"grad_step\":100,\"env_step\":0,\"eval/return\":1.0}\n")
                .unwrap();
            std::fs::write(dir.join("summary.json"), r#"{"finished": true}"#).unwrap();
            load_run(&dir, "eval/return", "grad_step").unwrap()
        };
        let runs = vec![
            make("a0", "iql", "hopper-v2", "aaaaaaaa11", 0, 0),
            make("a1", "iql", "hopper-v2", "aaaaaaaa11", 0, 1),
            make("algo", "cql", "hopper-v2", "aaaaaaaa11", 0, 0),
            make("env", "iql", "walker2d-v2", "aaaaaaaa11", 0, 0),
            make("data", "iql", "hopper-v2", "bbbbbbbb22", 0, 0),
            make("budget", "iql", "hopper-v2", "aaaaaaaa11", 5000, 0),
        ];
        let g = groups(&runs, "eval/return");
        assert_eq!(g.len(), 5, "{:?}", g.iter().map(|g| g.name).collect::<Vec<_>>());
        // Data in memory (no id, no path) is told apart by its content hash.
        let mem = |name: &str, sha: &str| {
            let dir = d.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(
                dir.join("config.toml"),
                "preset = \"p\"\nalgo = \"iql\"\nenv = \"e\"\n[dataset]\nin_memory = true\n",
            )
            .unwrap();
            std::fs::write(dir.join("manifest.json"), format!(r#"{{"dataset": {{"sha256": "{sha}"}}}}"#)).unwrap();
            std::fs::write(dir.join("metrics.jsonl"), "").unwrap();
            load_run(&dir, "eval/return", "grad_step").unwrap().group
        };
        assert_ne!(mem("m1", "1111111199"), mem("m2", "2222222299"));
        assert!(mem("m3", "3333333399").contains("in-memory data (33333333)"));
        let together = g.iter().find(|g| g.counted.len() == 2).expect("the two seeds share a group");
        assert_eq!(
            together.name,
            "iql · hopper-v2 · aaaaaaaa11.hdf5 (aaaaaaaa) · offline 100 · random 0 · warm-up 0 · online 0"
        );
        assert!(together.notes.is_empty(), "the dataset path and seed are not differences: {:?}", together.notes);
    }

    /// Issue 47 item 7: a run of `o2o fleet learner` (its manifest says so, or, written before
    /// manifests did, it holds the learner's `fleet.json`) is not a seed of the single-process
    /// runs of its config: a group of its own, marked in both tables, and no "duplicate seed"
    /// dropping one of the two seed-0 runs.
    #[test]
    fn fleet_learner_runs_are_marked_and_grouped_apart() {
        let d = tempfile::tempdir().unwrap();
        let make = |name: &str, seed: u64, trainer: Option<&str>, fleet_json: Option<&str>| {
            let dir = d.path().join(name);
            std::fs::create_dir_all(dir.join("checkpoints/step-0000000400")).unwrap();
            let config = format!(
                "preset = \"p\"\nalgo = \"sac\"\nenv = \"Hopper-v5\"\nseed = {seed}\n[train]\nonline_steps = 400\n"
            );
            std::fs::write(dir.join("config.toml"), config).unwrap();
            let trainer = trainer.map(|t| format!(r#", "trainer": "{t}""#)).unwrap_or_default();
            std::fs::write(dir.join("manifest.json"), format!(r#"{{"seeds": {{"run": {seed}}}{trainer}}}"#)).unwrap();
            if let Some(at) = fleet_json {
                std::fs::write(dir.join(at).join("fleet.json"), "{}").unwrap();
            }
            std::fs::write(dir.join("metrics.jsonl"), "{\"grad_step\":400,\"env_step\":400,\"eval/return\":1.0}\n")
                .unwrap();
            std::fs::write(dir.join("summary.json"), r#"{"finished": true}"#).unwrap();
            load_run(&dir, "eval/return", "env_step").unwrap()
        };
        let runs = vec![
            make("single-0", 0, None, None),
            make("single-1", 1, None, None),
            make("fleet-0", 0, Some("fleet learner"), None),
            // Before manifests named the trainer: the learner's fleet.json, at the end or in a checkpoint.
            make("fleet-1", 1, None, Some(".")),
            make("fleet-2", 2, None, Some("checkpoints/step-0000000400")),
        ];
        let flags: Vec<bool> = runs.iter().map(|r| r.fleet).collect();
        assert_eq!(flags, [false, false, true, true, true]);
        let g = groups(&runs, "eval/return");
        assert_eq!(g.len(), 2, "{:?}", g.iter().map(|g| g.name).collect::<Vec<_>>());
        let fleet = g.iter().find(|g| g.name.ends_with(" · fleet learner")).expect("a fleet learner group");
        let single = g.iter().find(|g| !g.name.contains("fleet")).expect("a single-process group");
        assert_eq!((fleet.counted.len(), single.counted.len()), (3, 2));
        assert_eq!(fleet.name, format!("{} · fleet learner", single.name));
        assert!(g.iter().all(|g| g.notes.is_empty()), "{:?}", g.iter().map(|g| &g.notes).collect::<Vec<_>>());
        let args = report_args(d.path().join("out"), "eval/return", "env_step", 100);
        let md = build_report(&runs, &args).unwrap();
        let row = |dir: &str| md.lines().find(|l| l.contains(&format!("/{dir} |"))).unwrap_or_else(|| panic!("{md}"));
        assert!(row("fleet-1").contains(" · fleet learner |"), "{}", row("fleet-1"));
        assert!(!row("single-1").contains("fleet"), "{}", row("single-1"));
        assert!(md.lines().any(|l| l.starts_with(&format!("| {} | p | 3 |", fleet.name))), "{md}");
    }

    #[test]
    fn success_by_level_and_task_is_tabled() {
        let d = tempfile::tempdir().unwrap();
        let mut runs = Vec::new();
        for (seed, (jf, real)) in [(0.5, 0.25), (1.0, 0.75)].iter().enumerate() {
            let dir = d.path().join(format!("r{seed}"));
            std::fs::create_dir(&dir).unwrap();
            let lines = format!(
                "{{\"grad_step\":10,\"eval/success/real/jump-forward\":0.0,\"eval/success/real\":0.0}}\n{{\"grad_step\":20,\"eval/success/real/jump-forward\":{jf},\"eval/success/real\":{real}}}\n"
            );
            std::fs::write(dir.join("metrics.jsonl"), lines).unwrap();
            let mut r = run("bc · imaginebench", seed as i64, &[(20.0, *real)]);
            r.dir = dir;
            runs.push(r);
        }
        let args = report_args(d.path().join("out"), "eval/success/real", "grad_step", 100);
        let md = build_report(&runs, &args).unwrap();
        assert!(md.contains("| group | runs | real | real/jump-forward |"), "{md}");
        assert!(md.contains("| bc · imaginebench | 2 | 50.0 | 75.0 |"), "{md}");
    }

    #[test]
    fn unfinished_runs_and_repeated_seeds_are_left_out_and_named() {
        let d = tempfile::tempdir().unwrap();
        let mut stopped = run("g", 2, &[(0.0, 99.0)]);
        stopped.status = "stopped".into();
        let mut again = run("g", 0, &[(0.0, 7.0)]);
        again.dir = PathBuf::from("runs/g-0-later");
        let mut other_lr = run("g", 1, &[(0.0, 5.0)]);
        other_lr.settings.insert("agent.actor_lr".into(), "0.001".into());
        let runs = vec![run("g", 0, &[(0.0, 1.0)]), again, other_lr, stopped];
        let args = report_args(d.path().to_path_buf(), "eval/normalized_score", "grad_step", 100);
        let md = build_report(&runs, &args).unwrap();
        let row = md.lines().find(|l| l.starts_with("| g |")).unwrap();
        assert!(row.contains("| g | iql | 2 | 6.0 "), "two counted runs (seed 0's newest: 7, seed 1: 5): {row}");
        assert!(row.contains("left out 1 unfinished: runs/g-2 (stopped)"), "{row}");
        assert!(row.contains("duplicate seed 0: counted runs/g-0-later, left out runs/g-0"), "{row}");
        assert!(row.contains("settings differ: agent.actor_lr (0.001 | unset)"), "{row}");
    }

    /// Issue 47 C7: runs that differ in a learning setting are split on it (the key and value
    /// named in the group), not counted as one group with a "duplicate seed"; a difference
    /// outside agent.*/train.* keeps them together.
    #[test]
    fn runs_differing_in_a_learning_setting_are_split_on_it() {
        let mut other_lr = run("g", 0, &[(0.0, 5.0)]);
        other_lr.settings.insert("agent.actor_lr".into(), "0.001".into());
        let mut other_eval = run("g", 1, &[(0.0, 5.0)]);
        other_eval.settings.insert("eval.episodes".into(), "3".into());
        let mut runs = vec![run("g", 0, &[(0.0, 1.0)]), other_lr, other_eval];
        split_on_learning_settings(&mut runs);
        let names: Vec<&str> = runs.iter().map(|r| r.group.as_str()).collect();
        assert_eq!(names, ["g · agent.actor_lr=unset", "g · agent.actor_lr=0.001", "g · agent.actor_lr=unset"]);
        let gs = groups(&runs, "eval/normalized_score");
        assert_eq!(gs.len(), 2);
        assert!(
            gs.iter().all(|g| g.notes.iter().all(|n| !n.contains("duplicate seed"))),
            "{:?}",
            gs.iter().map(|g| &g.notes).collect::<Vec<_>>()
        );
        let together = gs.iter().find(|g| g.name == "g · agent.actor_lr=unset").unwrap();
        assert_eq!(together.counted.len(), 2);
        assert!(together.notes.iter().any(|n| n.contains("settings differ: eval.episodes")), "{:?}", together.notes);
    }
}
