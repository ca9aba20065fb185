//! `o2o bench fleet`: what the JetStream stream costs, measured in one run against the same work
//! without it (docs/fleet.md, "Throughput"): [`run`] with [`FleetBenchOptions`], whose
//! [`FleetBenchReport`] is what it measured; [`worker`] is one actor process.
//!
//! 1. **Actors.** For 1, 2 and 4 actor processes (this binary, `o2o bench fleet --worker`): each steps
//!    HalfCheetah-v5 with a uniformly random policy for `--steps` steps through the runner's
//!    [`Actor`], its transitions going either into the fleet's [`StreamSink`] (batches of
//!    `--batch`, each kept until the server acknowledges it) or into an in-process replay buffer
//!    ([`ReplaySink`]); the workers start stepping together once all are set up. Through the stream, this process consumes them as the learner does
//!    (durable pull consumer, [`message::decode`], replay push, ack); the rate is all rows over
//!    the time from the first worker's first step to the last row consumed. In process, it is
//!    all rows over the first step to the last worker's last step.
//! 2. **Learner.** SAC updates (the run config `--config`, HalfCheetah's sizes) on a replay
//!    buffer holding the actors' rows, alternating blocks of `--block` updates without the
//!    stream and with it: with it, every `--batch` updates (UTD 1) one more message is fetched
//!    from the stream, decoded, pushed and acknowledged, the fleet learner's per-message work.
//!
//! The server is a local `nats-server` (JetStream on a temporary store, killed at the end).

use crate::fleet::actor::StreamSink;
use crate::fleet::learner::declare;
use crate::fleet::message;
use crate::fleet::server::NatsServer;
use crate::fleet::{Bus, Connection, FleetConfig};
use crate::run::actor::{derive_seed, stream, Actor, UniformPolicy};
use crate::run::learner::{learn, ReplaySink, RewardTransform, Source};
use crate::Run;
use anyhow::{bail, Context, Result};
use async_nats::jetstream::consumer;
use futures::StreamExt;
use o2o_datasets::ReplayBuffer;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tch::Device;

const ENV: &str = "HalfCheetah-v5";
/// HalfCheetah-v5's observation and action sizes (the worker checks them).
const OBS: usize = 17;
const ACT: usize = 6;

/// What `o2o bench fleet` measures.
#[derive(Debug, Clone)]
pub struct FleetBenchOptions {
    /// Env steps per actor process.
    pub steps: u64,
    /// Actor process counts to measure.
    pub actors: Vec<usize>,
    /// Transitions per published message.
    pub batch: usize,
    /// Learner updates per mode (with the stream, without it).
    pub updates: u64,
    /// Updates per block; the two modes alternate block by block so both see the same load.
    pub block: u64,
    /// The learner's run config (a preset or a .toml); its agent and batch size are used.
    pub config: String,
    /// Torch threads (in this process and in each worker).
    pub threads: i32,
}

/// One actor process of the bench, as its parent starts it.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// `stream` (into the fleet's stream) or `local` (into an in-process buffer).
    pub mode: String,
    /// The server (stream mode).
    pub nats: String,
    /// The run id (stream mode).
    pub run: String,
    /// The worker's index (its seed stream and its name).
    pub index: u64,
}

/// What `o2o bench fleet` measured.
#[derive(Debug)]
pub struct FleetBenchReport {
    /// One row per actor process count.
    pub actors: Vec<ActorRow>,
    /// The learner comparison.
    pub learner: LearnerRow,
    /// The options measured.
    pub options: FleetBenchOptions,
    /// The load average at the end.
    pub load_avg: String,
}

/// What one worker reports (unix seconds), as the JSON line it prints last.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerReport {
    /// When it took its first step.
    pub first_step: f64,
    /// When it was done.
    pub done: f64,
    /// Transitions it made.
    pub rows: u64,
    /// CPU seconds (user + system, all its threads) from the start signal to the end.
    pub cpu_s: f64,
}

/// One row of the actor table.
#[derive(Debug, Serialize)]
pub struct ActorRow {
    /// Actor processes.
    pub actors: usize,
    /// Transitions per second through the stream, consumed as the learner does.
    pub stream_per_s: f64,
    /// Transitions per second into in-process buffers.
    pub in_process_per_s: f64,
    /// `stream_per_s / in_process_per_s`.
    pub ratio: f64,
    /// CPU µs per transition through the stream: actors + the consumer + the server.
    pub stream_cpu_us: f64,
    /// CPU µs per transition in process: the actors.
    pub in_process_cpu_us: f64,
    /// The stream's CPU µs per transition by process: the actors (stepping, encoding,
    /// publishing and waiting for the server's acknowledgements).
    pub actors_cpu_us: f64,
    /// The consumer (fetch, decode, replay push, ack).
    pub consumer_cpu_us: f64,
    /// The nats-server.
    pub server_cpu_us: f64,
}

/// The learner comparison.
#[derive(Debug, Serialize)]
pub struct LearnerRow {
    /// Updates per mode.
    pub updates: u64,
    /// Updates per second without the stream.
    pub without_per_s: f64,
    /// Updates per second with the stream attached.
    pub with_stream_per_s: f64,
    /// Rate with the stream over rate without, from the totals.
    pub ratio: f64,
    /// The median over block pairs of the same ratio (robust to load spikes).
    pub median_block_ratio: f64,
    /// Messages taken from the stream in the "with" blocks.
    pub messages: u64,
}

/// CPU seconds (user + system) this process has used, all threads.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// CPU seconds another process has used (`/proc/<pid>/stat`, fields 14 and 15), 0 if unknown.
fn pid_cpu_s(pid: Option<u32>) -> f64 {
    let Some(text) = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok()) else { return 0.0 };
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    if f.len() > 12 && hz > 0.0 {
        (f[11] + f[12]) / hz
    } else {
        0.0
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Check the options and set libtorch's intra-op threads.
fn prepare(a: &FleetBenchOptions) -> Result<()> {
    if a.threads < 1 || a.batch == 0 || a.steps == 0 || a.block == 0 {
        bail!(
            "--threads, --batch, --steps and --block: expected at least 1, found {}, {}, {}, {}",
            a.threads,
            a.batch,
            a.steps,
            a.block
        );
    }
    tch::set_num_threads(a.threads);
    Ok(())
}

/// Measure: a local `nats-server`, the actor processes for each count and both sinks, then the
/// learner.
pub fn run(a: &FleetBenchOptions) -> Result<FleetBenchReport> {
    prepare(a)?;
    let fleet = FleetConfig { batch: a.batch, ..FleetConfig::default() };
    let server = NatsServer::start()?;
    let url = server.url();
    eprintln!("o2o bench fleet: nats-server on {url}, {} steps per actor, {ENV}, random policy", a.steps);
    let mut rows = Vec::new();
    let mut pool = None;
    for &n in &a.actors {
        if n == 0 {
            bail!("--actors: expected counts of at least 1, found 0");
        }
        let local = spawn_workers(a, "local", n, &url, "")?;
        let in_process_per_s = (n as u64 * a.steps) as f64 / span(&local, None);
        let in_process_cpu_us = local.iter().map(|r| r.cpu_s).sum::<f64>() / (n as u64 * a.steps) as f64 * 1e6;
        let run = format!("bench-{n}");
        let bus = Bus::connect(&Connection::new(&url, "o2o-bench"), &run, fleet.ack_timeout)?;
        let h = declare(&bus, &fleet)?;
        let consumer = pull(&bus, &h.stream, "bench")?;
        let mut replay = ReplayBuffer::new(n * a.steps as usize, OBS, ACT, 0.99)?;
        let children = start_workers(a, "stream", n, &url, &run)?;
        let (cpu0, server0) = (process_cpu_s(), pid_cpu_s(server.pid()));
        let want = n as u64 * a.steps;
        let mut got = 0;
        let t0 = Instant::now();
        while got < want {
            if t0.elapsed() > Duration::from_secs(300) {
                bail!("{run}: {got} of {want} rows through the stream after 300 s");
            }
            got += take(&bus, &consumer, &run, &mut replay, 16)?;
        }
        let last_row = unix_now();
        let (consumer_cpu, server_cpu) = (process_cpu_s() - cpu0, pid_cpu_s(server.pid()) - server0);
        let reports = wait_workers(children)?;
        let stream_per_s = want as f64 / span(&reports, Some(last_row));
        let per_row = |cpu_s: f64| cpu_s / want as f64 * 1e6;
        let actors_cpu_us = per_row(reports.iter().map(|r| r.cpu_s).sum::<f64>());
        let (consumer_cpu_us, server_cpu_us) = (per_row(consumer_cpu), per_row(server_cpu));
        let row = ActorRow {
            actors: n,
            stream_per_s,
            in_process_per_s,
            ratio: stream_per_s / in_process_per_s,
            stream_cpu_us: actors_cpu_us + consumer_cpu_us + server_cpu_us,
            in_process_cpu_us,
            actors_cpu_us,
            consumer_cpu_us,
            server_cpu_us,
        };
        eprintln!(
            "{n} actor(s): {:.0} transitions/s through the stream, {:.0} in process, ratio {:.2}; CPU per transition {:.1} µs (actors {:.1}, consumer {:.1}, server {:.1}) vs {:.1} µs",
            row.stream_per_s,
            row.in_process_per_s,
            row.ratio,
            row.stream_cpu_us,
            row.actors_cpu_us,
            row.consumer_cpu_us,
            row.server_cpu_us,
            row.in_process_cpu_us
        );
        rows.push(row);
        pool = Some((bus, h, replay));
    }
    let (bus, h, replay) = pool.context("no actor counts given")?;
    let learner = learner_bench(a, &bus, &h.stream, replay)?;
    let load_avg = super::load_average();
    drop(server);
    Ok(FleetBenchReport { actors: rows, learner, options: a.clone(), load_avg })
}

impl FleetBenchReport {
    /// The two Markdown tables `o2o bench fleet` prints.
    pub fn table(&self) -> String {
        let (rows, learner, a) = (&self.actors, &self.learner, &self.options);
        let mut lines = vec![
            "| actor processes | through the stream (transitions/s) | in-process buffer (transitions/s) | stream / in-process | CPU µs per transition, stream (actors + consumer + server) | in process | CPU ratio |".to_string(),
            "|---|---|---|---|---|---|---|".to_string(),
        ];
        for r in rows {
            lines.push(format!(
                "| {} | {:.0} | {:.0} | **{:.2}** | {:.1} ({:.1} + {:.1} + {:.1}) | {:.1} | {:.2} |",
                r.actors,
                r.stream_per_s,
                r.in_process_per_s,
                r.ratio,
                r.stream_cpu_us,
                r.actors_cpu_us,
                r.consumer_cpu_us,
                r.server_cpu_us,
                r.in_process_cpu_us,
                r.stream_cpu_us / r.in_process_cpu_us
            ));
        }
        lines.push(String::new());
        lines.push(format!(
            "| learner ({} updates per mode) | updates/s | ratio (totals) | ratio (median of {}-update block pairs) |",
            learner.updates, a.block
        ));
        lines.push("|---|---|---|---|".to_string());
        lines.push(format!("| without the stream | {:.1} | 1.00 | 1.00 |", learner.without_per_s));
        lines.push(format!(
            "| with the stream attached ({} messages taken) | {:.1} | **{:.3}** | **{:.3}** |",
            learner.messages, learner.with_stream_per_s, learner.ratio, learner.median_block_ratio
        ));
        lines.join("\n")
    }

    /// The JSON object `o2o bench fleet --json` prints last.
    pub fn json(&self) -> serde_json::Value {
        let a = &self.options;
        serde_json::json!({ "env": ENV, "steps_per_actor": a.steps, "batch": a.batch, "actors": self.actors, "learner": self.learner, "load_avg": self.load_avg })
    }
}

/// One actor process (`o2o bench fleet --worker`): `steps` random-policy steps into the stream
/// or an in-process buffer, started by the parent's go (see [`run`]); prints `ready` to stdout
/// once set up and waits for a line on stdin.
pub fn worker(a: &FleetBenchOptions, w: &WorkerOptions) -> Result<WorkerReport> {
    prepare(a)?;
    let mode = w.mode.as_str();
    let env = o2o_envs::make(ENV)?;
    let (obs_dim, act_dim) = (env.observation_space().dim(), env.action_space().dim());
    if (obs_dim, act_dim) != (OBS, ACT) {
        bail!("{ENV}: observations {obs_dim} and actions {act_dim}, expected {OBS} and {ACT}");
    }
    let seed = derive_seed(0, stream::FLEET_ACTOR, w.index);
    let mut actor = Actor::new(env, seed, 0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, stream::RUNNER_RNG, 0));
    let mut policy = UniformPolicy { rng: &mut rng, dim: act_dim };
    let fleet = FleetConfig { batch: a.batch, ..FleetConfig::default() };
    let (first_step, cpu0);
    match mode {
        "stream" => {
            let bus =
                Bus::connect(&Connection::new(&w.nats, &format!("o2o-bench-{}", w.index)), &w.run, fleet.ack_timeout)?;
            let mut sink = StreamSink::new(&bus, &format!("bench-{}", w.index), obs_dim, act_dim, &fleet);
            first_step = ready_set_go()?;
            cpu0 = process_cpu_s();
            for _ in 0..a.steps {
                actor.step(&mut policy, &mut sink)?;
            }
            sink.finish(Duration::from_secs(60))?;
        }
        "local" => {
            let mut replay = ReplayBuffer::new(a.steps as usize, obs_dim, act_dim, 0.99)?;
            let mut sink = ReplaySink { replay: &mut replay, reward: RewardTransform::IDENTITY, interventions: None };
            first_step = ready_set_go()?;
            cpu0 = process_cpu_s();
            for _ in 0..a.steps {
                actor.step(&mut policy, &mut sink)?;
            }
        }
        other => bail!("--worker: expected stream or local, found {other:?}"),
    }
    Ok(WorkerReport { first_step, done: unix_now(), rows: a.steps, cpu_s: process_cpu_s() - cpu0 })
}

/// The start barrier, worker side: say `ready` once set up, step when the parent says `go`
/// (so process start-up, which differs by seconds under load, is not in the timed span).
fn ready_set_go() -> Result<f64> {
    use std::io::{BufRead, Write};
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(unix_now())
}

/// Start `n` workers and release them together once all are set up.
fn start_workers(a: &FleetBenchOptions, mode: &str, n: usize, url: &str, run: &str) -> Result<Vec<Worker>> {
    use std::io::{BufRead, Write};
    let exe = std::env::current_exe().context("finding the o2o binary")?;
    let mut children = (0..n)
        .map(|i| {
            Command::new(&exe)
                .args(["bench", "fleet", "--worker", mode, "--nats", url, "--run", run, "--index", &i.to_string()])
                .args([
                    "--steps",
                    &a.steps.to_string(),
                    "--batch",
                    &a.batch.to_string(),
                    "--threads",
                    &a.threads.to_string(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting worker {i}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut outs = Vec::new();
    for c in &mut children {
        let mut out = std::io::BufReader::new(c.stdout.take().context("a worker's stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("a worker did not get ready (it printed {line:?})");
        }
        outs.push(out);
    }
    for c in &mut children {
        writeln!(c.stdin.as_mut().context("a worker's stdin")?, "go")?;
    }
    Ok(children.into_iter().zip(outs).collect())
}

/// A started worker and the rest of its stdout.
type Worker = (std::process::Child, std::io::BufReader<std::process::ChildStdout>);

fn wait_workers(workers: Vec<Worker>) -> Result<Vec<WorkerReport>> {
    use std::io::Read;
    workers
        .into_iter()
        .map(|(mut c, mut out)| {
            let mut text = String::new();
            out.read_to_string(&mut text)?;
            let status = c.wait()?;
            if !status.success() {
                bail!("a worker failed ({status})");
            }
            serde_json::from_str(text.lines().last().unwrap_or(""))
                .with_context(|| format!("a worker printed {text:?}"))
        })
        .collect()
}

fn spawn_workers(a: &FleetBenchOptions, mode: &str, n: usize, url: &str, run: &str) -> Result<Vec<WorkerReport>> {
    wait_workers(start_workers(a, mode, n, url, run)?)
}

/// Seconds from the first worker's first step to `end` (default: the last worker's end).
fn span(reports: &[WorkerReport], end: Option<f64>) -> f64 {
    let start = reports.iter().map(|r| r.first_step).fold(f64::INFINITY, f64::min);
    let end = end.unwrap_or_else(|| reports.iter().map(|r| r.done).fold(0.0, f64::max));
    (end - start).max(1e-9)
}

/// A durable pull consumer `name` reading the stream from its start.
fn pull(
    bus: &Bus,
    stream: &async_nats::jetstream::stream::Stream,
    name: &str,
) -> Result<consumer::Consumer<consumer::pull::Config>> {
    bus.block_on(stream.create_consumer(consumer::pull::Config {
        durable_name: Some(name.into()),
        ack_policy: consumer::AckPolicy::Explicit,
        max_ack_pending: 100_000,
        ..Default::default()
    }))
    .map_err(|e| anyhow::anyhow!("{e}"))
    .context("creating a pull consumer")
}

/// The fleet learner's per-message work for up to `max` messages: fetch, decode, push, ack.
/// Returns the rows taken.
fn take(
    bus: &Bus,
    c: &consumer::Consumer<consumer::pull::Config>,
    run: &str,
    replay: &mut ReplayBuffer,
    max: usize,
) -> Result<u64> {
    let msgs = bus.block_on(async {
        let mut out = Vec::new();
        if let Ok(mut batch) = c.fetch().max_messages(max).expires(Duration::from_millis(50)).messages().await {
            while let Some(Ok(m)) = batch.next().await {
                out.push(m);
            }
        }
        out
    });
    let mut rows = 0;
    for m in msgs {
        let b =
            message::decode(&m.payload, run, replay.obs_dim(), replay.act_dim()).map_err(|e| anyhow::anyhow!("{e}"))?;
        for r in &b.transitions {
            replay.push(&r.obs, &r.action, r.reward as f32, &r.next_obs, r.terminated, r.truncated)?;
        }
        rows += b.transitions.len() as u64;
        bus.block_on(m.ack()).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(rows)
}

/// SAC updates per second without and with the stream attached, alternating blocks.
fn learner_bench(
    a: &FleetBenchOptions,
    bus: &Bus,
    stream: &async_nats::jetstream::stream::Stream,
    replay: ReplayBuffer,
) -> Result<LearnerRow> {
    let config = Run::preset(&a.config)?.config()?;
    let batch = config.train.online_batch();
    let mut agent = crate::run::prepare::build_agent(&config, replay.obs_dim(), replay.act_dim(), Device::Cpu)?;
    agent.set_phase(o2o_agents::Phase::Online);
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(config.seed, stream::RUNNER_RNG, 0));
    // The buffer the learner samples from: the first half of the rows (the rest come from the
    // stream in the "with" blocks).
    let run = bus.names.run_id.clone();
    let mut online = ReplayBuffer::new(replay.len() * 2, replay.obs_dim(), replay.act_dim(), 0.99)?;
    let c = pull(bus, stream, "bench-learner")?;
    take(bus, &c, &run, &mut online, 8)?;
    if online.len() < batch {
        bail!("{} rows for batches of {batch}: raise --steps", online.len());
    }
    drop(replay);
    eprintln!(
        "learner: {} updates per mode, {} per block, batch {batch}, {} rows to start",
        a.updates,
        a.block,
        online.len()
    );
    let (mut t_without, mut t_with, mut done, mut messages) = (0.0, 0.0, 0u64, 0u64);
    let mut pairs = Vec::new();
    learn(&mut *agent, &Source::Online(&online), batch, 10, &mut rng, Device::Cpu, None)?; // warm-up
    while done < a.updates {
        let k = a.block.min(a.updates - done);
        // One update per call in both modes, so both pay the same per-call cost.
        let t0 = Instant::now();
        for _ in 0..k {
            learn(&mut *agent, &Source::Online(&online), batch, 1, &mut rng, Device::Cpu, None)?;
        }
        let without = t0.elapsed().as_secs_f64();
        t_without += without;
        let t0 = Instant::now();
        for u in 0..k {
            if (done + u) % a.batch as u64 == 0 && take(bus, &c, &run, &mut online, 1)? > 0 {
                messages += 1;
            }
            learn(&mut *agent, &Source::Online(&online), batch, 1, &mut rng, Device::Cpu, None)?;
        }
        let with = t0.elapsed().as_secs_f64();
        t_with += with;
        pairs.push(without / with);
        done += k;
    }
    pairs.sort_by(f64::total_cmp);
    let median_block_ratio = pairs[pairs.len() / 2];
    let (without_per_s, with_stream_per_s) = (a.updates as f64 / t_without, a.updates as f64 / t_with);
    Ok(LearnerRow {
        updates: a.updates,
        without_per_s,
        with_stream_per_s,
        ratio: with_stream_per_s / without_per_s,
        median_block_ratio,
        messages,
    })
}
