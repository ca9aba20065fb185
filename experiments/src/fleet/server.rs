//! A local `nats-server` for tests and benchmarks: JetStream on, bound to 127.0.0.1 on a free
//! port, its store in a temporary folder, killed when dropped (so no test leaves a server
//! behind, even when it fails). `scripts/setup.sh` installs the Debian package.

use anyhow::{bail, Context, Result};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `nats-server -js` on 127.0.0.1.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: tempfile::TempDir,
    log: PathBuf,
}

impl NatsServer {
    /// Start one on a free port with a fresh store.
    pub fn start() -> Result<Self> {
        let store = tempfile::Builder::new().prefix("o2o-nats-").tempdir().context("creating the server's store folder")?;
        let log = store.path().join("server.log");
        let mut s = Self { child: None, port: free_port()?, store, log };
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
        let bin = which_nats_server()?;
        // The log is appended to across restarts: wait for one more "ready" line than now.
        let ready_before = std::fs::read_to_string(&self.log).unwrap_or_default().matches("Server is ready").count();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).with_context(|| format!("cannot open {}", self.log.display()))?;
        let child = Command::new(&bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.store.path().join("js"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        self.child = Some(child);
        // Ready when it accepts connections and says JetStream is up.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    bail!("nats-server exited at start ({status}); its log:\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
                }
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && log.matches("Server is ready").count() > ready_before {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        bail!("nats-server did not become ready on 127.0.0.1:{} within 15 s", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nobody listens on right now (the kernel's choice for port 0).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind(("127.0.0.1", 0)).context("cannot bind a free port on 127.0.0.1")?;
    Ok(l.local_addr()?.port())
}

/// The `nats-server` binary: `$O2O_NATS_SERVER`, else the first on `PATH`.
pub fn which_nats_server() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("O2O_NATS_SERVER") {
        return Ok(PathBuf::from(p));
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join("nats-server");
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("nats-server not found on PATH; install it with scripts/setup.sh (Debian: apt-get install nats-server) or set O2O_NATS_SERVER")
}
