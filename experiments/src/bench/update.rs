//! `o2o bench update`: agent updates per second vs a PyTorch eager reference, same run
//! ([`UpdateBench`] from [`UpdateOptions`]; [`SeraRow`] and [`UpdateReport`] are what it measured).
//!
//! For SAC (2 critics), SAC with the WSRL/RLPD critic (10 LayerNorm members, target over 2),
//! IQL, CQL, Cal-QL (2 critics, N = 10 sampled actions per proposal) at batch 256, and RLPD
//! (UTD 20: one update on 20 × 256 rows) on a locomotion-sized problem (obs 17, action 6), it
//! 1. exports our initial weights, one batch and the noise our update draws (`.npy` files) and
//!    has `scripts/bench_update_torch.py` (CORL-style PyTorch: one `nn.Module` per critic,
//!    `torch.optim.Adam`) run the same update from them: the losses must agree within 1e-5;
//! 2. times our update and PyTorch's on the same thread count;
//! 3. counts each update's floating-point operations (matmuls; a training pass counted as 3×
//!    its forward) and prints the achieved GFLOP/s next to a 1024³ float32 matmul measured
//!    here on the same threads.
//!
//! With `--json` the last line is `{"results": [{"algo", "ours_updates_per_s",
//! "pytorch_updates_per_s", "max_abs_loss_diff", "gflops", "ours_updates_per_cpu_s",
//! "pytorch_updates_per_cpu_s", "share_of_peak", "share_of_peak_cpu"}, ...], "matmul_peak_gflops": x,
//! "matmul_peak_gflops_per_cpu_s": y, "load_average": "1m 5m 15m", "ensemble_cost_ratio": r}`
//! (`share_of_peak` = `gflops / matmul_peak_gflops`, the share of libtorch's matmul peak; `…_cpu`
//! the same per CPU second of the timing thread, which other load disturbs far less at one
//! thread), and `"fma_peak_gflops"` with each row's `"share_of_fma_peak"`: the cores' own
//! multiply-add ceiling on the same threads (`o2o_agents::nn::fma_peak_gflops`). On AMD CPUs
//! with AVX-512 the matmul peak is MKL's AVX2 kernel, about half that ceiling, and our updates'
//! AVX-512 products ([`o2o_agents::nn`]'s `gemm`) run above it; the FMA share is then the
//! share of the machine. The
//! per-CPU-second rates count only the timing thread's CPU time, so other load on a shared
//! machine disturbs them far less than the wall-clock rates. `ensemble_cost_ratio` is the
//! 10-critic / 2-critic cost of our update timed in interleaved blocks (the median over 25 pairs
//! of blocks; `null` when `--only` leaves out either).

use anyhow::{bail, Context};
use o2o_agents::calql::{self, CalQlConfig};
use o2o_agents::cql::{Cql, CqlConfig, CqlTerm};
use o2o_agents::iql::{Iql, IqlConfig};
use o2o_agents::rlpd::{self, RlpdConfig};
use o2o_agents::rng::AgentRng;
use o2o_agents::sac::{Sac, SacConfig};
use o2o_agents::sera::{Sera, SeraConfig};
use o2o_agents::{Agent, Metrics, Stateful};
use o2o_datasets::TransitionBatch;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// What `o2o bench update` measures.
#[derive(Debug, Clone)]
pub struct UpdateOptions {
    /// Batch size.
    pub batch: i64,
    /// Observation dimension.
    pub obs: i64,
    /// Action dimension.
    pub act: i64,
    /// Timed updates per implementation and algorithm.
    pub updates: usize,
    /// Untimed warm-up updates.
    pub warmup: usize,
    /// The device both sides update on.
    pub device: Device,
    /// Alternate ours and PyTorch this many times and keep each side's best rate (the build
    /// machines are shared, so a single measurement can catch someone else's compile).
    pub rounds: usize,
    /// Intra-op threads for both sides (default: libtorch's default).
    pub threads: Option<i32>,
    /// The larger batch of the SERA rows (they run at `batch` and at this).
    pub sera_large_batch: i64,
    /// Only these algorithms (e.g. `cql`, `rlpd`, or `sera-sac`, `sera-calql` for the SERA
    /// rows; empty: all).
    pub only: Vec<String>,
}

enum Ours {
    Sac(Sac),
    Iql(Iql),
    Cql(Cql),
}

impl Ours {
    fn agent(&mut self) -> &mut dyn Agent {
        match self {
            Ours::Sac(a) => a,
            Ours::Iql(a) => a,
            Ours::Cql(a) => a,
        }
    }
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        match self {
            Ours::Sac(a) => a.named_tensors(),
            Ours::Iql(a) => a.named_tensors(),
            Ours::Cql(a) => a.named_tensors(),
        }
    }
    fn rng(&mut self) -> &mut AgentRng {
        match self {
            Ours::Sac(a) => a.rng_mut(),
            Ours::Iql(a) => a.rng_mut(),
            Ours::Cql(a) => a.rng_mut(),
        }
    }
}

struct Variant {
    name: &'static str,
    build: Box<dyn Fn(Device) -> anyhow::Result<Ours>>,
    spec: Value,
    losses: &'static [&'static str],
    flops: f64,
    /// Batch rows per update, as a multiple of `--batch` (RLPD's UTD 20 takes 20 minibatches).
    rows: i64,
}

/// `2 · B · Σ d_i d_{i+1}`: one forward pass of an MLP with widths `dims`.
fn mlp_flops(b: i64, dims: &[i64]) -> f64 {
    dims.windows(2).map(|w| 2.0 * (b * w[0] * w[1]) as f64).sum()
}

fn variants(a: &UpdateOptions) -> Vec<Variant> {
    let (b, o, act) = (a.batch, a.obs, a.act);
    let h = [256i64, 256];
    let actor_f = mlp_flops(b, &[o, h[0], h[1], 2 * act]);
    let critic_f = mlp_flops(b, &[o + act, h[0], h[1], 1]);
    // SAC per update: critic step = actor fwd at s' + M target fwd + E critic train (3×);
    // actor step = actor train (3×) + the critic's min over E members differentiated in its
    // input: E fwd and one member's input-gradient backward per row (E + 1; the CPU's taped
    // pass, `EnsembleMlp::backward_input_one_member`; autograd on other devices does up to one
    // member's pass more).
    let sac_flops = |e: f64, m: f64| 4.0 * actor_f + m * critic_f + 3.0 * e * critic_f + (e + 1.0) * critic_f;
    // IQL: 2 target fwd + V train + 2 V fwd + actor train + 2 critic train.
    let iql_flops =
        8.0 * critic_f + 5.0 * mlp_flops(b, &[o, h[0], h[1], 1]) + 3.0 * mlp_flops(b, &[o, h[0], h[1], act]);
    let sac_spec = |e: i64, ln: bool| json!({"algo": "sac", "obs_dim": o, "act_dim": act, "hidden": h, "num_critics": e, "target_subset": 2, "layer_norm": ln});
    // CQL adds, per critic step, 2 actor fwd on B rows (N draws per state share one pass) and
    // E critic train (3×) on 3·B·N (state, action) pairs, whose first layer takes the state
    // part once per state (`EnsembleMlp::forward_paired`).
    let n = CqlTerm::default().cql_n_actions as f64;
    let paired_f = 3.0 * n * mlp_flops(b, &[act, h[0], h[1], 1]) + mlp_flops(b, &[o, h[0]]);
    let cql_flops = sac_flops(2.0, 2.0) + 2.0 * actor_f + 3.0 * 2.0 * paired_f;
    // RLPD (UTD 20, E 10, M 2) per update of 20·B rows: 20 × (actor fwd + 2 target fwd + 10
    // critic train) on B rows, then actor train + 10 critic fwd/input-grad on the last B.
    let utd = RlpdConfig::default().0.critic_steps;
    let rlpd_flops = utd as f64 * (actor_f + 2.0 * critic_f + 30.0 * critic_f) + 3.0 * actor_f + 20.0 * critic_f;
    let cql_losses: &[&str] = &["critic_loss", "actor_loss", "alpha_loss", "cql_gap"];
    vec![
        Variant {
            name: "sac",
            build: Box::new(move |d| Ok(Ours::Sac(Sac::new(SacConfig::default(), o, act, d, 0)?))),
            spec: sac_spec(2, false),
            losses: &["critic_loss", "actor_loss", "alpha_loss"],
            flops: sac_flops(2.0, 2.0),
            rows: 1,
        },
        Variant {
            name: "sac_ens10_ln",
            build: Box::new(move |d| Ok(Ours::Sac(Sac::new(SacConfig::ensemble10(), o, act, d, 0)?))),
            spec: sac_spec(10, true),
            losses: &["critic_loss", "actor_loss", "alpha_loss"],
            flops: sac_flops(10.0, 2.0),
            rows: 1,
        },
        Variant {
            name: "iql",
            build: Box::new(move |d| Ok(Ours::Iql(Iql::new(IqlConfig::default(), o, act, d, 0)?))),
            spec: json!({"algo": "iql", "obs_dim": o, "act_dim": act, "hidden": h}),
            losses: &["value_loss", "actor_loss", "critic_loss"],
            flops: iql_flops,
            rows: 1,
        },
        Variant {
            name: "cql",
            build: Box::new(move |d| Ok(Ours::Cql(Cql::new(CqlConfig::default(), o, act, d, 0)?))),
            spec: json!({"algo": "cql", "obs_dim": o, "act_dim": act, "hidden": h}),
            losses: cql_losses,
            flops: cql_flops,
            rows: 1,
        },
        Variant {
            name: "calql",
            build: Box::new(move |d| Ok(Ours::Cql(calql::new(CalQlConfig::default(), o, act, d, 0)?))),
            spec: json!({"algo": "calql", "obs_dim": o, "act_dim": act, "hidden": h}),
            losses: cql_losses,
            flops: cql_flops,
            rows: 1,
        },
        Variant {
            name: "rlpd",
            build: Box::new(move |d| Ok(Ours::Sac(rlpd::new(RlpdConfig::default(), o, act, d, 0)?))),
            spec: json!({"algo": "rlpd", "obs_dim": o, "act_dim": act, "hidden": h, "critic_steps": utd}),
            losses: &["critic_loss", "actor_loss", "alpha_loss"],
            flops: rlpd_flops,
            rows: utd,
        },
    ]
}

fn random_batch(rng: &mut AgentRng, b: i64, o: i64, a: i64) -> TransitionBatch {
    TransitionBatch {
        obs: rng.normal(&[b, o], Device::Cpu),
        action: rng.normal(&[b, a], Device::Cpu).tanh(),
        reward: rng.normal(&[b], Device::Cpu),
        next_obs: rng.normal(&[b, o], Device::Cpu),
        terminal: rng.uniform_tensor(&[b], Device::Cpu).ge(0.95).to_kind(Kind::Float),
        // Returns-to-go near a fresh critic's Q-values, so Cal-QL's floor binds on about half.
        mc_return: Some(rng.normal(&[b], Device::Cpu)),
        is_offline: None,
    }
}

fn npy(dir: &Path, file: String, t: &Tensor) -> anyhow::Result<String> {
    t.to_device(Device::Cpu)
        .contiguous()
        .write_npy(dir.join(&file))
        .with_context(|| format!("writing {}", dir.join(&file).display()))?;
    Ok(file)
}

/// Export weights and batch, run one recorded update; returns (manifest entry, our losses).
fn cross_check_inputs(v: &Variant, dir: &Path, batch: &TransitionBatch) -> anyhow::Result<(Value, Metrics)> {
    let mut ours = (v.build)(Device::Cpu)?;
    let mut weights = serde_json::Map::new();
    for (name, t) in ours.named_tensors() {
        if !name.contains("_opt/") {
            let file = npy(dir, format!("{}__{}.npy", v.name, name.replace('/', "__")), &t.detach())?;
            weights.insert(name, Value::String(file));
        }
    }
    let mut files = serde_json::Map::new();
    let mc = batch.mc_return.as_ref().expect("bench batches carry mc_return");
    for (k, t) in [
        ("obs", &batch.obs),
        ("action", &batch.action),
        ("reward", &batch.reward),
        ("next_obs", &batch.next_obs),
        ("terminal", &batch.terminal),
        ("mc_return", mc),
    ] {
        files.insert(k.into(), Value::String(npy(dir, format!("{}__batch_{k}.npy", v.name), t)?));
    }
    ours.rng().start_recording();
    let metrics = ours.agent().update(batch);
    let noise: Vec<Value> = ours
        .rng()
        .take_recorded()
        .iter()
        .enumerate()
        .map(|(i, t)| npy(dir, format!("{}__noise{i}.npy", v.name), t).map(Value::String))
        .collect::<anyhow::Result<_>>()?;
    let mut spec = v.spec.clone();
    spec["name"] = json!(v.name);
    spec["weights"] = Value::Object(weights);
    spec["batch"] = Value::Object(files);
    spec["noise"] = Value::Array(noise);
    Ok((spec, metrics))
}

/// CPU seconds this thread has run (`/proc/thread-self/schedstat`, nanoseconds), if readable.
/// On a shared machine, updates per CPU second are far steadier than per wall second.
fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

/// Pairs of blocks in [`interleaved_cost_ratio`].
const COST_PAIRS: usize = 25;

/// The 10-critic / 2-critic cost ratio of our updates, measured so that the machine's drift
/// cancels: both agents built and warmed up, then a block of each (about 60 ms of updates) in
/// turn, `pairs` times; each pair gives the ratio of its two blocks' time per update, and the
/// median over pairs is returned. On a shared machine the separate best-of-rounds rates come
/// from different minutes and move by ±10%; two blocks side by side see the same machine, and
/// the median drops the pairs that a burst of other load split.
fn interleaved_cost_ratio(
    two: (&Variant, &TransitionBatch),
    ten: (&Variant, &TransitionBatch),
    device: Device,
    warmup: usize,
    pairs: usize,
) -> anyhow::Result<f64> {
    let (mut a, b2) = warmed_up(two.0, two.1, device, warmup.max(1))?;
    let (mut c, b10) = warmed_up(ten.0, ten.1, device, warmup.max(1))?;
    Ok(interleaved_ratio(&mut || drop(a.agent().update(&b2)), &mut || drop(c.agent().update(&b10)), pairs))
}

/// The median over `pairs` of (time per call of `second`) / (time per call of `first`), each
/// pair a block of each in turn (about 60 ms, its length from three timed calls).
fn interleaved_ratio<'a>(first: &'a mut dyn FnMut(), second: &'a mut dyn FnMut(), pairs: usize) -> f64 {
    let mut blocks: Vec<(&'a mut dyn FnMut(), usize)> = Vec::new();
    for f in [first, second] {
        let t0 = Instant::now();
        for _ in 0..3 {
            f();
        }
        let n = ((0.06 * 3.0 / t0.elapsed().as_secs_f64().max(1e-6)) as usize).clamp(2, 1000);
        blocks.push((f, n));
    }
    let mut ratios: Vec<f64> = (0..pairs.max(1))
        .map(|_| {
            let per_call: Vec<f64> = blocks
                .iter_mut()
                .map(|(f, n)| {
                    let t0 = Instant::now();
                    for _ in 0..*n {
                        f();
                    }
                    t0.elapsed().as_secs_f64() / *n as f64
                })
                .collect();
            per_call[1] / per_call[0]
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

/// One SERA row: the cost of an update with SERA's bonus (the runner's `Sera::update`: the
/// bonus from the critic step's own Q(s, a), k = 10) over the same update without it,
/// for two agents of `v` built alike, interleaved as in [`interleaved_ratio`]; and the time
/// of its parts: the update, a separate Q̂ pass (what agents without the shared critic step pay:
/// IQL, FamO2O) and the k-NN estimator (ms, best of 20 each).
struct SeraCost {
    ratio: f64,
    update_ms: f64,
    q_ms: f64,
    knn_ms: f64,
}

fn sera_overhead(v: &Variant, batch: &TransitionBatch, device: Device, warmup: usize) -> anyhow::Result<SeraCost> {
    let sera = Sera::new(SeraConfig { enabled: true, ..SeraConfig::default() }, None)?;
    let (mut plain, b) = warmed_up(v, batch, device, warmup.max(1))?;
    let (mut with, _) = warmed_up(v, batch, device, warmup.max(1))?;
    let mut failed = None;
    let ratio = interleaved_ratio(
        &mut || drop(plain.agent().update(&b)),
        &mut || {
            if let Err(e) = sera.update(with.agent(), &b, None) {
                failed = Some(e);
            }
        },
        COST_PAIRS,
    );
    if let Some(e) = failed {
        return Err(e.into());
    }
    let best_ms = |f: &mut dyn FnMut()| {
        (0..20)
            .map(|_| {
                let t0 = Instant::now();
                f();
                t0.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    let agent = with.agent();
    let q = agent.critic_values(&b.obs, &b.action).context("the agent has a critic")?.amin(0, false);
    Ok(SeraCost {
        ratio,
        update_ms: best_ms(&mut || drop(plain.agent().update(&b))),
        q_ms: best_ms(&mut || drop(agent.critic_values(&b.obs, &b.action))),
        knn_ms: best_ms(&mut || {
            drop(o2o_agents::sera::intrinsic_reward(&b.obs, &q, &b.obs, &q, 10, o2o_agents::sera::LogForm::Ksg))
        }),
    })
}

/// The SERA rows `bench update` can print, with the variant each one adds the bonus to.
const SERA_ROWS: [(&str, &str); 2] = [("sera-sac", "sac"), ("sera-calql", "calql")];

/// A fresh agent of variant `v` and the batch on `device`, after `warmup` untimed updates.
fn warmed_up(
    v: &Variant,
    batch: &TransitionBatch,
    device: Device,
    warmup: usize,
) -> anyhow::Result<(Ours, TransitionBatch)> {
    let mut ours = (v.build)(device)?;
    let b = batch.to_device(device);
    for _ in 0..warmup {
        ours.agent().update(&b);
    }
    Ok((ours, b))
}

/// Updates per wall second and per CPU second of this thread (0 where unreadable).
fn time_ours(
    v: &Variant,
    batch: &TransitionBatch,
    device: Device,
    warmup: usize,
    updates: usize,
) -> anyhow::Result<(f64, f64)> {
    let (mut ours, b) = warmed_up(v, batch, device, warmup)?;
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    for _ in 0..updates {
        // Each update reads its metrics back, which also synchronizes a CUDA device.
        ours.agent().update(&b);
    }
    let wall = updates as f64 / t0.elapsed().as_secs_f64();
    let cpu = match (c0, thread_cpu_s()) {
        (Some(a), Some(b)) if b > a => updates as f64 / (b - a),
        _ => 0.0,
    };
    Ok((wall, cpu))
}

/// One SERA row of `o2o bench update`: the cost of the bonus on one variant at one batch size.
#[derive(Debug, Clone)]
pub struct SeraRow {
    /// `sera-sac` or `sera-calql`.
    pub algo: &'static str,
    /// Rows per update.
    pub batch: i64,
    /// Time of an update with the bonus over the same update without it (median of
    /// interleaved pairs of blocks).
    pub cost_ratio: f64,
    /// An update without the bonus, ms (best of 20).
    pub update_ms: f64,
    /// A separate Q̂ pass, ms (best of 20).
    pub q_ms: f64,
    /// The k-NN estimator, ms (best of 20).
    pub knn_ms: f64,
}

/// Measure the SERA rows at `batch` and at `sera_large_batch` rows.
fn sera_rows(all: &[Variant], rows: &[(&'static str, &str)], args: &UpdateOptions) -> anyhow::Result<Vec<SeraRow>> {
    let mut out = Vec::new();
    if rows.is_empty() {
        return Ok(out);
    }
    let mut batches = vec![args.batch, args.sera_large_batch];
    batches.dedup();
    for (row, base) in rows {
        let v = all.iter().find(|v| v.name == *base).expect("SERA rows name variants");
        for &b in &batches {
            let batch = random_batch(&mut AgentRng::new(2024), b, args.obs, args.act);
            let r = sera_overhead(v, &batch, args.device, args.warmup)?;
            out.push(SeraRow {
                algo: *row,
                batch: b,
                cost_ratio: r.ratio,
                update_ms: r.update_ms,
                q_ms: r.q_ms,
                knn_ms: r.knn_ms,
            });
        }
    }
    Ok(out)
}

/// The SERA table `o2o bench update` prints (nothing without SERA rows).
pub fn sera_table(rows: &[SeraRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut lines = vec![
        format!("SERA's bonus (k = 10, neighbours in the batch): update with it / the same update without it, median of {COST_PAIRS} interleaved pairs of blocks"),
        format!("{:<14} {:>7} {:>12} {:>10} {:>8} {:>8}", "row", "batch", "cost ratio", "update ms", "Q̂ ms", "k-NN ms"),
    ];
    for r in rows {
        let (row, b) = (r.algo, r.batch);
        lines.push(format!(
            "{row:<14} {b:>7} {:>11.3}x {:>10.2} {:>8.2} {:>8.2}",
            r.cost_ratio, r.update_ms, r.q_ms, r.knn_ms
        ));
    }
    lines.join("\n")
}

fn sera_json(rows: &[SeraRow]) -> Vec<Value> {
    rows.iter()
        .map(|r| json!({"algo": r.algo, "batch": r.batch, "cost_ratio": r.cost_ratio, "update_ms": r.update_ms, "q_ms": r.q_ms, "knn_ms": r.knn_ms}))
        .collect()
}

/// GFLOP/s of a 1024³ float32 matmul on the current threads, per wall second and per CPU second
/// of this thread (0 where unreadable; at one thread the matmul runs on this thread, so the
/// second is the peak that [`time_ours`]'s per-CPU-second rates compare with).
pub(crate) fn matmul_peak(device: Device) -> (f64, f64) {
    let mut rng = AgentRng::new(0);
    let (a, b) = (rng.normal(&[1024, 1024], device), rng.normal(&[1024, 1024], device));
    for _ in 0..3 {
        let _ = a.matmul(&b).sum(Kind::Float).double_value(&[]);
    }
    let reps = 20;
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    let mut acc = 0.0;
    for _ in 0..reps {
        acc += a.matmul(&b).get(0).get(0).double_value(&[]);
    }
    let dt = t0.elapsed().as_secs_f64();
    std::hint::black_box(acc);
    let flops = 2.0 * 1024f64.powi(3) * reps as f64;
    let cpu = match (c0, thread_cpu_s()) {
        (Some(a), Some(b)) if b > a => flops / (b - a) / 1e9,
        _ => 0.0,
    };
    (flops / dt / 1e9, cpu)
}

/// The benchmark, libtorch's threads set: [`header`](Self::header), then [`sera`](Self::sera)
/// and [`measure`](Self::measure), which check `only` first.
pub struct UpdateBench {
    args: UpdateOptions,
    threads: i32,
    /// The load average when the bench was set up (in the header and the JSON).
    load: String,
}

/// One algorithm's row of `o2o bench update`: rates of both sides and the losses' agreement.
#[derive(Debug, Clone)]
pub struct UpdateRow {
    /// The variant: `sac`, `sac_ens10_ln`, `iql`, `cql`, `calql` or `rlpd`.
    pub algo: &'static str,
    /// Floating-point operations of one update (matmuls; a training pass counted as 3× its
    /// forward).
    pub flops: f64,
    /// Our updates per wall second (best round).
    pub ours_updates_per_s: f64,
    /// PyTorch's updates per wall second (best round).
    pub pytorch_updates_per_s: f64,
    /// Our updates per CPU second of the timing thread (0 where unreadable).
    pub ours_updates_per_cpu_s: f64,
    /// PyTorch's updates per CPU second of its timing thread (0 where unreadable).
    pub pytorch_updates_per_cpu_s: f64,
    /// The largest |ours − PyTorch's| over the update's losses.
    pub max_abs_loss_diff: f64,
}

/// What `o2o bench update` measured.
#[derive(Debug, Clone)]
pub struct UpdateReport {
    /// The SERA rows (measured first, by [`UpdateBench::sera`]).
    pub sera: Vec<SeraRow>,
    /// One row per algorithm measured (empty when `only` names SERA rows alone).
    pub results: Vec<UpdateRow>,
    /// GFLOP/s of a 1024³ float32 matmul, per wall second, best of the rounds.
    pub matmul_peak_gflops: f64,
    /// The same per CPU second of this thread (0 where unreadable).
    pub matmul_peak_gflops_per_cpu_s: f64,
    /// The cores' multiply-add ceiling on the same threads (0 off the CPU).
    pub fma_peak_gflops: f64,
    /// Whether our updates' products run on o2o's AVX-512 kernels.
    pub avx512_products: bool,
    /// The 10-critic / 2-critic cost of our update, interleaved (when both are measured).
    pub ensemble_cost_ratio: Option<f64>,
    /// The PyTorch version the reference printed.
    pub pytorch: Value,
    /// The load average when the bench was set up.
    pub load_average: String,
}

impl UpdateBench {
    /// Set libtorch's intra-op threads (when given) and note the load average.
    pub fn new(args: UpdateOptions) -> Self {
        if let Some(n) = args.threads {
            tch::set_num_threads(n);
        }
        let threads = tch::get_num_threads();
        let load = super::load_average();
        Self { args, threads, load }
    }

    /// The line `o2o bench update` prints before it measures.
    pub fn header(&self) -> String {
        let (args, threads, load) = (&self.args, self.threads, &self.load);
        format!("o2o bench update: batch {}, obs {}, act {}, {} updates after {} warm-up, device {:?}, {threads} threads, load average {load}", args.batch, args.obs, args.act, args.updates, args.warmup, args.device)
    }

    /// The variants and the SERA rows `only` selects; an unknown name is an error.
    fn selected(&self) -> anyhow::Result<(Vec<Variant>, Vec<(&'static str, &'static str)>)> {
        let args = &self.args;
        let mut vs = variants(args);
        let sera_rows: Vec<(&str, &str)> = SERA_ROWS
            .iter()
            .copied()
            .filter(|(row, _)| args.only.is_empty() || args.only.iter().any(|o| o == row))
            .collect();
        if !args.only.is_empty() {
            if let Some(bad) = args
                .only
                .iter()
                .find(|o| !vs.iter().any(|v| v.name == o.as_str()) && !SERA_ROWS.iter().any(|(row, _)| row == o))
            {
                let known: Vec<&str> = vs.iter().map(|v| v.name).chain(SERA_ROWS.iter().map(|(row, _)| *row)).collect();
                bail!("--only: unknown algorithm `{bad}` (known: {})", known.join(", "));
            }
            vs.retain(|v| args.only.iter().any(|o| o == v.name));
        }
        Ok((vs, sera_rows))
    }

    /// Measure the SERA rows `only` selects (none when it names none).
    pub fn sera(&self) -> anyhow::Result<Vec<SeraRow>> {
        let (_, rows) = self.selected()?;
        sera_rows(&variants(&self.args), &rows, &self.args)
    }

    /// Cross-check each selected algorithm's losses with PyTorch's and time both sides; `sera`
    /// is carried into the report.
    pub fn measure(&self, sera: Vec<SeraRow>) -> anyhow::Result<UpdateReport> {
        let (args, device, threads) = (&self.args, self.args.device, self.threads);
        let (vs, _) = self.selected()?;
        let mut report = UpdateReport {
            sera,
            results: Vec::new(),
            matmul_peak_gflops: 0.0,
            matmul_peak_gflops_per_cpu_s: 0.0,
            fma_peak_gflops: 0.0,
            avx512_products: o2o_agents::nn::avx512_products(),
            ensemble_cost_ratio: None,
            pytorch: Value::Null,
            load_average: self.load.clone(),
        };
        if vs.is_empty() {
            return Ok(report);
        }
        let dir = super::TempDir::new("update")?;
        let batches: Vec<TransitionBatch> = vs
            .iter()
            .map(|v| random_batch(&mut AgentRng::new(2024), args.batch * v.rows, args.obs, args.act))
            .collect();
        let mut manifest = Vec::new();
        let mut our_losses = Vec::new();
        for (v, batch) in vs.iter().zip(&batches) {
            let (spec, metrics) = cross_check_inputs(v, dir.path(), batch)?;
            manifest.push(spec);
            our_losses.push(metrics);
        }
        std::fs::write(dir.path().join("manifest.json"), serde_json::to_string(&json!({"variants": manifest}))?)?;

        let py_device = if device == Device::Cpu { "cpu" } else { "cuda" };
        let (mut peak, mut peak_cpu, mut fma_peak) = (0.0f64, 0.0f64, 0.0f64);
        let mut ours_ups = vec![0.0f64; vs.len()];
        let mut torch_ups = vec![0.0f64; vs.len()];
        let mut ours_cpu = vec![0.0f64; vs.len()];
        let mut torch_cpu = vec![0.0f64; vs.len()];
        let mut reference = Value::Null;
        for round in 0..args.rounds.max(1) {
            let (wall, cpu) = matmul_peak(device);
            (peak, peak_cpu) = (peak.max(wall), peak_cpu.max(cpu));
            if device == Device::Cpu {
                fma_peak = fma_peak.max(o2o_agents::nn::fma_peak_gflops());
            }
            for (i, v) in vs.iter().enumerate() {
                let (wall, cpu) = time_ours(v, &batches[i], device, args.warmup, args.updates)?;
                ours_ups[i] = ours_ups[i].max(wall);
                ours_cpu[i] = ours_cpu[i].max(cpu);
            }
            reference = super::python_json(
                "bench_update_torch.py",
                &[
                    "--dir",
                    &dir.path().to_string_lossy(),
                    "--threads",
                    &threads.to_string(),
                    "--updates",
                    &args.updates.to_string(),
                    "--warmup",
                    &args.warmup.to_string(),
                    "--device",
                    py_device,
                ],
            )?;
            for (i, v) in vs.iter().enumerate() {
                let r = reference["variants"][v.name]["updates_per_s"]
                    .as_f64()
                    .with_context(|| format!("no PyTorch rate for {}", v.name))?;
                torch_ups[i] = torch_ups[i].max(r);
                torch_cpu[i] =
                    torch_cpu[i].max(reference["variants"][v.name]["cpu_updates_per_s"].as_f64().unwrap_or(0.0));
            }
            let load = super::load_average();
            let r1 = |r: &[f64]| r.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>();
            eprintln!(
                "round {}: ours {:?} torch {:?} up/s (best so far; per CPU second {:?} vs {:?}), load {}",
                round + 1,
                r1(&ours_ups),
                r1(&torch_ups),
                r1(&ours_cpu),
                r1(&torch_cpu),
                load
            );
        }

        for (i, v) in vs.iter().enumerate() {
            let metrics = &our_losses[i];
            let r = &reference["variants"][v.name];
            let mut diff = 0.0f64;
            for name in v.losses {
                let ours = metrics
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, x)| *x)
                    .with_context(|| format!("our {} metrics lack {name}", v.name))?;
                let theirs =
                    r["losses"][*name].as_f64().with_context(|| format!("PyTorch {} losses lack {name}", v.name))?;
                diff = diff.max((ours - theirs).abs());
            }
            report.results.push(UpdateRow {
                algo: v.name,
                flops: v.flops,
                ours_updates_per_s: ours_ups[i],
                pytorch_updates_per_s: torch_ups[i],
                ours_updates_per_cpu_s: ours_cpu[i],
                pytorch_updates_per_cpu_s: torch_cpu[i],
                max_abs_loss_diff: diff,
            });
        }
        let pos = |name: &str| vs.iter().position(|v| v.name == name);
        report.ensemble_cost_ratio = match (pos("sac"), pos("sac_ens10_ln")) {
            (Some(i), Some(j)) => Some(interleaved_cost_ratio(
                (&vs[i], &batches[i]),
                (&vs[j], &batches[j]),
                device,
                args.warmup,
                COST_PAIRS,
            )?),
            _ => None,
        };
        (report.matmul_peak_gflops, report.matmul_peak_gflops_per_cpu_s, report.fma_peak_gflops) =
            (peak, peak_cpu, fma_peak);
        report.pytorch = reference["torch"].clone();
        Ok(report)
    }
}

impl UpdateRow {
    /// Our achieved GFLOP/s.
    pub fn gflops(&self) -> f64 {
        self.flops * self.ours_updates_per_s / 1e9
    }
}

impl UpdateReport {
    /// Our GFLOP/s per CPU second over the matmul peak per CPU second (NaN without one).
    fn share_cpu(&self, r: &UpdateRow) -> f64 {
        let peak_cpu = self.matmul_peak_gflops_per_cpu_s;
        if peak_cpu > 0.0 {
            r.flops * r.ours_updates_per_cpu_s / 1e9 / peak_cpu
        } else {
            f64::NAN
        }
    }

    /// Our GFLOP/s over the cores' FMA peak (NaN without one).
    fn share_fma(&self, r: &UpdateRow) -> f64 {
        let fma_peak = self.fma_peak_gflops;
        if fma_peak > 0.0 {
            r.gflops() / fma_peak
        } else {
            f64::NAN
        }
    }

    /// The table and the summary line `o2o bench update` prints (after the SERA table).
    pub fn table(&self) -> String {
        let peak = self.matmul_peak_gflops;
        let mut lines = vec![format!(
            "{:<14} {:>10} {:>10} {:>7} {:>10} {:>14} {:>9} {:>10} {:>8} {:>8} {:>8}",
            "algo",
            "ours up/s",
            "torch up/s",
            "ratio",
            "cpu ratio",
            "max|Δloss|",
            "MFLOP/up",
            "ours GF/s",
            "% peak",
            "% cpu pk",
            "% fma pk"
        )];
        for r in &self.results {
            let (ups, torch_ups) = (r.ours_updates_per_s, r.pytorch_updates_per_s);
            // The same ratio per CPU second of each side's thread (steadier under other load).
            let cpu_ratio = if r.pytorch_updates_per_cpu_s > 0.0 {
                r.ours_updates_per_cpu_s / r.pytorch_updates_per_cpu_s
            } else {
                f64::NAN
            };
            let gflops = r.gflops();
            // The share of the machine: our GFLOP/s over the matmul peak of the same run, per
            // wall second and per CPU second of the timing thread (the steadier one under other
            // load; at more than one thread both sides count the timing thread's CPU time only).
            lines.push(format!(
                "{:<14} {:>10.1} {:>10.1} {:>6.2}x {:>9.2}x {:>14.2e} {:>9.1} {:>10.1} {:>7.0}% {:>7.0}% {:>7.0}%",
                r.algo,
                ups,
                torch_ups,
                ups / torch_ups,
                cpu_ratio,
                r.max_abs_loss_diff,
                r.flops / 1e6,
                gflops,
                100.0 * gflops / peak,
                100.0 * self.share_cpu(r),
                100.0 * self.share_fma(r)
            ));
        }
        let rate = |name: &str, f: fn(&UpdateRow) -> f64| self.results.iter().find(|r| r.algo == name).map(f);
        let (wall, cpu): (fn(&UpdateRow) -> f64, fn(&UpdateRow) -> f64) =
            (|r| r.ours_updates_per_s, |r| r.ours_updates_per_cpu_s);
        let cost_ratio =
            match (rate("sac", wall), rate("sac_ens10_ln", wall), rate("sac", cpu), rate("sac_ens10_ln", cpu)) {
                (Some(two), Some(ten), Some(two_cpu), Some(ten_cpu)) => {
                    format!("{:.2}x (per CPU second {:.2}x)", two / ten, two_cpu / ten_cpu)
                }
                _ => "n/a".into(),
            };
        let cost_ratio = match self.ensemble_cost_ratio {
            Some(r) => {
                format!(
                    "{r:.2}x (median of {COST_PAIRS} interleaved pairs of blocks; best-of-rounds rates: {cost_ratio})"
                )
            }
            None => cost_ratio,
        };
        let (peak_cpu, fma_peak) = (self.matmul_peak_gflops_per_cpu_s, self.fma_peak_gflops);
        let products = if self.avx512_products { "AVX-512 (o2o's kernels)" } else { "libtorch's" };
        lines.push(format!("matmul 1024³ f32 peak: {peak:.1} GFLOP/s ({peak_cpu:.1} per CPU second of this thread); FMA peak of the cores: {fma_peak:.1} GFLOP/s; our updates' products: {products}; 10-critic / 2-critic update cost (ours): {cost_ratio}; PyTorch {}", self.pytorch));
        lines.join("\n")
    }

    /// The warning `o2o bench update` prints when a loss differs from PyTorch's by more than 1e-5.
    pub fn warning(&self) -> Option<String> {
        // A difference that is not finite counts as infinite (it has no JSON number).
        let worst = self
            .results
            .iter()
            .map(|r| if r.max_abs_loss_diff.is_finite() { r.max_abs_loss_diff } else { f64::INFINITY })
            .fold(0.0, f64::max);
        (worst > 1e-5).then(|| format!("warning: losses differ from PyTorch by {worst:.2e} (> 1e-5)"))
    }

    /// The JSON object `o2o bench update --json` prints last.
    pub fn json(&self) -> Value {
        let sera = sera_json(&self.sera);
        if self.results.is_empty() {
            return json!({"results": [], "sera_overhead": sera});
        }
        let (peak, peak_cpu, fma_peak) =
            (self.matmul_peak_gflops, self.matmul_peak_gflops_per_cpu_s, self.fma_peak_gflops);
        let results: Vec<Value> = self.results.iter().map(|r| {
            let (gflops, share_cpu, share_fma) = (r.gflops(), self.share_cpu(r), self.share_fma(r));
            json!({"algo": r.algo, "ours_updates_per_s": r.ours_updates_per_s, "pytorch_updates_per_s": r.pytorch_updates_per_s, "max_abs_loss_diff": r.max_abs_loss_diff, "gflops": gflops, "ours_updates_per_cpu_s": r.ours_updates_per_cpu_s, "pytorch_updates_per_cpu_s": r.pytorch_updates_per_cpu_s, "share_of_peak": gflops / peak, "share_of_peak_cpu": share_cpu, "share_of_fma_peak": (fma_peak > 0.0).then_some(share_fma)})
        }).collect();
        json!({"results": results, "matmul_peak_gflops": peak, "matmul_peak_gflops_per_cpu_s": peak_cpu, "fma_peak_gflops": (fma_peak > 0.0).then_some(fma_peak), "avx512_products": self.avx512_products, "load_average": self.load_average, "ensemble_cost_ratio": self.ensemble_cost_ratio, "sera_overhead": sera})
    }
}
