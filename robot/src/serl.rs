//! The `serl-http` driver: a client for SERL's Flask robot server (`serl_robot_infra/
//! robot_servers/franka_server.py`), so Franka users keep their server and its impedance
//! controller (ecosystem.md §1.3).
//!
//! The contract used (all `POST`, JSON): `getstate` → `{pose: [x, y, z, qx, qy, qz, qw], vel,
//! force, torque, q, dq, jacobian, gripper_pos}`; `pose` ← `{"arr": [x, y, z, qx, qy, qz,
//! qw]}` (an absolute target: the checked command's end-effector target, orientation held at
//! the last reading); `jointreset` (home); `clearerr` (clear the arm's error after a reflex).
//!
//! Errors map onto the safety layer: no answer within `timeout_ms` or a refused connection is
//! a lost link; an HTTP 5xx is a fault of the arm (latched, cleared by `clearerr` after the
//! operator's clear); any other status means the server does not speak this contract.

use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, ControlMode, DriverError, Fault, PhysicalLimits, Robot, RobotState};
use std::sync::Arc;
use std::time::Duration;

/// The `serl-http` driver's settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SerlConfig {
    /// The robot server, e.g. `http://127.0.0.1:5000/`.
    pub url: String,
    /// A call that takes longer than this is a lost link (ms).
    pub timeout_ms: u64,
    /// Joints the server reports in `q` (7 for a Franka).
    pub joints: usize,
}

impl Default for SerlConfig {
    fn default() -> Self {
        Self { url: "http://127.0.0.1:5000/".into(), timeout_ms: 100, joints: 7 }
    }
}

/// `getstate`'s answer (the fields this driver reads).
#[derive(Debug, serde::Deserialize)]
struct ServerState {
    pose: Vec<f64>,
    q: Vec<f64>,
    dq: Vec<f64>,
}

/// The client.
pub struct SerlClient {
    caps: Capabilities,
    config: SerlConfig,
    agent: ureq::Agent,
    clock: Arc<dyn Clock>,
    orientation: Option<[f64; 4]>,
    fault: Option<Fault>,
}

impl SerlClient {
    /// A client for the server at `config.url` (nothing is sent before `connect`).
    pub fn new(mut config: SerlConfig, clock: Arc<dyn Clock>) -> Self {
        if !config.url.ends_with('/') {
            config.url.push('/');
        }
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(config.timeout_ms)))
            .http_status_as_error(true)
            .build()
            .into();
        let caps = Capabilities {
            name: format!("serl-http {}", config.url),
            joints: (1..=config.joints).map(|i| format!("panda_joint{i}")).collect(),
            modes: vec![ControlMode::EndEffectorDelta],
            has_end_effector: true,
        };
        Self { caps, config, agent, clock, orientation: None, fault: None }
    }

    fn post(&mut self, endpoint: &str, body: &str) -> Result<String, DriverError> {
        let driver = self.caps.name.clone();
        let url = format!("{}{endpoint}", self.config.url);
        match self.agent.post(&url).header("Content-Type", "application/json").send(body) {
            Ok(mut r) => r
                .body_mut()
                .read_to_string()
                .map_err(|e| DriverError::Link { driver, message: format!("{endpoint}: {e}") }),
            Err(ureq::Error::StatusCode(code)) if code >= 500 => {
                let fault = Fault { message: format!("{endpoint} answered HTTP {code}") };
                self.fault = Some(fault.clone());
                Err(DriverError::Fault { driver, fault })
            }
            Err(ureq::Error::StatusCode(code)) => Err(DriverError::Unsupported {
                driver,
                message: format!("{endpoint} answered HTTP {code}: is {} a SERL robot server?", self.config.url),
            }),
            Err(e) => Err(DriverError::Link { driver, message: format!("{endpoint}: {e}") }),
        }
    }

    fn state(&mut self) -> Result<ServerState, DriverError> {
        let text = self.post("getstate", "{}")?;
        let s: ServerState = serde_json::from_str(&text).map_err(|e| DriverError::Unsupported {
            driver: self.caps.name.clone(),
            message: format!("getstate: not the SERL state ({e})"),
        })?;
        if s.pose.len() != 7 || s.q.len() != self.config.joints || s.dq.len() != self.config.joints {
            return Err(DriverError::Unsupported {
                driver: self.caps.name.clone(),
                message: format!(
                    "getstate: expected pose of 7 and q, dq of {} numbers, found {}, {}, {}",
                    self.config.joints,
                    s.pose.len(),
                    s.q.len(),
                    s.dq.len()
                ),
            });
        }
        self.orientation = Some([s.pose[3], s.pose[4], s.pose[5], s.pose[6]]);
        Ok(s)
    }

    fn send_pose(&mut self, p: [f64; 3]) -> Result<(), DriverError> {
        let q = match self.orientation {
            Some(q) => q,
            None => {
                self.state()?;
                self.orientation.unwrap_or([0.0, 0.0, 0.0, 1.0])
            }
        };
        let body = serde_json::json!({ "arr": [p[0], p[1], p[2], q[0], q[1], q[2], q[3]] }).to_string();
        self.post("pose", &body).map(|_| ())
    }
}

/// The Franka Panda's published limits (SERL's arm), in its base frame: the end effector
/// reaches at most 855 mm from the shoulder joint, which sits 0.333 m above the base, and moves
/// at most 1.7 m/s (libfranka's Cartesian translational velocity limit).
pub const PANDA_REACH: ([f64; 3], f64) = ([0.0, 0.0, 0.333], 0.855);
/// See [`PANDA_REACH`].
pub const PANDA_EE_SPEED: f64 = 1.7;

impl Robot for SerlClient {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn physical_limits(&self) -> PhysicalLimits {
        PhysicalLimits {
            source: "the Franka Panda's datasheet".into(),
            ee_speed: Some(PANDA_EE_SPEED),
            reach: Some(PANDA_REACH),
            ..PhysicalLimits::default()
        }
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        self.state().map(|_| ())
    }

    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        let s = self.state()?;
        Ok(RobotState {
            joint_positions: s.q,
            joint_velocities: s.dq,
            ee_position: Some([s.pose[0], s.pose[1], s.pose[2]]),
            extra: Vec::new(),
            stamp: self.clock.now(),
        })
    }

    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        let target = command.ee_target().ok_or_else(|| DriverError::Unsupported {
            driver: self.caps.name.clone(),
            message: "takes end-effector commands only".into(),
        })?;
        self.send_pose(target)
    }

    /// Hold: the impedance reference is set to the pose the arm is at now.
    fn stop(&mut self) -> Result<(), DriverError> {
        let s = self.state()?;
        self.send_pose([s.pose[0], s.pose[1], s.pose[2]])
    }

    fn home(&mut self) -> Result<(), DriverError> {
        self.post("jointreset", "{}").map(|_| ())
    }

    fn fault(&mut self) -> Option<Fault> {
        self.fault.clone()
    }

    fn clear_fault(&mut self) -> Result<(), DriverError> {
        self.post("clearerr", "{}")?;
        self.fault = None;
        Ok(())
    }
}
