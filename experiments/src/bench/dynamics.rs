//! `o2o bench dynamics`: Uni-O4's dynamics-ensemble training steps per second against PyTorch
//! eager, measured in the same run ([`DynamicsBench`] from [`DynamicsOptions`];
//! [`DynamicsReport`] is what it measured).
//!
//! One training step is what [`Dynamics::train`] does per minibatch ([`Dynamics::train_step`]:
//! the batched forward of all `E` Gaussian members on their own `B` rows with each hidden
//! layer's bias and SiLU fused, the loss of `o2o_agents::unio4::dynamics` (NLL + log-variance
//! bound term + per-layer weight decay), its gradients and one Adam step). The bench
//! 1. writes our initial weights and one batch (`.npy`) and has `scripts/bench_dynamics_torch.py`
//!    (a MOBILE-style `EnsembleLinear` module: weights `[E, in, out]`, `torch.baddbmm`,
//!    `torch.optim.Adam`) compute the loss from them: the two must agree to 1e-5 (relative);
//! 2. times both sides on the same thread count over the same number of steps, on a cycle of
//!    pre-drawn batches (`--rounds` alternations, each side's best kept).
//!
//! With `--json` the last line is `{"ours_steps_per_s", "pytorch_steps_per_s", "ratio",
//! "loss_rel_diff", "members", "hidden", "batch", "threads", "mflop_per_step", "ours_gflops",
//! "pytorch_gflops", "matmul_peak_gflops", "ours_share_of_peak", "pytorch_share_of_peak"}`: the
//! matmul work of one step (forward, weight and input gradients; no input gradient below the
//! first layer) and each side's rate in GFLOP/s against a 1024³ matmul timed in the same run, so
//! a reader sees how much room the matmuls leave for any ratio between the two sides.

use super::{python_json, TempDir};
use anyhow::{bail, Context};
use o2o_agents::nn::Adam;
use o2o_agents::rng::AgentRng;
use o2o_agents::unio4::dynamics::{Dynamics, DynamicsConfig};
use serde_json::json;
use std::time::Instant;
use tch::{Device, Tensor};

/// What `o2o bench dynamics` measures.
#[derive(Debug, Clone)]
pub struct DynamicsOptions {
    /// Observation dimension (Hopper 11, HalfCheetah/Walker2d 17).
    pub obs: i64,
    /// Action dimension.
    pub act: i64,
    /// Rows per member per step (the official 256).
    pub batch: i64,
    /// Members E (the official 7).
    pub members: i64,
    /// Hidden widths of each member (the official gym setting 4×200).
    pub hidden: Vec<i64>,
    /// Timed steps per side and round.
    pub steps: usize,
    /// Untimed warm-up steps.
    pub warmup: usize,
    /// Alternate ours and PyTorch this many times and keep each side's best rate.
    pub rounds: usize,
    /// Intra-op threads for both sides (default: libtorch's default).
    pub threads: Option<i32>,
}

/// The benchmark, its options checked and libtorch's threads set.
pub struct DynamicsBench {
    args: DynamicsOptions,
    threads: i32,
}

/// What `o2o bench dynamics` measured.
#[derive(Debug, Clone)]
pub struct DynamicsReport {
    /// Our training steps per second (best round).
    pub ours_steps_per_s: f64,
    /// PyTorch's training steps per second (best round).
    pub pytorch_steps_per_s: f64,
    /// Our loss on the first batch from the initial weights.
    pub ours_loss: f64,
    /// PyTorch's loss on the same batch and weights.
    pub pytorch_loss: f64,
    /// GFLOP/s of a 1024³ float32 matmul, best of the rounds.
    pub matmul_peak_gflops: f64,
    /// Matmul FLOPs of one training step ([`step_flops`]).
    pub flops_per_step: f64,
    /// libtorch's intra-op threads.
    pub threads: i32,
    /// The options measured.
    pub options: DynamicsOptions,
}

/// Pre-drawn batches the timed loops cycle through (both sides the same count).
const BATCHES: i64 = 8;

impl DynamicsBench {
    /// Check the options and set libtorch's intra-op threads.
    pub fn new(args: DynamicsOptions) -> anyhow::Result<Self> {
        if args.members < 1 || args.batch < 1 || args.hidden.is_empty() || args.steps == 0 {
            bail!("o2o bench dynamics: --members, --batch and --steps must be ≥ 1 and --hidden non-empty");
        }
        if let Some(n) = args.threads {
            tch::set_num_threads(n);
        }
        let threads = tch::get_num_threads();
        Ok(Self { args, threads })
    }

    /// The line `o2o bench dynamics` prints before it measures (with the load average now).
    pub fn header(&self) -> String {
        let (args, threads) = (&self.args, self.threads);
        format!("o2o bench dynamics: {} members of {:?}, batch {} per member, obs {}, act {}, {} steps after {} warm-up, {threads} threads, load average {}", args.members, args.hidden, args.batch, args.obs, args.act, args.steps, args.warmup, super::load_average())
    }

    /// Cross-check the loss with PyTorch's, then time both sides, alternating them.
    pub fn run(&self) -> anyhow::Result<DynamicsReport> {
        let (args, threads) = (&self.args, self.threads);
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
            ours = ours.max(time_ours(&cfg, args, &xs, &ys)?);
            let r = python_json(
                "bench_dynamics_torch.py",
                &[
                    "--dir",
                    &dir.path().to_string_lossy(),
                    "--threads",
                    &threads.to_string(),
                    "--steps",
                    &args.steps.to_string(),
                    "--warmup",
                    &args.warmup.to_string(),
                ],
            )?;
            theirs = theirs.max(r["steps_per_s"].as_f64().context("bench_dynamics_torch.py printed no steps_per_s")?);
            their_loss = r["loss"].as_f64().context("bench_dynamics_torch.py printed no loss")?;
            eprintln!(
                "round {}: ours {ours:.1} steps/s, PyTorch {theirs:.1} steps/s (best so far), load {}",
                round + 1,
                super::load_average()
            );
        }
        let peak = (0..args.rounds.max(1)).map(|_| super::update::matmul_peak(Device::Cpu).0).fold(0.0, f64::max);
        Ok(DynamicsReport {
            ours_steps_per_s: ours,
            pytorch_steps_per_s: theirs,
            ours_loss,
            pytorch_loss: their_loss,
            matmul_peak_gflops: peak,
            flops_per_step: step_flops(e, b, args.obs, args.act, &args.hidden),
            threads,
            options: args.clone(),
        })
    }
}

impl DynamicsReport {
    /// |ours − PyTorch's| / |PyTorch's| of the cross-checked loss.
    pub fn loss_rel_diff(&self) -> f64 {
        (self.ours_loss - self.pytorch_loss).abs() / self.pytorch_loss.abs().max(1e-12)
    }

    /// Our and PyTorch's GFLOP/s.
    fn gflops(&self) -> (f64, f64) {
        let flops = self.flops_per_step;
        (flops * self.ours_steps_per_s / 1e9, flops * self.pytorch_steps_per_s / 1e9)
    }

    /// The table and the matmul line `o2o bench dynamics` prints.
    pub fn table(&self) -> String {
        let (ours, theirs, rel, peak, flops) = (
            self.ours_steps_per_s,
            self.pytorch_steps_per_s,
            self.loss_rel_diff(),
            self.matmul_peak_gflops,
            self.flops_per_step,
        );
        let (ours_gf, their_gf) = self.gflops();
        let head = format!(
            "{:<10} {:>12} {:>12} {:>7} {:>12} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "",
            "ours step/s",
            "torch step/s",
            "ratio",
            "loss rel Δ",
            "MFLOP/step",
            "ours GF/s",
            "torch GF/s",
            "ours %pk",
            "torch %pk"
        );
        let row = format!(
            "{:<10} {:>12.1} {:>12.1} {:>6.2}x {:>12.2e} {:>10.1} {:>10.1} {:>10.1} {:>8.0}% {:>8.0}%",
            "dynamics",
            ours,
            theirs,
            ours / theirs,
            rel,
            flops / 1e6,
            ours_gf,
            their_gf,
            100.0 * ours_gf / peak,
            100.0 * their_gf / peak
        );
        let matmul =
            format!("matmul 1024³ f32 peak: {peak:.1} GFLOP/s (best of {} in this run)", self.options.rounds.max(1));
        [head, row, matmul].join("\n")
    }

    /// The warning `o2o bench dynamics` prints when the losses differ by more than 1e-5.
    pub fn warning(&self) -> Option<String> {
        let (rel, ours_loss, their_loss) = (self.loss_rel_diff(), self.ours_loss, self.pytorch_loss);
        (rel > 1e-5).then(|| format!("warning: the losses differ from PyTorch's by {rel:.2e} relative (> 1e-5): ours {ours_loss}, PyTorch {their_loss}"))
    }

    /// The JSON object `o2o bench dynamics --json` prints last.
    pub fn json(&self) -> serde_json::Value {
        let (ours, theirs, peak) = (self.ours_steps_per_s, self.pytorch_steps_per_s, self.matmul_peak_gflops);
        let (ours_gf, their_gf) = self.gflops();
        let args = &self.options;
        json!({"ours_steps_per_s": ours, "pytorch_steps_per_s": theirs, "ratio": ours / theirs, "loss_rel_diff": self.loss_rel_diff(), "members": args.members, "hidden": args.hidden, "batch": args.batch, "threads": self.threads, "mflop_per_step": self.flops_per_step / 1e6, "ours_gflops": ours_gf, "pytorch_gflops": their_gf, "matmul_peak_gflops": peak, "ours_share_of_peak": ours_gf / peak, "pytorch_share_of_peak": their_gf / peak})
    }
}

/// Matmul FLOPs of one training step: `2·E·B·d_i·d_{i+1}` per layer for the forward pass and
/// again for the weight gradient, and for the input gradient of every layer but the first
/// (nothing needs `∂x` of the data).
pub fn step_flops(members: i64, batch: i64, obs: i64, act: i64, hidden: &[i64]) -> f64 {
    let dims: Vec<i64> =
        std::iter::once(obs + act).chain(hidden.iter().copied()).chain(std::iter::once(2 * (obs + 1))).collect();
    let products: Vec<f64> = dims.windows(2).map(|w| (w[0] * w[1]) as f64).collect();
    let all: f64 = products.iter().sum();
    2.0 * (members * batch) as f64 * (3.0 * all - products[0])
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
fn time_ours(cfg: &DynamicsConfig, args: &DynamicsOptions, xs: &[Tensor], ys: &[Tensor]) -> anyhow::Result<f64> {
    let dynamics = Dynamics::new(cfg.clone(), args.obs, args.act, Device::Cpu, &mut AgentRng::new(2024))?;
    let mut opt = Adam::new(dynamics.params(), cfg.lr);
    // `Dynamics::train`'s own step (the fused CPU pass), which reads each loss back (its epoch
    // mean); so does the reference.
    let mut step = |i: usize| dynamics.train_step(&mut opt, &xs[i % xs.len()], &ys[i % ys.len()]);
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

#[cfg(test)]
mod tests {
    /// One hidden layer of 4 on obs 2, act 1 (dims 3 → 4 → 6), 2 members of 5 rows: forward
    /// 2·10·(12 + 24), weight gradients the same, input gradient of the head only 2·10·24.
    #[test]
    fn step_flops_counts_forward_weight_and_input_gradients() {
        assert_eq!(super::step_flops(2, 5, 2, 1, &[4]), 2.0 * 10.0 * (36.0 + 36.0 + 24.0));
    }
}
