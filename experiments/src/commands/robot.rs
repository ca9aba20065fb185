//! `o2o robot`: check a robot, fine-tune on it, record demonstrations.
//!
//! - `check <config>`: connect, read the arm, dry-run the envelope on adversarial commands
//!   (nothing is sent), report the limits and the timing of driver calls;
//! - `run --config <config> [--preset P] [--from <run-dir>] [--resume <run-dir>]`: the same
//!   runner as simulation (SAC, RLPD, WSRL, …) on the robot, with checkpoints, resume, the
//!   robot's recording and its safety report in the run directory;
//! - `record --config <config> --episodes N --out <file.hdf5>`: demonstrations by the
//!   operator (`--teleop reacher`: the scripted teleoperator) as a D4RL dataset.
//!
//! A run on a robot is any run whose env is `robot:<config.toml>`, so `o2o train`, `o2o run`,
//! `o2o finetune` and `o2o resume` work on robots too (see `o2o_experiments::robot`).

use super::run::{launch, CommonArgs};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use o2o_envs::Env;
use o2o_experiments::robot::RobotSession;
use o2o_experiments::Run;
use o2o_robot::config::OperatorConfig;
use o2o_robot::{Reacher, Recording, RobotConfig};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `o2o robot`.
#[derive(Args, Debug)]
pub struct RobotArgs {
    #[command(subcommand)]
    command: RobotCommand,
}

#[derive(Subcommand, Debug)]
enum RobotCommand {
    /// Connect, read the arm, dry-run the envelope (nothing is sent), report limits and timing.
    Check(CheckArgs),
    /// Fine-tune on the robot through the runner (checkpoints, resume, recording, safety report).
    Run(RunArgs),
    /// Record demonstrations (teleoperated or scripted) as a D4RL dataset.
    Record(RecordArgs),
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// The robot config (`robot/configs/*.toml`).
    config: PathBuf,
    /// Adversarial commands to dry-run through the envelope.
    #[arg(long, default_value_t = 10_000)]
    commands: usize,
    /// Driver reads to time.
    #[arg(long, default_value_t = 20)]
    reads: usize,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The robot config.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A run preset (e.g. `rlpd-robot-sim`, `sac-robot-sim`, `wsrl-robot-sim`) or a .toml file.
    #[arg(long)]
    preset: Option<String>,
    /// Start from this run's agent: with --preset, its newest checkpoint replaces the preset's
    /// offline phase; without, the run fine-tunes with the parent's own config (`o2o finetune`).
    #[arg(long)]
    from: Option<PathBuf>,
    /// Continue this robot run from its newest checkpoint (the config it started with).
    #[arg(long, conflicts_with_all = ["preset", "from", "config"])]
    resume: Option<PathBuf>,
    /// Online env steps on the robot.
    #[arg(long)]
    online_steps: Option<u64>,
    /// Override a config key of the run.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The run seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Folder the run directory is created in.
    #[arg(long, default_value = "runs")]
    runs_dir: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// Who drives the arm while recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Teleop {
    /// The config's `[operator]`.
    Config,
    /// The scripted reaching teleoperator (drives the tip to each goal).
    Reacher,
}

#[derive(Args, Debug)]
struct RecordArgs {
    /// The robot config.
    #[arg(long)]
    config: PathBuf,
    /// Episodes to record.
    #[arg(long, default_value_t = 10)]
    episodes: u64,
    /// The dataset to write (appended to when it exists).
    #[arg(long)]
    out: PathBuf,
    /// Who drives the arm.
    #[arg(long, value_enum, default_value = "config")]
    teleop: Teleop,
    /// Seed of the episodes' goals.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also write the whole recording as a LeRobotDataset v3.0 folder here (must not exist),
    /// beside the D4RL-layout `--out`: fps from the config's loop rate, HIL-SERL's fields.
    #[arg(long, value_name = "DIR")]
    lerobot: Option<PathBuf>,
    /// The task string of the LeRobot folder's frames.
    #[arg(long, default_value = "robot task")]
    task: String,
}

/// `o2o robot …`.
pub fn run(args: RobotArgs) -> Result<()> {
    match args.command {
        RobotCommand::Check(a) => check(a),
        RobotCommand::Run(a) => robot_run(a),
        RobotCommand::Record(a) => record(a),
    }
}

/// `o2o robot check`.
fn check(args: CheckArgs) -> Result<()> {
    let session = RobotSession::open(&args.config)?;
    let c = session.config();
    let e = &c.envelope;
    let period = c.control.period().map_err(anyhow::Error::msg)?;
    println!(
        "robot config {}: driver {}, clock {:?}, {} Hz ({} ms period), episodes of {} steps",
        args.config.display(),
        c.driver.kind(),
        c.clock,
        c.control.rate_hz,
        period.as_millis(),
        c.control.max_episode_steps
    );
    let env = session.make_env().context("connecting")?;
    let mut g = env.guard();
    let caps = g.driver().capabilities().clone();
    println!(
        "connected: {} ({} joints: {}), modes {:?}",
        caps.name,
        caps.joints.len(),
        caps.joints.join(", "),
        caps.modes.iter().map(|m| m.name()).collect::<Vec<_>>()
    );
    println!("envelope: mode {}, step window {:.4} per dimension (min(max_step_delta {}, max_velocity {} × {:.3} s)), watchdog {:.0} ms, {} missed deadlines latch, overspeed {:?}", e.mode.name(), g.step_window(), e.max_step_delta, e.max_velocity, period.as_secs_f64(), period.as_secs_f64() * e.watchdog_periods * 1e3, e.max_missed_deadlines, e.overspeed);
    let limits = g.driver().physical_limits();
    println!(
        "physical limits ({}): joint ranges {}, joint speed {}, end-effector speed {}, reach {}; {}",
        if limits.source.is_empty() { "none known" } else { &limits.source },
        if limits.joint_range.is_empty() { "unknown".to_string() } else { format!("{:.3?}", limits.joint_range) },
        limits.joint_speed.map_or("unknown".into(), |v| format!("{v:.3} rad/s")),
        limits.ee_speed.map_or("unknown".into(), |v| format!("{v:.3} m/s")),
        limits.reach.map_or("unknown".into(), |(c, r)| format!("{r:.3} m around {c:.3?}")),
        if g.warnings().is_empty() {
            "the envelope is inside them".to_string()
        } else {
            format!("{} limits beyond them (allow_beyond_model = true)", g.warnings().len())
        }
    );
    let state = g.read_state()?;
    for (i, q) in state.joint_positions.iter().enumerate() {
        if let (Some(lo), Some(hi)) = (e.joint_low.get(i), e.joint_high.get(i)) {
            println!(
                "  joint {:<24} {q:>8.4}   bounds [{lo:.3}, {hi:.3}]   margin {:.4}",
                caps.joints[i],
                (q - lo).min(hi - q)
            );
        }
    }
    if let Some(p) = state.ee_position {
        println!(
            "  end effector [{:.4}, {:.4}, {:.4}]   workspace {:?} .. {:?}",
            p[0], p[1], p[2], e.workspace_low, e.workspace_high
        );
    }
    // Dry run: adversarial commands through the envelope's checks, nothing sent.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let dim = g.command_dim();
    let measured: Vec<f64> = match e.mode {
        o2o_robot::ControlMode::JointPosition => state.joint_positions.clone(),
        o2o_robot::ControlMode::EndEffectorDelta => state.ee_position.map(|p| p.to_vec()).unwrap_or_default(),
    };
    let (mut rejected, mut clipped, mut worst) = (0usize, 0usize, 0.0f64);
    for _ in 0..args.commands {
        let cmd: Vec<f64> = (0..dim)
            .map(|i| match rng.gen_range(0..6) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => rng.gen_range(-1e6..1e6),
                _ => {
                    (if e.mode == o2o_robot::ControlMode::JointPosition { measured[i] } else { 0.0 })
                        + rng.gen_range(-1.0..1.0)
                }
            })
            .collect();
        let s = g.preview(&cmd)?;
        rejected += usize::from(s.rejected);
        clipped += usize::from(s.clipped > 0);
        if let Some(v) = &s.sent {
            for (i, x) in v.iter().enumerate() {
                let moved = if e.mode == o2o_robot::ControlMode::JointPosition { x - measured[i] } else { *x };
                worst = worst.max(moved.abs());
            }
        }
    }
    println!("dry run of {} adversarial commands (nothing sent): {rejected} rejected (NaN/∞), {clipped} clipped, largest move {worst:.4} (window {:.4}): {}", args.commands, g.step_window(), if worst <= g.step_window() + 1e-12 { "inside the envelope" } else { "OUTSIDE THE ENVELOPE" });
    if worst > g.step_window() + 1e-12 {
        bail!("the envelope let a move of {worst} through, over its window {}", g.step_window());
    }
    // Timing of driver reads on the loop's clock.
    let clock = g.clock().clone();
    let mut times = Vec::with_capacity(args.reads);
    for _ in 0..args.reads {
        let t = clock.now();
        let _ = g.read_state();
        times.push((clock.now() - t).as_secs_f64() * 1e3);
    }
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let max = times.iter().copied().fold(0.0, f64::max);
    println!(
        "driver reads: mean {mean:.2} ms, max {max:.2} ms over {} reads ({:.0}% of the period at the max)",
        args.reads,
        max / (period.as_secs_f64() * 1e3) * 100.0
    );
    if Duration::from_secs_f64(max / 1e3) > period / 2 {
        println!(
            "warning: a read takes more than half a period; the loop will miss deadlines at {} Hz",
            c.control.rate_hz
        );
    }
    let counters = g.counters().clone();
    drop(g);
    drop(env);
    println!("safety counters: {}", serde_json::to_string(&counters)?);
    Ok(())
}

/// `o2o robot run`.
fn robot_run(args: RunArgs) -> Result<()> {
    let run = if let Some(dir) = &args.resume {
        Run::resume(dir)?
    } else {
        let config = args.config.as_ref().context("--config is required (or --resume <run-dir>)")?;
        let id = o2o_experiments::robot::env_id(config)?;
        let mut sets = vec![format!("env={id:?}")];
        if let Some(n) = args.online_steps {
            sets.push(format!("train.online_steps={n}"));
        }
        if let Some(s) = args.seed {
            sets.push(format!("seed={s}"));
        }
        sets.extend(args.set.iter().cloned());
        let run = match (&args.preset, &args.from) {
            (Some(p), from) => {
                let run = Run::preset(p)?.set(&sets)?;
                match from {
                    Some(f) => run.starting_from(f).with_context(|| format!("--from {}", f.display()))?,
                    None => run,
                }
            }
            (None, Some(from)) => Run::finetune(from)?.set(&sets)?,
            (None, None) => bail!("give --preset (e.g. rlpd-robot-sim) or --from <run-dir> (or both)"),
        };
        run.runs_dir(&args.runs_dir)
    };
    run.config()?;
    launch(run, &args.common)?;
    Ok(())
}

/// `o2o robot record`.
fn record(args: RecordArgs) -> Result<()> {
    let mut config = RobotConfig::read(&args.config)?;
    if args.teleop == Teleop::Reacher {
        config.operator = OperatorConfig::Reacher(Reacher {
            goal_dim: config.task.goal_low.len(),
            max_action: config.envelope.max_step_delta as f32,
            ..Default::default()
        });
    }
    let id = o2o_experiments::robot::env_id(&args.config)?;
    let env = config.build(&id, &args.config)?;
    let (o, a) = (env.observation_space().dim(), env.action_space().dim());
    let recording = Arc::new(Mutex::new(Recording::open(&args.out, o, a)?));
    let before = recording.lock().unwrap_or_else(|p| p.into_inner()).len();
    let mut env = env.with_recording(recording.clone());
    let (mut successes, mut steps) = (0u64, 0u64);
    for k in 0..args.episodes {
        let seed = o2o_experiments::run::actor::derive_seed(args.seed, 9, k);
        env.reset(Some(seed)).with_context(|| format!("episode {k}"))?;
        loop {
            // The policy proposes nothing; the operator's takeover is what the arm executes.
            let s = env.step(&vec![0.0; a])?;
            steps += 1;
            if s.done() {
                successes += u64::from(s.info.success == Some(true));
                break;
            }
        }
    }
    let report = env.report();
    drop(env);
    let rec = recording.lock().unwrap_or_else(|p| p.into_inner());
    println!(
        "{}: recorded {} episodes, {steps} steps ({} intervened), {successes} successful; the file now holds {} transitions (was {before})",
        args.out.display(),
        args.episodes,
        report.timing.interventions,
        rec.len()
    );
    if report.timing.interventions == 0 {
        println!("note: no operator took over, so these are the zero policy's transitions; use --teleop reacher or an operator in the config");
    }
    if let Some(dir) = &args.lerobot {
        let opts = o2o_datasets::lerobot::WriteOptions {
            fps: config.control.rate_hz.round().max(1.0) as u32,
            task: args.task.clone(),
            robot_type: Some(id.clone()),
            ..Default::default()
        };
        let s = o2o_datasets::lerobot::write_v30(rec.dataset(), dir, &opts)
            .with_context(|| format!("writing the LeRobot dataset {}", dir.display()))?;
        println!(
            "{}: LeRobotDataset v3.0, {} episodes, {} frames, fps {}",
            dir.display(),
            s.episodes,
            s.frames,
            opts.fps
        );
    }
    Ok(())
}
