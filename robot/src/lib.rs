//! o2o-robot: running policies on physical robots.
//!
//! - [`driver::Robot`]: the driver trait every arm implements (simulated, servo bus, Franka
//!   server); it moves the arm only on a [`driver::CheckedCommand`];
//! - [`guard::Guarded`]: the safety layer that owns a driver and is the only maker of checked
//!   commands (bounds, step and velocity limits, NaN rejection, watchdog, latched e-stop);
//! - [`clock`]: the real monotonic clock and a fake one for tests;
//! - [`env::RobotEnv`]: an [`o2o_envs::Env`] over any guarded driver at a fixed control rate,
//!   with loop timing, operator interventions and labels ([`intervention`]), a reaching task
//!   ([`task`]) and a D4RL-format recording of every transition ([`recording`]);
//! - [`SafetyEnvelope`]: the older action/observation envelope around any [`o2o_envs::Env`].
//!
//! Design choice: the safety layer cannot be bypassed because of a type, not a convention.
//! [`driver::CheckedCommand`] has private fields and a crate-private constructor, and
//! [`driver::Robot::send`] takes one; the only code that makes one is [`guard::Guarded::command`],
//! after the checks. A driver written in another crate, a policy or a test can read checked
//! commands but has no way to produce an unchecked one, so "every command passed the envelope"
//! holds for all code that compiles, not only for code that remembers to call a wrapper.

#![deny(missing_docs)]

pub mod calibration;
pub mod clock;
pub mod config;
pub mod driver;
pub mod dynamixel;
pub mod env;
pub mod feetech;
pub mod guard;
pub mod intervention;
pub mod keyboard;
pub mod recording;
pub mod safety;
pub mod serial;
pub mod serl;
pub mod sim;
pub mod task;
pub mod testing;

pub use clock::{Clock, FakeClock, RealClock};
pub use config::{ConfigError, RobotConfig};
pub use driver::{Capabilities, CheckedCommand, ControlMode, DriverError, Fault, PhysicalLimits, Robot, RobotState};
pub use env::{
    EnvReport, LoopConfig, LoopObserver, LoopSample, LoopStats, ObserverSlot, ReportSink, RobotEnv, RobotEnvError,
};
pub use guard::{EnvelopeConfig, GuardError, Guarded, Latch, SafetyCounters, Sent};
pub use intervention::{Operator, Reacher, ResetDecision, ScriptedOperator, Unattended};
pub use recording::Recording;
pub use safety::{SafetyEnvelope, SafetyError, SafetyLimits};
pub use task::ReachTask;
