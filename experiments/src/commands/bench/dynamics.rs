//! `o2o bench dynamics`: Uni-O4's dynamics-ensemble training steps per second against PyTorch
//! eager, measured in the same run.
//!
//! One training step is what [`Dynamics::train`] does per minibatch: the batched forward of all
//! `E` Gaussian members on their own `B` rows, the loss of `o2o_agents::unio4::dynamics` (NLL +
//! log-variance bound term + per-layer weight decay) and one Adam step. The bench
//! 1. writes our initial weights and one batch (`.npy`) and has `scripts/bench_dynamics_torch.py`
//!    (a MOBILE-style `EnsembleLinear` module: weights `[E, in, out]`, `torch.baddbmm`,
//!    `torch.optim.Adam`) compute the loss from them: the two must agree to 1e-5 (relative);
//! 2. times both sides on the same thread count over the same number of steps, on a cycle of
//!    pre-drawn batches (`--rounds` alternations, each side's best kept).
//!
//! With `--json` the last line is `{"ours_steps_per_s", "pytorch_steps_per_s", "ratio",
//! "loss_rel_diff", "members", "hidden", "batch", "threads"}`.

use super::{python_json, TempDir};
use anyhow::{bail, Context};
use o2o_agents::nn::Adam;
use o2o_agents::rng::AgentRng;
use o2o_agents::unio4::dynamics::{Dynamics, DynamicsConfig};
use serde_json::json;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// Arguments of `o2o bench dynamics`.
#[derive(clap::Args)]
pub struct DynamicsBenchArgs {
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Observation dimension (Hopper 11, HalfCheetah/Walker2d 17).
    #[arg(long, default_value_t = 17)]
    pub obs: i64,
    /// Action dimension.
    #[arg(long, default_value_t = 6)]
    pub act: i64,
    /// Rows per member per step (the official 256).
    #[arg(long, default_value_t = 256)]
    pub batch: i64,
    /// Members E (the official 7).
    #[arg(long, default_value_t = 7)]
    pub members: i64,
    /// Hidden widths of each member (the official gym setting 4×200).
    #[arg(long, value_delimiter = ',', default_value = "200,200,200,200")]
    pub hidden: Vec<i64>,
    /// Timed steps per side and round.
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Untimed warm-up steps.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Alternate ours and PyTorch this many times and keep each side's best rate.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Intra-op threads for both sides (default: libtorch's default).
    #[arg(long)]
    pub threads: Option<i32>,
}

/// Pre-drawn batches the timed loops cycle through (both sides the same count).
const BATCHES: i64 = 8;

/// Run the benchmark.
pub fn run(args: DynamicsBenchArgs) -> anyhow::Result<()> {
    if args.members < 1 || args.batch < 1 || args.hidden.is_empty() || args.steps == 0 {
        bail!("o2o bench dynamics: --members, --batch and --steps must be ≥ 1 and --hidden non-empty");
    }
    if let Some(n) = args.threads {
        tch::set_num_threads(n);
    }
    let threads = tch::get_num_threads();
    println!("o2o bench dynamics: {} members of {:?}, batch {} per member, obs {}, act {}, {} steps after {} warm-up, {threads} threads, load average {}", args.members, args.hidden, args.batch, args.obs, args.act, args.steps, args.warmup, super::load_average());

    let cfg = DynamicsConfig {
        net: o2o_agents::nn::MlpConfig { hidden: args.hidden.clone(), ..DynamicsConfig::default().net },
        members: args.members,
        elites: args.members.min(5),
        weight_decay: decay_per_layer(args.hidden.len()),
        ..DynamicsConfig::default()
    };
    let mut rng = AgentRng::new(2024);
    let dynamics = Dynamics::new(cfg.clone(), args.obs, args.act, Device::Cpu, &mut rng)?;
    let (e, b) = (args.members, args.batch);
    let xs: Vec<Tensor> = (0..BATCHES).map(|_| rng.normal(&[e, b, args.obs + args.act], Device::Cpu)).collect();
    let ys: Vec<Tensor> = (0..BATCHES).map(|_| rng.normal(&[e, b, args.obs + 1], Device::Cpu) * 0.1).collect();

    // 1. The cross-check: our loss on batch 0 from our initial weights, then PyTorch's.
    let dir = TempDir::new("dynamics")?;
    let mut names = Vec::new();
    for (name, t) in dynamics.params().named() {
        let file = format!("{}.npy", name.replace('/', "__"));
        t.detach().contiguous().write_npy(dir.path().join(&file)).with_context(|| format!("writing {file}"))?;
        names.push(json!({"name": name, "file": file}));
    }
    xs[0].write_npy(dir.path().join("x.npy"))?;
    ys[0].write_npy(dir.path().join("y.npy"))?;
    let spec = json!({"params": names, "obs": args.obs, "act": args.act, "members": e, "hidden": args.hidden, "weight_decay": cfg.weight_decay, "logvar_loss_coef": cfg.logvar_loss_coef, "lr": cfg.lr, "batch": b, "batches": BATCHES});
    std::fs::write(dir.path().join("manifest.json"), serde_json::to_string(&spec)?)?;
    let ours_loss = tch::no_grad(|| dynamics.loss(&xs[0], &ys[0]).double_value(&[]));

    // 2. Timing, alternating sides.
    let (mut ours, mut theirs, mut their_loss) = (0.0f64, 0.0f64, f64::NAN);
    for round in 0..args.rounds.max(1) {
        ours = ours.max(time_ours(&cfg, &args, &xs, &ys)?);
        let r = python_json("bench_dynamics_torch.py", &["--dir", &dir.path().to_string_lossy(), "--threads", &threads.to_string(), "--steps", &args.steps.to_string(), "--warmup", &args.warmup.to_string()])?;
        theirs = theirs.max(r["steps_per_s"].as_f64().context("bench_dynamics_torch.py printed no steps_per_s")?);
        their_loss = r["loss"].as_f64().context("bench_dynamics_torch.py printed no loss")?;
        eprintln!("round {}: ours {ours:.1} steps/s, PyTorch {theirs:.1} steps/s (best so far), load {}", round + 1, super::load_average());
    }
    let rel = (ours_loss - their_loss).abs() / their_loss.abs().max(1e-12);
    println!("{:<10} {:>12} {:>12} {:>7} {:>12}", "", "ours step/s", "torch step/s", "ratio", "loss rel Δ");
    println!("{:<10} {:>12.1} {:>12.1} {:>6.2}x {:>12.2e}", "dynamics", ours, theirs, ours / theirs, rel);
    if rel > 1e-5 {
        eprintln!("warning: the losses differ from PyTorch's by {rel:.2e} relative (> 1e-5): ours {ours_loss}, PyTorch {their_loss}");
    }
    if args.json {
        println!("{}", json!({"ours_steps_per_s": ours, "pytorch_steps_per_s": theirs, "ratio": ours / theirs, "loss_rel_diff": rel, "members": e, "hidden": args.hidden, "batch": b, "threads": threads}));
    }
    Ok(())
}

/// The official per-layer weight decay (2.5e-5, 5e-5, 7.5e-5, 7.5e-5 on the hidden layers,
/// 1e-4 on the head), stretched or cut to `hidden` layers.
fn decay_per_layer(hidden: usize) -> Vec<f64> {
    let official = [2.5e-5, 5e-5, 7.5e-5, 7.5e-5];
    let mut v: Vec<f64> = (0..hidden).map(|i| official[i.min(official.len() - 1)]).collect();
    v.push(1e-4);
    v
}

/// Our steps per second: a fresh ensemble (same seed) and Adam, `warmup` then `steps` steps.
fn time_ours(cfg: &DynamicsConfig, args: &DynamicsBenchArgs, xs: &[Tensor], ys: &[Tensor]) -> anyhow::Result<f64> {
    let dynamics = Dynamics::new(cfg.clone(), args.obs, args.act, Device::Cpu, &mut AgentRng::new(2024))?;
    let mut opt = Adam::new(dynamics.params(), cfg.lr);
    let mut step = |i: usize| {
        let k = i % xs.len();
        let loss = dynamics.loss(&xs[k], &ys[k]);
        opt.minimize(dynamics.params(), &loss);
        // `train` reads each loss back (its epoch mean); so does the reference.
        loss.to_kind(Kind::Double).double_value(&[])
    };
    for i in 0..args.warmup {
        step(i);
    }
    let t = Instant::now();
    let mut sum = 0.0;
    for i in 0..args.steps {
        sum += step(i);
    }
    if !sum.is_finite() {
        bail!("o2o bench dynamics: our loss diverged ({sum})");
    }
    Ok(args.steps as f64 / t.elapsed().as_secs_f64())
}
