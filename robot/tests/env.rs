//! RobotEnv on the fake clock: the loop keeps its rate and measures jitter, a run of missed
//! deadlines latches a fault that only the operator clears, interventions are executed,
//! flagged and recorded, and the recording is a D4RL dataset.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::Env;
use o2o_robot::recording::interventions_path;
use o2o_robot::testing::RecordingDriver;
use o2o_robot::{
    Clock, ControlMode, EnvelopeConfig, FakeClock, LoopConfig, Operator, ReachTask, Recording, RobotEnv,
    ScriptedOperator, Unattended,
};
use std::sync::Arc;
use std::time::Duration;

fn envelope(mode: ControlMode) -> EnvelopeConfig {
    EnvelopeConfig {
        mode,
        joint_low: vec![-1.0; 4],
        joint_high: vec![1.0; 4],
        workspace_low: Some([-0.5; 3]),
        workspace_high: Some([0.5; 3]),
        max_step_delta: 0.05,
        max_velocity: 1.0,
        watchdog_periods: 1.5,
        overspeed: None,
        max_missed_deadlines: 3,
        allow_beyond_model: false,
    }
}

fn task() -> ReachTask {
    ReachTask {
        goal_low: vec![0.2, 0.2, 0.2],
        goal_high: vec![0.3, 0.3, 0.3],
        success_radius: 0.02,
        terminate_on_success: true,
    }
}

fn env(clock: &FakeClock, mode: ControlMode, operator: Box<dyn Operator>) -> RobotEnv<RecordingDriver> {
    let driver = RecordingDriver::new(vec![0.0; 4], Arc::new(clock.clone()));
    let cfg = LoopConfig { rate_hz: 10.0, max_episode_steps: 40, deadline_slack: 0.1 };
    RobotEnv::new("robot-fake", driver, envelope(mode), cfg, task(), operator, Arc::new(clock.clone())).unwrap()
}

#[test]
fn the_loop_keeps_its_rate_and_measures_jitter() {
    let clock = FakeClock::new();
    let mut e = env(&clock, ControlMode::EndEffectorDelta, Box::new(Unattended));
    assert_eq!(e.action_space().high, vec![0.05; 3]);
    assert_eq!(e.observation_space().dim(), 4 + 4 + 3 + 3);
    e.reset(Some(1)).unwrap();
    let t0 = clock.now();
    for _ in 0..10 {
        let s = e.step(&[0.01, 0.0, 0.0]).unwrap();
        assert_eq!(s.info.get("loop/late"), Some(0.0));
    }
    // ten periods of 100 ms on the clock, no jitter
    assert_eq!(clock.now() - t0, Duration::from_millis(1000));
    assert!((e.loop_stats().mean_period_s - 0.1).abs() < 1e-9);
    assert_eq!(e.loop_stats().max_jitter_s, 0.0);
    // a policy taking 5 ms per step: 5 ms of jitter, inside the slack, no missed deadline
    for _ in 0..5 {
        clock.advance(Duration::from_millis(5));
        let s = e.step(&[0.0, 0.01, 0.0]).unwrap();
        assert!((s.info.get("loop/jitter_ms").unwrap() - 5.0).abs() < 1e-6);
    }
    assert_eq!(e.loop_stats().missed_deadlines, 0);
    assert!((e.loop_stats().max_jitter_s - 0.005).abs() < 1e-9);
    // the arm moved by the executed deltas: 10 × 0.01 in x, 5 × 0.01 in y
    let q = e.guard().driver().joints().to_vec();
    assert!((q[0] - 0.1).abs() < 1e-6 && (q[1] - 0.05).abs() < 1e-6, "{q:?}");
}

#[test]
fn missed_deadlines_latch_a_fault_that_only_the_operator_clears() {
    for clears in [false, true] {
        let clock = FakeClock::new();
        let op = ScriptedOperator { clears_latches: clears, max_clears: 1, ..Default::default() };
        let mut e = env(&clock, ControlMode::JointPosition, Box::new(op));
        e.reset(Some(0)).unwrap();
        e.step(&[0.01; 4]).unwrap();
        // the learner stalls the loop for 250 ms before each step: late, late, late → latched
        let mut latched_at = None;
        for k in 0..5 {
            clock.advance(Duration::from_millis(250));
            let s = e.step(&[0.01; 4]).unwrap();
            assert_eq!(s.info.get("loop/late"), Some(1.0));
            if s.info.get("safety/latched") == Some(1.0) {
                assert!(s.truncated && !s.terminated);
                latched_at = Some(k);
                break;
            }
        }
        assert_eq!(latched_at, Some(2), "the third missed deadline in a row latches");
        assert_eq!(e.counters().deadline_faults, 1);
        assert_eq!(e.loop_stats().max_missed_in_a_row, 3);
        let sent = e.guard().driver().received.len();
        assert_eq!(sent, 3, "the latching step sent nothing");
        match e.reset(Some(1)) {
            Ok(_) => {
                assert!(clears);
                assert_eq!(e.counters().latch_clears, 1);
                assert!(e.step(&[0.01; 4]).unwrap().info.get("safety/latched").is_none());
            }
            Err(err) => {
                assert!(!clears);
                assert!(err.to_string().contains("latch"), "{err}");
            }
        }
    }
}

#[test]
fn interventions_are_executed_flagged_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("robot.hdf5");
    let clock = FakeClock::new();
    let op = ScriptedOperator {
        takeover: vec![[2, 4]],
        action: vec![0.0, 0.03, 0.0],
        success_at: vec![6],
        ..Default::default()
    };
    let e = env(&clock, ControlMode::EndEffectorDelta, Box::new(op));
    let (obs_dim, act_dim) = (e.observation_space().dim(), e.action_space().dim());
    let mut e = e.with_recording(Arc::new(std::sync::Mutex::new(Recording::open(&path, obs_dim, act_dim).unwrap())));
    e.reset(Some(3)).unwrap();
    let mut flags = Vec::new();
    for k in 0..7 {
        // the policy proposes huge or NaN actions at times; the envelope clips or rejects them
        let a = match k {
            1 => [f32::NAN, 0.0, 0.0],
            5 => [10.0, 0.0, 0.0],
            _ => [0.01, 0.0, 0.0],
        };
        let s = e.step(&a).unwrap();
        flags.push(s.info.get("intervention").unwrap());
        let executed = e.executed_action().unwrap().to_vec();
        match k {
            1 => assert_eq!(executed, vec![0.0; 3], "a rejected command moved nothing"),
            2..=4 => assert_eq!(executed, vec![0.0, 0.03, 0.0]),
            5 => assert!((executed[0] - 0.05).abs() < 1e-6, "clipped to the window: {executed:?}"),
            6 => assert!(s.terminated && s.info.success == Some(true), "the operator's success label ends the episode"),
            _ => {}
        }
    }
    assert_eq!(flags, vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    assert_eq!(e.loop_stats().interventions, 3);
    assert_eq!(e.counters().rejected_nonfinite, 1);
    drop(e);
    let d = D4rlDataset::read(&path).unwrap();
    assert_eq!(d.len(), 7);
    assert_eq!(d.infos["infos/intervention"].data, vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    assert_eq!(d.infos["infos/label"].data[6], 1.0);
    assert_eq!(d.infos["infos/rejected"].data[1], 1.0);
    assert_eq!(d.infos["infos/clipped"].data[5], 1.0);
    assert_eq!(d.terminals[6], 1.0);
    assert_eq!(&d.actions[6..9], &[0.0, 0.03, 0.0]);
    let i = D4rlDataset::read(&interventions_path(&path)).unwrap();
    assert_eq!(i.len(), 3);
    assert!(i.infos["infos/intervention"].data.iter().all(|v| *v == 1.0));
    // a second env continues the same recording
    let e = env(&clock, ControlMode::EndEffectorDelta, Box::new(Unattended));
    let mut e = e.with_recording(Arc::new(std::sync::Mutex::new(Recording::open(&path, obs_dim, act_dim).unwrap())));
    e.reset(Some(4)).unwrap();
    e.step(&[0.0; 3]).unwrap();
    drop(e);
    assert_eq!(D4rlDataset::read(&path).unwrap().len(), 8);
}

/// Keeps what the loop shows its observer.
struct Collect(Arc<std::sync::Mutex<Vec<o2o_robot::LoopSample>>>);

impl o2o_robot::LoopObserver for Collect {
    fn observe(&mut self, s: &o2o_robot::LoopSample) {
        self.0.lock().unwrap().push(s.clone());
    }
}

#[test]
fn the_observer_sees_states_commands_before_and_after_the_envelope_and_timing() {
    let clock = FakeClock::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let slot: o2o_robot::ObserverSlot = Arc::new(std::sync::Mutex::new(None));
    let op = ScriptedOperator { takeover: vec![[2, 2]], action: vec![0.01, 0.0, 0.0, 0.0], ..Default::default() };
    let mut e = env(&clock, ControlMode::JointPosition, Box::new(op)).with_observer(slot.clone(), 3);
    e.reset(Some(0)).unwrap();
    e.step(&[0.01, 0.0, 0.0, 0.0]).unwrap(); // not shown: no observer in the slot yet
    *slot.lock().unwrap() = Some(Box::new(Collect(seen.clone())));
    e.step(&[0.5, 0.0, 0.0, 0.0]).unwrap(); // clipped to the 0.05 window
    e.step(&[0.0, 0.0, 0.0, 0.0]).unwrap(); // the operator's
    e.step(&[f32::NAN, 0.0, 0.0, 0.0]).unwrap(); // rejected
    let seen = seen.lock().unwrap();
    assert_eq!(seen.iter().map(|s| (s.arm, s.step)).collect::<Vec<_>>(), vec![(3, 1), (3, 2), (3, 3)]);
    let (a, b, c) = (&seen[0], &seen[1], &seen[2]);
    assert_eq!(a.joints, vec!["joint0", "joint1", "joint2", "joint3"]);
    // q was 0.01 after the first step: requested 0.51, sent 0.06 (the window), reached.
    assert!((a.requested[0] - 0.51).abs() < 1e-6 && (a.sent.as_ref().unwrap()[0] - 0.06).abs() < 1e-6, "{a:?}");
    assert!((a.joint_positions[0] - 0.06).abs() < 1e-6);
    assert_eq!((a.info.get("safety/clipped"), a.info.get("intervention")), (Some(1.0), Some(0.0)));
    assert_eq!(a.info.get("loop/period_ms"), Some(100.0));
    assert_eq!(b.info.get("intervention"), Some(1.0));
    assert!((b.requested[0] - 0.07).abs() < 1e-6, "the operator's action, not the policy's: {b:?}");
    assert!(c.requested[0].is_nan() && c.sent.is_none() && c.info.get("safety/rejected") == Some(1.0));
}
