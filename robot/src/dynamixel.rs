//! The `dynamixel` driver: ROBOTIS X-series servos (XL330, XL430, XM430, …) on a half-duplex
//! serial bus speaking protocol 2.0 (Koch v1.1 arms), with LeRobot's calibration files, behind
//! the [`Robot`] trait in joint-position mode.
//!
//! The codec is ours, like [`crate::feetech`]'s, on the link [`crate::serial`] both drivers
//! share, rather than the `dynamixel2` crate's: 0.9.1, tried on this crate's pty fake bus, opens
//! a pty and takes our port's descriptor, but its sync reads return `Ok` with the servos that
//! failed left out, its calls wait 34 ms instead of `timeout_ms`, and a status packet whose
//! length field is 2 or 3 with a matching CRC panics its reader (docs/robots.md has the
//! measurements). The subset used is small and fully specified by ROBOTIS' protocol 2.0 page:
//!
//! - instruction packet `FF FF FD 00 | id | len_l len_h | instr | params… | crc_l crc_h`, with
//!   `len = (stuffed) params + 3`;
//! - status packet `FF FF FD 00 | id | len_l len_h | 55 | error | params… | crc_l crc_h`,
//!   `len = params + 4`;
//! - CRC-16 with polynomial 0x8005, initial value 0, no reflection, over every byte from the
//!   header to the last parameter (as transmitted, after stuffing);
//! - byte stuffing: inside the instruction-to-parameters field, every `FF FF FD` is followed by
//!   an extra `FD`, so the header pattern never appears inside a packet;
//! - instructions PING 0x01, READ 0x02, WRITE 0x03, REBOOT 0x08, SYNC READ 0x82 (one request,
//!   one status packet per listed id, in order), SYNC WRITE 0x83 (no reply); broadcast id 0xFE;
//! - the status error byte: bit 7 the hardware alert (Hardware Error Status, register 70, says
//!   which: voltage, overheating, encoder, electrical shock, overload; cleared only by a
//!   reboot), bits 0–6 the instruction's error (1 result fail, 2 instruction, 3 CRC, 4 data
//!   range, 5 data length, 6 data limit, 7 access).
//!
//! Faults the safety layer sees: a reply that does not arrive within `timeout_ms` is a lost
//! link; a reply with a bad CRC, or the servo's own "CRC error" (our packet arrived
//! corrupted), is a dropped message the loop may retry; a hardware alert or any other status
//! error is a fault, latched until an operator clears it (the driver then reboots the alerted
//! servos and holds them where they are).
//!
//! Calibration: LeRobot's JSON ([`crate::calibration`]); at connect, with torque off, the
//! servos' Homing Offset and position limits are written where they differ from the file (as
//! LeRobot's `write_calibration` does), so the servo itself also refuses goals outside
//! `[range_min, range_max]` — a third line of defence behind the envelope and the driver's
//! clamp.

use crate::calibration::ServoArm;
use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, DriverError, Fault, PhysicalLimits, Robot, RobotState};
use crate::serial::{Parsed, SerialLink};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The packet header.
pub const HEADER: [u8; 4] = [0xFF, 0xFF, 0xFD, 0x00];

/// The broadcast id (sync read/write, no direct reply).
pub const BROADCAST: u8 = 0xFE;

/// Instructions.
pub mod instr {
    /// Ping (reply: model number, firmware version).
    pub const PING: u8 = 0x01;
    /// Read `len` bytes from `addr`.
    pub const READ: u8 = 0x02;
    /// Write bytes at `addr`.
    pub const WRITE: u8 = 0x03;
    /// Reboot (clears a hardware alert; torque comes back off).
    pub const REBOOT: u8 = 0x08;
    /// The instruction byte of a status packet.
    pub const STATUS: u8 = 0x55;
    /// Read the same registers of several servos (one status packet each).
    pub const SYNC_READ: u8 = 0x82;
    /// Write the same registers of several servos.
    pub const SYNC_WRITE: u8 = 0x83;
}

/// The X-series control table (XL330, XL430, XC430, XM430, XH430, XM540 share these
/// addresses): `(address, size in bytes)`.
pub mod reg {
    /// Model number (EEPROM).
    pub const MODEL_NUMBER: (u16, u16) = (0, 2);
    /// Operating mode (EEPROM): 3 position, 4 extended position, 5 current-based position.
    pub const OPERATING_MODE: (u16, u16) = (11, 1);
    /// Velocity limit (EEPROM, 0.229 rev/min per unit): the fastest the servo will turn.
    pub const VELOCITY_LIMIT: (u16, u16) = (44, 4);
    /// Homing offset, added by the servo to every position reading (EEPROM, signed).
    pub const HOMING_OFFSET: (u16, u16) = (20, 4);
    /// Highest goal position the servo accepts in position mode (EEPROM).
    pub const MAX_POSITION_LIMIT: (u16, u16) = (48, 4);
    /// Lowest goal position the servo accepts in position mode (EEPROM).
    pub const MIN_POSITION_LIMIT: (u16, u16) = (52, 4);
    /// Torque enable (RAM); EEPROM registers are writable only while it is 0.
    pub const TORQUE_ENABLE: (u16, u16) = (64, 1);
    /// Hardware error status (RAM): which alert is set.
    pub const HARDWARE_ERROR_STATUS: (u16, u16) = (70, 1);
    /// Goal position (RAM, ticks).
    pub const GOAL_POSITION: (u16, u16) = (116, 4);
    /// Present velocity (RAM, signed, 0.229 rev/min per unit).
    pub const PRESENT_VELOCITY: (u16, u16) = (128, 4);
    /// Present position (RAM, signed ticks), right after the velocity.
    pub const PRESENT_POSITION: (u16, u16) = (132, 4);
}

/// Model numbers of the X-series servos whose control table is [`reg`].
pub const X_SERIES: [(u16, &str); 12] = [
    (1190, "XL330-M077"),
    (1200, "XL330-M288"),
    (1060, "XL430-W250"),
    (1090, "2XL430-W250"),
    (1070, "XC430-W150"),
    (1080, "XC430-W240"),
    (1010, "XH430-W350"),
    (1000, "XH430-W210"),
    (1020, "XM430-W350"),
    (1030, "XM430-W210"),
    (1120, "XM540-W270"),
    (1130, "XM540-W150"),
];

/// One velocity unit in rad/s (0.229 rev/min).
pub const VELOCITY_UNIT: f64 = 0.229 * std::f64::consts::TAU / 60.0;

/// CRC-16 of protocol 2.0: polynomial 0x8005, initial 0, MSB first, no final xor.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |mut crc, b| {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x8005 } else { crc << 1 };
        }
        crc
    })
}

/// Byte stuffing: an `FD` after every `FF FF FD` in `field` (instruction to last parameter).
pub fn stuff(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len() + 2);
    for &b in field {
        out.push(b);
        if out.ends_with(&[0xFF, 0xFF, 0xFD]) {
            out.push(0xFD);
        }
    }
    out
}

/// Undo [`stuff`]: drop the `FD` that follows each `FF FF FD`.
pub fn unstuff(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        out.push(field[i]);
        if out.ends_with(&[0xFF, 0xFF, 0xFD]) && field.get(i + 1) == Some(&0xFD) {
            i += 1;
        }
        i += 1;
    }
    out
}

fn frame(id: u8, field: &[u8]) -> Vec<u8> {
    let field = stuff(field);
    let len = (field.len() + 2) as u16;
    let mut p = HEADER.to_vec();
    p.push(id);
    p.extend_from_slice(&len.to_le_bytes());
    p.extend(field);
    let crc = crc16(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// An instruction packet.
pub fn instruction(id: u8, instr: u8, params: &[u8]) -> Vec<u8> {
    let mut field = vec![instr];
    field.extend_from_slice(params);
    frame(id, &field)
}

/// A status packet (what a servo sends back).
pub fn status(id: u8, error: u8, params: &[u8]) -> Vec<u8> {
    let mut field = vec![instr::STATUS, error];
    field.extend_from_slice(params);
    frame(id, &field)
}

/// One packet off the bus, unstuffed. For a status packet, `params[0]` is the error byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The servo id.
    pub id: u8,
    /// The instruction (0x55 for a status packet).
    pub instruction: u8,
    /// The parameters.
    pub params: Vec<u8>,
}

/// The longest packet accepted (a longer length field is garbage).
const MAX_LEN: usize = 1024;

/// Parse one packet from the front of `buf` (bytes before a header are skipped): the packet and
/// the bytes used; `None` when incomplete; an error on a bad CRC or length.
pub fn parse(buf: &[u8]) -> Result<Option<(Packet, usize)>, String> {
    let Some(start) = buf.windows(4).position(|w| w == HEADER) else { return Ok(None) };
    let b = &buf[start..];
    if b.len() < 7 {
        return Ok(None);
    }
    let len = usize::from(u16::from_le_bytes([b[5], b[6]]));
    if !(3..=MAX_LEN).contains(&len) {
        return Err(format!("packet length {len}: expected 3..={MAX_LEN}"));
    }
    if b.len() < 7 + len {
        return Ok(None);
    }
    let crc = u16::from_le_bytes([b[5 + len], b[6 + len]]);
    let expected = crc16(&b[..5 + len]);
    if crc != expected {
        return Err(format!("CRC {crc:#06x}, expected {expected:#06x}"));
    }
    let field = unstuff(&b[7..5 + len]);
    Ok(Some((Packet { id: b[4], instruction: field[0], params: field[1..].to_vec() }, start + 7 + len)))
}

/// Read / write parameters: `addr_l addr_h len_l len_h`.
pub fn span(addr: u16, len: u16) -> [u8; 4] {
    let (a, l) = (addr.to_le_bytes(), len.to_le_bytes());
    [a[0], a[1], l[0], l[1]]
}

/// The name of a status error byte's instruction error (bits 0–6).
pub fn error_name(error: u8) -> &'static str {
    match error & 0x7F {
        0 => "none",
        1 => "result fail",
        2 => "instruction error",
        3 => "CRC error",
        4 => "data range error",
        5 => "data length error",
        6 => "data limit error",
        7 => "access error",
        _ => "unknown error",
    }
}

/// What the bits of Hardware Error Status (register 70) mean.
pub fn hardware_error_names(bits: u8) -> Vec<&'static str> {
    [(0, "input voltage"), (2, "overheating"), (3, "motor encoder"), (4, "electrical shock"), (5, "overload")]
        .iter()
        .filter(|(b, _)| bits & (1 << b) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// The `dynamixel` driver's settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamixelConfig {
    /// The serial port, e.g. `/dev/ttyUSB0` (U2D2 adapter).
    pub port: PathBuf,
    /// Baud rate (Koch arms: 1 000 000; X-series factory default 57 600).
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
    /// Operating mode written at connect (3 position, 5 current-based position).
    #[serde(default = "default_mode")]
    pub operating_mode: u8,
    /// Write the calibration's homing offset and range as the servos' Homing Offset and
    /// position limits where they differ (torque off at connect), as LeRobot does; `false`:
    /// refuse to connect instead.
    #[serde(default = "default_true")]
    pub write_calibration: bool,
}

fn default_baud() -> u32 {
    1_000_000
}
fn default_timeout() -> u64 {
    20
}
fn default_mode() -> u8 {
    3
}
fn default_true() -> bool {
    true
}

/// The arm on its bus.
pub struct DynamixelArm {
    arm: ServoArm,
    config: DynamixelConfig,
    port: Option<SerialLink>,
    clock: Arc<dyn Clock>,
    fault: Option<Fault>,
    /// Each servo's Velocity Limit (rad/s), read at connect.
    velocity_limits: Vec<f64>,
}

/// A status reply: the servo's error byte and the parameters after it.
struct Reply {
    error: u8,
    params: Vec<u8>,
}

impl DynamixelArm {
    /// The arm of `config` (the port must exist; the calibration is read now; the port opens at
    /// `connect`).
    pub fn new(config: DynamixelConfig, clock: Arc<dyn Clock>) -> Result<Self, DriverError> {
        if ![3, 4, 5].contains(&config.operating_mode) {
            return Err(DriverError::Unsupported { driver: "dynamixel".into(), message: format!("driver.operating_mode: expected 3 (position), 4 (extended position) or 5 (current-based position), found {}", config.operating_mode) });
        }
        let arm = ServoArm::load("dynamixel", &config.port, &config.calibration, &config.motors, &config.home)?;
        Ok(Self { arm, config, port: None, clock, fault: None, velocity_limits: Vec::new() })
    }

    fn port(&mut self) -> Result<&mut SerialLink, DriverError> {
        let name = self.arm.caps.name.clone();
        self.port.as_mut().ok_or(DriverError::Link { driver: name, message: "not connected".into() })
    }

    /// The next status packet from servo `id` (a stray one from another id is skipped, a few
    /// times at most).
    fn receive(&mut self, id: u8, what: &str) -> Result<Reply, DriverError> {
        let what = format!("{what} of servo {id}");
        for _ in 0..4 {
            let p = self.port()?.receive(&what, |b| {
                Ok(match parse(b)? {
                    Some((p, used)) => Parsed::Packet(p, used),
                    None => Parsed::Incomplete,
                })
            })?;
            if p.id == id && p.instruction == instr::STATUS && !p.params.is_empty() {
                return Ok(Reply { error: p.params[0], params: p.params[1..].to_vec() });
            }
        }
        Err(DriverError::Dropped {
            driver: self.arm.caps.name.clone(),
            what: format!("{what}: only packets from other ids"),
        })
    }

    /// Map a reply's error byte onto a driver error: a hardware alert or an instruction error
    /// is a (latched) fault, except the servo's CRC error, a dropped message.
    fn check(&mut self, id: u8, reply: Reply) -> Result<Vec<u8>, DriverError> {
        if reply.error == 0 {
            return Ok(reply.params);
        }
        let driver = self.arm.caps.name.clone();
        if reply.error & 0x7F == 3 {
            return Err(DriverError::Dropped {
                driver,
                what: format!("servo {id} received a corrupted instruction (its CRC error)"),
            });
        }
        let message = if reply.error & 0x80 != 0 {
            // Which alert: Hardware Error Status, read without checking the (still set) alert.
            let bits = self
                .raw(id, instr::READ, &span(reg::HARDWARE_ERROR_STATUS.0, 1))
                .ok()
                .and_then(|r| r.params.first().copied());
            let names = bits
                .map(hardware_error_names)
                .filter(|n| !n.is_empty())
                .map_or("unknown".to_string(), |n| n.join(", "));
            format!("servo {id} hardware alert ({names}); reboot needed")
        } else {
            format!("servo {id} status error {:#04x} ({})", reply.error, error_name(reply.error))
        };
        let fault = Fault { message };
        self.fault = Some(fault.clone());
        Err(DriverError::Fault { driver, fault })
    }

    /// One instruction to one servo and its status reply, unchecked.
    fn raw(&mut self, id: u8, code: u8, params: &[u8]) -> Result<Reply, DriverError> {
        self.port()?.send(&instruction(id, code, params))?;
        self.receive(id, "status")
    }

    /// One instruction to one servo; the reply's parameters.
    fn transact(&mut self, id: u8, code: u8, params: &[u8]) -> Result<Vec<u8>, DriverError> {
        let reply = self.raw(id, code, params)?;
        self.check(id, reply)
    }

    /// Ping: the servo's model number.
    pub fn ping(&mut self, id: u8) -> Result<u16, DriverError> {
        let p = self.transact(id, instr::PING, &[])?;
        self.expect(id, &p, 3, "ping")?;
        Ok(u16::from_le_bytes([p[0], p[1]]))
    }

    fn expect(&self, id: u8, p: &[u8], n: usize, what: &str) -> Result<(), DriverError> {
        if p.len() == n {
            Ok(())
        } else {
            Err(DriverError::Dropped {
                driver: self.arm.caps.name.clone(),
                what: format!("servo {id} sent {} bytes for a {n}-byte {what}", p.len()),
            })
        }
    }

    /// Read a register (`(addr, size)` of [`reg`]) as a signed integer.
    pub fn read(&mut self, id: u8, (addr, size): (u16, u16)) -> Result<i64, DriverError> {
        let p = self.transact(id, instr::READ, &span(addr, size))?;
        self.expect(id, &p, usize::from(size), "read")?;
        Ok(signed(&p))
    }

    /// Write a register (`(addr, size)` of [`reg`]).
    pub fn write(&mut self, id: u8, (addr, size): (u16, u16), value: i64) -> Result<(), DriverError> {
        let mut params = addr.to_le_bytes().to_vec();
        params.extend_from_slice(&value.to_le_bytes()[..usize::from(size)]);
        self.transact(id, instr::WRITE, &params).map(|_| ())
    }

    /// Sync read `size` bytes at `addr` of every servo: one request, a reply per servo.
    pub fn sync_read(&mut self, addr: u16, size: u16) -> Result<Vec<Vec<u8>>, DriverError> {
        let ids = self.arm.ids();
        let mut params = span(addr, size).to_vec();
        params.extend_from_slice(&ids);
        self.port()?.send(&instruction(BROADCAST, instr::SYNC_READ, &params))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let reply = self.receive(id, "sync read")?;
            let p = self.check(id, reply)?;
            self.expect(id, &p, usize::from(size), "sync read")?;
            out.push(p);
        }
        Ok(out)
    }

    /// Sync write one value per servo into `(addr, size)` (no reply).
    pub fn sync_write(&mut self, (addr, size): (u16, u16), values: &[i64]) -> Result<(), DriverError> {
        let mut params = span(addr, size).to_vec();
        for (m, v) in self.arm.motors.iter().zip(values) {
            params.push(m.id);
            params.extend_from_slice(&v.to_le_bytes()[..usize::from(size)]);
        }
        let packet = instruction(BROADCAST, instr::SYNC_WRITE, &params);
        self.port()?.send(&packet)
    }

    fn goal(&mut self, ticks: &[u16]) -> Result<(), DriverError> {
        let v: Vec<i64> = ticks.iter().map(|t| i64::from(*t)).collect();
        self.sync_write(reg::GOAL_POSITION, &v)
    }

    /// Present (velocity, position) of every servo in one sync read.
    fn present(&mut self) -> Result<Vec<(i64, i64)>, DriverError> {
        let rows = self.sync_read(reg::PRESENT_VELOCITY.0, 8)?;
        Ok(rows.iter().map(|r| (signed(&r[..4]), signed(&r[4..]))).collect())
    }

    /// Hold every servo where it is: goal = present position (clamped into the range).
    fn hold(&mut self) -> Result<(), DriverError> {
        let present = self.present()?;
        let ticks: Vec<u16> = self
            .arm
            .motors
            .iter()
            .zip(&present)
            .map(|(m, (_, p))| (*p).clamp(i64::from(m.range_min), i64::from(m.range_max)) as u16)
            .collect();
        self.goal(&ticks)
    }

    /// Bring one servo up: an X-series model, calibration and operating mode in its EEPROM
    /// (torque off while writing), then its goal at its present position and torque on.
    fn setup(&mut self, i: usize) -> Result<(), DriverError> {
        let m = self.arm.motors[i].clone();
        let model = self.ping(m.id)?;
        let Some((_, model_name)) = X_SERIES.iter().find(|(n, _)| *n == model) else {
            return Err(DriverError::Unsupported {
                driver: self.arm.caps.name.clone(),
                message: format!(
                    "servo {} is model {model}, not an X-series servo ({}); its control table differs",
                    m.id,
                    X_SERIES.iter().map(|(n, s)| format!("{s} {n}")).collect::<Vec<_>>().join(", ")
                ),
            });
        };
        self.write(m.id, reg::TORQUE_ENABLE, 0)?;
        let wanted = [
            (reg::HOMING_OFFSET, i64::from(m.homing_offset), "Homing Offset"),
            (reg::MIN_POSITION_LIMIT, i64::from(m.range_min), "Min Position Limit"),
            (reg::MAX_POSITION_LIMIT, i64::from(m.range_max), "Max Position Limit"),
            (reg::OPERATING_MODE, i64::from(self.config.operating_mode), "Operating Mode"),
        ];
        for (r, want, name) in wanted {
            let have = self.read(m.id, r)?;
            if have != want {
                if !self.config.write_calibration && name != "Operating Mode" {
                    return Err(DriverError::Unsupported { driver: self.arm.caps.name.clone(), message: format!("servo {} ({model_name}): {name} is {have}, the calibration {} says {want}; recalibrate, or set driver.write_calibration = true", m.id, self.config.calibration.display()) });
                }
                self.write(m.id, r, want)?;
            }
        }
        let limit = self.read(m.id, reg::VELOCITY_LIMIT)?;
        self.velocity_limits.push(limit as f64 * VELOCITY_UNIT);
        let p = self.read(m.id, reg::PRESENT_POSITION)?;
        self.write(m.id, reg::GOAL_POSITION, p.clamp(i64::from(m.range_min), i64::from(m.range_max)))?;
        self.write(m.id, reg::TORQUE_ENABLE, 1)
    }
}

/// Little-endian two's-complement bytes (1, 2 or 4) as an integer.
fn signed(b: &[u8]) -> i64 {
    match b.len() {
        1 => i64::from(b[0] as i8),
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        _ => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    }
}

impl Robot for DynamixelArm {
    fn capabilities(&self) -> &Capabilities {
        &self.arm.caps
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
        self.velocity_limits.clear();
        for i in 0..self.arm.motors.len() {
            self.setup(i)?;
        }
        Ok(())
    }

    /// The calibration's joint ranges; once connected, the fastest servo's Velocity Limit as the
    /// top joint speed (a limit of 0 is read as unknown).
    fn physical_limits(&self) -> PhysicalLimits {
        let known =
            self.velocity_limits.len() == self.arm.motors.len() && self.velocity_limits.iter().all(|v| *v > 0.0);
        self.arm.limits(known.then(|| self.velocity_limits.iter().copied().fold(0.0, f64::max)))
    }

    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        let present = self.present()?;
        let q = self.arm.motors.iter().zip(&present).map(|(m, (_, p))| m.ticks_to_rad(*p as f64)).collect();
        let v = self.arm.motors.iter().zip(&present).map(|(m, (v, _))| m.sign() * *v as f64 * VELOCITY_UNIT).collect();
        Ok(RobotState {
            joint_positions: q,
            joint_velocities: v,
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
        self.hold()
    }

    /// Homing sends the home pose as one goal; the servos' own profile moves there. The
    /// envelope does not limit this move: keep the arm near home before connecting.
    fn home(&mut self) -> Result<(), DriverError> {
        let ticks = self.arm.ticks(&self.arm.home);
        self.goal(&ticks)
    }

    fn fault(&mut self) -> Option<Fault> {
        self.fault.clone()
    }

    /// Reboot every servo with a hardware alert (the only way to clear one), then set each
    /// up again and hold it where it is.
    fn clear_fault(&mut self) -> Result<(), DriverError> {
        for i in 0..self.arm.motors.len() {
            let id = self.arm.motors[i].id;
            let reply = self.raw(id, instr::PING, &[])?;
            if reply.error & 0x80 != 0 {
                self.raw(id, instr::REBOOT, &[])?;
                // The servo answers again once it has rebooted.
                let mut up = Err(DriverError::Link {
                    driver: self.arm.caps.name.clone(),
                    message: format!("servo {id} did not come back after a reboot"),
                });
                for _ in 0..25 {
                    up = self.raw(id, instr::PING, &[]);
                    if up.is_ok() {
                        break;
                    }
                }
                up?;
            }
        }
        self.fault = None;
        for i in 0..self.arm.motors.len() {
            self.setup(i)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_packets_match_the_protocol_examples() {
        // ROBOTIS' protocol 2.0 page: ping of id 1, and its status from a model 1030 servo
        // with firmware 0x26.
        assert_eq!(instruction(1, instr::PING, &[]), vec![0xFF, 0xFF, 0xFD, 0x00, 0x01, 0x03, 0x00, 0x01, 0x19, 0x4E]);
        assert_eq!(
            status(1, 0, &[0x06, 0x04, 0x26]),
            vec![0xFF, 0xFF, 0xFD, 0x00, 0x01, 0x07, 0x00, 0x55, 0x00, 0x06, 0x04, 0x26, 0x65, 0x5D]
        );
        // read 4 bytes of Present Position (132) of id 1
        assert_eq!(
            instruction(1, instr::READ, &span(132, 4)),
            vec![0xFF, 0xFF, 0xFD, 0x00, 0x01, 0x07, 0x00, 0x02, 0x84, 0x00, 0x04, 0x00, 0x1D, 0x15]
        );
    }

    #[test]
    fn byte_stuffing_round_trips_and_hides_the_header() {
        let params = [0x74, 0x00, 0xFF, 0xFF, 0xFD, 0x00, 0xFF, 0xFF, 0xFD];
        let p = instruction(7, instr::WRITE, &params);
        assert_eq!(p.windows(4).filter(|w| *w == HEADER).count(), 1, "the header pattern only at the start");
        assert_eq!(
            u16::from_le_bytes([p[5], p[6]]) as usize,
            1 + params.len() + 2 + 2,
            "two stuffed bytes counted in the length"
        );
        let (got, used) = parse(&p).unwrap().unwrap();
        assert_eq!((got.id, got.instruction, got.params.as_slice(), used), (7, instr::WRITE, &params[..], p.len()));
        assert_eq!(unstuff(&stuff(&[0xFF, 0xFF, 0xFD, 0xFD])), vec![0xFF, 0xFF, 0xFD, 0xFD]);
    }

    #[test]
    fn parse_skips_garbage_and_refuses_bad_crcs() {
        let p = status(3, 0x80, &[1, 2]);
        let mut buf = vec![0x00, 0xFF, 0x13];
        buf.extend(&p);
        buf.extend(&p[..5]);
        let (got, used) = parse(&buf).unwrap().unwrap();
        assert_eq!((got.id, got.params, used), (3, vec![0x80, 1, 2], 3 + p.len()));
        assert_eq!(parse(&buf[used..]).unwrap(), None, "a partial packet waits");
        let mut bad = p.clone();
        bad[9] ^= 0x40;
        assert!(parse(&bad).unwrap_err().contains("CRC"));
        let mut long = p;
        long[5] = 0xFF;
        long[6] = 0xFF;
        assert!(parse(&long).unwrap_err().contains("length"));
        // Too short for an instruction and a CRC, even with a CRC that matches: refused.
        for len in [0u8, 1, 2] {
            let mut short = HEADER.to_vec();
            short.extend_from_slice(&[3, len, 0]);
            let crc = crc16(&short);
            short.extend_from_slice(&crc.to_le_bytes());
            short.extend_from_slice(&[0; 4]);
            assert!(parse(&short).unwrap_err().contains("length"), "length {len}");
        }
    }

    #[test]
    fn errors_and_registers_are_decoded() {
        assert_eq!(error_name(0x83), "CRC error");
        assert_eq!(error_name(0x07), "access error");
        assert_eq!(hardware_error_names(0b10_0101), vec!["input voltage", "overheating", "overload"]);
        assert_eq!(signed(&[0xFF, 0xFF, 0xFF, 0xFF]), -1);
        assert_eq!(signed(&(-4000i32).to_le_bytes()), -4000);
        assert_eq!(signed(&[0x80]), -128);
        assert!((VELOCITY_UNIT * 100.0 - 2.398).abs() < 1e-3, "100 units = 22.9 rpm");
    }
}
