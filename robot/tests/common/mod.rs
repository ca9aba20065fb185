//! What the servo-bus fake tests share: a two-joint arm's env through the safety layer, the
//! adversarial policy, and the check that every goal a servo received was inside the envelope.

#![allow(dead_code)]

use o2o_envs::Env;
use o2o_robot::{ControlMode, EnvelopeConfig, FakeClock, LoopConfig, ReachTask, Robot, RobotEnv, ScriptedOperator};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Joint bounds of the test envelope (rad).
pub const BOUND: f64 = 0.8;
/// Step window of the test envelope (rad).
pub const WINDOW: f64 = 0.05;

/// A two-joint arm in joint-position mode, bounds ±[`BOUND`], window [`WINDOW`], 10 Hz on a
/// fake clock; the scripted operator clears up to three latches.
pub fn two_joint_env<R: Robot + 'static>(id: &str, arm: R, clock: &FakeClock) -> RobotEnv<R> {
    let task = ReachTask {
        goal_low: vec![0.3, 0.3],
        goal_high: vec![0.3, 0.3],
        success_radius: 0.001,
        terminate_on_success: false,
    };
    let op = ScriptedOperator { clears_latches: true, max_clears: 3, ..Default::default() };
    let cfg = LoopConfig { rate_hz: 10.0, max_episode_steps: 1000, deadline_slack: 0.1 };
    RobotEnv::new(id, arm, two_joint_envelope(), cfg, task, Box::new(op), Arc::new(clock.clone())).unwrap()
}

/// The envelope of [`two_joint_env`].
pub fn two_joint_envelope() -> EnvelopeConfig {
    EnvelopeConfig {
        mode: ControlMode::JointPosition,
        joint_low: vec![-BOUND, -BOUND],
        joint_high: vec![BOUND, BOUND],
        workspace_low: None,
        workspace_high: None,
        max_step_delta: WINDOW,
        max_velocity: 1.0,
        watchdog_periods: 1.5,
        overspeed: None,
        max_missed_deadlines: 3,
        allow_beyond_model: false,
    }
}

/// A guard's refusal of `envelope` for `arm` (10 Hz): the `[envelope]` key and the message
/// (panics when the envelope is accepted or refused for another reason).
#[allow(dead_code)]
pub fn refusal<R: Robot>(arm: R, envelope: EnvelopeConfig, clock: &FakeClock) -> (String, String) {
    match o2o_robot::Guarded::connect(arm, envelope, std::time::Duration::from_millis(100), Arc::new(clock.clone())) {
        Err(e) => match &e {
            o2o_robot::GuardError::Config { key, .. } => (key.clone(), e.to_string()),
            _ => panic!("refused for another reason: {e}"),
        },
        Ok(_) => panic!("accepted"),
    }
}

/// `steps` adversarial actions (NaN, ±10⁶, small moves) from `seed`.
pub fn adversarial_steps<R: Robot + 'static>(env: &mut RobotEnv<R>, steps: usize, seed: u64) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..steps {
        let a: Vec<f32> = (0..2)
            .map(|_| match rng.gen_range(0..5) {
                0 => f32::NAN,
                1 => 1e6,
                2 => -1e6,
                _ => rng.gen_range(-0.1..0.1),
            })
            .collect();
        env.step(&a).unwrap();
    }
}

/// Every `(goal, present)` pair, in radians, was inside the bounds and within the window.
pub fn assert_inside(moves: &[(u8, f64, f64)]) {
    let tick = std::f64::consts::TAU / 4096.0;
    assert!(moves.len() > 100, "{} goals", moves.len());
    for (id, q, q0) in moves {
        assert!((-BOUND - tick..=BOUND + tick).contains(q), "servo {id}: goal {q} rad outside the bounds");
        assert!((q - q0).abs() <= WINDOW + tick, "servo {id}: moved {} rad in one step", q - q0);
    }
}
