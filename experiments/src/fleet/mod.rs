//! Many actors, one learner, across processes and machines, on NATS JetStream
//! (ARCHITECTURE.md, "Scaling out"; docs/fleet.md).
//!
//! The runner's two halves go to different processes: [`actor`] hosts the acting half
//! ([`crate::Actor`] with a [`crate::Policy`] and a [`crate::TransitionSink`] that publishes to a
//! stream), [`learner`] the learning half (a replay buffer filled from the stream, the agent,
//! [`crate::run::learner::learn`]). Everything between them goes through one NATS server (or
//! cluster) per fleet, named per run:
//!
//! | what | where | written by | read by |
//! |---|---|---|---|
//! | transitions, in batches (binary, [`message`]) | stream `O2O_<run>`, subjects `o2o.<run>.transitions.<actor>` (file storage) | actors (publish, wait for the ack) | the learner (durable pull consumer `learner`) |
//! | the run's config, the policy version, the learner's status and stream position | key-value bucket `o2o_<run>` (keys `config`, `policy`, `status`) | the learner | actors |
//! | versioned weights | object store `o2o_<run>_weights` (objects `policy-<version>`) | the learner | actors |
//! | actor liveness and throughput | key-value bucket `o2o_<run>_actors` with a TTL (one key per actor) | actors | the learner |
//!
//! The process speaks to the server through [`Bus`], which owns a small tokio runtime of its own,
//! so the rest of o2o stays synchronous.

pub mod actor;
pub mod learner;
pub mod message;
pub mod rate;
pub mod server;

use anyhow::{bail, Context, Result};
use async_nats::jetstream;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The default server: a local one on the standard port.
pub const DEFAULT_URL: &str = "nats://127.0.0.1:4222";

/// How a process reaches the NATS server, and with which credentials.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// `nats://host:port` (or `tls://host:port`, or several separated by commas for a cluster).
    pub url: String,
    /// A token the server was started with (`authorization { token: … }`); also read from
    /// `O2O_NATS_TOKEN`.
    pub token: Option<String>,
    /// A file holding an nkey seed (`SU…`) the server knows the public key of.
    pub nkey_seed_file: Option<std::path::PathBuf>,
    /// A CA certificate (PEM) to verify the server's TLS certificate with; implies TLS.
    pub tls_ca: Option<std::path::PathBuf>,
    /// A name the server shows for this connection.
    pub name: String,
}

impl Connection {
    /// A connection to `url` with no credentials, the token taken from `O2O_NATS_TOKEN` when set.
    pub fn new(url: &str, name: &str) -> Self {
        Self {
            url: url.to_string(),
            token: std::env::var("O2O_NATS_TOKEN").ok().filter(|t| !t.is_empty()),
            name: name.to_string(),
            ..Self::default()
        }
    }

    /// Loopback only unless credentials are given: a server beyond 127.0.0.1 / ::1 / localhost
    /// needs a token or an nkey (the fleet's transitions and weights are not for anyone on the
    /// network).
    pub fn check_security(&self) -> Result<()> {
        for host in hosts(&self.url)? {
            let loopback =
                matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1" | "[::1]") || host.starts_with("127.");
            if !loopback && self.token.is_none() && self.nkey_seed_file.is_none() {
                bail!(
                    "--nats {}: host {host} is beyond loopback, and fleet connections beyond loopback need credentials; \
                     pass --token (or set O2O_NATS_TOKEN) or --nkey-seed FILE, and see docs/fleet.md for the server's side and TLS",
                    self.url
                );
            }
        }
        Ok(())
    }

    /// The async-nats options for this connection: reconnect for ever, quickly (an actor keeps
    /// its spool while the server is away and flushes it when it is back).
    fn options(&self) -> Result<async_nats::ConnectOptions> {
        let mut o = async_nats::ConnectOptions::new()
            .name(&self.name)
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .retry_on_initial_connect()
            .reconnect_delay_callback(|attempt| Duration::from_millis((100 * attempt as u64).min(1000)));
        if let Some(t) = &self.token {
            o = o.token(t.clone());
        }
        if let Some(f) = &self.nkey_seed_file {
            let seed = std::fs::read_to_string(f)
                .with_context(|| format!("cannot read the nkey seed file {}", f.display()))?;
            o = o.nkey(seed.trim().to_string());
        }
        if let Some(ca) = &self.tls_ca {
            o = o.require_tls(true).add_root_certificates(ca.clone());
        }
        Ok(o)
    }
}

/// The host names in a server URL list (`nats://a:4222,nats://b:4222`, `tls://h`, `h:p`).
fn hosts(url: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for part in url.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let rest = part.split_once("://").map_or(part, |(_, r)| r);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let host = if let Some(v6) = rest.strip_prefix('[') {
            format!("[{}]", v6.split(']').next().unwrap_or(""))
        } else {
            rest.split(':').next().unwrap_or("").split('/').next().unwrap_or("").to_string()
        };
        if host.is_empty() {
            bail!("--nats {url}: cannot read a host from {part:?} (expected nats://HOST:PORT)");
        }
        out.push(host);
    }
    if out.is_empty() {
        bail!("--nats: empty server URL (expected nats://HOST:PORT)");
    }
    Ok(out)
}

/// The servers of a URL list (`nats://a:4222,nats://b:4222`): the client is given every one, so
/// it reaches the cluster through any node that is up and moves to another when its node dies.
/// (async-nats reads one string as one address: a comma-separated list must be split here.)
fn server_addrs(url: &str) -> Result<Vec<async_nats::ServerAddr>> {
    let parts: Vec<&str> = url.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        bail!("--nats: empty server URL (expected nats://HOST:PORT)");
    }
    parts
        .into_iter()
        .map(|p| {
            p.parse()
                .with_context(|| format!("--nats {url}: {p:?} is not a server address (expected nats://HOST:PORT)"))
        })
        .collect()
}

/// The per-run names of the stream, buckets and subjects (see the module docs).
#[derive(Debug, Clone)]
pub struct Names {
    /// The run id as given (the learner's run directory name).
    pub run_id: String,
    token: String,
}

impl Names {
    /// Names for the run `run_id`; NATS names allow letters, digits, `-` and `_`, so anything
    /// else in the id becomes `_`.
    pub fn new(run_id: &str) -> Self {
        let token =
            run_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        Self { run_id: run_id.to_string(), token }
    }
    /// The transition stream.
    pub fn stream(&self) -> String {
        format!("O2O_{}", self.token)
    }
    /// The subject an actor publishes to.
    pub fn subject(&self, actor: &str) -> String {
        format!("o2o.{}.transitions.{}", self.token, Names::new(actor).token)
    }
    /// Every actor's subject.
    pub fn subjects(&self) -> String {
        format!("o2o.{}.transitions.*", self.token)
    }
    /// The control bucket (config, policy version, status).
    pub fn control(&self) -> String {
        format!("o2o_{}", self.token)
    }
    /// The liveness bucket.
    pub fn actors(&self) -> String {
        format!("o2o_{}_actors", self.token)
    }
    /// The weights object store.
    pub fn weights(&self) -> String {
        format!("o2o_{}_weights", self.token)
    }
}

/// Keys of the control bucket.
pub mod keys {
    /// The learner's resolved run config (TOML).
    pub const CONFIG: &str = "config";
    /// The newest published policy version ([`super::PolicyVersion`], JSON).
    pub const POLICY: &str = "policy";
    /// The learner's status ([`super::LearnerStatus`], JSON).
    pub const STATUS: &str = "status";
}

/// The newest weights: version `version`, object `object` in the weights store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyVersion {
    /// 1, 2, …; 0 means none yet (actors act uniformly at random).
    pub version: u64,
    /// The object holding them.
    pub object: String,
    /// Learner updates done when they were taken.
    pub grad_step: u64,
}

/// What the learner is doing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnerStatus {
    /// The learner has consumed its whole budget: actors flush and stop.
    pub finished: bool,
    /// Transitions in the replay buffer from the stream.
    pub consumed: u64,
    /// The last stream sequence the learner has read (its position; actors hold back while
    /// their newest acknowledged sequence is `max_backlog` or more beyond it). Absent: no
    /// backpressure.
    #[serde(default)]
    pub stream_seq: Option<u64>,
}

/// An actor's liveness entry (refreshed about once a second; the bucket's TTL removes it when
/// the actor stops refreshing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActorBeat {
    /// The actor's instance id.
    pub actor: String,
    /// Transitions the server has acknowledged.
    pub acked: u64,
    /// Batches waiting in the local spool.
    pub spooled: usize,
    /// The policy version it acts with.
    pub policy_version: u64,
    /// It is paused (policy too stale, or the learner's backlog full).
    pub paused: bool,
    /// Env steps per second since its last beat.
    pub steps_per_s: f64,
}

/// Fleet settings shared by actors and learner.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Transitions per published message.
    pub batch: usize,
    /// An actor publishes a shorter batch once its first row has waited this long (a slow robot
    /// does not hold its data back for a full batch).
    pub max_batch_delay: Duration,
    /// Batches an actor keeps while the server does not acknowledge; when full the actor waits.
    pub spool_batches: usize,
    /// An actor pauses rather than act with a policy more than this many versions old.
    pub max_policy_lag: u64,
    /// An actor pauses while the stream holds this many messages or more beyond the learner's
    /// position (up to its own newest), and resumes at half (0: never).
    pub max_backlog: u64,
    /// The learner publishes weights every this many updates.
    pub publish_every: u64,
    /// Seconds a liveness entry lives without a refresh.
    pub liveness_ttl_s: f64,
    /// How long to wait for the server's acknowledgement of one publish.
    pub ack_timeout: Duration,
    /// How actors encode their batches (binary; JSON to read a stream by eye).
    pub message_format: message::Format,
    /// The stream drops messages older than this (zero: no age limit). Set by the learner
    /// each time it starts.
    pub stream_max_age: Duration,
    /// The stream drops its oldest messages beyond this many bytes (0: no size limit).
    pub stream_max_bytes: u64,
    /// Copies of the stream, buckets and weights the servers keep (3 on a three-node cluster:
    /// they survive the loss of one node). `None`: 1 for a new run, and a resumed run's stream
    /// keeps what it has; `Some(n)`: a new run's stream, buckets and weights get `n`, and a
    /// resumed run's stream is set to `n`.
    pub stream_replicas: Option<usize>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            // The stream's cost is mostly per message (`o2o bench fleet --batch`, BENCHMARKS.md
            // "Fleet"): 256 rows amortize it; a slower actor publishes after `max_batch_delay`.
            batch: 256,
            max_batch_delay: Duration::from_secs(1),
            spool_batches: 1024,
            max_policy_lag: 4,
            // 4096 transitions at the default batch, 16 learner batches of 256: it never waits
            // for data, and what it trains on is at most this far behind what the actors do.
            max_backlog: 16,
            publish_every: 500,
            liveness_ttl_s: 5.0,
            ack_timeout: Duration::from_secs(2),
            message_format: message::Format::Binary,
            // A day, or 1 GiB (about 6 million HalfCheetah transitions): far more than a
            // learner needs again after a crash (what came after its last checkpoint), far less
            // than a disk.
            stream_max_age: Duration::from_secs(24 * 3600),
            stream_max_bytes: 1 << 30,
            stream_replicas: None,
        }
    }
}

/// One connection to the server, with a tokio runtime of its own so callers stay synchronous.
pub struct Bus {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    /// The run's names.
    pub names: Names,
    /// The server's address, as given.
    url: String,
}

impl Bus {
    /// Connect to the server for the run `run_id` (checking [`Connection::check_security`]
    /// first); `ack_timeout` bounds each JetStream request.
    pub fn connect(conn: &Connection, run_id: &str, ack_timeout: Duration) -> Result<Self> {
        conn.check_security()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("o2o-nats")
            .build()
            .context("starting the NATS runtime")?;
        let options = conn.options()?;
        let url = conn.url.clone();
        let servers = server_addrs(&url)?;
        let client = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), async_nats::connect_with_options(servers, options))
                .await
                .map_err(|_| anyhow::anyhow!("no NATS server answered at {url} within 10 s (is nats-server running with -js? see docs/fleet.md)"))?
                .with_context(|| format!("cannot connect to the NATS server at {url}"))
        })?;
        // The JetStream context spawns a task: it must be made inside the runtime.
        let _inside = rt.enter();
        let mut js = jetstream::new(client.clone());
        js.set_timeout(ack_timeout);
        Ok(Self { rt, client, js, names: Names::new(run_id), url })
    }

    /// Wait until the client is connected, up to `limit`. The connection retries in the
    /// background (an actor spools while the server is away), so a learner calls this to refuse
    /// an address where no server answers before it creates anything.
    pub fn wait_connected(&self, limit: Duration) -> Result<()> {
        let t0 = std::time::Instant::now();
        while !self.connected() {
            if t0.elapsed() >= limit {
                bail!(
                    "no NATS server answered at {} within {} s (is nats-server running, with -js, at that address? see docs/fleet.md)",
                    self.url,
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The same connection, naming the run `run_id` (a learner connects before its run
    /// directory, and so its id, exists).
    pub fn for_run(mut self, run_id: &str) -> Self {
        self.names = Names::new(run_id);
        self
    }

    /// Run a future on this bus's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The JetStream context.
    pub fn js(&self) -> &jetstream::Context {
        &self.js
    }

    /// The plain client.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Whether the client is connected right now.
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// The control bucket, waiting up to `wait` for the learner to have made it.
    pub fn control(&self, wait: Duration) -> Result<jetstream::kv::Store> {
        let name = self.names.control();
        let t0 = std::time::Instant::now();
        loop {
            match self.block_on(self.js.get_key_value(&name)) {
                Ok(s) => return Ok(s),
                Err(e) if t0.elapsed() >= wait => {
                    return Err(anyhow::anyhow!("{e}")).with_context(|| {
                        format!(
                            "no learner for run {:?} on this server (bucket {name} not found within {wait:?})",
                            self.names.run_id
                        )
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// A JSON value of the control bucket, `None` when the key is absent.
    pub fn get_json<T: serde::de::DeserializeOwned>(&self, kv: &jetstream::kv::Store, key: &str) -> Result<Option<T>> {
        let v = self
            .block_on(kv.get(key))
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("reading key {key} of bucket {}", self.names.control()))?;
        match v {
            None => Ok(None),
            Some(b) => Ok(Some(serde_json::from_slice(&b).with_context(|| {
                format!("key {key} of bucket {} is not what o2o writes there", self.names.control())
            })?)),
        }
    }

    /// Write a JSON value to a bucket.
    pub fn put_json<T: Serialize>(&self, kv: &jetstream::kv::Store, key: &str, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value)?;
        self.block_on(kv.put(key, bytes.into()))
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("writing key {key}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_needs_credentials() {
        assert!(Connection::new("nats://127.0.0.1:4222", "t").check_security().is_ok());
        assert!(Connection::new("localhost:4222", "t").check_security().is_ok());
        assert!(Connection::new("nats://[::1]:4222", "t").check_security().is_ok());
        let mut c = Connection::new("nats://10.0.0.5:4222", "t");
        c.token = None;
        let e = c.check_security().unwrap_err().to_string();
        assert!(e.contains("10.0.0.5") && e.contains("credentials"), "{e}");
        c.token = Some("s3cret".into());
        assert!(c.check_security().is_ok());
        let mut c = Connection::new("nats://127.0.0.1:4222,nats://gpu-box:4222", "t");
        c.token = None;
        assert!(c.check_security().unwrap_err().to_string().contains("gpu-box"));
        assert!(hosts("nats://").is_err());
    }

    /// A cluster list is every server, in order; one bad entry is named.
    #[test]
    fn a_server_list_is_split_into_its_servers() {
        let a = server_addrs("nats://127.0.0.1:4222, nats://127.0.0.1:4223,tls://gpu-box:4224,").unwrap();
        let ports: Vec<u16> = a.iter().map(|s| s.port()).collect();
        assert_eq!(ports, vec![4222, 4223, 4224]);
        assert_eq!(server_addrs("nats://127.0.0.1:4222").unwrap().len(), 1);
        let e = format!("{:#}", server_addrs("nats://127.0.0.1:4222,nats://h:notaport").unwrap_err());
        assert!(e.contains("nats://h:notaport"), "{e}");
        assert!(server_addrs(" , ").is_err());
    }

    #[test]
    fn names_are_valid_nats_names() {
        let n = Names::new("sac-halfcheetah-0-20261201T1200.5");
        assert_eq!(n.stream(), "O2O_sac-halfcheetah-0-20261201T1200_5");
        assert_eq!(n.subject("actor.1"), "o2o.sac-halfcheetah-0-20261201T1200_5.transitions.actor_1");
        assert_eq!(n.weights(), "o2o_sac-halfcheetah-0-20261201T1200_5_weights");
    }
}
