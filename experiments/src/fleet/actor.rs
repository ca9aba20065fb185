//! The fleet actor: the runner's acting half ([`Actor`]) with a policy whose weights come from
//! the learner's object store and a [`StreamSink`] that publishes its transitions.
//!
//! - Transitions go out in batches of `batch`; a batch leaves the actor's memory only when the
//!   server has acknowledged it (stored in the stream). Unacknowledged batches wait in a
//!   bounded spool, oldest first, and are published again (same message id, so the stream's
//!   duplicate window stores each once) when the server answers again; with the spool full the
//!   actor waits rather than drop anything.
//! - Weights: the actor acts uniformly at random until the learner publishes version 1, then
//!   with the stochastic policy; it takes a newer version between episodes. When its version is
//!   more than `max_policy_lag` behind the newest announced one it pauses (no env step) until it
//!   holds one within the lag, swapping right away (even mid-episode) once it can fetch it.
//! - Backpressure: the learner publishes how far it has read the stream; an actor pauses while
//!   `max_backlog` messages or more wait beyond that ([`Backpressure`]), so the stream never
//!   holds much more than the learner will soon read, and what it trains on is recent.
//! - Liveness: a beat in the actors bucket about once a second (the bucket's TTL removes an
//!   actor that stops beating); a clean exit deletes its key.

use super::message::{self, Batch, Format, Row, SCHEMA};
use super::{keys, ActorBeat, Bus, Connection, FleetConfig, LearnerStatus, PolicyVersion};
use crate::run::actor::{derive_seed, stream, Actor, AgentPolicy, Policy, Transition, TransitionSink, UniformPolicy};
use crate::run::config::RunConfig;
use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, kv, message::PublishMessage as Publish, object_store};
use o2o_agents::Agent;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tch::Device;
use tokio::io::AsyncReadExt;

/// A [`TransitionSink`] that publishes batches to the run's stream and keeps what the server
/// has not acknowledged.
pub struct StreamSink<'b> {
    bus: &'b Bus,
    subject: String,
    actor: String,
    obs_dim: usize,
    act_dim: usize,
    rows: usize,
    max_delay: Duration,
    pending: Vec<Row>,
    /// When the first pending row came.
    pending_since: Option<Instant>,
    next_batch: u64,
    spool: VecDeque<(String, Vec<u8>, usize)>,
    spool_cap: usize,
    acked: u64,
    last_seq: u64,
    timeout: Duration,
    format: Format,
    /// The policy version the next rows are acted with.
    pub policy_version: u64,
    /// Seconds spent waiting with a full spool.
    pub blocked_s: f64,
}

impl<'b> StreamSink<'b> {
    /// A sink for actor instance `actor` with this env's sizes.
    pub fn new(bus: &'b Bus, actor: &str, obs_dim: usize, act_dim: usize, fleet: &FleetConfig) -> Self {
        Self {
            bus,
            subject: bus.names.subject(actor),
            actor: actor.to_string(),
            obs_dim,
            act_dim,
            rows: fleet.batch.max(1),
            max_delay: fleet.max_batch_delay,
            pending: Vec::new(),
            pending_since: None,
            next_batch: 0,
            spool: VecDeque::new(),
            spool_cap: fleet.spool_batches.max(1),
            acked: 0,
            last_seq: 0,
            timeout: fleet.ack_timeout,
            format: fleet.message_format,
            policy_version: 0,
            blocked_s: 0.0,
        }
    }

    /// Transitions the server has acknowledged.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The stream sequence of the newest batch the server has acknowledged (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Batches waiting for an acknowledgement.
    pub fn spooled(&self) -> usize {
        self.spool.len()
    }

    /// Close the current batch (even if short) into the spool.
    pub fn seal(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.pending_since = None;
        let b = Batch {
            schema: SCHEMA,
            run_id: self.bus.names.run_id.clone(),
            actor: self.actor.clone(),
            batch: self.next_batch,
            policy_version: self.policy_version,
            sent_ms: message::now_ms(),
            obs_dim: self.obs_dim,
            act_dim: self.act_dim,
            transitions: std::mem::take(&mut self.pending),
        };
        self.next_batch += 1;
        self.spool.push_back((b.msg_id(), b.encode_as(self.format), b.transitions.len()));
    }

    /// Publish spooled batches oldest first, each waiting for its acknowledgement; stops at the
    /// first that is not acknowledged (server away). Returns whether the spool is empty.
    pub fn flush(&mut self) -> bool {
        while let Some((id, bytes, n)) = self.spool.front() {
            let (subject, timeout) = (self.subject.clone(), self.timeout);
            let publish = Publish::build().payload(bytes.clone().into()).message_id(id.as_str());
            let js = self.bus.js();
            let ack = self.bus.block_on(async {
                let ack = tokio::time::timeout(timeout, async {
                    js.send_publish(subject, publish).await?.await.map_err(async_nats::Error::from)
                })
                .await;
                ack.ok().and_then(Result::ok)
            });
            let Some(ack) = ack else { return false };
            self.last_seq = self.last_seq.max(ack.sequence);
            self.acked += *n as u64;
            self.spool.pop_front();
        }
        true
    }

    /// Seal and flush everything, retrying until `deadline`; an error if some remain.
    pub fn finish(&mut self, deadline: Duration) -> Result<()> {
        self.seal();
        let t0 = Instant::now();
        while !self.flush() {
            if t0.elapsed() > deadline {
                bail!(
                    "{} batches of actor {} were not acknowledged by the server within {deadline:?}",
                    self.spool.len(),
                    self.actor
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl TransitionSink for StreamSink<'_> {
    fn push(&mut self, t: &Transition) -> Result<()> {
        self.pending.push(Row::from(t));
        let since = *self.pending_since.get_or_insert_with(Instant::now);
        if self.pending.len() >= self.rows || since.elapsed() >= self.max_delay {
            self.seal();
            self.flush();
            // Full spool: wait for the server rather than drop anything.
            let t0 = Instant::now();
            while self.spool.len() >= self.spool_cap {
                std::thread::sleep(Duration::from_millis(100));
                self.flush();
            }
            self.blocked_s += t0.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

/// What one actor process does.
pub struct ActorOptions {
    /// The server.
    pub conn: Connection,
    /// The learner's run id.
    pub run_id: String,
    /// The env to act in (default: the learner's); it must have the learner's spaces.
    pub env: Option<String>,
    /// This actor's index (its episode seeds and exploration noise derive from it).
    pub index: u64,
    /// Fleet settings.
    pub fleet: FleetConfig,
    /// Stop after this many env steps (default: when the learner says it is done).
    pub max_steps: Option<u64>,
    /// How long to wait for the learner's run to appear on the server.
    pub wait_for_learner: Duration,
    /// At most this many env steps per second (a robot's control rate; default: as fast as
    /// the env steps).
    pub rate_hz: Option<f64>,
}

/// How an actor ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorReport {
    /// Its instance id.
    pub actor: String,
    /// Env steps taken.
    pub steps: u64,
    /// Episodes finished.
    pub episodes: u64,
    /// Transitions acknowledged by the server.
    pub acked: u64,
    /// The last policy version it acted with.
    pub policy_version: u64,
    /// Seconds paused for a stale policy.
    pub paused_s: f64,
    /// Seconds paused for the learner's backlog ([`Backpressure`]).
    pub backlog_s: f64,
}

/// Backpressure: an actor holds (takes no env step) while the stream has `max_backlog` or more
/// messages beyond the learner's position, up to the actor's own newest acknowledged one, and
/// goes on once that is down to half (so an actor at the bound does not flap every batch).
/// Counting the stream's sequences counts every actor's messages: together the actors keep at
/// most about `max_backlog` (plus one batch each) unread, whatever their number.
#[derive(Debug, Clone, PartialEq)]
pub struct Backpressure {
    max: u64,
    learner_seq: Option<u64>,
    holding: bool,
}

impl Backpressure {
    /// Hold at `max` messages unread (0: never).
    pub fn new(max: u64) -> Self {
        Self { max, learner_seq: None, holding: false }
    }

    /// The learner's position, from its status (`None`: a learner that does not say; no hold).
    pub fn learner_at(&mut self, seq: Option<u64>) {
        self.learner_seq = seq;
    }

    /// Messages beyond the learner's position up to `acked_seq` (0 with no position known).
    pub fn backlog(&self, acked_seq: u64) -> u64 {
        self.learner_seq.map_or(0, |l| acked_seq.saturating_sub(l))
    }

    /// Whether to hold now, with `acked_seq` the actor's newest acknowledged sequence.
    pub fn hold(&mut self, acked_seq: u64) -> bool {
        let b = self.backlog(acked_seq);
        self.holding =
            self.max > 0 && self.learner_seq.is_some() && if self.holding { b > self.max / 2 } else { b >= self.max };
        self.holding
    }
}

/// Hold (no env step; beats marked paused) until the learner has read to within half the bound
/// of this actor's newest batch; true when the learner finished meanwhile.
fn hold_for_learner(
    bus: &Bus,
    control: &kv::Store,
    beats: &kv::Store,
    instance: &str,
    sink: &StreamSink,
    version: u64,
    pressure: &mut Backpressure,
) -> bool {
    eprintln!(
        "fleet actor {instance}: the learner has not read {} of the stream's messages (up to this actor's newest, {}), max_backlog {}; pausing",
        pressure.backlog(sink.last_seq()),
        sink.last_seq(),
        pressure.max
    );
    loop {
        beat(bus, beats, instance, sink, version, true, 0.0);
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(Some(s)) = bus.get_json::<LearnerStatus>(control, keys::STATUS) {
            if s.finished {
                return true;
            }
            pressure.learner_at(s.stream_seq);
        }
        if !pressure.hold(sink.last_seq()) {
            eprintln!(
                "fleet actor {instance}: resumed, the learner's backlog down to {} messages",
                pressure.backlog(sink.last_seq())
            );
            return false;
        }
    }
}

/// The weights an actor acts with.
struct Weights<'b> {
    bus: &'b Bus,
    store: object_store::ObjectStore,
    control: kv::Store,
    agent: Box<dyn Agent>,
    version: u64,
    latest: Option<PolicyVersion>,
}

impl Weights<'_> {
    /// Read the newest announced version (keeps the last one known when the server is away).
    fn refresh(&mut self) {
        if let Ok(Some(v)) = self.bus.get_json::<PolicyVersion>(&self.control, keys::POLICY) {
            self.latest = Some(v);
        }
    }

    fn lag(&self) -> u64 {
        self.latest.as_ref().map_or(0, |l| l.version.saturating_sub(self.version))
    }

    /// Fetch and load the newest announced weights (the actor part only: the actor keeps its
    /// own random stream); false when they cannot be fetched now.
    fn swap(&mut self) -> bool {
        let Some(latest) = self.latest.clone() else { return false };
        if latest.version <= self.version {
            return true;
        }
        let bytes = self.bus.block_on(async {
            let mut obj = self.store.get(latest.object.as_str()).await.ok()?;
            let mut buf = Vec::new();
            obj.read_to_end(&mut buf).await.ok()?;
            Some(buf)
        });
        let Some(bytes) = bytes else { return false };
        let Ok(tmp) = tempfile::Builder::new().prefix("o2o-policy-").tempdir() else { return false };
        let file = tmp.path().join("agent.ot");
        if std::fs::write(&file, &bytes).is_err() {
            return false;
        }
        match self.agent.load_parts(&file, &["actor"]) {
            Ok(()) => {
                self.version = latest.version;
                true
            }
            Err(e) => {
                eprintln!("fleet actor: weights {} do not load: {e}", latest.object);
                false
            }
        }
    }
}

/// An actor instance's id: `actor-<index>-<pid>-<nonce>`. The random nonce keeps a restarted
/// actor (same index, and in a container often the same pid) apart from its earlier life: its
/// batch counter starts again at 0, and with the old id the stream's duplicate window
/// (`Nats-Msg-Id` = `<actor>/<batch>`) would drop its first batches silently and the learner
/// would count them as duplicates.
pub fn instance_id(index: u64) -> String {
    format!("actor-{index}-{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// Run one actor until the learner finishes (or `max_steps`).
pub fn run_actor(o: ActorOptions) -> Result<ActorReport> {
    let instance = instance_id(o.index);
    let bus = Bus::connect(&Connection { name: instance.clone(), ..o.conn.clone() }, &o.run_id, o.fleet.ack_timeout)?;
    let control = bus.control(o.wait_for_learner)?;
    let text = bus
        .block_on(control.get(keys::CONFIG))
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("reading the learner's config")?;
    let text = String::from_utf8(text.context("the learner has not published its config yet")?.to_vec())
        .context("the learner's config is not text")?;
    let config = RunConfig::from_toml_str(&text, &format!("the config of learner run {}", o.run_id))?;
    let env_id = o.env.clone().unwrap_or_else(|| config.env.clone());
    let env = o2o_envs::make(&env_id).with_context(|| format!("making the env {env_id}"))?;
    let (obs_dim, act_dim) = (env.observation_space().dim(), env.action_space().dim());
    let probe = o2o_envs::make(&config.env).with_context(|| format!("making the learner's env {}", config.env))?;
    if (probe.observation_space().dim(), probe.action_space().dim()) != (obs_dim, act_dim) {
        bail!(
            "--env {env_id}: observations {obs_dim} and actions {act_dim}, but the learner's env {} has {} and {}",
            config.env,
            probe.observation_space().dim(),
            probe.action_space().dim()
        );
    }
    let seed = derive_seed(config.seed, stream::FLEET_ACTOR, o.index);
    let agent =
        o2o_agents::build(&config.agent, obs_dim, act_dim, Device::Cpu, seed).context("building the actor's policy")?;
    let js = bus.js();
    let store = bus
        .block_on(js.get_object_store(bus.names.weights()))
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("opening the weights store")?;
    let beats = bus
        .block_on(js.get_key_value(bus.names.actors()))
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("opening the liveness bucket")?;
    let mut weights = Weights { bus: &bus, store, control: control.clone(), agent, version: 0, latest: None };
    let mut actor = Actor::new(env, seed, 0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, stream::RUNNER_RNG, 0));
    let mut sink = StreamSink::new(&bus, &instance, obs_dim, act_dim, &o.fleet);
    let (mut steps, mut episodes, mut paused_s, mut backlog_s) = (0u64, 0u64, 0.0f64, 0.0f64);
    let mut pressure = Backpressure::new(o.fleet.max_backlog);
    let mut last_beat = (Instant::now() - Duration::from_secs(10), 0u64);
    let t_start = Instant::now();
    eprintln!("fleet actor {instance}: acting in {env_id} for learner run {}", o.run_id);
    loop {
        // At episode boundaries and every batch: the newest version, the learner's status.
        let boundary = actor.at_episode_boundary();
        if boundary || steps % o.fleet.batch as u64 == 0 {
            weights.refresh();
            if let Ok(Some(s)) = bus.get_json::<LearnerStatus>(&control, keys::STATUS) {
                if s.finished {
                    break;
                }
                pressure.learner_at(s.stream_seq);
            }
            // Backpressure: hold while the learner is too far behind this actor's newest batch.
            if pressure.hold(sink.last_seq()) {
                let t0 = Instant::now();
                let finished =
                    hold_for_learner(&bus, &control, &beats, &instance, &sink, weights.version, &mut pressure);
                backlog_s += t0.elapsed().as_secs_f64();
                if finished {
                    break;
                }
            }
        }
        if o.max_steps.is_some_and(|m| steps >= m) {
            break;
        }
        if boundary {
            weights.swap();
        }
        // Bounded staleness: pause rather than act with a policy more than K versions old.
        let mut paused = false;
        let t0 = Instant::now();
        while weights.lag() > o.fleet.max_policy_lag {
            if !paused {
                eprintln!("fleet actor {instance}: policy version {} is {} behind the newest ({}), more than max_policy_lag {}; pausing", weights.version, weights.lag(), weights.latest.as_ref().map_or(0, |l| l.version), o.fleet.max_policy_lag);
                paused = true;
            }
            beat(&bus, &beats, &instance, &sink, weights.version, true, 0.0);
            if weights.swap() && weights.lag() <= o.fleet.max_policy_lag {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            weights.refresh();
        }
        if paused {
            paused_s += t0.elapsed().as_secs_f64();
            eprintln!("fleet actor {instance}: resumed with policy version {}", weights.version);
        }
        sink.policy_version = weights.version;
        let ended = if weights.version == 0 {
            actor.step(&mut UniformPolicy { rng: &mut rng, dim: act_dim }, &mut sink)?
        } else {
            actor.step(
                &mut AgentPolicy { agent: &mut *weights.agent, device: Device::Cpu, deterministic: false }
                    as &mut dyn Policy,
                &mut sink,
            )?
        };
        steps += 1;
        if let Some(hz) = o.rate_hz.filter(|h| *h > 0.0) {
            // Pace: step k is not taken before k / hz seconds after the start.
            let due = t_start + Duration::from_secs_f64(steps as f64 / hz);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        if ended.is_some() {
            episodes += 1;
        }
        let dt = last_beat.0.elapsed().as_secs_f64();
        if dt >= 1.0 {
            beat(&bus, &beats, &instance, &sink, weights.version, false, (steps - last_beat.1) as f64 / dt);
            last_beat = (Instant::now(), steps);
        }
    }
    sink.finish(Duration::from_secs(30))?;
    let _ = bus.block_on(beats.delete(instance.as_str()));
    let report = ActorReport {
        actor: instance.clone(),
        steps,
        episodes,
        acked: sink.acked(),
        policy_version: weights.version,
        paused_s,
        backlog_s,
    };
    eprintln!(
        "fleet actor {instance}: done — {} steps, {} episodes, {} transitions acknowledged, policy version {}",
        report.steps, report.episodes, report.acked, report.policy_version
    );
    Ok(report)
}

/// One liveness beat (best effort: a server away just misses it).
fn beat(bus: &Bus, beats: &kv::Store, instance: &str, sink: &StreamSink, version: u64, paused: bool, steps_per_s: f64) {
    let b = ActorBeat {
        actor: instance.to_string(),
        acked: sink.acked(),
        spooled: sink.spooled(),
        policy_version: version,
        paused,
        steps_per_s,
    };
    let _ = bus.put_json(beats, instance, &b);
}

/// Read every message of a run's stream (tools and tests): `(sequence, payload)`, oldest first.
pub fn read_stream(bus: &Bus) -> Result<Vec<(u64, Vec<u8>)>> {
    use futures::StreamExt;
    let js = bus.js();
    bus.block_on(async {
        let stream = js.get_stream(bus.names.stream()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let last = stream.get_info().await.map_err(|e| anyhow::anyhow!("{e}"))?.state.last_sequence;
        let mut out = Vec::new();
        if last == 0 {
            return Ok(out);
        }
        let c = stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig {
                deliver_policy: jetstream::consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut msgs = c.messages().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        while let Some(m) = tokio::time::timeout(Duration::from_secs(5), msgs.next()).await.ok().flatten() {
            let m = m.map_err(|e| anyhow::anyhow!("{e}"))?;
            let seq = m.info().map_err(|e| anyhow::anyhow!("{e}"))?.stream_sequence;
            out.push((seq, m.payload.to_vec()));
            if seq >= last {
                break;
            }
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds at the bound, goes on at half, and never without a learner position or a bound.
    #[test]
    fn backpressure_holds_at_the_bound_and_resumes_at_half() {
        let mut p = Backpressure::new(8);
        assert!(!p.hold(100), "no learner position known: no hold");
        p.learner_at(Some(0));
        assert!(!p.hold(7) && p.hold(8) && p.hold(9));
        p.learner_at(Some(4));
        assert!(p.hold(9), "backlog 5: still above half");
        p.learner_at(Some(5));
        assert!(!p.hold(9), "backlog 4: resumed");
        assert!(!p.hold(12) && p.hold(13));
        p.learner_at(Some(20));
        assert_eq!(p.backlog(13), 0, "a learner past this actor's newest");
        let mut off = Backpressure::new(0);
        off.learner_at(Some(0));
        assert!(!off.hold(1_000_000));
    }
}
