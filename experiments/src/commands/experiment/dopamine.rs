//! `o2o experiment dopamine --task fetch-push`: does potential-based shaping with a learned
//! progress model help, and does the naive progress reward hurt (issue 22, item 8)?
//!
//! | variant | online reward stored for every transition |
//! |---|---|
//! | `sparse` | the env's −1/0 (`shaping.enabled = false`) |
//! | `naive` | r + Φ(s') − Φ(s) (progress gained; `shaping.mode = "naive"`) |
//! | `pbrs` | r + γΦ(s') − Φ(s) (Ng et al. 1999; `shaping.mode = "pbrs"`) |
//!
//! All three are the preset `rlpd-fetch-push-dopamine` (RLPD with the demos as prior data,
//! 50/50 sampling) on the same demos and the same progress model, so they differ only in the
//! reward. The demos (`o2o reward demos`, scripted, with keyframes) and Φ (`o2o reward train`
//! on the goal, gripper, object and object-from-gripper views) are made once, in the output
//! folder, and reused when they are there. Runs are `o2o train` processes (`--jobs` at a time,
//! `--threads` torch threads each) in `<out>/runs/<variant>/seed-<s>/`; a finished run found
//! there is reused, so re-running the command continues an interrupted experiment. The output
//! folder gets `table.md` (success rate, mean ± std over seeds, at fixed env steps), `curves.png`
//! and `results.json`.

use super::jobs::{
    children_cpu_seconds, command_line, plot_with_y, run_jobs, score_rows, sets, Curves, Job, Processes,
};
use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_experiments::report::runs::read_curve;
use o2o_experiments::report::stats::{mean, std_dev};
use o2o_experiments::run::rundir::write_atomic;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The variants, in table order, with the overrides each adds to the preset.
pub const VARIANTS: [(&str, &[&str]); 3] = [
    ("sparse", &["shaping.enabled=false"]),
    ("naive", &["shaping.mode=\"naive\""]),
    ("pbrs", &["shaping.mode=\"pbrs\""]),
];

/// The views of the progress model (the docs' FetchPush recipe): goal, gripper, object, object − gripper.
const VIEWS: [&str; 4] = ["goal=3:6", "gripper=6:9", "object=9:12", "object-from-gripper=12:15"];

/// Arguments of `o2o experiment dopamine`.
#[derive(Args, Debug)]
pub struct DopamineArgs {
    /// The task: `fetch-push` (FetchPush-v4, preset `rlpd-fetch-push-dopamine`).
    #[arg(long, default_value = "fetch-push")]
    pub task: String,
    /// Seeds 0..N.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Scripted demonstrations to record (the prior data and Φ's training set).
    #[arg(long, default_value_t = 50)]
    pub demos: usize,
    /// Gradient steps of the progress model.
    #[arg(long, default_value_t = 1500)]
    pub model_steps: usize,
    /// Output folder (default `experiments-out/dopamine-<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub processes: Processes,
    /// A config override for every run (e.g. a smaller budget), as in `o2o train --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The env id and preset of a `--task`.
fn task(name: &str) -> Result<(&'static str, &'static str)> {
    match name {
        "fetch-push" => Ok(("FetchPush-v4", "rlpd-fetch-push-dopamine")),
        other => bail!("--task {other}: expected fetch-push (the one task with a dopamine preset)"),
    }
}

/// Runs `o2o <args>` to make `product`, unless it is already there; its output goes to `log`.
fn make_once(product: &Path, args: &[String], log: &Path) -> Result<()> {
    if product.is_file() {
        eprintln!("reusing {}", product.display());
        return Ok(());
    }
    let exe = std::env::current_exe().context("cannot find the o2o executable")?;
    let file = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let status = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .context("starting o2o")?;
    if !status.success() || !product.is_file() {
        bail!("`o2o {}` failed ({status}); see {}", args.join(" "), log.display());
    }
    eprintln!("made {}", product.display());
    Ok(())
}

/// `o2o experiment dopamine`.
pub fn run(args: DopamineArgs) -> Result<()> {
    if args.seeds == 0
        || args.processes.jobs == 0
        || args.processes.threads < 1
        || args.demos == 0
        || args.model_steps == 0
    {
        bail!("--seeds, --demos, --model-steps, --jobs and --threads must be at least 1");
    }
    let (env_id, preset) = task(&args.task)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/dopamine-{}", args.task)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let out = std::fs::canonicalize(&out).with_context(|| format!("cannot resolve {}", out.display()))?;
    let t0 = Instant::now();

    // The demos and the progress model, once.
    let demos = out.join("demos.hdf5");
    let model = out.join("progress.pt");
    let s = |p: &Path| p.display().to_string();
    let demo_args = [
        "reward",
        "demos",
        "--task",
        env_id,
        "--episodes",
        &args.demos.to_string(),
        "--seed",
        "0",
        "--out",
        &s(&demos),
    ];
    make_once(&demos, &demo_args.map(String::from), &out.join("logs/demos.log"))?;
    let mut train_args: Vec<String> = [
        "reward",
        "train",
        "--demos",
        &s(&demos),
        "--steps",
        &args.model_steps.to_string(),
        "--seed",
        "0",
        "--out",
        &s(&model),
    ]
    .map(String::from)
    .to_vec();
    for v in VIEWS {
        train_args.extend(["--view".to_string(), v.to_string()]);
    }
    make_once(&model, &train_args, &out.join("logs/progress-model.log"))?;

    let mut shared = vec![format!("dataset.path={:?}", s(&demos)), format!("shaping.model={:?}", s(&model))];
    shared.extend(args.set.iter().cloned());
    let (_, mut resolved) = o2o_experiments::run::presets::load(preset)?;
    o2o_experiments::run::config::apply_overrides(&mut resolved, &shared)?;
    let get = |section: &str, key: &str| {
        resolved.get(section).and_then(|s| s.get(key)).and_then(|v| v.as_integer()).unwrap_or(0).max(0) as u64
    };
    let (random, online, eval_every) =
        (get("train", "random_steps"), get("train", "online_steps"), get("eval", "every"));
    if online == 0 || eval_every == 0 {
        bail!("the experiment needs train.online_steps and eval.every above 0 (found {online}, {eval_every})");
    }
    let env_steps = random + online;

    let mut jobs = Vec::new();
    for seed in 0..args.seeds {
        for (variant, extra) in VARIANTS {
            let mut a = vec!["train".to_string(), "--preset".into(), preset.into(), "--seed".into(), seed.to_string()];
            sets(&mut a, &shared);
            sets(&mut a, &["eval.at_start=true".into()]);
            sets(&mut a, &extra.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            jobs.push(Job {
                variant,
                seed,
                args: a,
                parent: None,
                runs_dir: out.join("runs").join(variant).join(format!("seed-{seed}")),
            });
        }
    }
    eprintln!("dopamine: {env_id}, preset {preset}, seeds 0..{}, {} runs, {} at a time; {env_steps} env steps each; output {}", args.seeds, jobs.len(), args.processes.jobs, out.display());
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    let cpu_s = children_cpu_seconds();
    let wall_s = t0.elapsed().as_secs_f64();

    // Success rate (%) against env steps.
    let mut curves = Curves::new();
    for (job, dir) in jobs.iter().zip(&dirs) {
        let curve = read_curve(&dir.join("metrics.jsonl"), "eval/success_rate", "env_step")?;
        curves.entry(job.variant).or_default().push(curve.into_iter().map(|(x, y)| (x, 100.0 * y)).collect());
    }
    let mut steps: Vec<u64> = (0..=env_steps).step_by(eval_every as usize).collect();
    if steps.last() != Some(&env_steps) {
        steps.push(env_steps);
    }
    let order: Vec<&str> = VARIANTS.iter().map(|(v, _)| *v).collect();
    let command = command_line();
    let finals: Vec<(&str, Vec<f64>)> = order
        .iter()
        .map(|v| {
            (
                *v,
                curves
                    .get(v)
                    .map(|runs| runs.iter().filter_map(|c| super::jobs::at(c, env_steps)).collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut table = format!(
        "# Dopamine-style shaping on {env_id}\n\nEvaluation success rate (%, {} deterministic episodes per evaluation), mean ± std over {} seeds, at fixed env \
         steps. RLPD (preset `{preset}`) on {} scripted demos with keyframes; Φ = a progress model trained {} steps on the same demos \
         (views {}). Variants differ only in the stored online reward: `sparse` the env's −1/0, `naive` r + Φ(s′) − Φ(s), `pbrs` r + γΦ(s′) − Φ(s).\n\n\
         Command: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the processes it started, reused runs not counted)\n\n{}\n\
         | variant | final mean ± std | seeds |\n|---|---|---|\n",
        resolved.get("eval").and_then(|e| e.get("episodes")).and_then(|v| v.as_integer()).unwrap_or(0),
        args.seeds,
        args.demos,
        args.model_steps,
        VIEWS.join(", "),
        score_rows(&curves, &steps, &order)
    );
    for (v, vals) in &finals {
        if !vals.is_empty() {
            table.push_str(&format!("| {v} | {:.1} ± {:.1} | {} |\n", mean(vals), std_dev(vals), vals.len()));
        }
    }
    write_atomic(&out.join("table.md"), table.as_bytes())?;
    plot_with_y(
        &out.join("curves.png"),
        &curves,
        &order,
        &format!("{env_id}: sparse vs naive progress vs PBRS, {} seeds", args.seeds),
        "env steps",
        "success rate (%)",
    )?;
    let json = serde_json::json!({
        "task": args.task, "env": env_id, "preset": preset, "seeds": args.seeds, "command": command,
        "demos": args.demos, "model_steps": args.model_steps, "overrides": shared,
        "budget": {"env_steps": env_steps, "eval_every": eval_every},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "final": finals.iter().map(|(v, x)| (v.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    write_atomic(&out.join("results.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    println!("{table}");
    println!("written: {0}/table.md, {0}/curves.png, {0}/results.json", out.display());
    Ok(())
}
