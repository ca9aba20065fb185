//! Task shapes and the v5-vs-v2 semantics that parity alone would not single out.

use o2o_envs::mujoco::GeomKind;
use o2o_envs::{make, make_unwrapped, Env};

#[test]
fn observation_and_action_sizes_match_gymnasium_and_d4rl() {
    let expected = [
        ("HalfCheetah-v5", 17, 6),
        ("Hopper-v5", 11, 3),
        ("Walker2d-v5", 17, 6),
        ("Ant-v5", 105, 8),
        ("InvertedPendulum-v5", 4, 1),
        ("halfcheetah-v2", 17, 6),
        ("hopper-v2", 11, 3),
        ("walker2d-v2", 17, 6),
        ("ant-v2", 111, 8),
    ];
    for (id, obs, act) in expected {
        let mut env = make(id).unwrap();
        assert_eq!(env.observation_space().dim(), obs, "{id}");
        assert_eq!(env.action_space().dim(), act, "{id}");
        assert_eq!(env.reset(Some(0)).unwrap().len(), obs, "{id}");
        assert_eq!(env.spec().max_episode_steps, Some(1000), "{id}");
    }
}

#[test]
fn v5_charges_the_unclipped_action_and_v2_the_clipped_one() {
    // ctrl cost = 0.1 · ‖a‖²: a = 2·1 over 6 dims gives 2.4 (v5) and, clipped to 1, 0.6 (v2).
    for (id, cost) in [("HalfCheetah-v5", 2.4), ("halfcheetah-v2", 0.6)] {
        let mut env = make(id).unwrap();
        env.reset(Some(0)).unwrap();
        let s = env.step(&[2.0; 6]).unwrap();
        assert!((s.info.get("reward_ctrl").unwrap() + cost).abs() < 1e-9, "{id}: {:?}", s.info);
    }
}

#[test]
fn ant_v2_pads_27_state_numbers_with_84_zeros_and_has_no_contact_cost() {
    let mut env = make("ant-v2").unwrap();
    env.reset(Some(3)).unwrap();
    for _ in 0..20 {
        let s = env.step(&[0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5]).unwrap();
        assert!(s.obs[27..].iter().all(|v| *v == 0.0));
        assert_eq!(s.info.get("reward_contact"), Some(0.0));
    }
    // v5 sees real contact forces once the legs touch the floor.
    let mut env = make("Ant-v5").unwrap();
    env.reset(Some(3)).unwrap();
    let mut any_force = false;
    for _ in 0..20 {
        let s = env.step(&[0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5]).unwrap();
        any_force |= s.obs[27..].iter().any(|v| *v != 0.0);
    }
    assert!(any_force, "Ant-v5 never saw a contact force");
}

#[test]
fn healthy_reward_on_the_terminal_step_is_v2_only() {
    for (id, terminal_survive) in [("Hopper-v5", 0.0), ("hopper-v2", 1.0), ("Walker2d-v5", 0.0), ("walker2d-v2", 1.0)] {
        let mut env = make(id).unwrap();
        let dim = env.action_space().dim();
        env.reset(Some(0)).unwrap();
        let s = loop {
            let s = env.step(&vec![1.0; dim]).unwrap();
            if s.terminated || s.truncated {
                break s;
            }
            assert_eq!(s.info.get("reward_survive"), Some(1.0));
        };
        assert!(s.terminated, "{id} did not fall under full torque");
        assert_eq!(s.info.get("reward_survive"), Some(terminal_survive), "{id}");
    }
}

#[test]
fn walker_v2_loads_the_d4rl_model_with_different_foot_friction() {
    let v5 = make_unwrapped("Walker2d-v5").unwrap();
    let v2 = make_unwrapped("walker2d-v2").unwrap();
    let friction = |e: &o2o_envs::mujoco::MujocoEnv| e.model().geom_friction().iter().map(|f| f[0]).collect::<Vec<_>>();
    assert_ne!(friction(&v5), friction(&v2));
    assert!(friction(&v2).contains(&0.9));
}

#[test]
fn raw_state_round_trips_and_drives_the_observation() {
    let mut env = make_unwrapped("Hopper-v5").unwrap();
    env.reset(Some(0)).unwrap();
    let qpos = [0.5, 1.2, 0.1, -0.1, 0.2, 0.0];
    let qvel = [0.0, 0.0, 0.0, 20.0, -20.0, 1.0];
    env.set_state(&qpos, &qvel).unwrap();
    assert_eq!(env.qpos(), &qpos);
    assert_eq!(env.qvel(), &qvel);
    // obs = qpos[1..] ++ clip(qvel, −10, 10)
    assert_eq!(env.observation_f64(), vec![1.2, 0.1, -0.1, 0.2, 0.0, 0.0, 0.0, 0.0, 10.0, -10.0, 1.0]);
}

#[test]
fn scene_lists_geoms_and_body_poses() {
    let mut env = make_unwrapped("Ant-v5").unwrap();
    env.reset(Some(0)).unwrap();
    let geoms = env.geoms();
    assert_eq!(geoms.len(), env.model().ffi().ngeom as usize);
    assert_eq!(geoms[0].kind, GeomKind::Plane);
    assert_eq!(geoms[0].body_id, 0);
    let names = env.body_names();
    assert_eq!(names[0], "world");
    let torso = names.iter().position(|n| n == "torso").unwrap();
    assert!(geoms.iter().any(|g| g.body_id == torso && g.kind == GeomKind::Sphere));
    assert!(geoms.iter().filter(|g| g.kind == GeomKind::Capsule).count() >= 8);
    let poses = env.body_poses();
    assert_eq!(poses.len(), names.len());
    // The torso starts near z = 0.75 with an almost identity orientation.
    assert!((poses[torso].0[2] - 0.75).abs() < 0.15, "{:?}", poses[torso]);
    let q = poses[torso].1;
    assert!(((q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]).sqrt() - 1.0).abs() < 1e-9);
}
