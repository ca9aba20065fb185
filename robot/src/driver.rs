//! The [`Robot`] driver trait: what every arm (simulated, servo bus, Franka server) offers.
//!
//! A driver moves the arm only through [`Robot::send`], whose argument is a [`CheckedCommand`]:
//! a type with private fields that only the safety layer ([`crate::guard::Guarded`]) can make,
//! after it has checked the command against the envelope. Code outside this crate can read a
//! checked command but cannot build one, so there is no public path by which an unchecked
//! command reaches a driver — not from a policy, not from a test, not from a new driver.

use std::time::Duration;

/// How a driver is commanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlMode {
    /// Absolute joint-position targets, one per joint (servo arms: SO-100, Koch).
    JointPosition,
    /// A Cartesian displacement of the end effector from its current position, `[dx, dy, dz]`
    /// in metres (SERL's Franka server with an impedance controller).
    EndEffectorDelta,
}

impl ControlMode {
    /// The name used in configs (`joint-position`, `end-effector-delta`).
    pub fn name(self) -> &'static str {
        match self {
            ControlMode::JointPosition => "joint-position",
            ControlMode::EndEffectorDelta => "end-effector-delta",
        }
    }
}

/// What a driver can do.
#[derive(Debug, Clone, PartialEq)]
pub struct Capabilities {
    /// A short name of the driver and arm, e.g. `sim/pusher`.
    pub name: String,
    /// Joint names, in the order of every joint vector.
    pub joints: Vec<String>,
    /// Control modes the driver accepts.
    pub modes: Vec<ControlMode>,
    /// Whether [`RobotState::ee_position`] is reported.
    pub has_end_effector: bool,
}

/// What the arm can physically do, as its driver knows it (the model, the calibration, the
/// servo's own limits). The safety layer refuses an envelope that asks for more
/// ([`crate::guard::EnvelopeConfig::allow_beyond_model`] downgrades that to a warning). A field
/// the driver does not know is empty or `None`, and is not checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PhysicalLimits {
    /// Where these numbers come from, named in every refusal (e.g. `pusher.xml`).
    pub source: String,
    /// Range of each joint `[low, high]` (rad, or m for prismatic joints), in joint order.
    pub joint_range: Vec<[f64; 2]>,
    /// The fastest any joint can turn (rad/s).
    pub joint_speed: Option<f64>,
    /// The fastest the end effector can move (m/s).
    pub ee_speed: Option<f64>,
    /// A ball holding every point the end effector can reach: its centre `[x, y, z]` and radius
    /// (m), in the frame of the end-effector positions the driver reports.
    pub reach: Option<([f64; 3], f64)>,
}

/// One reading of the arm.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RobotState {
    /// Joint positions (rad, or m for prismatic joints).
    pub joint_positions: Vec<f64>,
    /// Joint velocities.
    pub joint_velocities: Vec<f64>,
    /// End-effector position `[x, y, z]` in metres, when the driver reports it.
    pub ee_position: Option<[f64; 3]>,
    /// Task-specific extra observation (e.g. a target position), appended to the env's
    /// observation.
    pub extra: Vec<f64>,
    /// When the reading was taken, on the loop's clock.
    pub stamp: Duration,
}

/// A fault the driver reports (the arm or its controller is in an error state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What the hardware (or the simulation) says went wrong.
    pub message: String,
}

/// Errors from a driver call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The link to the arm is gone (cable, serial port, server unreachable, timeout).
    #[error("link to {driver} lost: {message}")]
    Link {
        /// The driver's name.
        driver: String,
        /// What happened.
        message: String,
    },
    /// The arm reports a fault.
    #[error("{driver} reports a fault: {}", fault.message)]
    Fault {
        /// The driver's name.
        driver: String,
        /// The fault.
        fault: Fault,
    },
    /// A message to or from the arm was dropped; the call may be retried.
    #[error("{driver}: message dropped ({what})")]
    Dropped {
        /// The driver's name.
        driver: String,
        /// Which message.
        what: String,
    },
    /// The driver cannot do what was asked (mode, shape, not connected).
    #[error("{driver}: {message}")]
    Unsupported {
        /// The driver's name.
        driver: String,
        /// What is not supported.
        message: String,
    },
}

/// A command that has passed the safety envelope. Only [`crate::guard::Guarded`] makes these;
/// drivers read them. Code outside the crate cannot build one:
///
/// ```compile_fail
/// use o2o_robot::{CheckedCommand, ControlMode};
/// let unchecked = CheckedCommand::new(ControlMode::JointPosition, vec![1e9], None);
/// ```
///
/// ```compile_fail
/// use o2o_robot::{CheckedCommand, ControlMode};
/// let unchecked = CheckedCommand { mode: ControlMode::JointPosition, values: vec![1e9], ee_target: None };
/// ```
#[derive(Debug, PartialEq)]
pub struct CheckedCommand {
    mode: ControlMode,
    values: Vec<f64>,
    ee_target: Option<[f64; 3]>,
}

impl CheckedCommand {
    /// Made by the safety layer only (crate-private on purpose: see the module docs).
    pub(crate) fn new(mode: ControlMode, values: Vec<f64>, ee_target: Option<[f64; 3]>) -> Self {
        Self { mode, values, ee_target }
    }

    /// The control mode.
    pub fn mode(&self) -> ControlMode {
        self.mode
    }

    /// Joint targets ([`ControlMode::JointPosition`]) or the Cartesian delta
    /// ([`ControlMode::EndEffectorDelta`]), as checked.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// For an end-effector delta: the absolute target (current position + delta), inside the
    /// workspace box; drivers that take absolute poses (SERL's `pose`) send this.
    pub fn ee_target(&self) -> Option<[f64; 3]> {
        self.ee_target
    }
}

/// A robot arm driver.
///
/// Implementations talk to one arm. They do not check commands (the safety layer does, before
/// a [`CheckedCommand`] exists), but they report faults and a lost link honestly: the safety
/// layer stops the arm on either.
pub trait Robot: Send {
    /// What the driver can do.
    fn capabilities(&self) -> &Capabilities;
    /// Open the link (port, socket, simulation). Called once before anything else.
    fn connect(&mut self) -> Result<(), DriverError>;
    /// Read the arm's current state.
    fn read_state(&mut self) -> Result<RobotState, DriverError>;
    /// Send one checked command.
    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError>;
    /// Stop moving now (hold the current position, or cut torque where that is the safe stop).
    fn stop(&mut self) -> Result<(), DriverError>;
    /// Move to the home pose with the driver's own slow, safe motion, and wait until there.
    fn home(&mut self) -> Result<(), DriverError>;
    /// The fault the arm is in, if any.
    fn fault(&mut self) -> Option<Fault>;
    /// Clear a fault on the hardware side (e.g. SERL's `clearerr`), after an operator cleared
    /// the safety latch. The default does nothing.
    fn clear_fault(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    /// What the arm can physically do. Asked before [`Robot::connect`] and again after it (a
    /// driver may learn more from the hardware, e.g. a servo's velocity limit). The default
    /// knows nothing.
    fn physical_limits(&self) -> PhysicalLimits {
        PhysicalLimits::default()
    }
}

impl<R: Robot + ?Sized> Robot for Box<R> {
    fn capabilities(&self) -> &Capabilities {
        (**self).capabilities()
    }
    fn connect(&mut self) -> Result<(), DriverError> {
        (**self).connect()
    }
    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        (**self).read_state()
    }
    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        (**self).send(command)
    }
    fn stop(&mut self) -> Result<(), DriverError> {
        (**self).stop()
    }
    fn home(&mut self) -> Result<(), DriverError> {
        (**self).home()
    }
    fn fault(&mut self) -> Option<Fault> {
        (**self).fault()
    }
    fn clear_fault(&mut self) -> Result<(), DriverError> {
        (**self).clear_fault()
    }
    fn physical_limits(&self) -> PhysicalLimits {
        (**self).physical_limits()
    }
}
