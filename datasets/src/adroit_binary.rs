//! Adroit's binary-reward setting on D4RL-layout data (the `{pen,door,relocate}-binary-v0`
//! tasks of Cal-QL, WSRL and RLPD).
//!
//! The binary task pays `r = 1[success(s')] − 1`: −1 per step, 0 once the goal holds after the
//! step (AWAC's `mj_envs` fork, `reward_type="binary"`: `reward = goal_achieved - 1`). The
//! success test reads only the observation, so it can be recomputed from any file in D4RL's
//! Adroit layout (formats.md §1.4, envsuites.md §3):
//!
//! - pen (45): ‖obs[39..42]‖ < 0.075 (pen − goal) and ⟨obs[33..36], obs[36..39]⟩ > 0.95
//!   (pen axis · target axis);
//! - door (39): obs[28] ≥ 1.35 (the hinge angle);
//! - relocate (39): ‖obs[36..39]‖ < 0.1 (ball − target).
//!
//! Then Cal-QL's episode processing, which WSRL's loader repeats
//! (`JaxCQL/replay_buffer.py::get_hand_dataset_with_mc_calculation`, `truncate_traj`): an episode
//! that never reaches the goal is dropped; the rest is cut after its **last** success (a
//! trajectory −1 −1 0 0 −1 becomes −1 −1 0 0); every success row is terminal (`dones = rewards ==
//! 0`), so no value is bootstrapped past a goal. Here each success row also closes a
//! Monte-Carlo segment, which is the same return-to-go as the reference's `(1 − done)` masking.
//! RLPD's loader keeps whole trajectories without terminals instead (`rlpd/data/binary_datasets.py`);
//! that variant is not offered.

use crate::error::{DatasetError, Result};
use crate::transitions::Transitions;

/// The Adroit tasks with a binary setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryTask {
    /// `pen-binary-v0`.
    Pen,
    /// `door-binary-v0`.
    Door,
    /// `relocate-binary-v0`.
    Relocate,
}

impl BinaryTask {
    /// The task an env id names (`pen-binary-v0`, `pen-v1`, `door-…`, `relocate-…`).
    pub fn from_env_id(id: &str) -> Result<Self> {
        let task = id.split('-').next().unwrap_or_default();
        match task {
            "pen" => Ok(Self::Pen),
            "door" => Ok(Self::Door),
            "relocate" => Ok(Self::Relocate),
            _ => Err(DatasetError::Invalid(format!(
                "the adroit-binary relabel needs a pen, door or relocate env, found env `{id}`"
            ))),
        }
    }

    /// Observation size of D4RL's layout.
    pub fn obs_dim(self) -> usize {
        match self {
            Self::Pen => 45,
            Self::Door | Self::Relocate => 39,
        }
    }

    /// Whether `obs` (the state after a step) is a success (module docs).
    pub fn success(self, obs: &[f32]) -> bool {
        let norm = |v: &[f32]| v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
        match self {
            Self::Pen => {
                let sim: f64 = obs[33..36].iter().zip(&obs[36..39]).map(|(a, b)| *a as f64 * *b as f64).sum();
                norm(&obs[39..42]) < 0.075 && sim > 0.95
            }
            Self::Door => obs[28] as f64 >= 1.35,
            Self::Relocate => norm(&obs[36..39]) < 0.1,
        }
    }
}

/// What [`relabel`] kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelabelStats {
    /// Episodes with at least one success (kept, cut after the last one).
    pub kept_episodes: usize,
    /// Episodes that never reached the goal (dropped).
    pub dropped_episodes: usize,
}

/// Relabel `t` to the binary reward and apply Cal-QL's episode processing (module docs).
/// Episodes are `t.episode_ends` runs; `t` must not carry MC returns yet (they are computed on
/// the relabelled rewards).
pub fn relabel(t: &mut Transitions, task: BinaryTask) -> Result<RelabelStats> {
    if t.obs_dim != task.obs_dim() {
        return Err(DatasetError::Dimension {
            what: format!("observation size for the {task:?} binary relabel"),
            expected: task.obs_dim(),
            found: t.obs_dim,
        });
    }
    if t.mc_returns.is_some() {
        return Err(DatasetError::Invalid("relabel the rewards before computing MC returns".into()));
    }
    let (od, ad) = (t.obs_dim, t.act_dim);
    let mut out = Transitions { obs_dim: od, act_dim: ad, ..Transitions::default() };
    let mut stats = RelabelStats { kept_episodes: 0, dropped_episodes: 0 };
    let mut start = 0;
    for i in 0..t.len() {
        if t.episode_ends[i] == 0.0 && i + 1 < t.len() {
            continue;
        }
        let rows = start..i + 1;
        start = i + 1;
        let success: Vec<bool> =
            rows.clone().map(|k| task.success(&t.next_observations[k * od..(k + 1) * od])).collect();
        let Some(last) = success.iter().rposition(|s| *s) else {
            stats.dropped_episodes += 1;
            continue;
        };
        stats.kept_episodes += 1;
        for (j, k) in rows.take(last + 1).enumerate() {
            out.observations.extend_from_slice(&t.observations[k * od..(k + 1) * od]);
            out.actions.extend_from_slice(&t.actions[k * ad..(k + 1) * ad]);
            out.next_observations.extend_from_slice(&t.next_observations[k * od..(k + 1) * od]);
            // r = 1[success] − 1; a success is terminal and closes a return-to-go segment.
            let ok = success[j];
            out.rewards.push(if ok { 0.0 } else { -1.0 });
            out.terminals.push(if ok { 1.0 } else { 0.0 });
            out.episode_ends.push(if ok || j == last { 1.0 } else { 0.0 });
        }
    }
    out.validate()?;
    *t = out;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A door "dataset" whose next-state hinge angles are `hinges`, one episode per slice.
    fn door(episodes: &[&[f32]]) -> Transitions {
        let mut t = Transitions { obs_dim: 39, act_dim: 1, ..Transitions::default() };
        for ep in episodes {
            for (j, h) in ep.iter().enumerate() {
                let mut next = vec![0.0; 39];
                next[28] = *h;
                t.observations.extend(vec![j as f32; 39]);
                t.actions.push(j as f32);
                t.next_observations.extend(next);
                t.rewards.push(7.0);
                t.terminals.push(0.0);
                t.episode_ends.push(if j + 1 == ep.len() { 1.0 } else { 0.0 });
            }
        }
        t
    }

    #[test]
    fn episodes_are_cut_after_their_last_success_and_failures_dropped() {
        // Cal-QL's example: −1 −1 0 0 −1 → −1 −1 0 0; a never-opened door is dropped.
        let mut t = door(&[&[0.1, 1.0, 1.4, 1.5, 1.2], &[0.0, 0.2, 0.3], &[1.36, 0.5, 1.35, 0.1]]);
        let stats = relabel(&mut t, BinaryTask::Door).unwrap();
        assert_eq!(stats, RelabelStats { kept_episodes: 2, dropped_episodes: 1 });
        assert_eq!(t.rewards, vec![-1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0]);
        assert_eq!(t.terminals, vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]);
        assert_eq!(t.episode_ends, vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]);
        assert_eq!(t.actions, vec![0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0]);
        assert_eq!(t.observations.len(), 7 * 39);
    }

    #[test]
    fn success_tests_match_the_envs_flags() {
        let mut pen = vec![0.0f32; 45];
        pen[33..36].copy_from_slice(&[0.0, 0.0, 1.0]);
        pen[36..39].copy_from_slice(&[0.0, 0.3, 0.954]);
        pen[39..42].copy_from_slice(&[0.05, 0.0, 0.0]);
        assert!(BinaryTask::Pen.success(&pen));
        pen[39] = 0.08;
        assert!(!BinaryTask::Pen.success(&pen), "too far");
        pen[39] = 0.05;
        pen[38] = 0.9;
        assert!(!BinaryTask::Pen.success(&pen), "similarity 0.9");
        let mut relocate = vec![0.0f32; 39];
        relocate[36..39].copy_from_slice(&[0.05, 0.05, 0.05]);
        assert!(BinaryTask::Relocate.success(&relocate));
        relocate[38] = 0.09;
        assert!(!BinaryTask::Relocate.success(&relocate));
        assert_eq!(BinaryTask::from_env_id("relocate-binary-v0").unwrap(), BinaryTask::Relocate);
        assert!(BinaryTask::from_env_id("hammer-v1").unwrap_err().to_string().contains("hammer-v1"));
        let mut bad = Transitions { obs_dim: 45, ..Transitions::default() };
        assert!(relabel(&mut bad, BinaryTask::Door).unwrap_err().to_string().contains("39"));
    }
}
