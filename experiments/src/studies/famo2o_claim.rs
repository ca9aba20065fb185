//! `o2o experiment famo2o-claim`: does a state-adaptive balance beat any single balance
//! (FamO2O, Wang et al. 2023, arXiv 2310.17966; issue 42)?
//!
//! | variant | universal policy trained on | acting β |
//! |---|---|---|
//! | `famo2o` | β ~ U[0.5, 1.5] offline, the balance model's β(s) online | β(s) of the balance model |
//! | `fixed-0.5` | β = 0.5 offline and online | 0.5 |
//! | `fixed-1.0` | β = 1.0 offline and online (CQL's own balance) | 1.0 |
//! | `fixed-1.5` | β = 1.5 offline and online | 1.5 |
//!
//! **The fixed values.** FamO2O-CQL's universal loss is `α log π − β Q`: β is an inverse
//! temperature on the CQL-regularized critic. The preset's map is the official code's
//! (`beta_map = "code"`), under which the balance model's β lies in (−0.5, 1.5), but the
//! universal policy is trained offline on β ~ U[β_min, β_max] = U[0.5, 1.5] only, the paper's
//! nominal range. β ≤ 0 is no balance at all (β = 0 maximizes entropy alone, β < 0 *lowers* Q), so
//! a fixed β there would be a strawman; the low, middle and high ends of the range in which a
//! policy is both trained and improving are 0.5, 1.0 and 1.5 (1.0 is plain CQL, the earlier
//! `famo2o-ablation`'s single reference).
//!
//! Every variant is its own run of the preset `famo2o-cql-<task>` (offline and online: a fixed β
//! changes the pre-training too), with `agent.fixed_beta` for the fixed ones, so the variants of
//! a seed share the data, networks, budget and seed. Runs are `o2o run` processes (`--jobs` at a
//! time, `--threads` torch threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found
//! there is reused, so an interrupted experiment continues where it stopped.
//!
//! The output folder gets `table.md`, `curves.png` and `results.json`:
//! - the D4RL normalized score (mean ± std over seeds) at the end of pre-training and at fixed
//!   steps online, and the final score's IQM;
//! - the paired per-seed differences `famo2o − fixed-β` for each fixed β and `famo2o − best
//!   fixed β` (the fixed variant with the highest mean over seeds on that measure, chosen after
//!   the fact, which favours the fixed side), on the final score and on the mean online score (the
//!   mean of the online evaluations: the area under the online curve), each with a 95 % bootstrap
//!   interval over seeds ([`super::jobs::paired`]);
//! - β(s) per region: the final balance model's mode on every row of the dataset, averaged over
//!   the rows of region A and of region B of a mixed-quality file (`o2o dataset make-benchmark
//!   --mixed-quality`, its `infos/region` column), per seed, with the paired difference A − B; and
//!   the last online diagnostics of the balance (`diag/online/beta_mean`, the share of rows with
//!   dQ/dβ > 0, which explains a β saturated at the top of its range, fidelity-audit-2 E7).
//!
//! The claim holds on this data when `famo2o − best fixed β` is above 0 (its interval excludes 0)
//! and β(s) differs between the regions.
//!
//! **`--algo iql`: FamO2O-IQL.** FamO2O-CQL's balance loss is −Q alone (the official code's), so
//! its β saturates at the top of the range; FamO2O-IQL's has an entropy temperature α_b (target
//! −0.5), the arm that can show a state-adaptive β. With `--algo iql` the preset is
//! `famo2o-iql-<task>` and the fixed variants are β_min, the midpoint and β_max of that preset's
//! range (after `--set`), named by their value (`fixed-8`, `fixed-11`, `fixed-14` for [8, 14]):
//! β is there the AWR inverse temperature, and each fixed run is IQL with that one temperature on
//! the family's β input. β(s) per region is read from the final balance model the same way (the
//! agent's acting β, [`region_beta`]); the last online diagnostic beside β is α_b
//! (`diag/online/balance_alpha`) instead of the dQ/dβ > 0 share, which only FamO2O-CQL logs. The
//! default output folder is `experiments-out/famo2o-claim-iql-<task>`; `--algo cql` (the default)
//! is the study above, unchanged.

use super::jobs::{
    at, mean_between, paired, plot, run_jobs_timed, score_rows, sets, Curves, Job, Paired, PerSeed, Processes,
};
use super::StudyReport;
use crate::benchmarks::mixed::{MixedManifest, REGION_KEY};
use crate::report::runs::read_curve;
use crate::report::stats::{iqm, mean, std_dev};
use crate::run::prepare;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use o2o_datasets::d4rl::D4rlDataset;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::{Device, Tensor};

/// The adaptive variant.
pub const FAMO2O: &str = "famo2o";
/// The variants, in table order, with the overrides each adds to the preset.
pub const VARIANTS: [(&str, &[&str]); 4] = [
    (FAMO2O, &[]),
    ("fixed-0.5", &["agent.fixed_beta=0.5"]),
    ("fixed-1.0", &["agent.fixed_beta=1.0"]),
    ("fixed-1.5", &["agent.fixed_beta=1.5"]),
];
/// The row name of the best fixed variant in the paired comparisons.
const BEST_FIXED: &str = "best fixed β";

/// Which FamO2O agent the claim is tested on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Algo {
    /// FamO2O-CQL (the paper's locomotion agent): preset `famo2o-cql-<task>`, fixed β = 0.5, 1.0
    /// and 1.5 ([`VARIANTS`]).
    #[default]
    Cql,
    /// FamO2O-IQL (β the AWR inverse temperature, a balance entropy temperature): preset
    /// `famo2o-iql-<task>`, fixed β = β_min, the midpoint and β_max of the preset's range.
    Iql,
}

/// A variant: its name (table row and runs folder) and the overrides it adds to the preset.
pub type Variant = (&'static str, Vec<String>);

impl Algo {
    /// The agent's `algo` name.
    pub fn agent(self) -> &'static str {
        match self {
            Algo::Cql => "famo2o-cql",
            Algo::Iql => "famo2o-iql",
        }
    }

    /// The preset the runs use: `famo2o-<algo>-<task>`.
    pub fn preset(self, task: &str) -> String {
        format!("{}-{task}", self.agent())
    }

    /// The default output folder: `experiments-out/famo2o-claim-<task>` for CQL (where its
    /// finished runs are), `experiments-out/famo2o-claim-iql-<task>` for IQL.
    pub fn default_out(self, task: &str) -> PathBuf {
        match self {
            Algo::Cql => PathBuf::from(format!("experiments-out/famo2o-claim-{task}")),
            Algo::Iql => PathBuf::from(format!("experiments-out/famo2o-claim-iql-{task}")),
        }
    }

    /// The variants in table order, FamO2O first: CQL's are [`VARIANTS`]; IQL's fixed ones are
    /// β_min, (β_min + β_max)/2 and β_max of `agent` (the resolved preset's `[agent]` table; a key
    /// it lacks takes the agent's default), each named `fixed-<β>`.
    pub fn variants(self, agent: Option<&toml::Table>) -> Result<Vec<Variant>> {
        let owned = |(v, o): &(&'static str, &[&str])| (*v, o.iter().map(|s| s.to_string()).collect());
        if self == Algo::Cql {
            return Ok(VARIANTS.iter().map(owned).collect());
        }
        let d = o2o_agents::algos::famo2o_iql::Famo2oIqlConfig::default();
        let key = |k: &str, default: f64| match agent.and_then(|a| a.get(k)) {
            None => Ok(default),
            Some(v) => v
                .as_float()
                .or(v.as_integer().map(|i| i as f64))
                .with_context(|| format!("agent.{k}: not a number: {v}")),
        };
        let (lo, hi) = (key("beta_min", d.beta_min)?, key("beta_max", d.beta_max)?);
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            bail!("agent.beta_min must be below agent.beta_max, found {lo} and {hi}");
        }
        let mut out = vec![(FAMO2O, Vec::new())];
        for b in [lo, (lo + hi) / 2.0, hi] {
            // The jobs and tables key variants by `&'static str`; a study names three, once.
            let name: &'static str = Box::leak(format!("fixed-{b}").into_boxed_str());
            out.push((name, vec![format!("agent.fixed_beta={b:?}")]));
        }
        Ok(out)
    }

    /// The last online diagnostic shown beside β: (metrics key, `table.md` column,
    /// `results.json` key). FamO2O-CQL: the share of rows with dQ/dβ > 0 (why a −Q balance
    /// saturates); FamO2O-IQL: its balance temperature α_b.
    fn balance_diagnostic(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Algo::Cql => ("diag/online/dq_dbeta_positive", "dQ/dβ > 0 (last)", "dq_dbeta_positive"),
            Algo::Iql => ("diag/online/balance_alpha", "α_b (last)", "balance_alpha"),
        }
    }
}

/// What `o2o experiment famo2o-claim` runs.
#[derive(Debug, Clone)]
pub struct Famo2oClaimOptions {
    /// Which FamO2O agent: `cql` (the default) or `iql`.
    pub algo: Algo,
    /// The preset suffix: `famo2o-<algo>-<task>`, e.g. `halfcheetah-mixed-small`.
    pub task: String,
    /// Seeds 0..N.
    pub seeds: u64,
    /// Output folder (default [`Algo::default_out`]).
    pub out: Option<PathBuf>,
    /// How the runs' processes run (their device and threads also read β(s) afterwards).
    pub processes: Processes,
    /// Config overrides for every run (e.g. a shorter budget or another dataset), as in
    /// `o2o run --set`.
    pub set: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// β(s) of one FamO2O run's final balance model, averaged over the dataset's rows of each region.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RegionBeta {
    /// Over every row.
    pub all: f64,
    /// Over the rows of region A (`None` without a region column or without rows there).
    pub a: Option<f64>,
    /// Over the rows of region B (the same).
    pub b: Option<f64>,
}

/// `o2o experiment famo2o-claim`.
pub fn run(args: &Famo2oClaimOptions) -> Result<StudyReport> {
    args.processes.check(args.seeds)?;
    let preset = args.algo.preset(&args.task);
    let (_, base) =
        crate::run::presets::load(&preset).with_context(|| format!("--task {}: no preset {preset}", args.task))?;
    let mut resolved = base.clone();
    crate::run::config::apply_overrides(&mut resolved, &args.set)?;
    if resolved.get("algo").and_then(|a| a.as_str()) != Some(args.algo.agent()) {
        bail!(
            "{preset}: famo2o-claim compares {}'s balance model with fixed β (found algo {:?})",
            args.algo.agent(),
            resolved.get("algo")
        );
    }
    let variants = args.algo.variants(resolved.get("agent").and_then(|a| a.as_table()))?;
    let get = |section: &str, key: &str| {
        resolved.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64
    };
    let (offline, online, eval_every) =
        (get("train", "offline_steps"), get("train", "online_steps"), get("eval", "every"));
    if offline == 0 || online == 0 || eval_every == 0 {
        bail!("the claim needs train.offline_steps, train.online_steps and eval.every above 0 (found {offline}, {online}, {eval_every})");
    }
    // The runs record where their data was: the dataset as an absolute path.
    let data = resolved
        .get("dataset")
        .and_then(|d| d.get("path"))
        .and_then(|p| p.as_str())
        .with_context(|| format!("{preset} has no dataset.path"))?;
    let data = std::fs::canonicalize(data).with_context(|| {
        format!("the dataset {data} of {preset} is missing: make it (docs/datasets.md, \"A dataset whose quality differs by state region\"), run from the repository root, or pass --set dataset.path=…")
    })?;
    let mut shared = vec![format!("dataset.path={:?}", data.display().to_string())];
    shared.extend(args.set.iter().cloned());
    let out = args.out.clone().unwrap_or_else(|| args.algo.default_out(&args.task));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;

    let mut jobs: Vec<Job> = Vec::new();
    for (variant, extra) in &variants {
        for seed in 0..args.seeds {
            let mut a = vec!["run".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
            sets(&mut a, &shared);
            sets(&mut a, extra);
            jobs.push(Job {
                variant,
                seed,
                args: a,
                parent: None,
                runs_dir: out.join("runs").join(variant).join(format!("seed-{seed}")),
            });
        }
    }
    let n = jobs.len();
    eprintln!(
        "famo2o-claim: {preset} on {}, {n} runs of {offline} offline + {online} online steps; output {}",
        data.display(),
        out.display()
    );
    let (dirs, wall_s, cpu_s) = run_jobs_timed(&jobs, &args.processes, &out)?;

    // Scores: curves over gradient steps (offline, then one per env step), measures online.
    let mut curves = Curves::new();
    let (mut offline_end, mut finals, mut auc) = (PerSeed::new(), PerSeed::new(), PerSeed::new());
    for (job, dir) in jobs.iter().zip(&dirs) {
        let metrics = dir.join("metrics.jsonl");
        let by_grad = read_curve(&metrics, "eval/normalized_score", "grad_step")?;
        let by_env = read_curve(&metrics, "eval/normalized_score", "env_step")?;
        if let Some(v) = at(&by_grad, offline) {
            offline_end.entry(job.variant).or_default().insert(job.seed, v);
        }
        if let Some(v) = at(&by_env, online) {
            finals.entry(job.variant).or_default().insert(job.seed, v);
        }
        if let Some(v) = mean_between(&by_env, 0, online) {
            auc.entry(job.variant).or_default().insert(job.seed, v);
        }
        curves.entry(job.variant).or_default().push(by_grad);
    }
    let order: Vec<&str> = variants.iter().map(|(v, _)| *v).collect();
    let fixed: Vec<&str> = order.iter().copied().filter(|v| *v != FAMO2O).collect();
    let mut comparisons = Vec::new();
    for (measure, values) in [("final score", &finals), ("mean online score", &auc)] {
        comparisons.extend(claim_comparisons(measure, values, &fixed));
    }

    // β(s) per region, from each FamO2O run's final checkpoint.
    tch::set_num_threads(args.processes.threads);
    let device = args.processes.device.resolve()?;
    let ds = D4rlDataset::read(&data).with_context(|| format!("reading {}", data.display()))?;
    let manifest = MixedManifest::read_dir(data.parent().unwrap_or(Path::new(".")))?;
    let mut betas: BTreeMap<u64, RegionBeta> = BTreeMap::new();
    let mut balance_diag: BTreeMap<u64, (Option<f64>, Option<f64>)> = BTreeMap::new();
    let (diag_key, _, diag_json) = args.algo.balance_diagnostic();
    for (job, dir) in jobs.iter().zip(&dirs).filter(|(j, _)| j.variant == FAMO2O) {
        betas.insert(job.seed, region_beta(dir, &ds, device)?);
        let metrics = dir.join("metrics.jsonl");
        let last = |key: &str| read_curve(&metrics, key, "grad_step").ok().and_then(|c| c.last().map(|(_, y)| *y));
        balance_diag.insert(job.seed, (last("diag/online/beta_mean"), last(diag_key)));
    }
    let mut by_region = PerSeed::new();
    for (seed, b) in &betas {
        for (name, v) in [("region A", b.a), ("region B", b.b)] {
            if let Some(v) = v {
                by_region.entry(name).or_default().insert(*seed, v);
            }
        }
    }
    let region_diff = paired(&by_region, "region A", "region B");

    // The table.
    let command = args.command.clone();
    let mut steps: Vec<u64> = (0..=online).step_by(eval_every as usize).map(|s| offline + s).collect();
    if steps.last() != Some(&(offline + online)) {
        steps.push(offline + online);
    }
    let mut table = format!(
        "# FamO2O claim: {preset}\n\nClaim (FamO2O, arXiv 2310.17966): a state-adaptive balance beats any single balance. {}, \
         each its own pre-training and fine-tuning per seed; {} seeds; {offline} offline gradient steps, then {online} online env steps (one \
         update each).\n\nData: `{}`{}\n\nCommand: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the runs it started, finished runs it \
         reused not counted)\n\n## D4RL normalized score\n\nMean ± std over seeds at gradient steps (step {offline} is the end of pre-training; \
         online, one gradient step per env step):\n\n{}\n| variant | end of pre-training | final | final IQM | mean online score | seeds |\n|---|---|---|---|---|---|\n",
        arms(args.algo, &variants),
        args.seeds,
        data.display(),
        manifest.as_ref().map_or(String::new(), data_line),
        score_rows(&curves, &steps, &order)
    );
    for v in &order {
        let vals = |m: &PerSeed| m.get(v).map(|s| s.values().copied().collect::<Vec<f64>>()).unwrap_or_default();
        let cell =
            |x: &[f64]| if x.is_empty() { "–".to_string() } else { format!("{:.1} ± {:.1}", mean(x), std_dev(x)) };
        let f = vals(&finals);
        let q = if f.is_empty() { "–".to_string() } else { format!("{:.1}", iqm(&f)) };
        table.push_str(&format!(
            "| {v} | {} | {} | {q} | {} | {} |\n",
            cell(&vals(&offline_end)),
            cell(&f),
            cell(&vals(&auc)),
            f.len()
        ));
    }
    table.push_str(
        "\n## FamO2O against each fixed β\n\nPaired per-seed differences (the variants of a seed share its seed, data and budget), mean with a 95% \
         bootstrap interval over seeds. \"mean online score\" is the mean of the online evaluations (the area under the online curve); the best fixed \
         β is the fixed variant with the highest mean on that measure, picked after the fact (which favours the fixed side).\n\n\
         | measure | comparison | mean difference [95% CI] | per seed | direction |\n|---|---|---|---|---|\n",
    );
    for (measure, label, p) in &comparisons {
        let per: Vec<String> = p.seeds.iter().zip(&p.diffs).map(|(s, d)| format!("{s}: {d:+.1}")).collect();
        table.push_str(&format!(
            "| {measure} | {label} | {:+.1} [{:+.1}, {:+.1}] | {} | {} |\n",
            p.mean,
            p.ci.0,
            p.ci.1,
            per.join(", "),
            p.direction
        ));
    }
    table.push_str(&beta_section(args.algo, &betas, &balance_diag, region_diff.as_ref()));
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(
        &out.join("curves.png"),
        &curves,
        &order,
        &format!("FamO2O claim, {preset}, {} seeds", args.seeds),
        &format!("gradient step (offline until {offline}, then one per env step)"),
    )?;
    let json = serde_json::json!({
        "algo": args.algo.agent(), "preset": preset, "seeds": args.seeds, "command": command, "dataset": data,
        "region_rule": manifest.as_ref().map(|m| &m.region_rule), "regions": manifest.as_ref().map(|m| &m.regions),
        "budget": {"offline_steps": offline, "online_steps": online, "eval_every": eval_every},
        "fixed_betas": variants.iter().filter(|(v, _)| *v != FAMO2O).map(|(v, o)| (v.to_string(), serde_json::json!(o))).collect::<serde_json::Map<_, _>>(),
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "per_seed": {"offline_end_score": offline_end, "final_score": finals, "mean_online_score": auc},
        "paired": comparisons.iter().map(|(m, label, p)| serde_json::json!({"measure": m, "label": label, "comparison": p})).collect::<Vec<_>>(),
        "beta_by_region": {
            "per_seed": betas,
            "paired_a_minus_b": region_diff,
            "last_online_diagnostics": balance_diag.iter().map(|(s, (b, d))| (s.to_string(), serde_json::json!({"beta_mean": b, diag_json: d}))).collect::<serde_json::Map<_, _>>(),
        },
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
        "wall_s": wall_s, "cpu_s": cpu_s,
    });
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&json)?)?;
    Ok(StudyReport::written(out, table, json))
}

/// `famo2o − v` for each fixed variant `v`, then `famo2o − best fixed β` (the fixed variant
/// with the highest mean of `values`): `(measure, label, comparison)`.
pub fn claim_comparisons(measure: &str, values: &PerSeed, fixed: &[&'static str]) -> Vec<(String, String, Paired)> {
    let mut out: Vec<(String, String, Paired)> = fixed
        .iter()
        .filter_map(|f| paired(values, FAMO2O, f).map(|p| (measure.to_string(), format!("{FAMO2O} − {f}"), p)))
        .collect();
    let means = fixed.iter().filter_map(|f| {
        values.get(f).filter(|s| !s.is_empty()).map(|s| (*f, mean(&s.values().copied().collect::<Vec<_>>())))
    });
    if let Some((best, _)) = means.max_by(|a, b| a.1.total_cmp(&b.1)) {
        let mut with_best = values.clone();
        with_best.insert(BEST_FIXED, values[best].clone());
        if let Some(p) = paired(&with_best, FAMO2O, BEST_FIXED) {
            out.push((measure.to_string(), format!("{FAMO2O} − {BEST_FIXED} ({best})"), p));
        }
    }
    out
}

/// The arms of the comparison, for the claim line of `table.md`.
fn arms(algo: Algo, variants: &[Variant]) -> String {
    match algo {
        Algo::Cql => "FamO2O-CQL with its balance model against the same agent with one fixed β (0.5, 1.0, 1.5: the low, middle and high end of \
                      the range the universal policy is trained on)"
            .to_string(),
        Algo::Iql => {
            let fixed: Vec<&str> = variants.iter().filter(|(v, _)| *v != FAMO2O).map(|(v, _)| &v["fixed-".len()..]).collect();
            format!(
                "FamO2O-IQL with its balance model (entropy-regularized, target entropy −0.5) against the same agent with one fixed AWR inverse \
                 temperature β ({}: the low end, the middle and the high end of the range the universal policy is trained on)",
                fixed.join(", ")
            )
        }
    }
}

/// The data's region rule and shares, from its mixed-quality manifest.
fn data_line(m: &MixedManifest) -> String {
    let r = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.3}"));
    format!(
        " (mixed quality: the policy of `{}` (alone: return {:.1}) where `{}` (region A: {:.1}% of rows, mean reward {}), uniform random actions elsewhere (region B: {:.1}%, mean reward {}))",
        m.policy.run_dir,
        m.policy.eval_return,
        m.region_rule.text,
        100.0 * m.regions.a.share,
        r(m.regions.a.mean_reward),
        100.0 * m.regions.b.share,
        r(m.regions.b.mean_reward)
    )
}

/// The final balance model's β(s) (its mode, what the agent acts with) on every row of `ds`,
/// averaged over all rows and over each region of its `infos/region` column.
pub fn region_beta(run_dir: &Path, ds: &D4rlDataset, device: Device) -> Result<RegionBeta> {
    let mut loaded = prepare::load_checkpoint_agent(run_dir, None, None, device)?;
    let mut beta = Vec::with_capacity(ds.len());
    for start in (0..ds.len()).step_by(4096) {
        let end = (start + 4096).min(ds.len());
        let obs = Tensor::from_slice(&ds.observations[start * ds.obs_dim..end * ds.obs_dim])
            .view([(end - start) as i64, ds.obs_dim as i64])
            .to_device(device);
        let _ = loaded.agent.act(&obs, true);
        let info = loaded.agent.act_info();
        let b = info
            .into_iter()
            .find(|(k, _)| *k == "beta")
            .with_context(|| format!("{}: the agent reports no β", run_dir.display()))?
            .1;
        if b.len() != end - start {
            bail!("{}: β for {} of {} rows", run_dir.display(), b.len(), end - start);
        }
        beta.extend(b.into_iter().map(f64::from));
    }
    let over = |keep: &dyn Fn(usize) -> bool| {
        let v: Vec<f64> = (0..beta.len()).filter(|&i| keep(i)).map(|i| beta[i]).collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    let region = ds.infos.get(REGION_KEY).filter(|c| c.data.len() == ds.len());
    let in_region = |want: f32| region.and_then(|c| over(&|i| c.data[i] == want));
    Ok(RegionBeta { all: over(&|_| true).unwrap_or(f64::NAN), a: in_region(1.0), b: in_region(0.0) })
}

/// The β(s) section of `table.md`.
fn beta_section(
    algo: Algo,
    betas: &BTreeMap<u64, RegionBeta>,
    diag: &BTreeMap<u64, (Option<f64>, Option<f64>)>,
    diff: Option<&Paired>,
) -> String {
    let f = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.3}"));
    let diagnostic = match algo {
        Algo::Cql => "the share of rows where dQ/dβ > 0 (near 1, the balance loss −Q pushes β to the top of its range)",
        Algo::Iql => "the balance temperature α_b (the weight of the balance model's entropy against Q)",
    };
    let mut s = format!(
        "\n## β(s) per region\n\nThe final balance model's β(s) (its mode, what the agent acts with) on every dataset row, mean over all rows and over the \
         rows of region A (the policy acted) and region B (random actions); the last online diagnostics: batch-mean β and {diagnostic}.\n\n\
         | seed | β all rows | β region A | β region B | A − B | online β (last) | {} |\n|---|---|---|---|---|---|---|\n",
        algo.balance_diagnostic().1
    );
    for (seed, b) in betas {
        let d = diag.get(seed).copied().unwrap_or((None, None));
        let ab = b.a.zip(b.b).map(|(a, b)| a - b);
        s.push_str(&format!(
            "| {seed} | {:.3} | {} | {} | {} | {} | {} |\n",
            b.all,
            f(b.a),
            f(b.b),
            ab.map_or("–".into(), |v| format!("{v:+.3}")),
            f(d.0),
            f(d.1)
        ));
    }
    match diff {
        Some(p) => s.push_str(&format!(
            "\nβ(region A) − β(region B), paired over {} seeds: {:+.3} [{:+.3}, {:+.3}] (95% bootstrap interval): {}.\n",
            p.seeds.len(),
            p.mean,
            p.ci.0,
            p.ci.1,
            match p.direction {
                "inconclusive" => "no difference shown between the regions",
                "higher" => "β is higher in region A",
                _ => "β is lower in region A",
            }
        )),
        None => s.push_str(&format!("\nNo region column (`{REGION_KEY}`) in the data, or a region without rows: β per region not computed.\n")),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each fixed β against FamO2O per seed, then the best fixed β by its mean over seeds.
    #[test]
    fn comparisons_take_famo2o_minus_each_fixed_beta_and_the_best() {
        let mut v = PerSeed::new();
        v.insert(FAMO2O, (0..3).map(|s| (s, 10.0 + s as f64)).collect());
        v.insert("fixed-0.5", (0..3).map(|s| (s, 4.0)).collect());
        v.insert("fixed-1.0", (0..3).map(|s| (s, [12.0, 11.0, 16.0][s as usize])).collect());
        v.insert("fixed-1.5", (0..3).map(|s| (s, 8.0)).collect());
        let c = claim_comparisons("final", &v, &["fixed-0.5", "fixed-1.0", "fixed-1.5"]);
        let labels: Vec<&str> = c.iter().map(|(_, l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            vec!["famo2o − fixed-0.5", "famo2o − fixed-1.0", "famo2o − fixed-1.5", "famo2o − best fixed β (fixed-1.0)"]
        );
        assert_eq!(c[0].2.diffs, vec![6.0, 7.0, 8.0]);
        assert_eq!(c[0].2.direction, "higher");
        // fixed-1.0 has the highest mean (13): the differences are 10 − 12, 11 − 11, 12 − 16.
        assert_eq!(c[3].2.diffs, vec![-2.0, 0.0, -4.0]);
        assert_eq!(c[3].2.diffs, c[1].2.diffs);
        assert!(claim_comparisons("final", &PerSeed::new(), &["fixed-0.5"]).is_empty());
    }

    /// CQL keeps its fixed list (and its output folder, where its finished runs are); IQL's fixed
    /// β are the ends and the middle of the preset's range, named by their value, and the run
    /// overrides write them as TOML floats.
    #[test]
    fn iql_variants_are_the_ends_and_the_middle_of_the_presets_range() {
        let names = |v: &[Variant]| v.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
        let cql = Algo::Cql.variants(None).unwrap();
        assert_eq!(names(&cql), ["famo2o", "fixed-0.5", "fixed-1.0", "fixed-1.5"]);
        assert_eq!((cql[0].1.len(), cql[2].1.clone()), (0, vec!["agent.fixed_beta=1.0".to_string()]));
        assert_eq!(Algo::Cql.default_out("t"), PathBuf::from("experiments-out/famo2o-claim-t"));
        assert_eq!(Algo::Iql.default_out("t"), PathBuf::from("experiments-out/famo2o-claim-iql-t"));
        assert_eq!(Algo::Iql.preset("t"), "famo2o-iql-t");

        let (_, preset) = crate::run::presets::load("famo2o-iql-halfcheetah-mixed-small").unwrap();
        let iql = Algo::Iql.variants(preset.get("agent").and_then(|a| a.as_table())).unwrap();
        assert_eq!(names(&iql), ["famo2o", "fixed-8", "fixed-11", "fixed-14"]);
        let sets: Vec<&str> = iql[1..].iter().map(|(_, o)| o[0].as_str()).collect();
        assert_eq!(sets, ["agent.fixed_beta=8.0", "agent.fixed_beta=11.0", "agent.fixed_beta=14.0"]);
        let table = |t: &str| t.parse::<toml::Table>().unwrap();
        let other = Algo::Iql.variants(Some(&table("beta_min = 1\nbeta_max = 2.5"))).unwrap();
        assert_eq!(names(&other), ["famo2o", "fixed-1", "fixed-1.75", "fixed-2.5"]);
        assert_eq!(other[1].1, ["agent.fixed_beta=1.0"]);
        assert!(Algo::Iql.variants(Some(&table("beta_min = 3.0\nbeta_max = 2.0"))).is_err());
    }
}
