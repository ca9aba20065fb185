//! Adroit as D4RL defines it (issue #25): sizes, horizons, the per-episode model changes, pen's
//! drop termination and the success flags. Parity with Gymnasium-Robotics 1.4.2 (reward sign
//! corrected) is in `tests/parity.rs`. Needs gymnasium-robotics in the venv (`make setup`).

use o2o_envs::{make_mujoco, Env};

#[test]
fn sizes_and_horizons_are_d4rls() {
    for (id, obs, act, limit) in
        [("pen-v1", 45, 24, 100), ("door-v1", 39, 28, 200), ("hammer-v1", 46, 26, 200), ("relocate-v1", 39, 30, 200)]
    {
        let mut env = make_mujoco(id).unwrap();
        assert_eq!(env.observation_space().dim(), obs, "{id}");
        assert_eq!(env.action_space().dim(), act, "{id}");
        assert!(env.action_space().low.iter().all(|v| *v == -1.0) && env.action_space().high.iter().all(|v| *v == 1.0));
        assert_eq!(env.spec().max_episode_steps, Some(limit));
        assert!((env.inner().dt() - 0.01).abs() < 1e-15);
        assert_eq!(env.reset(Some(0)).unwrap().len(), obs);
        let mut n = 0;
        loop {
            let s = env.step(&vec![0.0; act]).unwrap();
            n += 1;
            assert!(s.obs.iter().all(|v| v.is_finite()) && s.reward.is_finite());
            assert!(s.info.success.is_some());
            if s.terminated || s.truncated {
                assert!(s.truncated && n == limit, "{id}: ended at {n} (terminated {})", s.terminated);
                break;
            }
        }
    }
}

#[test]
fn door_moves_in_the_model_each_episode_within_d4rls_box() {
    let mut env = make_mujoco("door-v1").unwrap();
    let frame = env.inner().model().body("frame").unwrap().id;
    let mut seen = Vec::new();
    for k in 0..10 {
        env.reset(if k == 0 { Some(4) } else { None }).unwrap();
        let p = env.inner().model().body_pos()[frame];
        assert!(
            (-0.3..=-0.2).contains(&p[0]) && (0.25..=0.35).contains(&p[1]) && (0.252..=0.35).contains(&p[2]),
            "{p:?}"
        );
        seen.push(p);
    }
    assert!(seen.windows(2).all(|w| w[0] != w[1]));
}

/// Put the door's hinge at 1.5 rad (past the 1.35 success angle), at rest.
fn open_door(env: &mut o2o_envs::wrappers::TimeLimit<o2o_envs::mujoco::MujocoEnv>) {
    let hinge = env.inner().model().joint("door_hinge").unwrap().id;
    let dof = env.inner().model().jnt_dofadr()[hinge] as usize;
    let mut qpos = env.inner().qpos().to_vec();
    qpos[dof] = 1.5;
    let qvel = vec![0.0; qpos.len()];
    env.inner_mut().set_state(&qpos, &qvel).unwrap();
}

#[test]
fn door_open_is_a_success_with_its_bonuses() {
    let mut env = make_mujoco("door-v1").unwrap();
    env.reset(Some(0)).unwrap();
    let closed = env.step(&[0.0; 28]).unwrap();
    assert_eq!(closed.info.success, Some(false));
    open_door(&mut env);
    let open = env.step(&[0.0; 28]).unwrap();
    assert_eq!(open.info.success, Some(true));
    // +2 +8 +10 bonuses, −0.1(1.5 − 1.57)² and the small distance terms.
    assert!(open.reward > 18.0 && open.reward < 20.0, "{}", open.reward);
}

#[test]
fn a_dropped_pen_ends_the_episode_with_the_penalty() {
    let mut env = make_mujoco("pen-v1").unwrap();
    env.reset(Some(1)).unwrap();
    let n = env.inner().qpos().len();
    let mut qpos = env.inner().qpos().to_vec();
    // The pen's slide joint `OBJTx` runs along −z: +0.2 takes its centre from z 0.25 to 0.05.
    let slide = env.inner().model().joint("OBJTx").unwrap().id;
    qpos[env.inner().model().jnt_qposadr()[slide] as usize] += 0.2;
    let qvel = vec![0.0; n];
    env.inner_mut().set_state(&qpos, &qvel).unwrap();
    let s = env.step(&[0.0; 24]).unwrap();
    assert!(s.terminated && !s.truncated);
    assert!(s.reward < -4.0, "{}", s.reward);
    assert_eq!(s.info.success, Some(false));
}

/// The binary ids (Cal-QL / WSRL / RLPD `*-binary-v0`): the dense task's physics and
/// observations with `r = 1[success] − 1`, terminated at the goal, and no pen drop termination.
#[test]
fn binary_ids_pay_success_minus_one_and_end_at_the_goal() {
    for (dense, binary, act, limit) in [
        ("pen-v1", "pen-binary-v0", 24, 100),
        ("door-v1", "door-binary-v0", 28, 200),
        ("relocate-v1", "relocate-binary-v0", 30, 200),
    ] {
        let (mut d, mut b) = (make_mujoco(dense).unwrap(), make_mujoco(binary).unwrap());
        assert_eq!(b.spec().max_episode_steps, Some(limit), "{binary}");
        assert_eq!(b.spec().normalization_family, None, "{binary}: scored by success rate");
        assert_eq!(d.reset(Some(3)).unwrap(), b.reset(Some(3)).unwrap(), "{binary}: same reset");
        // A fixed open-loop action: the pen drops (the dense task terminates, the binary one not).
        let a: Vec<f32> = (0..act).map(|i| ((i as f32) * 0.7).sin()).collect();
        for step in 0..40 {
            let (sd, sb) = (d.step(&a).unwrap(), b.step(&a).unwrap());
            assert_eq!(sd.obs, sb.obs, "{binary} step {step}");
            let ok = sd.info.success.unwrap();
            assert_eq!(sb.info.success, Some(ok));
            assert_eq!(sb.reward, if ok { 0.0 } else { -1.0 }, "{binary} step {step}");
            assert_eq!(sb.terminated, ok, "{binary} step {step}");
            if sd.terminated {
                assert_eq!(dense, "pen-v1", "only the dense pen ends early (a drop)");
                break;
            }
        }
    }
    // At the goal: a binary door opened past 1.35 pays 0 and terminates.
    let mut env = make_mujoco("door-binary-v0").unwrap();
    env.reset(Some(0)).unwrap();
    open_door(&mut env);
    let s = env.step(&[0.0; 28]).unwrap();
    assert_eq!((s.reward, s.terminated, s.info.success), (0.0, true, Some(true)));
}
