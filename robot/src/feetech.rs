//! The `feetech` driver: Feetech STS3215 servos on a half-duplex serial bus (SO-100/101 arms),
//! with LeRobot's calibration files, behind the [`Robot`] trait in joint-position mode.
//!
//! The protocol codec is written here (about 100 lines), on the transaction [`crate::serial`]
//! shares with the Dynamixel driver; the subset used is small and fully specified (`rustypot`,
//! whose cost was a `serialport` port, has not been re-evaluated since ours became one) —
//! instruction packet `FF FF id len instr params… chk`, status packet `FF FF id len error
//! params… chk`, `len = params + 2`, `chk = !(id + len + instr/error + Σ params) & 0xFF`;
//! instructions PING 0x01, READ 0x02, WRITE 0x03, SYNC WRITE 0x83; STS3215 registers
//! (little-endian u16): torque enable 40, goal position 42, present position 56, present speed
//! 58 (bit 15 = sign).
//!
//! Units and calibration: LeRobot's calibration file and the tick ↔ radian mapping are shared
//! with the Dynamixel driver ([`crate::calibration`]); so is the serial port ([`crate::serial`]).

use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, DriverError, Fault, PhysicalLimits, Robot, RobotState};
use crate::serial::{Parsed, SerialLink};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::calibration::ServoArm;
pub use crate::calibration::{read_calibration, MotorCalibration};

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

/// The arm on its bus.
pub struct FeetechArm {
    arm: ServoArm,
    config: FeetechConfig,
    port: Option<SerialLink>,
    clock: Arc<dyn Clock>,
    fault: Option<Fault>,
}

impl FeetechArm {
    /// The arm of `config` (the calibration is read now; the port opens at `connect`).
    pub fn new(config: FeetechConfig, clock: Arc<dyn Clock>) -> Result<Self, DriverError> {
        let arm = ServoArm::load("feetech", &config.port, &config.calibration, &config.motors, &config.home)?;
        Ok(Self { arm, config, port: None, clock, fault: None })
    }

    /// One instruction; the status reply's params (none expected for `id = 0xFE`, broadcast).
    fn transact(&mut self, id: u8, code: u8, params: &[u8]) -> Result<Vec<u8>, DriverError> {
        let name = self.arm.caps.name.clone();
        let port = self
            .port
            .as_mut()
            .ok_or_else(|| DriverError::Link { driver: name.clone(), message: "not connected".into() })?;
        port.send(&packet(id, code, params))?;
        if id == 0xFE {
            return Ok(Vec::new());
        }
        let what = format!("status of servo {id}");
        // A reply from another id (a stray packet on the bus) is skipped, a few times at most.
        let mut reply = None;
        for _ in 0..4 {
            let (rid, error, params) = port.receive(&what, |b| {
                Ok(match parse(b)? {
                    Some((rid, error, params, used)) => Parsed::Packet((rid, error, params), used),
                    None => Parsed::Incomplete,
                })
            })?;
            if rid == id {
                reply = Some((error, params));
                break;
            }
        }
        let Some((error, params)) = reply else {
            return Err(DriverError::Dropped { driver: name, what: format!("{what}: only replies from other ids") });
        };
        if error != 0 {
            let fault =
                Fault { message: format!("servo {id} status error {error:#04x} (overload, overheat or voltage)") };
            self.fault = Some(fault.clone());
            return Err(DriverError::Fault { driver: name, fault });
        }
        Ok(params)
    }

    fn read_u16(&mut self, id: u8, addr: u8) -> Result<u16, DriverError> {
        let p = self.transact(id, instr::READ, &[addr, 2])?;
        if p.len() != 2 {
            return Err(DriverError::Dropped {
                driver: self.arm.caps.name.clone(),
                what: format!("servo {id} sent {} bytes for a 2-byte read", p.len()),
            });
        }
        Ok(u16::from_le_bytes([p[0], p[1]]))
    }

    fn goal(&mut self, ticks: &[u16]) -> Result<(), DriverError> {
        let mut params = vec![reg::GOAL_POSITION, 2];
        for (m, t) in self.arm.motors.iter().zip(ticks) {
            params.push(m.id);
            params.extend_from_slice(&t.to_le_bytes());
        }
        self.transact(0xFE, instr::SYNC_WRITE, &params).map(|_| ())
    }

    fn present_ticks(&mut self) -> Result<Vec<u16>, DriverError> {
        let ids = self.arm.ids();
        ids.iter().map(|id| self.read_u16(*id, reg::PRESENT_POSITION)).collect()
    }
}

/// The STS3215's (SO-100/101) fastest rated no-load speed, 0.192 s per 60° at 7.4 V (52 rev/min;
/// the 12 V C018 is rated 0.222 s per 60°), in rad/s: the most `max_velocity` may ask of this
/// driver's arms (`allow_beyond_model = true` for a faster servo).
pub const STS3215_MAX_SPEED: f64 = std::f64::consts::FRAC_PI_3 / 0.192;

impl Robot for FeetechArm {
    fn capabilities(&self) -> &Capabilities {
        &self.arm.caps
    }

    fn physical_limits(&self) -> PhysicalLimits {
        self.arm.limits(Some(STS3215_MAX_SPEED))
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        // The port is held exclusively: close the old link first (the assignment below drops it
        // only after the new one is open).
        self.port = None;
        self.port = Some(SerialLink::open(
            &self.arm.caps.name,
            &self.config.port,
            self.config.baud,
            Duration::from_millis(self.config.timeout_ms),
        )?);
        let ids = self.arm.ids();
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
        for i in 0..self.arm.motors.len() {
            let raw = self.read_u16(self.arm.motors[i].id, reg::PRESENT_SPEED)?;
            // sign-magnitude, ticks/s
            let v = f64::from(raw & 0x7FFF) * if raw & 0x8000 != 0 { -1.0 } else { 1.0 };
            vel.push(self.arm.motors[i].sign() * v * std::f64::consts::TAU / 4096.0);
        }
        let q = self.arm.motors.iter().zip(&ticks).map(|(m, t)| m.to_rad(*t)).collect();
        Ok(RobotState {
            joint_positions: q,
            joint_velocities: vel,
            ee_position: None,
            extra: Vec::new(),
            stamp: self.clock.now(),
        })
    }

    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        let ticks = self.arm.ticks(command.values());
        self.goal(&ticks)
    }

    fn stop(&mut self) -> Result<(), DriverError> {
        let ticks = self.present_ticks()?;
        self.goal(&ticks)
    }

    /// Homing sends the home pose as one goal; the servos' own speed profile moves there. The
    /// envelope does not limit this move: keep the arm near home before connecting.
    fn home(&mut self) -> Result<(), DriverError> {
        let ticks = self.arm.ticks(&self.arm.home);
        self.goal(&ticks)
    }

    fn fault(&mut self) -> Option<Fault> {
        self.fault.clone()
    }

    fn clear_fault(&mut self) -> Result<(), DriverError> {
        let ids = self.arm.ids();
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
}
