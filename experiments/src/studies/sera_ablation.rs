//! `o2o experiment sera-ablation`: does SERA's bonus help Cal-QL fine-tuning (issue 18)?
//!
//! | variant | start | online |
//! |---|---|---|
//! | `calql` | the seed's Cal-QL pre-training | Cal-QL on 50/50 offline/online batches |
//! | `sera-calql` | the same checkpoint | the same, with r + λ·tanh(r_int) on every batch |
//!
//! Pre-training runs once per seed (`sera-calql-<task>` with its online steps set to 0 and SERA
//! off), and both variants start from that one checkpoint (`o2o run --from`), so they differ
//! only in the bonus. Runs are `o2o run` processes (`--jobs` at a time, `--threads` torch
//! threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused, so an
//! interrupted experiment continues where it stopped. The output folder gets `table.md` (mean ±
//! std over seeds of the normalized score at fixed env steps, the IQM over seeds at the end, and
//! the paired per-seed differences sera-calql − calql of the final score and of the mean online
//! score, each with a 95 % bootstrap interval), `curves.png` and `results.json` (every per-seed
//! value). The SERA runs' `train/sera/bonus_spread` (the std of tanh(r_int) over a batch) is
//! reported too: near 0, the bonus would be a constant and the comparison would test an alive
//! bonus, not SERA (fidelity-audit-2 E8).
//!
//! The claim (SERA, arXiv 2310.19805): the Q-conditioned state-entropy bonus speeds up online
//! fine-tuning. `--task halfcheetah-small` runs the dense locomotion regime on D4RL-level data.
//!
//! **AntMaze tasks** (a preset whose env is `antmaze-*`, e.g. `--task antmaze-umaze-onearm-small`:
//! sparse-reward navigation on data that never enters the eval goal's arm) also measure state
//! coverage: the fine-tuning runs record their env transitions (`train.record_dataset = true`)
//! and the table adds the maze cells (D4RL's grid, `report::coverage`) their states visited
//! against env steps, the cells the offline data never visited, the first env step in the eval
//! goal's cell per seed, the success rate (`eval/success_rate`), and the paired per-seed
//! differences of final cells, mean cells over the online phase (how fast coverage grows) and
//! final success; `coverage.png` plots the cells against env steps.

use super::jobs::{
    children_cpu_seconds, mean_between, paired_rows, plot, plot_with_y, rows_with, run_jobs, score_rows, sets, Curves,
    Job, PerSeed, Processes,
};
use super::StudyReport;
use crate::report::coverage::Coverage;
use crate::report::runs::read_curve;
use crate::report::stats::{iqm, mean, std_dev};
use anyhow::{bail, Context, Result};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::mujoco::antmaze::MazeMap;
use std::path::PathBuf;
use std::time::Instant;

/// The variants, in table order, with the overrides each adds to the preset.
pub const VARIANTS: [(&str, &[&str]); 2] = [("calql", &["sera.enabled=false"]), ("sera-calql", &[])];

/// What `o2o experiment sera-ablation` runs.
#[derive(Debug, Clone)]
pub struct SeraAblationOptions {
    /// The preset suffix: `sera-calql-<task>`, e.g. `hopper-small` or `antmaze-umaze-onearm-small`.
    pub task: String,
    /// Seeds 0..N.
    pub seeds: u64,
    /// Output folder (default `experiments-out/sera-ablation-<task>`).
    pub out: Option<PathBuf>,
    /// How the runs' processes run.
    pub processes: Processes,
    /// Config overrides for every run, as in `o2o run --set`.
    pub set: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// `o2o experiment sera-ablation`.
pub fn run(args: &SeraAblationOptions) -> Result<StudyReport> {
    args.processes.check(args.seeds)?;
    let preset = format!("sera-calql-{}", args.task);
    let (shared, resolved) = super::jobs::preset_overrides(&preset, &args.task, &args.set)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/sera-ablation-{}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let get = |section: &str, key: &str| {
        resolved.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64
    };
    let (offline, online, eval_every) =
        (get("train", "offline_steps"), get("train", "online_steps"), get("eval", "every"));
    if offline == 0 || online == 0 || eval_every == 0 {
        bail!("the ablation needs train.offline_steps, train.online_steps and eval.every above 0 (found {offline}, {online}, {eval_every})");
    }
    // AntMaze: the fine-tuning runs record their transitions, for the coverage measure.
    let maze = resolved.get("env").and_then(|e| e.as_str()).and_then(MazeMap::of_env);
    let record: Vec<String> = if maze.is_some() { vec!["train.record_dataset=true".into()] } else { Vec::new() };

    // Jobs: per seed, the pre-training, then both variants from it.
    let runs_dir = |variant: &str, seed: u64| out.join("runs").join(variant).join(format!("seed-{seed}"));
    let mut jobs: Vec<Job> = Vec::new();
    for seed in 0..args.seeds {
        let p = jobs.len();
        let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
        sets(&mut a, &shared);
        sets(&mut a, &["train.online_steps=0".into(), "sera.enabled=false".into()]);
        jobs.push(Job { variant: "pretrain", seed, args: a, parent: None, runs_dir: runs_dir("pretrain", seed) });
        for (variant, extra) in VARIANTS {
            let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
            sets(&mut a, &shared);
            sets(&mut a, &["eval.at_start=true".into()]);
            sets(&mut a, &record);
            sets(&mut a, &extra.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            jobs.push(Job { variant, seed, args: a, parent: Some(p), runs_dir: runs_dir(variant, seed) });
        }
    }
    eprintln!(
        "sera-ablation: preset {preset}, seeds 0..{}, {} runs, {} at a time; budget: {offline} offline steps, {online} online env steps; output {}",
        args.seeds,
        jobs.len(),
        args.processes.jobs,
        out.display()
    );
    let t0 = Instant::now();
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    let cpu_s = children_cpu_seconds();
    let wall_s = t0.elapsed().as_secs_f64();
    eprintln!("all runs done in {wall_s:.0} s ({cpu_s:.0} s of CPU in the runs this process started)");

    let mut curves = Curves::new();
    let (mut finals_by_seed, mut auc_by_seed, mut spread_by_seed, mut bonus_mean_by_seed) =
        (PerSeed::new(), PerSeed::new(), PerSeed::new(), PerSeed::new());
    for (job, dir) in jobs.iter().zip(&dirs) {
        if job.variant != "pretrain" {
            let metrics = dir.join("metrics.jsonl");
            let curve = read_curve(&metrics, "eval/normalized_score", "env_step")
                .or_else(|_| read_curve(&metrics, "eval/return", "env_step"))?;
            if let Some(v) = super::jobs::at(&curve, online) {
                finals_by_seed.entry(job.variant).or_default().insert(job.seed, v);
            }
            if let Some(v) = mean_between(&curve, 0, online) {
                auc_by_seed.entry(job.variant).or_default().insert(job.seed, v);
            }
            if let Ok(spread) = read_curve(&metrics, "train/sera/bonus_spread", "env_step") {
                if !spread.is_empty() {
                    spread_by_seed
                        .entry(job.variant)
                        .or_default()
                        .insert(job.seed, mean(&spread.iter().map(|(_, y)| *y).collect::<Vec<_>>()));
                }
            }
            if let Ok(m) = read_curve(&metrics, "train/sera/bonus_mean", "env_step") {
                if !m.is_empty() {
                    bonus_mean_by_seed
                        .entry(job.variant)
                        .or_default()
                        .insert(job.seed, mean(&m.iter().map(|(_, y)| *y).collect::<Vec<_>>()));
                }
            }
            curves.entry(job.variant).or_default().push(curve);
        }
    }
    let mut steps: Vec<u64> = (0..=online).step_by(eval_every as usize).collect();
    if steps.last() != Some(&online) {
        steps.push(online);
    }
    let order: Vec<&str> = VARIANTS.iter().map(|(v, _)| *v).collect();
    let command = args.command.clone();
    let finals: Vec<(&str, Vec<f64>)> = order
        .iter()
        .map(|v| {
            (
                *v,
                curves
                    .get(v)
                    .map(|runs| runs.iter().filter_map(|c| super::jobs::at(c, online)).collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut table = format!(
        "# SERA ablation: {preset}\n\nD4RL normalized score (×100), mean ± std over {} seeds, at fixed env steps of the online budget (step 0 is the \
         pre-trained policy, shared by both variants of a seed). Pre-training: {offline} Cal-QL gradient steps; online: {online} env steps.\n\n\
         Command: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the runs it started, finished runs it reused not counted)\n\n{}\n\
         | variant | final mean ± std | final IQM | seeds |\n|---|---|---|---|\n",
        args.seeds,
        score_rows(&curves, &steps, &order)
    );
    for (v, vals) in &finals {
        if !vals.is_empty() {
            table.push_str(&format!(
                "| {v} | {:.1} ± {:.1} | {:.1} | {} |\n",
                mean(vals),
                std_dev(vals),
                iqm(vals),
                vals.len()
            ));
        }
    }
    let (paired_md, paired) =
        paired_rows(&[("final score", &finals_by_seed), ("mean online score", &auc_by_seed)], "calql", &order);
    table.push_str(&format!(
        "\nPaired per-seed differences (the variants of a seed share its pre-training; 95% bootstrap intervals over seeds; \"mean online score\" is the mean of the \
         evaluations after step 0, the area under the online curve):\n\n{paired_md}"
    ));
    for (v, spreads) in &spread_by_seed {
        let vals: Vec<f64> = spreads.values().copied().collect();
        table.push_str(&format!(
            "\n{v}: train/sera/bonus_spread (std of tanh(r_int) over a batch's online rows), mean over the online phase: {:.3} ± {:.3} over {} seeds (below 0.05 the bonus is a constant).\n",
            mean(&vals),
            std_dev(&vals),
            vals.len()
        ));
    }
    for (v, means) in &bonus_mean_by_seed {
        let vals: Vec<f64> = means.values().copied().collect();
        table.push_str(&format!(
            "\n{v}: train/sera/bonus_mean (the mean bonus on a batch's online rows), mean over the online phase: {:+.3} ± {:.3} over {} seeds (away from 0 it also acts as a per-step reward or cost).\n",
            mean(&vals),
            std_dev(&vals),
            vals.len()
        ));
    }
    let maze_report = match maze {
        Some(map) => Some(maze_section(&map, &resolved, &jobs, &dirs, &steps, &order, online)?),
        None => None,
    };
    if let Some(m) = &maze_report {
        table.push_str(&m.markdown);
        plot_with_y(
            &out.join("coverage.png"),
            &m.curves,
            &order,
            &format!("SERA ablation, {preset}: maze cells visited, {} seeds", args.seeds),
            "online env steps",
            "cells visited",
        )?;
    }
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(
        &out.join("curves.png"),
        &curves,
        &order,
        &format!("SERA ablation, {preset}, {} seeds", args.seeds),
        "online env steps",
    )?;
    let mut json = serde_json::json!({
        "preset": preset, "seeds": args.seeds, "command": command,
        "budget": {"offline_steps": offline, "online_steps": online, "eval_every": eval_every},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "final": finals.iter().map(|(v, x)| (v.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>(),
        "per_seed": {"final_score": finals_by_seed, "mean_online_score": auc_by_seed, "bonus_spread": spread_by_seed, "bonus_mean": bonus_mean_by_seed},
        "paired": paired.iter().map(|(m, p)| serde_json::json!({"measure": m, "comparison": p})).collect::<Vec<_>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    if let Some(m) = maze_report {
        json["maze"] = m.json;
    }
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&json)?)?;
    let mut report = StudyReport::written(out, table, json);
    if maze.is_some() {
        report.listed.push("coverage.png");
    }
    Ok(report)
}

/// The AntMaze part of the report: its markdown, the coverage curves and the JSON record.
struct MazeReport {
    markdown: String,
    curves: Curves,
    json: serde_json::Value,
}

/// Coverage (cells visited by each fine-tuning run's recorded transitions), success and their
/// paired per-seed differences; `steps` is the evaluation grid of the online phase.
fn maze_section(
    map: &MazeMap,
    resolved: &toml::Table,
    jobs: &[Job],
    dirs: &[PathBuf],
    steps: &[u64],
    order: &[&str],
    online: u64,
) -> Result<MazeReport> {
    let free = map.free_cells();
    let goal_cells = map.goal_cells();
    // The offline data's cells, when the preset names a file.
    let offline_cells = match resolved.get("dataset").and_then(|d| d.get("path")).and_then(|p| p.as_str()) {
        Some(path) => {
            let ds = D4rlDataset::read(std::path::Path::new(path))
                .with_context(|| format!("reading the offline data {path} for its coverage"))?;
            Some(Coverage::of_dataset(&ds, map)?.cells())
        }
        None => None,
    };
    let grid: Vec<u64> = steps.iter().copied().filter(|s| *s > 0).collect();
    let (mut curves, mut success) = (Curves::new(), Curves::new());
    let (mut cells_final, mut cells_mean, mut cells_new, mut success_final) =
        (PerSeed::new(), PerSeed::new(), PerSeed::new(), PerSeed::new());
    let mut goal_steps: std::collections::BTreeMap<&str, std::collections::BTreeMap<u64, Option<u64>>> =
        Default::default();
    for (job, dir) in jobs.iter().zip(dirs).filter(|(j, _)| j.variant != "pretrain") {
        let file = dir.join(crate::run::rundir::DATASET);
        let ds = D4rlDataset::read(&file).with_context(|| {
            format!(
                "{} seed {}: no recorded transitions {} (the runs record them with train.record_dataset = true)",
                job.variant,
                job.seed,
                file.display()
            )
        })?;
        let c = Coverage::of_dataset(&ds, map)?;
        if c.steps < online {
            bail!("{}: {} recorded transitions, expected the {online} online env steps", file.display(), c.steps);
        }
        let curve = c.curve(&grid);
        cells_final.entry(job.variant).or_default().insert(job.seed, c.cells_at(online) as f64);
        cells_mean
            .entry(job.variant)
            .or_default()
            .insert(job.seed, super::jobs::mean_std(&curve.iter().map(|(_, y)| *y).collect::<Vec<_>>()).0);
        if let Some(known) = &offline_cells {
            cells_new.entry(job.variant).or_default().insert(job.seed, c.new_cells(known) as f64);
        }
        let first_goal = goal_cells.iter().filter_map(|g| c.first_visit.get(g).copied()).min();
        goal_steps.entry(job.variant).or_default().insert(job.seed, first_goal);
        curves.entry(job.variant).or_default().push(curve);
        let metrics = dir.join("metrics.jsonl");
        let s: Vec<(f64, f64)> =
            read_curve(&metrics, "eval/success_rate", "env_step")?.into_iter().map(|(x, y)| (x, 100.0 * y)).collect();
        if let Some(v) = super::jobs::at(&s, online) {
            success_final.entry(job.variant).or_default().insert(job.seed, v);
        }
        success.entry(job.variant).or_default().push(s);
    }

    let mut md = format!(
        "
## Maze coverage ({}: {} free cells; eval goal cell {:?})

",
        map.name,
        free.len(),
        goal_cells
    );
    if let Some(known) = &offline_cells {
        md.push_str(&format!(
            "The offline data's states visit {} of the {} free cells: {:?}.

",
            known.len(),
            free.len(),
            known
        ));
    }
    md.push_str("Cells visited by the states of each fine-tuning run's first t online env steps (the run's recorded transitions, nearest cell centre), mean ± std over seeds:

");
    md.push_str(&rows_with(&curves, &grid, order, super::jobs::at, |m, sd| format!("{m:.2} ± {sd:.2}")));
    md.push_str(
        "
Success rate (%) of the evaluations (`eval/success_rate` × 100), mean ± std over seeds:

",
    );
    md.push_str(&score_rows(&success, steps, order));
    md.push_str(
        "
First online env step with a state in the eval goal's cell, per seed (– never):

| variant | per seed | seeds that reached it |
|---|---|---|
",
    );
    for v in order {
        let Some(per) = goal_steps.get(v) else { continue };
        let cells: Vec<String> =
            per.iter().map(|(s, x)| format!("{s}: {}", x.map_or("–".to_string(), |x| x.to_string()))).collect();
        md.push_str(&format!(
            "| {v} | {} | {} of {} |
",
            cells.join(", "),
            per.values().filter(|x| x.is_some()).count(),
            per.len()
        ));
    }
    let mut measures: Vec<(&str, &PerSeed)> =
        vec![("cells visited, final", &cells_final), ("cells visited, mean over the online evaluations", &cells_mean)];
    if offline_cells.is_some() {
        measures.push(("cells outside the offline data's", &cells_new));
    }
    measures.push(("final success (%)", &success_final));
    let (paired_md, paired) = paired_rows(&measures, "calql", order);
    md.push_str(&format!(
        "
Paired per-seed differences of coverage and success (95% bootstrap intervals over seeds):

{paired_md}"
    ));
    let json = serde_json::json!({
        "map": map.name,
        "free_cells": free.len(),
        "goal_cells": goal_cells,
        "offline_cells": offline_cells,
        "coverage_steps": grid,
        "coverage_curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "success_curves": success.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "per_seed": {"cells_final": cells_final, "cells_mean": cells_mean, "cells_outside_offline": cells_new, "final_success_pct": success_final, "first_step_in_goal_cell": goal_steps},
        "paired": paired.iter().map(|(m, p)| serde_json::json!({"measure": m, "comparison": p})).collect::<Vec<_>>(),
    });
    Ok(MazeReport { markdown: md, curves, json })
}
