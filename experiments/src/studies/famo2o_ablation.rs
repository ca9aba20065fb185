//! `o2o experiment famo2o-ablation`: does a state-adaptive balance help FamO2O-CQL (issue 19)?
//!
//! | variant | universal policy trained on | acting β |
//! |---|---|---|
//! | `famo2o` | β ~ U[0.5, 1.5] offline, the balance model's β(s) online | β(s) of the balance model |
//! | `fixed-beta` | β = 1 offline and online (CQL with one fixed β) | 1 |
//!
//! Both run the same preset (`famo2o-cql-<task>`: the same data, networks, offline and online
//! budget and seeds), the second with `agent.fixed_beta = 1.0`, so they differ only in the
//! family and the balance model. Runs are `o2o run` processes (`--jobs` at a time) in
//! `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused. The output folder
//! gets `table.md` (mean ± std over seeds of the normalized score at the end of the offline
//! phase and at the end, and the last chosen β), `curves.png` and `results.json`.

use super::jobs::{at, plot, run_jobs, sets, Curves, Job, Processes};
use super::StudyReport;
use crate::report::runs::read_curve;
use crate::report::stats::{mean, std_dev};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;

/// The variants, in table order, with the overrides each adds to the preset.
const VARIANTS: [(&str, &[&str]); 2] = [("famo2o", &[]), ("fixed-beta", &["agent.fixed_beta=1.0"])];

/// What `o2o experiment famo2o-ablation` runs.
#[derive(Debug, Clone)]
pub struct Famo2oAblationOptions {
    /// The preset suffix: `famo2o-cql-<task>`, e.g. `hopper-small` (the shipped data) or
    /// `hopper-medium` (D4RL, the paper's budget).
    pub task: String,
    /// Seeds 0..N.
    pub seeds: u64,
    /// Output folder (default `experiments-out/famo2o-ablation-<task>`).
    pub out: Option<PathBuf>,
    /// How the runs' processes run.
    pub processes: Processes,
    /// Extra `--set key=value` for every run (e.g. `train.online_steps=2000`).
    pub set: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// Run the experiment.
pub fn run(args: &Famo2oAblationOptions) -> Result<StudyReport> {
    args.processes.check(args.seeds)?;
    let preset = format!("famo2o-cql-{}", args.task);
    let (_, mut table) =
        crate::run::presets::load(&preset).with_context(|| format!("--task {}: no preset {preset}", args.task))?;
    // The budget the runs get: the preset with the experiment's overrides.
    crate::run::config::apply_overrides(&mut table, &args.set)?;
    let offline =
        table.get("train").and_then(|t| t.get("offline_steps")).and_then(|v| v.as_integer()).unwrap_or(0) as f64;
    let out =
        args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/famo2o-ablation-{}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let t0 = Instant::now();
    let mut jobs = Vec::new();
    for (variant, extra) in VARIANTS {
        for seed in 0..args.seeds {
            let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
            sets(&mut a, &extra.iter().map(|s| s.to_string()).chain(args.set.iter().cloned()).collect::<Vec<_>>());
            jobs.push(Job {
                variant,
                seed,
                args: a,
                parent: None,
                runs_dir: out.join("runs").join(variant).join(format!("seed-{seed}")),
            });
        }
    }
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    // Per variant, per seed: (normalized-score curve over run steps, last chosen β).
    let mut results: Vec<(&str, Vec<(Vec<(f64, f64)>, Option<f64>)>)> =
        VARIANTS.iter().map(|(v, _)| (*v, Vec::new())).collect();
    for (job, dir) in jobs.iter().zip(&dirs) {
        let metrics = dir.join("metrics.jsonl");
        let curve = read_curve(&metrics, "eval/normalized_score", "grad_step")?;
        let beta = read_curve(&metrics, "train/beta_mean", "grad_step")?.last().map(|(_, b)| *b);
        results.iter_mut().find(|(v, _)| *v == job.variant).expect("a variant of the table").1.push((curve, beta));
    }
    let end =
        results.iter().flat_map(|(_, s)| s.iter().filter_map(|(c, _)| c.last().map(|(x, _)| *x))).fold(0.0, f64::max);
    let command = args.command.clone();
    let md = markdown(&results, offline, end, &preset, args.seeds, &command, t0.elapsed().as_secs_f64());
    std::fs::write(out.join("table.md"), &md)?;
    let curves: Curves = results.iter().map(|(v, runs)| (*v, runs.iter().map(|(c, _)| c.clone()).collect())).collect();
    let order: Vec<&str> = VARIANTS.iter().map(|(v, _)| *v).collect();
    plot(
        &out.join("curves.png"),
        &curves,
        &order,
        &format!("FamO2O-CQL vs fixed β = 1 on {} ({} seeds)", args.task, args.seeds),
        &format!("gradient step (offline until {offline}, then one per env step)"),
    )?;
    let json: Vec<serde_json::Value> = results
        .iter()
        .map(|(v, s)| serde_json::json!({"variant": v, "seeds": s.iter().map(|(c, b)| serde_json::json!({"normalized_score": c, "last_beta_mean": b})).collect::<Vec<_>>()}))
        .collect();
    let results = serde_json::json!({"command": command, "preset": preset, "variants": json});
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&results)?)?;
    // The oldest study names its folder alone after the table.
    Ok(StudyReport { out, table: md, results, listed: Vec::new() })
}

fn cell(v: &[f64]) -> String {
    if v.is_empty() {
        "–".into()
    } else {
        format!("{:.1} ± {:.1}", mean(v), std_dev(v))
    }
}

/// `table.md`: normalized score at the end of the offline phase and at the end, and β.
fn markdown(
    results: &[(&str, Vec<(Vec<(f64, f64)>, Option<f64>)>)],
    offline: f64,
    end: f64,
    preset: &str,
    seeds: u64,
    command: &str,
    wall_s: f64,
) -> String {
    let mut s = format!(
        "# FamO2O ablation: {preset}\n\nD4RL normalized score (×100), mean ± std over {seeds} seeds, at the end of offline training (run step {offline}) \
         and at the end (run step {end}: one gradient step per env step online); last logged batch-mean β chosen by the agent.\n\n\
         Command: `{command}` ({wall_s:.0} s wall)\n\n| variant | offline end | final | final β |\n|---|---|---|---|\n"
    );
    for (variant, runs) in results {
        let pick = |x: f64| runs.iter().filter_map(|(c, _)| at(c, x as u64)).collect::<Vec<_>>();
        let betas: Vec<f64> = runs.iter().filter_map(|(_, b)| *b).collect();
        let beta = if betas.is_empty() {
            "1 (fixed)".into()
        } else {
            format!("{:.2} ± {:.2}", mean(&betas), std_dev(&betas))
        };
        s.push_str(&format!("| {variant} | {} | {} | {beta} |\n", cell(&pick(offline)), cell(&pick(end))));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_takes_mean_and_std_at_the_phase_end_and_the_end() {
        let runs = vec![(vec![(3.0, 10.0), (6.0, 20.0)], Some(1.5)), (vec![(3.0, 14.0), (6.0, 30.0)], Some(1.3))];
        let md = markdown(
            &[("famo2o", runs), ("fixed-beta", vec![(vec![(3.0, 1.0), (6.0, 2.0)], None)])],
            3.0,
            6.0,
            "p",
            2,
            "cmd",
            1.0,
        );
        assert!(md.contains("| famo2o | 12.0 ± 2.0 | 25.0 ± 5.0 | 1.40 ± 0.10 |"), "{md}");
        assert!(md.contains("| fixed-beta | 1.0 ± 0.0 | 2.0 ± 0.0 | 1 (fixed) |"), "{md}");
    }
}
