//! `o2o experiment unio4-claim`: does Uni-O4 hand over from offline to online without a dip?
//!
//! **The claim** (Lei et al., "Uni-O4: Unifying Online and Offline Deep Reinforcement Learning
//! with Multi-Step On-Policy Optimization", ICLR 2024; algorithms-next.md §1): one on-policy
//! objective offline (BPPO) and online (PPO), so the hand-over needs no extra conservatism and
//! shows no drop in score.
//!
//! | variant | offline | online (the same env-step budget) |
//! |---|---|---|
//! | `unio4` | the preset's pipeline (critic, dynamics, BC ensemble, BPPO with AM-Q, hand-over) | PPO from the chosen member |
//! | `iql` | IQL on the same data (`iql-<env>-medium`, the critic-step budget of `unio4`) | IQL fine-tuning, one buffer pre-filled with the data |
//! | `ppo` | none | PPO from scratch (`ppo-<env>`, CleanRL's settings, on the same env id) |
//!
//! Per seed: the **offline score** (the evaluation at env step 0: the handed-over member, the IQL
//! policy, PPO's initial policy), the **dip** (the lowest score in the first 20 % of the online
//! env steps, or the first online evaluation if none falls there, minus the offline score, as the
//! WSRL claim measures it), the **final score** (the
//! last evaluation), the **mean online score** and, for `unio4`, the Spearman correlation of the
//! members' last AM-Q with their real returns at the hand-over (`unio4/handover/ope_rank_corr`).
//! The table gives each variant's means and the paired per-seed differences `unio4 − iql` and
//! `unio4 − ppo` with 95 % bootstrap intervals.
//!
//! Runs are `o2o` processes (`--jobs` at a time) in `<out>/runs/<variant>/seed-<s>/`; finished
//! ones are reused, so an interrupted experiment continues where it stopped.

use super::jobs::{
    children_cpu_seconds, mean_between, paired_rows, plot, run_jobs, score_rows, sets, Curves, Job, PerSeed, Processes,
};
use super::wsrl_ablation::early_dip;
use super::StudyReport;
use crate::report::runs::read_curve;
use crate::report::stats::{mean, std_dev};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The variants, in table order.
pub const VARIANTS: [&str; 3] = ["unio4", "iql", "ppo"];

/// What `o2o experiment unio4-claim` runs.
#[derive(Debug, Clone)]
pub struct Unio4ClaimOptions {
    /// The Uni-O4 preset suffix: `unio4-<task>`, e.g. `halfcheetah-small`; the IQL and PPO
    /// baselines are `iql-<env>-medium` and `ppo-<env>` with the same data, env and online budget.
    pub task: String,
    /// Seeds 0..N.
    pub seeds: u64,
    /// Output folder (default `experiments-out/unio4-claim-<task>`).
    pub out: Option<PathBuf>,
    /// How the runs' processes run.
    pub processes: Processes,
    /// Config overrides for every run, as in `o2o run --set` (agent keys reach Uni-O4 only).
    pub set: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// What the baselines take from the resolved Uni-O4 preset.
#[derive(Debug, Clone, PartialEq)]
struct Setting {
    env: String,
    dataset: Option<String>,
    online: u64,
    eval_every: u64,
    eval_episodes: u64,
    critic_steps: u64,
}

fn setting_of(t: &toml::Table) -> Result<Setting> {
    let int = |section: &str, key: &str| {
        t.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64
    };
    let s = Setting {
        env: t.get("env").and_then(|e| e.as_str()).context("the Uni-O4 preset names no env")?.to_string(),
        dataset: t.get("dataset").and_then(|d| d.get("path")).and_then(|p| p.as_str()).map(str::to_string),
        online: int("train", "online_steps"),
        eval_every: int("eval", "every"),
        eval_episodes: int("eval", "episodes").max(1),
        critic_steps: t
            .get("agent")
            .and_then(|a| a.get("critic"))
            .and_then(|c| c.get("steps"))
            .and_then(|v| v.as_integer())
            .unwrap_or(0)
            .max(0) as u64,
    };
    if s.online == 0 || s.eval_every == 0 || s.critic_steps == 0 {
        bail!(
            "the claim needs train.online_steps, eval.every and agent.critic.steps above 0 (found {}, {}, {})",
            s.online,
            s.eval_every,
            s.critic_steps
        );
    }
    Ok(s)
}

/// The `--set` overrides of each baseline, from the Uni-O4 setting.
fn baseline_sets(s: &Setting) -> [(&'static str, String, Vec<String>); 2] {
    let family = s.env.split('-').next().unwrap_or_default().to_string();
    let common = vec![
        format!("env={:?}", s.env),
        format!("train.online_steps={}", s.online),
        format!("eval.every={}", s.eval_every),
        format!("eval.episodes={}", s.eval_episodes),
        "eval.at_start=true".into(),
    ];
    let mut iql = common.clone();
    if let Some(p) = &s.dataset {
        iql.push(format!("dataset.path={p:?}"));
    }
    // The actor's cosine LR decay keeps the preset's horizon (1M steps): decayed over the offline
    // steps alone it would reach 0 at the switch and freeze the policy online.
    iql.extend([format!("train.offline_steps={}", s.critic_steps), "eval.at_phase_end=true".into()]);
    [("iql", format!("iql-{family}-medium"), iql), ("ppo", format!("ppo-{family}"), common)]
}

/// The claim's per-seed measures.
#[derive(Default)]
struct Measures {
    offline: PerSeed,
    dip: PerSeed,
    finals: PerSeed,
    online_mean: PerSeed,
    rank_corr: PerSeed,
}

impl Measures {
    fn add(&mut self, variant: &'static str, seed: u64, curve: &[(f64, f64)], online: u64, rank_corr: Option<f64>) {
        let put = |m: &mut PerSeed, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                m.entry(variant).or_default().insert(seed, v);
            }
        };
        put(&mut self.offline, super::jobs::at(curve, 0));
        put(&mut self.dip, early_dip(curve, online));
        put(&mut self.finals, curve.last().filter(|(x, _)| *x > 0.0).map(|(_, y)| *y));
        put(&mut self.online_mean, mean_between(curve, 0, u64::MAX));
        put(&mut self.rank_corr, rank_corr);
    }
}

/// The claim's table: per variant the means over seeds, then the paired differences.
fn claim_table(m: &Measures) -> (String, Vec<(String, super::jobs::Paired)>) {
    let cell = |p: &PerSeed, v: &str| match p.get(v).filter(|x| !x.is_empty()) {
        Some(x) => {
            let vals: Vec<f64> = x.values().copied().collect();
            format!("{:+.1} ± {:.1}", mean(&vals), std_dev(&vals))
        }
        None => "–".into(),
    };
    let mut s = String::from(
        "\n## The claim: no dip at the hand-over\n\nMean ± std over seeds: the offline score (the evaluation at env step 0), the dip (the lowest score in the \
         first 20% of the online env steps minus the offline score), the final and the mean online score, and Uni-O4's rank correlation of AM-Q with \
         the members' real returns at the hand-over.\n\n| variant | offline | dip | final | mean online | AM-Q rank corr. | seeds |\n|---|---|---|---|---|---|---|\n",
    );
    for v in VARIANTS {
        let Some(n) = m.finals.get(v).map(|x| x.len()) else { continue };
        let corr = m.rank_corr.get(v).filter(|x| !x.is_empty()).map(|x| {
            let vals: Vec<f64> = x.values().copied().collect();
            format!("{:+.2} ± {:.2}", mean(&vals), std_dev(&vals))
        });
        s.push_str(&format!(
            "| {v} | {} | {} | {} | {} | {} | {n} |\n",
            cell(&m.offline, v),
            cell(&m.dip, v),
            cell(&m.finals, v),
            cell(&m.online_mean, v),
            corr.unwrap_or_else(|| "–".into())
        ));
    }
    let (rows, paired) = paired_rows(
        &[("dip", &m.dip), ("final score", &m.finals), ("mean online score", &m.online_mean)],
        "unio4",
        &VARIANTS,
    );
    s.push_str(&format!(
        "\nPaired per-seed differences, each baseline − unio4 (95% bootstrap intervals over seeds; a negative dip difference means the baseline dipped \
         deeper than Uni-O4, a negative final difference that Uni-O4 ended higher):\n\n{rows}"
    ));
    (s, paired)
}

/// `o2o experiment unio4-claim`.
pub fn run(args: &Unio4ClaimOptions) -> Result<StudyReport> {
    args.processes.check(args.seeds)?;
    let preset = format!("unio4-{}", args.task);
    let (shared, resolved) = super::jobs::preset_overrides(&preset, &args.task, &args.set)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/unio4-claim-{}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let setting = setting_of(&resolved)?;
    // The baselines take the run-wide overrides that every algorithm has; agent keys stay Uni-O4's.
    let general: Vec<String> = args.set.iter().filter(|s| !s.trim_start().starts_with("agent.")).cloned().collect();

    let runs_dir = |variant: &str, seed: u64| out.join("runs").join(variant).join(format!("seed-{seed}"));
    let mut jobs = Vec::new();
    for seed in 0..args.seeds {
        let mut a = vec!["train".to_string(), "--preset".into(), preset.clone(), "--seed".into(), seed.to_string()];
        sets(&mut a, &shared);
        jobs.push(Job { variant: "unio4", seed, args: a, parent: None, runs_dir: runs_dir("unio4", seed) });
        for (variant, p, extra) in baseline_sets(&setting) {
            let cmd = if variant == "iql" { "run" } else { "train" };
            let mut a = vec![cmd.to_string(), "--preset".into(), p, "--seed".into(), seed.to_string()];
            sets(&mut a, &extra);
            sets(&mut a, &general);
            jobs.push(Job { variant, seed, args: a, parent: None, runs_dir: runs_dir(variant, seed) });
        }
    }
    eprintln!(
        "unio4-claim: preset {preset}, seeds 0..{}, {} runs, {} at a time; online budget {} env steps, evaluation every {}; output {}",
        args.seeds,
        jobs.len(),
        args.processes.jobs,
        setting.online,
        setting.eval_every,
        out.display()
    );
    let t0 = Instant::now();
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    let cpu_s = children_cpu_seconds();
    let wall_s = t0.elapsed().as_secs_f64();

    let (mut curves, mut m) = (Curves::new(), Measures::default());
    for (job, dir) in jobs.iter().zip(&dirs) {
        let metrics = dir.join("metrics.jsonl");
        let curve = read_curve(&metrics, "eval/normalized_score", "env_step")
            .or_else(|_| read_curve(&metrics, "eval/return", "env_step"))?;
        m.add(job.variant, job.seed, &curve, setting.online, rank_corr(&metrics));
        curves.entry(job.variant).or_default().push(curve);
    }
    let mut steps: Vec<u64> = (0..=setting.online).step_by(setting.eval_every as usize).collect();
    if steps.last() != Some(&setting.online) {
        steps.push(setting.online);
    }
    let command = args.command.clone();
    let mut table = format!(
        "# Uni-O4's hand-over: {preset}\n\nD4RL normalized score (×100), mean ± std over {} seeds, at the evaluations of the online budget ({} env \
         steps; step 0 is the policy handed over: Uni-O4's chosen member, IQL's offline policy, PPO's initial one). Uni-O4 and IQL train on the \
         same data (IQL for {} offline steps, Uni-O4's critic budget); PPO starts from scratch on the same env.\n\nCommand: `{command}` ({wall_s:.0} s \
         wall; {cpu_s:.0} s of CPU in the runs it started, finished runs it reused not counted)\n\n{}",
        args.seeds,
        setting.online,
        setting.critic_steps,
        score_rows(&curves, &steps, &VARIANTS)
    );
    let (claim, paired) = claim_table(&m);
    table.push_str(&claim);
    std::fs::write(out.join("table.md"), &table).with_context(|| format!("cannot write {}/table.md", out.display()))?;
    plot(
        &out.join("curves.png"),
        &curves,
        &VARIANTS,
        &format!("Uni-O4 hand-over, {preset}, {} seeds", args.seeds),
        "online env steps",
    )?;
    let json = serde_json::json!({
        "preset": preset, "seeds": args.seeds, "command": command,
        "budget": {"online_steps": setting.online, "eval_every": setting.eval_every, "iql_offline_steps": setting.critic_steps},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "per_seed": {"offline_score": m.offline, "dip": m.dip, "final_score": m.finals, "mean_online_score": m.online_mean, "ope_rank_corr": m.rank_corr},
        "paired": paired.iter().map(|(k, p)| serde_json::json!({"measure": k, "comparison": p})).collect::<Vec<_>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(&json)?)?;
    Ok(StudyReport::written(out, table, json))
}

/// Uni-O4's hand-over rank correlation in a run's metrics, when it logged one.
fn rank_corr(metrics: &Path) -> Option<f64> {
    read_curve(metrics, "unio4/handover/ope_rank_corr", "env_step").ok()?.first().map(|(_, y)| *y)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The baselines run on the Uni-O4 preset's env, data and online budget, IQL for the critic's
    /// step budget; the preset names what they read.
    #[test]
    fn baselines_share_the_env_data_and_budget() {
        let (_, base) = crate::run::presets::load("unio4-halfcheetah-small").unwrap();
        let s = setting_of(&base).unwrap();
        assert_eq!(
            (s.env.as_str(), s.online, s.eval_every, s.critic_steps),
            ("halfcheetah-v2", 100_000, 10_240, 30_000)
        );
        let [(iql, iql_preset, iql_sets), (ppo, ppo_preset, ppo_sets)] = baseline_sets(&s);
        assert_eq!(
            (iql, iql_preset.as_str(), ppo, ppo_preset.as_str()),
            ("iql", "iql-halfcheetah-medium", "ppo", "ppo-halfcheetah")
        );
        for sets in [&iql_sets, &ppo_sets] {
            assert!(
                sets.contains(&"env=\"halfcheetah-v2\"".to_string())
                    && sets.contains(&"train.online_steps=100000".to_string()),
                "{sets:?}"
            );
        }
        assert!(
            iql_sets.contains(&"train.offline_steps=30000".to_string())
                && iql_sets.iter().any(|x| x.starts_with("dataset.path="))
        );
        assert!(!ppo_sets.iter().any(|x| x.starts_with("dataset.")));
        let mut bad = base.clone();
        bad["train"].as_table_mut().unwrap().insert("online_steps".into(), toml::Value::Integer(0));
        assert!(setting_of(&bad).unwrap_err().to_string().contains("train.online_steps"));
    }

    #[test]
    fn the_claim_table_reads_dip_final_and_the_rank_correlation() {
        let mut m = Measures::default();
        for seed in 0..3 {
            let s = seed as f64;
            m.add("unio4", seed, &[(0.0, 40.0), (10_240.0, 41.0 + s), (100_352.0, 50.0)], 100_000, Some(0.5));
            m.add("iql", seed, &[(0.0, 42.0), (10_240.0, 30.0), (100_000.0, 45.0 + s)], 100_000, None);
        }
        assert_eq!(m.dip["unio4"][&2], 3.0);
        assert_eq!(m.finals["unio4"][&0], 50.0, "the last evaluation, past the nominal budget");
        let (t, paired) = claim_table(&m);
        assert!(t.contains("| unio4 | +40.0 ± 0.0 | +2.0 ± 0.8 | +50.0 ± 0.0 |"), "{t}");
        assert!(t.contains("+0.50 ± 0.00 | 3 |"), "{t}");
        assert!(t.contains("| dip | iql − unio4 | -14.0 ["), "{t}");
        assert_eq!(paired.len(), 3);
    }
}
