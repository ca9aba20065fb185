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
//! presets use CQL for locomotion, as the paper does. The `rlpd` variant is "RLPD (UTD 4)":
//! RLPD's own settings (mean actor, subset without replacement, backup entropy, H̄ = −|A|/2,
//! LRs 3e-4) with UTD 4 on 1024-row batches after K uniformly random steps, to match WSRL's
//! compute. It is neither RLPD's UTD 20 nor WSRL's re-implementation, which runs WSRL's own SAC
//! agent with a policy warm-up (fidelity-audit D22).
//!
//! Runs are separate `o2o run` / `o2o train` processes (`--jobs` at a time, `--threads` torch
//! threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused, so
//! an interrupted experiment continues where it stopped. The output folder gets `table.md`
//! (mean ± std over seeds of the normalized score at fixed env steps), `curves.png` and
//! `results.json`.

use super::jobs::{children_cpu_seconds, command_line, plot, run_jobs, score_rows, sets, Curves, Job, Processes};
use o2o_experiments::report::runs::read_curve;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
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
    #[command(flatten)]
    pub processes: Processes,
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

/// `o2o experiment wsrl-ablation`.
pub fn run(args: AblationArgs) -> Result<()> {
    if args.seeds == 0 || args.processes.jobs == 0 || args.processes.threads < 1 {
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
        args.processes.jobs,
        budget.offline,
        out.display()
    );
    let t0 = Instant::now();
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    let cpu_s = children_cpu_seconds();
    eprintln!("all runs done in {:.0} s ({cpu_s:.0} s of CPU in the runs this process started)", t0.elapsed().as_secs_f64());

    // Curves: normalized score against env steps, per variant and seed.
    let mut curves = Curves::new();
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
    let command = command_line();
    let table = table(&curves, &steps, &args.task, scale, args.seeds, &budget, &command, t0.elapsed().as_secs_f64(), cpu_s);
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(&out.join("curves.png"), &curves, &VARIANTS, &format!("WSRL ablation, {} ({scale}), {} seeds", args.task, args.seeds), "env steps (warm-up included)")?;
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

/// The markdown table: mean ± std over seeds at each of `steps`.
#[allow(clippy::too_many_arguments)]
fn table(curves: &Curves, steps: &[u64], task: &str, scale: &str, seeds: u64, b: &Budget, command: &str, wall_s: f64, cpu_s: f64) -> String {
    format!(
        "# WSRL ablation: {task} ({scale})\n\nD4RL normalized score (×100), mean ± std over {seeds} seeds, at fixed env steps of the online budget \
         ({} warm-up or random steps + {} online steps; step 0 is the offline policy). Pre-training: {} Cal-QL gradient steps, shared by the \
         three pre-trained variants of a seed.\n\nCommand: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the runs it started, \
         finished runs it reused not counted)\n\n{}",
        b.warmup,
        b.online,
        b.offline,
        score_rows(curves, steps, &VARIANTS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_the_budget_and_holds_the_rows() {
        let mut curves = Curves::new();
        curves.insert("wsrl", vec![vec![(0.0, 10.0), (100.0, 20.0)]]);
        let b = Budget { offline: 5, warmup: 50, online: 50, eval_every: 100 };
        let t = table(&curves, &[0, 100], "hopper-medium", "small", 1, &b, "o2o experiment", 1.0, 2.0);
        assert!(t.contains("50 warm-up or random steps + 50 online steps") && t.contains("5 Cal-QL gradient steps"), "{t}");
        assert!(t.contains("| wsrl | 10.0 ± 0.0 | 20.0 ± 0.0 |"), "{t}");
    }

    #[test]
    fn budget_reads_the_preset_with_overrides() {
        let (_, base) = o2o_experiments::run::presets::load("wsrl-hopper-small").unwrap();
        let b = budget_of(&base, &["train.online_steps=7".into()]).unwrap();
        assert_eq!((b.warmup, b.online), (2500, 7));
        assert!(budget_of(&base, &["train.online_steps=0".into()]).is_err());
    }
}
