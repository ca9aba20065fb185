//! [`Guarded`]: the safety layer that owns a driver. Every command to the arm passes through
//! [`Guarded::command`]; there is no other way to reach [`Robot::send`] (see
//! [`crate::driver`] on why).
//!
//! A command goes through, in order:
//! 1. the latch: after an e-stop, a driver fault, a lost link, overspeed or a run of missed
//!    deadlines, every command is refused until an operator calls [`Guarded::clear_latch`]
//!    (never cleared by a reset, a new episode or a fresh command);
//! 2. shape and finiteness: a command of the wrong length is an error; one holding NaN or ±∞ is
//!    rejected whole (nothing is sent, the arm holds, the rejection is counted — and since a
//!    rejected command is not a fresh one, a policy that keeps producing NaN is stopped by the
//!    watchdog);
//! 3. bounds: joint targets are clamped into `[joint_low, joint_high]`; an end-effector target
//!    (current position + delta) into the workspace box `[workspace_low, workspace_high]`;
//! 4. step limit: every dimension moves at most `w = min(max_step_delta, max_velocity · period)`
//!    from the **measured** position (LeRobot's `max_relative_target`, SERL's clip around the
//!    current pose), so a target can never run far ahead of an arm that is blocked.
//!
//! Besides commands, [`Guarded::poll`] is the watchdog: when the arm is moving and no fresh
//! command arrived within `watchdog_periods` control periods, the arm is stopped (held, not
//! latched: the next fresh command moves it again). Every read checks the driver's fault status
//! and the measured joint speed. Each clip, rejection, stop and fault is counted in
//! [`SafetyCounters`].

use crate::clock::Clock;
use crate::driver::{CheckedCommand, ControlMode, DriverError, PhysicalLimits, Robot, RobotState};
use std::sync::Arc;
use std::time::Duration;

/// The envelope, as written in a robot config's `[envelope]` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeConfig {
    /// How the policy commands the arm.
    pub mode: ControlMode,
    /// Lowest joint target per joint (required for `joint-position`).
    #[serde(default)]
    pub joint_low: Vec<f64>,
    /// Highest joint target per joint (required for `joint-position`).
    #[serde(default)]
    pub joint_high: Vec<f64>,
    /// Workspace box, lowest corner `[x, y, z]` in metres (required for `end-effector-delta`).
    #[serde(default)]
    pub workspace_low: Option<[f64; 3]>,
    /// Workspace box, highest corner.
    #[serde(default)]
    pub workspace_high: Option<[f64; 3]>,
    /// Largest move of any dimension from the measured position in one command (rad or m).
    pub max_step_delta: f64,
    /// Largest commanded speed (rad/s or m/s): a step moves at most `max_velocity · period`.
    pub max_velocity: f64,
    /// Stop the arm when no fresh command arrives within this many control periods.
    #[serde(default = "default_watchdog_periods")]
    pub watchdog_periods: f64,
    /// Latch a fault when any measured joint speed exceeds this (rad/s); none by default.
    #[serde(default)]
    pub overspeed: Option<f64>,
    /// Latch a fault after this many missed control deadlines in a row (the control loop's).
    #[serde(default = "default_max_missed")]
    pub max_missed_deadlines: u32,
    /// Accept limits beyond what the driver says the arm can do (its [`PhysicalLimits`]: the
    /// model's joint ranges, the servos' speed, the arm's reach), with a warning for each,
    /// instead of refusing them. For an arm whose model or calibration is wrong.
    #[serde(default)]
    pub allow_beyond_model: bool,
}

/// The longest watchdog timeout allowed: with the watchdog polling four times a period, a
/// stalled policy stops the arm within 1.75 + 0.25 = 2 periods.
pub const MAX_WATCHDOG_PERIODS: f64 = 1.75;

fn default_watchdog_periods() -> f64 {
    1.5
}

fn default_max_missed() -> u32 {
    3
}

/// Why the latch is set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Latch {
    /// An operator (or code on their behalf) pressed the e-stop.
    EStop {
        /// Why.
        reason: String,
    },
    /// The driver reported a fault.
    DriverFault {
        /// The driver's message.
        message: String,
    },
    /// The link to the arm dropped.
    LinkLost {
        /// The driver's message.
        message: String,
    },
    /// A joint moved faster than `overspeed`.
    Overspeed {
        /// Joint index.
        joint: usize,
        /// Measured speed.
        speed: f64,
        /// The limit.
        limit: f64,
    },
    /// The control loop missed this many deadlines in a row.
    MissedDeadlines {
        /// How many.
        count: u32,
    },
}

impl std::fmt::Display for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Latch::EStop { reason } => write!(f, "e-stop ({reason})"),
            Latch::DriverFault { message } => write!(f, "driver fault ({message})"),
            Latch::LinkLost { message } => write!(f, "link lost ({message})"),
            Latch::Overspeed { joint, speed, limit } => {
                write!(f, "joint {joint} moved at {speed:.3}, over the overspeed limit {limit}")
            }
            Latch::MissedDeadlines { count } => write!(f, "{count} control deadlines missed in a row"),
        }
    }
}

/// Counts of everything the safety layer did. All start at 0 and only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SafetyCounters {
    /// Commands offered by the policy (or an operator).
    pub commands: u64,
    /// Commands the driver accepted.
    pub sent: u64,
    /// Commands with at least one clipped dimension.
    pub clipped_commands: u64,
    /// Clipped dimensions, summed over commands.
    pub clipped_dims: u64,
    /// Commands rejected for NaN or ±∞.
    pub rejected_nonfinite: u64,
    /// Commands refused because the latch was set.
    pub refused_latched: u64,
    /// Commands the driver reported as dropped.
    pub dropped_commands: u64,
    /// State reads the driver reported as dropped.
    pub dropped_reads: u64,
    /// Watchdog stops (no fresh command in time).
    pub watchdog_stops: u64,
    /// E-stops.
    pub estops: u64,
    /// Driver faults latched.
    pub driver_faults: u64,
    /// Lost links latched.
    pub link_drops: u64,
    /// Overspeed faults latched.
    pub overspeed_faults: u64,
    /// Missed-deadline faults latched.
    pub deadline_faults: u64,
    /// Latches cleared by an operator.
    pub latch_clears: u64,
}

/// Errors from the safety layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The envelope does not fit the driver, or is not a valid envelope.
    #[error("envelope: {key}: expected {expected}, found {found}")]
    Config {
        /// The `[envelope]` key.
        key: String,
        /// What was expected.
        expected: String,
        /// What was found.
        found: String,
    },
    /// The arm starts outside the envelope: move it inside by hand (the layer never makes the
    /// large move that would take it there).
    #[error("the arm starts outside the envelope: {what} is {value:.4}, outside [{low}, {high}]; move it inside by hand, then connect again")]
    StartOutside {
        /// Which joint or axis.
        what: String,
        /// Its measured value.
        value: f64,
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// The latch is set; an operator must clear it.
    #[error("safety latch set: {0}; clear it with an explicit operator action (`Guarded::clear_latch`, or the operator key)")]
    Latched(Latch),
    /// A command of the wrong length.
    #[error("command has {found} numbers, the {mode} envelope expects {expected}")]
    CommandLength {
        /// The control mode's name.
        mode: &'static str,
        /// Expected length.
        expected: usize,
        /// Found length.
        found: usize,
    },
    /// The driver failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

/// What happened to one command.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// The command as offered.
    pub requested: Vec<f64>,
    /// The command as sent (after bounds and step limits); `None` when rejected or dropped.
    pub sent: Option<Vec<f64>>,
    /// Dimensions clipped.
    pub clipped: u32,
    /// Rejected for NaN or ±∞.
    pub rejected: bool,
    /// The driver dropped it.
    pub dropped: bool,
}

/// Whether the arm is being commanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Motion {
    /// No command since connecting, homing, a stop or a cleared latch.
    Idle,
    /// Following fresh commands.
    Moving,
}

/// A driver owned by the safety layer.
pub struct Guarded<R: Robot> {
    driver: R,
    envelope: EnvelopeConfig,
    clock: Arc<dyn Clock>,
    period: Duration,
    window: f64,
    state: Option<RobotState>,
    last_fresh: Option<Duration>,
    motion: Motion,
    latch: Option<Latch>,
    counters: SafetyCounters,
    warnings: Vec<String>,
}

impl<R: Robot> Guarded<R> {
    /// Take `driver`, check `envelope` against its capabilities, connect, and check the arm
    /// starts inside the envelope. `period` is the control period (the step limit and the
    /// watchdog are in periods).
    pub fn connect(
        mut driver: R,
        envelope: EnvelopeConfig,
        period: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GuardError> {
        check_envelope(&envelope, &driver, period)?;
        let mut warnings = check_physical(&envelope, &driver.physical_limits())?;
        driver.connect()?;
        // The driver may know more once connected (a servo's own velocity limit).
        for w in check_physical(&envelope, &driver.physical_limits())? {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        let window = envelope.max_step_delta.min(envelope.max_velocity * period.as_secs_f64());
        let mut guard = Self {
            driver,
            envelope,
            clock,
            period,
            window,
            state: None,
            last_fresh: None,
            motion: Motion::Idle,
            latch: None,
            counters: SafetyCounters::default(),
            warnings,
        };
        let state = guard.read_state()?;
        guard.check_inside(&state)?;
        Ok(guard)
    }

    /// The envelope.
    pub fn envelope(&self) -> &EnvelopeConfig {
        &self.envelope
    }

    /// The limits beyond the arm's physical ones that `allow_beyond_model = true` let through,
    /// one sentence each (empty otherwise: such limits are refused).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The largest move of one dimension per command: `min(max_step_delta, max_velocity · period)`.
    pub fn step_window(&self) -> f64 {
        self.window
    }

    /// The control period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The driver, read-only (its capabilities, a fake's recording).
    pub fn driver(&self) -> &R {
        &self.driver
    }

    /// The counters.
    pub fn counters(&self) -> &SafetyCounters {
        &self.counters
    }

    /// The latch, when set.
    pub fn latch(&self) -> Option<&Latch> {
        self.latch.as_ref()
    }

    /// Whether the arm is being commanded.
    pub fn motion(&self) -> Motion {
        self.motion
    }

    /// The newest state read.
    pub fn last_state(&self) -> Option<&RobotState> {
        self.state.as_ref()
    }

    /// The clock the layer runs on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Read the arm; a lost link, a driver fault or overspeed sets the latch and stops the arm.
    /// Reading is allowed while latched (an operator needs to see the arm).
    pub fn read_state(&mut self) -> Result<RobotState, GuardError> {
        let result = self.driver.read_state();
        let state = match result {
            Ok(s) => s,
            Err(e) => return Err(self.on_driver_error(e, true)),
        };
        if let Some(fault) = self.driver.fault() {
            self.trip(Latch::DriverFault { message: fault.message.clone() });
            return Err(GuardError::Latched(Latch::DriverFault { message: fault.message }));
        }
        if let Some(limit) = self.envelope.overspeed {
            if let Some((joint, v)) = state.joint_velocities.iter().enumerate().find(|(_, v)| !(v.abs() <= limit)) {
                let latch = Latch::Overspeed { joint, speed: *v, limit };
                self.trip(latch.clone());
                return Err(GuardError::Latched(latch));
            }
        }
        self.state = Some(state.clone());
        Ok(state)
    }

    /// [`Guarded::read_state`], read again (up to `attempts` times in all) while the driver
    /// reports the reading dropped.
    pub fn read_state_retry(&mut self, attempts: u32) -> Result<RobotState, GuardError> {
        let mut last = self.read_state();
        for _ in 1..attempts {
            match last {
                Err(GuardError::Driver(DriverError::Dropped { .. })) => last = self.read_state(),
                _ => break,
            }
        }
        last
    }

    /// Offer one command (joint targets, or an end-effector delta, per the envelope's mode).
    /// See the module docs for what is checked; the outcome says what reached the driver.
    pub fn command(&mut self, command: &[f64]) -> Result<Sent, GuardError> {
        self.counters.commands += 1;
        let (mut out, checked) = match self.screen(command) {
            Err(GuardError::Latched(latch)) => {
                self.counters.refused_latched += 1;
                return Err(GuardError::Latched(latch));
            }
            r => r?,
        };
        let Some(checked) = checked else {
            self.counters.rejected_nonfinite += 1;
            return Ok(out);
        };
        match self.driver.send(&checked) {
            Ok(()) => {
                self.counters.sent += 1;
                if out.clipped > 0 {
                    self.counters.clipped_commands += 1;
                    self.counters.clipped_dims += u64::from(out.clipped);
                }
                self.last_fresh = Some(self.clock.now());
                self.motion = Motion::Moving;
                Ok(out)
            }
            Err(DriverError::Dropped { .. }) => {
                self.counters.dropped_commands += 1;
                (out.sent, out.dropped) = (None, true);
                Ok(out)
            }
            Err(e) => Err(self.on_driver_error(e, false)),
        }
    }

    /// What [`Guarded::command`] would send for `command`, without sending it or counting it
    /// (`o2o robot check` dry-runs the envelope with this).
    pub fn preview(&mut self, command: &[f64]) -> Result<Sent, GuardError> {
        self.screen(command).map(|(sent, _)| sent)
    }

    /// The checks of a command, in order: latch, length, finiteness, bounds and step window
    /// around a fresh measurement. The checked command is `None` when rejected.
    fn screen(&mut self, command: &[f64]) -> Result<(Sent, Option<CheckedCommand>), GuardError> {
        if let Some(latch) = &self.latch {
            return Err(GuardError::Latched(latch.clone()));
        }
        let expected = self.command_dim();
        if command.len() != expected {
            return Err(GuardError::CommandLength { mode: self.envelope.mode.name(), expected, found: command.len() });
        }
        let mut out = Sent { requested: command.to_vec(), sent: None, clipped: 0, rejected: false, dropped: false };
        if command.iter().any(|v| !v.is_finite()) {
            out.rejected = true;
            return Ok((out, None));
        }
        let measured = self.fresh_reference()?;
        let (checked, clipped) = self.checked(command, &measured);
        out.clipped = clipped;
        out.sent = Some(checked.values().to_vec());
        Ok((out, Some(checked)))
    }

    /// The watchdog: stop the arm when it is moving and no fresh command arrived within
    /// `watchdog_periods` periods; latch when the driver reports a fault. Call it often (the
    /// [`crate::env::RobotEnv`] watchdog thread polls four times a period). Returns whether it
    /// stopped the arm.
    pub fn poll(&mut self) -> bool {
        if self.latch.is_none() {
            if let Some(fault) = self.driver.fault() {
                self.trip(Latch::DriverFault { message: fault.message });
                return true;
            }
        }
        let timeout = self.period.mul_f64(self.envelope.watchdog_periods);
        match (self.motion, self.last_fresh) {
            (Motion::Moving, Some(t)) if self.clock.now().saturating_sub(t) > timeout => {
                self.counters.watchdog_stops += 1;
                self.motion = Motion::Idle;
                if let Err(e) = self.driver.stop() {
                    let _ = self.on_driver_error(e, false);
                }
                true
            }
            _ => false,
        }
    }

    /// Stop the arm now (not latched: the next fresh command moves it again).
    pub fn stop(&mut self) -> Result<(), GuardError> {
        self.motion = Motion::Idle;
        self.driver.stop().map_err(|e| self.on_driver_error(e, false))
    }

    /// The e-stop: stop the arm and latch until an operator clears it.
    pub fn estop(&mut self, reason: &str) {
        self.trip(Latch::EStop { reason: reason.to_string() });
    }

    /// Stop the arm and set the latch (when it is not set already); counted by kind.
    pub fn trip(&mut self, latch: Latch) {
        self.motion = Motion::Idle;
        // A stop that fails (the link is gone) leaves the arm to its own controller's safe stop;
        // the latch is set either way.
        let _ = self.driver.stop();
        if self.latch.is_some() {
            return;
        }
        match &latch {
            Latch::EStop { .. } => self.counters.estops += 1,
            Latch::DriverFault { .. } => self.counters.driver_faults += 1,
            Latch::LinkLost { .. } => self.counters.link_drops += 1,
            Latch::Overspeed { .. } => self.counters.overspeed_faults += 1,
            Latch::MissedDeadlines { .. } => self.counters.deadline_faults += 1,
        }
        self.latch = Some(latch);
    }

    /// The explicit operator action that clears the latch: the driver clears its fault, the arm
    /// is read again and must be inside the envelope. Nothing else ever clears the latch.
    pub fn clear_latch(&mut self) -> Result<(), GuardError> {
        if self.latch.is_none() {
            return Ok(());
        }
        self.driver.clear_fault()?;
        if let Some(fault) = self.driver.fault() {
            return Err(GuardError::Latched(Latch::DriverFault { message: fault.message }));
        }
        let mut state = self.driver.read_state();
        for _ in 1..3 {
            match state {
                Err(DriverError::Dropped { .. }) => state = self.driver.read_state(),
                _ => break,
            }
        }
        let state = state?;
        self.check_inside(&state)?;
        self.state = Some(state);
        self.latch = None;
        self.motion = Motion::Idle;
        self.counters.latch_clears += 1;
        Ok(())
    }

    /// Move home with the driver's own motion (refused while latched), then read the arm.
    pub fn home(&mut self) -> Result<RobotState, GuardError> {
        if let Some(latch) = &self.latch {
            return Err(GuardError::Latched(latch.clone()));
        }
        self.motion = Motion::Idle;
        self.driver.home().map_err(|e| self.on_driver_error(e, false))?;
        self.read_state_retry(3)
    }

    /// Length of a command in the envelope's mode.
    pub fn command_dim(&self) -> usize {
        match self.envelope.mode {
            ControlMode::JointPosition => self.driver.capabilities().joints.len(),
            ControlMode::EndEffectorDelta => 3,
        }
    }

    /// The measured position the step limit is centred on: joint positions or the end
    /// effector's, from a reading no older than one period (read again otherwise).
    fn fresh_reference(&mut self) -> Result<Vec<f64>, GuardError> {
        let now = self.clock.now();
        let stale = self.state.as_ref().is_none_or(|s| now.saturating_sub(s.stamp) > self.period);
        let state = if stale { self.read_state()? } else { self.state.clone().unwrap_or_default() };
        match self.envelope.mode {
            ControlMode::JointPosition => Ok(state.joint_positions),
            ControlMode::EndEffectorDelta => state.ee_position.map(|p| p.to_vec()).ok_or_else(|| {
                GuardError::Driver(DriverError::Unsupported {
                    driver: self.driver.capabilities().name.clone(),
                    message: "reported no end-effector position".into(),
                })
            }),
        }
    }

    /// The checked command for `command` around `measured`, and how many dimensions moved.
    fn checked(&self, command: &[f64], measured: &[f64]) -> (CheckedCommand, u32) {
        let w = self.window;
        let mut clipped = 0;
        let mut clamp = |want: f64, low: f64, high: f64, at: f64| {
            let v = want.clamp(low, high).clamp(at - w, at + w);
            if v != want {
                clipped += 1;
            }
            v
        };
        let e = &self.envelope;
        match e.mode {
            ControlMode::JointPosition => {
                let values = (0..command.len())
                    .map(|i| clamp(command[i], e.joint_low[i], e.joint_high[i], measured[i]))
                    .collect();
                (CheckedCommand::new(ControlMode::JointPosition, values, None), clipped)
            }
            ControlMode::EndEffectorDelta => {
                let (lo, hi) = (e.workspace_low.unwrap_or_default(), e.workspace_high.unwrap_or_default());
                let mut target = [0.0; 3];
                for i in 0..3 {
                    target[i] = clamp(measured[i] + command[i], lo[i], hi[i], measured[i]);
                }
                let delta = (0..3).map(|i| target[i] - measured[i]).collect();
                (CheckedCommand::new(ControlMode::EndEffectorDelta, delta, Some(target)), clipped)
            }
        }
    }

    /// The arm inside the envelope (joint bounds; the workspace box in end-effector mode).
    fn check_inside(&self, state: &RobotState) -> Result<(), GuardError> {
        let e = &self.envelope;
        let names = &self.driver.capabilities().joints;
        for (i, q) in state.joint_positions.iter().enumerate() {
            if let (Some(lo), Some(hi)) = (e.joint_low.get(i), e.joint_high.get(i)) {
                if !(q >= lo && q <= hi) {
                    return Err(GuardError::StartOutside {
                        what: format!("joint {}", names.get(i).map_or("?", |s| s.as_str())),
                        value: *q,
                        low: *lo,
                        high: *hi,
                    });
                }
            }
        }
        if e.mode == ControlMode::EndEffectorDelta {
            let (lo, hi) = (e.workspace_low.unwrap_or_default(), e.workspace_high.unwrap_or_default());
            let p = state.ee_position.unwrap_or([f64::NAN; 3]);
            for i in 0..3 {
                if !(p[i] >= lo[i] && p[i] <= hi[i]) {
                    return Err(GuardError::StartOutside {
                        what: format!("end effector {}", ["x", "y", "z"][i]),
                        value: p[i],
                        low: lo[i],
                        high: hi[i],
                    });
                }
            }
        }
        Ok(())
    }

    /// A driver error, with its latch: a lost link or a fault latches; a dropped read is counted.
    fn on_driver_error(&mut self, e: DriverError, reading: bool) -> GuardError {
        match &e {
            DriverError::Link { message, .. } => self.trip(Latch::LinkLost { message: message.clone() }),
            DriverError::Fault { fault, .. } => self.trip(Latch::DriverFault { message: fault.message.clone() }),
            DriverError::Dropped { .. } if reading => self.counters.dropped_reads += 1,
            _ => {}
        }
        GuardError::Driver(e)
    }
}

/// The envelope asks for nothing the arm cannot physically do (`limits`, from the driver): joint
/// bounds inside the joint ranges, a step window no wider than a joint's whole range (the arm's
/// reach across, in end-effector mode), a speed no faster than the arm's, a workspace box
/// inside the reach. A breach is refused, naming the key, the value and the limit; with
/// `allow_beyond_model` it is returned as a warning instead.
pub fn check_physical(e: &EnvelopeConfig, limits: &PhysicalLimits) -> Result<Vec<String>, GuardError> {
    let src = if limits.source.is_empty() { "the driver".to_string() } else { limits.source.clone() };
    let mut breaches: Vec<(String, String, String)> = Vec::new();
    let joint_mode = e.mode == ControlMode::JointPosition;
    if limits.joint_range.len() == e.joint_low.len() && limits.joint_range.len() == e.joint_high.len() {
        for (i, r) in limits.joint_range.iter().enumerate() {
            if e.joint_low[i] < r[0] - 1e-9 {
                breaches.push((
                    format!("joint_low[{i}]"),
                    format!(">= {} (joint {i}'s range in {src})", r[0]),
                    e.joint_low[i].to_string(),
                ));
            }
            if e.joint_high[i] > r[1] + 1e-9 {
                breaches.push((
                    format!("joint_high[{i}]"),
                    format!("<= {} (joint {i}'s range in {src})", r[1]),
                    e.joint_high[i].to_string(),
                ));
            }
        }
    }
    if joint_mode {
        if let Some(span) = limits.joint_range.iter().map(|r| r[1] - r[0]).reduce(f64::max) {
            if e.max_step_delta > span {
                breaches.push((
                    "max_step_delta".into(),
                    format!("<= {span:.4} rad (the widest joint range in {src}; a wider window never binds)"),
                    e.max_step_delta.to_string(),
                ));
            }
        }
        if let Some(v) = limits.joint_speed {
            if e.max_velocity > v {
                breaches.push((
                    "max_velocity".into(),
                    format!("<= {v:.4} rad/s (the fastest joint speed in {src})"),
                    e.max_velocity.to_string(),
                ));
            }
        }
    } else {
        if let Some(v) = limits.ee_speed {
            if e.max_velocity > v {
                breaches.push((
                    "max_velocity".into(),
                    format!("<= {v:.4} m/s (the fastest end-effector speed in {src})"),
                    e.max_velocity.to_string(),
                ));
            }
        }
        if let Some((centre, radius)) = limits.reach {
            if e.max_step_delta > 2.0 * radius {
                breaches.push((
                    "max_step_delta".into(),
                    format!("<= {:.4} m (the arm's reach across in {src})", 2.0 * radius),
                    e.max_step_delta.to_string(),
                ));
            }
            for (key, corner) in [("workspace_low", e.workspace_low), ("workspace_high", e.workspace_high)] {
                let Some(c) = corner else { continue };
                if let Some(i) = (0..3).find(|&i| (c[i] - centre[i]).abs() > radius + 1e-9) {
                    breaches.push((
                        format!("{key}[{i}]"),
                        format!(
                            "within {radius:.4} m of the arm's base at {:.4} (its reach in {src}): [{:.4}, {:.4}]",
                            centre[i],
                            centre[i] - radius,
                            centre[i] + radius
                        ),
                        c[i].to_string(),
                    ));
                }
            }
        }
    }
    if e.allow_beyond_model {
        return Ok(breaches.into_iter().map(|(key, expected, found)| format!("envelope: {key} is {found}, beyond the arm ({expected}); accepted because allow_beyond_model = true")).collect());
    }
    match breaches.into_iter().next() {
        Some((key, expected, found)) => Err(GuardError::Config {
            key,
            expected: format!("{expected}; set allow_beyond_model = true if the model is wrong"),
            found,
        }),
        None => Ok(Vec::new()),
    }
}

/// The envelope is valid and fits the driver.
fn check_envelope<R: Robot>(e: &EnvelopeConfig, driver: &R, period: Duration) -> Result<(), GuardError> {
    let caps = driver.capabilities();
    let err =
        |key: &str, expected: String, found: String| Err(GuardError::Config { key: key.to_string(), expected, found });
    if !caps.modes.contains(&e.mode) {
        let modes: Vec<&str> = caps.modes.iter().map(|m| m.name()).collect();
        return err("mode", format!("one of {modes:?} (what {} accepts)", caps.name), e.mode.name().to_string());
    }
    let n = caps.joints.len();
    let joints_needed = e.mode == ControlMode::JointPosition;
    for (key, v) in [("joint_low", &e.joint_low), ("joint_high", &e.joint_high)] {
        if (joints_needed || !v.is_empty()) && v.len() != n {
            return err(key, format!("{n} numbers (one per joint of {})", caps.name), format!("{} numbers", v.len()));
        }
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return err(key, "finite numbers".into(), x.to_string());
        }
    }
    if let Some(i) = (0..e.joint_low.len().min(e.joint_high.len())).find(|&i| e.joint_low[i] > e.joint_high[i]) {
        return err(
            "joint_low",
            format!("joint_low[{i}] <= joint_high[{i}]"),
            format!("{} > {}", e.joint_low[i], e.joint_high[i]),
        );
    }
    if e.mode == ControlMode::EndEffectorDelta {
        if !caps.has_end_effector {
            return err(
                "mode",
                format!("joint-position ({} reports no end-effector position)", caps.name),
                e.mode.name().into(),
            );
        }
        let (Some(lo), Some(hi)) = (e.workspace_low, e.workspace_high) else {
            return err("workspace_low / workspace_high", "both set for end-effector-delta".into(), "missing".into());
        };
        if let Some(i) = (0..3).find(|&i| !(lo[i].is_finite() && hi[i].is_finite() && lo[i] <= hi[i])) {
            return err(
                "workspace_low",
                format!("finite workspace_low[{i}] <= workspace_high[{i}]"),
                format!("{} and {}", lo[i], hi[i]),
            );
        }
    }
    for (key, v) in [
        ("max_step_delta", e.max_step_delta),
        ("max_velocity", e.max_velocity),
        ("watchdog_periods", e.watchdog_periods),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            return err(key, "a positive finite number".into(), v.to_string());
        }
    }
    if e.watchdog_periods > MAX_WATCHDOG_PERIODS {
        return err("watchdog_periods", format!("at most {MAX_WATCHDOG_PERIODS} (polled 4 times a period, a stalled policy then stops the arm within 2 periods)"), e.watchdog_periods.to_string());
    }
    if let Some(o) = e.overspeed {
        if !(o > 0.0 && o.is_finite()) {
            return err("overspeed", "a positive finite number".into(), o.to_string());
        }
    }
    if e.max_missed_deadlines == 0 {
        return err("max_missed_deadlines", "at least 1".into(), "0".into());
    }
    if period.is_zero() {
        return err("rate_hz", "a positive control rate".into(), "period 0".into());
    }
    Ok(())
}
