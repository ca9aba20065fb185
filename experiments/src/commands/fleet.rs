//! `o2o fleet learner` and `o2o fleet actor`: one learner and many actors across processes and
//! machines on NATS JetStream (the library's `fleet` module; docs/fleet.md).

use super::run::CommonArgs;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use o2o_experiments::fleet::actor::{run_actor, ActorOptions};
use o2o_experiments::fleet::learner::{run_learner, LearnerOptions, LearnerStart};
use o2o_experiments::fleet::message::Format as MessageFormat;
use o2o_experiments::fleet::{Connection, FleetConfig, DEFAULT_URL};
use o2o_experiments::Run;
use std::path::PathBuf;
use std::time::Duration;

/// `o2o fleet …`.
#[derive(Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Subcommand, Debug)]
enum FleetCommand {
    /// The learner: replay buffer, updates, weights; prints the run id actors join with.
    Learner(LearnerArgs),
    /// An actor: steps an env with the learner's newest weights and streams its transitions.
    Actor(ActorArgs),
    /// A local nats-server with JetStream (the venv's, from scripts/setup.sh), in the foreground.
    Server(ServerArgs),
}

#[derive(Args, Debug)]
struct ServerArgs {
    /// The address to listen on (loopback; for other hosts write a server config with
    /// credentials, see docs/fleet.md, and run nats-server -c yourself).
    #[arg(long, default_value = "127.0.0.1")]
    addr: String,
    /// The port.
    #[arg(long, default_value_t = 4222)]
    port: u16,
    /// JetStream's store folder (file storage: streams survive a restart).
    #[arg(long, default_value = "runs/nats")]
    store: PathBuf,
}

/// How to reach the server.
#[derive(Args, Debug, Clone)]
struct NatsArgs {
    /// The NATS server (or a comma-separated cluster list); loopback needs no credentials,
    /// anything else needs --token or --nkey-seed.
    #[arg(long, default_value = DEFAULT_URL)]
    nats: String,
    /// A token the server requires (also read from O2O_NATS_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// A file with an nkey seed the server knows the public key of.
    #[arg(long, value_name = "FILE")]
    nkey_seed: Option<PathBuf>,
    /// A CA certificate (PEM) to verify the server's TLS certificate (implies TLS).
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<PathBuf>,
}

impl NatsArgs {
    fn connection(&self, name: &str) -> Connection {
        let mut c = Connection::new(&self.nats, name);
        if self.token.is_some() {
            c.token = self.token.clone();
        }
        c.nkey_seed_file = self.nkey_seed.clone();
        c.tls_ca = self.tls_ca.clone();
        c
    }
}

/// Fleet settings (the learner's and the actors' must agree on --batch only loosely: the
/// learner accepts batches of any size).
#[derive(Args, Debug, Clone)]
struct FleetSettings {
    /// Transitions per published message.
    #[arg(long, default_value_t = FleetConfig::default().batch)]
    batch: usize,
    /// Seconds an actor's first unpublished row waits at most: a shorter batch goes out then.
    #[arg(long, default_value_t = FleetConfig::default().max_batch_delay.as_secs_f64())]
    max_batch_delay: f64,
    /// Seconds to wait for the server's acknowledgement of one publish.
    #[arg(long, default_value_t = 2.0)]
    ack_timeout: f64,
    /// Seconds an actor's liveness entry lives without a refresh.
    #[arg(long, default_value_t = FleetConfig::default().liveness_ttl_s)]
    liveness_ttl: f64,
}

impl FleetSettings {
    fn config(&self) -> Result<FleetConfig> {
        if self.batch == 0 {
            anyhow::bail!("--batch: expected at least 1 transition per message, found 0");
        }
        for (name, v) in [
            ("--ack-timeout", self.ack_timeout),
            ("--liveness-ttl", self.liveness_ttl),
            ("--max-batch-delay", self.max_batch_delay),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("{name}: expected a positive number of seconds, found {v}");
            }
        }
        Ok(FleetConfig {
            batch: self.batch,
            max_batch_delay: Duration::from_secs_f64(self.max_batch_delay),
            ack_timeout: Duration::from_secs_f64(self.ack_timeout),
            liveness_ttl_s: self.liveness_ttl,
            ..FleetConfig::default()
        })
    }
}

#[derive(Args, Debug)]
struct LearnerArgs {
    /// A run config: a .toml file or a preset name (online only: train.offline_steps = 0).
    #[arg(long, alias = "preset", required_unless_present = "resume")]
    config: Option<String>,
    /// Override a config key, e.g. `--set train.online_steps=20000`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The run seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Continue this learner run directory from its newest checkpoint (after a crash).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "config")]
    resume: Option<PathBuf>,
    /// Folder the run directory is created in.
    #[arg(long, default_value = "runs")]
    runs_dir: PathBuf,
    /// Publish weights every this many updates.
    #[arg(long, default_value_t = FleetConfig::default().publish_every)]
    publish_every: u64,
    /// ± updates of slack around the config's updates per transition (0: two messages' worth).
    #[arg(long, default_value_t = 0.0)]
    rate_tolerance: f64,
    /// The stream drops messages older than this many hours (0: no age limit); set on every
    /// start, a resumed learner's included.
    #[arg(long, value_name = "HOURS", default_value_t = FleetConfig::default().stream_max_age.as_secs_f64() / 3600.0)]
    stream_max_hours: f64,
    /// The stream drops its oldest messages beyond this many MiB (0: no size limit).
    #[arg(long, value_name = "MIB", default_value_t = FleetConfig::default().stream_max_bytes >> 20)]
    stream_max_mib: u64,
    /// Copies the servers keep of the run's stream, buckets and weights (3 on a three-node
    /// cluster, so they outlive one node; at most 5). Default: 1 for a new run, and a resumed
    /// run's stream keeps what it has.
    #[arg(long, value_name = "N")]
    stream_replicas: Option<usize>,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    fleet: FleetSettings,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args, Debug)]
struct ActorArgs {
    /// The learner's run id (the name of its run directory, printed when it starts).
    #[arg(long)]
    learner_run: String,
    /// The env to act in (default: the learner's); it must have the learner's spaces.
    #[arg(long)]
    env: Option<String>,
    /// This actor's index: its episode seeds and exploration noise derive from it (give each
    /// actor its own).
    #[arg(long, default_value_t = 0)]
    index: u64,
    /// Pause rather than act with a policy more than this many versions old.
    #[arg(long, default_value_t = FleetConfig::default().max_policy_lag)]
    max_policy_lag: u64,
    /// Pause while the stream holds this many messages or more that the learner has not read
    /// (every actor's, up to this one's newest); resume at half (0: never pause).
    #[arg(long, value_name = "MESSAGES", default_value_t = FleetConfig::default().max_backlog)]
    max_backlog: u64,
    /// Batches kept while the server does not acknowledge (then the actor waits).
    #[arg(long, default_value_t = FleetConfig::default().spool_batches)]
    spool_batches: usize,
    /// How batches are encoded: the compact binary format, or JSON to read the stream by eye
    /// (the learner reads both).
    #[arg(long, value_enum, default_value = "binary")]
    message_format: MessageFormat,
    /// Stop after this many env steps (default: when the learner is done).
    #[arg(long)]
    max_steps: Option<u64>,
    /// Seconds to wait for the learner's run to appear on the server.
    #[arg(long, default_value_t = 60.0)]
    wait: f64,
    /// At most this many env steps per second (a robot's control rate).
    #[arg(long, value_name = "HZ")]
    rate_hz: Option<f64>,
    /// Torch threads for acting (a small policy on one core; several actors share a machine).
    #[arg(long, default_value_t = 1)]
    threads: i32,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    fleet: FleetSettings,
}

/// Dispatch.
pub fn run(args: FleetArgs) -> Result<()> {
    match args.command {
        FleetCommand::Learner(a) => learner(a),
        FleetCommand::Actor(a) => actor(a),
        FleetCommand::Server(a) => server(a),
    }
}

fn server(a: ServerArgs) -> Result<()> {
    let loopback = a.addr == "localhost" || a.addr == "::1" || a.addr.starts_with("127.");
    if !loopback {
        anyhow::bail!("--addr {}: `o2o fleet server` listens on loopback only; beyond it the server needs credentials and TLS (docs/fleet.md shows a config for `nats-server -c`)", a.addr);
    }
    let bin = o2o_experiments::fleet::server::find_nats_server()?;
    std::fs::create_dir_all(&a.store)
        .with_context(|| format!("cannot create the store folder {}", a.store.display()))?;
    let (x, y, z) = bin.version;
    eprintln!(
        "nats-server {x}.{y}.{z} ({}) on nats://{}:{} with JetStream in {}",
        bin.path.display(),
        a.addr,
        a.port,
        a.store.display()
    );
    // SIGINT or SIGTERM to this process (a supervisor, `kill PID`, Ctrl-C) stops nats-server
    // cleanly, and it dies with this process however that ends, so a restart on the same port
    // and store works (issue 47, C2).
    o2o_experiments::run::interrupt::install_silent();
    let mut cmd = std::process::Command::new(&bin.path);
    cmd.args(["-a", &a.addr, "-p", &a.port.to_string(), "-js", "-sd"]).arg(&a.store);
    o2o_experiments::fleet::server::die_with_parent(&mut cmd);
    let mut child = cmd.spawn().with_context(|| format!("cannot start {}", bin.path.display()))?;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                anyhow::bail!("{} ended with {status}", bin.path.display());
            }
            return Ok(());
        }
        if o2o_experiments::run::interrupt::requested() {
            eprintln!("o2o fleet server: stopping nats-server (pid {}) on request", child.id());
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = std::time::Instant::now();
            while child.try_wait()?.is_none() {
                if t0.elapsed() > std::time::Duration::from_secs(10) {
                    let _ = child.kill();
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            eprintln!("o2o fleet server: stopped; the streams stay in {}", a.store.display());
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn learner(a: LearnerArgs) -> Result<()> {
    let device = a.common.apply()?;
    let start = match (&a.resume, &a.config) {
        (Some(dir), _) => LearnerStart::Resume(dir.clone()),
        (None, Some(config)) => {
            let mut run = Run::preset(config)?.set(&a.set)?;
            if let Some(s) = a.seed {
                run = run.seed(s)?;
            }
            LearnerStart::New(run.config()?)
        }
        (None, None) => anyhow::bail!("give --config FILE|PRESET, or --resume RUN_DIR"),
    };
    let mut fleet = a.fleet.config()?;
    fleet.publish_every = a.publish_every.max(1);
    if !(a.stream_max_hours.is_finite() && a.stream_max_hours >= 0.0) {
        anyhow::bail!("--stream-max-hours: expected a number of hours (0: no limit), found {}", a.stream_max_hours);
    }
    fleet.stream_max_age = Duration::from_secs_f64(a.stream_max_hours * 3600.0);
    fleet.stream_max_bytes = a.stream_max_mib.saturating_mul(1 << 20);
    if let Some(n) = a.stream_replicas.filter(|n| !(1..=5).contains(n)) {
        anyhow::bail!("--stream-replicas: expected 1 to 5 (JetStream's range), found {n}");
    }
    fleet.stream_replicas = a.stream_replicas;
    let options = LearnerOptions {
        conn: a.nats.connection("o2o-learner"),
        fleet,
        runs_dir: a.runs_dir.clone(),
        device,
        rerun: a.common.rerun.clone(),
        rate_tolerance_updates: a.rate_tolerance,
        on_started: Some(Box::new(|dir| {
            eprintln!("run directory: {}", dir.display());
            // The run id on stdout, alone, for scripts: `id=$(o2o fleet learner … | head -1)`.
            println!("{}", o2o_experiments::fleet::learner::run_id(dir));
            use std::io::Write;
            let _ = std::io::stdout().flush();
        })),
    };
    let out = run_learner(start, options)?;
    println!("{}", serde_json::to_string(&out.fleet).context("writing the fleet counters")?);
    Ok(())
}

fn actor(a: ActorArgs) -> Result<()> {
    if !(a.wait.is_finite() && a.wait >= 0.0) {
        anyhow::bail!("--wait: expected a number of seconds, found {}", a.wait);
    }
    if a.rate_hz.is_some_and(|h| !(h.is_finite() && h > 0.0)) {
        anyhow::bail!("--rate-hz: expected a positive number of steps per second, found {:?}", a.rate_hz);
    }
    if a.threads < 1 {
        anyhow::bail!("--threads: expected at least 1, found {}", a.threads);
    }
    tch::set_num_threads(a.threads);
    let mut fleet = a.fleet.config()?;
    fleet.max_policy_lag = a.max_policy_lag;
    fleet.max_backlog = a.max_backlog;
    fleet.spool_batches = a.spool_batches.max(1);
    fleet.message_format = a.message_format;
    let report = run_actor(ActorOptions {
        conn: a.nats.connection(&format!("o2o-actor-{}", a.index)),
        run_id: a.learner_run.clone(),
        env: a.env.clone(),
        index: a.index,
        fleet,
        max_steps: a.max_steps,
        wait_for_learner: Duration::from_secs_f64(a.wait),
        rate_hz: a.rate_hz,
    })?;
    println!(
        "{{\"actor\":{:?},\"steps\":{},\"episodes\":{},\"acked\":{},\"policy_version\":{},\"paused_s\":{},\"backlog_s\":{}}}",
        report.actor, report.steps, report.episodes, report.acked, report.policy_version, report.paused_s, report.backlog_s
    );
    Ok(())
}
