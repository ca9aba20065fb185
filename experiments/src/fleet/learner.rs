//! The fleet learner: the learning half of the runner, fed by a JetStream stream.
//!
//! One loop, read top to bottom: fetch transition messages from the durable consumer while the
//! rate limiter allows inserts; check each ([`super::message::decode`]), skip those it already
//! holds (by stream sequence), put the rest in the replay buffer, and only then acknowledge;
//! make SAC's updates ([`crate::run::learner::learn`]) while the limiter allows samples; publish
//! the weights every `publish_every` updates; evaluate, log and checkpoint by consumed
//! transitions; tell the actors how far it has read (their backpressure); log how old the data
//! it takes in is ([`DataAge`]); watch actors join and leave.
//!
//! Crash safety: a checkpoint holds the agent, the replay buffer, the runner state with
//! `stream_seq` (the last stream sequence in that buffer) and `fleet.json` (the fleet counters).
//! A restarted learner recreates its consumer at `stream_seq + 1`, so the messages it had
//! acknowledged after its last checkpoint (lost with its memory) come again from the stream,
//! and anything at or below `stream_seq` that arrives again is skipped: every transition in
//! the stream is stored exactly once.

use super::message::{self, Rejected};
use super::rate::RateLimiter;
use super::{keys, ActorBeat, Bus, Connection, FleetConfig, LearnerStatus, Names, PolicyVersion};
use crate::logging::{JsonlSink, Logger, MetricSink, RerunArgs};
use crate::run::checkpoint::{self, truncate_metrics};
use crate::run::config::RunConfig;
use crate::run::eval;
use crate::run::learner::{learn_timed, LearnTime, RewardTransform, Source};
use crate::run::prepare::build_agent;
use crate::run::rundir::{self, Summary, METRICS, SUMMARY};
use crate::run::state::{self, RunnerState};
use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, consumer, kv, object_store};
use futures::StreamExt;
use o2o_agents::{Agent, Phase};
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::ReplayBuffer;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tch::Device;

/// The fleet's part of a learner checkpoint (`fleet.json`).
pub const FLEET_STATE: &str = "fleet.json";

/// The durable consumer's name.
pub const CONSUMER: &str = "learner";

/// The fleet counters a checkpoint holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetState {
    /// The last stream sequence processed (stored, or refused).
    pub last_seq: u64,
    /// Transitions stored from the stream.
    pub consumed: u64,
    /// Rows sampled for updates (the rate limiter's count).
    pub sampled: u64,
    /// Messages refused (another run, another schema, malformed).
    pub rejected: u64,
    /// Messages skipped because their sequence was already held.
    pub duplicates: u64,
    /// Messages the stream's limits (`--stream-max-hours`, `--stream-max-mib`) removed before
    /// the learner read them.
    #[serde(default)]
    pub expired: u64,
    /// Transitions stored per actor instance.
    pub per_actor: BTreeMap<String, u64>,
    /// The newest published policy version.
    pub policy_version: u64,
    /// Per actor instance, one past the highest batch number (its own counter, 0, 1, …) stored.
    #[serde(default)]
    pub next_batch: BTreeMap<String, u64>,
    /// Batch numbers an actor skipped as seen here: batches it sealed that never came (the
    /// stream's limits removed them, or a message of its was refused). 0 when nothing was lost.
    #[serde(default)]
    pub batch_gaps: u64,
    /// Batches stored although their actor's batch number had come already: the stream held
    /// one batch twice (a republish after its duplicate window). 0 when nothing was duplicated.
    #[serde(default)]
    pub batch_duplicates: u64,
}

impl FleetState {
    /// Count batch `batch` of `actor` against the ones stored before it. Each actor publishes
    /// its batches in order, each after the previous one's acknowledgement, so what comes is
    /// the next number: a higher one means batches lost on the way, a lower one a batch the
    /// stream holds twice. Counted only (the rows are stored either way), so a run's data does
    /// not depend on it.
    fn count_batch(&mut self, actor: &str, batch: u64) {
        let next = self.next_batch.entry(actor.to_string()).or_default();
        if batch < *next {
            self.batch_duplicates += 1;
        } else {
            self.batch_gaps += batch - *next;
            *next = batch + 1;
        }
    }
}

/// Everything the fleet keeps on the server for one run.
pub struct RunHandles {
    /// The control bucket.
    pub control: kv::Store,
    /// The liveness bucket.
    pub actors: kv::Store,
    /// The weights.
    pub weights: object_store::ObjectStore,
    /// The transition stream.
    pub stream: jetstream::stream::Stream,
}

/// Create (or open) the run's stream, buckets and object store.
pub fn declare(bus: &Bus, fleet: &FleetConfig) -> Result<RunHandles> {
    let n = &bus.names;
    let js = bus.js();
    // The server reports "no limit" as -1 bytes and a zero age.
    let max_bytes = if fleet.stream_max_bytes == 0 { -1 } else { fleet.stream_max_bytes.min(i64::MAX as u64) as i64 };
    let replicas = fleet.stream_replicas.unwrap_or(1);
    bus.block_on(async {
        let mut stream = js
            .get_or_create_stream(jetstream::stream::Config {
                name: n.stream(),
                subjects: vec![n.subjects()],
                storage: jetstream::stream::StorageType::File,
                retention: jetstream::stream::RetentionPolicy::Limits,
                discard: jetstream::stream::DiscardPolicy::Old,
                max_age: fleet.stream_max_age,
                max_bytes,
                duplicate_window: Duration::from_secs(120),
                num_replicas: replicas,
                description: Some(format!("o2o fleet transitions of run {}", n.run_id)),
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| {
                format!(
                    "creating the stream {} with {replicas} replica(s) (is JetStream enabled on the server, \
                     nats-server -js, and are there as many JetStream servers in its cluster?)",
                    n.stream()
                )
            })?;
        // A stream that exists (a resumed learner) takes this start's limits, and its replicas
        // when they are given, keeping the rest of its config (replicas set by hand, for one).
        let have = stream.cached_info().config.clone();
        let num_replicas = fleet.stream_replicas.unwrap_or(have.num_replicas);
        if have.max_age != fleet.stream_max_age || have.max_bytes != max_bytes || have.num_replicas != num_replicas {
            js.update_stream(jetstream::stream::Config {
                max_age: fleet.stream_max_age,
                max_bytes,
                num_replicas,
                ..have
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("setting the limits and replicas of the stream {}", n.stream()))?;
            stream = js.get_stream(n.stream()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let control = bucket(
            js,
            kv::Config {
                bucket: n.control(),
                history: 1,
                storage: jetstream::stream::StorageType::File,
                num_replicas: replicas,
                ..Default::default()
            },
        )
        .await?;
        let actors = bucket(
            js,
            kv::Config {
                bucket: n.actors(),
                history: 1,
                max_age: Duration::from_secs_f64(fleet.liveness_ttl_s),
                storage: jetstream::stream::StorageType::File,
                num_replicas: replicas,
                ..Default::default()
            },
        )
        .await?;
        let weights = match js.get_object_store(n.weights()).await {
            Ok(w) => w,
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: n.weights(),
                    storage: jetstream::stream::StorageType::File,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("creating the object store {}", n.weights()))?,
        };
        Ok(RunHandles { control, actors, weights, stream })
    })
}

/// A key-value bucket: the one that exists (a resumed learner's, kept as it is, its replicas
/// perhaps changed by hand), else a new one made with `config`.
async fn bucket(js: &jetstream::Context, config: kv::Config) -> Result<kv::Store> {
    if let Ok(store) = js.get_key_value(&config.bucket).await {
        return Ok(store);
    }
    let name = config.bucket.clone();
    js.create_key_value(config)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("creating the key-value bucket {name}"))
}

/// Publish an agent's state as weights version `version` (object `policy-<version>`), then
/// announce it under `policy`; keeps the newest few objects.
pub fn publish_weights(bus: &Bus, h: &RunHandles, agent: &dyn Agent, version: u64, grad_step: u64) -> Result<()> {
    let tmp = tempfile::Builder::new().prefix("o2o-weights-").tempdir()?;
    let file = tmp.path().join("agent.ot");
    agent.save(&file).context("saving the agent for publishing")?;
    let bytes = std::fs::read(&file)?;
    let object = format!("policy-{version:08}");
    bus.block_on(async { h.weights.put(object.as_str(), &mut bytes.as_slice()).await })
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("putting {object} into the object store {}", bus.names.weights()))?;
    bus.put_json(&h.control, keys::POLICY, &PolicyVersion { version, object, grad_step })?;
    if version > 3 {
        let old = format!("policy-{:08}", version - 3);
        let _ = bus.block_on(h.weights.delete(old.as_str()));
    }
    Ok(())
}

/// How the learner starts.
pub enum LearnerStart {
    /// A new run directory from this config.
    New(RunConfig),
    /// Continue the run in this directory from its newest checkpoint.
    Resume(PathBuf),
}

/// Learner settings beyond the run config.
pub struct LearnerOptions {
    /// The server.
    pub conn: Connection,
    /// Fleet settings.
    pub fleet: FleetConfig,
    /// Where new run directories go.
    pub runs_dir: PathBuf,
    /// Where to compute.
    pub device: Device,
    /// The Rerun recording.
    pub rerun: RerunArgs,
    /// ±updates of slack in the rate limiter's band (0: two messages' worth).
    pub rate_tolerance_updates: f64,
    /// Called with the run directory once its stream and config are on the server (the CLI
    /// prints the run id then, so an actor started from it finds the run).
    pub on_started: Option<Box<dyn FnMut(&Path)>>,
}

/// How the learner ended.
#[derive(Debug)]
pub struct LearnerOutcome {
    /// The run directory (its name is the run id).
    pub dir: PathBuf,
    /// The summary written to `summary.json`.
    pub summary: Summary,
    /// The fleet counters at the end.
    pub fleet: FleetState,
}

/// The run id of a learner run directory: its folder name.
pub fn run_id(dir: &Path) -> String {
    dir.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default()
}

/// Run a fleet learner to the end of its budget (`random_steps + warmup_steps + online_steps`
/// transitions consumed).
pub fn run_learner(start: LearnerStart, mut o: LearnerOptions) -> Result<LearnerOutcome> {
    // The server first: an address refused by the security check, or no server answering, is
    // an error before any run directory exists (issue 47 C5).
    let bus = Bus::connect(&o.conn, "", o.fleet.ack_timeout)?;
    bus.wait_connected(Duration::from_secs(10))?;
    // The run directory and the config: new, or from the directory being resumed.
    let (dir, config, _lock, resume) = match start {
        LearnerStart::New(config) => {
            check_config(&config)?;
            let mut manifest = crate::run::builder::new_manifest(&config, o.device, None);
            // So `o2o report` keeps it apart from single-process runs of the same config.
            manifest.trainer = Some(rundir::FLEET_LEARNER.into());
            let (dir, lock) = rundir::create(&o.runs_dir, &config.preset, config.seed, |tmp| {
                rundir::write_config(tmp, &config)?;
                rundir::write_json(&tmp.join(rundir::MANIFEST), &manifest)
            })?;
            (dir, config, lock, None)
        }
        LearnerStart::Resume(dir) => {
            let config = RunConfig::read(&dir.join(rundir::CONFIG))
                .with_context(|| format!("{} is not a run directory", dir.display()))?;
            let lock = rundir::RunLock::acquire(&dir)?;
            checkpoint::remove_partial(&dir)?;
            let ckpt = checkpoint::list(&dir)?.pop();
            (dir, config, lock, ckpt)
        }
    };
    let id = run_id(&dir);
    let bus = bus.for_run(&id);

    // The envs' sizes, the agent, the replay buffer and the counters (fresh or from the checkpoint).
    let mut eval_env =
        o2o_envs::make(&config.env).with_context(|| format!("making the evaluation env {}", config.env))?;
    let (obs_dim, act_dim) = (eval_env.observation_space().dim(), eval_env.action_space().dim());
    let device = o.device;
    let mut agent = build_agent(&config, obs_dim, act_dim, device)?;
    let gamma = crate::run::data::returns_gamma(&config.agent);
    let mut replay = ReplayBuffer::with_mc(config.train.replay_capacity, obs_dim, act_dim, McConfig::dense(gamma))
        .context("creating the replay buffer")?;
    let (mut state, mut fleet) = match &resume {
        None => (state::fresh(config.seed), FleetState::default()),
        Some(ckpt) => {
            let state = checkpoint::read_state(ckpt)?;
            agent
                .load(&ckpt.join(checkpoint::AGENT))
                .with_context(|| format!("loading the agent from {}", ckpt.display()))?;
            let rp = ckpt.join(checkpoint::REPLAY);
            if rp.exists() {
                replay = ReplayBuffer::load(&rp)
                    .with_context(|| format!("loading the replay buffer from {}", rp.display()))?;
            }
            let fp = ckpt.join(FLEET_STATE);
            let fleet: FleetState = serde_json::from_str(
                &std::fs::read_to_string(&fp).with_context(|| format!("cannot read {}", fp.display()))?,
            )
            .with_context(|| format!("{} is not a fleet state", fp.display()))?;
            if state.stream_seq != Some(fleet.last_seq) {
                bail!(
                    "{}: stream_seq {:?} in {} but last_seq {} in {FLEET_STATE}",
                    ckpt.display(),
                    state.stream_seq,
                    checkpoint::STATE,
                    fleet.last_seq
                );
            }
            eprintln!(
                "resuming fleet learner {} from {} (stream sequence {}, {} transitions)",
                dir.display(),
                ckpt.display(),
                fleet.last_seq,
                fleet.consumed
            );
            truncate_metrics(&dir.join(METRICS), state.metrics_len)?;
            (state, fleet)
        }
    };
    if resume.is_none() && dir.join(METRICS).exists() {
        std::fs::write(dir.join(METRICS), b"")?;
    }
    agent.set_phase(Phase::Online);
    let mut rng = state.rng()?;
    let mut sinks: Vec<Box<dyn MetricSink>> = vec![Box::new(JsonlSink::append(&dir.join(METRICS))?)];
    sinks.extend(crate::logging::sinks_for_run(&dir, &o.rerun, &config)?);
    let mut logger = Logger::new(sinks);

    // The server side: stream, buckets, object store, config for the actors, the consumer.
    let h = declare(&bus, &o.fleet)?;
    bus.block_on(h.control.put(keys::CONFIG, config.to_toml_string()?.into_bytes().into()))
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("publishing the run config")?;
    // The run id goes out only now, when the stream and the config the actors read exist.
    if let Some(f) = o.on_started.as_mut() {
        f(&dir);
    }
    bus.put_json(&h.control, keys::STATUS, &status(&fleet, false))?;
    // A resumed learner's weights are a new version, numbered after any the server has seen
    // (its previous life may have published versions after the checkpoint).
    let announced = bus.get_json::<PolicyVersion>(&h.control, keys::POLICY)?.map_or(0, |p| p.version);
    if fleet.policy_version.max(announced) > 0 {
        fleet.policy_version = fleet.policy_version.max(announced) + 1;
        publish_weights(&bus, &h, &*agent, fleet.policy_version, state.grad_step)?;
    }
    let mut consumer = open_consumer(&bus, &h, fleet.last_seq)?;

    let t = &config.train;
    let total = t.random_steps + t.warmup_steps + t.online_steps;
    let b = t.online_batch() as u64;
    let min_size = t.random_steps.max(b);
    let tolerance = if o.rate_tolerance_updates > 0.0 {
        o.rate_tolerance_updates
    } else {
        2.0 * (o.fleet.batch as f64) * t.updates_per_step as f64
    };
    let spi = (t.updates_per_step as u64 * b) as f64;
    let mut limiter = RateLimiter::new(spi, min_size, tolerance * b as f64).with_counts(fleet.consumed, fleet.sampled);
    let reward = RewardTransform::IDENTITY;

    let t0 = Instant::now();
    let mut last_metrics = None;
    // The log window's clock and the time `learn_timed` spent in it (`perf/…_s`).
    let (mut window, mut learn_time) = (Instant::now(), LearnTime::default());
    let (mut next_log, mut next_eval, mut next_ckpt) = (
        after(fleet.consumed, t.log_every),
        after(fleet.consumed, config.eval.every),
        after(fleet.consumed, config.checkpoint.every),
    );
    let mut last_publish = state.grad_step;
    let mut retry_publish: Option<Instant> = None;
    let mut live = Liveness::default();
    let mut age = DataAge::default();
    // The position the actors last read, and when to tell them again.
    let (mut told, mut tell_at) = (fleet.last_seq, Instant::now());
    eprintln!("fleet learner {id}: waiting for actors on {} (stream {}); start them with: o2o fleet actor --learner-run {id} --nats {}", o.conn.url, bus.names.stream(), o.conn.url);
    while fleet.consumed < total {
        // 1. Insert: fetch while the limiter lets the learner take more data.
        let rows = o.fleet.batch as u64;
        if limiter.can_insert(rows) {
            let wait = if limiter.can_sample(b) { Duration::from_millis(5) } else { Duration::from_millis(200) };
            // As many messages as keep the learner within its band (at least one).
            let room = (1..=16u64).take_while(|k| limiter.can_insert(k * rows)).count().max(1);
            let msgs = bus.block_on(async {
                let mut out = Vec::new();
                if let Ok(mut batch) = consumer.fetch().max_messages(room).expires(wait).messages().await {
                    while let Some(m) = batch.next().await {
                        match m {
                            Ok(m) => out.push(m),
                            Err(_) => break,
                        }
                    }
                }
                out
            });
            for m in msgs {
                let seq = m.info().map(|i| i.stream_sequence).map_err(|e| anyhow::anyhow!("{e}"))?;
                if fleet.last_seq > 0 && seq > fleet.last_seq + 1 {
                    // A gap. Messages the stream's limits removed will never come: skip them.
                    if let Ok(info) = bus.block_on(h.stream.get_info()) {
                        let (last, gone) = skip_expired(fleet.last_seq, info.state.first_sequence);
                        if gone > 0 {
                            eprintln!("fleet learner: stream messages {} to {last} were removed by the stream's limits (--stream-max-hours, --stream-max-mib) before this learner read them; going on from {}", fleet.last_seq + 1, last + 1);
                            (fleet.last_seq, fleet.expired) = (last, fleet.expired + gone);
                        }
                    }
                }
                if fleet.last_seq > 0 && seq > fleet.last_seq + 1 {
                    // Otherwise a delivery was lost on the way (the server went away between
                    // sending and our reading). Sequences are taken strictly in order, so
                    // "at or below last_seq" can mean "held"; ask again from the gap.
                    eprintln!(
                        "fleet learner: stream message {} was not delivered (got {seq}); reading again from it",
                        fleet.last_seq + 1
                    );
                    consumer = open_consumer(&bus, &h, fleet.last_seq)?;
                    break;
                }
                if seq <= fleet.last_seq {
                    fleet.duplicates += 1;
                } else {
                    match message::decode(&m.payload, &id, obs_dim, act_dim) {
                        Ok(batch) => {
                            for r in &batch.transitions {
                                replay
                                    .push(
                                        &r.obs,
                                        &r.action,
                                        reward.apply(r.reward) as f32,
                                        &r.next_obs,
                                        r.terminated,
                                        r.truncated,
                                    )
                                    .context("storing a transition from the stream")?;
                                if r.terminated || r.truncated {
                                    state.episode += 1;
                                }
                            }
                            let n = batch.transitions.len() as u64;
                            fleet.consumed += n;
                            *fleet.per_actor.entry(batch.actor.clone()).or_default() += n;
                            fleet.count_batch(&batch.actor, batch.batch);
                            live.rows(&batch.actor, n);
                            limiter.inserted(n);
                            age.add(n, fleet.policy_version, batch.policy_version, batch.sent_ms, message::now_ms());
                        }
                        Err(e) => refuse(&mut fleet, &mut logger, &state, seq, &e)?,
                    }
                    fleet.last_seq = seq;
                }
                // Only now is it in the buffer: acknowledge. A lost ack only means the message
                // comes again, and is skipped by its sequence.
                if let Err(e) = bus.block_on(m.ack()) {
                    eprintln!("fleet learner: acknowledging stream message {seq} failed ({e}); it will come again and be skipped");
                }
            }
            state.env_step = fleet.consumed;
            state.step = fleet.consumed;
        }
        // Tell the actors how far it has read (their backpressure), at most ten times a second;
        // with the server away, again a second later.
        if fleet.last_seq != told && Instant::now() >= tell_at {
            let ok = bus.put_json(&h.control, keys::STATUS, &status(&fleet, false)).is_ok();
            told = if ok { fleet.last_seq } else { told };
            tell_at = Instant::now() + Duration::from_millis(if ok { 100 } else { 1000 });
        }

        // 2. Learn: SAC's updates while the limiter allows them (a few at a time, so fetching
        // and liveness keep up).
        for _ in 0..8 {
            if !limiter.can_sample(b) {
                break;
            }
            last_metrics = Some(learn_timed(
                &mut *agent,
                &Source::Online(&replay),
                b as usize,
                1,
                &mut rng,
                device,
                None,
                &mut learn_time,
            )?);
            state.grad_step += 1;
            limiter.sampled(b);
        }
        fleet.sampled = limiter.counts().1;

        // 3. Weights, every `publish_every` updates (with the server away: again next time round).
        if state.grad_step > 0
            && (fleet.policy_version == 0 || state.grad_step - last_publish >= o.fleet.publish_every)
            && retry_publish.is_none_or(|t| t.elapsed() > Duration::from_secs(1))
        {
            match publish_weights(&bus, &h, &*agent, fleet.policy_version + 1, state.grad_step) {
                Ok(()) => {
                    fleet.policy_version += 1;
                    last_publish = state.grad_step;
                    retry_publish = None;
                }
                Err(e) => {
                    eprintln!(
                        "fleet learner: publishing weights version {} failed ({e:#}); retrying",
                        fleet.policy_version + 1
                    );
                    retry_publish = Some(Instant::now());
                }
            }
        }

        // 4. Liveness, logs, evaluation, checkpoints.
        live.poll(&bus, &h, &mut logger, &state)?;
        if fleet.consumed >= next_log {
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            let mut values: Vec<(String, f64)> = vec![
                ("fleet/consumed".into(), fleet.consumed as f64),
                ("fleet/rejected".into(), fleet.rejected as f64),
                ("fleet/duplicates".into(), fleet.duplicates as f64),
                ("fleet/expired".into(), fleet.expired as f64),
                ("fleet/batch_gaps".into(), fleet.batch_gaps as f64),
                ("fleet/batch_duplicates".into(), fleet.batch_duplicates as f64),
                ("fleet/samples_per_insert".into(), limiter.ratio()),
                ("fleet/policy_version".into(), fleet.policy_version as f64),
                ("perf/transitions_per_s".into(), fleet.consumed as f64 / secs),
                // Since the previous record: its wall seconds, and those spent drawing batches
                // and in the updates (the rest is the stream, publishing, liveness, evaluation).
                ("perf/window_s".into(), window.elapsed().as_secs_f64()),
                ("perf/sample_s".into(), learn_time.sample_s),
                ("perf/update_s".into(), learn_time.update_s),
            ];
            (window, learn_time) = (Instant::now(), LearnTime::default());
            values.extend(age.take());
            values.extend(
                last_metrics
                    .iter()
                    .flatten()
                    .map(|(k, v)| (if k.contains('/') { k.to_string() } else { format!("train/{k}") }, *v)),
            );
            let named: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            logger.log(state.grad_step, state.env_step, &named)?;
            next_log = after(fleet.consumed, t.log_every);
        }
        if fleet.consumed >= next_eval && fleet.consumed < total {
            evaluate(&mut *eval_env, &mut *agent, device, &config, &mut state, &mut logger)?;
            next_eval = after(fleet.consumed, config.eval.every);
        }
        if fleet.consumed >= next_ckpt && fleet.consumed < total {
            save(&dir, &config, &mut state, &fleet, &rng, &*agent, &replay, &mut logger)?;
            next_ckpt = after(fleet.consumed, config.checkpoint.every);
        }
        crate::run::fault::point("fleet-learner");
    }

    // The end: tell the actors (waiting out a server restart), a last evaluation, the final
    // checkpoint and the summary.
    let t_end = Instant::now();
    while let Err(e) = bus.put_json(&h.control, keys::STATUS, &status(&fleet, true)) {
        if t_end.elapsed() > Duration::from_secs(60) {
            return Err(e.context("telling the actors the learner is done"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    evaluate(&mut *eval_env, &mut *agent, device, &config, &mut state, &mut logger)?;
    state.finished = true;
    let ckpt = save(&dir, &config, &mut state, &fleet, &rng, &*agent, &replay, &mut logger)?;
    let summary = Summary::finished(&dir, &ckpt, &state, t0.elapsed().as_secs_f64(), Vec::new());
    rundir::write_json(&dir.join(SUMMARY), &summary)?;
    rundir::write_json(&dir.join(FLEET_STATE), &fleet)?;
    eprintln!(
        "fleet learner {id}: done — {} transitions from {} actors, {} updates, {} refused, {} duplicates skipped, \
         {} actor batches missing, {} stored twice",
        fleet.consumed,
        fleet.per_actor.len(),
        state.grad_step,
        fleet.rejected,
        fleet.duplicates,
        fleet.batch_gaps,
        fleet.batch_duplicates
    );
    Ok(LearnerOutcome { dir, summary, fleet })
}

/// The learner's status for the actors: finished or not, and its position in the stream.
fn status(fleet: &FleetState, finished: bool) -> LearnerStatus {
    LearnerStatus { finished, consumed: fleet.consumed, stream_seq: Some(fleet.last_seq) }
}

/// What the fleet learner supports.
fn check_config(config: &RunConfig) -> Result<()> {
    let t = &config.train;
    if t.offline_steps > 0 || config.dataset.is_some() {
        bail!("the fleet learner trains online from its actors' transitions: set train.offline_steps = 0 and no [dataset] (pretrain with `o2o train` first)");
    }
    if config.agent.needs_mc_returns() {
        bail!("algo {}: its Monte-Carlo returns need each episode's rows in order, which interleaved actors do not give; the fleet learner supports algorithms without them (sac, rlpd, …)", config.algo);
    }
    if config.sera.enabled {
        bail!("[sera] is not supported by the fleet learner yet");
    }
    if t.random_steps + t.warmup_steps + t.online_steps == 0 {
        bail!("the fleet learner has no budget: set train.online_steps (transitions to consume)");
    }
    Ok(())
}

/// After a gap in the sequences, with the learner holding up to `last_seq` and the stream now
/// starting at `first_seq`: the sequence to go on from and how many messages the stream's
/// limits removed unread (none when the gap is above the stream's start: a lost delivery).
fn skip_expired(last_seq: u64, first_seq: u64) -> (u64, u64) {
    if first_seq > last_seq + 1 {
        (first_seq - 1, first_seq - 1 - last_seq)
    } else {
        (last_seq, 0)
    }
}

/// The next multiple of `every` after `now` (never, for 0).
fn after(now: u64, every: u64) -> u64 {
    if every == 0 {
        u64::MAX
    } else {
        (now / every + 1) * every
    }
}

/// A refused message: counted, logged on stderr and in metrics.jsonl, never stored.
fn refuse(fleet: &mut FleetState, logger: &mut Logger, state: &RunnerState, seq: u64, e: &Rejected) -> Result<()> {
    fleet.rejected += 1;
    eprintln!("fleet learner: refused stream message {seq}: {e}");
    logger.log(
        state.grad_step,
        state.env_step,
        &[("fleet/rejected", fleet.rejected as f64), ("fleet/rejected_seq", seq as f64)],
    )
}

/// The durable consumer, delivering from `last_seq + 1`: recreated on every start, so a
/// restarted learner gets again what it acknowledged after its last checkpoint.
fn open_consumer(bus: &Bus, h: &RunHandles, last_seq: u64) -> Result<consumer::Consumer<consumer::pull::Config>> {
    bus.block_on(async {
        let _ = h.stream.delete_consumer(CONSUMER).await;
        let deliver_policy = if last_seq == 0 {
            consumer::DeliverPolicy::All
        } else {
            consumer::DeliverPolicy::ByStartSequence { start_sequence: last_seq + 1 }
        };
        h.stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(CONSUMER.into()),
                deliver_policy,
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                max_ack_pending: 100_000,
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("creating the learner's durable consumer")
    })
}

/// Evaluate, log under `eval/`, remember the last and best results.
fn evaluate(
    env: &mut dyn o2o_envs::Env,
    agent: &mut dyn Agent,
    device: Device,
    config: &RunConfig,
    state: &mut RunnerState,
    logger: &mut Logger,
) -> Result<()> {
    let r = eval::evaluate(env, agent, device, config.seed, config.eval.episodes, state.step)?;
    logger.log(state.grad_step, state.env_step, &r.values())?;
    logger.flush()?;
    state.record_eval(r);
    Ok(())
}

/// The checkpoint: agent, replay buffer, runner state with `stream_seq`, and `fleet.json`.
#[allow(clippy::too_many_arguments)]
fn save(
    dir: &Path,
    config: &RunConfig,
    state: &mut RunnerState,
    fleet: &FleetState,
    rng: &ChaCha8Rng,
    agent: &dyn Agent,
    replay: &ReplayBuffer,
    logger: &mut Logger,
) -> Result<PathBuf> {
    checkpoint::mark(dir, state, rng, logger)?;
    state.stream_seq = Some(fleet.last_seq);
    checkpoint::write(dir, state, config.checkpoint.keep, |tmp| {
        agent.save(&tmp.join(checkpoint::AGENT)).context("saving the agent")?;
        replay.save(&tmp.join(checkpoint::REPLAY)).context("saving the replay buffer")?;
        rundir::write_json(&tmp.join(FLEET_STATE), fleet)
    })
}

/// How old the transitions the learner takes into its replay buffer are, over one log window:
/// policy versions behind the newest it has published, and seconds since the actor sealed their
/// batch (with actors on other machines, as good as the clocks agree). Without backpressure this
/// grew to minutes: the learner read the stream in order, far behind the actors.
#[derive(Debug, Default, PartialEq)]
struct DataAge {
    rows: u64,
    versions: f64,
    seconds: f64,
    max_s: f64,
}

impl DataAge {
    /// `rows` rows acted with version `acted` and sealed at `sent_ms`, taken in at `now_ms`
    /// while the newest published version is `newest`.
    fn add(&mut self, rows: u64, newest: u64, acted: u64, sent_ms: u64, now_ms: u64) {
        if rows == 0 {
            return;
        }
        let s = (now_ms as f64 - sent_ms as f64) / 1000.0;
        self.versions += newest.saturating_sub(acted) as f64 * rows as f64;
        self.seconds += s * rows as f64;
        self.max_s = if self.rows == 0 { s } else { self.max_s.max(s) };
        self.rows += rows;
    }

    /// The window's means per row and its oldest, as metrics (none without rows); the next
    /// window starts empty.
    fn take(&mut self) -> Vec<(String, f64)> {
        let a = std::mem::take(self);
        if a.rows == 0 {
            return Vec::new();
        }
        let n = a.rows as f64;
        vec![
            ("fleet/data_age_versions".into(), a.versions / n),
            ("fleet/data_age_s".into(), a.seconds / n),
            ("fleet/data_age_s_max".into(), a.max_s),
        ]
    }
}

/// Which actors are alive (their liveness keys), and how fast each one's transitions arrive.
#[derive(Default)]
struct Liveness {
    known: BTreeSet<String>,
    last_poll: Option<Instant>,
    rows_since: BTreeMap<String, u64>,
}

impl Liveness {
    fn rows(&mut self, actor: &str, n: u64) {
        *self.rows_since.entry(actor.to_string()).or_default() += n;
    }

    /// About once a second: list the liveness keys, log joins, departures and throughput.
    fn poll(&mut self, bus: &Bus, h: &RunHandles, logger: &mut Logger, state: &RunnerState) -> Result<()> {
        let now = Instant::now();
        let dt = match self.last_poll {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => return Ok(()),
            Some(t) => now.duration_since(t).as_secs_f64(),
            None => 0.0,
        };
        self.last_poll = Some(now);
        // With the server away the bucket cannot be read: no news, not everyone leaving.
        let Some(beats) = bus.block_on(async {
            let mut out: Vec<ActorBeat> = Vec::new();
            let mut keys = h.actors.keys().await.ok()?;
            while let Some(k) = keys.next().await {
                let v = h.actors.get(k.ok()?).await.ok()?;
                if let Some(b) = v.and_then(|v| serde_json::from_slice::<ActorBeat>(&v).ok()) {
                    out.push(b);
                }
            }
            Some(out)
        }) else {
            return Ok(());
        };
        let alive: BTreeSet<String> = beats.iter().map(|b| b.actor.clone()).collect();
        let mut values: Vec<(String, f64)> = Vec::new();
        for a in alive.difference(&self.known) {
            eprintln!("fleet learner: actor {a} joined");
            values.push((format!("fleet/actor/{a}/joined"), 1.0));
        }
        for a in self.known.difference(&alive) {
            eprintln!("fleet learner: actor {a} left (no liveness beat within its TTL)");
            values.push((format!("fleet/actor/{a}/left"), 1.0));
        }
        if dt > 0.0 {
            for b in &beats {
                let rows = self.rows_since.get(&b.actor).copied().unwrap_or(0);
                values.push((format!("fleet/actor/{}/transitions_per_s", b.actor), rows as f64 / dt));
                values.push((format!("fleet/actor/{}/paused", b.actor), if b.paused { 1.0 } else { 0.0 }));
                values.push((format!("fleet/actor/{}/policy_version", b.actor), b.policy_version as f64));
            }
        }
        values.push(("fleet/actors".into(), alive.len() as f64));
        self.rows_since.clear();
        self.known = alive;
        let named: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        logger.log(state.grad_step, state.env_step, &named)
    }
}

/// The learner run's names on the server (for tools and tests).
pub fn names(dir: &Path) -> Names {
    Names::new(&run_id(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gap below the stream's first message is what its limits removed: skipped and counted;
    /// a gap inside the stream is a lost delivery, asked for again.
    #[test]
    fn a_gap_below_the_streams_start_is_skipped_as_expired() {
        assert_eq!(skip_expired(10, 25), (24, 14));
        assert_eq!(skip_expired(10, 11), (10, 0));
        assert_eq!(skip_expired(10, 3), (10, 0));
        assert_eq!(skip_expired(0, 1), (0, 0));
    }

    /// Each actor's batches counted against its own numbers: in order nothing, a skipped number
    /// a gap, a number again a duplicate; resumable from the counters.
    #[test]
    fn actor_batches_are_checked_for_gaps_and_duplicates() {
        let mut f = FleetState::default();
        for (actor, batch) in [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)] {
            f.count_batch(actor, batch);
        }
        assert_eq!((f.batch_gaps, f.batch_duplicates), (0, 0));
        assert_eq!(f.next_batch, BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 2)]));
        f.count_batch("a", 5);
        assert_eq!((f.batch_gaps, f.batch_duplicates), (2, 0), "3 and 4 never came");
        f.count_batch("b", 1);
        f.count_batch("a", 4);
        assert_eq!((f.batch_gaps, f.batch_duplicates), (2, 2));
        assert_eq!(f.next_batch["a"], 6);
        let back: FleetState = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        let old: FleetState = serde_json::from_str(
            r#"{"last_seq":3,"consumed":9,"sampled":0,"rejected":0,"duplicates":0,"per_actor":{},"policy_version":0}"#,
        )
        .unwrap();
        assert_eq!((old.batch_gaps, old.next_batch.len()), (0, 0), "a checkpoint from before the counters");
    }

    /// Means per row over a window, the oldest batch, then an empty window.
    #[test]
    fn data_age_is_averaged_per_row_over_a_window() {
        let mut a = DataAge::default();
        assert!(a.take().is_empty());
        a.add(10, 5, 5, 1_000, 1_500);
        a.add(30, 5, 1, 1_000, 3_000);
        a.add(0, 9, 0, 0, 1_000_000);
        let v = a.take();
        assert_eq!(
            v,
            vec![
                ("fleet/data_age_versions".to_string(), 3.0),
                ("fleet/data_age_s".to_string(), (10.0 * 0.5 + 30.0 * 2.0) / 40.0),
                ("fleet/data_age_s_max".to_string(), 2.0),
            ]
        );
        assert_eq!(a, DataAge::default());
        assert!(a.take().is_empty());
    }
}
