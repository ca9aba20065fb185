//! Parity with Gymnasium 1.4.0 for every id (short runs that cross terminations, time-limit
//! truncations and resets). Needs the set-up's Python (`O2O_PYTHON`, written into the build
//! environment by `make setup`); without it these tests FAIL, they do not skip.

use o2o_envs::parity::{check, ParityOptions};
use std::path::PathBuf;

fn python() -> PathBuf {
    let p = std::env::var_os("O2O_PYTHON")
        .map(PathBuf::from)
        .or_else(|| option_env!("O2O_PYTHON").map(PathBuf::from))
        .expect("O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml), or set O2O_PYTHON to a Python with gymnasium[mujoco]==1.4.0");
    assert!(p.exists(), "O2O_PYTHON={} does not exist: run `make setup`", p.display());
    p
}

fn script() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../scripts/gym_parity.py")
}

fn assert_parity(id: &str, steps: usize, max_episode_steps: usize) -> o2o_envs::parity::ParityReport {
    let opts = ParityOptions { steps, seed: 5, max_episode_steps: Some(max_episode_steps) };
    let r = check(id, &opts, &python(), &script()).unwrap_or_else(|e| panic!("{id}: {e}"));
    eprintln!(
        "{id}: obs {:.2e} reward {:.2e} settled {:?} over {} steps",
        r.max_obs_abs_diff, r.max_reward_abs_diff, r.max_initial_state_diff, r.steps
    );
    assert!(r.passed(), "{id}: parity failed: {r:#?}");
    assert_eq!(r.steps, steps);
    assert!(r.episodes >= 2, "{id}: the run crossed no reset: {r:#?}");
    r
}

#[test]
fn inverted_pendulum_v5() {
    assert_parity("InvertedPendulum-v5", 300, 100);
}

#[test]
fn half_cheetah_v5() {
    assert_parity("HalfCheetah-v5", 300, 120);
}

#[test]
fn hopper_v5() {
    assert_parity("Hopper-v5", 300, 150);
}

#[test]
fn walker2d_v5() {
    assert_parity("Walker2d-v5", 300, 150);
}

#[test]
fn ant_v5() {
    assert_parity("Ant-v5", 300, 120);
}

#[test]
fn halfcheetah_v2() {
    assert_parity("halfcheetah-v2", 300, 120);
}

#[test]
fn hopper_v2() {
    assert_parity("hopper-v2", 300, 150);
}

#[test]
fn walker2d_v2() {
    assert_parity("walker2d-v2", 300, 150);
}

#[test]
fn ant_v2() {
    assert_parity("ant-v2", 300, 120);
}

/// AntMaze against D4RL 1.1's own code (`scripts/d4rl_antmaze_parity.py`): also goal hits (odd
/// episodes place the goal near the start) and D4RL's own start/goal distribution.
fn assert_antmaze_parity(id: &str, steps: usize, max_episode_steps: usize) {
    let r = assert_parity(id, steps, max_episode_steps);
    assert!(r.reference.contains("D4RL 1.1"), "{}", r.reference);
    assert!(
        r.episodes >= 3 && r.terminations >= 1 && r.truncations >= 1,
        "{id}: goal hits and time limits not both exercised: {r:#?}"
    );
}

#[test]
fn antmaze_umaze_v2() {
    assert_antmaze_parity("antmaze-umaze-v2", 400, 60);
}

#[test]
fn antmaze_medium_and_large_v2() {
    assert_antmaze_parity("antmaze-medium-play-v2", 200, 40);
    assert_antmaze_parity("antmaze-large-diverse-v2", 200, 40);
}

/// Adroit against Gymnasium-Robotics 1.4.2 with D4RL's reward sign and pen-drop termination.
fn assert_adroit_parity(id: &str, steps: usize, max_episode_steps: usize) {
    let r = assert_parity(id, steps, max_episode_steps);
    assert!(r.reference.contains("Gymnasium-Robotics 1.4.2"), "{}", r.reference);
    assert!(r.truncations >= 1, "{id}: no time limit was crossed: {r:#?}");
}

#[test]
fn adroit_pen_and_door_v1() {
    assert_adroit_parity("pen-v1", 120, 40);
    assert_adroit_parity("door-v1", 120, 40);
}

/// The binary ids against the same oracle with `1[success] − 1` and termination at the goal.
/// Random actions never reach a goal, so this pins the shared physics, observations, the −1
/// reward and the absence of pen-drop termination; the goal step itself is
/// `tests/adroit.rs::binary_ids_pay_success_minus_one_and_end_at_the_goal`.
#[test]
fn adroit_binary_v0() {
    for id in ["pen-binary-v0", "door-binary-v0", "relocate-binary-v0"] {
        let r = assert_parity(id, 60, 30);
        assert!(r.reference.contains("binary reward"), "{}", r.reference);
        assert!(r.truncations >= 1, "{id}: no time limit was crossed: {r:#?}");
    }
}

#[test]
fn adroit_hammer_and_relocate_v1() {
    assert_adroit_parity("hammer-v1", 120, 40);
    assert_adroit_parity("relocate-v1", 120, 40);
}

// Fetch (gymnasium-robotics 1.4.2 on MuJoCo 3.17, through the joint-type shim of the script):
// two 50-step episodes each, plus the settled start state of `_env_setup`.

#[test]
fn fetch_reach_v4() {
    assert_parity("FetchReach-v4", 100, 50);
}

#[test]
fn fetch_push_v4() {
    assert_parity("FetchPush-v4", 100, 50);
}

#[test]
fn fetch_pick_and_place_v4() {
    assert_parity("FetchPickAndPlace-v4", 100, 50);
}

#[test]
fn fetch_push_dense_v4() {
    assert_parity("FetchPushDense-v4", 100, 50);
}

fn imaginebench_script() -> PathBuf {
    script().with_file_name("imaginebench_parity.py")
}

/// ImagineBench's instruction tasks against the Python oracle of the documented rules: every
/// level's tasks in turn (round-robin resets), short episodes that end on success (the jumps
/// after ~5 steps) or at the time limit.
#[test]
fn imaginebench_levels() {
    for (level, steps, limit) in [("real", 400, 120), ("easy", 240, 110), ("hard", 420, 205), ("all", 300, 60)] {
        let id = format!("imaginebench-mujoco-{level}-v0");
        let opts = ParityOptions { steps, seed: 3, max_episode_steps: Some(limit) };
        let r = check(&id, &opts, &python(), &imaginebench_script()).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(r.passed(), "{id}: parity failed: {r:#?}");
        assert_eq!(r.steps, steps);
        assert!(r.episodes >= 2, "{id}: {r:#?}");
        if level == "real" {
            assert!(r.terminations >= 1, "random actions should complete some jump: {r:#?}");
        }
    }
}
