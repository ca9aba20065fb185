//! The `serl-http` driver against a fake SERL robot server on 127.0.0.1 (started here): the
//! envelope holds on the poses the server receives, an HTTP 500 latches a fault that the
//! operator's clear turns into `clearerr`, and a server that stops answering is a lost link.

use o2o_envs::Env;
use o2o_robot::serl::{SerlClient, SerlConfig};
use o2o_robot::{ControlMode, EnvelopeConfig, FakeClock, LoopConfig, ReachTask, RobotEnv, ScriptedOperator};
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HOME: [f64; 3] = [0.5, 0.0, 0.2];

/// The fake server's state and what it received.
#[derive(Default)]
struct Fake {
    pose: [f64; 3],
    poses: Vec<[f64; 7]>,
    fail_next_pose: bool,
    hang_ms: u64,
    clears: u32,
    resets: u32,
}

fn serve(fake: Arc<Mutex<Fake>>) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    fake.lock().unwrap().pose = HOME;
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            let _ = req.as_reader().read_to_string(&mut body);
            let hang = fake.lock().unwrap().hang_ms;
            if hang > 0 {
                std::thread::sleep(Duration::from_millis(hang));
            }
            let mut f = fake.lock().unwrap();
            let (status, text) = match req.url() {
                "/getstate" => {
                    let p = f.pose;
                    let (z6, z3, q, z7) = (vec![0.0; 6], vec![0.0; 3], vec![0.1; 7], vec![0.0; 7]);
                    (200, serde_json::json!({"pose": [p[0], p[1], p[2], 0.0, 0.0, 0.0, 1.0], "vel": z6, "force": z3, "torque": z3, "q": q, "dq": z7, "jacobian": vec![z7.clone(); 6], "gripper_pos": 0.0}).to_string())
                }
                "/pose" if f.fail_next_pose => {
                    f.fail_next_pose = false;
                    (500, "reflex".to_string())
                }
                "/pose" => {
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    let a: Vec<f64> = v["arr"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                    f.poses.push([a[0], a[1], a[2], a[3], a[4], a[5], a[6]]);
                    f.pose = [a[0], a[1], a[2]]; // an ideal impedance controller
                    (200, "Moved".to_string())
                }
                "/jointreset" => {
                    f.resets += 1;
                    f.pose = HOME;
                    (200, "Reset Joint".to_string())
                }
                "/clearerr" => {
                    f.clears += 1;
                    (200, "Clear".to_string())
                }
                _ => (404, String::new()),
            };
            drop(f);
            let _ = req.respond(tiny_http::Response::from_string(text).with_status_code(status));
        }
    });
    format!("http://127.0.0.1:{port}/")
}

fn envelope() -> EnvelopeConfig {
    EnvelopeConfig {
        mode: ControlMode::EndEffectorDelta,
        joint_low: vec![],
        joint_high: vec![],
        workspace_low: Some([0.4, -0.1, 0.1]),
        workspace_high: Some([0.6, 0.1, 0.3]),
        max_step_delta: 0.01,
        max_velocity: 0.2,
        watchdog_periods: 1.5,
        overspeed: None,
        max_missed_deadlines: 3,
        allow_beyond_model: false,
    }
}

#[test]
fn the_envelope_holds_on_a_serl_server_and_its_errors_latch() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let url = serve(fake.clone());
    let clock = FakeClock::new();
    let client = SerlClient::new(SerlConfig { url, timeout_ms: 150, joints: 7 }, Arc::new(clock.clone()));
    let task = ReachTask {
        goal_low: vec![0.45, -0.05, 0.15],
        goal_high: vec![0.55, 0.05, 0.25],
        success_radius: 0.005,
        terminate_on_success: false,
    };
    let op = ScriptedOperator { clears_latches: true, max_clears: 5, ..Default::default() };
    let cfg = LoopConfig { rate_hz: 10.0, max_episode_steps: 1000, deadline_slack: 0.1 };
    let mut env =
        RobotEnv::new("robot-serl", client, envelope(), cfg, task, Box::new(op), Arc::new(clock.clone())).unwrap();
    env.reset(Some(0)).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for _ in 0..150 {
        let a: Vec<f32> = (0..3)
            .map(|_| match rng.gen_range(0..5) {
                0 => f32::NAN,
                1 => 1e9,
                2 => -1e9,
                _ => rng.gen_range(-0.05..0.05),
            })
            .collect();
        env.step(&a).unwrap();
    }
    {
        let f = fake.lock().unwrap();
        assert!(f.poses.len() > 80, "{} poses", f.poses.len());
        let mut prev = HOME;
        for p in &f.poses {
            for i in 0..3 {
                assert!(p[i] >= [0.4, -0.1, 0.1][i] && p[i] <= [0.6, 0.1, 0.3][i], "{p:?} outside the workspace");
                assert!((p[i] - prev[i]).abs() <= 0.01 + 1e-9, "{p:?} moved more than 1 cm from {prev:?}");
            }
            assert_eq!(&p[3..], &[0.0, 0.0, 0.0, 1.0], "orientation held");
            prev = [p[0], p[1], p[2]];
        }
    }
    // An HTTP 500 on a pose: a latched fault; the operator's clear calls clearerr.
    fake.lock().unwrap().fail_next_pose = true;
    let s = env.step(&[0.005, 0.0, 0.0]).unwrap();
    assert_eq!(s.info.get("safety/latched"), Some(1.0));
    assert_eq!(env.counters().driver_faults, 1);
    env.reset(None).unwrap();
    assert_eq!(fake.lock().unwrap().clears, 1);
    // A server that stops answering within the timeout: a lost link.
    env.step(&[0.005, 0.0, 0.0]).unwrap();
    fake.lock().unwrap().hang_ms = 400;
    let s = env.step(&[0.005, 0.0, 0.0]).unwrap();
    assert_eq!(s.info.get("safety/latched"), Some(1.0));
    assert_eq!(env.counters().link_drops, 1);
    fake.lock().unwrap().hang_ms = 0;
    std::thread::sleep(Duration::from_millis(500)); // let the server answer the stale requests
    env.reset(None).unwrap();
    assert!(env.step(&[0.005, 0.0, 0.0]).unwrap().info.get("safety/latched").is_none());
    assert_eq!(env.counters().refused_latched, 0);
}
