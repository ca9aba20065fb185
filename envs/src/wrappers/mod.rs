//! Wrappers: each takes an env and is an env. None of them merges `terminated` and `truncated`.
//!
//! | wrapper | does |
//! |---|---|
//! | [`TimeLimit`] | `truncated = true` at `max_episode_steps` |
//! | [`ClipAction`] | clips actions into the action box |
//! | [`RescaleAction`] | takes actions in `[min, max]`, maps them onto the action box |
//! | [`NormalizeObservation`] | (o − μ) / σ with fixed statistics, e.g. a dataset's |
//! | [`TransformReward`] | scale · r + shift |
//! | [`EpisodeStats`] | return, length and success of each episode, in `info` at its end |

/// Inside `impl Env for Wrapper<E>`, where the wrapped env is the field `env`: write the named
/// methods as plain calls to it, for the parts a wrapper leaves as they are
/// (`forward_to_inner!(spec, observation_space, action_space, reset);`), so each wrapper writes
/// only what it changes. Exported for wrappers in other crates (the evaluation recorder, the
/// benchmark makers' state logger): `o2o_envs::forward_to_inner!(...)`.
#[macro_export]
macro_rules! forward_to_inner {
    (spec) => {
        fn spec(&self) -> &$crate::EnvSpec {
            self.env.spec()
        }
    };
    (observation_space) => {
        fn observation_space(&self) -> &$crate::BoxSpace {
            self.env.observation_space()
        }
    };
    (action_space) => {
        fn action_space(&self) -> &$crate::BoxSpace {
            self.env.action_space()
        }
    };
    (reset) => {
        fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, $crate::EnvError> {
            self.env.reset(seed)
        }
    };
    (executed_action) => {
        fn executed_action(&self) -> Option<&[f32]> {
            self.env.executed_action()
        }
    };
    ($($method:ident),+ $(,)?) => {
        $($crate::forward_to_inner!($method);)+
    };
}

mod clip_action;
mod episode_stats;
mod normalize_observation;
mod rescale_action;
mod time_limit;
mod transform_reward;

pub use clip_action::ClipAction;
pub use episode_stats::{EpisodeRecord, EpisodeStats};
pub use normalize_observation::NormalizeObservation;
pub use rescale_action::RescaleAction;
pub use time_limit::TimeLimit;
pub use transform_reward::TransformReward;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{BoxSpace, Env, EnvSpec, Info, Step};
    use crate::error::EnvError;

    /// A counter env: obs = [t, last action[0]], reward = t, terminates at `term_at`, reports
    /// success on step 3. Action box [−2, 2]².
    struct Counter {
        spec: EnvSpec,
        obs_space: BoxSpace,
        act_space: BoxSpace,
        t: usize,
        term_at: usize,
    }

    fn counter(term_at: usize) -> Counter {
        Counter {
            spec: EnvSpec { id: "Counter".into(), max_episode_steps: None, normalization_family: None, goal: None },
            obs_space: BoxSpace::unbounded(2),
            act_space: BoxSpace::new(vec![-2.0; 2], vec![2.0; 2]),
            t: 0,
            term_at,
        }
    }

    impl Env for Counter {
        fn spec(&self) -> &EnvSpec {
            &self.spec
        }
        fn observation_space(&self) -> &BoxSpace {
            &self.obs_space
        }
        fn action_space(&self) -> &BoxSpace {
            &self.act_space
        }
        fn reset(&mut self, _seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
            self.t = 0;
            Ok(vec![0.0, 0.0])
        }
        fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
            if action.len() != 2 {
                return Err(EnvError::ActionLength { env: "Counter".into(), expected: 2, found: action.len() });
            }
            self.t += 1;
            let info = Info { values: vec![], success: Some(self.t == 3), task: None };
            Ok(Step {
                obs: vec![self.t as f32, action[0]],
                reward: self.t as f64,
                terminated: self.t >= self.term_at,
                truncated: false,
                info,
            })
        }
    }

    #[test]
    fn time_limit_truncates_without_touching_terminated() {
        let mut env = TimeLimit::new(counter(100), 3);
        env.reset(None).unwrap();
        for _ in 0..2 {
            let s = env.step(&[0.0, 0.0]).unwrap();
            assert!(!s.truncated && !s.terminated);
        }
        let s = env.step(&[0.0, 0.0]).unwrap();
        assert!(s.truncated && !s.terminated);
        assert_eq!(env.spec().max_episode_steps, Some(3));
        assert!(matches!(env.step(&[0.0, 0.0]), Err(EnvError::NeedsReset { .. })));
        env.reset(None).unwrap();
        assert_eq!(env.elapsed_steps(), 0);
    }

    #[test]
    fn time_limit_and_termination_on_the_same_step_keep_both_flags() {
        let mut env = TimeLimit::new(counter(2), 2);
        env.reset(None).unwrap();
        env.step(&[0.0, 0.0]).unwrap();
        let s = env.step(&[0.0, 0.0]).unwrap();
        assert!(s.terminated && s.truncated);
    }

    #[test]
    fn termination_before_the_limit_is_not_truncation() {
        let mut env = TimeLimit::new(counter(2), 10);
        env.reset(None).unwrap();
        env.step(&[0.0, 0.0]).unwrap();
        let s = env.step(&[0.0, 0.0]).unwrap();
        assert!(s.terminated && !s.truncated);
    }

    #[test]
    fn clip_action_clips_into_the_box() {
        let mut env = ClipAction::new(counter(100));
        env.reset(None).unwrap();
        assert_eq!(env.step(&[5.0, 0.0]).unwrap().obs[1], 2.0);
        assert_eq!(env.step(&[-7.5, 0.0]).unwrap().obs[1], -2.0);
        assert_eq!(env.step(&[1.5, 0.0]).unwrap().obs[1], 1.5);
        assert!(matches!(env.step(&[0.0]), Err(EnvError::ActionLength { expected: 2, found: 1, .. })));
    }

    #[test]
    fn rescale_action_maps_unit_box_onto_bounds() {
        let mut env = RescaleAction::new(counter(100), -1.0, 1.0).unwrap();
        assert_eq!(env.action_space().low, vec![-1.0, -1.0]);
        env.reset(None).unwrap();
        assert_eq!(env.step(&[1.0, 0.0]).unwrap().obs[1], 2.0);
        assert_eq!(env.step(&[-1.0, 0.0]).unwrap().obs[1], -2.0);
        assert_eq!(env.step(&[0.25, 0.0]).unwrap().obs[1], 0.5);
        assert!(RescaleAction::new(counter(1), 1.0, 1.0).is_err());
        let mut unbounded = counter(1);
        unbounded.act_space = BoxSpace::unbounded(2);
        assert!(RescaleAction::new(unbounded, -1.0, 1.0).is_err());
    }

    #[test]
    fn normalize_observation_uses_fixed_statistics() {
        let mut env = NormalizeObservation::new(counter(100), vec![1.0, 0.0], vec![2.0, 0.5]).unwrap();
        assert_eq!(env.reset(None).unwrap(), vec![-0.5, 0.0]);
        assert_eq!(env.step(&[1.0, 0.0]).unwrap().obs, vec![0.0, 2.0]);
        assert_eq!(env.step(&[1.0, 0.0]).unwrap().obs, vec![0.5, 2.0]);
        let err = NormalizeObservation::new(counter(1), vec![0.0; 3], vec![1.0; 2]).err().unwrap().to_string();
        assert!(err.contains("expected 2") && err.contains("found 3"), "{err}");
        let err = NormalizeObservation::new(counter(1), vec![0.0; 2], vec![1.0, 0.0]).err().unwrap().to_string();
        assert!(err.contains("std[1]"), "{err}");
    }

    #[test]
    fn transform_reward_scales_and_shifts() {
        let mut env = TransformReward::new(counter(100), 2.0, -1.0).unwrap();
        env.reset(None).unwrap();
        assert_eq!(env.step(&[0.0, 0.0]).unwrap().reward, 1.0);
        assert_eq!(env.step(&[0.0, 0.0]).unwrap().reward, 3.0);
        assert!(TransformReward::new(counter(1), f64::NAN, 0.0).is_err());
    }

    #[test]
    fn episode_stats_reports_return_length_success_at_the_end() {
        let mut env = EpisodeStats::new(TimeLimit::new(counter(100), 4));
        env.reset(None).unwrap();
        for _ in 0..3 {
            let s = env.step(&[0.0, 0.0]).unwrap();
            assert_eq!(s.info.get("episode_return"), None);
        }
        let s = env.step(&[0.0, 0.0]).unwrap();
        assert!(s.truncated && !s.terminated);
        assert_eq!(s.info.get("episode_return"), Some(10.0));
        assert_eq!(s.info.get("episode_length"), Some(4.0));
        assert_eq!(s.info.get("episode_success"), Some(1.0));
        let rec = env.last_episode().unwrap();
        assert!(!rec.terminated);
        assert_eq!(rec.success, Some(true));
        // A terminated episode of 2 steps never reaches step 3: no success.
        let mut env = EpisodeStats::new(counter(2));
        env.reset(None).unwrap();
        env.step(&[0.0, 0.0]).unwrap();
        let s = env.step(&[0.0, 0.0]).unwrap();
        assert_eq!(s.info.get("episode_success"), Some(0.0));
        assert_eq!(env.last_episode().unwrap().episode_return, 3.0);
        assert!(env.last_episode().unwrap().terminated);
    }
}
