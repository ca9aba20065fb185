//! The table `o2o run` ends with: the score at each phase boundary of an offline-to-online run
//! (end of pre-training, end of warm-up, the lowest evaluation while fine-tuning — WSRL's
//! expected early dip — and the final one), with the wall time at each; when the agent logs
//! diagnostics, the critics' Q against Monte-Carlo returns on the online data over the run (the
//! recalibration WSRL's warm-up is for); and where the Rerun recording is.

use super::rundir::{Summary, METRICS};
use super::state::{EvalResult, PhaseEval};
use crate::report::runs::read_curve;
use anyhow::Result;
use std::path::Path;

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// What the row is.
    pub label: &'static str,
    /// Env steps at that point.
    pub env_step: u64,
    /// Mean evaluation return.
    pub ret: f64,
    /// Normalized score, when the env has one.
    pub normalized: Option<f64>,
    /// Seconds since the run started, when known.
    pub wall_s: Option<f64>,
}

/// Every evaluation in `metrics.jsonl`: `(env_step, return, normalized score)`.
pub fn evaluations(run_dir: &Path) -> Result<Vec<(u64, f64, Option<f64>)>> {
    let path = run_dir.join(METRICS);
    let returns = read_curve(&path, "eval/return", "env_step")?;
    // Every evaluation record of a run has a normalized score, or none has (the env's family).
    let scores = read_curve(&path, "eval/normalized_score", "env_step")?;
    let score = |i: usize| (scores.len() == returns.len()).then(|| scores[i].1);
    Ok(returns.iter().enumerate().map(|(i, &(x, r))| (x as u64, r, score(i))).collect())
}

/// The rows: start (or end of offline training), end of warm-up, lowest online evaluation
/// after the warm-up, final.
pub fn stages(summary: &Summary, evals: &[(u64, f64, Option<f64>)]) -> Vec<Stage> {
    let row = |label, p: &PhaseEval| Stage {
        label,
        env_step: p.env_step,
        ret: p.eval.mean_return,
        normalized: p.eval.normalized_score,
        wall_s: Some(p.wall_s),
    };
    let find = |name: &str| summary.phase_evals.iter().find(|p| p.phase == name);
    let mut rows = Vec::new();
    if let Some(p) = find("offline") {
        rows.push(row("offline (end of pre-training)", p));
    } else if let Some(p) = find("start") {
        rows.push(row("offline (start: the parent's agent)", p));
    }
    let warmup = find("warmup").or_else(|| find("random"));
    if let Some(p) = warmup {
        rows.push(row(if p.phase == "warmup" { "after warm-up (frozen policy)" } else { "after random steps" }, p));
    }
    let online_from = warmup.map_or(0, |p| p.env_step);
    let online: Vec<_> = evals.iter().filter(|(s, _, _)| *s > online_from).collect();
    if online.len() > 1 {
        let low = online.iter().min_by(|a, b| a.1.total_cmp(&b.1)).expect("non-empty");
        rows.push(Stage {
            label: "lowest while fine-tuning",
            env_step: low.0,
            ret: low.1,
            normalized: low.2,
            wall_s: None,
        });
    }
    if let Some(e) = &summary.final_eval {
        let end = summary.phase_evals.last().filter(|p| p.eval.step == e.step);
        rows.push(final_row(e, summary, end));
    }
    rows
}

fn final_row(e: &EvalResult, summary: &Summary, end: Option<&PhaseEval>) -> Stage {
    Stage {
        label: "final",
        env_step: summary.env_steps,
        ret: e.mean_return,
        normalized: e.normalized_score,
        wall_s: Some(end.map_or(summary.wall_s, |p| p.wall_s)),
    }
}

/// The table as markdown.
pub fn table(rows: &[Stage]) -> String {
    let mut s = String::from("| stage | env steps | return | normalized score | wall time |\n|---|---|---|---|---|\n");
    for r in rows {
        let n = r.normalized.map_or("–".to_string(), |n| format!("{n:.1}"));
        let w = r.wall_s.map_or("–".to_string(), |w| format!("{w:.0} s"));
        s.push_str(&format!("| {} | {} | {:.1} | {n} | {w} |\n", r.label, r.env_step, r.ret));
    }
    s
}

/// One diagnostics record on online data: the critics' mean Q on sampled rows against their
/// Monte-Carlo returns (`diag/online/q`, `diag/online/mc_return`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Env steps at the record.
    pub env_step: u64,
    /// The critics' mean Q on the sampled online rows.
    pub q: f64,
    /// Their mean Monte-Carlo return (finished episodes only).
    pub mc_return: f64,
}

/// Every online diagnostics record with both Q and the MC return, in order.
pub fn calibration(run_dir: &Path) -> Result<Vec<Calibration>> {
    let path = run_dir.join(METRICS);
    let q = read_curve(&path, "diag/online/q", "env_step")?;
    let g = read_curve(&path, "diag/online/mc_return", "env_step")?;
    // Both come from one record; a record without finished episodes has Q but no MC return.
    let mut out = Vec::new();
    let mut q = q.into_iter().peekable();
    for (x, mc) in g {
        while q.next_if(|&(qx, _)| qx < x).is_some() {}
        if let Some(&(qx, qv)) = q.peek().filter(|&&(qx, _)| qx == x) {
            out.push(Calibration { env_step: qx as u64, q: qv, mc_return: mc });
        }
    }
    Ok(out)
}

/// At most `n` of `rows`, evenly spread, the first and last always among them.
fn spread<T: Copy>(rows: &[T], n: usize) -> Vec<T> {
    if rows.len() <= n || n < 2 {
        return rows.to_vec();
    }
    (0..n).map(|i| rows[i * (rows.len() - 1) / (n - 1)]).collect()
}

/// The calibration rows as markdown (at most 8, evenly spread over the run).
pub fn calibration_table(rows: &[Calibration]) -> String {
    let mut s = String::from("| env steps | Q (critics' mean) | Monte-Carlo return | Q − MC |\n|---|---|---|---|\n");
    for c in spread(rows, 8) {
        s.push_str(&format!("| {} | {:.1} | {:.1} | {:+.1} |\n", c.env_step, c.q, c.mc_return, c.q - c.mc_return));
    }
    s
}

/// Print the table and where the recording is.
pub fn print(run_dir: &Path, summary: &Summary) -> Result<()> {
    let rows = stages(summary, &evaluations(run_dir)?);
    println!();
    print!("{}", table(&rows));
    let cal = calibration(run_dir)?;
    if cal.len() > 1 {
        println!();
        println!("Q against the Monte-Carlo return on online data (diag/online/*: how far the pretrained critic is from the return at the switch, and how fine-tuning recalibrates it):");
        print!("{}", calibration_table(&cal));
    }
    for w in &summary.warnings {
        println!("warning: {w}");
    }
    println!("total wall time: {:.0} s", summary.wall_s);
    let rrd = run_dir.join("recording.rrd");
    if rrd.exists() {
        println!("Rerun recording: {}", rrd.display());
        println!(
            "  open it with `o2o view {}` (or `o2o view {} --web` on a machine without a display)",
            run_dir.display(),
            run_dir.display()
        );
    }
    println!(
        "metrics: {} · config: {} · checkpoints: {}",
        run_dir.join(METRICS).display(),
        run_dir.join(super::rundir::CONFIG).display(),
        run_dir.join(super::rundir::CHECKPOINTS).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(step: u64, ret: f64) -> EvalResult {
        EvalResult {
            step,
            mean_return: ret,
            std_return: 0.0,
            mean_length: 1.0,
            normalized_score: Some(ret / 10.0),
            success_rate: None,
        }
    }

    #[test]
    fn rows_pick_the_phase_ends_the_dip_and_the_end() {
        let pe = |phase: &str, step, env_step, ret| PhaseEval {
            phase: phase.into(),
            eval: eval(step, ret),
            env_step,
            wall_s: 1.0,
        };
        let summary = Summary {
            finished: true,
            steps: 300,
            grad_steps: 200,
            env_steps: 200,
            episodes: 3,
            wall_s: 9.0,
            final_eval: Some(eval(300, 500.0)),
            best_eval: None,
            phase_evals: vec![
                pe("offline", 100, 0, 200.0),
                pe("warmup", 150, 50, 200.0),
                pe("online", 300, 200, 500.0),
            ],
            checkpoint: String::new(),
            warnings: Vec::new(),
        };
        let evals =
            vec![(0, 200.0, None), (50, 200.0, None), (100, 120.0, Some(12.0)), (150, 300.0, None), (200, 500.0, None)];
        let rows = stages(&summary, &evals);
        let labels: Vec<_> = rows.iter().map(|r| r.label).collect();
        assert_eq!(
            labels,
            ["offline (end of pre-training)", "after warm-up (frozen policy)", "lowest while fine-tuning", "final"]
        );
        assert_eq!((rows[2].env_step, rows[2].ret), (100, 120.0));
        assert_eq!(rows[3].ret, 500.0);
        let t = table(&rows);
        assert!(t.contains("| lowest while fine-tuning | 100 | 120.0 | 12.0 | – |"), "{t}");
    }

    #[test]
    fn calibration_pairs_q_with_the_mc_return_of_the_same_record() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            r#"{"env_step":0,"grad_step":0,"diag/online/q":5.0}"#,
            r#"{"env_step":100,"grad_step":10,"eval/return":3.0}"#,
            r#"{"env_step":200,"grad_step":20,"diag/online/q":41.0,"diag/online/mc_return":89.0}"#,
            r#"{"env_step":300,"grad_step":30,"diag/online/q":60.0,"diag/online/mc_return":90.5}"#,
            r#"{"env_step":400,"grad_step":40,"diag/online/q":88.0,"diag/online/mc_return":92.0}"#,
        ];
        std::fs::write(dir.path().join(METRICS), lines.join("\n") + "\n").unwrap();
        let c = calibration(dir.path()).unwrap();
        let got: Vec<_> = c.iter().map(|c| (c.env_step, c.q, c.mc_return)).collect();
        assert_eq!(got, [(200, 41.0, 89.0), (300, 60.0, 90.5), (400, 88.0, 92.0)]);
        let t = calibration_table(&c);
        assert!(t.contains("| 200 | 41.0 | 89.0 | -48.0 |") && t.contains("| 400 | 88.0 | 92.0 | -4.0 |"), "{t}");
        // Long runs: 8 rows, the first and the last among them.
        let many: Vec<_> = (0..30).map(|i| Calibration { env_step: i, q: 0.0, mc_return: 0.0 }).collect();
        let picked = spread(&many, 8);
        assert_eq!((picked.len(), picked[0].env_step, picked[7].env_step), (8, 0, 29));
    }
}
