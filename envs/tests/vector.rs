//! Vector env: results independent of the thread count, same-step autoreset, bad input.

use o2o_envs::wrappers::TimeLimit;
use o2o_envs::{make_unwrapped, Env, EnvError, VecEnv, VecStep};
use rand::{Rng, SeedableRng};

fn envs(id: &str, n: usize, limit: usize) -> Vec<Box<dyn Env>> {
    (0..n).map(|_| Box::new(TimeLimit::new(make_unwrapped(id).unwrap(), limit)) as Box<dyn Env>).collect()
}

fn run(threads: usize, steps: usize) -> (Vec<f32>, Vec<VecStep>) {
    let mut v = VecEnv::new(envs("Hopper-v5", 5, 40), threads).unwrap();
    assert_eq!(v.threads(), threads.min(5));
    let first = v.reset(Some(9)).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let out = (0..steps)
        .map(|_| {
            let a: Vec<f32> = (0..5 * 3).map(|_| rng.gen_range(-1.0..1.0)).collect();
            v.step(&a).unwrap()
        })
        .collect();
    (first, out)
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let one = run(1, 120);
    assert_eq!(one, run(2, 120));
    assert_eq!(one, run(3, 120));
    assert_eq!(one, run(8, 120));
    // The run crossed episode ends (time limit 40 or falls).
    assert!(one.1.iter().any(|s| s.truncated.iter().any(|t| *t)));
}

#[test]
fn same_step_autoreset_matches_single_envs() {
    let limit = 7;
    let mut v = VecEnv::new(envs("HalfCheetah-v5", 3, limit), 2).unwrap();
    let mut singles = envs("HalfCheetah-v5", 3, limit);
    let obs = v.reset(Some(100)).unwrap();
    for (i, e) in singles.iter_mut().enumerate() {
        assert_eq!(&obs[i * 17..(i + 1) * 17], e.reset(Some(100 + i as u64)).unwrap().as_slice());
    }
    for t in 0..2 * limit {
        let a: Vec<f32> = (0..3 * 6).map(|k| ((k + t) % 5) as f32 * 0.4 - 0.8).collect();
        let s = v.step(&a).unwrap();
        for (i, e) in singles.iter_mut().enumerate() {
            let one = e.step(&a[i * 6..(i + 1) * 6]).unwrap();
            assert_eq!(s.reward[i], one.reward);
            assert_eq!((s.terminated[i], s.truncated[i]), (one.terminated, one.truncated));
            assert_eq!(s.next_obs(i), one.obs.as_slice());
            if one.truncated {
                // Ended on this step: the final obs is kept, the row is the new episode's start.
                assert_eq!(t % limit, limit - 1);
                assert_eq!(s.final_obs[i].as_deref(), Some(one.obs.as_slice()));
                assert_eq!(&s.obs[i * 17..(i + 1) * 17], e.reset(None).unwrap().as_slice());
            } else {
                assert!(s.final_obs[i].is_none());
                assert_eq!(&s.obs[i * 17..(i + 1) * 17], one.obs.as_slice());
            }
        }
    }
}

#[test]
fn bad_actions_are_errors_naming_the_env() {
    let mut v = VecEnv::make("Hopper-v5", 4, 2).unwrap();
    v.reset(Some(0)).unwrap();
    let err = v.step(&[0.0; 11]).unwrap_err().to_string();
    assert!(err.contains("12") && err.contains("11"), "{err}");
    let mut a = vec![0.0; 12];
    a[3 * 3 + 1] = f32::NAN;
    match v.step(&a).unwrap_err() {
        EnvError::SubEnv { index, source } => {
            assert_eq!(index, 3);
            assert!(matches!(*source, EnvError::NonFiniteAction { index: 1, .. }));
        }
        e => panic!("expected SubEnv, got {e}"),
    }
    // Mixed shapes are refused up front.
    let mixed: Vec<Box<dyn Env>> = vec![o2o_envs::make("Hopper-v5").unwrap(), o2o_envs::make("Walker2d-v5").unwrap()];
    assert!(VecEnv::new(mixed, 1).is_err());
}
