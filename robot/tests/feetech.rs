//! The `feetech` driver against a protocol-level fake STS3215 bus on a pseudo-terminal pair:
//! LeRobot's calibration maps ticks to radians, the envelope holds on the goal positions the
//! servos receive, a servo's status error latches a fault, and a silent bus is a lost link.

use o2o_envs::Env;
use o2o_robot::feetech::{instr, packet, parse, reg, FeetechArm, FeetechConfig, MotorCalibration};
use o2o_robot::{ControlMode, EnvelopeConfig, FakeClock, LoopConfig, ReachTask, RobotEnv, ScriptedOperator};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
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
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors; null name/termios/winsize are allowed.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0);
    // SAFETY: ttyname returns a static buffer for a valid tty descriptor.
    let name = unsafe { std::ffi::CStr::from_ptr(libc::ttyname(slave)) }.to_string_lossy().into_owned();
    // SAFETY: we own both descriptors from here.
    let (mut m, keep) = (unsafe { File::from_raw_fd(master) }, unsafe { File::from_raw_fd(slave) });
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
                                let next = (f64::from(present) + 0.8 * (f64::from(goal) - f64::from(present))).round() as u16;
                                r[reg::PRESENT_POSITION as usize..reg::PRESENT_POSITION as usize + 2].copy_from_slice(&next.to_le_bytes());
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
    (name.into(), keep)
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
    let config = FeetechConfig { port, baud: 1_000_000, calibration: cal.clone(), motors: vec![], home: vec![0.2, -0.1], timeout_ms: 50 };
    let arm = FeetechArm::new(config, Arc::new(clock.clone())).unwrap();
    assert_eq!(o2o_robot::Robot::capabilities(&arm).joints, vec!["shoulder_pan", "elbow_flex"], "by ascending id");
    let envelope = EnvelopeConfig {
        mode: ControlMode::JointPosition,
        joint_low: vec![-0.8, -0.8],
        joint_high: vec![0.8, 0.8],
        workspace_low: None,
        workspace_high: None,
        max_step_delta: 0.05,
        max_velocity: 1.0,
        watchdog_periods: 1.5,
        overspeed: None,
        max_missed_deadlines: 3,
    };
    let task = ReachTask { goal_low: vec![0.3, 0.3], goal_high: vec![0.3, 0.3], success_radius: 0.001, terminate_on_success: false };
    let op = ScriptedOperator { clears_latches: true, max_clears: 3, ..Default::default() };
    let cfg = LoopConfig { rate_hz: 10.0, max_episode_steps: 1000, deadline_slack: 0.1 };
    let mut env = RobotEnv::new("robot-so100", arm, envelope, cfg, task, Box::new(op), Arc::new(clock.clone())).unwrap();
    env.reset(Some(0)).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    for _ in 0..120 {
        let a: Vec<f32> = (0..2).map(|_| match rng.gen_range(0..5) { 0 => f32::NAN, 1 => 1e6, 2 => -1e6, _ => rng.gen_range(-0.1..0.1) }).collect();
        env.step(&a).unwrap();
    }
    let cals = [MotorCalibration { id: 1, drive_mode: 0, homing_offset: -40, range_min: 1000, range_max: 3000 }, MotorCalibration { id: 3, drive_mode: 1, homing_offset: 12, range_min: 600, range_max: 3400 }];
    {
        let b = bus.lock().unwrap();
        let moves: Vec<_> = b.goals.iter().skip(2).collect(); // after the home goal
        assert!(moves.len() > 100, "{} goals", moves.len());
        let tick = std::f64::consts::TAU / 4096.0;
        for (id, goal, present) in moves {
            let c = &cals[usize::from(*id == 3)];
            let (q, q0) = (c.to_rad(*goal), c.to_rad(*present));
            assert!((-0.8 - tick..=0.8 + tick).contains(&q), "servo {id}: goal {q} rad outside the bounds");
            assert!((q - q0).abs() <= 0.05 + tick, "servo {id}: moved {} rad in one step", q - q0);
        }
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
