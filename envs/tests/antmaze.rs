//! AntMaze as D4RL built it (issue #25): the model, the frame, starts, goals, the sparse reward,
//! termination at the goal and the time limits. Parity with D4RL 1.1's own code is in
//! `tests/parity.rs`. Needs the unpacked d4rl wheel (`make setup`); without it these tests FAIL.

use o2o_envs::mujoco::antmaze::{MAZE_SCALING, U_MAZE_TEST};
use o2o_envs::{make, make_mujoco, Env};

#[test]
fn model_is_d4rls_ant_with_the_maze_walls() {
    let env = make_mujoco("antmaze-umaze-v2").unwrap();
    let raw = env.inner();
    assert_eq!(raw.model().opt().timestep, 0.02);
    assert_eq!(raw.frame_skip(), 5);
    assert!((raw.dt() - 0.1).abs() < 1e-15);
    assert_eq!(raw.model().actuator_ctrlrange().to_vec(), vec![[-30.0, 30.0]; 8]);
    assert!(raw.model().actuator_gear().iter().all(|g| g[0] == 1.0));
    assert_eq!(env.action_space().low, vec![-1.0; 8]);
    assert_eq!(env.action_space().high, vec![1.0; 8]);
    assert_eq!(env.observation_space().dim(), 29);
    // The walls: one box geom per wall cell at D4RL's positions, on the world body.
    let boxes: Vec<_> =
        raw.geoms().into_iter().filter(|g| g.name.as_deref().is_some_and(|n| n.starts_with("block_"))).collect();
    let expected = U_MAZE_TEST.wall_boxes();
    assert_eq!(boxes.len(), expected.len());
    for (g, (pos, size)) in boxes.iter().zip(&expected) {
        assert_eq!(g.body_id, 0);
        assert_eq!(&g.pos, pos, "{:?}", g.name);
        assert_eq!(&g.size, size);
    }
    assert_eq!(boxes[0].pos, [-MAZE_SCALING, -MAZE_SCALING, 1.0]);
}

#[test]
fn starts_at_the_reset_cell_with_d4rls_noise_and_a_fresh_goal_each_reset() {
    let mut env = make_mujoco("antmaze-umaze-v2").unwrap();
    let qpos0 = env.inner().model().qpos0().to_vec();
    let mut goals = Vec::new();
    for k in 0..20 {
        let obs = env.reset(if k == 0 { Some(1) } else { None }).unwrap();
        assert_eq!(obs.len(), 29);
        let q = env.inner().qpos();
        for (a, b) in q.iter().zip(&qpos0) {
            assert!((a - b).abs() <= 0.1, "qpos {a} vs qpos0 {b}");
        }
        assert!(env.inner().qvel().iter().all(|v| v.abs() < 0.6));
        assert_eq!(
            obs[..15].iter().map(|v| *v as f64).collect::<Vec<_>>(),
            q.iter().map(|v| *v as f32 as f64).collect::<Vec<_>>()
        );
        goals.push(env.inner().task().goal().unwrap());
    }
    assert!(goals.windows(2).all(|w| w[0] != w[1]), "v2 must draw a new goal at each reset");
    assert!(goals.iter().all(|g| (0.0..=1.5).contains(&g[0]) && (8.0..=9.5).contains(&g[1])), "{goals:?}");
    // v0: one goal per env.
    let mut v0 = make_mujoco("antmaze-umaze-v0").unwrap();
    v0.reset(Some(1)).unwrap();
    let g0 = v0.inner().task().goal();
    v0.reset(None).unwrap();
    assert_eq!(v0.inner().task().goal(), g0);
}

#[test]
fn reaching_the_goal_pays_one_and_terminates() {
    let mut env = make_mujoco("antmaze-umaze-v2").unwrap();
    env.reset(Some(0)).unwrap();
    let goal = env.inner().task().goal().unwrap();
    // Far away: reward 0, not terminated, not a success.
    let s = env.step(&[0.0; 8]).unwrap();
    assert_eq!((s.reward, s.terminated, s.info.success), (0.0, false, Some(false)));
    assert!((s.info.get("goal_distance").unwrap() - 8.0).abs() < 2.0);
    // Put the ant on the goal: the next step pays 1 and ends the episode.
    let mut qpos = env.inner().qpos().to_vec();
    let qvel = vec![0.0; env.inner().qvel().len()];
    qpos[0] = goal[0] + 0.1;
    qpos[1] = goal[1];
    env.inner_mut().set_state(&qpos, &qvel).unwrap();
    let s = env.step(&[0.0; 8]).unwrap();
    assert_eq!((s.reward, s.terminated, s.truncated, s.info.success), (1.0, true, false, Some(true)));
    assert!(env.step(&[0.0; 8]).is_err(), "stepping past the goal needs a reset");
}

#[test]
fn time_limits_are_700_and_1000_and_the_ant_health_rule_does_not_end_episodes() {
    for (id, limit) in [("antmaze-umaze-v2", 700), ("antmaze-medium-diverse-v2", 1000), ("antmaze-large-play-v2", 1000)]
    {
        let mut env = make(id).unwrap();
        env.reset(Some(2)).unwrap();
        let mut n = 0;
        loop {
            // Full torque flips the ant over (torso z leaves [0.2, 1]): D4RL keeps going anyway.
            let s = env.step(&[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]).unwrap();
            n += 1;
            assert!(!s.terminated, "{id}: terminated at step {n} away from the goal");
            if s.truncated {
                break;
            }
        }
        assert_eq!(n, limit, "{id}");
    }
}
