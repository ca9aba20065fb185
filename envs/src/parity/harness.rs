//! The harness every parity check shares: options, one episode's trace, the report, the
//! widened random actions, the call into a Python reference script, and the comparison.
//!
//! Observations are compared in `f64`. A value passes when |ours − theirs| ≤ tol · max(1, |theirs|):
//! absolute for small values, relative for large ones.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::EnvError;

/// The default tolerance: 1e−6, absolute below 1 and relative above.
pub const DEFAULT_TOLERANCE: f64 = 1e-6;

/// What to run.
#[derive(Debug, Clone)]
pub struct ParityOptions {
    /// Total env steps across episodes.
    pub steps: usize,
    /// Seed of our env's resets and of the action sequence.
    pub seed: u64,
    /// Time limit used on both sides (default: the id's `max_episode_steps`); a short limit
    /// makes short runs cross truncations.
    pub max_episode_steps: Option<usize>,
}

impl Default for ParityOptions {
    fn default() -> Self {
        Self { steps: 3000, seed: 0, max_episode_steps: None }
    }
}

/// One episode as one side saw it: the start observation and, per step, the observation,
/// reward and flags (what the reference script returns, and what our side records).
#[derive(Deserialize, Default)]
pub(crate) struct Trace {
    pub(crate) obs0: Vec<f64>,
    pub(crate) obs: Vec<Vec<f64>>,
    pub(crate) reward: Vec<f64>,
    pub(crate) terminated: Vec<bool>,
    pub(crate) truncated: Vec<bool>,
}

impl Trace {
    /// Record one step.
    pub(crate) fn push(&mut self, obs: Vec<f64>, step: &crate::env::Step) {
        self.obs.push(obs);
        self.reward.push(step.reward);
        self.terminated.push(step.terminated);
        self.truncated.push(step.truncated);
    }
}

/// The comparison's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ParityReport {
    /// Our id.
    pub id: String,
    /// What it was compared against, in words.
    pub reference: String,
    /// Env steps compared.
    pub steps: usize,
    /// Episodes (resets) crossed.
    pub episodes: usize,
    /// Steps on which our env terminated.
    pub terminations: usize,
    /// Steps on which our time limit truncated.
    pub truncations: usize,
    /// Largest |ours − theirs| over all observation numbers (start observations included).
    pub max_obs_abs_diff: f64,
    /// Largest |ours − theirs| / max(1, |theirs|) over observation numbers.
    pub max_obs_rel_diff: f64,
    /// Largest |ours − theirs| over rewards.
    pub max_reward_abs_diff: f64,
    /// Largest |ours − theirs| / max(1, |theirs|) over rewards.
    pub max_reward_rel_diff: f64,
    /// Steps whose `terminated` differs.
    pub terminated_mismatches: usize,
    /// Steps whose `truncated` differs.
    pub truncated_mismatches: usize,
    /// The first step (0-based, over the whole run) with any flag mismatch.
    pub first_flag_mismatch: Option<usize>,
    /// Observation numbers beyond the reference's length that were not exactly 0 (ant-v2).
    pub nonzero_padding: usize,
    /// Goal-reaching tasks: our start qpos/qvel numbers and sampled goals (the maze's own, not
    /// the placed ones) that fall outside the box spanned by the oracle's own 200 resets widened
    /// by 10% of its width (a distribution check: the random streams differ).
    pub start_outside_support: usize,
    /// Largest |ours − theirs| over the settled start state (Fetch's reset settling), when
    /// the task has one.
    pub max_initial_state_diff: Option<f64>,
    /// The tolerance the verdict uses.
    pub tolerance: f64,
}

impl ParityReport {
    /// Whether every value is within tolerance and every flag matches.
    pub fn passed(&self) -> bool {
        self.max_obs_rel_diff <= self.tolerance
            && self.max_reward_rel_diff <= self.tolerance
            && self.terminated_mismatches == 0
            && self.truncated_mismatches == 0
            && self.nonzero_padding == 0
            && self.start_outside_support == 0
            && self.max_initial_state_diff.is_none_or(|d| d <= self.tolerance)
    }
}

/// An action drawn from U[low − 0.2·w, high + 0.2·w], w = high − low: some actions leave the
/// box on purpose, to exercise the control-cost and clipping rules.
pub(crate) fn widened_action(space: &crate::env::BoxSpace, rng: &mut rand_chacha::ChaCha8Rng) -> Vec<f32> {
    space
        .low
        .iter()
        .zip(&space.high)
        .map(|(lo, hi)| {
            let w = hi - lo;
            lo - 0.2 * w + 1.4 * w * rng.gen::<f32>()
        })
        .collect()
}

/// Ask the reference script to replay `episodes`.
pub(crate) fn run_reference<Req: Serialize, Rep: serde::de::DeserializeOwned>(
    python: &Path,
    script: &Path,
    req: &Req,
) -> Result<Rep, EnvError> {
    let fail = |message: String| EnvError::Reference { python: python.to_path_buf(), message };
    if !python.exists() {
        return Err(fail(format!(
            "the Python interpreter does not exist; {} (or set O2O_PYTHON to a Python with gymnasium[mujoco]==1.4.0)",
            crate::assets::INSTALL_HINT
        )));
    }
    if !script.is_file() {
        return Err(fail(format!("reference script `{}` not found", script.display())));
    }
    let body = serde_json::to_vec(req).map_err(|e| fail(format!("cannot encode the request: {e}")))?;
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start it: {e}")))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin pipe".into()))?;
    // Write from a thread so a child that writes before reading cannot deadlock us.
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let out = child.wait_with_output().map_err(|e| fail(format!("waiting for it: {e}")))?;
    let written = writer.join().map_err(|_| fail("the writer thread panicked".into()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: String =
            stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(fail(format!("`{}` exited with {}:\n{tail}", script.display(), out.status)));
    }
    written.map_err(|e| fail(format!("writing the request: {e}")))?;
    serde_json::from_slice(&out.stdout).map_err(|e| fail(format!("cannot parse its reply: {e}")))
}

/// Running maxima of |a − b| and |a − b| / max(1, |b|).
#[derive(Default)]
pub(crate) struct Diff {
    pub(crate) abs: f64,
    pub(crate) rel: f64,
}

impl Diff {
    pub(crate) fn add(&mut self, ours: f64, theirs: f64) {
        let d = (ours - theirs).abs();
        // NaN on either side counts as an infinite difference.
        let d = if d.is_nan() { f64::INFINITY } else { d };
        self.abs = self.abs.max(d);
        self.rel = self.rel.max(d / theirs.abs().max(1.0));
    }
}

/// Compare our episodes with the reference's, observation number by number (the first
/// `compared_obs_dims` of ours, the rest of which must be exactly 0), reward by reward and flag
/// by flag.
pub(crate) fn compare(
    id: &str,
    reference: String,
    ours: &[&Trace],
    theirs: &[Trace],
    compared_obs_dims: Option<usize>,
) -> Result<ParityReport, EnvError> {
    let mut report = ParityReport {
        id: id.to_string(),
        reference,
        steps: 0,
        episodes: ours.len(),
        terminations: 0,
        truncations: 0,
        max_obs_abs_diff: 0.0,
        max_obs_rel_diff: 0.0,
        max_reward_abs_diff: 0.0,
        max_reward_rel_diff: 0.0,
        terminated_mismatches: 0,
        truncated_mismatches: 0,
        first_flag_mismatch: None,
        nonzero_padding: 0,
        start_outside_support: 0,
        max_initial_state_diff: None,
        tolerance: DEFAULT_TOLERANCE,
    };
    let mut obs_diff = Diff::default();
    let mut rew_diff = Diff::default();
    let mut compare_obs = |ours: &[f64], theirs: &[f64], report: &mut ParityReport| -> Result<(), EnvError> {
        let n = compared_obs_dims.unwrap_or(ours.len());
        if theirs.len() != n || ours.len() < n {
            return Err(EnvError::Shape {
                what: format!("{id}: reference observation"),
                expected: n,
                found: theirs.len(),
            });
        }
        for (a, b) in ours.iter().zip(theirs) {
            obs_diff.add(*a, *b);
        }
        report.nonzero_padding += ours[n..].iter().filter(|v| **v != 0.0).count();
        Ok(())
    };
    for (o, t) in ours.iter().zip(theirs) {
        if t.obs.len() != o.obs.len()
            || t.reward.len() != o.reward.len()
            || t.terminated.len() != o.terminated.len()
            || t.truncated.len() != o.truncated.len()
        {
            return Err(EnvError::Shape {
                what: format!("{id}: reference episode steps"),
                expected: o.obs.len(),
                found: t.obs.len(),
            });
        }
        compare_obs(&o.obs0, &t.obs0, &mut report)?;
        for k in 0..o.obs.len() {
            compare_obs(&o.obs[k], &t.obs[k], &mut report)?;
            rew_diff.add(o.reward[k], t.reward[k]);
            let term_bad = o.terminated[k] != t.terminated[k];
            let trunc_bad = o.truncated[k] != t.truncated[k];
            report.terminated_mismatches += term_bad as usize;
            report.truncated_mismatches += trunc_bad as usize;
            if (term_bad || trunc_bad) && report.first_flag_mismatch.is_none() {
                report.first_flag_mismatch = Some(report.steps);
            }
            report.terminations += o.terminated[k] as usize;
            report.truncations += o.truncated[k] as usize;
            report.steps += 1;
        }
    }
    report.max_obs_abs_diff = obs_diff.abs;
    report.max_obs_rel_diff = obs_diff.rel;
    report.max_reward_abs_diff = rew_diff.abs;
    report.max_reward_rel_diff = rew_diff.rel;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_is_absolute_below_one_and_relative_above() {
        let mut d = Diff::default();
        d.add(0.5 + 1e-7, 0.5);
        assert!((d.rel - 1e-7).abs() < 1e-12);
        d.add(1000.0 + 1e-4, 1000.0);
        assert!((d.abs - 1e-4).abs() < 1e-9);
        assert!((d.rel - 1e-7).abs() < 1e-9);
        d.add(f64::NAN, 1.0);
        assert!(d.rel.is_infinite());
    }
}
