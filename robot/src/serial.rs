//! The serial plumbing the servo-bus drivers share ([`crate::feetech`], [`crate::dynamixel`]):
//! the bus's port, one request → reply transaction with a deadline on the loop's monotonic
//! clock, a reassembly buffer for replies that arrive split or several at once (a sync read's
//! status packets), and the mapping of what goes wrong onto the [`DriverError`]s the safety
//! layer acts on: no reply in time is a lost link ([`DriverError::Link`]), a corrupt reply a
//! dropped message ([`DriverError::Dropped`]).
//!
//! The port is the `serialport` crate's: 8N1 raw at any baud rate the adapter takes (Linux's
//! arbitrary-rate termios), opened for this process alone (`TIOCEXCL` and an exclusive `flock`,
//! so LeRobot or a second o2o cannot talk on the bus at the same time), with a timeout on every
//! read and write. What the crate does not set, the USB adapter's latency timer, is asked of
//! sysfs ([`latency_timer`]). The same code drives the pseudo-terminal of the fake-bus tests
//! ([`crate::testing::pty_pair`]).

use crate::driver::DriverError;
use serialport::{ClearBuffer, DataBits, FlowControl, Parity, SerialPort, StopBits, TTYPort};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
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

/// Open `path` as the bus's port at `baud`: 8N1, raw, no flow control, exclusive, `timeout` on
/// each read and write.
pub fn open_port(path: &Path, baud: u32, timeout: Duration) -> serialport::Result<TTYPort> {
    serialport::new(path.to_string_lossy(), baud)
        .data_bits(DataBits::Eight)
        .parity(Parity::None)
        .stop_bits(StopBits::One)
        .flow_control(FlowControl::None)
        .exclusive(true)
        .timeout(timeout)
        .open_native()
}

/// Where Linux shows each tty's device attributes.
pub const SYS_TTY: &str = "/sys/class/tty";

/// The USB adapter's latency timer behind `port` (ms) and the sysfs file that holds it, after
/// asking for 1 ms; `None` when the port has none (CDC-ACM boards such as Feetech's, a pty).
///
/// An FTDI adapter (the U2D2, many USB-TTL boards; Linux's `ftdi_sio`) holds received bytes for
/// up to this timer, 16 ms by default, before passing them on, so every status reply can arrive
/// 16 ms late: most of a 20 ms reply timeout, and several times over in a step that reads each
/// servo. Writing the file needs root or a udev rule; the value read back is what holds.
/// `sys_tty` is [`SYS_TTY`] outside tests.
pub fn latency_timer(sys_tty: &Path, port: &Path) -> Option<(u32, PathBuf)> {
    // A /dev/serial/by-id/… link resolves to the ttyUSBn that names the sysfs folder.
    let dev = std::fs::canonicalize(port).ok()?;
    let attr = sys_tty.join(dev.file_name()?).join("device").join("latency_timer");
    let read = || std::fs::read_to_string(&attr).ok()?.trim().parse::<u32>().ok();
    if read()? > 1 {
        // Refused without root: the timeout message then says how to set it.
        let _ = std::fs::write(&attr, "1");
    }
    Some((read()?, attr))
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
    port: TTYPort,
    timeout: Duration,
    pending: Vec<u8>,
    /// The adapter's latency timer (ms) and its sysfs file, when it has one.
    latency: Option<(u32, PathBuf)>,
}

impl SerialLink {
    /// Open `path` at `baud` for the driver named `driver`; a reply later than `timeout` is a
    /// lost link.
    pub fn open(driver: &str, path: &Path, baud: u32, timeout: Duration) -> Result<Self, DriverError> {
        require_port(driver, path)?;
        let port = open_port(path, baud, timeout).map_err(|e| {
            let hint = match e.kind() {
                // What the crate reports when another process holds the port's lock.
                serialport::ErrorKind::NoDevice => " (is another program, e.g. LeRobot, using the bus?)",
                serialport::ErrorKind::Io(ErrorKind::PermissionDenied) => {
                    " (add your user to the port's group, e.g. `sudo usermod -aG dialout $USER`, and log in again)"
                }
                _ => "",
            };
            DriverError::Link { driver: driver.into(), message: format!("cannot open {}: {e}{hint}", path.display()) }
        })?;
        let latency = latency_timer(Path::new(SYS_TTY), path);
        Ok(Self { driver: driver.to_string(), port, timeout, pending: Vec::new(), latency })
    }

    fn link(&self, message: String) -> DriverError {
        DriverError::Link { driver: self.driver.clone(), message }
    }

    /// No reply to `what` in time; names a latency timer that could not be lowered, the usual
    /// cause on an FTDI adapter.
    fn no_reply(&self, what: &str) -> DriverError {
        let mut message = format!("{what}: no reply within {} ms", self.timeout.as_millis());
        if let Some((ms, attr)) = self.latency.as_ref().filter(|(ms, _)| *ms > 1) {
            message += &format!(
                " (the USB adapter holds replies for its {ms} ms latency timer: `echo 1 | sudo tee {}`, or a udev rule, sets it to 1 ms)",
                attr.display()
            );
        }
        self.link(message)
    }

    /// Send `bytes`, after discarding anything unread (a late reply to an earlier request).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), DriverError> {
        self.pending.clear();
        self.port.clear(ClearBuffer::Input).map_err(|e| self.link(format!("discard input: {e}")))?;
        // `receive` shortens the timeout to what is left of its deadline.
        self.port.set_timeout(self.timeout).map_err(|e| self.link(format!("timeout: {e}")))?;
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
            if left.is_zero() {
                return Err(self.no_reply(what));
            }
            self.port.set_timeout(left).map_err(|e| self.link(format!("timeout: {e}")))?;
            match self.port.read(&mut chunk) {
                Ok(0) => return Err(self.link(format!("{what}: the port closed"))),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::TimedOut => return Err(self.no_reply(what)),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.link(format!("read: {e}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pty_pair;

    /// A toy framing for the tests: a length byte, then that many bytes; 0xFF is corrupt.
    fn toy(b: &[u8]) -> Result<Parsed<Vec<u8>>, String> {
        match b.first() {
            None => Ok(Parsed::Incomplete),
            Some(0xFF) => Err("corrupt".into()),
            Some(&n) if b.len() > usize::from(n) => {
                Ok(Parsed::Packet(b[1..=usize::from(n)].to_vec(), 1 + usize::from(n)))
            }
            Some(_) => Ok(Parsed::Incomplete),
        }
    }

    #[test]
    fn replies_are_reassembled_and_failures_map_onto_driver_errors() {
        let (path, mut master, _keep) = pty_pair().unwrap();
        let mut link = SerialLink::open("test", &path, 1_000_000, Duration::from_millis(200)).unwrap();
        link.send(&[1, 2, 3]).unwrap();
        let mut got = [0u8; 3];
        master.read_exact(&mut got).unwrap();
        assert_eq!(got, [1, 2, 3]);
        // A reply split across writes, then two replies in one write.
        let writer = std::thread::spawn(move || {
            master.write_all(&[3, 7]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            master.write_all(&[8, 9, 1, 5, 0xFF]).unwrap();
            master
        });
        assert_eq!(link.receive("a", toy).unwrap(), vec![7, 8, 9]);
        assert_eq!(link.receive("b", toy).unwrap(), vec![5]);
        let mut master = writer.join().unwrap();
        let e = link.receive("c", toy).unwrap_err();
        assert!(matches!(&e, DriverError::Dropped { what, .. } if what == "c: corrupt"), "{e}");
        // Silence: a lost link once the deadline passes, not before.
        let t = Instant::now();
        let e = link.receive("d", toy).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(200), "{:?}", t.elapsed());
        assert!(matches!(&e, DriverError::Link { message, .. } if message == "d: no reply within 200 ms"), "{e}");
        // `send` drops a late reply to an earlier request.
        master.write_all(&[1, 4]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        link.send(&[0]).unwrap();
        master.write_all(&[1, 6]).unwrap();
        assert_eq!(link.receive("e", toy).unwrap(), vec![6]);
    }

    #[test]
    fn a_port_is_held_by_one_link_at_a_time() {
        let (path, _master, _keep) = pty_pair().unwrap();
        let first = SerialLink::open("test", &path, 1_000_000, Duration::from_millis(20)).unwrap();
        let e = SerialLink::open("test", &path, 1_000_000, Duration::from_millis(20)).err().unwrap().to_string();
        assert!(e.contains("cannot open") && e.contains("another program"), "{e}");
        drop(first);
        SerialLink::open("test", &path, 1_000_000, Duration::from_millis(20)).unwrap();
    }

    #[test]
    fn the_latency_timer_is_lowered_through_sysfs_and_named_when_it_stays_high() {
        let dir = tempfile::tempdir().unwrap();
        let (dev, sys) = (dir.path().join("dev"), dir.path().join("sys"));
        std::fs::create_dir_all(sys.join("ttyUSB3/device")).unwrap();
        std::fs::create_dir_all(dev.join("serial/by-id")).unwrap();
        std::fs::write(dev.join("ttyUSB3"), "").unwrap();
        let by_id = dev.join("serial/by-id/usb-FTDI_USB__-__Serial_Converter_FT1-if00-port0");
        std::os::unix::fs::symlink(dev.join("ttyUSB3"), &by_id).unwrap();
        let attr = sys.join("ttyUSB3/device/latency_timer");
        std::fs::write(&attr, "16\n").unwrap();
        assert_eq!(latency_timer(&sys, &by_id), Some((1, attr.clone())));
        assert_eq!(std::fs::read_to_string(&attr).unwrap(), "1");
        assert_eq!(latency_timer(&sys, &dev.join("ttyACM0")), None, "no such port");
        std::fs::write(dev.join("ttyACM0"), "").unwrap();
        assert_eq!(latency_timer(&sys, &dev.join("ttyACM0")), None, "no latency timer");

        // A timer that stays high (no root) is named in the lost-link message.
        let (path, _master, _keep) = pty_pair().unwrap();
        let mut link = SerialLink::open("test", &path, 1_000_000, Duration::from_millis(5)).unwrap();
        link.latency = Some((16, attr.clone()));
        let e = link.receive("status", toy).unwrap_err().to_string();
        assert!(e.contains("its 16 ms latency timer") && e.contains(&format!("sudo tee {}", attr.display())), "{e}");
    }
}
