//! The transition message: one published batch, versioned, in a compact little-endian binary
//! format (JSON only as a debug option).
//!
//! Binary, version [`SCHEMA`] (all integers and floats little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `O2OT` |
//! | 2 | format version, u16 ([`SCHEMA`]) |
//! | 2 | flags, u16, 0 (reserved) |
//! | 4 + 4 + 4 | `obs_dim`, `act_dim`, `count` (rows), u32 |
//! | 8 + 8 + 8 | `batch` (the actor's counter), `policy_version` (acting), `sent_ms` (Unix ms when sealed), u64 |
//! | 2 + n | `run_id`: length (u16), UTF-8 |
//! | 2 + n | `actor`: length (u16), UTF-8 |
//! | columns | `obs` f32 × count·obs_dim, `action` f32 × count·act_dim, `reward` f64 × count, `next_obs` f32 × count·obs_dim, `done` u8 × count (bit 0 terminated, bit 1 truncated) |
//!
//! Nothing may follow the last column. Rewards stay f64 (the env's own number, as JSON carried
//! it), so a run's transitions are bit for bit those of the JSON format and of an in-process
//! run: the format changes only the cost of the trip.
//!
//! The JSON form (`--message-format json`, for reading a stream by eye) is one object per
//! batch with the same fields and `transitions` as a list of rows:
//!
//! ```json
//! {"schema": 2, "run_id": "sac-halfcheetah-0-…", "actor": "actor-0-4711", "batch": 17,
//!  "policy_version": 3, "sent_ms": 1796000000000, "obs_dim": 17, "act_dim": 6,
//!  "transitions": [{"obs": […], "action": […], "reward": -0.3, "next_obs": […],
//!                   "terminated": false, "truncated": false}, …]}
//! ```
//!
//! The learner reads both (the first bytes tell them apart). Actions are in the agent's
//! `[-1, 1]` box, rewards the env's own (the learner applies the run's reward transform). The
//! message id (`Nats-Msg-Id`, for the stream's duplicate window) is `<actor>/<batch>`.
//! [`decode`] checks everything before the learner stores a row: a message of another run,
//! another format version, the wrong shapes, non-finite numbers, or bytes that are cut short or
//! not this format are a [`Rejected`] error naming what was expected and found, never a panic.

use crate::run::actor::Transition;
use serde::{Deserialize, Serialize};

/// The format's version (binary and JSON); bumped on any incompatible change. Version 1 was
/// JSON only, without `sent_ms`.
pub const SCHEMA: u32 = 2;

/// The binary format's first four bytes.
pub const MAGIC: &[u8; 4] = b"O2OT";

/// How an actor encodes its batches (the learner reads either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// The compact binary format (the default).
    #[default]
    Binary,
    /// JSON text, for debugging (several times larger and slower to read).
    Json,
}

/// One published batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// When the actor sealed the batch, in milliseconds since the Unix epoch (the learner's
    /// `fleet/data_age_s`; machines' clocks must agree for it to mean anything).
    pub sent_ms: u64,
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// The transitions, in the order they happened.
    pub transitions: Vec<Row>,
}

/// One transition on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Milliseconds since the Unix epoch now (0 if the clock is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Batch {
    /// The message id for the stream's duplicate window.
    pub fn msg_id(&self) -> String {
        format!("{}/{}", self.actor, self.batch)
    }

    /// The bytes in `format`.
    pub fn encode_as(&self, format: Format) -> Vec<u8> {
        match format {
            Format::Binary => self.encode(),
            Format::Json => serde_json::to_vec(self).expect("a batch of numbers and strings always serializes"),
        }
    }

    /// The binary bytes (see the module docs for the layout).
    pub fn encode(&self) -> Vec<u8> {
        let n = self.transitions.len();
        let floats = n * (2 * self.obs_dim + self.act_dim);
        let mut out = Vec::with_capacity(48 + self.run_id.len() + self.actor.len() + floats * 4 + n * 9);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.schema as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        for v in [self.obs_dim, self.act_dim, n] {
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
        for v in [self.batch, self.policy_version, self.sent_ms] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for s in [&self.run_id, &self.actor] {
            // Ids are short (a run directory's name, `actor-<index>-<pid>-<nonce>`); longer is cut.
            let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(b.len() as u16).to_le_bytes());
            out.extend_from_slice(b);
        }
        let column = |out: &mut Vec<u8>, f: &dyn Fn(&Row) -> &[f32]| {
            for r in &self.transitions {
                for x in f(r) {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        };
        column(&mut out, &|r| &r.obs);
        column(&mut out, &|r| &r.action);
        for r in &self.transitions {
            out.extend_from_slice(&r.reward.to_le_bytes());
        }
        column(&mut out, &|r| &r.next_obs);
        out.extend(self.transitions.iter().map(|r| r.terminated as u8 | (r.truncated as u8) << 1));
        out
    }
}

/// Why the learner refused a message (it is acknowledged, counted and logged, never stored).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejected {
    /// Neither format, or a field that does not parse.
    #[error("malformed transition message: {0}")]
    Malformed(String),
    /// The binary format, cut short.
    #[error("truncated transition message: {what} needs {need} bytes at offset {at}, but the message has {len}")]
    Truncated {
        /// The field being read.
        what: String,
        /// Its size.
        need: usize,
        /// Where it starts.
        at: usize,
        /// The message's length.
        len: usize,
    },
    /// Another format version.
    #[error("transition message of format version {found}, expected {expected} (actor and learner of different o2o versions?)")]
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

/// Parse and check a message (binary or JSON) for run `run_id` with these sizes.
pub fn decode(bytes: &[u8], run_id: &str, obs_dim: usize, act_dim: usize) -> Result<Batch, Rejected> {
    let b = if bytes.starts_with(MAGIC) {
        decode_binary(bytes)?
    } else if bytes.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'{') {
        decode_json(bytes)?
    } else {
        let head: Vec<String> = bytes.iter().take(4).map(|c| format!("{c:02x}")).collect();
        return Err(Rejected::Malformed(format!(
            "neither the binary format (magic O2OT) nor JSON: {} bytes starting {}",
            bytes.len(),
            head.join(" ")
        )));
    };
    check(b, run_id, obs_dim, act_dim)
}

/// The JSON form, the version checked first so a future format is reported as such.
fn decode_json(bytes: &[u8]) -> Result<Batch, Rejected> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Rejected::Malformed(format!("not JSON ({e}); {} bytes", bytes.len())))?;
    let found = value
        .get("schema")
        .and_then(|s| s.as_u64())
        .ok_or_else(|| Rejected::Malformed("no integer `schema` field".into()))?;
    if found != SCHEMA as u64 {
        return Err(Rejected::Schema { expected: SCHEMA, found: found.min(u32::MAX as u64) as u32 });
    }
    serde_json::from_value(value).map_err(|e| Rejected::Malformed(e.to_string()))
}

/// A cursor over a binary message whose every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, what: &str, need: usize) -> Result<&'a [u8], Rejected> {
        let end = self.at.checked_add(need).filter(|e| *e <= self.bytes.len()).ok_or_else(|| Rejected::Truncated {
            what: what.into(),
            need,
            at: self.at,
            len: self.bytes.len(),
        })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> Result<u16, Rejected> {
        Ok(u16::from_le_bytes(self.take(what, 2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self, what: &str) -> Result<usize, Rejected> {
        Ok(u32::from_le_bytes(self.take(what, 4)?.try_into().expect("4 bytes")) as usize)
    }
    fn u64(&mut self, what: &str) -> Result<u64, Rejected> {
        Ok(u64::from_le_bytes(self.take(what, 8)?.try_into().expect("8 bytes")))
    }
    fn text(&mut self, what: &str) -> Result<String, Rejected> {
        let n = self.u16(what)? as usize;
        let b = self.take(what, n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Rejected::Malformed(format!("{what} is not UTF-8")))
    }
    /// `rows × width` values of `size` bytes; the size is checked against the bytes left
    /// before anything is allocated (a forged count cannot ask for gigabytes).
    fn column(&mut self, what: &str, rows: usize, width: usize, size: usize) -> Result<&'a [u8], Rejected> {
        let need = rows.checked_mul(width).and_then(|v| v.checked_mul(size)).ok_or_else(|| {
            Rejected::Malformed(format!("{what}: {rows} rows of {width} values is beyond any message"))
        })?;
        self.take(what, need)
    }
}

/// The binary form (see the module docs).
fn decode_binary(bytes: &[u8]) -> Result<Batch, Rejected> {
    let mut r = Reader { bytes, at: MAGIC.len() };
    let found = r.u16("the format version")? as u32;
    if found != SCHEMA {
        return Err(Rejected::Schema { expected: SCHEMA, found });
    }
    let flags = r.u16("the flags")?;
    if flags != 0 {
        return Err(Rejected::Malformed(format!("flags {flags:#06x}, expected 0 (a later format?)")));
    }
    let (obs_dim, act_dim, n) = (r.u32("obs_dim")?, r.u32("act_dim")?, r.u32("the row count")?);
    let (batch, policy_version, sent_ms) = (r.u64("batch")?, r.u64("policy_version")?, r.u64("sent_ms")?);
    let (run_id, actor) = (r.text("run_id")?, r.text("actor")?);
    let obs = r.column("the obs column", n, obs_dim, 4)?;
    let action = r.column("the action column", n, act_dim, 4)?;
    let reward = r.column("the reward column", n, 1, 8)?;
    let next_obs = r.column("the next_obs column", n, obs_dim, 4)?;
    let done = r.column("the done column", n, 1, 1)?;
    if r.at != bytes.len() {
        return Err(Rejected::Malformed(format!("{} bytes after the last column", bytes.len() - r.at)));
    }
    let f32s =
        |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect() };
    let mut transitions = Vec::with_capacity(n);
    for i in 0..n {
        let d = done[i];
        if d > 3 {
            return Err(Rejected::Malformed(format!("row {i}: done byte {d:#04x}, expected bits 0 and 1 only")));
        }
        transitions.push(Row {
            obs: f32s(&obs[i * obs_dim * 4..(i + 1) * obs_dim * 4]),
            action: f32s(&action[i * act_dim * 4..(i + 1) * act_dim * 4]),
            reward: f64::from_le_bytes(reward[i * 8..(i + 1) * 8].try_into().unwrap()),
            next_obs: f32s(&next_obs[i * obs_dim * 4..(i + 1) * obs_dim * 4]),
            terminated: d & 1 != 0,
            truncated: d & 2 != 0,
        });
    }
    Ok(Batch { schema: found, run_id, actor, batch, policy_version, sent_ms, obs_dim, act_dim, transitions })
}

/// The run, the sizes and the numbers of a parsed batch.
fn check(b: Batch, run_id: &str, obs_dim: usize, act_dim: usize) -> Result<Batch, Rejected> {
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
            sent_ms: 1_796_000_000_123,
            obs_dim: 2,
            act_dim: 1,
            transitions: vec![row.clone(), Row { terminated: true, truncated: false, reward: -0.1, ..row }],
        }
    }

    /// Awkward numbers survive both formats bit for bit: the trip changes no result.
    #[test]
    fn both_formats_round_trip_bit_for_bit() {
        let mut b = batch();
        b.transitions[0].obs = vec![f32::MIN_POSITIVE, -0.0];
        b.transitions[0].action = vec![0.1 + 0.2];
        b.transitions[1].reward = std::f64::consts::PI * 1e-300;
        b.transitions[1].next_obs = vec![f32::MAX, 1.0 / 3.0];
        for format in [Format::Binary, Format::Json] {
            let back = decode(&b.encode_as(format), "r", 2, 1).unwrap();
            assert_eq!(back, b, "{format:?}");
            let bits = |b: &Batch| -> Vec<u64> {
                b.transitions
                    .iter()
                    .flat_map(|r| {
                        r.obs
                            .iter()
                            .chain(&r.action)
                            .chain(&r.next_obs)
                            .map(|x| x.to_bits() as u64)
                            .chain([r.reward.to_bits()])
                    })
                    .collect()
            };
            assert_eq!(bits(&back), bits(&b), "{format:?}");
        }
        assert_eq!(b.msg_id(), "a/3");
        let empty = Batch { transitions: vec![], ..batch() };
        assert_eq!(decode(&empty.encode(), "r", 2, 1).unwrap(), empty);
    }

    /// The binary message is under half the JSON one (HalfCheetah's sizes, 64 rows).
    #[test]
    fn binary_is_compact() {
        let row = Row {
            obs: (0..17).map(|i| i as f32 * 0.123_456_7).collect(),
            action: vec![-0.987_654_3; 6],
            reward: -0.312_345_678_9,
            next_obs: (0..17).map(|i| i as f32 * -0.765_432_1).collect(),
            terminated: false,
            truncated: false,
        };
        let b = Batch { obs_dim: 17, act_dim: 6, transitions: vec![row; 64], ..batch() };
        let (bin, json) = (b.encode().len(), b.encode_as(Format::Json).len());
        assert_eq!(bin, 48 + 2 + 64 * ((17 + 6 + 17) * 4 + 8 + 1));
        assert!(bin * 2 < json, "binary {bin} bytes, JSON {json}");
    }

    #[test]
    fn refuses_other_runs_schemas_shapes_and_garbage() {
        let b = batch();
        for format in [Format::Binary, Format::Json] {
            let bytes = b.encode_as(format);
            assert_eq!(
                decode(&bytes, "other", 2, 1).unwrap_err(),
                Rejected::Run { expected: "other".into(), found: "r".into() }
            );
            assert!(matches!(decode(&bytes, "r", 3, 1).unwrap_err(), Rejected::Shape { expected: 3, found: 2, .. }));
            let mut v = b.clone();
            v.schema = 7;
            assert_eq!(
                decode(&v.encode_as(format), "r", 2, 1).unwrap_err(),
                Rejected::Schema { expected: 2, found: 7 }
            );
            let mut v = b.clone();
            v.transitions[1].reward = f64::NAN;
            let e = decode(&v.encode_as(format), "r", 2, 1).unwrap_err();
            // JSON writes a NaN as null, which does not parse as a reward.
            assert!(matches!(e, Rejected::NotFinite { row: 1, .. } | Rejected::Malformed(_)), "{format:?}: {e}");
        }
        // JSON only: rows whose lengths disagree with the header.
        let mut v = b.clone();
        v.transitions[1].action = vec![0.1, 0.2];
        let e = decode(&v.encode_as(Format::Json), "r", 2, 1).unwrap_err();
        assert!(matches!(e, Rejected::Shape { expected: 1, found: 2, .. }), "{e}");
        let e = decode(b"\x00\xffnot json", "r", 2, 1).unwrap_err();
        assert!(matches!(e, Rejected::Malformed(_)) && e.to_string().contains("magic O2OT"), "{e}");
        assert!(matches!(decode(br#"{"schema": 2, "run_id": "r"}"#, "r", 2, 1).unwrap_err(), Rejected::Malformed(_)));
        // Version 1 (JSON without `sent_ms`) is named as an older format, not as garbage.
        let old = br#"{"schema": 1, "run_id": "r", "actor": "a", "batch": 0, "policy_version": 0, "obs_dim": 2, "act_dim": 1, "transitions": []}"#;
        assert_eq!(decode(old, "r", 2, 1).unwrap_err(), Rejected::Schema { expected: 2, found: 1 });
        assert!(decode(&[], "r", 2, 1).is_err());
    }

    /// Every prefix of a binary message is refused with the field it cut, and no byte string
    /// makes the decoder panic.
    #[test]
    fn binary_refuses_truncated_and_damaged_messages() {
        let bytes = batch().encode();
        for cut in 0..bytes.len() {
            let e = decode(&bytes[..cut], "r", 2, 1).unwrap_err();
            if cut >= MAGIC.len() {
                assert!(matches!(e, Rejected::Truncated { len, .. } if len == cut), "cut at {cut}: {e}");
            }
        }
        let e = decode(&bytes[..bytes.len() - 1], "r", 2, 1).unwrap_err().to_string();
        assert!(e.contains("the done column") && e.contains("truncated"), "{e}");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, "r", 2, 1).unwrap_err().to_string().contains("1 bytes after the last column"));
        let mut v = bytes.clone();
        v[4..6].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(decode(&v, "r", 2, 1).unwrap_err(), Rejected::Schema { expected: 2, found: 3 });
        let mut v = bytes.clone();
        v[6] = 1;
        assert!(decode(&v, "r", 2, 1).unwrap_err().to_string().contains("flags"));
        // A forged row count asks for more than the message holds: refused before allocating.
        let mut v = bytes.clone();
        v[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&v, "r", 2, 1).unwrap_err(), Rejected::Truncated { .. } | Rejected::Malformed(_)));
        let mut v = bytes.clone();
        *v.last_mut().unwrap() = 0x80;
        assert!(decode(&v, "r", 2, 1).unwrap_err().to_string().contains("done byte"));
        // Flipping any one byte never panics (it may still decode: a changed number is a number).
        for i in 0..bytes.len() {
            let mut v = bytes.clone();
            v[i] ^= 0xff;
            let _ = decode(&v, "r", 2, 1);
        }
    }
}
