//! The `dynamixel` driver against a protocol-level fake bus of X-series servos on a
//! pseudo-terminal pair: connect writes LeRobot's calibration into the servos (torque off
//! first), the envelope holds on the goal positions the servos receive, a corrupted reply is a
//! dropped read the loop retries, so are a reply too short to hold its error byte and the
//! servo's own CRC error, a hardware alert latches a
//! fault that the operator's clear reboots away, an instruction error is a fault, and a silent
//! bus is a lost link.

mod common;

use o2o_envs::Env;
use o2o_robot::dynamixel::{crc16, instr, parse, reg, status, DynamixelArm, DynamixelConfig, HEADER};
use o2o_robot::FakeClock;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// One fake X-series servo: a control table, and the shaft position before the homing offset.
struct Servo {
    table: [u8; 256],
    raw: i64,
}

impl Servo {
    fn new(model: u16, raw: i64) -> Self {
        let mut table = [0u8; 256];
        table[0..2].copy_from_slice(&model.to_le_bytes());
        table[48..52].copy_from_slice(&4095i32.to_le_bytes());
        Self { table, raw }
    }
    fn get(&self, (addr, size): (u16, u16)) -> i64 {
        let b = &self.table[usize::from(addr)..usize::from(addr + size)];
        match size {
            1 => i64::from(b[0]),
            2 => i64::from(u16::from_le_bytes([b[0], b[1]])),
            _ => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        }
    }
    fn set(&mut self, addr: u16, data: &[u8]) {
        self.table[usize::from(addr)..usize::from(addr) + data.len()].copy_from_slice(data);
    }
    /// Present position and velocity from the shaft and the homing offset, as the servo reports.
    fn refresh(&mut self) {
        let present = (self.raw + self.get(reg::HOMING_OFFSET)) as i32;
        self.set(reg::PRESENT_POSITION.0, &present.to_le_bytes());
    }
}

/// The fake bus and what a test injects into it.
#[derive(Default)]
struct Bus {
    servos: BTreeMap<u8, Servo>,
    /// (id, goal, present when it arrived)
    goals: Vec<(u8, i64, i64)>,
    /// Goals outside the servo's position limits (a real servo ignores them).
    refused_goals: u32,
    /// EEPROM writes attempted with torque on (a real servo answers an access error).
    eeprom_with_torque: u32,
    /// Corrupt the CRC of the next this-many replies.
    corrupt_next: u32,
    /// Send the next this-many replies as a status packet too short to hold its error byte
    /// (length field 2, CRC valid): what dynamixel2 0.9.1's reader panics on.
    short_next: u32,
    /// Answer the next reply with this instruction error.
    error_next: Option<u8>,
    /// Hardware Error Status bits of servo 2 (a set alert until a reboot).
    alert: u8,
    reboots: u32,
    silent: bool,
}

impl Bus {
    fn error_of(&mut self, id: u8) -> u8 {
        let alert = if id == 2 && self.alert != 0 { 0x80 } else { 0 };
        alert | self.error_next.take().unwrap_or(0)
    }

    /// The reply to one instruction: `(id, error, params)` per status packet.
    fn answer(&mut self, id: u8, code: u8, p: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
        let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]);
        match code {
            instr::PING => match self.servos.get(&id) {
                Some(s) => {
                    let model = s.get(reg::MODEL_NUMBER) as u16;
                    let e = self.error_of(id);
                    vec![(id, e, vec![model.to_le_bytes()[0], model.to_le_bytes()[1], 0x2D])]
                }
                None => vec![],
            },
            instr::READ => {
                let (addr, len) = (u16_at(0), u16_at(2));
                let e = self.error_of(id);
                let alert = self.alert;
                match self.servos.get_mut(&id) {
                    Some(s) => {
                        s.refresh();
                        s.table[70] = if id == 2 { alert } else { 0 };
                        vec![(id, e, s.table[usize::from(addr)..usize::from(addr + len)].to_vec())]
                    }
                    None => vec![],
                }
            }
            instr::WRITE => {
                let addr = u16_at(0);
                let e = self.error_of(id);
                let Some(s) = self.servos.get_mut(&id) else { return vec![] };
                if addr < 64 && s.get(reg::TORQUE_ENABLE) == 1 {
                    self.eeprom_with_torque += 1;
                    return vec![(id, e | 0x07, vec![])];
                }
                s.set(addr, &p[2..]);
                if addr == reg::GOAL_POSITION.0 {
                    s.raw = s.get(reg::GOAL_POSITION) - s.get(reg::HOMING_OFFSET);
                }
                vec![(id, e, vec![])]
            }
            instr::REBOOT => {
                self.reboots += 1;
                if id == 2 {
                    self.alert = 0;
                }
                if let Some(s) = self.servos.get_mut(&id) {
                    s.set(reg::TORQUE_ENABLE.0, &[0]);
                }
                vec![(id, 0, vec![])]
            }
            instr::SYNC_READ => {
                let (addr, len) = (u16_at(0), u16_at(2));
                let ids = p[4..].to_vec();
                ids.into_iter()
                    .flat_map(|sid| {
                        self.answer(
                            sid,
                            instr::READ,
                            &[addr.to_le_bytes()[0], addr.to_le_bytes()[1], len.to_le_bytes()[0], len.to_le_bytes()[1]],
                        )
                    })
                    .collect()
            }
            instr::SYNC_WRITE => {
                let (addr, len) = (u16_at(0), usize::from(u16_at(2)));
                for rec in p[4..].chunks(len + 1) {
                    let sid = rec[0];
                    let Some(s) = self.servos.get_mut(&sid) else { continue };
                    s.refresh();
                    let goal = i64::from(i32::from_le_bytes([rec[1], rec[2], rec[3], rec[4]]));
                    let present = s.get(reg::PRESENT_POSITION);
                    if addr != reg::GOAL_POSITION.0 || s.get(reg::TORQUE_ENABLE) != 1 {
                        continue;
                    }
                    if goal < s.get(reg::MIN_POSITION_LIMIT) || goal > s.get(reg::MAX_POSITION_LIMIT) {
                        self.refused_goals += 1;
                        continue;
                    }
                    self.goals.push((sid, goal, present));
                    s.set(addr, &rec[1..]);
                    // the servo moves 80% of the way before the next read
                    let target = goal - s.get(reg::HOMING_OFFSET);
                    s.raw += ((target - s.raw) as f64 * 0.8).round() as i64;
                }
                vec![]
            }
            _ => vec![],
        }
    }
}

/// The fake bus on the master side of a pty pair; returns the slave's path and keeps it open.
fn fake_bus(bus: Arc<Mutex<Bus>>) -> (std::path::PathBuf, std::fs::File) {
    let (path, mut m, keep) = o2o_robot::testing::pty_pair().unwrap();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            let Ok(n) = m.read(&mut chunk) else { return };
            buf.extend_from_slice(&chunk[..n]);
            loop {
                let (p, used) = match parse(&buf) {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(_) => {
                        buf.clear();
                        break;
                    }
                };
                buf.drain(..used);
                let mut b = bus.lock().unwrap();
                if b.silent {
                    continue;
                }
                for (id, error, params) in b.answer(p.id, p.instruction, &p.params) {
                    let mut reply = status(id, error, &params);
                    if b.short_next > 0 {
                        b.short_next -= 1;
                        reply = short_status(id);
                    } else if b.corrupt_next > 0 {
                        b.corrupt_next -= 1;
                        let last = reply.len() - 1;
                        reply[last] ^= 0x5A;
                    }
                    let _ = m.write_all(&reply);
                }
            }
        }
    });
    (path, keep)
}

/// A status packet of servo `id` whose length field (2) leaves no room for the instruction and
/// error bytes, with a CRC that matches it.
fn short_status(id: u8) -> Vec<u8> {
    let mut p = HEADER.to_vec();
    p.extend_from_slice(&[id, 0x02, 0x00]);
    let crc = crc16(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// A two-joint Koch calibration in `dir`: shoulder_pan (id 1) on [1000, 3000] ticks,
/// elbow_flex (id 2, reversed) on [600, 3400].
fn koch_calibration(dir: &std::path::Path) -> std::path::PathBuf {
    let cal = dir.join("koch_follower.json");
    std::fs::write(&cal, r#"{"elbow_flex": {"id": 2, "drive_mode": 1, "homing_offset": 12, "range_min": 600, "range_max": 3400},
                            "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -40, "range_min": 1000, "range_max": 3000}}"#).unwrap();
    cal
}

/// The driver settings of the tests' arm on `port`, writing the calibration `cal` at connect.
fn koch_config(port: std::path::PathBuf, cal: std::path::PathBuf) -> DynamixelConfig {
    DynamixelConfig {
        port,
        baud: 1_000_000,
        calibration: cal,
        motors: vec![],
        home: vec![0.2, -0.1],
        timeout_ms: 50,
        operating_mode: 3,
        write_calibration: true,
    }
}

#[test]
fn a_dynamixel_arm_on_a_fake_bus_stays_inside_the_envelope_and_reports_its_faults() {
    let dir = tempfile::tempdir().unwrap();
    let cal = koch_calibration(dir.path());
    let bus = Arc::new(Mutex::new(Bus::default()));
    bus.lock().unwrap().servos.insert(1, Servo::new(1060, 2140)); // XL430-W250; present 2100 after the offset
    bus.lock().unwrap().servos.insert(2, Servo::new(1200, 1888)); // XL330-M288; present 1900
    let (port, _keep) = fake_bus(bus.clone());
    let clock = FakeClock::new();
    let config = koch_config(port, cal);
    let arm = DynamixelArm::new(config, Arc::new(clock.clone())).unwrap();
    assert_eq!(o2o_robot::Robot::capabilities(&arm).joints, vec!["shoulder_pan", "elbow_flex"], "by ascending id");
    let mut env = common::two_joint_env("robot-koch", arm, &clock);
    {
        // Connect wrote the calibration (torque off first) and enabled torque.
        let b = bus.lock().unwrap();
        assert_eq!(b.eeprom_with_torque, 0);
        for (id, offset, lo, hi) in [(1u8, -40, 1000, 3000), (2, 12, 600, 3400)] {
            let s = &b.servos[&id];
            assert_eq!(
                (s.get(reg::HOMING_OFFSET), s.get(reg::MIN_POSITION_LIMIT), s.get(reg::MAX_POSITION_LIMIT)),
                (offset, lo, hi),
                "servo {id}"
            );
            assert_eq!((s.get(reg::OPERATING_MODE), s.get(reg::TORQUE_ENABLE)), (3, 1), "servo {id}");
        }
    }
    // The calibration maps the servos' readings to radians: present 2100 of [1000, 3000] is
    // +100 ticks; present 1900 of [600, 3400], reversed, is +100 ticks too.
    let q = env.guard().last_state().unwrap().joint_positions.clone();
    let tick = std::f64::consts::TAU / 4096.0;
    assert!((q[0] - 100.0 * tick).abs() < 1e-9 && (q[1] - 100.0 * tick).abs() < 1e-9, "{q:?}");

    env.reset(Some(0)).unwrap();
    common::adversarial_steps(&mut env, 120, 3);
    let cals = [(1u8, 0u8, 1000.0, 3000.0), (2, 1, 600.0, 3400.0)];
    let to_rad = |id: u8, t: i64| {
        let (_, dm, lo, hi) = cals[usize::from(id == 2)];
        (if dm == 1 { -1.0 } else { 1.0 }) * (t as f64 - (lo + hi) / 2.0) * tick
    };
    {
        let b = bus.lock().unwrap();
        assert_eq!(b.refused_goals, 0);
        // after the home goal
        let moves: Vec<_> = b
            .goals
            .iter()
            .skip(2)
            .map(|(id, goal, present)| (*id, to_rad(*id, *goal), to_rad(*id, *present)))
            .collect();
        common::assert_inside(&moves);
    }
    let latched = |s: &o2o_envs::Step| s.info.get("safety/latched") == Some(1.0);

    // A reply corrupted on the wire: a dropped read, read again; the loop goes on.
    bus.lock().unwrap().corrupt_next = 1;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert!(!latched(&s));
    assert_eq!(env.counters().dropped_reads, 1);
    // A reply too short to hold its error byte, CRC valid: dropped too, never a panic.
    bus.lock().unwrap().short_next = 1;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert!(!latched(&s));
    assert_eq!(env.counters().dropped_reads, 2);
    // The servo's own CRC error (our instruction arrived corrupted): dropped too.
    bus.lock().unwrap().error_next = Some(0x03);
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert!(!latched(&s));
    assert_eq!(env.counters().dropped_reads, 3);
    assert_eq!(env.counters().driver_faults, 0);

    // A hardware alert (overload on servo 2): latched; the operator's clear reboots it.
    bus.lock().unwrap().alert = 0x20;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert!(latched(&s));
    assert_eq!(env.counters().driver_faults, 1);
    let latch = env.guard().latch().map(|l| l.to_string()).unwrap();
    assert!(latch.contains("servo 2 hardware alert (overload)"), "{latch}");
    env.reset(None).unwrap();
    assert_eq!(bus.lock().unwrap().reboots, 1);
    assert_eq!(bus.lock().unwrap().servos[&2].get(reg::TORQUE_ENABLE), 1, "torque back on after the reboot");
    assert!(!latched(&env.step(&[0.01, 0.0]).unwrap()));

    // An instruction error (data range): a fault, latched.
    bus.lock().unwrap().error_next = Some(0x04);
    assert!(latched(&env.step(&[0.01, 0.0]).unwrap()));
    assert_eq!(env.counters().driver_faults, 2);
    env.reset(None).unwrap();
    assert!(!latched(&env.step(&[0.01, 0.0]).unwrap()));

    // The bus goes silent (cable pulled): a lost link.
    bus.lock().unwrap().silent = true;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert!(latched(&s));
    assert_eq!(env.counters().link_drops, 1);
    assert_eq!(env.counters().refused_latched, 0);
}

#[test]
fn a_missing_port_or_a_foreign_servo_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("koch.json");
    std::fs::write(&cal, r#"{"a": {"id": 1, "range_min": 0, "range_max": 4095}}"#).unwrap();
    let config = DynamixelConfig {
        port: dir.path().join("ttyUSB9"),
        baud: 1_000_000,
        calibration: cal.clone(),
        motors: vec![],
        home: vec![],
        timeout_ms: 20,
        operating_mode: 3,
        write_calibration: true,
    };
    let e = DynamixelArm::new(config.clone(), Arc::new(FakeClock::new())).err().unwrap().to_string();
    assert!(e.contains("ttyUSB9 is absent") && e.contains("driver.port"), "{e}");

    // An XL-320 (model 350) has another control table: refused at connect, nothing written.
    let bus = Arc::new(Mutex::new(Bus::default()));
    bus.lock().unwrap().servos.insert(1, Servo::new(350, 2000));
    let (port, _keep) = fake_bus(bus.clone());
    let mut arm = DynamixelArm::new(DynamixelConfig { port, ..config }, Arc::new(FakeClock::new())).unwrap();
    let e = o2o_robot::Robot::connect(&mut arm).unwrap_err().to_string();
    assert!(e.contains("model 350, not an X-series servo"), "{e}");
    assert_eq!(bus.lock().unwrap().servos[&1].get(reg::TORQUE_ENABLE), 0);
}

/// A Koch arm's limits: the joint ranges from the calibration (checked before the port opens),
/// and, once connected, the servos' own Velocity Limit registers (the fastest of them): an
/// envelope faster than that is refused after connect, naming the key and the limit, and
/// `allow_beyond_model` lets it through with a warning.
#[test]
fn the_servos_velocity_limit_and_the_calibration_bound_the_envelope() {
    use o2o_robot::{EnvelopeConfig, Robot};
    let dir = tempfile::tempdir().unwrap();
    let cal = koch_calibration(dir.path());
    let bus = Arc::new(Mutex::new(Bus::default()));
    for (id, model, raw, limit) in [(1u8, 1060u16, 2140i64, 200i32), (2, 1200, 1888, 445)] {
        let mut s = Servo::new(model, raw);
        s.table[usize::from(reg::VELOCITY_LIMIT.0)..usize::from(reg::VELOCITY_LIMIT.0) + 4]
            .copy_from_slice(&limit.to_le_bytes());
        bus.lock().unwrap().servos.insert(id, s);
    }
    let (port, _keep) = fake_bus(bus.clone());
    let clock = FakeClock::new();
    let config = koch_config(port, cal);
    let arm = || DynamixelArm::new(config.clone(), Arc::new(clock.clone())).unwrap();
    let before = arm().physical_limits();
    assert_eq!(before.joint_speed, None, "the speed is the servos' to tell, at connect");
    let base = common::two_joint_envelope();
    let (key, msg) = common::refusal(arm(), EnvelopeConfig { joint_low: vec![-2.0, -0.8], ..base.clone() }, &clock);
    assert!(key == "joint_low[0]" && msg.contains("found -2") && msg.contains("-1.53398"), "{msg}");
    // 445 units of 0.229 rev/min (the XL330's) = 10.6715 rad/s, the faster of the two.
    let (key, msg) = common::refusal(arm(), EnvelopeConfig { max_velocity: 20.0, ..base.clone() }, &clock);
    assert!(key == "max_velocity" && msg.contains("found 20") && msg.contains("10.6715"), "{msg}");
    let g = o2o_robot::Guarded::connect(
        arm(),
        EnvelopeConfig { max_velocity: 20.0, allow_beyond_model: true, ..base.clone() },
        std::time::Duration::from_millis(100),
        Arc::new(clock.clone()),
    )
    .unwrap();
    assert!(g.warnings().len() == 1 && g.warnings()[0].contains("max_velocity"), "{:?}", g.warnings());
    let speed = g.driver().physical_limits().joint_speed.unwrap();
    assert!((speed - 445.0 * o2o_robot::dynamixel::VELOCITY_UNIT).abs() < 1e-12, "{speed}");
}
