//! The whole stack on the MuJoCo arm: RobotEnv over the sim driver on the fake clock reaches
//! goals in both control modes, and injected faults are caught by the safety layer.

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
