//! The safety envelope clamps, rate-limits and stops, on a scripted env whose every action and
//! state the test controls.

use o2o_envs::{BoxSpace, Env, EnvError, EnvSpec, Info, Step};
use o2o_robot::{SafetyEnvelope, SafetyLimits};

/// A 2-D "robot" whose observation is the last action it received, times a gain.
struct Echo {
    spec: EnvSpec,
    obs_space: BoxSpace,
    act_space: BoxSpace,
    received: Vec<Vec<f32>>,
    gain: f32,
}

impl Echo {
    fn new(gain: f32) -> Self {
        Self {
            spec: EnvSpec { id: "Echo-v0".into(), max_episode_steps: None, normalization_family: None, goal: None },
            obs_space: BoxSpace::unbounded(2),
            act_space: BoxSpace::new(vec![-1.0; 2], vec![1.0; 2]),
            received: Vec::new(),
            gain,
        }
    }
}

impl Env for Echo {
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
        Ok(vec![0.0; 2])
    }
    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        self.received.push(action.to_vec());
        let obs = action.iter().map(|a| a * self.gain).collect();
        Ok(Step { obs, reward: 0.0, terminated: false, truncated: false, info: Info::default() })
    }
}

fn limits(max_delta: Option<f32>, obs_limit: Option<f32>) -> SafetyLimits {
    SafetyLimits {
        action: BoxSpace::new(vec![-0.5, -1.0], vec![0.5, 1.0]),
        max_delta,
        observation: obs_limit.map(|l| BoxSpace::new(vec![-l; 2], vec![l; 2])),
    }
}

#[test]
fn clamps_to_limits_and_rate_limits() {
    let mut env = SafetyEnvelope::new(Echo::new(1.0), limits(Some(0.25), None)).unwrap();
    env.reset(Some(0)).unwrap();
    let s = env.step(&[0.9, -0.1]).unwrap(); // first step: only the box applies
    assert_eq!(s.obs, vec![0.5, -0.1]);
    assert_eq!(s.info.get("safety/clamped"), Some(1.0));
    let s = env.step(&[-0.5, 1.0]).unwrap(); // rate limit: at most 0.25 away from [0.5, -0.1]
    assert_eq!(s.obs, vec![0.25, 0.15]);
    assert_eq!(s.info.get("safety/clamped"), Some(2.0));
    assert_eq!(env.clamped_total(), 3);
    assert_eq!(env.inner().received, vec![vec![0.5, -0.1], vec![0.25, 0.15]]);
}

#[test]
fn bad_actions_never_reach_the_robot() {
    let mut env = SafetyEnvelope::new(Echo::new(1.0), limits(None, None)).unwrap();
    env.reset(None).unwrap();
    let err = env.step(&[0.0]).unwrap_err().to_string();
    assert!(err.contains("expects 2") && err.contains("1"), "{err}");
    let err = env.step(&[f32::NAN, 0.0]).unwrap_err().to_string();
    assert!(err.contains("not finite"), "{err}");
    assert!(env.inner().received.is_empty());
}

#[test]
fn state_outside_limits_is_a_safety_stop_until_reset() {
    // gain 3 turns an allowed action of 0.5 into an observation of 1.5 > 1.0.
    let mut env = SafetyEnvelope::new(Echo::new(3.0), limits(None, Some(1.0))).unwrap();
    env.reset(None).unwrap();
    let s = env.step(&[0.1, 0.1]).unwrap();
    assert!(!s.truncated && s.info.get("safety/stop").is_none());
    let s = env.step(&[0.5, 0.0]).unwrap();
    assert!(s.truncated && !s.terminated, "a safety stop is a truncation, not a task end");
    assert_eq!(s.info.get("safety/stop"), Some(1.0));
    assert!(env.step(&[0.0, 0.0]).is_err(), "stepping after a stop must be refused");
    assert_eq!(env.inner().received.len(), 2);
    env.reset(None).unwrap();
    assert!(env.step(&[0.0, 0.0]).is_ok());
    assert_eq!(env.stops_total(), 1);
}

#[test]
fn limits_must_fit_the_env() {
    let too_wide =
        SafetyLimits { action: BoxSpace::new(vec![-2.0, -1.0], vec![0.5, 1.0]), max_delta: None, observation: None };
    let err = SafetyEnvelope::new(Echo::new(1.0), too_wide).err().unwrap().to_string();
    assert!(err.contains("dimension 0"), "{err}");
    let wrong_dim = SafetyLimits { action: BoxSpace::new(vec![-1.0], vec![1.0]), max_delta: None, observation: None };
    assert!(SafetyEnvelope::new(Echo::new(1.0), wrong_dim).is_err());
    assert!(SafetyEnvelope::new(Echo::new(1.0), limits(Some(0.0), None)).is_err());
}
