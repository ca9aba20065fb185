//! The `feetech` driver: Feetech STS3215 servos on a half-duplex serial bus (SO-100/101 arms),
//! with LeRobot's calibration files, behind the [`Robot`] trait in joint-position mode.
//!
//! The protocol codec is written here (about 100 lines) rather than taken from `rustypot`:
//! rustypot drives a `serialport::SerialPort`, which this workspace does not otherwise need,
//! and the subset used is small and fully specified — instruction packet `FF FF id len instr
//! params… chk`, status packet `FF FF id len error params… chk`, `len = params + 2`,
//! `chk = !(id + len + instr/error + Σ params) & 0xFF`; instructions PING 0x01, READ 0x02,
//! WRITE 0x03, SYNC WRITE 0x83; STS3215 registers (little-endian u16): torque enable 40,
//! goal position 42, present position 56, present speed 58 (bit 15 = sign).
//!
//! Units: ticks `t` in 0..4096 per turn. LeRobot's calibration (`{"shoulder_pan": {"id": 1,
//! "drive_mode": 0, "homing_offset": …, "range_min": …, "range_max": …}, …}`) gives each
//! motor's range; a joint angle is q = (t − mid) · 2π / 4096 with mid = (range_min +
//! range_max) / 2 (negated when `drive_mode` is 1), and a target is clamped into
//! [range_min, range_max] before it is sent (a second line of defence behind the envelope).

use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, ControlMode, DriverError, Fault, Robot, RobotState};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Register addresses of the STS3215 used here.
pub mod reg {
    /// Torque enable (1 byte).
    pub const TORQUE_ENABLE: u8 = 40;
    /// Goal position (2 bytes).
    pub const GOAL_POSITION: u8 = 42;
    /// Present position (2 bytes).
    pub const PRESENT_POSITION: u8 = 56;
    /// Present speed (2 bytes, bit 15 the sign).
    pub const PRESENT_SPEED: u8 = 58;
}

/// Instructions.
pub mod instr {
    /// Ping.
    pub const PING: u8 = 0x01;
    /// Read registers.
    pub const READ: u8 = 0x02;
    /// Write registers.
    pub const WRITE: u8 = 0x03;
    /// Write the same registers of several servos.
    pub const SYNC_WRITE: u8 = 0x83;
}

/// The checksum of a packet body (`id, len, instr/error, params…`).
pub fn checksum(body: &[u8]) -> u8 {
    !body.iter().fold(0u8, |a, b| a.wrapping_add(*b))
}

/// An instruction (or status) packet: `FF FF id len code params… chk`.
pub fn packet(id: u8, code: u8, params: &[u8]) -> Vec<u8> {
    let mut body = vec![id, (params.len() + 2) as u8, code];
    body.extend_from_slice(params);
    let chk = checksum(&body);
    let mut p = vec![0xFF, 0xFF];
    p.extend(body);
    p.push(chk);
    p
}

/// Parse one packet from the front of `buf`: (id, code, params, bytes used); `None` when
/// incomplete; an error on a bad checksum.
pub fn parse(buf: &[u8]) -> Result<Option<(u8, u8, Vec<u8>, usize)>, String> {
    let Some(start) = buf.windows(2).position(|w| w == [0xFF, 0xFF]) else { return Ok(None) };
    let b = &buf[start..];
    if b.len() < 4 {
        return Ok(None);
    }
    let (id, len) = (b[2], b[3] as usize);
    if len < 2 {
        return Err(format!("packet length {len} < 2"));
    }
    if b.len() < 4 + len {
        return Ok(None);
    }
    let body = &b[2..3 + len];
    let chk = b[3 + len];
    if checksum(body) != chk {
        return Err(format!("checksum {chk:#04x}, expected {:#04x}", checksum(body)));
    }
    Ok(Some((id, b[4], b[5..3 + len].to_vec(), start + 4 + len)))
}

/// One motor's calibration, as LeRobot writes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MotorCalibration {
    /// Bus id.
    pub id: u8,
    /// 1: the joint turns the other way.
    #[serde(default)]
    pub drive_mode: u8,
    /// Offset written to the servo by LeRobot's calibration (kept for the record).
    #[serde(default)]
    pub homing_offset: i32,
    /// Lowest allowed position (ticks).
    pub range_min: u16,
    /// Highest allowed position (ticks).
    pub range_max: u16,
}

impl MotorCalibration {
    fn mid(&self) -> f64 {
        (f64::from(self.range_min) + f64::from(self.range_max)) / 2.0
    }
    fn sign(&self) -> f64 {
        if self.drive_mode == 1 { -1.0 } else { 1.0 }
    }
    /// Ticks → radians.
    pub fn to_rad(&self, ticks: u16) -> f64 {
        self.sign() * (f64::from(ticks) - self.mid()) * std::f64::consts::TAU / 4096.0
    }
    /// Radians → ticks, clamped into the calibrated range.
    pub fn to_ticks(&self, rad: f64) -> u16 {
        let t = self.mid() + self.sign() * rad * 4096.0 / std::f64::consts::TAU;
        t.round().clamp(f64::from(self.range_min), f64::from(self.range_max)) as u16
    }
}

/// The `feetech` driver's settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeetechConfig {
    /// The serial port, e.g. `/dev/ttyACM0`.
    pub port: PathBuf,
    /// Baud rate (STS3215 default 1 000 000).
    #[serde(default = "default_baud")]
    pub baud: u32,
    /// LeRobot's calibration JSON for this arm (motor name → calibration).
    pub calibration: PathBuf,
    /// Motor names in joint order (default: the calibration's motors by ascending id).
    #[serde(default)]
    pub motors: Vec<String>,
    /// Home pose (rad per joint; default all 0, the middle of each range).
    #[serde(default)]
    pub home: Vec<f64>,
    /// A reply later than this is a lost link (ms).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn default_baud() -> u32 {
    1_000_000
}
fn default_timeout() -> u64 {
    20
}

/// Read LeRobot's calibration file: motors by ascending bus id.
pub fn read_calibration(path: &Path) -> Result<Vec<(String, MotorCalibration)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the calibration {}: {e}", path.display()))?;
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).map_err(|e| format!("{}: not a LeRobot calibration file: {e}", path.display()))?;
    map.into_iter()
        .map(|(name, v)| {
            let c: MotorCalibration = serde_json::from_value(v).map_err(|e| format!("{}: motor {name}: {e} (expected id, drive_mode, homing_offset, range_min, range_max)", path.display()))?;
            if c.range_min >= c.range_max || c.range_max > 4095 {
                return Err(format!("{}: motor {name}: range_min {} / range_max {}: expected range_min < range_max <= 4095", path.display(), c.range_min, c.range_max));
            }
            Ok((name, c))
        })
        .collect::<Result<Vec<_>, String>>()
        .map(|mut v| {
            v.sort_by_key(|(_, c)| c.id);
            v
        })
}

/// The arm on its bus.
pub struct FeetechArm {
    caps: Capabilities,
    config: FeetechConfig,
    motors: Vec<MotorCalibration>,
    port: Option<File>,
    clock: Arc<dyn Clock>,
    fault: Option<Fault>,
}

impl FeetechArm {
    /// The arm of `config` (the calibration is read now; the port opens at `connect`).
    pub fn new(config: FeetechConfig, clock: Arc<dyn Clock>) -> Result<Self, DriverError> {
        let unsupported = |message: String| DriverError::Unsupported { driver: "feetech".into(), message };
        let by_id = read_calibration(&config.calibration).map_err(unsupported)?;
        let names: Vec<String> = if config.motors.is_empty() { by_id.iter().map(|(n, _)| n.clone()).collect() } else { config.motors.clone() };
        let cal: BTreeMap<String, MotorCalibration> = by_id.into_iter().collect();
        let motors = names.iter().map(|n| cal.get(n).cloned().ok_or_else(|| unsupported(format!("driver.motors: `{n}` is not in {}", config.calibration.display())))).collect::<Result<Vec<_>, _>>()?;
        if !config.home.is_empty() && config.home.len() != motors.len() {
            return Err(unsupported(format!("driver.home: expected {} joint positions, found {}", motors.len(), config.home.len())));
        }
        let caps = Capabilities { name: format!("feetech {}", config.port.display()), joints: names, modes: vec![ControlMode::JointPosition], has_end_effector: false };
        Ok(Self { caps, config, motors, port: None, clock, fault: None })
    }

    fn link(&self, message: String) -> DriverError {
        DriverError::Link { driver: self.caps.name.clone(), message }
    }

    /// One instruction; the status reply's params (none expected for `id = 0xFE`, broadcast).
    fn transact(&mut self, id: u8, code: u8, params: &[u8]) -> Result<Vec<u8>, DriverError> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let link = |m: String| DriverError::Link { driver: self.caps.name.clone(), message: m };
        let port = self.port.as_mut().ok_or_else(|| link("not connected".into()))?;
        port.write_all(&packet(id, code, params)).map_err(|e| link(format!("write: {e}")))?;
        if id == 0xFE {
            return Ok(Vec::new());
        }
        let mut buf = Vec::new();
        let mut chunk = [0u8; 64];
        loop {
            let mut pfd = libc::pollfd { fd: port.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the port's open descriptor.
            let ready = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
            if ready <= 0 {
                return Err(link(format!("servo {id} did not answer within {} ms", timeout.as_millis())));
            }
            let n = port.read(&mut chunk).map_err(|e| link(format!("read: {e}")))?;
            buf.extend_from_slice(&chunk[..n]);
            match parse(&buf) {
                Ok(Some((rid, error, params, _))) if rid == id => {
                    if error != 0 {
                        let fault = Fault { message: format!("servo {id} status error {error:#04x} (overload, overheat or voltage)") };
                        self.fault = Some(fault.clone());
                        return Err(DriverError::Fault { driver: self.caps.name.clone(), fault });
                    }
                    return Ok(params);
                }
                Ok(Some(_)) => buf.clear(),
                Ok(None) => {}
                Err(e) => return Err(DriverError::Dropped { driver: self.caps.name.clone(), what: format!("status of servo {id}: {e}") }),
            }
        }
    }

    fn read_u16(&mut self, id: u8, addr: u8) -> Result<u16, DriverError> {
        let p = self.transact(id, instr::READ, &[addr, 2])?;
        if p.len() != 2 {
            return Err(DriverError::Dropped { driver: self.caps.name.clone(), what: format!("servo {id} sent {} bytes for a 2-byte read", p.len()) });
        }
        Ok(u16::from_le_bytes([p[0], p[1]]))
    }

    fn goal(&mut self, ticks: &[u16]) -> Result<(), DriverError> {
        let mut params = vec![reg::GOAL_POSITION, 2];
        for (m, t) in self.motors.iter().zip(ticks) {
            params.push(m.id);
            params.extend_from_slice(&t.to_le_bytes());
        }
        self.transact(0xFE, instr::SYNC_WRITE, &params).map(|_| ())
    }

    fn present_ticks(&mut self) -> Result<Vec<u16>, DriverError> {
        let ids: Vec<u8> = self.motors.iter().map(|m| m.id).collect();
        ids.iter().map(|id| self.read_u16(*id, reg::PRESENT_POSITION)).collect()
    }
}

/// Open `path` as a raw serial port at `baud` (8N1, no flow control, no echo).
fn open_raw(path: &Path, baud: u32) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(path)?;
    let speed = match baud {
        1_000_000 => libc::B1000000,
        500_000 => libc::B500000,
        115_200 => libc::B115200,
        57_600 => libc::B57600,
        other => return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("baud {other}: expected 1000000, 500000, 115200 or 57600"))),
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

impl Robot for FeetechArm {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let port = open_raw(&self.config.port, self.config.baud).map_err(|e| self.link(format!("cannot open {}: {e}", self.config.port.display())))?;
        self.port = Some(port);
        let ids: Vec<u8> = self.motors.iter().map(|m| m.id).collect();
        for id in ids {
            self.transact(id, instr::PING, &[])?;
            // hold where it is, then enable torque
            let t = self.read_u16(id, reg::PRESENT_POSITION)?;
            self.transact(id, instr::WRITE, &[reg::GOAL_POSITION, t.to_le_bytes()[0], t.to_le_bytes()[1]])?;
            self.transact(id, instr::WRITE, &[reg::TORQUE_ENABLE, 1])?;
        }
        Ok(())
    }

    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        let ticks = self.present_ticks()?;
        let mut vel = Vec::with_capacity(ticks.len());
        for i in 0..self.motors.len() {
            let raw = self.read_u16(self.motors[i].id, reg::PRESENT_SPEED)?;
            // sign-magnitude, ticks/s
            let v = f64::from(raw & 0x7FFF) * if raw & 0x8000 != 0 { -1.0 } else { 1.0 };
            vel.push(self.motors[i].sign() * v * std::f64::consts::TAU / 4096.0);
        }
        let q = self.motors.iter().zip(&ticks).map(|(m, t)| m.to_rad(*t)).collect();
        Ok(RobotState { joint_positions: q, joint_velocities: vel, ee_position: None, extra: Vec::new(), stamp: self.clock.now() })
    }

    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        let ticks: Vec<u16> = self.motors.iter().zip(command.values()).map(|(m, q)| m.to_ticks(*q)).collect();
        self.goal(&ticks)
    }

    fn stop(&mut self) -> Result<(), DriverError> {
        let ticks = self.present_ticks()?;
        self.goal(&ticks)
    }

    /// Homing sends the home pose as one goal; the servos' own speed profile moves there. The
    /// envelope does not limit this move: keep the arm near home before connecting.
    fn home(&mut self) -> Result<(), DriverError> {
        let home = if self.config.home.is_empty() { vec![0.0; self.motors.len()] } else { self.config.home.clone() };
        let ticks: Vec<u16> = self.motors.iter().zip(&home).map(|(m, q)| m.to_ticks(*q)).collect();
        self.goal(&ticks)
    }

    fn fault(&mut self) -> Option<Fault> {
        self.fault.clone()
    }

    fn clear_fault(&mut self) -> Result<(), DriverError> {
        let ids: Vec<u8> = self.motors.iter().map(|m| m.id).collect();
        for id in ids {
            self.transact(id, instr::PING, &[])?;
        }
        self.fault = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip_with_their_checksum() {
        // PING servo 1: FF FF 01 02 01 FB (the STS manual's example)
        assert_eq!(packet(1, instr::PING, &[]), vec![0xFF, 0xFF, 0x01, 0x02, 0x01, 0xFB]);
        let p = packet(3, instr::WRITE, &[42, 0x00, 0x08]);
        let (id, code, params, used) = parse(&p).unwrap().unwrap();
        assert_eq!((id, code, params, used), (3, instr::WRITE, vec![42, 0, 8], p.len()));
        let mut bad = p.clone();
        bad[5] ^= 1;
        assert!(parse(&bad).is_err());
        assert_eq!(parse(&p[..4]).unwrap(), None);
    }

    #[test]
    fn calibration_maps_ticks_to_radians_inside_the_range() {
        let c = MotorCalibration { id: 1, drive_mode: 0, homing_offset: 0, range_min: 1000, range_max: 3000 };
        assert_eq!(c.to_rad(2000), 0.0);
        assert!((c.to_rad(3024) - std::f64::consts::FRAC_PI_2).abs() < 0.05);
        assert_eq!(c.to_ticks(0.0), 2000);
        assert_eq!(c.to_ticks(100.0), 3000, "clamped into the range");
        let r = MotorCalibration { drive_mode: 1, ..c };
        assert_eq!(r.to_ticks(0.1), 2000 - 65);
    }
}
