//! `o2o reward …`: Dopamine-style progress models from demonstrations.
//!
//! - `o2o reward demos --task FetchPush-v4 --episodes 50 --out push.hdf5` records scripted
//!   demonstrations (a D4RL file plus its `push.hdf5.keyframes.json` sidecar);
//! - `o2o reward train --demos push.hdf5 --view gripper=6:9 --view object=9:12 --out push.pt`
//!   trains a progress model (hop network) on them;
//! - `o2o reward eval --model push.pt --demos held.hdf5 --out eval/` plots progress curves
//!   against the ground truth (PNG and a Rerun recording) and reports VOC per mode;
//! - `o2o reward adapt --from push.pt --demo new.hdf5 --held new-held.hdf5 --out new.pt`
//!   fine-tunes on one demonstration of a new task and reports VOC before and after.
//!
//! See docs/dopamine.md.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::mujoco::FetchTask;
use o2o_experiments::report::plot::{plot_curves, Line};
use o2o_reward_models::demos::{demos_from_dataset, record_fetch_at_speed, Keyframes};
use o2o_reward_models::evaluate::{evaluate, EvalReport, MODES};
use o2o_reward_models::{Demo, ProgressModel, ProgressModelConfig, ViewSpec};
use std::path::{Path, PathBuf};
use tch::Device;

/// Arguments of `o2o reward`.
#[derive(Args)]
pub struct RewardArgs {
    #[command(subcommand)]
    pub command: RewardCommand,
}

/// The `o2o reward` subcommands.
#[derive(Subcommand)]
pub enum RewardCommand {
    /// Record scripted Fetch demonstrations with keyframes (D4RL file + keyframe sidecar).
    Demos(DemosArgs),
    /// Train a progress model on demonstrations.
    Train(TrainArgs),
    /// Progress curves against ground truth on held-out demos: VOC, PNG plot, Rerun recording.
    Eval(EvalArgs),
    /// One-shot adaptation: fine-tune a model on one demonstration of a new task.
    Adapt(AdaptArgs),
}

/// Arguments of `o2o reward demos`.
#[derive(Args)]
pub struct DemosArgs {
    /// FetchReach-v4, FetchPush-v4 or FetchPickAndPlace-v4 (or a Dense twin).
    #[arg(long)]
    pub task: String,
    /// Successful episodes to record.
    #[arg(long, default_value_t = 50)]
    pub episodes: usize,
    /// Seed of the first episode (the next ones count up).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output D4RL file; the keyframes go to `<out>.keyframes.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// The scripted controller's largest position command, in (0, 1] (1 = the env's 0.05 m a
    /// step): slower demos have more frames between start and success (FetchReach at full
    /// speed succeeds within 1–4 steps, too few frames for the progress labels).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f32,
}

/// Where demos come from (shared by train, eval, adapt).
#[derive(Args, Clone)]
pub struct DemoSource {
    /// D4RL-format demonstration files (repeatable).
    #[arg(long = "demos", required = true)]
    pub demos: Vec<PathBuf>,
    /// Keyframe sidecar (.json or .toml); default: `<demos>.keyframes.json` next to each file when it exists.
    #[arg(long)]
    pub keyframes: Option<PathBuf>,
}

/// Arguments of `o2o reward train`.
#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub source: DemoSource,
    /// A named view of the observation, `NAME=START:END` (repeatable; default: the whole observation).
    #[arg(long = "view")]
    pub views: Vec<String>,
    /// TOML file with progress-model settings (hidden, lr, steps, labels.*, fusion, …).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Gradient steps (overrides the config).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Seed (overrides the config).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Hold out the last N episodes and report VOC on them.
    #[arg(long, default_value_t = 0)]
    pub held_out: usize,
    /// Output model file.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `o2o reward eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// Model file from `o2o reward train`.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub source: DemoSource,
    /// Output folder: eval.json, progress.png, progress.rrd.
    #[arg(long)]
    pub out: PathBuf,
    /// Demos drawn in the plot.
    #[arg(long, default_value_t = 4)]
    pub plot: usize,
}

/// Arguments of `o2o reward adapt`.
#[derive(Args)]
pub struct AdaptArgs {
    /// The pretrained model.
    #[arg(long = "from")]
    pub from: PathBuf,
    /// D4RL file holding the one demonstration of the new task.
    #[arg(long)]
    pub demo: PathBuf,
    /// Which episode of that file is the demonstration.
    #[arg(long, default_value_t = 0)]
    pub episode: usize,
    /// Keyframes of `--demo` (default: its sidecar when it exists).
    #[arg(long)]
    pub keyframes: Option<PathBuf>,
    /// Held-out demonstrations of the new task, for VOC before and after.
    #[arg(long)]
    pub held: Option<PathBuf>,
    /// Fine-tuning steps.
    #[arg(long, default_value_t = 300)]
    pub steps: usize,
    /// Fine-tuning learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Seed of the fine-tuning pairs and batches.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output model file.
    #[arg(long)]
    pub out: PathBuf,
}

/// Run `o2o reward …`.
pub fn run(args: RewardArgs) -> Result<()> {
    tch::set_num_threads(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4) as i32);
    match args.command {
        RewardCommand::Demos(a) => demos(a),
        RewardCommand::Train(a) => train(a),
        RewardCommand::Eval(a) => eval(a),
        RewardCommand::Adapt(a) => adapt(a),
    }
}

fn fetch_task(id: &str) -> Result<FetchTask> {
    Ok(match id.trim_end_matches("-v4").trim_end_matches("Dense") {
        "FetchReach" => FetchTask::Reach,
        "FetchPush" => FetchTask::Push,
        "FetchPickAndPlace" => FetchTask::PickAndPlace,
        _ => bail!("--task {id}: expected FetchReach-v4, FetchPush-v4 or FetchPickAndPlace-v4 (or a Dense twin)"),
    })
}

fn demos(a: DemosArgs) -> Result<()> {
    let task = fetch_task(&a.task)?;
    if !(a.speed > 0.0 && a.speed <= 1.0) {
        bail!("--speed {}: expected a number in (0, 1]", a.speed);
    }
    let mut env = o2o_envs::registry::make_fetch(&a.task).with_context(|| format!("making {}", a.task))?;
    let (data, keyframes, report) = record_fetch_at_speed(&mut env, task, a.episodes, a.seed, a.speed, &a.out)?;
    if report.kept < a.episodes {
        bail!("only {} of {} scripted episodes succeeded in {} tries", report.kept, a.episodes, report.attempted);
    }
    data.write(&a.out).with_context(|| format!("writing {}", a.out.display()))?;
    let side = Keyframes::sidecar_of(&a.out);
    keyframes.write(&side)?;
    println!(
        "{}: {} episodes ({} tried), {} rows; keyframes in {}",
        a.out.display(),
        report.kept,
        report.attempted,
        data.len(),
        side.display()
    );
    Ok(())
}

/// `NAME=START:END` → a view; `NAME=START:END-START2:END2` → the relative view
/// obs[START..END] − obs[START2..END2] (e.g. `to-goal=0:3-3:6`, achieved − desired goal).
fn parse_view(s: &str) -> Result<ViewSpec> {
    let bad = || anyhow::anyhow!("--view {s}: expected NAME=START:END or NAME=START:END-START2:END2, e.g. gripper=6:9");
    let (name, range) = s.split_once('=').ok_or_else(bad)?;
    let slice = |r: &str| -> Result<[usize; 2]> {
        let (a, b) = r.split_once(':').ok_or_else(bad)?;
        let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if b <= a {
            return Err(bad());
        }
        Ok([a, b])
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok(match range.split_once('-') {
        Some((x, y)) => {
            let (x, y) = (slice(x)?, slice(y)?);
            if x[1] - x[0] != y[1] - y[0] {
                bail!("--view {s}: the two slices of a relative view must have the same width");
            }
            ViewSpec { minus: Some(y), ..ViewSpec::slice(name, x) }
        }
        None => ViewSpec::slice(name, slice(range)?),
    })
}

/// Read every demo file with its keyframes into demos over `views` (`None`: the whole observation).
fn load(source: &DemoSource, views: Option<&[ViewSpec]>) -> Result<(Vec<Demo>, Vec<ViewSpec>)> {
    if source.keyframes.is_some() && source.demos.len() > 1 {
        bail!("--keyframes names one sidecar but {} --demos files were given; put a <file>.keyframes.json beside each instead", source.demos.len());
    }
    let mut out = Vec::new();
    let mut used: Option<Vec<ViewSpec>> = views.map(<[ViewSpec]>::to_vec);
    for path in &source.demos {
        let data = D4rlDataset::read(path).with_context(|| format!("reading demonstrations {}", path.display()))?;
        let views = used.get_or_insert_with(|| vec![ViewSpec::slice("observation", [0, data.obs_dim])]).clone();
        let side = source.keyframes.clone().unwrap_or_else(|| Keyframes::sidecar_of(path));
        let keyframes = if side.is_file() { Some(Keyframes::read(&side)?) } else { None };
        out.extend(demos_from_dataset(&data, keyframes.as_ref(), &views)?);
    }
    Ok((out, used.unwrap_or_default()))
}

fn print_eval(label: &str, r: &EvalReport) {
    let row: Vec<String> = r.modes.iter().zip(r.mean_voc).map(|(m, v)| format!("{m} {v:.3}")).collect();
    println!("{label}: VOC {}", row.join(", "));
}

fn train(a: TrainArgs) -> Result<()> {
    let views: Vec<ViewSpec> = a.views.iter().map(|v| parse_view(v)).collect::<Result<_>>()?;
    let (demos, views) = load(&a.source, (!views.is_empty()).then_some(views.as_slice()))?;
    let mut config: ProgressModelConfig = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: not a progress-model config", p.display()))?
        }
        None => ProgressModelConfig::default(),
    };
    config.views = views;
    config.steps = a.steps.unwrap_or(config.steps);
    config.seed = a.seed.unwrap_or(config.seed);
    if a.held_out >= demos.len() {
        bail!("--held-out {} leaves no training demos (found {})", a.held_out, demos.len());
    }
    let (train, held) = demos.split_at(demos.len() - a.held_out);
    let (model, report) = ProgressModel::train(config, train, Device::Cpu)?;
    model.save(&a.out)?;
    println!(
        "{}: trained on {} demos ({} labelled pairs), hop MSE {:.4}",
        a.out.display(),
        train.len(),
        report.pairs,
        report.final_loss
    );
    if !held.is_empty() {
        print_eval(&format!("held-out ({} demos)", held.len()), &evaluate(&model, held)?);
    }
    Ok(())
}

fn eval(a: EvalArgs) -> Result<()> {
    let model = ProgressModel::load(&a.model, Device::Cpu)?;
    let (demos, _) = load(&a.source, Some(&model.config().views))?;
    let report = evaluate(&model, &demos)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let json = a.out.join("eval.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let fusion = MODES.iter().position(|m| *m == model.config().fusion).unwrap_or(3);
    let mut lines = Vec::new();
    for (i, d) in report.demos.iter().take(a.plot).enumerate() {
        lines.push(Line {
            label: Some(format!("demo {i} truth")),
            color: i,
            points: d.truth.iter().enumerate().map(|(t, v)| (t as f64, *v)).collect(),
            faint: true,
        });
        lines.push(Line {
            label: Some(format!("demo {i} Φ ({})", report.modes[fusion])),
            color: i,
            points: d.predicted.iter().enumerate().map(|(t, p)| (t as f64, p[fusion])).collect(),
            faint: false,
        });
    }
    let png = a.out.join("progress.png");
    plot_curves(&png, "progress model vs ground truth", "frame", "progress Φ", &lines, (1000, 600))?;
    let rrd = a.out.join("progress.rrd");
    log_rerun(&rrd, &report)?;
    print_eval(&format!("{} demos", demos.len()), &report);
    println!("wrote {}, {}, {}", json.display(), png.display(), rrd.display());
    Ok(())
}

/// Every demo's truth and per-mode Φ as scalars on a `frame` timeline.
fn log_rerun(path: &Path, report: &EvalReport) -> Result<()> {
    let rec = rerun::RecordingStreamBuilder::new("o2o")
        .default_enabled(true)
        .save(path)
        .with_context(|| format!("cannot create the Rerun recording {}", path.display()))?;
    for (i, d) in report.demos.iter().enumerate() {
        for (t, (truth, p)) in d.truth.iter().zip(&d.predicted).enumerate() {
            rec.set_time_sequence("frame", t as i64);
            rec.log(format!("progress/demo{i}/truth"), &rerun::Scalars::single(*truth))?;
            for (m, name) in report.modes.iter().enumerate() {
                rec.log(format!("progress/demo{i}/{name}"), &rerun::Scalars::single(p[m]))?;
            }
        }
    }
    rec.flush_blocking()?;
    Ok(())
}

fn adapt(a: AdaptArgs) -> Result<()> {
    let mut model = ProgressModel::load(&a.from, Device::Cpu)?;
    let views = model.config().views.clone();
    let source = DemoSource { demos: vec![a.demo.clone()], keyframes: a.keyframes.clone() };
    let (all, _) = load(&source, Some(&views))?;
    let one = all
        .get(a.episode)
        .cloned()
        .with_context(|| format!("--episode {}: {} has {} episodes", a.episode, a.demo.display(), all.len()))?;
    let held = match &a.held {
        Some(p) => Some(load(&DemoSource { demos: vec![p.clone()], keyframes: None }, Some(&views))?.0),
        None => None,
    };
    let before = held.as_ref().map(|h| evaluate(&model, h)).transpose()?;
    let r = model.fit(std::slice::from_ref(&one), a.steps, a.lr, a.seed)?;
    model.save(&a.out)?;
    println!("{}: adapted on {} ({} pairs, hop MSE {:.4})", a.out.display(), one.name, r.pairs, r.final_loss);
    if let (Some(h), Some(before)) = (&held, &before) {
        let after = evaluate(&model, h)?;
        print_eval("VOC before", before);
        print_eval("VOC after ", &after);
        let path = a.out.with_extension("adapt.json");
        let summary = serde_json::json!({ "modes": after.modes, "voc_before": before.mean_voc, "voc_after": after.mean_voc, "held_out_demos": h.len() });
        std::fs::write(&path, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NAME=A:B` is a slice, `NAME=A:B-C:D` the relative view obs[A..B] − obs[C..D] of equal
    /// widths; anything else is refused naming the flag.
    #[test]
    fn views_parse_as_slices_or_differences() {
        assert_eq!(parse_view("gripper=6:9").unwrap(), ViewSpec::slice("gripper", [6, 9]));
        let rel = parse_view("to-goal=0:3-3:6").unwrap();
        assert_eq!((rel.name.as_str(), rel.dim, rel.obs_slice, rel.minus), ("to-goal", 3, Some([0, 3]), Some([3, 6])));
        let mut out = Vec::new();
        rel.read_into(&[1.0, 2.0, 3.0, 0.5, 0.5, 0.5], &mut out).unwrap();
        assert_eq!(out, vec![0.5, 1.5, 2.5]);
        for bad in ["to-goal=0:3-3:5", "x=3:3", "=0:3", "x=0-3"] {
            assert!(parse_view(bad).unwrap_err().to_string().contains("--view"), "{bad}");
        }
    }
}
