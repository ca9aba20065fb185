//! The safety layer's guarantees, on the recording fake driver: adversarial commands never
//! leave the envelope, a stalled policy stops the arm within 2 periods, the e-stop latches.

use o2o_robot::testing::RecordingDriver;
use o2o_robot::{Clock, ControlMode, EnvelopeConfig, FakeClock, GuardError, Guarded, Latch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Duration;

const PERIOD: Duration = Duration::from_millis(100);

fn joint_envelope() -> EnvelopeConfig {
    EnvelopeConfig {
        mode: ControlMode::JointPosition,
        joint_low: vec![-1.0, -0.5, 0.0, -2.0],
        joint_high: vec![1.0, 0.5, 2.0, 2.0],
        workspace_low: None,
        workspace_high: None,
        max_step_delta: 0.05,
        max_velocity: 0.3, // × 0.1 s = 0.03 per step: tighter than max_step_delta
        watchdog_periods: 1.5,
        overspeed: None,
        max_missed_deadlines: 3,
        allow_beyond_model: false,
    }
}

fn ee_envelope() -> EnvelopeConfig {
    EnvelopeConfig {
        mode: ControlMode::EndEffectorDelta,
        workspace_low: Some([-0.3, -0.2, 0.1]),
        workspace_high: Some([0.3, 0.2, 0.5]),
        max_step_delta: 0.01,
        max_velocity: 1.0,
        ..joint_envelope()
    }
}

/// One adversarial number: huge, NaN, ±∞, tiny, sign flips of the last value, or ordinary.
fn adversarial(rng: &mut ChaCha8Rng, last: f64) -> f64 {
    match rng.gen_range(0..10) {
        0 => f64::NAN,
        1 => {
            if rng.gen() {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            }
        }
        2 => rng.gen_range(-1e30..1e30),
        3 => -last * 1e3,
        4 => f64::MAX * if rng.gen() { 1.0 } else { -1.0 },
        5 => f64::MIN_POSITIVE,
        _ => rng.gen_range(-3.0..3.0),
    }
}

fn fake(start: Vec<f64>, clock: &FakeClock) -> RecordingDriver {
    let mut d = RecordingDriver::new(start, Arc::new(clock.clone()));
    d.tracking = 0.7; // a servo that lags its targets
    d
}

#[test]
fn a_million_adversarial_commands_never_leave_the_envelope() {
    let clock = FakeClock::new();
    let clock_dyn: Arc<dyn Clock> = Arc::new(clock.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // joint-position mode: 600k commands; end-effector mode: 400k.
    let mut g =
        Guarded::connect(fake(vec![0.0, 0.1, 1.0, -1.0], &clock), joint_envelope(), PERIOD, clock_dyn.clone()).unwrap();
    let w = g.step_window();
    assert!((w - 0.03).abs() < 1e-12, "window {w}");
    let (e, mut last) = (joint_envelope(), vec![0.0; 4]);
    let mut expected_rejections = 0;
    for _ in 0..600_000 {
        let cmd: Vec<f64> = (0..4).map(|i| adversarial(&mut rng, last[i])).collect();
        expected_rejections += u64::from(cmd.iter().any(|v| !v.is_finite()));
        last = cmd.clone();
        clock.advance(PERIOD);
        g.read_state().unwrap();
        g.command(&cmd).unwrap();
    }
    for r in &g.driver().received {
        for i in 0..4 {
            let v = r.values[i];
            assert!(
                v.is_finite() && v >= e.joint_low[i] && v <= e.joint_high[i],
                "joint {i} target {v} outside the bounds"
            );
            assert!((v - r.measured[i]).abs() <= w + 1e-12, "joint {i} moved {} > {w}", v - r.measured[i]);
        }
    }
    let c = g.counters().clone();
    assert_eq!(c.commands, 600_000);
    assert_eq!(c.rejected_nonfinite, expected_rejections);
    assert_eq!(c.sent, 600_000 - expected_rejections);
    assert_eq!(g.driver().received.len() as u64, c.sent);
    assert!(c.clipped_commands > c.sent / 2, "adversarial commands are mostly clipped: {c:?}");

    let mut g = Guarded::connect(fake(vec![0.0, 0.0, 0.3, 0.0], &clock), ee_envelope(), PERIOD, clock_dyn).unwrap();
    let (e, w) = (ee_envelope(), g.step_window());
    for _ in 0..400_000 {
        let cmd: Vec<f64> = (0..3).map(|i| adversarial(&mut rng, last[i])).collect();
        last = cmd.clone();
        clock.advance(PERIOD);
        g.read_state().unwrap();
        g.command(&cmd).unwrap();
    }
    let (lo, hi) = (e.workspace_low.unwrap(), e.workspace_high.unwrap());
    assert_eq!(g.driver().received.len() as u64, g.counters().sent);
    assert!(g.counters().sent > 180_000 && g.counters().rejected_nonfinite > 180_000, "{:?}", g.counters());
    for r in &g.driver().received {
        let t = r.ee_target.expect("an end-effector command carries its target");
        for i in 0..3 {
            assert!(t[i].is_finite() && t[i] >= lo[i] && t[i] <= hi[i], "axis {i} target {} outside the box", t[i]);
            assert!(r.values[i].abs() <= w + 1e-12, "axis {i} delta {}", r.values[i]);
            assert!((t[i] - r.measured[i] - r.values[i]).abs() < 1e-12);
        }
    }
}

#[test]
fn a_stalled_policy_stops_the_arm_within_two_periods() {
    let clock = FakeClock::new();
    let mut g =
        Guarded::connect(fake(vec![0.0; 4], &clock), joint_envelope(), PERIOD, Arc::new(clock.clone())).unwrap();
    // A few fresh commands, the watchdog polling four times a period: no stop.
    for k in 0..5 {
        g.command(&[0.01 * k as f64, 0.0, 0.5, 0.0]).unwrap();
        for _ in 0..4 {
            clock.advance(PERIOD / 4);
            assert!(!g.poll(), "stopped while commands were fresh");
        }
    }
    assert!(g.driver().stops.is_empty());
    // The policy stalls right after a command.
    g.command(&[0.05, 0.0, 0.5, 0.0]).unwrap();
    let last = clock.now();
    while clock.now() < last + PERIOD * 3 {
        clock.advance(PERIOD / 4);
        g.poll();
    }
    let stops = &g.driver().stops;
    assert_eq!(stops.len(), 1, "one stop: {stops:?}");
    let after = stops[0] - last;
    assert!(after > PERIOD.mul_f64(1.5) && after <= PERIOD * 2, "stopped {after:?} after the last command");
    assert_eq!(g.counters().watchdog_stops, 1);
    // Not latched: a fresh command moves the arm again.
    assert!(g.latch().is_none());
    assert!(g.command(&[0.05, 0.0, 0.5, 0.0]).unwrap().sent.is_some());

    // A policy that only produces NaN sends nothing fresh: the watchdog stops it too.
    let t0 = clock.now();
    for _ in 0..8 {
        clock.advance(PERIOD / 4);
        assert!(g.command(&[f64::NAN, 0.0, 0.5, 0.0]).unwrap().rejected);
        g.poll();
    }
    assert_eq!(g.counters().watchdog_stops, 2);
    assert!(*g.driver().stops.last().unwrap() - t0 <= PERIOD * 2);
}

#[test]
fn the_watchdog_rejects_timeouts_it_could_not_keep() {
    let clock = FakeClock::new();
    let e = EnvelopeConfig { watchdog_periods: 2.5, ..joint_envelope() };
    let err = Guarded::connect(fake(vec![0.0; 4], &clock), e, PERIOD, Arc::new(clock.clone())).err().unwrap();
    assert!(err.to_string().contains("watchdog_periods"), "{err}");
    let e = EnvelopeConfig { joint_low: vec![0.0; 3], ..joint_envelope() };
    let err = Guarded::connect(fake(vec![0.0; 4], &clock), e, PERIOD, Arc::new(clock.clone())).err().unwrap();
    assert!(err.to_string().contains("joint_low: expected 4 numbers"), "{err}");
    // starting outside the bounds is refused (the layer never makes that big move itself)
    let err = Guarded::connect(fake(vec![0.0, 0.9, 1.0, 0.0], &clock), joint_envelope(), PERIOD, Arc::new(clock))
        .err()
        .unwrap();
    assert!(matches!(err, GuardError::StartOutside { .. }), "{err}");
}

#[test]
fn the_estop_latches_until_an_operator_clears_it() {
    let clock = FakeClock::new();
    let mut g =
        Guarded::connect(fake(vec![0.0; 4], &clock), joint_envelope(), PERIOD, Arc::new(clock.clone())).unwrap();
    g.command(&[0.02, 0.0, 0.5, 0.0]).unwrap();
    g.estop("operator pressed space");
    let sent_before = g.driver().received.len();
    for _ in 0..10 {
        clock.advance(PERIOD);
        assert!(matches!(g.command(&[0.0, 0.0, 0.5, 0.0]), Err(GuardError::Latched(Latch::EStop { .. }))));
        g.poll();
    }
    // neither homing nor a second e-stop nor time clears it
    assert!(matches!(g.home(), Err(GuardError::Latched(_))));
    g.estop("again");
    assert_eq!(g.driver().received.len(), sent_before);
    assert_eq!(g.counters().refused_latched, 10);
    assert_eq!(g.counters().estops, 1);
    g.clear_latch().unwrap();
    assert_eq!(g.counters().latch_clears, 1);
    assert!(g.command(&[0.0, 0.0, 0.5, 0.0]).unwrap().sent.is_some());
}

#[test]
fn faults_and_a_lost_link_latch_and_stop() {
    let clock = FakeClock::new();
    let d = fake(vec![0.0; 4], &clock);
    let inject = d.injector();
    let mut g = Guarded::connect(d, joint_envelope(), PERIOD, Arc::new(clock.clone())).unwrap();
    // A dropped command is counted and not retried.
    inject.set(|i| i.drop_next = 2);
    assert!(g.command(&[0.5, 0.0, 0.5, 0.0]).unwrap().dropped);
    assert!(g.command(&[0.5, 0.0, 0.5, 0.0]).unwrap().dropped);
    assert!(g.command(&[0.5, 0.0, 0.5, 0.0]).unwrap().sent.is_some());
    assert_eq!(g.counters().dropped_commands, 2);

    // A driver fault: the watchdog's poll latches it and stops the arm.
    inject.set(|i| i.fault = Some(o2o_robot::Fault { message: "overload on joint 2".into() }));
    assert!(g.poll());
    assert!(matches!(g.latch(), Some(Latch::DriverFault { .. })));
    assert!(matches!(g.command(&[0.0, 0.0, 0.5, 0.0]), Err(GuardError::Latched(_))));
    assert_eq!((g.counters().driver_faults, g.driver().stops.len()), (1, 1));
    g.clear_latch().unwrap(); // the fake clears its fault on request

    // A lost link while commanding: latched, a stop attempted, cleared only once it is back.
    inject.set(|i| i.link_down = true);
    assert!(matches!(g.command(&[0.0, 0.0, 0.5, 0.0]), Err(GuardError::Driver(_))) || g.latch().is_some());
    clock.advance(PERIOD * 2);
    let _ = g.command(&[0.0, 0.0, 0.5, 0.0]);
    assert!(matches!(g.latch(), Some(Latch::LinkLost { .. })), "{:?}", g.latch());
    assert_eq!(g.counters().link_drops, 1);
    assert!(g.clear_latch().is_err(), "cleared while the link is still down");
    inject.set(|i| i.link_down = false);
    g.clear_latch().unwrap();
    assert!(g.command(&[0.0, 0.0, 0.5, 0.0]).unwrap().sent.is_some());
}
