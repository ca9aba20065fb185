//! The fleet on a real nats-server (started by each test on 127.0.0.1, a free port, a
//! temporary JetStream store; killed when the test ends): the spool across a server restart,
//! a stale-policy actor pausing, and a learner with three actor processes training SAC on
//! HalfCheetah-v5 through kill -9 of an actor and of the learner, with refused messages.

mod common;

use common::{wait_for, Proc};
use o2o_experiments::fleet::actor::{instance_id, read_stream, run_actor, ActorOptions, StreamSink};
use o2o_experiments::fleet::learner::{declare, publish_weights, FleetState};
use o2o_experiments::fleet::message::{self, Batch, SCHEMA};
use o2o_experiments::fleet::server::NatsServer;
use o2o_experiments::fleet::{keys, ActorBeat, Bus, Connection, FleetConfig, LearnerStatus, PolicyVersion};
use o2o_experiments::{RunConfig, Transition, TransitionSink};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn transition(i: usize) -> Transition {
    Transition {
        obs: vec![i as f32, 0.5],
        action: vec![0.1],
        reward: i as f64,
        next_obs: vec![i as f32 + 1.0, 0.5],
        terminated: false,
        truncated: i % 10 == 9,
        intervention: false,
    }
}

fn fast() -> FleetConfig {
    FleetConfig { batch: 4, spool_batches: 64, ack_timeout: Duration::from_millis(500), ..FleetConfig::default() }
}

/// Rows per actor of every valid message with sequence ≤ `upto` (and every actor's sequences).
/// The key of the one liveness beat whose actor id starts with `prefix` (ids end in a random nonce).
fn beat_key(bus: &Bus, beats: &async_nats::jetstream::kv::Store, prefix: &str) -> String {
    use futures::StreamExt;
    let keys: Vec<String> = bus.block_on(async { beats.keys().await.unwrap().map(|k| k.unwrap()).collect().await });
    let mine: Vec<_> = keys.into_iter().filter(|k| k.starts_with(prefix)).collect();
    assert_eq!(mine.len(), 1, "beats under {prefix}: {mine:?}");
    mine[0].clone()
}

fn stream_rows(
    bus: &Bus,
    upto: u64,
    obs: usize,
    act: usize,
) -> (u64, BTreeMap<String, u64>, BTreeMap<String, Vec<u64>>, u64) {
    let (mut total, mut per, mut seqs, mut refused) = (0, BTreeMap::new(), BTreeMap::<String, Vec<u64>>::new(), 0);
    for (seq, payload) in read_stream(bus).unwrap() {
        match message::decode(&payload, &bus.names.run_id, obs, act) {
            Ok(b) => {
                seqs.entry(b.actor.clone()).or_default().push(seq);
                if seq <= upto {
                    total += b.transitions.len() as u64;
                    *per.entry(b.actor.clone()).or_default() += b.transitions.len() as u64;
                }
            }
            Err(_) if seq <= upto => refused += 1,
            Err(_) => {}
        }
    }
    (total, per, seqs, refused)
}

/// A restarted actor (same index and, in a container, often the same pid) is a new instance:
/// its batch numbers start again at 0 and must not meet the old ones in the duplicate window.
#[test]
fn a_restarted_actor_gets_a_new_instance_id() {
    let (a, b) = (instance_id(3), instance_id(3));
    let prefix = format!("actor-3-{}-", std::process::id());
    assert!(a.starts_with(&prefix) && b.starts_with(&prefix), "{a} {b}");
    assert_ne!(a, b);
    let batch = |actor: &str| Batch {
        schema: SCHEMA,
        run_id: "r".into(),
        actor: actor.into(),
        batch: 0,
        policy_version: 0,
        sent_ms: 0,
        obs_dim: 1,
        act_dim: 1,
        transitions: vec![],
    };
    assert_ne!(batch(&a).msg_id(), batch(&b).msg_id());
}

#[test]
fn the_test_server_starts_on_a_free_port_and_is_gone_after_drop() {
    let s = NatsServer::start().unwrap();
    let url = s.url();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(s);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the server still listens on {port} after drop"
    );
}

/// Acknowledged batches leave the actor; while the server is down they wait in the spool; after
/// the restart (file storage) the spool is flushed and the stream holds every row exactly once.
#[test]
fn the_spool_keeps_batches_across_a_server_restart() {
    let mut server = NatsServer::start().unwrap();
    let bus =
        Bus::connect(&Connection::new(&server.url(), "spool-test"), "spool-run", Duration::from_millis(500)).unwrap();
    declare(&bus, &fast()).unwrap();
    let mut sink = StreamSink::new(&bus, "a0", 2, 1, &fast());
    for i in 0..8 {
        sink.push(&transition(i)).unwrap();
    }
    assert_eq!((sink.acked(), sink.spooled()), (8, 0));
    server.kill();
    for i in 8..20 {
        sink.push(&transition(i)).unwrap();
    }
    assert_eq!(sink.acked(), 8, "nothing is acknowledged while the server is down");
    assert_eq!(sink.spooled(), 3);
    server.restart().unwrap();
    for i in 20..22 {
        sink.push(&transition(i)).unwrap();
    }
    sink.finish(Duration::from_secs(20)).unwrap();
    assert_eq!((sink.acked(), sink.spooled()), (22, 0));
    let msgs = read_stream(&bus).unwrap();
    let mut rewards: Vec<i64> = Vec::new();
    for (_, p) in &msgs {
        assert!(p.starts_with(message::MAGIC), "a batch in the binary format");
        let b = message::decode(p, "spool-run", 2, 1).unwrap();
        rewards.extend(b.transitions.iter().map(|r| r.reward as i64));
    }
    assert_eq!(rewards, (0..22).collect::<Vec<i64>>(), "every row once, in order");
}

/// A slow actor does not hold rows back for a full batch: once its first unpublished row has
/// waited `max_batch_delay`, the next row closes a shorter batch and it is published.
#[test]
fn a_slow_actor_publishes_a_short_batch_after_the_max_delay() {
    let server = NatsServer::start().unwrap();
    let bus = Bus::connect(&Connection::new(&server.url(), "delay-test"), "delay-run", Duration::from_secs(2)).unwrap();
    let fleet = FleetConfig { batch: 1000, max_batch_delay: Duration::from_millis(300), ..fast() };
    declare(&bus, &fleet).unwrap();
    let mut sink = StreamSink::new(&bus, "a0", 2, 1, &fleet);
    for i in 0..5 {
        sink.push(&transition(i)).unwrap();
    }
    assert_eq!(sink.acked(), 0, "5 rows of a 1000-row batch, well within the delay: nothing sent yet");
    std::thread::sleep(Duration::from_millis(350));
    sink.push(&transition(5)).unwrap();
    assert_eq!((sink.acked(), sink.spooled()), (6, 0), "the delay passed: the 6 rows went as one short batch");
    // The delay counts from the first row of the next batch, not from the last publish.
    sink.push(&transition(6)).unwrap();
    assert_eq!(sink.acked(), 6);
    let batches: Vec<usize> = read_stream(&bus)
        .unwrap()
        .iter()
        .map(|(_, p)| message::decode(p, "delay-run", 2, 1).unwrap().transitions.len())
        .collect();
    assert_eq!(batches, vec![6]);
}

/// Issue 47 item 5: the learner's stream has a max age and a max size (the defaults, or the
/// options), set again on a stream that exists (a resumed learner), and the size limit holds as
/// batches pour in: the oldest go.
#[test]
fn the_stream_is_bounded_by_age_and_size() {
    let server = NatsServer::start().unwrap();
    let bus = Bus::connect(&Connection::new(&server.url(), "bound-test"), "bound-run", Duration::from_secs(2)).unwrap();
    let info = |bus: &Bus| {
        bus.block_on(async { bus.js().get_stream(bus.names.stream()).await.unwrap().get_info().await.unwrap() })
    };
    declare(&bus, &FleetConfig::default()).unwrap();
    let i = info(&bus);
    assert_eq!((i.config.max_age, i.config.max_bytes), (Duration::from_secs(24 * 3600), 1 << 30));
    let small = FleetConfig { stream_max_bytes: 8 << 10, stream_max_age: Duration::from_secs(600), ..fast() };
    declare(&bus, &small).unwrap();
    let i = info(&bus);
    assert_eq!((i.config.max_age, i.config.max_bytes), (Duration::from_secs(600), 8 << 10));
    let mut sink = StreamSink::new(&bus, "a0", 2, 1, &small);
    for i in 0..400 {
        sink.push(&transition(i)).unwrap();
    }
    sink.finish(Duration::from_secs(20)).unwrap();
    let i = info(&bus);
    assert_eq!(i.state.last_sequence, 100);
    assert!(i.state.bytes <= 8 << 10 && i.state.first_sequence > 1, "{:?}", i.state);
}

/// A tiny SAC config on HalfCheetah-v5 (nets of 32 units).
fn tiny_config(online: u64) -> String {
    common::tiny_fleet_sac("HalfCheetah-v5", online)
}

/// Options for an actor thread of run `{name}-run` on the server at `url`: the learner's env,
/// index 0, `max_steps` env steps at most `rate_hz` a second, ten seconds to find the learner.
fn in_process_actor(url: &str, name: &str, fleet: FleetConfig, max_steps: u64, rate_hz: Option<f64>) -> ActorOptions {
    ActorOptions {
        conn: Connection::new(url, &format!("{name}-actor")),
        run_id: format!("{name}-run"),
        env: None,
        index: 0,
        fleet,
        max_steps: Some(max_steps),
        wait_for_learner: Duration::from_secs(10),
        rate_hz,
    }
}

/// An actor whose policy falls more than `max_policy_lag` versions behind pauses, and acts
/// again once it holds a recent one. The test plays the learner's part on the server.
#[test]
fn a_stale_policy_actor_pauses_until_it_has_recent_weights() {
    let server = NatsServer::start().unwrap();
    let bus = Bus::connect(&Connection::new(&server.url(), "stale-test"), "stale-run", Duration::from_secs(2)).unwrap();
    let fleet = FleetConfig { batch: 16, max_policy_lag: 1, ..FleetConfig::default() };
    let h = declare(&bus, &fleet).unwrap();
    let config = RunConfig::from_toml_str(&format!("preset = \"tiny\"\n{}", tiny_config(1000)), "tiny").unwrap();
    bus.block_on(h.control.put(keys::CONFIG, config.to_toml_string().unwrap().into_bytes().into())).unwrap();
    bus.put_json(&h.control, keys::STATUS, &LearnerStatus { finished: false, consumed: 0, stream_seq: None }).unwrap();
    let agent = o2o_experiments::run::prepare::build_agent(&config, 17, 6, tch::Device::Cpu).unwrap();
    publish_weights(&bus, &h, &*agent, 1, 0).unwrap();

    let (url, actor_fleet) = (server.url(), fleet.clone());
    let actor = std::thread::spawn(move || run_actor(in_process_actor(&url, "stale", actor_fleet, 600, Some(400.0))));
    let count = |bus: &Bus| read_stream(bus).unwrap().len();
    let t0 = Instant::now();
    while count(&bus) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(30), "the actor published nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Version 4 announced, its weights not there yet: lag 3 > 1.
    bus.put_json(
        &h.control,
        keys::POLICY,
        &PolicyVersion { version: 4, object: "policy-00000004".into(), grad_step: 40 },
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let before = count(&bus);
    std::thread::sleep(Duration::from_millis(1200));
    let after = count(&bus);
    assert_eq!(before, after, "a paused actor publishes nothing");
    let beats = bus.block_on(bus.js().get_key_value(bus.names.actors())).unwrap();
    let key = beat_key(&bus, &beats, &format!("actor-0-{}-", std::process::id()));
    let beat: ActorBeat =
        serde_json::from_slice(&bus.block_on(beats.get(key.as_str())).unwrap().expect("a liveness beat")).unwrap();
    assert!(beat.paused && beat.policy_version == 1, "{beat:?}");
    // The weights arrive: the actor swaps and goes on.
    publish_weights(&bus, &h, &*agent, 4, 40).unwrap();
    let report = actor.join().unwrap().unwrap();
    assert_eq!(report.steps, 600);
    assert_eq!(report.policy_version, 4);
    assert!(report.paused_s > 1.5, "paused {} s", report.paused_s);
    assert_eq!(report.acked, 600);
    assert!(count(&bus) > after);
}

/// Issue 47 item 5, backpressure: with the learner's position stuck (a learner stopped or
/// slow), an actor stops at `max_backlog` unread messages instead of flooding the stream, beats
/// `paused`, goes on once the learner has read half of them, and runs to its end while the
/// learner keeps up. The test plays the learner's part on the server.
#[test]
fn an_actor_stops_at_the_backlog_bound_while_the_learner_does_not_read() {
    let server = NatsServer::start().unwrap();
    let bus =
        Bus::connect(&Connection::new(&server.url(), "backlog-test"), "backlog-run", Duration::from_secs(2)).unwrap();
    let fleet = FleetConfig { batch: 16, max_backlog: 6, ..FleetConfig::default() };
    let h = declare(&bus, &fleet).unwrap();
    let config = RunConfig::from_toml_str(&format!("preset = \"tiny\"\n{}", tiny_config(1000)), "tiny").unwrap();
    bus.block_on(h.control.put(keys::CONFIG, config.to_toml_string().unwrap().into_bytes().into())).unwrap();
    let read_to = |seq: usize| {
        bus.put_json(
            &h.control,
            keys::STATUS,
            &LearnerStatus { finished: false, consumed: 0, stream_seq: Some(seq as u64) },
        )
        .unwrap()
    };
    read_to(0);
    let url = server.url();
    let actor = std::thread::spawn(move || run_actor(in_process_actor(&url, "backlog", fleet, 400, None)));
    let count = |bus: &Bus| read_stream(bus).unwrap().len();
    // Unthrottled, its 400 steps (25 messages) would take well under a second.
    wait_for("the actor to fill the backlog", Duration::from_secs(60), || count(&bus) >= 6);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(count(&bus), 6, "an actor with 6 unread messages publishes no more");
    let beats = bus.block_on(bus.js().get_key_value(bus.names.actors())).unwrap();
    let key = beat_key(&bus, &beats, &format!("actor-0-{}-", std::process::id()));
    let beat: ActorBeat =
        serde_json::from_slice(&bus.block_on(beats.get(key.as_str())).unwrap().expect("a liveness beat")).unwrap();
    assert!(beat.paused, "{beat:?}");
    // The learner reads half: the actor goes on, up to the bound again.
    read_to(3);
    wait_for("the actor to go on", Duration::from_secs(30), || count(&bus) >= 9);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(count(&bus), 9, "held again at 6 unread");
    // A learner that keeps up: the actor runs to its end.
    while !actor.is_finished() {
        read_to(count(&bus));
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = actor.join().unwrap().unwrap();
    assert_eq!((report.steps, report.acked), (400, 400));
    assert!(report.backlog_s > 2.0, "paused {} s for the backlog", report.backlog_s);
    assert_eq!(count(&bus), 25);
}

fn o2o() -> Command {
    Command::new(common::O2O)
}

fn spawn_actor(url: &str, run: &str, index: u64, log: &Path) -> Proc {
    let child = o2o()
        .args([
            "fleet",
            "actor",
            "--learner-run",
            run,
            "--nats",
            url,
            "--index",
            &index.to_string(),
            "--batch",
            "16",
            "--rate-hz",
            "250",
            "--max-policy-lag",
            "1000",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Proc(child)
}

fn spawn_learner(url: &str, args: &[&str], log: &Path) -> Proc {
    let child = o2o()
        .args([
            "fleet",
            "learner",
            "--nats",
            url,
            "--batch",
            "16",
            "--publish-every",
            "100",
            "--liveness-ttl",
            "2",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--rerun=off",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Proc(child)
}

/// The loop step (transitions consumed) of the learner's newest checkpoint, 0 when none.
fn newest_checkpoint(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("checkpoints"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_string_lossy().strip_prefix("step-").and_then(|n| n.parse().ok()))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Done-when of issue 26: a learner and actor processes (the real `o2o` binary) train SAC on
/// HalfCheetah through a local nats-server, through every failure of the issue's item 4, in
/// one run:
/// 1. kill -9 one of three actors mid-episode: the learner goes on with the other two (it
///    checkpoints again), and every transition the dead actor had acknowledged is in its buffer;
/// 2. kill -9 nats-server and start it again on the same store: the clients reconnect, the
///    learner goes on, nothing acknowledged is lost;
/// 3. kill -9 the learner and restart it: it continues from its checkpoint, and in the end the
///    transitions it consumed are exactly those in the stream up to its position, none twice;
/// 4. a malformed message and one of another run are refused, logged and counted, and the
///    learner goes on.
#[test]
fn a_learner_and_actor_processes_train_sac_through_kills_and_restarts() {
    let mut server = NatsServer::start().unwrap();
    let url = server.url();
    let work = tempfile::Builder::new().prefix("fleet-e2e-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let config = work.join("tiny.toml");
    std::fs::write(&config, tiny_config(3000)).unwrap();
    let runs = work.join("runs");
    let mut learner = spawn_learner(
        &url,
        &["--config", config.to_str().unwrap(), "--runs-dir", runs.to_str().unwrap()],
        &work.join("learner-1.log"),
    );
    let mut first = String::new();
    BufReader::new(learner.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let run = first.trim().to_string();
    assert!(
        !run.is_empty(),
        "the learner printed no run id; log: {}",
        std::fs::read_to_string(work.join("learner-1.log")).unwrap_or_default()
    );
    let dir: PathBuf = runs.join(&run);
    let logs = || {
        (1..=2)
            .map(|i| std::fs::read_to_string(work.join(format!("learner-{i}.log"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    };

    let mut actors: Vec<Proc> =
        (0..3).map(|i| spawn_actor(&url, &run, i, &work.join(format!("actor-{i}.log")))).collect();
    let bus = Bus::connect(&Connection::new(&url, "e2e-test"), &run, Duration::from_secs(2)).unwrap();
    // Two messages the learner must refuse: bytes that are not the format, and another run's.
    let subject = bus.names.subject("intruder");
    let other = Batch {
        schema: SCHEMA,
        run_id: "another-run".into(),
        actor: "intruder".into(),
        batch: 0,
        policy_version: 0,
        sent_ms: 0,
        obs_dim: 17,
        act_dim: 6,
        transitions: vec![],
    };
    wait_for("the stream", Duration::from_secs(60), || read_stream(&bus).is_ok());
    for payload in [b"\x01\x02 not a batch".to_vec(), other.encode()] {
        bus.block_on(async { bus.js().publish(subject.clone(), payload.into()).await.unwrap().await.unwrap() });
    }

    // 1. kill -9 actor 2 once the learner has a checkpoint; the learner checkpoints again after.
    wait_for("the learner's first checkpoint", Duration::from_secs(90), || newest_checkpoint(&dir) > 0);
    let victim_pid = actors[2].0.id();
    actors[2].0.kill().unwrap();
    actors[2].0.wait().unwrap();
    let at_kill = newest_checkpoint(&dir);
    let left = format!("actor actor-2-{victim_pid}-");
    wait_for("the learner to see the killed actor leave (liveness TTL)", Duration::from_secs(30), || {
        logs().lines().any(|l| l.contains(&left) && l.contains(" left "))
    });
    wait_for("a learner checkpoint after the actor's death", Duration::from_secs(60), || {
        newest_checkpoint(&dir) > at_kill
    });

    // 2. kill -9 the server, start it again on the same port and store: everyone reconnects.
    server.restart().unwrap();
    let at_restart = newest_checkpoint(&dir);
    wait_for("a learner checkpoint after the server's restart", Duration::from_secs(60), || {
        newest_checkpoint(&dir) > at_restart
    });
    assert!(learner.0.try_wait().unwrap().is_none(), "the learner died with the server:\n{}", logs());

    // 3. kill -9 the learner, restart it from its run directory; it runs to the end.
    learner.0.kill().unwrap();
    learner.0.wait().unwrap();
    let resumed_from = newest_checkpoint(&dir);
    let mut learner = spawn_learner(&url, &["--resume", dir.to_str().unwrap()], &work.join("learner-2.log"));
    let status = learner.0.wait().unwrap();
    let log2 = std::fs::read_to_string(work.join("learner-2.log")).unwrap_or_default();
    assert!(status.success(), "the restarted learner failed:\n{log2}");
    assert!(log2.contains("resuming fleet learner"), "{log2}");
    // 4. refused with a logged error (before or after the restart), the learner going on.
    assert!(
        logs().contains("refused stream message")
            && logs().contains("malformed transition message")
            && logs().contains("another-run"),
        "{}",
        logs()
    );

    // The surviving actors see the learner finish and exit cleanly, all acknowledged.
    let mut reports = Vec::new();
    for a in actors.iter_mut().take(2) {
        let st = a.0.wait().unwrap();
        assert!(st.success(), "an actor failed; logs in {}", work.display());
        let mut line = String::new();
        BufReader::new(a.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        reports.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
    }

    // Exactly once: what the learner holds is what the stream holds up to its position.
    let fleet: FleetState = serde_json::from_str(&std::fs::read_to_string(dir.join("fleet.json")).unwrap()).unwrap();
    assert!(fleet.consumed >= 3200 && fleet.consumed > resumed_from, "consumed {}", fleet.consumed);
    let (total, per, seqs, refused) = stream_rows(&bus, fleet.last_seq, 17, 6);
    assert_eq!(fleet.consumed, total, "consumed vs the stream's rows up to sequence {}", fleet.last_seq);
    assert_eq!(fleet.per_actor, per);
    assert_eq!((fleet.rejected, refused), (2, 2));
    let ckpt = o2o_experiments::run::checkpoint::latest(&dir).unwrap();
    let replay = o2o_datasets::ReplayBuffer::load(&ckpt.join(o2o_experiments::run::checkpoint::REPLAY)).unwrap();
    assert_eq!(replay.len() as u64, fleet.consumed, "rows in the final replay buffer");
    // The killed actor's acknowledged batches are all in the learner's buffer.
    let victim = seqs
        .keys()
        .find(|a| a.starts_with(&format!("actor-2-{victim_pid}-")))
        .expect("the killed actor published before it died")
        .clone();
    let victim_seqs = &seqs[&victim];
    assert!(
        victim_seqs.iter().all(|s| *s <= fleet.last_seq),
        "the killed actor's messages {victim_seqs:?} beyond {}",
        fleet.last_seq
    );
    assert!(per[&victim] > 0);
    // Each surviving actor's acknowledged count is what the stream has from it: nothing it
    // was told was stored went missing across the server's restart, and none is there twice.
    let stream = read_stream(&bus).unwrap();
    for r in &reports {
        let id = r["actor"].as_str().unwrap();
        let in_stream: u64 = stream
            .iter()
            .filter_map(|(_, p)| message::decode(p, &run, 17, 6).ok())
            .filter(|b| b.actor == id)
            .map(|b| b.transitions.len() as u64)
            .sum();
        assert_eq!(r["acked"].as_u64().unwrap(), in_stream, "{id}");
        assert!(r["policy_version"].as_u64().unwrap() >= 2, "{r}");
    }

    // SAC trained at its update-to-data ratio, within the limiter's band.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let grad = summary["grad_steps"].as_u64().unwrap() as f64;
    let expected = (fleet.consumed - 200) as f64;
    assert!((grad - expected).abs() <= 2.0 * 16.0 + 16.0, "{grad} updates for {} transitions", fleet.consumed);
    assert!(summary["final_eval"]["mean_return"].as_f64().unwrap().is_finite());
    // Issue 47 item 7: the run says a fleet learner trained it, and `o2o report` marks it so.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["trainer"], "fleet learner", "{manifest}");
    let reported = o2o_experiments::report::runs::load_run(&dir, "eval/return", "env_step").unwrap();
    assert!(reported.fleet && reported.group.ends_with(" · fleet learner"), "{}", reported.group);
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert!(
        metrics.contains("\"fleet/actor/actor-0-")
            && metrics.contains("/joined\"")
            && metrics.contains("/left\"")
            && metrics.contains("/transitions_per_s\"")
    );
    assert!(metrics.contains("\"fleet/rejected\""), "no fleet/rejected in metrics.jsonl");
    // The age of the data it took in: logged, and recent (the actors' backpressure).
    let (versions, seconds) =
        (common::metric(&dir, "fleet/data_age_versions"), common::metric(&dir, "fleet/data_age_s"));
    assert!(!versions.is_empty() && versions.len() == seconds.len(), "{versions:?} / {seconds:?}");
    assert!(versions.iter().all(|v| v.is_finite() && *v >= 0.0), "{versions:?}");
    assert!(versions.iter().any(|v| *v > 0.0), "no batch acted with an older policy: {versions:?}");
    assert!(seconds.iter().all(|s| s.is_finite() && *s > -1.0 && *s < 60.0), "{seconds:?}");
    // Each record's window: the seconds spent drawing batches and updating, inside its wall time.
    let (windows, samples, updates) = (
        common::metric(&dir, "perf/window_s"),
        common::metric(&dir, "perf/sample_s"),
        common::metric(&dir, "perf/update_s"),
    );
    assert!(
        !windows.is_empty() && windows.len() == samples.len() && windows.len() == updates.len(),
        "{} / {} / {} perf records",
        windows.len(),
        samples.len(),
        updates.len()
    );
    assert!(updates.iter().any(|u| *u > 0.0), "no window spent time in updates: {updates:?}");
    for ((w, s), u) in windows.iter().zip(&samples).zip(&updates) {
        assert!(*s >= 0.0 && *u >= 0.0 && s + u <= *w, "window {w} s: sampling {s} s + updates {u} s");
    }
    assert!(metrics.contains("\"train/critic_loss\"") || metrics.contains("\"train/"), "no training metrics");
    let _ = std::fs::remove_dir_all(&work);
}

/// `o2o bench fleet` end to end at a tiny size: its own server, worker processes for both
/// sinks, the learner comparison, and a JSON line whose rates are real measurements.
#[test]
fn the_fleet_benchmark_measures_both_sides_in_one_run() {
    let out = o2o()
        .args([
            "bench",
            "fleet",
            "--steps",
            "300",
            "--batch",
            "64",
            "--actors",
            "1,2",
            "--updates",
            "20",
            "--block",
            "10",
        ])
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "o2o bench fleet failed:\n{}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("| 2 |") && stdout.contains("with the stream attached"), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let actors = v["actors"].as_array().unwrap();
    assert_eq!(actors.iter().map(|r| r["actors"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2]);
    for r in actors {
        let (s, l, q) = (
            r["stream_per_s"].as_f64().unwrap(),
            r["in_process_per_s"].as_f64().unwrap(),
            r["ratio"].as_f64().unwrap(),
        );
        assert!(s > 0.0 && l > 0.0 && s.is_finite() && l.is_finite(), "{r}");
        assert!((q - s / l).abs() < 1e-9 * q.abs().max(1.0), "{r}");
    }
    let l = &v["learner"];
    assert_eq!(l["updates"].as_u64().unwrap(), 20);
    assert!(l["messages"].as_u64().unwrap() >= 1, "{l}");
    assert!(l["without_per_s"].as_f64().unwrap() > 0.0 && l["with_stream_per_s"].as_f64().unwrap() > 0.0, "{l}");
}

/// A server older than the minimum is refused by the CLI with the version it found (a stand-in
/// script printing what Debian 12's nats-server prints), and `o2o doctor` names it too.
#[test]
fn the_cli_refuses_a_nats_server_older_than_2_10() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("nats-server");
    std::fs::write(&fake, "#!/bin/sh\necho 'nats-server: v2.9.10'\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = o2o()
        .args(["fleet", "server", "--port", "1", "--store"])
        .arg(dir.path().join("store"))
        .env("O2O_NATS_SERVER", &fake)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("2.9.10") && err.contains("2.10.0 or newer"), "{err}");
    let out = o2o().arg("doctor").env("O2O_NATS_SERVER", &fake).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success()
            && text.lines().any(|l| l.starts_with("nats-server") && l.contains("MISSING") && l.contains("2.9.10")),
        "{text}"
    );
}

/// `o2o fleet server` stops its nats-server on SIGTERM and on SIGINT sent to its PID (not its
/// process group, as a supervisor or `kill PID` sends them), so the same port and store serve
/// again at once (issue 47, C2).
#[test]
fn the_fleet_server_stops_its_nats_server_on_a_signal_to_its_pid() {
    let port = o2o_experiments::fleet::server::free_port().unwrap();
    let store = tempfile::tempdir().unwrap();
    let listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    for (name, sig) in [("SIGTERM", libc::SIGTERM), ("SIGINT", libc::SIGINT)] {
        let mut server = o2o()
            .args(["fleet", "server", "--port", &port.to_string(), "--store"])
            .arg(store.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for("the server to listen (a restart on the same port and store)", Duration::from_secs(30), listening);
        // SAFETY: kill(2) on the child's own pid.
        unsafe { libc::kill(server.id() as libc::pid_t, sig) };
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = server.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{name}: o2o fleet server still running");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{name}: {status}\n{err}");
        assert!(err.contains("stopped; the streams stay in"), "{name}: {err}");
        wait_for("the port to be free", Duration::from_secs(10), || !listening());
    }
}

/// Issue 47 C5: a learner that cannot start (no server at the address, or a non-loopback
/// address without credentials) prints no run id and leaves no run directory, so a script's
/// `id=$(o2o fleet learner … | head -1)` never names a learner that did not run.
#[test]
fn a_refused_learner_prints_no_run_id_and_leaves_no_run_directory() {
    let runs = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for (url, expect) in [
        (format!("nats://127.0.0.1:{port}"), "no NATS server answered"),
        ("nats://192.0.2.7:4222".to_string(), "need credentials"),
    ] {
        let o = o2o()
            .args(["fleet", "learner", "--nats", &url, "--config", "sac-inverted-pendulum", "--device", "cpu"])
            .args(["--threads", "1", "--rerun=off", "--runs-dir"])
            .arg(runs.path())
            .env_remove("O2O_NATS_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{url}: {err}");
        assert!(err.contains(expect), "{url}: {err}");
        assert!(o.stdout.is_empty(), "{url}: a run id was printed: {}", String::from_utf8_lossy(&o.stdout));
        let left: Vec<_> =
            std::fs::read_dir(runs.path()).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        assert!(left.is_empty(), "{url}: left {left:?}");
    }
}
