//! The serial plumbing the servo-bus drivers share ([`crate::feetech`], [`crate::dynamixel`]):
//! a raw 8N1 port at the bus's baud rate, one request → reply transaction with a deadline on
//! the loop's monotonic clock, a reassembly buffer for replies that arrive split or several at
//! once (a sync read's status packets), and the mapping of what goes wrong onto the
//! [`DriverError`]s the safety layer acts on: no reply in time is a lost link
//! ([`DriverError::Link`]), a corrupt reply a dropped message ([`DriverError::Dropped`]).
//!
//! The port is a plain file with termios set through `libc` (three calls, no serial-port crate);
//! the same code drives the pseudo-terminal of the fake-bus tests ([`crate::testing::pty_pair`]).

use crate::driver::DriverError;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// The error for a serial port that is not there, naming the port and what to check (not a
/// lost link: nothing was ever connected).
pub fn port_absent(driver: &str, port: &Path) -> DriverError {
    DriverError::Unsupported {
        driver: driver.to_string(),
        message: format!(
            "serial port {} is absent: plug in the bus adapter and power the servos, find the port with `ls /dev/serial/by-id/` (or `ls /dev/ttyUSB* /dev/ttyACM*`), and set driver.port in the robot config",
            port.display()
        ),
    }
}

/// Check that `port` exists before anything else is read, so a missing adapter is the first
/// error a user sees.
pub fn require_port(driver: &str, port: &Path) -> Result<(), DriverError> {
    if port.exists() {
        Ok(())
    } else {
        Err(port_absent(driver, port))
    }
}

/// Open `path` as a raw serial port at `baud` (8N1, no flow control, no echo).
pub fn open_raw(path: &Path, baud: u32) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(path)?;
    let speed = match baud {
        4_000_000 => libc::B4000000,
        3_000_000 => libc::B3000000,
        2_000_000 => libc::B2000000,
        1_000_000 => libc::B1000000,
        500_000 => libc::B500000,
        115_200 => libc::B115200,
        57_600 => libc::B57600,
        other => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("baud {other}: expected 4000000, 3000000, 2000000, 1000000, 500000, 115200 or 57600"),
            ))
        }
    };
    // SAFETY: termios calls on the descriptor we just opened, with a zeroed struct they fill.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(f.as_raw_fd(), &mut t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, speed);
        libc::cfsetospeed(&mut t, speed);
        if libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(f)
}

/// What a packet parser found at the front of a buffer.
pub enum Parsed<T> {
    /// Not a whole packet yet.
    Incomplete,
    /// A packet, and how many bytes of the buffer it used (garbage before it included).
    Packet(T, usize),
}

/// An open half-duplex bus: write a request, read replies until a deadline.
pub struct SerialLink {
    driver: String,
    port: File,
    timeout: Duration,
    pending: Vec<u8>,
}

impl SerialLink {
    /// Open `path` at `baud` for the driver named `driver`; a reply later than `timeout` is a
    /// lost link.
    pub fn open(driver: &str, path: &Path, baud: u32, timeout: Duration) -> Result<Self, DriverError> {
        require_port(driver, path)?;
        let port = open_raw(path, baud).map_err(|e| DriverError::Link {
            driver: driver.into(),
            message: format!("cannot open {}: {e}", path.display()),
        })?;
        Ok(Self { driver: driver.to_string(), port, timeout, pending: Vec::new() })
    }

    fn link(&self, message: String) -> DriverError {
        DriverError::Link { driver: self.driver.clone(), message }
    }

    /// Send `bytes`, after discarding anything unread (a late reply to an earlier request).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), DriverError> {
        self.pending.clear();
        // SAFETY: the port's open descriptor; TCIFLUSH only drops unread input.
        unsafe { libc::tcflush(self.port.as_raw_fd(), libc::TCIFLUSH) };
        self.port.write_all(bytes).map_err(|e| self.link(format!("write: {e}")))
    }

    /// The next packet `parse` finds, waiting at most the link's timeout; `what` names the
    /// awaited reply in errors. A parse error is a dropped message (the buffer is cleared).
    pub fn receive<T>(
        &mut self,
        what: &str,
        mut parse: impl FnMut(&[u8]) -> Result<Parsed<T>, String>,
    ) -> Result<T, DriverError> {
        let deadline = Instant::now() + self.timeout;
        let mut chunk = [0u8; 256];
        loop {
            match parse(&self.pending) {
                Ok(Parsed::Packet(p, used)) => {
                    self.pending.drain(..used.min(self.pending.len()));
                    return Ok(p);
                }
                Ok(Parsed::Incomplete) => {}
                Err(e) => {
                    self.pending.clear();
                    return Err(DriverError::Dropped { driver: self.driver.clone(), what: format!("{what}: {e}") });
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd { fd: self.port.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the port's open descriptor.
            let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
            if ready <= 0 || left.is_zero() {
                return Err(self.link(format!("{what}: no reply within {} ms", self.timeout.as_millis())));
            }
            let n = self.port.read(&mut chunk).map_err(|e| self.link(format!("read: {e}")))?;
            if n == 0 {
                return Err(self.link(format!("{what}: the port closed")));
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }
}
