//! The whole stack on the MuJoCo arm: RobotEnv over the sim driver on the fake clock reaches
//! goals in both control modes, and injected faults are caught by the safety layer.

mod common;

use o2o_envs::Env;
use o2o_robot::sim::{SimArm, SimConfig, SimFaults};
use o2o_robot::{
    ControlMode, EnvelopeConfig, FakeClock, LoopConfig, ReachTask, RobotEnv, ScriptedOperator, Unattended,
};
use std::sync::Arc;

fn envelope(mode: ControlMode) -> EnvelopeConfig {
    EnvelopeConfig {
        mode,
        joint_low: vec![-1.5, -0.4, -1.4, -2.2, -1.4, -1.0, -1.4],
        joint_high: vec![1.5, 1.3, 1.6, 0.0, 1.4, 0.0, 1.4],
        workspace_low: Some([0.55, -0.8, -0.1]),
        workspace_high: Some([0.8, -0.4, 0.25]),
        max_step_delta: 0.03,
        max_velocity: 0.3,
        watchdog_periods: 1.5,
        overspeed: Some(5.0),
        max_missed_deadlines: 3,
        allow_beyond_model: false,
    }
}

fn ee_task() -> ReachTask {
    ReachTask {
        goal_low: vec![0.6, -0.7, 0.0],
        goal_high: vec![0.75, -0.5, 0.15],
        success_radius: 0.02,
        terminate_on_success: true,
    }
}

fn sim_env(
    clock: &FakeClock,
    mode: ControlMode,
    task: ReachTask,
    faults: SimFaults,
    op: Box<dyn o2o_robot::Operator>,
) -> RobotEnv<SimArm> {
    let arm = SimArm::new(SimConfig { faults, ..Default::default() }, Arc::new(clock.clone())).unwrap();
    let cfg = LoopConfig { rate_hz: 10.0, max_episode_steps: 60, deadline_slack: 0.1 };
    RobotEnv::new("robot-sim", arm, envelope(mode), cfg, task, op, Arc::new(clock.clone())).unwrap()
}

/// a = clip(2 (g − p)): a proportional reaching policy on the observation's tail.
fn reach(obs: &[f32], pos: std::ops::Range<usize>, goal: usize, high: f32) -> Vec<f32> {
    pos.enumerate().map(|(i, k)| (2.0 * (obs[goal + i] - obs[k])).clamp(-high, high)).collect()
}

#[test]
fn the_sim_arm_reaches_goals_in_both_modes() {
    let clock = FakeClock::new();
    let mut e = sim_env(&clock, ControlMode::EndEffectorDelta, ee_task(), SimFaults::default(), Box::new(Unattended));
    let high = e.action_space().high[0];
    for seed in 0..3 {
        let mut obs = e.reset(Some(seed)).unwrap();
        let mut steps = 0;
        loop {
            let s = e.step(&reach(&obs, 14..17, 17, high)).unwrap();
            steps += 1;
            obs = s.obs.clone();
            if s.done() {
                assert!(s.terminated && s.info.success == Some(true), "seed {seed}: not reached in {steps} steps");
                break;
            }
        }
    }
    assert_eq!(e.loop_stats().missed_deadlines, 0);
    // joint mode: reach joint goals for the first two joints
    let task = ReachTask {
        goal_low: vec![-0.3, 0.2],
        goal_high: vec![0.3, 0.6],
        success_radius: 0.03,
        terminate_on_success: true,
    };
    let mut e = sim_env(&clock, ControlMode::JointPosition, task, SimFaults::default(), Box::new(Unattended));
    let high = e.action_space().high[0];
    let mut obs = e.reset(Some(5)).unwrap();
    let goal_at = e.observation_space().dim() - 2;
    let mut done = false;
    for _ in 0..60 {
        let mut a = reach(&obs, 0..2, goal_at, high);
        a.extend([0.0; 5]);
        let s = e.step(&a).unwrap();
        obs = s.obs;
        if s.terminated {
            done = true;
            break;
        }
    }
    assert!(done, "joint goal not reached");
}

#[test]
fn injected_faults_are_held_by_the_envelope() {
    let clock = FakeClock::new();
    let faults = SimFaults {
        seed: 11,
        latency_ms: 2.0,
        jitter_ms: 8.0,
        drop_prob: 0.05,
        fault_prob: 0.01,
        link_drop_prob: 0.005,
        link_down_calls: 3,
    };
    let op = ScriptedOperator { clears_latches: true, max_clears: 100, ..Default::default() };
    let task = ReachTask { terminate_on_success: false, ..ee_task() };
    let mut e = sim_env(&clock, ControlMode::EndEffectorDelta, task, faults, Box::new(op));
    let mut latched = 0;
    let mut episodes = 0;
    while e.loop_stats().steps < 600 {
        let mut obs = match e.reset(Some(episodes)) {
            Ok(o) => o,
            // the link can be down at reset too: the operator tries again next time
            Err(err) => {
                assert!(err.to_string().contains("link"), "{err}");
                episodes += 1;
                continue;
            }
        };
        episodes += 1;
        loop {
            // a reckless policy: always the biggest move, sometimes NaN
            let a = if e.loop_stats().steps % 17 == 0 { vec![f32::NAN; 3] } else { reach(&obs, 14..17, 17, 1e3) };
            let s = e.step(&a).unwrap();
            obs = s.obs.clone();
            if s.info.get("safety/latched") == Some(1.0) {
                latched += 1;
            }
            if s.done() {
                break;
            }
        }
    }
    let c = e.counters();
    assert!(c.driver_faults + c.link_drops > 0 && latched > 0, "faults were injected: {c:?}");
    assert!(c.dropped_commands > 0 && c.rejected_nonfinite > 0 && c.clipped_commands > 0, "{c:?}");
    let still = u64::from(e.guard().latch().is_some());
    assert_eq!(
        c.latch_clears + still,
        c.driver_faults + c.link_drops + c.deadline_faults,
        "every latch cleared once, by the operator: {c:?}"
    );
    assert!(c.refused_latched == 0, "no command reached a latched arm: {c:?}");
    // jitter measured from the injected latency: up to ~2 × (2 + 8) ms per period
    let st = e.loop_stats();
    assert!(st.max_jitter_s > 0.002 && st.max_jitter_s < 0.03, "{st:?}");
    // the arm never left the workspace box (plus the tracking overshoot of the PD loop)
    let p = e.guard().last_state().unwrap().ee_position.unwrap();
    assert!(p[0] > 0.5 && p[0] < 0.85 && p[1] > -0.85 && p[1] < -0.35, "{p:?}");
}

/// What pusher.xml says the arm can do: its joint ranges, a top joint speed of |gear · ctrl| /
/// damping = 2 / 0.1 = 20 rad/s, a reach of 0.1 + 0.4 + 0.321 m around the shoulder at
/// (0, −0.6, 0), and a tip speed of at most Σ joint speeds × reach.
#[test]
fn the_sim_arm_knows_its_model_limits() {
    use o2o_robot::Robot;
    let clock = FakeClock::new();
    let arm = SimArm::new(SimConfig::default(), Arc::new(clock.clone())).unwrap();
    let l = arm.physical_limits();
    assert_eq!(l.source, "pusher.xml");
    assert_eq!(l.joint_range.len(), 7);
    assert!((l.joint_range[3][0] + 2.3213).abs() < 1e-9 && l.joint_range[3][1] == 0.0, "elbow {:?}", l.joint_range[3]);
    assert!((l.joint_speed.unwrap() - 20.0).abs() < 1e-9, "{:?}", l.joint_speed);
    let (centre, radius) = l.reach.unwrap();
    assert!((radius - 0.821).abs() < 1e-9 && centre == [0.0, -0.6, 0.0], "{centre:?} {radius}");
    assert!((l.ee_speed.unwrap() - (2.0 + 2.0 + 5.0 * 20.0) * 0.821).abs() < 1e-9, "{:?}", l.ee_speed);
}

/// The probe's impossible envelopes (issue 47, C3) are refused before the arm connects, naming
/// the key, the value and the model's limit: joint bounds of ±10 rad, a 5 rad window, a speed
/// of 100, a ±100 m workspace. `allow_beyond_model` lets each through with a warning.
#[test]
fn envelopes_beyond_the_model_are_refused_unless_allowed() {
    let clock = FakeClock::new();
    let arm = || SimArm::new(SimConfig::default(), Arc::new(clock.clone())).unwrap();
    let joint = envelope(ControlMode::JointPosition);
    let ee = envelope(ControlMode::EndEffectorDelta);
    let cases = [
        (
            EnvelopeConfig { joint_low: vec![-10.0; 7], joint_high: vec![10.0; 7], ..joint.clone() },
            "joint_low[0]",
            "-10",
            "-2.2854",
        ),
        (EnvelopeConfig { max_step_delta: 5.0, ..joint.clone() }, "max_step_delta", "found 5", "4.0000"),
        (EnvelopeConfig { max_velocity: 100.0, ..joint.clone() }, "max_velocity", "found 100", "20.0000"),
        (EnvelopeConfig { max_velocity: 100.0, ..ee.clone() }, "max_velocity", "found 100", "85.3840"),
        (
            EnvelopeConfig { workspace_low: Some([-100.0; 3]), workspace_high: Some([100.0; 3]), ..ee.clone() },
            "workspace_low[0]",
            "found -100",
            "0.8210",
        ),
        (EnvelopeConfig { max_step_delta: 2.0, ..ee.clone() }, "max_step_delta", "found 2", "1.6420"),
    ];
    for (e, key, value, limit) in cases {
        let (k, msg) = common::refusal(arm(), e.clone(), &clock);
        assert_eq!(k, key, "{msg}");
        assert!(msg.contains(value) && msg.contains(limit) && msg.contains("pusher.xml"), "{msg}");
        assert!(msg.contains("allow_beyond_model"), "the way out is named: {msg}");
        let g = o2o_robot::Guarded::connect(
            arm(),
            EnvelopeConfig { allow_beyond_model: true, ..e },
            std::time::Duration::from_millis(100),
            Arc::new(clock.clone()),
        )
        .unwrap_or_else(|e| panic!("allowed, yet refused: {e}"));
        assert!(!g.warnings().is_empty() && g.warnings()[0].contains(key), "{:?}", g.warnings());
    }
    // The shipped envelopes fit the model and warn about nothing.
    for mode in [ControlMode::JointPosition, ControlMode::EndEffectorDelta] {
        let g = o2o_robot::Guarded::connect(
            arm(),
            envelope(mode),
            std::time::Duration::from_millis(100),
            Arc::new(clock.clone()),
        )
        .unwrap();
        assert!(g.warnings().is_empty(), "{:?}", g.warnings());
    }
}
