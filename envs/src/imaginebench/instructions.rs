//! ImagineBench Mujoco-v0's instruction sentences and how a sentence becomes the vector
//! appended to the observation.
//!
//! The sentences are the benchmark's task definitions (`imagine_bench/envs/mujoco/env.py`,
//! formats.md §3.3): ten paraphrases for each real and rephrase task, one sentence for each
//! easy and hard task. They are data the release's encoding table is keyed by, so they are
//! reproduced exactly.
//!
//! Two encoders ([`InstructionEncoder`]):
//! - **table**: ImagineBench's own `{sentence → 768-d vector}` (`mujoco_encode.npy`, converted
//!   once to HDF5 by `scripts/imaginebench_convert.py`); the experiments crate reads the file
//!   and hands the vectors over (this crate reads no files).
//! - **built-in** ([`builtin_embedding`]), so the tasks run without the release files: a
//!   deterministic hashed bag of words. Each lower-cased word `w` (runs of ASCII letters and
//!   digits) gets a pseudo-random vector `v_w ∈ [−1, 1)^D` from SplitMix64 seeded with
//!   FNV-1a-64(w); the sentence vector is `Σ_w v_w / ‖Σ_w v_w‖`. It is not a language model:
//!   sentences that share words get similar vectors ("Move forward." and "Move forward
//!   faster." have cosine ≈ 0.8) and synonyms do not.

use std::collections::HashMap;

/// Size of ImagineBench's instruction encodings (and of the built-in one by default).
pub const EMBED_DIM: usize = 768;

/// Jump a step forward (real level).
pub const JUMP_FORWARD: &[&str] = &[
    "Jump a step forward.",
    "Jump a step ahead.",
    "Leap a step forward.",
    "Leap a step ahead.",
    "Hop a step forward.",
    "Hop a step ahead.",
    "Spring a step forward.",
    "Spring a step ahead.",
    "Bound a step forward.",
    "Bound a step ahead.",
];

/// Jump a step backward (real level).
pub const JUMP_BACKWARD: &[&str] = &[
    "Jump a step backward.",
    "Jump a step back.",
    "Leap a step backward.",
    "Leap a step back.",
    "Hop a step backward.",
    "Hop a step back.",
    "Spring a step backward.",
    "Spring a step back.",
    "Bound a step backward.",
    "Bound a step back.",
];

/// Move forward (real level).
pub const MOVE_FORWARD: &[&str] = &[
    "Run forward.",
    "Run ahead.",
    "Sprint forward.",
    "Sprint ahead.",
    "Rush forward.",
    "Rush ahead.",
    "Dash forward.",
    "Dash ahead.",
    "Move forward.",
    "Move ahead.",
];

/// Move backward (real level).
pub const MOVE_BACKWARD: &[&str] = &[
    "Run backward.",
    "Run back.",
    "Sprint backward.",
    "Sprint back.",
    "Rush backward.",
    "Rush back.",
    "Dash backward.",
    "Dash back.",
    "Move backward.",
    "Move back.",
];

/// Jump forward, paraphrased (rephrase level).
pub const REP_JUMP_FORWARD: &[&str] = &[
    "Jump a step forth.",
    "Jump one step ahead.",
    "Leap a step forth.",
    "Leap one step ahead.",
    "Skip a step forth.",
    "Skip one step ahead.",
    "Hop a step forth.",
    "Hop one step forward.",
    "Spring a step forth.",
    "Spring one step ahead.",
];

/// Jump backward, paraphrased (rephrase level).
pub const REP_JUMP_BACKWARD: &[&str] = &[
    "Jump one step backward.",
    "Jump one step back.",
    "Leap one step backward.",
    "Leap one step back.",
    "Skip one step backward.",
    "Skip one step back.",
    "Hop one step backward.",
    "Hop one step back.",
    "Spring one step backward.",
    "Spring one step back.",
];

/// Move forward, paraphrased (rephrase level).
pub const REP_MOVE_FORWARD: &[&str] = &[
    "Speed forward.",
    "Speed ahead.",
    "Race forward.",
    "Race ahead.",
    "Charge forward.",
    "Charge ahead.",
    "Bolt forward.",
    "Bolt ahead.",
    "Advance forward.",
    "Advance ahead.",
];

/// Move backward, paraphrased (rephrase level).
pub const REP_MOVE_BACKWARD: &[&str] = &[
    "Speed backward.",
    "Speed back.",
    "Race backward.",
    "Race back.",
    "Retreat backward.",
    "Retreat back.",
    "Hurry backward.",
    "Hurry back.",
    "Backpedal backward.",
    "Backpedal back.",
];

/// Easy level.
pub const MOVE_FORWARD_FAST: &[&str] = &["Move forward faster."];
/// Easy level.
pub const MOVE_BACKWARD_FAST: &[&str] = &["Move backward faster."];
/// Hard level.
pub const MOVE_FORWARD_BACKWARD: &[&str] = &["Move forward and slow down. Move backward."];
/// Hard level.
pub const MOVE_BACKWARD_FORWARD: &[&str] = &["Move backward and slow down. Move forward."];
/// Hard level.
pub const JUMP_IN_PLACE: &[&str] = &["Jump in the original position."];

/// Where instruction vectors come from.
#[derive(Debug, Clone, PartialEq)]
pub enum InstructionEncoder {
    /// [`builtin_embedding`] with `dim` numbers.
    BuiltIn {
        /// Vector size (768 to match ImagineBench's).
        dim: usize,
    },
    /// A `{sentence → vector}` table (ImagineBench's `mujoco_encode.npy`, converted).
    Table {
        /// Where the table came from, for manifests and errors.
        source: String,
        /// Vector size (every vector has it).
        dim: usize,
        /// The vectors.
        vectors: HashMap<String, Vec<f32>>,
    },
}

impl Default for InstructionEncoder {
    fn default() -> Self {
        Self::BuiltIn { dim: EMBED_DIM }
    }
}

impl InstructionEncoder {
    /// A table encoder; every vector must have the same non-zero length.
    pub fn table(source: impl Into<String>, vectors: HashMap<String, Vec<f32>>) -> Result<Self, String> {
        let source = source.into();
        let dim =
            vectors.values().next().map(Vec::len).ok_or_else(|| format!("{source}: the instruction table is empty"))?;
        if dim == 0 {
            return Err(format!("{source}: the instruction vectors have 0 numbers"));
        }
        if let Some((s, v)) = vectors.iter().find(|(_, v)| v.len() != dim) {
            return Err(format!(
                "{source}: the vector of {s:?} has {} numbers, expected {dim} like the others",
                v.len()
            ));
        }
        if let Some((s, _)) = vectors.iter().find(|(_, v)| v.iter().any(|x| !x.is_finite())) {
            return Err(format!("{source}: the vector of {s:?} is not finite"));
        }
        Ok(Self::Table { source, dim, vectors })
    }

    /// Vector size.
    pub fn dim(&self) -> usize {
        match self {
            Self::BuiltIn { dim } | Self::Table { dim, .. } => *dim,
        }
    }

    /// In words, for manifests: `built-in hashed bag of words (768)` or `table <source> (768)`.
    pub fn describe(&self) -> String {
        match self {
            Self::BuiltIn { dim } => format!("built-in hashed bag of words ({dim})"),
            Self::Table { source, dim, .. } => format!("table {source} ({dim})"),
        }
    }

    /// The vector of `sentence`; a table without it is an error naming the sentence.
    pub fn encode(&self, sentence: &str) -> Result<Vec<f32>, String> {
        match self {
            Self::BuiltIn { dim } => Ok(builtin_embedding(sentence, *dim)),
            Self::Table { source, vectors, .. } => vectors
                .get(sentence)
                .cloned()
                .ok_or_else(|| format!("{source}: no instruction vector for {sentence:?}")),
        }
    }
}

/// FNV-1a, 64 bit.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One SplitMix64 step (state advanced, output returned).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The built-in encoding (module docs): v = Σ_w v_w / ‖Σ_w v_w‖ over the sentence's lower-cased
/// words, v_w[i] = 2·(u_i / 2⁶⁴) − 1 with u_i the i-th SplitMix64 output seeded by FNV-1a-64(w).
/// A sentence without words gives the zero vector.
pub fn builtin_embedding(sentence: &str, dim: usize) -> Vec<f32> {
    let mut sum = vec![0.0f64; dim];
    let lower = sentence.to_ascii_lowercase();
    for word in lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut state = fnv1a64(word.as_bytes());
        for s in sum.iter_mut() {
            *s += 2.0 * (splitmix64(&mut state) as f64 / 18_446_744_073_709_551_616.0) - 1.0;
        }
    }
    let norm = sum.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm == 0.0 {
        return vec![0.0; dim];
    }
    sum.iter().map(|v| (v / norm) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn builtin_is_deterministic_unit_and_word_based() {
        let a = builtin_embedding("Move forward.", EMBED_DIM);
        assert_eq!(a, builtin_embedding("move   FORWARD", EMBED_DIM), "case and punctuation do not matter");
        assert!((cos(&a, &a) - 1.0).abs() < 1e-5);
        let fast = builtin_embedding("Move forward faster.", EMBED_DIM);
        let back = builtin_embedding("Move backward.", EMBED_DIM);
        let other = builtin_embedding("Jump in the original position.", EMBED_DIM);
        // Two of three words shared: cos ≈ 2/√6 ≈ 0.82; one of two: ≈ 0.5; none: ≈ 0 (±3/√768).
        assert!((cos(&a, &fast) - 0.816).abs() < 0.08, "{}", cos(&a, &fast));
        assert!((cos(&a, &back) - 0.5).abs() < 0.08, "{}", cos(&a, &back));
        assert!(cos(&a, &other).abs() < 0.15, "{}", cos(&a, &other));
        assert_eq!(builtin_embedding("...", 4), vec![0.0; 4]);
        // Pinned numbers (also computed by an independent Python transcription of the rule), so
        // a change of the encoding cannot pass silently.
        let pin = builtin_embedding("Move forward.", 4);
        for (got, want) in pin.iter().zip([-0.113_995_03, -0.762_073_2, 0.487_652_44, -0.410_420_06]) {
            assert!((got - want).abs() < 1e-6, "{pin:?}");
        }
    }

    #[test]
    fn table_checks_sizes_and_names_missing_sentences() {
        let mut m = HashMap::new();
        m.insert("a".to_string(), vec![1.0, 2.0]);
        let t = InstructionEncoder::table("t.hdf5", m.clone()).unwrap();
        assert_eq!(t.dim(), 2);
        assert_eq!(t.encode("a").unwrap(), vec![1.0, 2.0]);
        let err = t.encode("Run forward.").unwrap_err();
        assert!(err.contains("t.hdf5") && err.contains("Run forward."), "{err}");
        m.insert("b".to_string(), vec![1.0]);
        let err = InstructionEncoder::table("t", m).unwrap_err();
        assert!(err.contains("has 1 numbers, expected 2") || err.contains("has 2 numbers, expected 1"), "{err}");
        assert!(InstructionEncoder::table("t", HashMap::new()).is_err());
    }

    #[test]
    fn every_level_sentence_is_distinct() {
        let all: Vec<&str> = [
            JUMP_FORWARD,
            JUMP_BACKWARD,
            MOVE_FORWARD,
            MOVE_BACKWARD,
            REP_JUMP_FORWARD,
            REP_JUMP_BACKWARD,
            REP_MOVE_FORWARD,
            REP_MOVE_BACKWARD,
            MOVE_FORWARD_FAST,
            MOVE_BACKWARD_FAST,
            MOVE_FORWARD_BACKWARD,
            MOVE_BACKWARD_FORWARD,
            JUMP_IN_PLACE,
        ]
        .concat();
        let set: std::collections::HashSet<&str> = all.iter().copied().collect();
        assert_eq!(all.len(), 85);
        assert_eq!(set.len(), 85);
    }
}
