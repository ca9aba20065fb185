//! `--seeds 0..5 [--jobs N]` on `train`, `run` and `finetune`: the same command once per seed,
//! each a separate `o2o` process with `--seed k` and its own run directory (ready for
//! `o2o report`), at most N at a time. Each child gets `--threads` = cores / N unless the
//! command sets it, and reports its summary as JSON; the sweep prints one line per seed (or
//! the children's JSON lines with `--json`) and fails if any seed failed.
//!
//! SIGINT or SIGTERM to the sweep's PID (Ctrl-C, a supervisor) stops it the way it stops a run:
//! each running seed gets one SIGTERM and writes its checkpoint, no new seed starts, and the
//! sweep prints an `o2o resume` line per stopped run and the seeds it did not start, then exits
//! with 130.

use super::CommonArgs;
use super::SweepArgs;
use anyhow::{bail, Context, Result};
use o2o_experiments::run::interrupt;
use std::collections::VecDeque;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The seeds of `0..5`, `0..=4` or `0,3,7`.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>> {
    let bad = || format!("--seeds {text:?}: expected a range like 0..5 (0 to 4) or 0..=4, or a list like 0,3,7");
    let seeds: Vec<u64> = if let Some((a, b)) = text.split_once("..=") {
        let (a, b): (u64, u64) = (a.trim().parse().with_context(bad)?, b.trim().parse().with_context(bad)?);
        (a..=b).collect()
    } else if let Some((a, b)) = text.split_once("..") {
        let (a, b): (u64, u64) = (a.trim().parse().with_context(bad)?, b.trim().parse().with_context(bad)?);
        (a..b).collect()
    } else {
        text.split(',').map(|s| s.trim().parse::<u64>()).collect::<Result<_, _>>().with_context(bad)?
    };
    if seeds.is_empty() {
        bail!("--seeds {text:?} names no seed");
    }
    let mut sorted = seeds.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != seeds.len() {
        bail!("--seeds {text:?} names a seed twice");
    }
    Ok(seeds)
}

/// This process's arguments without the sweep's own (`--seeds`, `--jobs`, `--json`), and
/// without `--max-time`, which bounds the whole sweep: the sweep stops its running seeds when it
/// passes, rather than each seed getting the full budget from its own start.
fn child_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        match a.as_str() {
            "--seeds" | "--jobs" | "--max-time" => skip_next = true,
            "--json" => {}
            s if ["--seeds=", "--jobs=", "--max-time="].iter().any(|p| s.starts_with(p)) => {}
            _ => out.push(a.clone()),
        }
    }
    out
}

/// Run the sweep.
pub fn run(sweep: &SweepArgs, common: &CommonArgs) -> Result<()> {
    let seeds = parse_seeds(sweep.seeds.as_deref().unwrap_or_default())?;
    if sweep.jobs == 0 {
        bail!("--jobs: expected at least 1, found 0");
    }
    common.arm_max_time()?;
    let exe = std::env::current_exe().context("cannot find the o2o executable for the sweep's runs")?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let base = child_args(&args);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = common.threads.is_none().then(|| (cores / sweep.jobs.min(seeds.len())).max(1));
    eprintln!(
        "o2o: seeds {} ({} at a time)",
        seeds.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
        sweep.jobs
    );
    let mut queue: VecDeque<u64> = seeds.iter().copied().collect();
    let mut running: Vec<(u64, Child)> = Vec::new();
    let mut results: Vec<(u64, Outcome)> = Vec::new();
    let mut forwarded = false;
    while !running.is_empty() || (!queue.is_empty() && !interrupt::requested()) {
        while running.len() < sweep.jobs && !interrupt::requested() {
            let Some(seed) = queue.pop_front() else { break };
            let mut c = Command::new(&exe);
            c.args(&base).args(["--seed", &seed.to_string(), "--json"]).stdout(Stdio::piped()).stderr(Stdio::inherit());
            if let Some(t) = threads {
                c.args(["--threads", &t.to_string()]);
            }
            interrupt::child_stopped_with_parent(&mut c);
            running.push((seed, c.spawn().with_context(|| format!("cannot start the run of seed {seed}"))?));
        }
        // A stop asked of the sweep (Ctrl-C, SIGTERM to its PID) goes to every run once: each
        // writes a checkpoint and exits; nothing new starts. The runs are in process groups of
        // their own, so a terminal's Ctrl-C reaches them only through here (a second signal
        // would make them quit without their checkpoint).
        if interrupt::requested() && !forwarded {
            forwarded = true;
            for (_, child) in &running {
                interrupt::forward(child);
            }
        }
        match running.iter_mut().position(|(_, c)| matches!(c.try_wait(), Ok(Some(_)))) {
            Some(i) => {
                let (seed, child) = running.remove(i);
                let out = child.wait_with_output().with_context(|| format!("waiting for the run of seed {seed}"))?;
                results.push((seed, outcome(&out)));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    results.sort_by_key(|(seed, _)| *seed);
    let (mut failed, mut stopped) = (Vec::new(), Vec::new());
    for (seed, r) in &results {
        match r {
            Outcome::Finished(v) if common.json => println!("{v}"),
            Outcome::Finished(v) => {
                let ret = v["final_eval"]["mean_return"]
                    .as_f64()
                    .map_or("no evaluation".to_string(), |r| format!("eval return {r:.1}"));
                let score = v["final_eval"]["normalized_score"]
                    .as_f64()
                    .map_or(String::new(), |s| format!(" (normalized {s:.1})"));
                println!("seed {seed}: {} {ret}{score}", v["run_dir"].as_str().unwrap_or("?"));
            }
            Outcome::Stopped(v) => {
                if common.json {
                    println!("{v}");
                }
                let dir = v["run_dir"].as_str().unwrap_or("?");
                eprintln!("seed {seed}: stopped at step {}; continue with: o2o resume {dir}", v["step"]);
                stopped.push(*seed);
            }
            Outcome::Failed(why) => {
                eprintln!("seed {seed}: failed ({why})");
                failed.push(*seed);
            }
        }
    }
    if interrupt::requested() {
        let rest: Vec<String> = queue.iter().map(|s| s.to_string()).collect();
        if !rest.is_empty() {
            eprintln!("not started: seeds {}; run them with --seeds {}", rest.join(", "), rest.join(","));
        }
        if !failed.is_empty() {
            bail!("{} of {} seeds failed: {failed:?}; the sweep was stopped", failed.len(), results.len());
        }
        return Err(SweepStopped { stopped: stopped.len(), not_started: queue.len() }.into());
    }
    if !failed.is_empty() {
        bail!("{} of {} seeds failed: {failed:?}", failed.len(), results.len());
    }
    Ok(())
}

/// A sweep stopped by a signal: the CLI exits with 130, as a stopped run does.
#[derive(Debug, thiserror::Error)]
#[error("the sweep was stopped: {stopped} run(s) stopped with a checkpoint, {not_started} seed(s) not started")]
pub struct SweepStopped {
    /// Runs that stopped with a checkpoint (each printed with its `o2o resume` line).
    pub stopped: usize,
    /// Seeds the sweep did not start.
    pub not_started: usize,
}

/// How one seed's run ended.
enum Outcome {
    /// Its summary (the JSON line `--json` prints at the end).
    Finished(serde_json::Value),
    /// Stopped on request with a checkpoint: `{"stopped": true, "run_dir", "checkpoint", "step"}`.
    Stopped(serde_json::Value),
    /// Anything else, said in words.
    Failed(String),
}

fn outcome(out: &Output) -> Outcome {
    let line = String::from_utf8_lossy(&out.stdout).lines().rev().find(|l| l.starts_with('{')).map(str::to_string);
    let json = line.and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok());
    match (out.status.success(), json) {
        (true, Some(v)) => Outcome::Finished(v),
        (true, None) => Outcome::Failed("no summary".to_string()),
        (false, Some(v)) if out.status.code() == Some(130) && v["stopped"] == true => Outcome::Stopped(v),
        (false, _) => Outcome::Failed(match out.status.code() {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_forms() {
        assert_eq!(parse_seeds("0..5").unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(parse_seeds("2..=4").unwrap(), vec![2, 3, 4]);
        assert_eq!(parse_seeds("0, 3,7").unwrap(), vec![0, 3, 7]);
        assert!(parse_seeds("3..3").unwrap_err().to_string().contains("no seed"));
        assert!(parse_seeds("1,1").unwrap_err().to_string().contains("twice"));
        assert!(parse_seeds("a..b").unwrap_err().to_string().contains("expected a range"));
    }

    #[test]
    fn child_args_drop_the_sweep_options() {
        let a: Vec<String> =
            ["train", "--preset", "x", "--seeds", "0..3", "--jobs=2", "--json", "--max-time", "2h", "--set", "a=1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(child_args(&a), ["train", "--preset", "x", "--set", "a=1"]);
        let a: Vec<String> = ["run", "--max-time=90s", "--seeds=1,2"].iter().map(|s| s.to_string()).collect();
        assert_eq!(child_args(&a), ["run"]);
    }
}
