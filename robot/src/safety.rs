//! The safety envelope: a wrapper every action passes through before it reaches hardware.
//!
//! It enforces, in this order:
//! 1. finite actions of the right length (rejected with an error, never forwarded);
//! 2. per-joint action limits, tighter than or equal to the env's own bounds (clamped);
//! 3. a rate limit: no dimension changes by more than `max_delta` from the previous command
//!    (clamped), so a policy that jumps from −1 to +1 cannot slam an actuator;
//! 4. observation limits: a state outside them stops the episode as a *safety stop* —
//!    reported as `truncated` (not a true task end, so learners still bootstrap) with the info
//!    value `safety/stop = 1` — and every later `step` is refused until `reset`.
//!
//! Each clamp is counted in the step info (`safety/clamped`) so a run can show how often the
//! envelope had to act. The wrapper implements `Env`, so training on a robot goes through the
//! same loop as training in simulation.

use o2o_envs::{BoxSpace, Env, EnvError, EnvSpec, Step};

/// Limits enforced by [`SafetyEnvelope`].
#[derive(Debug, Clone)]
pub struct SafetyLimits {
    /// Allowed commanded actions, per dimension.
    pub action: BoxSpace,
    /// Largest change of any action dimension between two consecutive steps.
    pub max_delta: Option<f32>,
    /// Allowed observations; outside them the episode stops.
    pub observation: Option<BoxSpace>,
}

/// Errors from building an envelope.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum SafetyError {
    #[error("safety action limits have {found} dimensions, the env's action space has {expected}")]
    ActionDim { expected: usize, found: usize },
    #[error("safety action limit for dimension {index} [{low}, {high}] is not inside the env's bounds [{env_low}, {env_high}]")]
    ActionOutsideEnv { index: usize, low: f32, high: f32, env_low: f32, env_high: f32 },
    #[error("safety observation limits have {found} dimensions, the env's observation space has {expected}")]
    ObservationDim { expected: usize, found: usize },
    #[error("max_delta must be positive and finite, found {0}")]
    MaxDelta(f32),
}

/// An [`Env`] wrapped in [`SafetyLimits`].
pub struct SafetyEnvelope<E: Env> {
    inner: E,
    limits: SafetyLimits,
    previous: Option<Vec<f32>>,
    stopped: bool,
    clamped_total: u64,
    stops_total: u64,
}

impl<E: Env> SafetyEnvelope<E> {
    /// Wrap `inner`; the limits are checked against its spaces.
    pub fn new(inner: E, limits: SafetyLimits) -> Result<Self, SafetyError> {
        let space = inner.action_space();
        if limits.action.dim() != space.dim() {
            return Err(SafetyError::ActionDim { expected: space.dim(), found: limits.action.dim() });
        }
        for i in 0..space.dim() {
            let (low, high) = (limits.action.low[i], limits.action.high[i]);
            if !(low >= space.low[i] && high <= space.high[i] && low <= high) {
                return Err(SafetyError::ActionOutsideEnv {
                    index: i,
                    low,
                    high,
                    env_low: space.low[i],
                    env_high: space.high[i],
                });
            }
        }
        if let Some(obs) = &limits.observation {
            let dim = inner.observation_space().dim();
            if obs.dim() != dim {
                return Err(SafetyError::ObservationDim { expected: dim, found: obs.dim() });
            }
        }
        if let Some(d) = limits.max_delta {
            if !(d > 0.0 && d.is_finite()) {
                return Err(SafetyError::MaxDelta(d));
            }
        }
        Ok(Self { inner, limits, previous: None, stopped: false, clamped_total: 0, stops_total: 0 })
    }

    /// How many action dimensions were clamped since the envelope was built.
    pub fn clamped_total(&self) -> u64 {
        self.clamped_total
    }

    /// How many safety stops happened since the envelope was built.
    pub fn stops_total(&self) -> u64 {
        self.stops_total
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The action that will actually be sent for `action`, and how many dimensions were clamped.
    fn safe_action(&self, action: &[f32]) -> (Vec<f32>, u32) {
        let mut out = action.to_vec();
        let mut clamped = 0;
        for (i, v) in out.iter_mut().enumerate() {
            let mut lo = self.limits.action.low[i];
            let mut hi = self.limits.action.high[i];
            if let (Some(d), Some(prev)) = (self.limits.max_delta, &self.previous) {
                lo = lo.max(prev[i] - d);
                hi = hi.min(prev[i] + d);
            }
            let c = v.clamp(lo, hi);
            if c != *v {
                clamped += 1;
            }
            *v = c;
        }
        (out, clamped)
    }
}

impl<E: Env> Env for SafetyEnvelope<E> {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }
    fn observation_space(&self) -> &BoxSpace {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &BoxSpace {
        &self.limits.action
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        self.previous = None;
        self.stopped = false;
        self.inner.reset(seed)
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let env = &self.inner.spec().id;
        if self.stopped {
            return Err(EnvError::Other(format!("{env}: safety stop in effect; call reset() before stepping again")));
        }
        let expected = self.limits.action.dim();
        if action.len() != expected {
            return Err(EnvError::ActionLength { env: env.clone(), expected, found: action.len() });
        }
        if let Some((index, value)) = action.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(EnvError::NonFiniteAction { env: env.clone(), index, value: *value });
        }
        let (safe, clamped) = self.safe_action(action);
        self.clamped_total += u64::from(clamped);
        let mut step = self.inner.step(&safe)?;
        self.previous = Some(safe);
        step.info.set("safety/clamped", f64::from(clamped));
        let outside = self.limits.observation.as_ref().is_some_and(|b| !b.contains(&step.obs));
        if outside || step.obs.iter().any(|v| !v.is_finite()) {
            self.stopped = true;
            self.stops_total += 1;
            step.truncated = true;
            step.info.set("safety/stop", 1.0);
        }
        Ok(step)
    }
}
