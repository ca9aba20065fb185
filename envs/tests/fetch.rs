//! The Fetch tasks through the registry: shapes, the goal layout, the sparse reward against
//! `info.success`, the 50-step time limit, and seeded resets.

use o2o_envs::mujoco::{FetchScript, FetchTask};
use o2o_envs::registry::{make, make_fetch};
use o2o_envs::Env;

#[test]
fn fetch_tasks_have_gymnasium_robotics_shapes_and_rules() {
    for (id, obs_dim) in [("FetchReach-v4", 16), ("FetchPush-v4", 31), ("FetchPickAndPlace-v4", 31)] {
        let mut env = make(id).unwrap();
        assert_eq!(env.observation_space().dim(), obs_dim, "{id}");
        assert_eq!(env.action_space().dim(), 4);
        let o1 = env.reset(Some(3)).unwrap();
        let o2 = env.reset(Some(3)).unwrap();
        assert_eq!(o1, o2, "{id}: seeded resets repeat");
        let mut steps = 0;
        loop {
            let s = env.step(&[0.3, -0.2, 0.1, 0.5]).unwrap();
            steps += 1;
            let d = ((0..3).map(|i| (s.obs[i] - s.obs[3 + i]) as f64).map(|x| x * x).sum::<f64>()).sqrt();
            assert_eq!(s.info.success, Some(s.reward == 0.0), "{id}: success iff the sparse reward is 0 (d = {d})");
            assert!(s.reward == 0.0 || s.reward == -1.0);
            assert!(!s.terminated);
            if s.truncated {
                break;
            }
        }
        assert_eq!(steps, 50, "{id}");
    }
}

#[test]
fn reach_is_solvable_by_moving_toward_the_goal() {
    let mut env = make_fetch("FetchReach-v4").unwrap();
    let mut obs = env.reset(Some(1)).unwrap();
    let mut success = false;
    for _ in 0..50 {
        let a: Vec<f32> = (0..3).map(|i| ((obs[3 + i] - obs[i]) * 20.0).clamp(-1.0, 1.0)).chain([0.0]).collect();
        let s = env.step(&a).unwrap();
        success |= s.info.success == Some(true);
        obs = s.obs;
    }
    assert!(success, "a P-controller reaches the goal");
    let layout = env.inner().goal_layout();
    assert_eq!((layout.achieved, layout.desired, layout.observation), ([0, 3], [3, 6], [6, 16]));
    let g = env.inner().goal();
    assert!((g[0] - obs[3] as f64).abs() < 1e-6);
}

/// Final-step success rate of the scripted controller over `n` seeded episodes.
fn scripted_success(id: &str, task: FetchTask, n: u64) -> f64 {
    let mut env = make_fetch(id).unwrap();
    let mut ok = 0;
    for seed in 0..n {
        let mut obs = env.reset(Some(1000 + seed)).unwrap();
        let mut script = FetchScript::new(task);
        let mut last;
        loop {
            let s = env.step(&script.act(&obs)).unwrap();
            last = s.info.success == Some(true);
            obs = s.obs;
            if s.truncated {
                break;
            }
        }
        ok += last as usize;
    }
    ok as f64 / n as f64
}

#[test]
fn scripted_controllers_succeed_on_at_least_95_percent_of_seeds() {
    for (id, task) in [
        ("FetchReach-v4", FetchTask::Reach),
        ("FetchPush-v4", FetchTask::Push),
        ("FetchPickAndPlace-v4", FetchTask::PickAndPlace),
    ] {
        let rate = scripted_success(id, task, 20);
        eprintln!("{id}: scripted success {rate:.3} over 20 seeds");
        assert!(rate >= 0.95, "{id}: {rate}");
    }
}

/// `Fetch*Terminal-v4` is the same task with the gold reward: step for step it moves as
/// `Fetch*-v4` does, pays 0 until the first success, then 1 and a true termination (after
/// which stepping is an error until the next reset); its goal spec says so, for HER.
#[test]
fn terminal_variants_pay_one_and_end_at_the_first_success() {
    for (plain, terminal, task) in [
        ("FetchReach-v4", "FetchReachTerminal-v4", FetchTask::Reach),
        ("FetchPush-v4", "FetchPushTerminal-v4", FetchTask::Push),
    ] {
        let (mut a, mut b) = (make_fetch(plain).unwrap(), make_fetch(terminal).unwrap());
        let goal = b.spec().goal.unwrap();
        assert!(goal.success_terminates && !a.spec().goal.unwrap().success_terminates);
        assert!(o2o_envs::registry::NO_PARITY_ORACLE.contains(&terminal));
        for seed in 0..3 {
            let (mut oa, ob) = (a.reset(Some(seed)).unwrap(), b.reset(Some(seed)).unwrap());
            assert_eq!(oa, ob, "{terminal}: same start");
            let mut script = FetchScript::new(task);
            let mut steps = 0;
            loop {
                let act = script.act(&oa);
                let (sa, sb) = (a.step(&act).unwrap(), b.step(&act).unwrap());
                steps += 1;
                assert_eq!(sa.obs, sb.obs, "{terminal}: same dynamics");
                let success = sa.info.success == Some(true);
                assert_eq!(sb.reward, if success { 1.0 } else { 0.0 });
                assert_eq!(sb.terminated, success, "{terminal}: terminates exactly at success");
                let ag: Vec<f64> = sb.obs[0..3].iter().map(|x| *x as f64).collect();
                let dg: Vec<f64> = sb.obs[3..6].iter().map(|x| *x as f64).collect();
                assert_eq!(goal.reward(&ag, &dg), sb.reward, "the goal spec's reward is the env's");
                assert_eq!(goal.terminates(&ag, &dg), sb.terminated);
                if sb.terminated {
                    assert!(b.step(&act).is_err(), "{terminal}: no step after a termination");
                    break;
                }
                assert!(!sb.truncated, "{terminal} seed {seed}: the script succeeds within 50 steps");
                oa = sa.obs;
            }
            assert!(steps < 50, "{terminal} seed {seed}: {steps} steps");
        }
    }
}
