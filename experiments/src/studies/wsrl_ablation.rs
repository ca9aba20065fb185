//! `o2o experiment wsrl-ablation`: why WSRL works (algorithms.md §1, the paper's Figs. on
//! warm-up and data retention), on one dataset, one online budget and several seeds:
//!
//! | variant | start | warm-up | online updates | offline data online |
//! |---|---|---|---|---|
//! | `wsrl` | the preset's pre-training (CQL on locomotion) | K frozen-policy steps | SAC, UTD 4 | none |
//! | `wsrl-no-warmup` | the same checkpoint | none | the same | none |
//! | `no-retain-cql` | the same checkpoint | none | SAC with CQL's regularizer kept, UTD 4 | none |
//! | `calql-retain` | Cal-QL pre-training | none | Cal-QL (regularizer kept), UTD 1 × 256 | 50/50 |
//! | `rlpd` | nothing (from scratch) | K uniformly random steps | RLPD, UTD 4 × 1024 | 50/50 |
//!
//! Every variant gets the same env-step budget (K + N) and the same networks (widths and number
//! of critics; RLPD's target takes the min over a subset of 2 of them, the preset's other rule). The two `wsrl-*`
//! variants start from one pre-training per seed, the preset's own (`wsrl-<env>-small`: CQL
//! with max-target backup for locomotion, as the paper does), so they differ only in the
//! warm-up; that is where the paper says the warm-up matters (a CQL critic's Q collapses when
//! online SAC starts from it with no online data). `calql-retain` is Cal-QL proper, so it
//! starts from a Cal-QL pre-training of the same budget (shared with the `wsrl-*` variants when
//! the preset pre-trains with Cal-QL). The `rlpd` variant is "RLPD (UTD 4)": RLPD's own settings
//! (mean actor, subset without replacement, backup entropy, H̄ = −|A|/2, LRs 3e-4) with UTD 4
//! on 1024-row batches after K uniformly random steps, to match WSRL's compute. It is neither
//! RLPD's UTD 20 nor WSRL's re-implementation, which runs WSRL's own SAC agent with a policy
//! warm-up (fidelity-audit D22).
//!
//! Runs are separate `o2o run` / `o2o train` processes (`--jobs` at a time, `--threads` torch
//! threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused, so
//! an interrupted experiment continues where it stopped. The output folder gets `table.md`
//! (mean ± std over seeds of the normalized score at fixed env steps, and the critics' Q against
//! the Monte-Carlo return on online data after the switch), `curves.png` and `results.json`.
//!
//! **The claim it tests** (WSRL, algorithms.md §1.6): without a warm-up, fine-tuning with no
//! retained data collapses at the switch (Q spikes, the policy unlearns), and a few thousand
//! warm-up steps of the frozen policy prevent it. Per variant and seed the table reports
//! - the **early dip**: the lowest score in the first 20 % of the online env steps (at least the
//!   first online evaluation) minus the offline score (step 0);
//! - the **dip after the switch**: the same, in a window of the same length that starts where the
//!   variant starts updating (after WSRL's warm-up and RLPD's random steps; at step 0 for the
//!   others), since WSRL's frozen warm-up fills the first 20 % of a short budget;
//! - **Q − MC at the switch** (the first online diagnostic) and its **largest magnitude** after;
//! - the **final score**, as IQM over seeds with a 95 % stratified-bootstrap interval;
//! and the paired per-seed differences of each variant to `wsrl` (final, mean online score, both dips)
//! with 95 % bootstrap intervals.

use super::jobs::{
    children_cpu_seconds, mean_between, paired_rows, plot, rows_with, run_jobs, score_rows, sets, Curves, Job, PerSeed,
    Processes,
};
use super::StudyReport;
use crate::report::runs::read_curve;
use crate::run::stages::calibration;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
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

/// What `o2o experiment wsrl-ablation` runs.
#[derive(Debug, Clone)]
pub struct WsrlAblationOptions {
    /// D4RL task, e.g. `hopper-medium` (small scale: `data/<env>-small/<task>-v2.hdf5` must
    /// exist, see `o2o dataset make-benchmark`; full scale: the registry's `<task>-v2`).
    pub task: String,
    /// Seeds 0..N.
    pub seeds: u64,
    /// `small` or `full`.
    pub scale: Scale,
    /// Output folder (default `experiments-out/wsrl-ablation-<task>-<scale>`).
    pub out: Option<PathBuf>,
    /// How the runs' processes run.
    pub processes: Processes,
    /// Config overrides for every run, as in `o2o run --set`.
    pub set: Vec<String>,
    /// The variants to run (empty: all of [`VARIANTS`]); `wsrl` must be among them, the others
    /// are compared with it.
    pub variants: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// Whether `variant` is selected, after checking the selection names known variants and `wsrl`.
fn selection(variants: &[String]) -> Result<impl Fn(&str) -> bool + '_> {
    if let Some(v) = variants.iter().find(|v| !VARIANTS.contains(&v.as_str())) {
        bail!("--variants: unknown variant {v:?}; expected some of {}", VARIANTS.join(", "));
    }
    if !variants.is_empty() && !variants.iter().any(|v| v == "wsrl") {
        bail!("--variants: `wsrl` must be among them (every other variant is compared with it)");
    }
    Ok(move |v: &str| variants.is_empty() || variants.iter().any(|x| x == v))
}

/// The variants, in table order.
pub const VARIANTS: [&str; 5] = ["wsrl", "wsrl-no-warmup", "no-retain-cql", "calql-retain", "rlpd"];

/// Step counts of one scale (after `--set` overrides of the same keys).
#[derive(Debug, Clone, Copy)]
struct Budget {
    offline: u64,
    warmup: u64,
    online: u64,
    eval_every: u64,
}

/// `o2o experiment wsrl-ablation`.
pub fn run(args: &WsrlAblationOptions) -> Result<StudyReport> {
    args.processes.check(args.seeds)?;
    let want = selection(&args.variants)?;
    let env_name = args.task.split('-').next().unwrap_or_default().to_string();
    let env = format!("{env_name}-v2");
    let scale = match args.scale {
        Scale::Small => "small",
        Scale::Full => "full",
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("experiments-out/wsrl-ablation-{}-{scale}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;

    // The base preset and the settings every run shares.
    let (preset, mut shared): (String, Vec<String>) = match args.scale {
        Scale::Small => {
            let file = PathBuf::from(format!("data/{env_name}-small/{}-v2.hdf5", args.task));
            let file = std::fs::canonicalize(&file).with_context(|| {
                format!("the small-scale dataset {} is missing; make it with `o2o dataset make-benchmark {env_name} --scale small --out data/{env_name}-small`", file.display())
            })?;
            (
                format!("wsrl-{env_name}-small"),
                vec![format!("env={env}"), format!("dataset.path={:?}", file.display().to_string())],
            )
        }
        Scale::Full => (format!("wsrl-{}", args.task), Vec::new()),
    };
    let base = crate::run::presets::load(&preset).with_context(|| format!("no WSRL preset for task {}", args.task))?.1;
    shared.extend(args.set.iter().cloned());
    // The preset with every run's overrides: what the budget, pre-training and networks read.
    let resolved = resolve(&base, &shared)?;
    let budget = budget_of(&resolved)?;
    check_warmup(&resolved, budget.warmup)?;
    let (k, n) = (budget.warmup, budget.online);
    let pretrain_algo = pretrain_of(&resolved);

    // Jobs: per seed, the preset's pre-training (and a Cal-QL one for `calql-retain` when the
    // preset's is not Cal-QL), the variants that start from them, and RLPD.
    let mut jobs: Vec<Job> = Vec::new();
    let runs_dir = |variant: &str, seed: u64| out.join("runs").join(variant).join(format!("seed-{seed}"));
    let pretrain_job = |variant: &'static str, algo: &str, seed: u64| {
        let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
        sets(&mut a, &shared);
        sets(&mut a, &[format!("agent.pretrain={algo}"), "train.warmup_steps=0".into(), "train.online_steps=0".into()]);
        Job { variant, seed, args: a, parent: None, runs_dir: runs_dir(variant, seed) }
    };
    let (mut pretrain, mut pretrain_calql) = (Vec::new(), Vec::new());
    for seed in 0..args.seeds {
        pretrain.push(jobs.len());
        jobs.push(pretrain_job("pretrain", &pretrain_algo, seed));
        if pretrain_algo != "calql" && want("calql-retain") {
            pretrain_calql.push(jobs.len());
            jobs.push(pretrain_job("pretrain-calql", "calql", seed));
        } else {
            pretrain_calql.push(jobs.len() - 1);
        }
    }
    for seed in (0..args.seeds).filter(|_| want("rlpd")) {
        // RLPD from scratch, same networks and budget: K random steps, then N online steps.
        let mut a = vec![
            "train".to_string(),
            "--preset".into(),
            format!("rlpd-{}", args.task),
            "--seed".into(),
            seed.to_string(),
        ];
        let agent = resolved.get("agent");
        let width = agent
            .and_then(|t| t.get("critic"))
            .and_then(|c| c.get("hidden"))
            .map(|h| h.to_string())
            .unwrap_or_else(|| "[256, 256]".into());
        // The same critic ensemble as the WSRL variants (RLPD's own is 10 with a subset of 2).
        let critics = agent.and_then(|t| t.get("num_critics")).and_then(|n| n.as_integer()).unwrap_or(10);
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
                format!("agent.num_critics={critics}"),
                format!("agent.target_subset={}", critics.min(2)),
                format!("agent.actor.mlp.hidden={width}"),
                format!("eval.every={}", budget.eval_every),
                "eval.at_start=true".into(),
            ],
        );
        jobs.push(Job { variant: "rlpd", seed, args: a, parent: None, runs_dir: runs_dir("rlpd", seed) });
    }
    for seed in 0..args.seeds {
        let (p, p_calql) = (pretrain[seed as usize], pretrain_calql[seed as usize]);
        let variant_sets: [(&'static str, usize, Vec<String>); 4] = [
            ("wsrl", p, vec![format!("agent.pretrain={pretrain_algo}")]),
            (
                "wsrl-no-warmup",
                p,
                vec![
                    format!("agent.pretrain={pretrain_algo}"),
                    "train.warmup_steps=0".into(),
                    format!("train.online_steps={}", k + n),
                ],
            ),
            // No retained data and no warm-up, the pre-training's regularizer kept online: the
            // "fine-tune the offline algorithm as is" baseline of the paper.
            (
                "no-retain-cql",
                p,
                vec![
                    format!("agent.pretrain={pretrain_algo}"),
                    "train.warmup_steps=0".into(),
                    format!("train.online_steps={}", k + n),
                    "agent.online_conservative=true".into(),
                ],
            ),
            (
                "calql-retain",
                p_calql,
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
        for (variant, parent, extra) in variant_sets.into_iter().filter(|(v, _, _)| want(v)) {
            let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
            sets(&mut a, &shared);
            sets(&mut a, &extra);
            jobs.push(Job { variant, seed, args: a, parent: Some(parent), runs_dir: runs_dir(variant, seed) });
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
    eprintln!(
        "all runs done in {:.0} s ({cpu_s:.0} s of CPU in the runs this process started)",
        t0.elapsed().as_secs_f64()
    );

    // Curves: normalized score against env steps, per variant and seed; and the critics' Q
    // against the Monte-Carlo return on online data (Q − MC), from the online diagnostics.
    let (mut curves, mut gaps) = (Curves::new(), Curves::new());
    let total = k + n;
    let mut per = ClaimValues::default();
    for (job, dir) in jobs.iter().zip(&dirs) {
        if job.variant.starts_with("pretrain") {
            continue;
        }
        let metrics = dir.join("metrics.jsonl");
        let curve = read_curve(&metrics, "eval/normalized_score", "env_step")
            .or_else(|_| read_curve(&metrics, "eval/return", "env_step"))?;
        let gap: Vec<(f64, f64)> = calibration(dir)?.iter().map(|c| (c.env_step as f64, c.q - c.mc_return)).collect();
        let switch = if matches!(job.variant, "wsrl" | "rlpd") { k } else { 0 };
        per.add(job.variant, job.seed, &curve, &gap, total, switch);
        curves.entry(job.variant).or_default().push(curve);
        gaps.entry(job.variant).or_default().push(gap);
    }
    let mut steps: Vec<u64> = (0..=total).step_by(budget.eval_every.max(1) as usize).collect();
    if steps.last() != Some(&total) {
        steps.push(total);
    }
    let command = args.command.clone();
    let mut table = table(
        &curves,
        &steps,
        &args.task,
        scale,
        args.seeds,
        &budget,
        &pretrain_algo,
        &command,
        t0.elapsed().as_secs_f64(),
        cpu_s,
    );
    table.push_str(&gap_table(&gaps, &gap_steps(k, total)));
    let (claim_md, paired) = claim_table(&per, total);
    table.push_str(&claim_md);
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(
        &out.join("curves.png"),
        &curves,
        &VARIANTS,
        &format!("WSRL ablation, {} ({scale}), {} seeds", args.task, args.seeds),
        "env steps (warm-up included)",
    )?;
    let json = serde_json::json!({
        "task": args.task, "scale": scale, "seeds": args.seeds, "command": command, "pretrain": pretrain_algo,
        "q_minus_mc": gaps.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "per_seed": {"final_score": per.finals, "mean_online_score": per.online_mean, "early_dip": per.dip, "dip_after_switch": per.dip_after_switch, "q_minus_mc_at_switch": per.gap_at_switch, "q_minus_mc_peak": per.gap_peak},
        "paired": paired.iter().map(|(m, p)| serde_json::json!({"measure": m, "comparison": p})).collect::<Vec<_>>(),
        "budget": {"offline_steps": budget.offline, "warmup_steps": k, "online_steps": n, "eval_every": budget.eval_every},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&json)?)?;
    Ok(StudyReport::written(out, table, json))
}

/// The claim's per-seed measures of every variant.
#[derive(Default)]
struct ClaimValues {
    finals: PerSeed,
    online_mean: PerSeed,
    dip: PerSeed,
    dip_after_switch: PerSeed,
    gap_at_switch: PerSeed,
    gap_peak: PerSeed,
}

impl ClaimValues {
    /// Read one run: its score `curve` and its `gap` (Q − MC against env steps) over `total`
    /// env steps (step 0 is the offline policy); the variant starts updating at env step `switch`.
    fn add(
        &mut self,
        variant: &'static str,
        seed: u64,
        curve: &[(f64, f64)],
        gap: &[(f64, f64)],
        total: u64,
        switch: u64,
    ) {
        let put = |m: &mut PerSeed, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                m.entry(variant).or_default().insert(seed, v);
            }
        };
        put(&mut self.finals, super::jobs::at(curve, total));
        put(&mut self.online_mean, mean_between(curve, 0, total));
        put(&mut self.dip, early_dip(curve, total));
        put(&mut self.dip_after_switch, dip_in(curve, switch, total as f64 * 0.2));
        put(&mut self.gap_at_switch, gap.first().map(|(_, g)| *g));
        put(&mut self.gap_peak, gap.iter().map(|(_, g)| *g).max_by(|a, b| a.abs().total_cmp(&b.abs())));
    }
}

/// The early dip: the lowest score at env steps in (0, 20 % of `total`] (or at the first online
/// evaluation, when none falls there) minus the score at step 0 (the offline policy); `None`
/// without an offline and an online evaluation.
pub(super) fn early_dip(curve: &[(f64, f64)], total: u64) -> Option<f64> {
    dip_in(curve, 0, total as f64 * 0.2)
}

/// The lowest score at env steps in (`from`, `from + len`] (or at the first evaluation after
/// `from`, when none falls there) minus the score at step 0; `None` without both.
fn dip_in(curve: &[(f64, f64)], from: u64, len: f64) -> Option<f64> {
    let (from, start) = (from as f64, super::jobs::at(curve, 0)?);
    let first = curve.iter().map(|(x, _)| *x).filter(|x| *x > from).min_by(f64::total_cmp)?;
    let cut = (from + len).max(first);
    let low = curve.iter().filter(|(x, _)| *x > from && *x <= cut).map(|(_, y)| *y).min_by(f64::total_cmp)?;
    Some(low - start)
}

/// The claim's section: per variant the final IQM with its 95 % interval, the mean early dip,
/// Q − MC at the switch and its peak; then every variant's paired differences to `wsrl`.
fn claim_table(per: &ClaimValues, total: u64) -> (String, Vec<(String, super::jobs::Paired)>) {
    use crate::report::stats::{aggregate_iqm, stratified_bootstrap, DEFAULT_REPS};
    let mut s = format!(
        "\n## The claim: a collapse at the switch that the warm-up prevents\n\nPer variant over seeds: the final score's IQM with its 95% \
         stratified-bootstrap interval; the early dip (the lowest score in the first 20% of the {total} env steps minus the offline score, mean ± std); \
         the dip after the switch (the same, over a window of the same length from where the variant starts updating: after WSRL's warm-up and RLPD's random steps); \
         Q − MC at the first online diagnostic and the largest |Q − MC| after it (mean ± std).\n\n\
         | variant | final IQM [95% CI] | early dip | dip after the switch | Q − MC at the switch | peak Q − MC | seeds |\n|---|---|---|---|---|---|---|\n"
    );
    let ms = |m: &PerSeed, v: &str| {
        m.get(v).filter(|x| !x.is_empty()).map(|x| {
            let vals: Vec<f64> = x.values().copied().collect();
            let (mu, sd) = super::jobs::mean_std(&vals);
            format!("{mu:+.1} ± {sd:.1}")
        })
    };
    for v in VARIANTS {
        let Some(finals) = per.finals.get(v).filter(|f| !f.is_empty()) else { continue };
        let vals: Vec<f64> = finals.values().copied().collect();
        let e = stratified_bootstrap(std::slice::from_ref(&vals), aggregate_iqm, DEFAULT_REPS, 0.95, 0);
        let dash = || "–".to_string();
        s.push_str(&format!(
            "| {v} | {:.1} [{:.1}, {:.1}] | {} | {} | {} | {} | {} |\n",
            e.point,
            e.lo,
            e.hi,
            ms(&per.dip, v).unwrap_or_else(dash),
            ms(&per.dip_after_switch, v).unwrap_or_else(dash),
            ms(&per.gap_at_switch, v).unwrap_or_else(dash),
            ms(&per.gap_peak, v).unwrap_or_else(dash),
            vals.len()
        ));
    }
    let (rows, paired) = paired_rows(
        &[
            ("final score", &per.finals),
            ("mean online score", &per.online_mean),
            ("early dip", &per.dip),
            ("dip after the switch", &per.dip_after_switch),
        ],
        "wsrl",
        &VARIANTS,
    );
    s.push_str(&format!("\nPaired per-seed differences to `wsrl` (95% bootstrap intervals over seeds; a dip is negative, so a deeper dip than WSRL's reads lower):\n\n{rows}"));
    (s, paired)
}

/// The preset table with `overrides` applied (as each run resolves its own config).
fn resolve(base: &toml::Table, overrides: &[String]) -> Result<toml::Table> {
    let mut t = base.clone();
    crate::run::config::apply_overrides(&mut t, overrides)?;
    Ok(t)
}

/// Refuse a warm-up the `wsrl-no-warmup` variant would have too. With no retained data the first
/// update needs a full online batch in the buffer, so "no warm-up" still acts with the frozen
/// pre-trained policy for `online batch` steps (WSRL's `finetune.py` starts updating after
/// `max(warmup_steps, batch_size)` steps the same way); a warm-up not above that makes the two
/// variants the same run.
fn check_warmup(t: &toml::Table, warmup: u64) -> Result<()> {
    let train = t.get("train");
    let get = |key: &str| train.and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0);
    let ratio = train.and_then(|s| s.get("offline_ratio")).and_then(|v| v.as_float()).unwrap_or(0.0);
    let proportional = train.and_then(|s| s.get("offline_mix")).and_then(|v| v.as_str()) == Some("proportional");
    if ratio > 0.0 || proportional {
        return Ok(()); // retained rows fill the first batches: updates start at once without a warm-up
    }
    let batch = match (get("online_batch_size"), get("batch_size")) {
        (0, 0) => crate::run::config::TrainConfig::default().batch_size as i64,
        (0, b) | (b, _) => b,
    } as u64;
    if warmup <= batch {
        bail!(
            "train.warmup_steps = {warmup} is not above the online batch ({batch} rows): with no retained data the first update waits for a full batch anyway, so `wsrl` and `wsrl-no-warmup` would be the same run; raise train.warmup_steps above {batch} (WSRL's scripts: 5000 against a batch of 1024)"
        );
    }
    Ok(())
}

/// The step counts a resolved preset table names.
fn budget_of(t: &toml::Table) -> Result<Budget> {
    let get = |section: &str, key: &str| {
        t.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64
    };
    let b = Budget {
        offline: get("train", "offline_steps"),
        warmup: get("train", "warmup_steps"),
        online: get("train", "online_steps"),
        eval_every: get("eval", "every"),
    };
    if b.online == 0 || b.eval_every == 0 {
        bail!("the ablation needs train.online_steps and eval.every above 0");
    }
    Ok(b)
}

/// The pre-training algorithm a resolved preset table names: `agent.pretrain`, `cql` when unset.
fn pretrain_of(t: &toml::Table) -> String {
    t.get("agent").and_then(|a| a.get("pretrain")).and_then(|p| p.as_str()).unwrap_or("cql").to_string()
}

/// Full name of a pre-training algorithm for the table.
fn algo_name(algo: &str) -> &str {
    match algo {
        "cql" => "CQL",
        "calql" => "Cal-QL",
        other => other,
    }
}

/// The markdown table: mean ± std over seeds at each of `steps`.
#[allow(clippy::too_many_arguments)]
fn table(
    curves: &Curves,
    steps: &[u64],
    task: &str,
    scale: &str,
    seeds: u64,
    b: &Budget,
    pretrain: &str,
    command: &str,
    wall_s: f64,
    cpu_s: f64,
) -> String {
    let calql = if pretrain == "calql" {
        "the same checkpoint".to_string()
    } else {
        format!("its own {} Cal-QL gradient steps", b.offline)
    };
    format!(
        "# WSRL ablation: {task} ({scale})\n\nD4RL normalized score (×100), mean ± std over {seeds} seeds, at fixed env steps of the online budget \
         ({} warm-up or random steps + {} online steps; step 0 is the offline policy). Pre-training: {} {} gradient steps, shared by the \
         two wsrl variants of a seed; calql-retain starts from {calql}. Without a warm-up the first online update still waits \
         for one online batch of rows, as the official code does (fidelity-audit D21).\n\nCommand: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the runs it started, \
         finished runs it reused not counted)\n\n{}",
        b.warmup,
        b.online,
        b.offline,
        algo_name(pretrain),
        score_rows(curves, steps, &VARIANTS)
    )
}

/// Env steps at which the Q − MC table reads the diagnostics: the switch, every 2.5k steps of
/// the first 10k after it, then every 10k, and the end.
fn gap_steps(warmup: u64, total: u64) -> Vec<u64> {
    let mut s: Vec<u64> = (0..=4).map(|i| warmup + 2500 * i).filter(|&x| x > 0 && x <= total).collect();
    let mut x = warmup + 20_000;
    while x < total {
        s.push(x);
        x += 10_000;
    }
    if s.last() != Some(&total) {
        s.push(total);
    }
    s
}

/// The newest point of `curve` at or before `x`, within 2500 steps of it (diagnostics records
/// fall on loop steps, which need not be the table's env steps).
fn near(curve: &[(f64, f64)], x: u64) -> Option<f64> {
    curve.iter().rev().find(|(s, _)| *s as u64 <= x && *s as u64 + 2500 > x).map(|(_, y)| *y)
}

/// The Q − Monte-Carlo table: how far the critics' mean Q on online data is from the return it
/// predicts, mean ± std over seeds (a collapsed critic shows a large negative gap after the
/// switch; an over-estimating one a large positive gap).
fn gap_table(gaps: &Curves, steps: &[u64]) -> String {
    let mut s = String::from(
        "\n## Q against the Monte-Carlo return on online data\n\nThe critics' mean Q on sampled online rows minus their Monte-Carlo return \
         (`diag/online/q` − `diag/online/mc_return`), mean ± std over seeds, at env steps (the `wsrl` switch is after the warm-up; \
         the other variants learn from their first online step). A critic that has collapsed sits far below the return.\n\n",
    );
    s.push_str(&rows_with(gaps, steps, &VARIANTS, near, |m, sd| format!("{m:+.1} ± {sd:.1}")));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--variants` selects among the known variants, `wsrl` required; none means all.
    #[test]
    fn variants_are_selected_by_name_with_wsrl_required() {
        let all = selection(&[]).unwrap();
        assert!(VARIANTS.iter().all(|v| all(v)));
        let names = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let two = names(&["wsrl", "wsrl-no-warmup"]);
        let want = selection(&two).unwrap();
        assert!(want("wsrl") && want("wsrl-no-warmup") && !want("rlpd") && !want("calql-retain"));
        let e = selection(&names(&["wsrl", "wsrl-nowarmup"])).err().unwrap().to_string();
        assert!(e.contains("unknown variant \"wsrl-nowarmup\"") && e.contains("wsrl-no-warmup"), "{e}");
        let e = selection(&names(&["rlpd"])).err().unwrap().to_string();
        assert!(e.contains("`wsrl` must be among them"), "{e}");
    }

    #[test]
    fn a_warmup_not_above_the_online_batch_is_refused() {
        let t = |w: i64, b: i64, ob: i64| -> toml::Table {
            toml::from_str(&format!("[train]\nwarmup_steps = {w}\nbatch_size = {b}\nonline_batch_size = {ob}\n"))
                .unwrap()
        };
        let err = check_warmup(&t(1000, 256, 1024), 1000).unwrap_err().to_string();
        assert!(err.contains("warmup_steps = 1000") && err.contains("1024 rows"), "{err}");
        assert!(check_warmup(&t(1024, 256, 1024), 1024).is_err());
        check_warmup(&t(1025, 256, 1024), 1025).unwrap();
        // No online batch size: the batch size is the online batch.
        assert!(check_warmup(&t(256, 256, 0), 256).is_err());
        check_warmup(&t(2500, 256, 0), 2500).unwrap();
        // Retained offline rows fill the batches from the first step: any warm-up is meaningful.
        let mut retained = t(1000, 256, 1024);
        retained["train"].as_table_mut().unwrap().insert("offline_ratio".into(), toml::Value::Float(0.5));
        check_warmup(&retained, 1000).unwrap();
    }

    #[test]
    fn table_names_the_budget_and_holds_the_rows() {
        let mut curves = Curves::new();
        curves.insert("wsrl", vec![vec![(0.0, 10.0), (100.0, 20.0)]]);
        let b = Budget { offline: 5, warmup: 50, online: 50, eval_every: 100 };
        let t = table(&curves, &[0, 100], "hopper-medium", "small", 1, &b, "cql", "o2o experiment", 1.0, 2.0);
        assert!(
            t.contains("50 warm-up or random steps + 50 online steps") && t.contains("5 CQL gradient steps"),
            "{t}"
        );
        assert!(t.contains("calql-retain starts from its own 5 Cal-QL gradient steps"), "{t}");
        assert!(t.contains("| wsrl | 10.0 ± 0.0 | 20.0 ± 0.0 |"), "{t}");
        let t = table(&curves, &[0, 100], "hopper-medium", "small", 1, &b, "calql", "o2o experiment", 1.0, 2.0);
        assert!(
            t.contains("5 Cal-QL gradient steps") && t.contains("calql-retain starts from the same checkpoint"),
            "{t}"
        );
    }

    /// The dip is the lowest score in the first 20 % of the online steps against step 0; the
    /// claim table holds each measure and the paired rows against `wsrl`.
    #[test]
    fn the_claim_measures_dip_gap_and_paired_differences() {
        let curve = [(0.0, 40.0), (1000.0, 30.0), (2000.0, 10.0), (3000.0, 5.0), (10_000.0, 60.0)];
        // 20 % of 10 000 = 2000: the evaluations at 1000 and 2000 count, 3000 does not.
        assert_eq!(early_dip(&curve, 10_000), Some(-30.0));
        assert_eq!(early_dip(&curve[1..], 10_000), None, "no offline score");
        // Evaluations sparser than 20 % of the budget: the first online one is the dip's window.
        assert_eq!(early_dip(&[(0.0, 40.0), (4000.0, 35.0), (8000.0, 20.0)], 10_000), Some(-5.0));
        // After a switch at 2000 the window is (2000, 4000]: the drop at 3000 counts, the
        // warm-up's 2000 does not; past the window only the first evaluation after the switch.
        assert_eq!(dip_in(&curve, 2000, 2000.0), Some(-35.0));
        assert_eq!(dip_in(&[(0.0, 40.0), (2000.0, 10.0), (9000.0, 30.0), (9500.0, 0.0)], 2000, 2000.0), Some(-10.0));
        assert_eq!(dip_in(&curve, 10_000, 2000.0), None, "no evaluation after the switch");
        let mut per = ClaimValues::default();
        for seed in 0..3 {
            let s = seed as f64;
            per.add(
                "wsrl",
                seed,
                &[(0.0, 40.0), (2000.0, 38.0 + s), (3000.0, 12.0), (10_000.0, 60.0 + s)],
                &[(2500.0, -5.0), (5000.0, 20.0)],
                10_000,
                2000,
            );
            per.add(
                "wsrl-no-warmup",
                seed,
                &[(0.0, 40.0), (2000.0, 10.0), (10_000.0, 50.0 + s)],
                &[(2500.0, -80.0 - s), (5000.0, 30.0)],
                10_000,
                0,
            );
        }
        assert_eq!(per.gap_peak["wsrl-no-warmup"][&1], -81.0);
        assert_eq!(per.gap_at_switch["wsrl"][&0], -5.0);
        let (t, paired) = claim_table(&per, 10_000);
        assert!(
            t.contains("| wsrl | 61.0 [60.0, 62.0] | -1.0 ± 0.8 | -28.0 ± 0.0 | -5.0 ± 0.0 | +20.0 ± 0.0 | 3 |"),
            "{t}"
        );
        assert!(t.contains("| wsrl-no-warmup | 51.0 [50.0, 52.0] | -30.0 ± 0.0 | -30.0 ± 0.0 |"), "{t}");
        assert!(t.contains("| final score | wsrl-no-warmup − wsrl | -10.0 [-10.0, -10.0] |"), "{t}");
        assert!(t.contains("| early dip | wsrl-no-warmup − wsrl | -29.0 ["), "{t}");
        assert!(t.contains("| dip after the switch | wsrl-no-warmup − wsrl | -2.0 [-2.0, -2.0] |"), "{t}");
        assert_eq!(paired.len(), 4);
    }

    #[test]
    fn gap_table_reads_the_nearest_earlier_diagnostic() {
        assert_eq!(gap_steps(2500, 47_500), vec![2500, 5000, 7500, 10_000, 12_500, 22_500, 32_500, 42_500, 47_500]);
        assert_eq!(gap_steps(0, 30_000), vec![2500, 5000, 7500, 10_000, 20_000, 30_000]);
        let mut gaps = Curves::new();
        gaps.insert("wsrl-no-warmup", vec![vec![(2500.0, -100.0), (4750.0, -50.0)], vec![(2500.0, -300.0)]]);
        let t = gap_table(&gaps, &[2500, 5000, 7500]);
        assert!(t.contains("| wsrl-no-warmup | -200.0 ± 100.0 | -50.0 ± 0.0 | – |"), "{t}");
    }

    #[test]
    fn the_preset_names_the_pretraining() {
        let (_, base) = crate::run::presets::load("wsrl-halfcheetah-small").unwrap();
        assert_eq!(pretrain_of(&resolve(&base, &[]).unwrap()), "cql");
        assert_eq!(pretrain_of(&resolve(&base, &["agent.pretrain=\"calql\"".into()]).unwrap()), "calql");
    }

    #[test]
    fn budget_reads_the_preset_with_overrides() {
        let (_, base) = crate::run::presets::load("wsrl-hopper-small").unwrap();
        let b = budget_of(&resolve(&base, &["train.online_steps=7".into()]).unwrap()).unwrap();
        assert_eq!((b.warmup, b.online), (2500, 7));
        assert!(budget_of(&resolve(&base, &["train.online_steps=0".into()]).unwrap()).is_err());
    }
}
