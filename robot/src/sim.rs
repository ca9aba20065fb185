//! The `sim` driver: Gymnasium's 7-DoF Pusher arm (`pusher.xml`, loaded from the installed
//! package at run time, never copied) behind the [`Robot`] trait, the test double for
//! everything above it.
//!
//! - **Joint-position control, like a servo arm.** The arm's actuators are torque motors, so
//!   the driver closes a PD loop at the physics rate: τ = clip(kp (q* − q) − kd q̇, ctrlrange).
//! - **End-effector delta control, like SERL's Franka server.** A Cartesian delta Δx of the
//!   `tips_arm` body becomes joint targets by damped least squares on its Jacobian J (3 × 7):
//!   Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ Δx, q* = clip(q + Δq, joint ranges) — the software stand-in for
//!   an impedance controller tracking a moving reference.
//! - **Real time.** The physics advances to the clock's `now()` on every call (10 steps of
//!   0.01 s per 100 ms), so a slow policy sees the arm keep moving, as a real arm does; on a
//!   [`crate::FakeClock`] the whole loop is deterministic.
//! - **Faults, seeded** ([`SimFaults`]): latency and jitter on every call (time taken on the
//!   clock), dropped messages, driver faults, link drops lasting a number of calls.
//!
//! Homing resets the physics to the home pose (a simulated arm can; a real driver moves there).

use crate::clock::Clock;
use crate::driver::{Capabilities, CheckedCommand, ControlMode, DriverError, Fault, PhysicalLimits, Robot, RobotState};
use mujoco_rs::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

/// Arm joints of the Pusher model, in model order.
pub const ARM_JOINTS: usize = 7;

/// Faults the sim injects, all drawn from one seeded stream.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimFaults {
    /// Seed of the fault stream.
    pub seed: u64,
    /// Time every call takes (ms).
    pub latency_ms: f64,
    /// Extra time, uniform in [0, jitter_ms], on every call.
    pub jitter_ms: f64,
    /// Probability that a command or a reading is dropped.
    pub drop_prob: f64,
    /// Probability per command that the arm enters a fault (until cleared).
    pub fault_prob: f64,
    /// Probability per call that the link drops…
    pub link_drop_prob: f64,
    /// …for this many calls.
    pub link_down_calls: u32,
}

impl SimFaults {
    fn check(&self) -> Result<(), String> {
        for (k, p) in
            [("drop_prob", self.drop_prob), ("fault_prob", self.fault_prob), ("link_drop_prob", self.link_drop_prob)]
        {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("driver.faults.{k}: expected a probability in [0, 1], found {p}"));
            }
        }
        for (k, v) in [("latency_ms", self.latency_ms), ("jitter_ms", self.jitter_ms)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("driver.faults.{k}: expected a non-negative number of ms, found {v}"));
            }
        }
        Ok(())
    }
}

/// The `sim` driver's settings (`[driver]` with `kind = "sim"`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Home joint positions (rad), 7 numbers.
    pub home: Vec<f64>,
    /// PD stiffness kp (N·m/rad).
    pub kp: f64,
    /// PD damping kd (N·m·s/rad).
    pub kd: f64,
    /// Damped-least-squares λ for end-effector deltas.
    pub dls_lambda: f64,
    /// Injected faults.
    pub faults: SimFaults,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            home: vec![0.0, 0.3, 0.0, -1.0, 0.0, -0.5, 0.0],
            kp: 20.0,
            kd: 1.5,
            dls_lambda: 0.05,
            faults: SimFaults::default(),
        }
    }
}

/// The simulated arm.
pub struct SimArm {
    caps: Capabilities,
    limits: PhysicalLimits,
    config: SimConfig,
    clock: Arc<dyn Clock>,
    data: MjData<Arc<MjModel>>,
    tip: usize,
    ranges: Vec<[f64; 2]>,
    ctrl_range: Vec<[f64; 2]>,
    dt: f64,
    sim_time: f64,
    target: Vec<f64>,
    rng: ChaCha8Rng,
    fault: Option<Fault>,
    link_down_for: u32,
    connected: bool,
}

fn unsupported(message: String) -> DriverError {
    DriverError::Unsupported { driver: "sim/pusher".into(), message }
}

impl SimArm {
    /// Load `pusher.xml` from Gymnasium's installed assets ([`o2o_envs::assets`]).
    pub fn new(config: SimConfig, clock: Arc<dyn Clock>) -> Result<Self, DriverError> {
        let path = o2o_envs::assets::asset_path("pusher.xml").map_err(|e| unsupported(e.to_string()))?;
        Self::from_xml(&path, config, clock)
    }

    /// Load the arm from `path` (a Pusher-layout model).
    pub fn from_xml(path: &std::path::Path, config: SimConfig, clock: Arc<dyn Clock>) -> Result<Self, DriverError> {
        config.faults.check().map_err(unsupported)?;
        if config.home.len() != ARM_JOINTS {
            return Err(unsupported(format!(
                "driver.home: expected {ARM_JOINTS} joint positions, found {}",
                config.home.len()
            )));
        }
        let model = MjModel::from_xml(path)
            .map_err(|e| unsupported(format!("MuJoCo could not load {}: {e}", path.display())))?;
        let model = Arc::new(model);
        let names: Vec<String> =
            (0..ARM_JOINTS).map(|j| model.id_to_name(MjtObjBase::mjOBJ_JOINT, j).unwrap_or("?").to_string()).collect();
        let tip = model
            .name_to_id(MjtObjBase::mjOBJ_BODY, "tips_arm")
            .ok_or_else(|| unsupported(format!("{} has no body `tips_arm`", path.display())))?;
        let ranges = model.jnt_range()[..ARM_JOINTS].to_vec();
        let ctrl_range = model.actuator_ctrlrange().to_vec();
        let limits = model_limits(&model, tip, path);
        let dt = model.opt().timestep;
        let data = MjData::try_new(model).map_err(|e| unsupported(format!("MuJoCo could not allocate data: {e}")))?;
        for (i, (h, r)) in config.home.iter().zip(&ranges).enumerate() {
            if !(h >= &r[0] && h <= &r[1]) {
                return Err(unsupported(format!(
                    "driver.home[{i}] = {h} is outside joint {}'s range [{}, {}]",
                    names[i], r[0], r[1]
                )));
            }
        }
        let caps = Capabilities {
            name: "sim/pusher".into(),
            joints: names,
            modes: vec![ControlMode::JointPosition, ControlMode::EndEffectorDelta],
            has_end_effector: true,
        };
        let rng = ChaCha8Rng::seed_from_u64(config.faults.seed);
        let target = config.home.clone();
        let mut arm = Self {
            caps,
            limits,
            config,
            clock,
            data,
            tip,
            ranges,
            ctrl_range,
            dt,
            sim_time: 0.0,
            target,
            rng,
            fault: None,
            link_down_for: 0,
            connected: false,
        };
        arm.put_home();
        Ok(arm)
    }

    /// Joint ranges of the arm (rad), from the model.
    pub fn joint_ranges(&self) -> &[[f64; 2]] {
        &self.ranges
    }

    /// The current joint targets of the PD loop.
    pub fn targets(&self) -> &[f64] {
        &self.target
    }

    fn put_home(&mut self) {
        self.data.reset();
        let mut qpos = self.data.qpos().to_vec();
        qpos[..ARM_JOINTS].copy_from_slice(&self.config.home);
        self.data.qpos_mut().copy_from_slice(&qpos);
        self.data.qvel_mut().iter_mut().for_each(|v| *v = 0.0);
        self.data.forward();
        self.target = self.config.home.clone();
        self.sim_time = self.clock.now().as_secs_f64();
    }

    /// Step the physics (PD loop at each step) up to the clock's now.
    fn advance(&mut self) {
        let now = self.clock.now().as_secs_f64();
        while self.sim_time + self.dt <= now + 1e-9 {
            let (q, qd) = (self.data.qpos()[..ARM_JOINTS].to_vec(), self.data.qvel()[..ARM_JOINTS].to_vec());
            let ctrl = self.data.ctrl_mut();
            for j in 0..ARM_JOINTS {
                // τ = clip(kp (q* − q) − kd q̇)
                let tau = self.config.kp * (self.target[j] - q[j]) - self.config.kd * qd[j];
                ctrl[j] = tau.clamp(self.ctrl_range[j][0], self.ctrl_range[j][1]);
            }
            self.data.step();
            self.sim_time += self.dt;
        }
    }

    /// The time a call takes, and whether the link is up (a seeded draw per call).
    fn call(&mut self) -> Result<(), DriverError> {
        let f = &self.config.faults;
        let mut ms = f.latency_ms;
        if f.jitter_ms > 0.0 {
            ms += self.rng.gen_range(0.0..=f.jitter_ms);
        }
        if ms > 0.0 {
            self.clock.sleep_for(Duration::from_secs_f64(ms / 1e3));
        }
        if self.link_down_for == 0 && f.link_drop_prob > 0.0 && self.rng.gen_bool(f.link_drop_prob) {
            self.link_down_for = f.link_down_calls.max(1);
        }
        if self.link_down_for > 0 {
            self.link_down_for -= 1;
            return Err(DriverError::Link { driver: self.caps.name.clone(), message: "simulated link drop".into() });
        }
        if !self.connected {
            return Err(unsupported("not connected".into()));
        }
        Ok(())
    }

    fn dropped(&mut self, what: &str) -> Result<(), DriverError> {
        let p = self.config.faults.drop_prob;
        if p > 0.0 && self.rng.gen_bool(p) {
            return Err(DriverError::Dropped { driver: self.caps.name.clone(), what: what.into() });
        }
        Ok(())
    }

    fn ee(&self) -> [f64; 3] {
        self.data.xpos()[self.tip]
    }

    /// Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ Δx over the arm joints (damped least squares).
    fn dls(&self, dx: &[f64]) -> Vec<f64> {
        let nv = self.data.qvel().len();
        let (jacp, _) = self.data.jac_body(true, false, self.tip);
        let j = |r: usize, c: usize| jacp[r * nv + c];
        let lambda2 = self.config.dls_lambda * self.config.dls_lambda;
        let mut a = [[0.0; 3]; 3];
        for (r, row) in a.iter_mut().enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                *v = (0..ARM_JOINTS).map(|k| j(r, k) * j(c, k)).sum::<f64>() + if r == c { lambda2 } else { 0.0 };
            }
        }
        let y = solve3(a, [dx[0], dx[1], dx[2]]);
        (0..ARM_JOINTS).map(|k| (0..3).map(|r| j(r, k) * y[r]).sum()).collect()
    }
}

/// What the model says the arm can do (the safety layer checks envelopes against it):
/// - the joint ranges;
/// - the fastest joint speed: each arm joint's terminal speed under its actuator's largest
///   torque against the joint's damping, |gear · ctrl| / damping (Pusher has no gravity, so
///   nothing else drives a joint; unknown when a joint has no damping);
/// - the reach: a ball around the first joint's anchor whose radius is the summed lengths of the
///   body offsets from there to the tip (no chain of links reaches farther);
/// - the fastest tip speed: Σ joint speeds × that radius (each joint moves the tip at most at
///   its speed times its distance to the tip).
fn model_limits(model: &MjModel, tip: usize, path: &std::path::Path) -> PhysicalLimits {
    let joint_range = model.jnt_range()[..ARM_JOINTS].to_vec();
    let (gear, ctrl, trn, damping) =
        (model.actuator_gear(), model.actuator_ctrlrange(), model.actuator_trnid(), model.dof_damping());
    let speeds: Option<Vec<f64>> = (0..ARM_JOINTS)
        .map(|j| {
            let a = trn.iter().position(|t| t[0] as usize == j)?;
            let d = damping[model.jnt_dofadr()[j] as usize];
            let torque = gear[a][0].abs() * ctrl[a][0].abs().max(ctrl[a][1].abs());
            (d > 0.0).then(|| torque / d)
        })
        .collect();
    let base = model.jnt_bodyid()[0] as usize;
    let (mut radius, mut body) = (0.0, tip);
    while body != base && body != 0 {
        let p = model.body_pos()[body];
        radius += (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        body = model.body_parentid()[body] as usize;
    }
    // The first joint's anchor, in the world: its body's offset chain from the world (bodies
    // above it do not move) plus the anchor's offset in that body.
    let mut centre = model.jnt_pos()[0];
    let mut b = base;
    while b != 0 {
        let p = model.body_pos()[b];
        (0..3).for_each(|i| centre[i] += p[i]);
        b = model.body_parentid()[b] as usize;
    }
    PhysicalLimits {
        source: path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_else(|| "the model".into()),
        joint_range,
        joint_speed: speeds.as_ref().and_then(|v| v.iter().copied().reduce(f64::max)),
        ee_speed: speeds.map(|v| v.iter().sum::<f64>() * radius),
        reach: (radius > 0.0).then_some((centre, radius)),
    }
}

/// Solve the 3×3 system `a x = b` (symmetric positive definite here: Cramer's rule is exact
/// enough and has no pivoting to get wrong).
fn solve3(a: [[f64; 3]; 3], b: [f64; 3]) -> [f64; 3] {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(a);
    let mut x = [0.0; 3];
    for (i, xi) in x.iter_mut().enumerate() {
        let mut m = a;
        for r in 0..3 {
            m[r][i] = b[r];
        }
        *xi = det(m) / d;
    }
    x
}

impl Robot for SimArm {
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn physical_limits(&self) -> PhysicalLimits {
        self.limits.clone()
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        self.connected = true;
        self.put_home();
        Ok(())
    }

    fn read_state(&mut self) -> Result<RobotState, DriverError> {
        self.call()?;
        self.advance();
        self.dropped("state")?;
        Ok(RobotState {
            joint_positions: self.data.qpos()[..ARM_JOINTS].to_vec(),
            joint_velocities: self.data.qvel()[..ARM_JOINTS].to_vec(),
            ee_position: Some(self.ee()),
            extra: Vec::new(),
            stamp: self.clock.now(),
        })
    }

    fn send(&mut self, command: &CheckedCommand) -> Result<(), DriverError> {
        self.call()?;
        self.advance();
        self.dropped("command")?;
        if let Some(f) = &self.fault {
            return Err(DriverError::Fault { driver: self.caps.name.clone(), fault: f.clone() });
        }
        let p = self.config.faults.fault_prob;
        if p > 0.0 && self.rng.gen_bool(p) {
            let fault = Fault { message: "simulated joint error (reflex)".into() };
            self.fault = Some(fault.clone());
            return Err(DriverError::Fault { driver: self.caps.name.clone(), fault });
        }
        let q = self.data.qpos()[..ARM_JOINTS].to_vec();
        let target: Vec<f64> = match command.mode() {
            ControlMode::JointPosition => command.values().to_vec(),
            ControlMode::EndEffectorDelta => {
                let dx: Vec<f64> = match command.ee_target() {
                    Some(t) => {
                        let ee = self.ee();
                        (0..3).map(|i| t[i] - ee[i]).collect()
                    }
                    None => command.values().to_vec(),
                };
                self.dls(&dx).iter().zip(&q).map(|(d, q)| q + d).collect()
            }
        };
        if target.len() != ARM_JOINTS {
            return Err(unsupported(format!("expected {ARM_JOINTS} joint targets, found {}", target.len())));
        }
        self.target = target.iter().zip(&self.ranges).map(|(t, r)| t.clamp(r[0], r[1])).collect();
        Ok(())
    }

    fn stop(&mut self) -> Result<(), DriverError> {
        self.advance();
        // hold where the arm is now
        self.target = self.data.qpos()[..ARM_JOINTS].to_vec();
        Ok(())
    }

    fn home(&mut self) -> Result<(), DriverError> {
        self.call()?;
        self.put_home();
        Ok(())
    }

    fn fault(&mut self) -> Option<Fault> {
        self.fault.clone()
    }

    fn clear_fault(&mut self) -> Result<(), DriverError> {
        self.call()?;
        self.fault = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    fn arm(clock: &FakeClock) -> SimArm {
        let mut a = SimArm::new(SimConfig::default(), Arc::new(clock.clone())).unwrap();
        a.connect().unwrap();
        a
    }

    #[test]
    fn dls_solves_the_3x3_system() {
        let a = [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]];
        let x = solve3(a, [1.0, 2.0, 3.0]);
        for r in 0..3 {
            let b: f64 = (0..3).map(|c| a[r][c] * x[c]).sum();
            assert!((b - [1.0, 2.0, 3.0][r]).abs() < 1e-12);
        }
    }

    #[test]
    fn the_pd_loop_tracks_a_joint_target_in_real_time() {
        let clock = FakeClock::new();
        let mut a = arm(&clock);
        let mut t = SimConfig::default().home;
        t[0] += 0.2;
        t[3] += 0.2;
        a.send(&CheckedCommand::new(ControlMode::JointPosition, t.clone(), None)).unwrap();
        // no time passed: the arm has not moved
        assert!((a.read_state().unwrap().joint_positions[0] - SimConfig::default().home[0]).abs() < 1e-12);
        clock.advance(Duration::from_secs(2));
        let s = a.read_state().unwrap();
        for j in [0, 3] {
            assert!((s.joint_positions[j] - t[j]).abs() < 0.02, "joint {j}: {} vs {}", s.joint_positions[j], t[j]);
        }
    }

    #[test]
    fn an_end_effector_delta_moves_the_tip_by_that_delta() {
        let clock = FakeClock::new();
        let mut a = arm(&clock);
        let p0 = a.read_state().unwrap().ee_position.unwrap();
        let dx = [0.0, 0.02, -0.02];
        let target = [p0[0] + dx[0], p0[1] + dx[1], p0[2] + dx[2]];
        a.send(&CheckedCommand::new(ControlMode::EndEffectorDelta, dx.to_vec(), Some(target))).unwrap();
        clock.advance(Duration::from_secs(2));
        let p = a.read_state().unwrap().ee_position.unwrap();
        for i in 0..3 {
            assert!((p[i] - target[i]).abs() < 0.004, "axis {i}: {p:?} vs {target:?} (from {p0:?})");
        }
    }

    #[test]
    fn faults_are_seeded_and_take_time() {
        let clock = FakeClock::new();
        let faults = SimFaults { seed: 3, latency_ms: 5.0, jitter_ms: 10.0, drop_prob: 0.2, ..Default::default() };
        let run = |clock: &FakeClock| {
            let mut a =
                SimArm::new(SimConfig { faults: faults.clone(), ..Default::default() }, Arc::new(clock.clone()))
                    .unwrap();
            a.connect().unwrap();
            let t0 = clock.now();
            let drops = (0..200).filter(|_| a.read_state().is_err()).count();
            (drops, clock.now() - t0)
        };
        let (d1, t1) = run(&clock);
        let (d2, t2) = run(&FakeClock::new());
        assert_eq!((d1, t1), (d2, t2), "same seed, same faults and timing");
        assert!((20..60).contains(&d1), "{d1} of 200 dropped at p = 0.2");
        // 200 calls × (5 + U[0, 10]) ms ≈ 2 s
        assert!(t1 > Duration::from_millis(1600) && t1 < Duration::from_millis(2400), "{t1:?}");
    }
}
