//! The transition message: one JSON object per published batch, versioned.
//!
//! ```json
//! {"schema": 1, "run_id": "sac-halfcheetah-0-…", "actor": "actor-0-4711", "batch": 17,
//!  "policy_version": 3, "obs_dim": 17, "act_dim": 6,
//!  "transitions": [{"obs": […], "action": […], "reward": -0.3, "next_obs": […],
//!                   "terminated": false, "truncated": false}, …]}
//! ```
//!
//! Actions are in the agent's `[-1, 1]` box, rewards the env's own (the learner applies the
//! run's reward transform). The message id (`Nats-Msg-Id`, for the stream's duplicate window)
//! is `<actor>/<batch>`. [`decode`] checks everything before the learner stores a row: a
//! message of another run, another schema version, the wrong shapes, non-finite numbers or
//! bytes that are not this format are a [`Rejected`] error naming what was expected and found.

use crate::run::actor::Transition;
use serde::{Deserialize, Serialize};

/// The format's version; bumped on any incompatible change.
pub const SCHEMA: u32 = 1;

/// One published batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// [`SCHEMA`] when written.
    pub schema: u32,
    /// The learner run this batch is for.
    pub run_id: String,
    /// The actor's instance id.
    pub actor: String,
    /// The actor's batch counter (0, 1, …).
    pub batch: u64,
    /// The policy version the actor acted with (0: uniformly random).
    pub policy_version: u64,
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// The transitions, in the order they happened.
    pub transitions: Vec<Row>,
}

/// One transition on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Observation before the step.
    pub obs: Vec<f32>,
    /// Action in `[-1, 1]^A`.
    pub action: Vec<f32>,
    /// The env's reward.
    pub reward: f64,
    /// Observation after the step.
    pub next_obs: Vec<f32>,
    /// A true end.
    pub terminated: bool,
    /// A time-limit cut.
    pub truncated: bool,
}

impl From<&Transition> for Row {
    fn from(t: &Transition) -> Self {
        Self {
            obs: t.obs.clone(),
            action: t.action.clone(),
            reward: t.reward,
            next_obs: t.next_obs.clone(),
            terminated: t.terminated,
            truncated: t.truncated,
        }
    }
}

impl Batch {
    /// The message id for the stream's duplicate window.
    pub fn msg_id(&self) -> String {
        format!("{}/{}", self.actor, self.batch)
    }

    /// The JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a batch of numbers and strings always serializes")
    }
}

/// Why the learner refused a message (it is acknowledged, counted and logged, never stored).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejected {
    /// Not a JSON batch of this format.
    #[error("malformed transition message: {0}")]
    Malformed(String),
    /// Another schema version.
    #[error("transition message of schema version {found}, expected {expected} (actor and learner of different o2o versions?)")]
    Schema {
        /// [`SCHEMA`].
        expected: u32,
        /// What the message says.
        found: u32,
    },
    /// Another run's message.
    #[error("transition message for run {found:?}, but this learner is run {expected:?}")]
    Run {
        /// This learner's run id.
        expected: String,
        /// The message's.
        found: String,
    },
    /// Shapes that are not this run's env.
    #[error("transition message from {actor}: {what} has {found} values, expected {expected}")]
    Shape {
        /// The sender.
        actor: String,
        /// Which field.
        what: String,
        /// The run's size.
        expected: usize,
        /// The message's.
        found: usize,
    },
    /// A NaN or an infinity.
    #[error("transition message from {actor}: row {row} has a non-finite {what}")]
    NotFinite {
        /// The sender.
        actor: String,
        /// Row index in the batch.
        row: usize,
        /// Which field.
        what: String,
    },
}

/// Parse and check a message for run `run_id` with these sizes.
pub fn decode(bytes: &[u8], run_id: &str, obs_dim: usize, act_dim: usize) -> Result<Batch, Rejected> {
    // The version first, so a future format is reported as such, not as malformed.
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Rejected::Malformed(format!("not JSON ({e}); {} bytes", bytes.len())))?;
    let found = value
        .get("schema")
        .and_then(|s| s.as_u64())
        .ok_or_else(|| Rejected::Malformed("no integer `schema` field".into()))?;
    if found != SCHEMA as u64 {
        return Err(Rejected::Schema { expected: SCHEMA, found: found.min(u32::MAX as u64) as u32 });
    }
    let b: Batch = serde_json::from_value(value).map_err(|e| Rejected::Malformed(e.to_string()))?;
    if b.run_id != run_id {
        return Err(Rejected::Run { expected: run_id.to_string(), found: b.run_id });
    }
    let shape = |what: &str, expected: usize, found: usize| Rejected::Shape {
        actor: b.actor.clone(),
        what: what.into(),
        expected,
        found,
    };
    if b.obs_dim != obs_dim {
        return Err(shape("obs_dim", obs_dim, b.obs_dim));
    }
    if b.act_dim != act_dim {
        return Err(shape("act_dim", act_dim, b.act_dim));
    }
    for (i, r) in b.transitions.iter().enumerate() {
        for (what, v, n) in
            [("obs", &r.obs, obs_dim), ("action", &r.action, act_dim), ("next_obs", &r.next_obs, obs_dim)]
        {
            if v.len() != n {
                return Err(shape(&format!("row {i} {what}"), n, v.len()));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(Rejected::NotFinite { actor: b.actor.clone(), row: i, what: what.into() });
            }
        }
        if !r.reward.is_finite() {
            return Err(Rejected::NotFinite { actor: b.actor.clone(), row: i, what: "reward".into() });
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Batch {
        let row = Row {
            obs: vec![0.0, 1.0],
            action: vec![0.5],
            reward: 1.0,
            next_obs: vec![1.0, 2.0],
            terminated: false,
            truncated: true,
        };
        Batch {
            schema: SCHEMA,
            run_id: "r".into(),
            actor: "a".into(),
            batch: 3,
            policy_version: 1,
            obs_dim: 2,
            act_dim: 1,
            transitions: vec![row.clone(), row],
        }
    }

    #[test]
    fn round_trips_and_names_its_message_id() {
        let b = batch();
        let back = decode(&b.encode(), "r", 2, 1).unwrap();
        assert_eq!(back.transitions.len(), 2);
        assert_eq!(back.transitions[1].next_obs, vec![1.0, 2.0]);
        assert!(back.transitions[0].truncated && !back.transitions[0].terminated);
        assert_eq!(b.msg_id(), "a/3");
    }

    #[test]
    fn refuses_other_runs_schemas_shapes_and_garbage() {
        let b = batch();
        assert_eq!(
            decode(&b.encode(), "other", 2, 1).unwrap_err(),
            Rejected::Run { expected: "other".into(), found: "r".into() }
        );
        let mut v = b.clone();
        v.schema = 2;
        assert_eq!(decode(&v.encode(), "r", 2, 1).unwrap_err(), Rejected::Schema { expected: 1, found: 2 });
        assert!(matches!(decode(&b.encode(), "r", 3, 1).unwrap_err(), Rejected::Shape { expected: 3, found: 2, .. }));
        let mut v = b.clone();
        v.transitions[1].action = vec![0.1, 0.2];
        assert!(matches!(decode(&v.encode(), "r", 2, 1).unwrap_err(), Rejected::Shape { expected: 1, found: 2, .. }));
        assert!(matches!(decode(b"\x00\xffnot json", "r", 2, 1).unwrap_err(), Rejected::Malformed(_)));
        assert!(matches!(decode(br#"{"schema": 1, "run_id": "r"}"#, "r", 2, 1).unwrap_err(), Rejected::Malformed(_)));
        let text = String::from_utf8(b.encode()).unwrap().replace("\"reward\":1.0", "\"reward\":1e999");
        assert!(decode(text.as_bytes(), "r", 2, 1).is_err());
    }
}
