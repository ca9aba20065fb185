//! Robot configs: one TOML file per robot (`robot/configs/*.toml`) that says which driver,
//! which clock, the control loop, the envelope, the task and the operator.
//!
//! ```toml
//! id = "robot-sim-pusher"   # optional: a name for logs
//! clock = "real"            # or "simulated" (sim driver only: lock-step, deterministic)
//! [driver]
//! kind = "sim"              # the driver and its settings
//! [loop]
//! rate_hz = 10.0
//! [envelope]
//! mode = "end-effector-delta"
//! ...
//! [task]
//! goal_low = [0.6, -0.7, 0.0]
//! goal_high = [0.75, -0.5, 0.15]
//! [operator]
//! kind = "unattended"       # or "scripted", "reacher", "keyboard"
//! ```
//!
//! [`RobotConfig::build`] turns a config into a connected [`RobotEnv`]; every bad value is an
//! error naming the file and key.

use crate::clock::{Clock, FakeClock, RealClock};
use crate::driver::Robot;
use crate::env::{LoopConfig, RobotEnv};
use crate::guard::EnvelopeConfig;
use crate::intervention::{Operator, ScriptedOperator, Unattended};
use crate::sim::{SimArm, SimConfig};
use crate::task::ReachTask;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which clock the loop runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockKind {
    /// The machine's monotonic clock (hardware, or a sim in real time).
    #[default]
    Real,
    /// A fake clock that jumps to each deadline: the sim runs as fast as it can, exactly
    /// reproducibly. Only for the `sim` driver.
    Simulated,
}

/// The `[driver]` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DriverConfig {
    /// The MuJoCo arm ([`crate::sim`]).
    Sim(SimConfig),
    /// Feetech STS3215 servos on a serial bus ([`crate::feetech`]: SO-100/101).
    Feetech(crate::feetech::FeetechConfig),
    /// ROBOTIS X-series servos on a protocol 2.0 bus ([`crate::dynamixel`]: Koch arms).
    Dynamixel(crate::dynamixel::DynamixelConfig),
    /// A SERL robot server over HTTP ([`crate::serl`]: Franka with its impedance controller).
    SerlHttp(crate::serl::SerlConfig),
}

impl DriverConfig {
    /// The driver's kind as written in configs.
    pub fn kind(&self) -> &'static str {
        match self {
            DriverConfig::Sim(_) => "sim",
            DriverConfig::Feetech(_) => "feetech",
            DriverConfig::Dynamixel(_) => "dynamixel",
            DriverConfig::SerlHttp(_) => "serl-http",
        }
    }
}

/// The `[operator]` table.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum OperatorConfig {
    /// No one at the robot.
    #[default]
    Unattended,
    /// A script ([`ScriptedOperator`]).
    Scripted(ScriptedOperator),
    /// A scripted teleoperator that always takes over and drives the arm to the goal with a
    /// proportional controller (demonstrations on the sim: `o2o robot record`).
    Reacher(crate::intervention::Reacher),
    /// A person at this terminal's keyboard ([`crate::keyboard`]: take over, nudge, label,
    /// confirm resets, clear latches, e-stop).
    Keyboard(crate::keyboard::KeyboardConfig),
}

/// A whole robot config file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotConfig {
    /// A name for logs (default: the file's stem).
    #[serde(default)]
    pub id: Option<String>,
    /// The clock.
    #[serde(default)]
    pub clock: ClockKind,
    /// The driver.
    pub driver: DriverConfig,
    /// The control loop.
    #[serde(default, rename = "loop")]
    pub control: LoopConfig,
    /// The safety envelope.
    pub envelope: EnvelopeConfig,
    /// The task.
    pub task: ReachTask,
    /// The operator.
    #[serde(default)]
    pub operator: OperatorConfig,
}

/// Errors reading or building a robot config.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read the robot config {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid robot config.
    #[error("robot config {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (key, expected, found).
        message: String,
    },
    /// The robot could not be brought up.
    #[error("robot config {}: the robot did not come up", path.display())]
    Build {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl RobotConfig {
    /// Read and check a config file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
    }

    /// Parse config text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        let mut c: RobotConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if c.id.is_none() {
            c.id = path.file_stem().map(|s| format!("robot-{}", s.to_string_lossy()));
        }
        c.control.period().map_err(invalid)?;
        // A relative calibration file is next to the config.
        let calibration = match &mut c.driver {
            DriverConfig::Feetech(f) => Some(&mut f.calibration),
            DriverConfig::Dynamixel(d) => Some(&mut d.calibration),
            _ => None,
        };
        if let (Some(cal), Some(dir)) = (calibration, path.parent()) {
            if cal.is_relative() {
                *cal = dir.join(&*cal);
            }
        }
        if c.clock == ClockKind::Simulated && !matches!(c.driver, DriverConfig::Sim(_)) {
            return Err(invalid(format!(
                "clock: `simulated` runs only the sim driver, found driver kind `{}`; use clock = \"real\"",
                c.driver.kind()
            )));
        }
        Ok(c)
    }

    /// The clock this config runs on (a fresh one).
    pub fn make_clock(&self) -> Arc<dyn Clock> {
        match self.clock {
            ClockKind::Real => Arc::new(RealClock::new()),
            ClockKind::Simulated => Arc::new(FakeClock::new()),
        }
    }

    /// The driver, not yet connected.
    pub fn make_driver(&self, clock: Arc<dyn Clock>) -> Result<Box<dyn Robot>, crate::driver::DriverError> {
        Ok(match &self.driver {
            DriverConfig::Sim(c) => Box::new(SimArm::new(c.clone(), clock)?),
            DriverConfig::Feetech(c) => Box::new(crate::feetech::FeetechArm::new(c.clone(), clock)?),
            DriverConfig::Dynamixel(c) => Box::new(crate::dynamixel::DynamixelArm::new(c.clone(), clock)?),
            DriverConfig::SerlHttp(c) => Box::new(crate::serl::SerlClient::new(c.clone(), clock)),
        })
    }

    /// The operator (the keyboard operator fails without a terminal).
    pub fn make_operator(&self) -> Result<Box<dyn Operator>, String> {
        Ok(match &self.operator {
            OperatorConfig::Unattended => Box::new(Unattended),
            OperatorConfig::Scripted(s) => Box::new(s.clone()),
            OperatorConfig::Reacher(r) => Box::new(r.clone()),
            OperatorConfig::Keyboard(k) => Box::new(crate::keyboard::KeyboardOperator::terminal(k.clone())?),
        })
    }

    /// Connect the robot and build its env named `env_id` (`path` names the file in errors).
    pub fn build(&self, env_id: &str, path: &Path) -> Result<RobotEnv<Box<dyn Robot>>, ConfigError> {
        let build =
            |e: Box<dyn std::error::Error + Send + Sync>| ConfigError::Build { path: path.to_path_buf(), source: e };
        let clock = self.make_clock();
        let driver = self.make_driver(clock.clone()).map_err(|e| build(Box::new(e)))?;
        let operator =
            self.make_operator().map_err(|e| ConfigError::Invalid { path: path.to_path_buf(), message: e })?;
        RobotEnv::new(env_id, driver, self.envelope.clone(), self.control.clone(), self.task.clone(), operator, clock)
            .map_err(|e| build(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIM: &str = r#"
clock = "simulated"
[driver]
kind = "sim"
[envelope]
mode = "joint-position"
joint_low = [-1.5, -0.4, -1.4, -2.2, -1.4, -1.0, -1.4]
joint_high = [1.5, 1.3, 1.6, 0.0, 1.4, 0.0, 1.4]
max_step_delta = 0.05
max_velocity = 0.5
[task]
goal_low = [0.0, 0.3]
goal_high = [0.2, 0.5]
"#;

    #[test]
    fn every_example_config_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let c = RobotConfig::read(&p).unwrap_or_else(|e| panic!("{e}"));
                let joints = c.envelope.joint_low.len().max(3);
                c.task
                    .check(joints, c.envelope.mode == crate::driver::ControlMode::EndEffectorDelta)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 3, "{n} configs in {}", dir.display());
    }

    #[test]
    fn a_config_parses_with_defaults_and_names_bad_keys() {
        let c = RobotConfig::parse(SIM, Path::new("sim.toml")).unwrap();
        assert_eq!(c.id.as_deref(), Some("robot-sim"));
        assert_eq!(c.control.rate_hz, 10.0);
        assert_eq!(c.envelope.watchdog_periods, 1.5);
        assert_eq!(c.operator, OperatorConfig::Unattended);
        let bad = SIM.replace("max_velocity", "max_speed");
        let e = RobotConfig::parse(&bad, Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("max_speed"), "{e}");
        let bad = SIM.replace("kind = \"sim\"", "kind = \"sim\"\nkp = \"stiff\"");
        let e = RobotConfig::parse(&bad, Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("[driver]") && e.contains("expected f64"), "{e}");
        let bad = SIM.replace("kind = \"sim\"", "kind = \"sim\"\nstiffness = 3.0");
        let e = RobotConfig::parse(&bad, Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("stiffness"), "{e}");
        let bad = SIM.replace("[driver]", "[loop]\nrate_hz = 0\n[driver]");
        let e = RobotConfig::parse(&bad, Path::new("x.toml")).unwrap_err().to_string();
        assert!(e.contains("loop.rate_hz"), "{e}");
    }
}
