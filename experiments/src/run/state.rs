//! The runner's state: its counters, the exact position of its RNG and its evaluation records
//! ([`RunnerState`], a checkpoint's `state.json`), and what one evaluation measured
//! ([`EvalResult`]).
//!
//! Both loops (`runner.rs` off-policy, `onpolicy.rs` on-policy), the fleet learner, checkpoints
//! and `summary.json` carry these records, so they sit below all of them and depend on nothing
//! else of the runner but the seed rule ([`derive_seed`]).

use super::actor::{derive_seed, stream};
use anyhow::{Context, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Bumped when `state.json` changes incompatibly.
pub const FORMAT: u32 = 1;

/// What one evaluation measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    /// Loop step at which it ran.
    pub step: u64,
    /// Mean undiscounted return in the env's own reward.
    pub mean_return: f64,
    /// Standard deviation of the return over episodes.
    pub std_return: f64,
    /// Mean episode length.
    pub mean_length: f64,
    /// D4RL normalized score ×100 of the mean return, when the env has a family.
    pub normalized_score: Option<f64>,
    /// Fraction of successful episodes, when the env reports success.
    pub success_rate: Option<f64>,
}

impl EvalResult {
    /// The record's values, namespaced under `eval/`.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("eval/return", self.mean_return),
            ("eval/return_std", self.std_return),
            ("eval/length", self.mean_length),
        ];
        if let Some(s) = self.normalized_score {
            v.push(("eval/normalized_score", s));
        }
        if let Some(s) = self.success_rate {
            v.push(("eval/success_rate", s));
        }
        v
    }
}

/// The runner's part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerState {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// Loop steps done (gradient steps offline + env steps online).
    pub step: u64,
    /// Gradient updates done.
    pub grad_step: u64,
    /// Env steps done.
    pub env_step: u64,
    /// Index of the next training episode.
    pub episode: u64,
    /// The runner RNG (batch sampling, random actions): its 32-byte seed in hex, its stream,
    /// and its word position (a u128, as a decimal string).
    pub rng_seed: String,
    /// The RNG's stream.
    pub rng_stream: u64,
    /// The RNG's word position, a u128 as a decimal string.
    pub rng_word_pos: String,
    /// Bytes of `metrics.jsonl` written when the checkpoint was taken.
    pub metrics_len: u64,
    /// The run reached its last step.
    pub finished: bool,
    /// The latest evaluation.
    pub last_eval: Option<EvalResult>,
    /// The best evaluation so far (by mean return).
    pub best_eval: Option<EvalResult>,
    /// Evaluations taken when a phase ended (`eval.at_phase_end`).
    #[serde(default)]
    pub phase_evals: Vec<PhaseEval>,
    /// A fleet learner's position in its transition stream: the last stream sequence whose
    /// transitions this checkpoint's replay buffer holds (docs/fleet.md); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_seq: Option<u64>,
}

/// An evaluation at the end of a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseEval {
    /// The phase that ended: `offline`, `random`, `warmup`, `online`; `start` for the
    /// evaluation before the first step.
    pub phase: String,
    /// Its result.
    pub eval: EvalResult,
    /// Env steps done at that moment.
    pub env_step: u64,
    /// Seconds since this process started the run.
    pub wall_s: f64,
}

impl RunnerState {
    /// Remember an evaluation: the last one, and the best one so far (by mean return).
    pub fn record_eval(&mut self, r: EvalResult) {
        if self.best_eval.as_ref().is_none_or(|b| r.mean_return > b.mean_return) {
            self.best_eval = Some(r);
        }
        self.last_eval = Some(r);
    }

    /// Capture the RNG's exact position.
    pub fn set_rng(&mut self, rng: &ChaCha8Rng) {
        self.rng_seed = rng.get_seed().iter().map(|b| format!("{b:02x}")).collect();
        self.rng_stream = rng.get_stream();
        self.rng_word_pos = rng.get_word_pos().to_string();
    }

    /// Rebuild the RNG at the saved position.
    pub fn rng(&self) -> Result<ChaCha8Rng> {
        let bytes: Vec<u8> = (0..self.rng_seed.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(self.rng_seed.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<_, _>>()
            .with_context(|| format!("rng_seed {:?} is not hex", self.rng_seed))?;
        let seed: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| anyhow::anyhow!("rng_seed: expected 32 bytes, found {}", b.len()))?;
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(self.rng_stream);
        rng.set_word_pos(
            self.rng_word_pos
                .parse()
                .with_context(|| format!("rng_word_pos {:?} is not a number", self.rng_word_pos))?,
        );
        Ok(rng)
    }
}

/// A fresh state at step 0, its RNG at `rng`'s position.
pub fn initial_state(rng: &ChaCha8Rng) -> RunnerState {
    let mut s = RunnerState {
        format: FORMAT,
        step: 0,
        grad_step: 0,
        env_step: 0,
        episode: 0,
        rng_seed: String::new(),
        rng_stream: 0,
        rng_word_pos: String::new(),
        metrics_len: 0,
        finished: false,
        last_eval: None,
        best_eval: None,
        phase_evals: Vec::new(),
        stream_seq: None,
    };
    s.set_rng(rng);
    s
}

/// The state of a run with seed `run_seed` at step 0: its runner RNG seeded from the run seed.
pub fn fresh(run_seed: u64) -> RunnerState {
    initial_state(&ChaCha8Rng::seed_from_u64(derive_seed(run_seed, stream::RUNNER_RNG, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn rng_position_round_trips_exactly() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        for _ in 0..37 {
            rng.next_u32();
        }
        let mut s = initial_state(&rng);
        s.set_rng(&rng);
        let json = serde_json::to_string(&s).unwrap();
        let back: RunnerState = serde_json::from_str(&json).unwrap();
        let mut restored = back.rng().unwrap();
        let a: Vec<u64> = (0..10).map(|_| rng.next_u64()).collect();
        let b: Vec<u64> = (0..10).map(|_| restored.next_u64()).collect();
        assert_eq!(a, b);
    }
}
