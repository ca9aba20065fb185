//! Bad input gets a clear error, never a panic.

use o2o_envs::registry::make_unwrapped_from;
use o2o_envs::{make, make_unwrapped, Env, EnvError};

#[test]
fn wrong_action_length_names_expected_and_found() {
    let mut env = make("Ant-v5").unwrap();
    env.reset(Some(0)).unwrap();
    let err = env.step(&[0.0; 6]).unwrap_err();
    assert!(matches!(err, EnvError::ActionLength { expected: 8, found: 6, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("Ant-v5") && msg.contains('8') && msg.contains('6'), "{msg}");
}

#[test]
fn nan_and_infinite_actions_are_refused() {
    let mut env = make("Hopper-v5").unwrap();
    env.reset(Some(0)).unwrap();
    let err = env.step(&[0.0, f32::NAN, 0.0]).unwrap_err();
    assert!(matches!(err, EnvError::NonFiniteAction { index: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("index 1"), "{err}");
    let err = env.step(&[0.0, 0.0, f32::NEG_INFINITY]).unwrap_err();
    assert!(matches!(err, EnvError::NonFiniteAction { index: 2, .. }), "{err:?}");
    // The env is still usable after a refused action.
    assert!(env.step(&[0.0, 0.0, 0.0]).is_ok());
}

#[test]
fn unknown_id_lists_the_known_ids() {
    let err = make("Hopper-v3").err().expect("Hopper-v3 is not registered");
    let msg = err.to_string();
    assert!(msg.contains("Hopper-v3"), "{msg}");
    for id in o2o_envs::known_ids() {
        assert!(msg.contains(id), "{msg} does not list {id}");
    }
}

#[test]
fn missing_assets_say_how_to_install_them() {
    let empty = tempfile::tempdir().unwrap();
    let err = make_unwrapped_from("Hopper-v5", empty.path()).err().expect("no XML there");
    assert!(matches!(err, EnvError::MissingAsset { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("hopper.xml") && msg.contains("make setup") && msg.contains("gymnasium"), "{msg}");
}

#[test]
fn step_before_reset_and_after_termination_is_an_error() {
    let mut env = make("InvertedPendulum-v5").unwrap();
    assert!(matches!(env.step(&[0.0]), Err(EnvError::NeedsReset { .. })));
    env.reset(Some(1)).unwrap();
    loop {
        if env.step(&[3.0]).unwrap().terminated {
            break;
        }
    }
    let err = env.step(&[0.0]).unwrap_err();
    assert!(matches!(err, EnvError::NeedsReset { .. }), "{err:?}");
    assert!(err.to_string().contains("reset()"), "{err}");
}

#[test]
fn set_state_checks_lengths_and_values() {
    let mut env = make_unwrapped("Hopper-v5").unwrap();
    let err = env.set_state(&[0.0; 5], &[0.0; 6]).unwrap_err().to_string();
    assert!(err.contains("qpos of 6") && err.contains("found 5"), "{err}");
    let mut qpos = vec![0.0; 6];
    qpos[1] = f64::NAN;
    assert!(env.set_state(&qpos, &[0.0; 6]).is_err());
}

#[test]
fn parity_and_bench_refuse_empty_runs() {
    use o2o_envs::parity::{check, ParityOptions};
    let py = std::path::Path::new("/nonexistent/python");
    let script = std::path::Path::new("/nonexistent/gym_parity.py");
    let err =
        check("Hopper-v5", &ParityOptions { steps: 0, ..Default::default() }, py, script).unwrap_err().to_string();
    assert!(err.contains("steps (0)"), "{err}");
    let err = check("Hopper-v5", &ParityOptions { max_episode_steps: Some(0), ..Default::default() }, py, script)
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_episode_steps (Some(0))"), "{err}");
    // A missing interpreter is named, with the fix.
    let err =
        check("Hopper-v5", &ParityOptions { steps: 5, ..Default::default() }, py, script).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/python") && err.contains("make setup"), "{err}");
    let opts = o2o_envs::bench::BenchOptions { steps: 3, num_envs: 2, ..Default::default() };
    let err = o2o_envs::bench::run("Hopper-v5", &opts, py, script).unwrap_err().to_string();
    assert!(err.contains("steps >= 2 x num_envs"), "{err}");
}

/// AntMaze and Adroit build their models from D4RL's and Gymnasium-Robotics' files: another
/// folder of Gymnasium assets cannot stand in for them (issue #25).
#[test]
fn built_models_refuse_a_gym_assets_folder() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["antmaze-umaze-v2", "door-v1"] {
        let err = make_unwrapped_from(id, dir.path()).err().expect("refused").to_string();
        assert!(err.contains(id) && err.contains("not a Gymnasium asset"), "{err}");
    }
}
