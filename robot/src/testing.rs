//! A recording fake driver for tests (here and in the crates above): it keeps every checked
//! command and stop it receives, follows commands perfectly or partly, and fails on demand.

use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, ControlMode, DriverError, Fault, Robot, RobotState};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One command as the driver received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// When (on the clock).
    pub at: Duration,
    /// The mode.
    pub mode: ControlMode,
    /// The values.
    pub values: Vec<f64>,
    /// The absolute end-effector target, for end-effector deltas.
    pub ee_target: Option<[f64; 3]>,
    /// The measured joint positions (or end-effector position) when it arrived.
    pub measured: Vec<f64>,
}

/// A fake arm: joints that move a fraction `tracking` of the way to each target, and an end
/// effector at the first three joint coordinates (so both modes can be tested).
pub struct RecordingDriver {
    caps: Capabilities,
    clock: Arc<dyn Clock>,
    q: Vec<f64>,
    home: Vec<f64>,
    /// Fraction of the way to a target the joints move per command (1 = perfect servo).
    pub tracking: f64,
    /// Every command received.
    pub received: Vec<Received>,
    /// When each stop arrived.
    pub stops: Vec<Duration>,
    inject: Injector,
}

/// What a test makes the fake do, from outside (the driver itself is owned by the guard).
#[derive(Debug, Default)]
pub struct Injected {
    /// Report this fault from now on.
    pub fault: Option<Fault>,
    /// Fail every call with a lost link from now on.
    pub link_down: bool,
    /// Drop the next this-many commands.
    pub drop_next: u32,
}

/// A shared handle on a [`RecordingDriver`]'s [`Injected`] failures.
#[derive(Debug, Clone, Default)]
pub struct Injector(Arc<Mutex<Injected>>);

impl Injector {
    /// Change what is injected.
    pub fn set(&self, f: impl FnOnce(&mut Injected)) {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn with<T>(&self, f: impl FnOnce(&mut Injected) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl RecordingDriver {
    /// A fake arm of `joints` joints starting (and homing) at `start`.
    pub fn new(start: Vec<f64>, clock: Arc<dyn Clock>) -> Self {
        let caps = Capabilities {
            name: "recording-fake".into(),
            joints: (0..start.len()).map(|i| format!("joint{i}")).collect(),
            modes: vec![ControlMode::JointPosition, ControlMode::EndEffectorDelta],
            has_end_effector: start.len() >= 3,
        };
        Self {
            caps,
            clock,
            q: start.clone(),
            home: start,
            tracking: 1.0,
            received: Vec::new(),
            stops: Vec::new(),
            inject: Injector::default(),
        }
    }

    /// The current joint positions.
    pub fn joints(&self) -> &[f64] {
        &self.q
    }

    /// The handle a test injects failures through.
    pub fn injector(&self) -> Injector {
        self.inject.clone()
    }

    fn link(&self) -> Result<(), DriverError> {
        if self.inject.with(|i| i.link_down) {
            return Err(DriverError::Link { driver: self.caps.name.clone(), message: "cable unplugged (fake)".into() });
        }
        Ok(())
    }
}

impl Robot for RecordingDriver {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        self.link()
    }

    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        self.link()?;
        let ee = (self.q.len() >= 3).then(|| [self.q[0], self.q[1], self.q[2]]);
        Ok(RobotState {
            joint_positions: self.q.clone(),
            joint_velocities: vec![0.0; self.q.len()],
            ee_position: ee,
            extra: Vec::new(),
            stamp: self.clock.now(),
        })
    }

    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        self.link()?;
        if self.inject.with(|i| {
            let drop = i.drop_next > 0;
            i.drop_next = i.drop_next.saturating_sub(1);
            drop
        }) {
            return Err(DriverError::Dropped { driver: self.caps.name.clone(), what: "command".into() });
        }
        let measured = match command.mode() {
            ControlMode::JointPosition => self.q.clone(),
            ControlMode::EndEffectorDelta => self.q[..3].to_vec(),
        };
        self.received.push(Received {
            at: self.clock.now(),
            mode: command.mode(),
            values: command.values().to_vec(),
            ee_target: command.ee_target(),
            measured,
        });
        let target: Vec<f64> = match command.mode() {
            ControlMode::JointPosition => command.values().to_vec(),
            ControlMode::EndEffectorDelta => {
                let mut t = self.q.clone();
                for i in 0..3 {
                    t[i] += command.values()[i];
                }
                t
            }
        };
        for (q, t) in self.q.iter_mut().zip(target) {
            *q += self.tracking * (t - *q);
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<(), DriverError> {
        self.stops.push(self.clock.now());
        self.link()
    }

    fn home(&mut self) -> Result<(), DriverError> {
        self.link()?;
        self.q = self.home.clone();
        Ok(())
    }

    fn fault(&mut self) -> Option<Fault> {
        self.inject.with(|i| i.fault.clone())
    }

    fn clear_fault(&mut self) -> Result<(), DriverError> {
        self.link()?;
        self.inject.set(|i| i.fault = None);
        Ok(())
    }
}

/// A pseudo-terminal pair for fake-device tests: the slave's path (what a driver opens as its
/// serial port), the master (where the fake device reads requests and writes replies), and the
/// slave kept open so the pair stays up while the driver reconnects. Made by `serialport`'s
/// `TTYPort::pair` (slave in raw mode); both ends are handed over as plain files, so the fake
/// device's reads block instead of timing out as a `TTYPort`'s do.
pub fn pty_pair() -> std::io::Result<(std::path::PathBuf, std::fs::File, std::fs::File)> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let (master, slave) = serialport::TTYPort::pair()?;
    let path = serialport::SerialPort::name(&slave)
        .ok_or_else(|| std::io::Error::other("the pseudo-terminal's slave has no name"))?;
    // SAFETY: into_raw_fd gives up each descriptor without closing it; each file owns one.
    let (m, s) =
        unsafe { (std::fs::File::from_raw_fd(master.into_raw_fd()), std::fs::File::from_raw_fd(slave.into_raw_fd())) };
    Ok((path.into(), m, s))
}
