//! The `feetech` driver against a protocol-level fake STS3215 bus on a pseudo-terminal pair:
//! LeRobot's calibration maps ticks to radians, the envelope holds on the goal positions the
//! servos receive, a servo's status error latches a fault, and a silent bus is a lost link.

mod common;

use o2o_envs::Env;
use o2o_robot::feetech::{instr, packet, parse, reg, FeetechArm, FeetechConfig, MotorCalibration};
use o2o_robot::FakeClock;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// The fake bus: a register table per servo id, and what was written to goal positions.
#[derive(Default)]
struct Bus {
    regs: HashMap<u8, [u8; 128]>,
    goals: Vec<(u8, u16, u16)>, // (id, goal, present when it arrived)
    error: u8,
    silent: bool,
}

fn u16_at(r: &[u8; 128], a: u8) -> u16 {
    u16::from_le_bytes([r[a as usize], r[a as usize + 1]])
}

/// A pty pair; the fake answers on the master side. Returns the slave's path.
fn fake_bus(bus: Arc<Mutex<Bus>>) -> (std::path::PathBuf, File) {
    let (name, mut m, keep) = o2o_robot::testing::pty_pair().unwrap();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        loop {
            let Ok(n) = m.read(&mut chunk) else { return };
            buf.extend_from_slice(&chunk[..n]);
            while let Ok(Some((id, code, p, used))) = parse(&buf) {
                buf.drain(..used);
                let mut b = bus.lock().unwrap();
                if b.silent {
                    continue;
                }
                let error = b.error;
                let reply = match code {
                    instr::PING => Some(vec![]),
                    instr::READ => b.regs.get(&id).map(|r| r[p[0] as usize..(p[0] + p[1]) as usize].to_vec()),
                    instr::WRITE => {
                        if let Some(r) = b.regs.get_mut(&id) {
                            r[p[0] as usize..p[0] as usize + p.len() - 1].copy_from_slice(&p[1..]);
                        }
                        Some(vec![])
                    }
                    instr::SYNC_WRITE => {
                        let (addr, len) = (p[0], p[1] as usize);
                        for rec in p[2..].chunks(len + 1) {
                            let sid = rec[0];
                            let goal = u16::from_le_bytes([rec[1], rec[2]]);
                            let present = b.regs.get(&sid).map_or(0, |r| u16_at(r, reg::PRESENT_POSITION));
                            b.goals.push((sid, goal, present));
                            if let Some(r) = b.regs.get_mut(&sid) {
                                r[addr as usize..addr as usize + len].copy_from_slice(&rec[1..]);
                                // the servo moves 80% of the way before the next read
                                let next =
                                    (f64::from(present) + 0.8 * (f64::from(goal) - f64::from(present))).round() as u16;
                                r[reg::PRESENT_POSITION as usize..reg::PRESENT_POSITION as usize + 2]
                                    .copy_from_slice(&next.to_le_bytes());
                            }
                        }
                        None
                    }
                    _ => None,
                };
                if let (Some(params), true) = (reply, id != 0xFE) {
                    let _ = m.write_all(&packet(id, error, &params));
                }
            }
        }
    });
    (name, keep)
}

#[test]
fn a_feetech_arm_on_a_fake_bus_stays_inside_the_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("so100.json");
    std::fs::write(&cal, r#"{"elbow_flex": {"id": 3, "drive_mode": 1, "homing_offset": 12, "range_min": 600, "range_max": 3400},
                            "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -40, "range_min": 1000, "range_max": 3000}}"#).unwrap();
    let bus = Arc::new(Mutex::new(Bus::default()));
    for (id, start) in [(1u8, 2100u16), (3, 1900)] {
        let mut r = [0u8; 128];
        r[reg::PRESENT_POSITION as usize..reg::PRESENT_POSITION as usize + 2].copy_from_slice(&start.to_le_bytes());
        bus.lock().unwrap().regs.insert(id, r);
    }
    let (port, _keep) = fake_bus(bus.clone());
    let clock = FakeClock::new();
    let config = FeetechConfig {
        port,
        baud: 1_000_000,
        calibration: cal.clone(),
        motors: vec![],
        home: vec![0.2, -0.1],
        timeout_ms: 50,
    };
    let arm = FeetechArm::new(config, Arc::new(clock.clone())).unwrap();
    assert_eq!(o2o_robot::Robot::capabilities(&arm).joints, vec!["shoulder_pan", "elbow_flex"], "by ascending id");
    let mut env = common::two_joint_env("robot-so100", arm, &clock);
    env.reset(Some(0)).unwrap();
    common::adversarial_steps(&mut env, 120, 2);
    let cals = [
        MotorCalibration { id: 1, drive_mode: 0, homing_offset: -40, range_min: 1000, range_max: 3000 },
        MotorCalibration { id: 3, drive_mode: 1, homing_offset: 12, range_min: 600, range_max: 3400 },
    ];
    {
        let b = bus.lock().unwrap();
        // after the home goal
        let moves: Vec<_> = b
            .goals
            .iter()
            .skip(2)
            .map(|(id, goal, present)| {
                (*id, cals[usize::from(*id == 3)].to_rad(*goal), cals[usize::from(*id == 3)].to_rad(*present))
            })
            .collect();
        common::assert_inside(&moves);
    }
    // A servo reports an error (overload): latched; the operator's clear pings it again.
    bus.lock().unwrap().error = 0x20;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert_eq!(s.info.get("safety/latched"), Some(1.0));
    assert_eq!(env.counters().driver_faults, 1);
    bus.lock().unwrap().error = 0;
    env.reset(None).unwrap();
    assert!(env.step(&[0.01, 0.0]).unwrap().info.get("safety/latched").is_none());
    // The bus goes silent (cable pulled): a lost link.
    bus.lock().unwrap().silent = true;
    let s = env.step(&[0.01, 0.0]).unwrap();
    assert_eq!(s.info.get("safety/latched"), Some(1.0));
    assert_eq!(env.counters().link_drops, 1);
    assert_eq!(env.counters().refused_latched, 0);
}

/// An envelope asking more of an SO-100 than its calibration and its STS3215 servos allow is
/// refused before the port opens, naming the key, the value and the limit: a joint bound beyond
/// the calibrated range (shoulder_pan's [1000, 3000] ticks = ±1.5340 rad), a window wider than
/// the widest range (elbow_flex's 2800 ticks = 4.2951 rad), a speed beyond the servos' 5.4542
/// rad/s. `allow_beyond_model` turns each into a warning.
#[test]
fn an_envelope_beyond_the_calibration_or_the_servo_speed_is_refused() {
    use o2o_robot::{EnvelopeConfig, Robot};
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("so100.json");
    std::fs::write(
        &cal,
        r#"{"shoulder_pan": {"id": 1, "range_min": 1000, "range_max": 3000},
                            "elbow_flex": {"id": 3, "drive_mode": 1, "range_min": 600, "range_max": 3400}}"#,
    )
    .unwrap();
    let clock = FakeClock::new();
    // The port only has to exist: nothing is opened before the envelope is refused.
    let config = FeetechConfig {
        port: cal.clone(),
        baud: 1_000_000,
        calibration: cal.clone(),
        motors: vec![],
        home: vec![],
        timeout_ms: 50,
    };
    let arm = || FeetechArm::new(config.clone(), Arc::new(clock.clone())).unwrap();
    let l = arm().physical_limits();
    let tick = std::f64::consts::TAU / 4096.0;
    assert!(
        (l.joint_range[0][1] - 1000.0 * tick).abs() < 1e-12 && (l.joint_range[1][0] + 1400.0 * tick).abs() < 1e-12,
        "{l:?}"
    );
    let base = common::two_joint_envelope();
    let cases = [
        (EnvelopeConfig { joint_high: vec![2.0, 0.8], ..base.clone() }, "joint_high[0]", "found 2", "1.53398"),
        (EnvelopeConfig { max_step_delta: 5.0, ..base.clone() }, "max_step_delta", "found 5", "4.2951"),
        (EnvelopeConfig { max_velocity: 10.0, ..base.clone() }, "max_velocity", "found 10", "5.4542"),
    ];
    for (e, key, value, limit) in cases {
        let (k, msg) = common::refusal(arm(), e.clone(), &clock);
        assert_eq!(k, key, "{msg}");
        assert!(msg.contains(value) && msg.contains(limit) && msg.contains("so100.json"), "{msg}");
        let warnings = o2o_robot::guard::check_physical(&EnvelopeConfig { allow_beyond_model: true, ..e }, &l).unwrap();
        assert!(warnings.len() == 1 && warnings[0].contains(key), "{warnings:?}");
    }
    assert!(o2o_robot::guard::check_physical(&base, &l).unwrap().is_empty(), "the test envelope fits");
}
