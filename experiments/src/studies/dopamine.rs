//! `o2o experiment dopamine`: does potential-based shaping with a learned progress model help,
//! and does using progress as a reward hurt (issue 22 item 8, issue 44 item 2)? Two tasks.
//!
//! # `--task fetch-push`: sparse vs naive vs PBRS on today's FetchPush
//!
//! | variant | online reward stored for every transition |
//! |---|---|
//! | `sparse` | the env's −1/0 (`shaping.enabled = false`) |
//! | `naive` | r + Φ(s') − Φ(s) (progress gained; `shaping.mode = "naive"`) |
//! | `pbrs` | r + γΦ(s') − Φ(s) (Ng et al. 1999; `shaping.mode = "pbrs"`) |
//!
//! All three are the preset `rlpd-fetch-push-dopamine` (RLPD with the demos as prior data,
//! 50/50 sampling) on the same demos and the same progress model, so they differ only in the
//! reward. On this task the naive reward cannot change the optimum (next section), so the
//! comparison can show speed, not the trap.
//!
//! # `--task fetch-reach-trap`: the semantic trap shown
//!
//! **Why FetchPush-v4 has no trap.** Its reward is −1 a step until success and 0 after, the
//! 50-step episodes never terminate, and the learner bootstraps through the time limit. The
//! naive reward's return is Σ γ^t [Φ(s_{t+1}) − Φ(s_t)] = −Φ(s₀) + (1 − γ) Σ_{t≥1} γ^{t−1} Φ(s_t)
//! (Robo-Dopamine's identity, algorithms.md §5.3): a bonus of (1 − γ)Φ ≤ 0.01 a step, which
//! cannot outweigh the −1 of every step spent away from the goal, and since nothing terminates,
//! "reach the goal and stay there" maximizes both the gold reward and Σ γ^{t−1}Φ. The naive
//! optimum is the sparse one.
//!
//! **A regime with a trap.** Two changes, both the paper's setting rather than Fetch's:
//!
//! 1. *Success terminates and pays the gold reward*: env `FetchReachTerminal-v4`, FetchReach
//!    with r_gold = 1 at success (d < 0.05 m), 0 otherwise, and success a true termination;
//!    the 50-step limit still truncates (bootstrapped). Progress now stops accruing at success.
//! 2. *Progress paid per step*: `shaping.mode = "progress"`, r' = r_gold + λΦ(s') with
//!    Φ(s') := 0 after a true termination. Its return is Σ γ^t r_gold + λ Σ_{t=1}^{T−1}
//!    γ^{t−1} Φ(s_t): exactly the objective the paper shows its naive reward Φ(s') − Φ(s)
//!    amounts to, Σ γ^{t−1} Φ(s_t) ("which rewards stagnating in high-progress states", the
//!    semantic trap), weighted by λ (`shaping.scale`, 0.1 here).
//!
//! Hand-worked on the 1-D abstraction the unit test checks by value iteration
//! (`reward-models/tests/semantic_trap.rs`): distance d = k · 0.025 m, k = 0..=10, one step moves
//! k by at most 2 (0.05 m), success at k ≤ 1, γ = 0.98 (the preset's), Φ(k) = 1 − d/0.25.
//! The best state short of success is k = 2 (d = 0.05 m, Φ_h = 0.8). From there:
//!
//! | reward | Q(finish) | Q(stay) | optimum from 0.25 m |
//! |---|---|---|---|
//! | sparse gold | 1 | γ·1 = 0.98 | finish in 5 steps |
//! | progress, λ = 0.1 | 1 (Φ(terminal) = 0) | λΦ_h/(1 − γ) = 0.1·0.8/0.02 = 4.0 | hover at k = 2 for all 50 steps, never succeed |
//! | PBRS, Φ(terminal) = 0 | 1 − Φ_h = 0.2 | γΦ_h − Φ_h + γ·0.2 = 0.18 | = sparse, Q_PBRS = Q − Φ(s) everywhere |
//! | naive Φ(s′) − Φ(s) + r_gold (today's `naive`) | 1 + 1 − 0.8 = 1.2 | γ·1.2 = 1.176 | finish in 5 steps |
//!
//! (a) the sparse optimum finishes; (b) the progress optimum hovers: staying pays λΦ_h a step
//! forever, finishing pays r_gold once, so the trap opens exactly when λΦ_h > (1 − γ)·r_gold,
//! here λ > 0.025 (at λ = 1 − γ = 0.02, the weight at which the per-step reward equals the
//! difference reward up to a constant, hovering is worth 0.996 < 1 and there is no trap);
//! (c) PBRS keeps the sparse optimum (Σ_t γ^t F = −Φ(s₀) on every terminated episode).
//! Today's `naive` mode keeps Φ(s') at the terminating step, so the last transition pays
//! Φ(goal) at full weight (the boundary term γ^{T−1}Φ(s_T) of the identity) and it finishes
//! too: with an exact Φ that peaks at the goal, the difference reward has the sparse optimum.
//! Without r_gold and with Φ(terminal) = 0 it would trap (finish −0.8, stay 0). The learned Φ
//! saturates near 1 short of the goal, which only widens the trap: λΦ_h/(1 − γ) ≈ 5 ≫ 1.
//!
//! | variant | reward | learner |
//! |---|---|---|
//! | `sparse` | gold 1/0 (`shaping.enabled = false`), HER `future` (k = 4; relabelled rows terminal at the new goal) | SAC |
//! | `naive-progress` | r_gold + λΦ(s′), learned Φ | SAC |
//! | `pbrs` | r_gold + γΦ(s′) − Φ(s), learned Φ (the preset's default) | SAC |
//! | `pbrs-true` | r_gold + γΦ(s′) − Φ(s), Φ = 1 − d/0.25 m (`shaping.potential = "goal-distance"`): the ceiling | SAC |
//! | `naive-progress-true` | r_gold + λΦ(s′), Φ = 1 − d/0.25 m: the value-iteration setting itself | SAC |
//!
//! The fifth variant separates the trap from the learned Φ's quality: with the true Φ the
//! progress reward's optimum is the hand-worked one (hover at d just above 0.05 m); the learned Φ
//! is monotone along held-out demos (backward VOC 1.000) but its level differs between episodes
//! and it is not trained off the demos' paths, so `naive-progress` may farm elsewhere than at
//! the goal's edge (`eval/goal_distance_end` tells).
//!
//! HER is refused together with an enabled `[shaping]` (its recomputed rewards would drop F),
//! so only the sparse variant relabels, as Dopamine-RL replaces relabelling with shaping. FetchReach
//! rather than FetchPush: at the budget (about 2 core-hours for 5 variants × 5 seeds, the preset's
//! header) the committed FetchPush run could not move from the untrained success rate in 1000
//! steps, and SAC + HER needs about 10k env steps on FetchReach alone; Push needs ~10× more.
//! Φ is trained on scripted FetchReach demos slowed to 0.1 of full speed (`o2o reward demos
//! --speed 0.1`: at full speed the script succeeds in 1–4 steps, too few frames for labels).
//!
//! # Both tasks
//!
//! The demos and Φ are made once, in the output folder, and reused when they are there. Runs
//! are `o2o train` processes (`--jobs` at a time, `--threads` torch threads each) in
//! `<out>/runs/<variant>/seed-<s>/`; a finished run found there is reused, so re-running the
//! command continues an interrupted experiment. The output folder gets `table.md`, `curves.png`
//! (success rate) and `results.json`; the trap task adds the evaluation episode length
//! (`lengths.png`) and Φ at the end of evaluation episodes (`eval/potential_end`, the farming:
//! full-length episodes that end at high Φ without success), and the paired per-seed
//! differences against `pbrs` with 95 % bootstrap intervals.

use super::jobs::{
    children_cpu_seconds, mean_between, paired_rows, plot_with_y, run_jobs, score_rows, sets, Curves, Job, PerSeed,
    Processes,
};
use super::StudyReport;
use crate::report::runs::read_curve;
use crate::report::stats::{mean, std_dev};
use crate::run::rundir::write_atomic;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A variant: its name and the overrides it adds to the preset.
type Variant = (&'static str, &'static [&'static str]);

/// The variants of `--task fetch-push`, in table order.
pub const VARIANTS: [Variant; 3] = [
    ("sparse", &["shaping.enabled=false"]),
    ("naive", &["shaping.mode=\"naive\""]),
    ("pbrs", &["shaping.mode=\"pbrs\""]),
];

/// The variants of `--task fetch-reach-trap`, in table order.
pub const TRAP_VARIANTS: [Variant; 5] = [
    ("sparse", &["shaping.enabled=false", "replay.her=\"future\""]),
    ("naive-progress", &["shaping.mode=\"progress\""]),
    ("pbrs", &["shaping.mode=\"pbrs\""]),
    ("pbrs-true", &["shaping.mode=\"pbrs\"", "shaping.potential=\"goal-distance\""]),
    ("naive-progress-true", &["shaping.mode=\"progress\"", "shaping.potential=\"goal-distance\""]),
];

/// The views of the FetchPush progress model (the docs' recipe): goal, gripper, object, object − gripper.
const VIEWS: [&str; 4] = ["goal=3:6", "gripper=6:9", "object=9:12", "object-from-gripper=12:15"];

/// The views of the FetchReach progress model: goal, gripper and the gripper's offset from the
/// goal (achieved − desired, a relative view). Measured on 8 held-out slowed demos (50 training
/// demos, 64 × 64, 1500 steps): the Markov backward Φ has VOC 1.000 with the three views, 0.907
/// with goal and gripper alone (and an offset of +1.09: the backward anchor, the demos' mean final
/// state, holds some other episode's goal), 0.642 with the offset alone.
const REACH_VIEWS: [&str; 3] = ["goal=3:6", "gripper=6:9", "to-goal=0:3-3:6"];

/// The FetchReach progress model: the Markov backward estimate as the model's own fusion, a
/// small network, and labels from every second frame of the short slowed demos.
const REACH_MODEL_CONFIG: &str = "hidden = [64, 64]\nfusion = \"backward\"\n\n[labels]\nsample_factor = 2\n";

/// Everything an experiment task fixes.
struct Task {
    name: &'static str,
    /// The env of the runs.
    env: &'static str,
    /// The env the scripted demos are recorded on, and the script's speed.
    demo_env: &'static str,
    demo_speed: f32,
    preset: &'static str,
    views: &'static [&'static str],
    /// `o2o reward train --config` text, when not the defaults.
    model_config: Option<&'static str>,
    variants: &'static [Variant],
    default_seeds: u64,
    /// The preset trains on the demos as prior data (`dataset.path`).
    demos_as_data: bool,
    /// The trap report: episode length, Φ at the end, paired differences.
    trap: bool,
}

/// The task of a `--task` name.
fn task(name: &str) -> Result<Task> {
    match name {
        "fetch-push" => Ok(Task {
            name: "fetch-push",
            env: "FetchPush-v4",
            demo_env: "FetchPush-v4",
            demo_speed: 1.0,
            preset: "rlpd-fetch-push-dopamine",
            views: &VIEWS,
            model_config: None,
            variants: &VARIANTS,
            default_seeds: 3,
            demos_as_data: true,
            trap: false,
        }),
        "fetch-reach-trap" => Ok(Task {
            name: "fetch-reach-trap",
            env: "FetchReachTerminal-v4",
            demo_env: "FetchReach-v4",
            demo_speed: 0.1,
            preset: "sac-fetch-reach-dopamine-trap",
            views: &REACH_VIEWS,
            model_config: Some(REACH_MODEL_CONFIG),
            variants: &TRAP_VARIANTS,
            default_seeds: 5,
            demos_as_data: false,
            trap: true,
        }),
        other => bail!("--task {other}: expected fetch-push or fetch-reach-trap"),
    }
}

/// What `o2o experiment dopamine` runs.
#[derive(Debug, Clone)]
pub struct DopamineOptions {
    /// The task: `fetch-push` or `fetch-reach-trap`.
    pub task: String,
    /// Seeds 0..N (default: 3 for fetch-push, 5 for fetch-reach-trap).
    pub seeds: Option<u64>,
    /// Scripted demonstrations to record (Φ's training set; fetch-push's prior data too).
    pub demos: usize,
    /// Gradient steps of the progress model.
    pub model_steps: usize,
    /// Output folder (default `experiments-out/dopamine-<task>`).
    pub out: Option<PathBuf>,
    /// How the runs' processes (and the demos' and the model's) run.
    pub processes: Processes,
    /// Config overrides for every run, as in `o2o train --set`.
    pub set: Vec<String>,
    /// The command line recorded in `table.md` and `results.json`.
    pub command: String,
}

/// Runs `o2o <args>` (`exe`) to make `product`, unless it is already there; its output goes to
/// `log`.
fn make_once(exe: &Path, product: &Path, args: &[String], log: &Path) -> Result<()> {
    if product.is_file() {
        eprintln!("reusing {}", product.display());
        return Ok(());
    }
    let file = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut c = Command::new(exe);
    c.args(args).stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
    let (status, forwarded) = super::jobs::wait_forwarding(&mut c).context("starting o2o")?;
    if forwarded {
        return Err(super::jobs::StudyStopped { finished: 0, stopped: 0, not_started: 1 }.into());
    }
    if !status.success() || !product.is_file() {
        bail!("`o2o {}` failed ({status}); see {}", args.join(" "), log.display());
    }
    eprintln!("made {}", product.display());
    Ok(())
}

/// The scripted demos and the progress model of `t` in `out`, made once: (demos, model).
fn demos_and_model(t: &Task, args: &DopamineOptions, out: &Path) -> Result<(PathBuf, PathBuf)> {
    let demos = out.join("demos.hdf5");
    let model = out.join("progress.pt");
    let s = |p: &Path| p.display().to_string();
    let mut demo_args: Vec<String> = [
        "reward",
        "demos",
        "--task",
        t.demo_env,
        "--episodes",
        &args.demos.to_string(),
        "--seed",
        "0",
        "--out",
        &s(&demos),
    ]
    .map(String::from)
    .to_vec();
    if t.demo_speed < 1.0 {
        demo_args.extend(["--speed".to_string(), t.demo_speed.to_string()]);
    }
    make_once(&args.processes.exe, &demos, &demo_args, &out.join("logs/demos.log"))?;
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
    for v in t.views {
        train_args.extend(["--view".to_string(), v.to_string()]);
    }
    if let Some(text) = t.model_config {
        let config = out.join("progress-model.toml");
        write_atomic(&config, text.as_bytes())?;
        train_args.extend(["--config".to_string(), s(&config)]);
    }
    make_once(&args.processes.exe, &model, &train_args, &out.join("logs/progress-model.log"))?;
    Ok((demos, model))
}

/// `o2o experiment dopamine`.
pub fn run(args: &DopamineOptions) -> Result<StudyReport> {
    let t = task(&args.task)?;
    let seeds = args.seeds.unwrap_or(t.default_seeds);
    if seeds == 0 || args.processes.jobs == 0 || args.processes.threads < 1 || args.demos == 0 || args.model_steps == 0
    {
        bail!("--seeds, --demos, --model-steps, --jobs and --threads must be at least 1");
    }
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("experiments-out/dopamine-{}", t.name)));
    std::fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let out = std::fs::canonicalize(&out).with_context(|| format!("cannot resolve {}", out.display()))?;
    let t0 = Instant::now();
    let (demos, model) = demos_and_model(&t, args, &out)?;

    let s = |p: &Path| p.display().to_string();
    let mut shared = vec![format!("shaping.model={:?}", s(&model))];
    if t.demos_as_data {
        shared.insert(0, format!("dataset.path={:?}", s(&demos)));
    }
    shared.extend(args.set.iter().cloned());
    let (_, mut resolved) = crate::run::presets::load(t.preset)?;
    crate::run::config::apply_overrides(&mut resolved, &shared)?;
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
    for seed in 0..seeds {
        for (variant, extra) in t.variants {
            let mut a =
                vec!["train".to_string(), "--preset".into(), t.preset.into(), "--seed".into(), seed.to_string()];
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
    eprintln!(
        "dopamine: {}, preset {}, seeds 0..{seeds}, {} runs, {} at a time; {env_steps} env steps each; output {}",
        t.env,
        t.preset,
        jobs.len(),
        args.processes.jobs,
        out.display()
    );
    let dirs = run_jobs(&jobs, &args.processes, &out)?;
    let cpu_s = children_cpu_seconds();
    let wall_s = t0.elapsed().as_secs_f64();

    let read = |metric: &str, scale: f64| -> Result<Curves> {
        let mut curves = Curves::new();
        for (job, dir) in jobs.iter().zip(&dirs) {
            let curve = read_curve(&dir.join("metrics.jsonl"), metric, "env_step")?;
            curves.entry(job.variant).or_default().push(curve.into_iter().map(|(x, y)| (x, scale * y)).collect());
        }
        Ok(curves)
    };
    // Success rate (%) against env steps.
    let curves = read("eval/success_rate", 100.0)?;
    let mut steps: Vec<u64> = (0..=env_steps).step_by(eval_every as usize).collect();
    if steps.last() != Some(&env_steps) {
        steps.push(env_steps);
    }
    let order: Vec<&str> = t.variants.iter().map(|(v, _)| *v).collect();
    let command = args.command.clone();
    let finals = |c: &Curves| -> Vec<(&str, Vec<f64>)> {
        order
            .iter()
            .map(|v| {
                let vals = c.get(v).map(|runs| runs.iter().filter_map(|r| super::jobs::at(r, env_steps)).collect());
                (*v, vals.unwrap_or_default())
            })
            .collect()
    };
    let episodes = resolved.get("eval").and_then(|e| e.get("episodes")).and_then(|v| v.as_integer()).unwrap_or(0);
    let mut table = if t.trap {
        format!(
            "# The semantic trap on {}\n\nSAC (preset `{}`) on FetchReach with the gold reward (1 at success, which terminates the episode; \
             0 otherwise), {env_steps} env steps per run, {} deterministic evaluation episodes every {eval_every} env steps, {seeds} seeds. \
             Φ = a progress model trained {} steps on {} scripted FetchReach demos at 0.1 speed (views {}). Variants: `sparse` the gold \
             reward with HER; `naive-progress` r_gold + λΦ(s′) (the per-step progress reward); `pbrs` r_gold + γΦ(s′) − Φ(s); \
             `pbrs-true` and `naive-progress-true` the same with the true Φ = 1 − d/0.25 m. Why the progress reward has a \
             hovering optimum here and PBRS has the sparse one: docs/dopamine.md, \"The semantic trap\".\n\n\
             Command: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the processes it started, reused runs not counted)\n\n\
             ## Success rate (%), mean ± std over seeds\n\n{}\n",
            t.env,
            t.preset,
            episodes,
            args.model_steps,
            args.demos,
            t.views.join(", "),
            score_rows(&curves, &steps, &order)
        )
    } else {
        format!(
            "# Dopamine-style shaping on {}\n\nEvaluation success rate (%, {episodes} deterministic episodes per evaluation), mean ± std over {seeds} seeds, at fixed env \
             steps. RLPD (preset `{}`) on {} scripted demos with keyframes; Φ = a progress model trained {} steps on the same demos \
             (views {}). Variants differ only in the stored online reward: `sparse` the env's −1/0, `naive` r + Φ(s′) − Φ(s), `pbrs` r + γΦ(s′) − Φ(s).\n\n\
             Command: `{command}` ({wall_s:.0} s wall; {cpu_s:.0} s of CPU in the processes it started, reused runs not counted)\n\n{}\n\
             | variant | final mean ± std | seeds |\n|---|---|---|\n",
            t.env,
            t.preset,
            args.demos,
            args.model_steps,
            t.views.join(", "),
            score_rows(&curves, &steps, &order)
        )
    };
    let mut json = serde_json::json!({
        "task": t.name, "env": t.env, "preset": t.preset, "seeds": seeds, "command": command,
        "demos": args.demos, "model_steps": args.model_steps, "overrides": shared,
        "budget": {"env_steps": env_steps, "eval_every": eval_every},
        "curves": curves.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
        "final": finals(&curves).iter().map(|(v, x)| (v.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>(),
        "runs": jobs.iter().zip(&dirs).map(|(j, d)| serde_json::json!({"variant": j.variant, "seed": j.seed, "run_dir": d})).collect::<Vec<_>>(),
    });
    let title = match t.trap {
        true => format!("{}: the semantic trap, success rate, {seeds} seeds", t.env),
        false => format!("{}: sparse vs naive progress vs PBRS, {seeds} seeds", t.env),
    };
    plot_with_y(&out.join("curves.png"), &curves, &order, &title, "env steps", "success rate (%)")?;
    if t.trap {
        let lengths = read("eval/length", 1.0)?;
        let potential = read("eval/potential_end", 1.0)?;
        let distance = read("eval/goal_distance_end", 100.0)?;
        table.push_str(&format!(
            "## Evaluation episode length (steps; 50 = never succeeded), mean ± std over seeds\n\n{}\n\
             ## Goal distance at the end of evaluation episodes (cm; success < 5), mean ± std\n\n{}\n\
             ## Φ at the end of evaluation episodes (`eval/potential_end`; the variant's own Φ: learned, or the true 1 − d/0.25 \
             for `*-true`), mean ± std\n\n{}\n",
            score_rows(&lengths, &steps, &order),
            score_rows(&distance, &steps, &order),
            score_rows(&potential, &steps, &order)
        ));
        let (rows, paired) = trap_comparisons(&jobs, &curves, &lengths, env_steps, &order);
        table.push_str(&format!(
            "## Paired per-seed differences against `pbrs`\n\nEach seed's runs share the seed and budget; the mean difference over seeds \
             with a 95% bootstrap interval (seeds resampled, 50 000 replicates). Final = the evaluation at {env_steps} env steps; \
             mean = the mean over the evaluations after step 0 (area under the curve). PBRS keeps the optimum if `sparse − pbrs` is \
             not above 0; the trap shows as `naive-progress − pbrs` (and `naive-progress-true − pbrs-true`, the same true Φ) below 0 \
             in success and above 0 in length.\n\n{rows}"
        ));
        plot_with_y(
            &out.join("lengths.png"),
            &lengths,
            &order,
            &format!("{}: evaluation episode length, {seeds} seeds", t.env),
            "env steps",
            "episode length (steps)",
        )?;
        let extra = serde_json::json!({
            "lengths": lengths.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
            "final_lengths": finals(&lengths).iter().map(|(v, x)| (v.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>(),
            "potential_end": potential.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
            "goal_distance_end_cm": distance.iter().map(|(v, c)| (v.to_string(), serde_json::json!(c))).collect::<serde_json::Map<_, _>>(),
            "paired": paired.iter().map(|(m, p)| serde_json::json!({"measure": m, "comparison": p})).collect::<Vec<_>>(),
        });
        if let (Some(j), Some(e)) = (json.as_object_mut(), extra.as_object()) {
            j.extend(e.clone());
        }
    } else {
        for (v, vals) in finals(&curves) {
            if !vals.is_empty() {
                table.push_str(&format!("| {v} | {:.1} ± {:.1} | {} |\n", mean(&vals), std_dev(&vals), vals.len()));
            }
        }
    }
    write_atomic(&out.join("table.md"), table.as_bytes())?;
    write_atomic(&out.join("results.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    Ok(StudyReport::written(out, table, json))
}

/// The trap's paired rows: final success (%), mean success over the run (%) and final episode
/// length, per seed, of every variant against `pbrs`, and of `naive-progress-true` against
/// `pbrs-true` (the same Φ); with the comparisons for results.json.
fn trap_comparisons(
    jobs: &[Job],
    success: &Curves,
    lengths: &Curves,
    env_steps: u64,
    order: &[&str],
) -> (String, Vec<(String, super::jobs::Paired)>) {
    let per_seed = |curves: &Curves, f: &dyn Fn(&[(f64, f64)]) -> Option<f64>| -> PerSeed {
        let mut out = PerSeed::new();
        let mut index: std::collections::BTreeMap<&str, usize> = Default::default();
        for j in jobs {
            let k = index.entry(j.variant).or_default();
            if let Some(v) = curves.get(j.variant).and_then(|runs| runs.get(*k)).and_then(|c| f(c)) {
                out.entry(j.variant).or_default().insert(j.seed, v);
            }
            *k += 1;
        }
        out
    };
    let final_at = |c: &[(f64, f64)]| super::jobs::at(c, env_steps);
    let area = |c: &[(f64, f64)]| mean_between(c, 0, env_steps);
    let (fin, auc, len) = (per_seed(success, &final_at), per_seed(success, &area), per_seed(lengths, &final_at));
    let measures = [("final success (%)", &fin), ("mean success (%)", &auc), ("final episode length", &len)];
    let (mut rows, mut all) = paired_rows(&measures, "pbrs", order);
    let (true_rows, true_all) = paired_rows(&measures, "pbrs-true", &["naive-progress-true"]);
    // The second table's rows, without its header.
    rows.extend(true_rows.lines().skip(2).map(|l| format!("{l}\n")));
    all.extend(true_all);
    (rows, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both tasks resolve to a preset with their env, every variant's overrides resolve to a
    /// valid run config, and the trap's variants are the four of issue 44 plus the progress reward
    /// on the true Φ.
    #[test]
    fn tasks_and_variants_resolve() {
        for name in ["fetch-push", "fetch-reach-trap"] {
            let t = task(name).unwrap();
            let (n, mut table) = crate::run::presets::load(t.preset).unwrap();
            table.insert("preset".into(), toml::Value::String(n));
            assert_eq!(table.get("env").and_then(|v| v.as_str()), Some(t.env), "{name}");
            for (v, extra) in t.variants {
                let mut table = table.clone();
                let mut sets: Vec<String> = vec!["shaping.model=\"m.pt\"".into()];
                sets.extend(extra.iter().map(|s| s.to_string()));
                crate::run::config::apply_overrides(&mut table, &sets).unwrap();
                crate::run::config::RunConfig::from_table(table, v).unwrap_or_else(|e| panic!("{name} {v}: {e:#}"));
            }
        }
        let t = task("fetch-reach-trap").unwrap();
        assert_eq!(
            t.variants.iter().map(|v| v.0).collect::<Vec<_>>(),
            ["sparse", "naive-progress", "pbrs", "pbrs-true", "naive-progress-true"]
        );
        assert!(t.default_seeds >= 5);
        assert!(task("fetch-pick").is_err());
    }
}
