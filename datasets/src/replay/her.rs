//! Hindsight experience replay (Andrychowicz et al. 2017, arXiv 1707.01495), `future` strategy.
//!
//! A goal-conditioned task flattens its observation as parts: an achieved goal, a desired goal
//! and the rest ([`GoalSlices`]). When a row (s_t, a_t, r_t, s_{t+1}) is sampled, with
//! probability p = 1 − 1/(1 + k) its desired goal g is replaced — in both s_t and s_{t+1} — by
//! g' = ag(s_{t'+1}), the goal achieved after a step t' drawn uniformly from t..=T of the same
//! episode (T its last stored step, or the newest step of the episode still running), and the
//! reward is recomputed with the task's own function: r' = scale · R(ag(s_{t+1}), g') + shift,
//! R = −(‖ag − g'‖ > ε) (sparse) or −‖ag − g'‖ (dense), the run's reward transform applied as to
//! every stored reward. With k = 4 (the paper's default), 80% of sampled rows are relabelled.
//!
//! The paper's `future` takes the goal of a step *after* t; taking t' = t too (the goal the
//! transition itself reached, always a success) follows the reference implementation
//! (baselines' `her_sampler`: `future_offset` ∈ [0, T − t) on the achieved goals after each step).
//!
//! The terminal flag is relabelled only for a task whose success ends the episode
//! ([`GoalReward::SuccessTerminal`], o2o's `Fetch*Terminal-v4`): there a relabelled row is
//! terminal exactly when its next state reaches the new goal, as the env would have ended it.
//! The other goal tasks never terminate, so a new goal changes no episode end and the flag is
//! kept. Not relabelled: the Monte-Carlo return, which is set to "pending" (−∞, Cal-QL's "no
//! floor") on relabelled rows because the return to go belongs to the old goal.
//! Relabelling happens as a row is copied into a batch; the buffer itself is never changed, and
//! every draw comes from the sampler's RNG, so a resumed run relabels exactly as before.
//!
//! Which rows are drawn is the buffer's choice: with
//! [`ReplayBuffer::set_closed_episodes_only`](super::ReplayBuffer::set_closed_episodes_only)
//! only rows of finished episodes, so no goal of the episode still running is ever used (SB3's
//! `HerReplayBuffer`, the runner's default for HER runs); without it the open episode's rows
//! are drawn too, their future goals taken up to its newest step.

use rand::Rng;

use crate::error::{DatasetError, Result};

/// Where the goal parts sit in a flat observation, as `[start, end)` ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoalSlices {
    /// The achieved goal.
    pub achieved: [usize; 2],
    /// The desired goal (same width as the achieved one).
    pub desired: [usize; 2],
}

/// The task's reward for an achieved/desired goal pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GoalReward {
    /// −1 when ‖ag − g‖ > `threshold`, else 0 (the Fetch tasks: 0.05 m).
    Sparse {
        /// ε.
        threshold: f64,
    },
    /// −‖ag − g‖.
    Dense,
    /// 1 when ‖ag − g‖ < `threshold`, which ends the episode, else 0 (the gold reward of
    /// o2o's `Fetch*Terminal-v4`).
    SuccessTerminal {
        /// ε.
        threshold: f64,
    },
}

impl GoalReward {
    /// R(ag, g), computed in f64 from the stored f32 values.
    pub fn reward(&self, achieved: &[f32], desired: &[f32]) -> f64 {
        let d = distance(achieved, desired);
        match self {
            GoalReward::Sparse { threshold } => -((d > *threshold) as i32 as f64),
            GoalReward::Dense => -d,
            GoalReward::SuccessTerminal { threshold } => (d < *threshold) as i32 as f64,
        }
    }

    /// Whether the task ends when `achieved` reaches `desired`: `Some(ends)` for a task whose
    /// success terminates, `None` for one that never terminates (the flag is then kept).
    pub fn terminal(&self, achieved: &[f32], desired: &[f32]) -> Option<bool> {
        match self {
            GoalReward::SuccessTerminal { threshold } => Some(distance(achieved, desired) < *threshold),
            GoalReward::Sparse { .. } | GoalReward::Dense => None,
        }
    }
}

/// ‖ag − g‖ in f64.
fn distance(achieved: &[f32], desired: &[f32]) -> f64 {
    achieved.iter().zip(desired).map(|(a, g)| (*a as f64 - *g as f64).powi(2)).sum::<f64>().sqrt()
}

/// HER's settings for one buffer: where the goals are, how rewards are recomputed, how often.
#[derive(Debug, Clone, PartialEq)]
pub struct Her {
    goals: GoalSlices,
    reward: GoalReward,
    /// The relabel probability 1 − 1/(1 + k).
    future_p: f64,
    /// The run's reward transform r' = scale · r + shift, as stored rewards get it.
    scale: f64,
    shift: f64,
}

impl Her {
    /// `future` relabelling with k relabelled goals per real one (p = 1 − 1/(1 + k)) for
    /// observations of `obs_dim` numbers. Fails when a goal range is empty, reversed, outside
    /// the observation, or the two differ in width, or when k is negative or not finite.
    pub fn future(goals: GoalSlices, reward: GoalReward, k: f64, obs_dim: usize) -> Result<Self> {
        let [a0, a1] = goals.achieved;
        let [d0, d1] = goals.desired;
        if a0 >= a1 || d0 >= d1 || a1 > obs_dim || d1 > obs_dim || a1 - a0 != d1 - d0 {
            return Err(DatasetError::Invalid(format!(
                "HER goal layout: achieved {a0}..{a1} and desired {d0}..{d1} must be non-empty ranges of equal width inside the {obs_dim}-number observation"
            )));
        }
        if !(k.is_finite() && k >= 0.0) {
            return Err(DatasetError::Invalid(format!(
                "HER: k (relabelled goals per real one) must be a finite number ≥ 0, found {k}"
            )));
        }
        Ok(Self { goals, reward, future_p: 1.0 - 1.0 / (1.0 + k), scale: 1.0, shift: 0.0 })
    }

    /// The same relabelling, with recomputed rewards transformed as r' = scale · r + shift.
    pub fn with_reward_transform(self, scale: f64, shift: f64) -> Self {
        Self { scale, shift, ..self }
    }

    /// The probability that a sampled row is relabelled, 1 − 1/(1 + k).
    pub fn future_p(&self) -> f64 {
        self.future_p
    }

    /// The goal layout.
    pub fn goals(&self) -> GoalSlices {
        self.goals
    }

    /// Draws whether to relabel a row and, if so, the offset of its future step: uniform in
    /// 0..=`steps_to_end` (the steps from the row to its episode's last stored row).
    pub(crate) fn draw<R: Rng + ?Sized>(&self, steps_to_end: usize, rng: &mut R) -> Option<usize> {
        if rng.gen::<f64>() < self.future_p {
            Some(rng.gen_range(0..=steps_to_end))
        } else {
            None
        }
    }

    /// Rewrites one batch row for the goal `future_next_obs`'s achieved goal: the desired goal
    /// of `obs` and `next_obs`, the reward from `next_obs`'s achieved goal, and, for a task
    /// whose success terminates, the terminal flag (1 exactly when the new goal is reached).
    pub(crate) fn relabel(
        &self,
        obs: &mut [f32],
        next_obs: &mut [f32],
        reward: &mut f32,
        terminal: &mut f32,
        future_next_obs: &[f32],
    ) {
        let [a0, a1] = self.goals.achieved;
        let [d0, d1] = self.goals.desired;
        let goal = &future_next_obs[a0..a1];
        obs[d0..d1].copy_from_slice(goal);
        next_obs[d0..d1].copy_from_slice(goal);
        let r = self.reward.reward(&next_obs[a0..a1], &next_obs[d0..d1]);
        *reward = (self.scale * r + self.shift) as f32;
        if let Some(ends) = self.reward.terminal(&next_obs[a0..a1], &next_obs[d0..d1]) {
            *terminal = ends as u8 as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewards_and_layout_checks() {
        let sparse = GoalReward::Sparse { threshold: 0.05 };
        assert_eq!(sparse.reward(&[0.0, 0.0, 0.0], &[0.049, 0.0, 0.0]), 0.0);
        assert_eq!(sparse.reward(&[0.0, 0.0, 0.0], &[0.0, 0.051, 0.0]), -1.0);
        assert!((GoalReward::Dense.reward(&[0.0, 0.0], &[3.0, 4.0]) + 5.0).abs() < 1e-12);
        let g = GoalSlices { achieved: [0, 3], desired: [3, 6] };
        assert_eq!(Her::future(g, sparse, 4.0, 10).unwrap().future_p(), 0.8);
        assert_eq!(Her::future(g, sparse, 0.0, 10).unwrap().future_p(), 0.0);
        assert!(Her::future(g, sparse, 4.0, 5).is_err(), "desired goal past the observation");
        assert!(Her::future(GoalSlices { achieved: [0, 2], desired: [3, 6] }, sparse, 4.0, 10).is_err());
        assert!(Her::future(g, sparse, -1.0, 10).is_err());
        assert!(Her::future(g, sparse, f64::NAN, 10).is_err());
    }

    #[test]
    fn relabel_rewrites_both_goals_and_the_reward() {
        let g = GoalSlices { achieved: [0, 1], desired: [1, 2] };
        let her =
            Her::future(g, GoalReward::Sparse { threshold: 0.05 }, 4.0, 3).unwrap().with_reward_transform(2.0, 1.0);
        let (mut obs, mut next, mut r, mut term) = (vec![0.0, 9.0, 7.0], vec![0.5, 9.0, 7.0], -1.0, 0.0);
        her.relabel(&mut obs, &mut next, &mut r, &mut term, &[0.52, 3.0, 3.0]);
        assert_eq!(obs, vec![0.0, 0.52, 7.0]);
        assert_eq!(next, vec![0.5, 0.52, 7.0]);
        assert_eq!(r, 1.0, "success (0) transformed: 2·0 + 1");
        assert_eq!(term, 0.0, "a task that never terminates keeps the flag");
        her.relabel(&mut obs, &mut next, &mut r, &mut term, &[0.9, 3.0, 3.0]);
        assert_eq!(r, -1.0, "failure (−1) transformed: 2·(−1) + 1");
    }

    /// Where success terminates (`Fetch*Terminal-v4`), a relabelled row pays 1 and is terminal
    /// exactly when its next state reaches the new goal; a row that was terminal for its old
    /// goal is not for a goal it misses.
    #[test]
    fn relabel_sets_the_terminal_flag_where_success_terminates() {
        let g = GoalSlices { achieved: [0, 1], desired: [1, 2] };
        let gold = GoalReward::SuccessTerminal { threshold: 0.05 };
        assert_eq!(gold.reward(&[0.0], &[0.049]), 1.0);
        assert_eq!(gold.reward(&[0.0], &[0.05]), 0.0, "success is d < ε, as the env's");
        assert_eq!(gold.terminal(&[0.0], &[0.01]), Some(true));
        assert_eq!(GoalReward::Sparse { threshold: 0.05 }.terminal(&[0.0], &[0.0]), None);
        let her = Her::future(g, gold, 4.0, 3).unwrap();
        let (mut obs, mut next, mut r, mut term) = (vec![0.0, 9.0, 7.0], vec![0.5, 9.0, 7.0], 0.0, 0.0);
        her.relabel(&mut obs, &mut next, &mut r, &mut term, &[0.52, 3.0, 3.0]);
        assert_eq!((r, term), (1.0, 1.0), "the new goal is reached: success, terminal");
        her.relabel(&mut obs, &mut next, &mut r, &mut term, &[0.9, 3.0, 3.0]);
        assert_eq!((r, term), (0.0, 0.0), "missed: no reward, and the episode would have gone on");
    }

    use crate::replay::ReplayBuffer;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use tch::Device;

    /// Episode `e` step `t`: obs = [ag_t, g_e, t, e] with ag_t = 100e + t (unique), g_e = −1 − e.
    fn fill(buf: &mut ReplayBuffer, lengths: &[usize], open: usize) {
        for (e, &len) in lengths.iter().chain(std::iter::once(&open)).enumerate() {
            let (ef, g) = (e as f32, -1.0 - e as f32);
            for t in 0..len {
                let tf = t as f32;
                let done = e < lengths.len() && t + 1 == len;
                buf.push(&[100.0 * ef + tf, g, tf, ef], &[0.0], -1.0, &[100.0 * ef + tf + 1.0, g, tf, ef], false, done)
                    .unwrap();
            }
        }
    }

    /// Relabelled goals come from the same episode at a later-or-equal step (the open episode
    /// included, across the ring's wrap), 1 − 1/(1 + k) of the rows are relabelled, and the
    /// rewards are the task's on the new goal.
    #[test]
    fn future_goals_fraction_and_rewards() {
        // 9 episodes of 7..=15 steps and an open one of 5: 104 steps in a 64-row ring.
        let lengths: Vec<usize> = (0..9).map(|e| 7 + e).collect();
        let mut buf = ReplayBuffer::new(64, 4, 1, 0.99).unwrap();
        fill(&mut buf, &lengths, 5);
        let her = Her::future(
            GoalSlices { achieved: [0, 1], desired: [1, 2] },
            GoalReward::Sparse { threshold: 0.05 },
            4.0,
            4,
        )
        .unwrap();
        buf.set_her(Some(her)).unwrap();
        let episode_len = |e: usize| lengths.get(e).copied().unwrap_or(5);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut rows, mut relabelled, mut same_step) = (0usize, 0usize, 0usize);
        for _ in 0..40 {
            let b = buf.sample(1000, &mut rng, Device::Cpu).unwrap();
            let obs = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
            let next = Vec::<f32>::try_from(b.next_obs.reshape([-1])).unwrap();
            let rew = Vec::<f32>::try_from(&b.reward).unwrap();
            let mc = Vec::<f32>::try_from(b.mc_return.as_ref().unwrap()).unwrap();
            for r in 0..rew.len() {
                let (o, n) = (&obs[4 * r..4 * r + 4], &next[4 * r..4 * r + 4]);
                let (t, e) = (o[2] as usize, o[3] as usize);
                rows += 1;
                assert_eq!(o[1], n[1], "obs and next_obs carry the same goal");
                if o[1] == -1.0 - e as f32 {
                    assert_eq!(rew[r], -1.0, "a row kept as stored keeps its reward");
                    continue;
                }
                relabelled += 1;
                // g' = ag after step t' of episode e: 100e + t' + 1 with t ≤ t' < episode length.
                let t_future = (o[1] - 100.0 * e as f32 - 1.0).round() as i64;
                assert!(
                    t_future >= t as i64 && (t_future as usize) < episode_len(e),
                    "episode {e} step {t}: goal from step {t_future}"
                );
                let expected = if t_future == t as i64 { 0.0 } else { -1.0 };
                assert_eq!(rew[r], expected, "reward recomputed on the new goal");
                same_step += (t_future == t as i64) as usize;
                assert_eq!(mc[r], crate::replay::MC_PENDING, "relabelled rows have no MC floor");
            }
        }
        let fraction = relabelled as f64 / rows as f64;
        assert!((fraction - 0.8).abs() < 0.01, "relabelled fraction {fraction}, expected 0.8");
        assert!(
            same_step > 0 && same_step < relabelled / 2,
            "{same_step} of {relabelled} relabelled rows use their own step"
        );
    }

    /// With finished episodes only (SB3's HER buffer), no row of the open episode is drawn and no
    /// relabelled goal comes from it, across the ring's wrap; every closed episode is drawn.
    #[test]
    fn closed_episodes_only_never_draws_or_relabels_from_the_open_episode() {
        let lengths: Vec<usize> = (0..9).map(|e| 7 + e).collect();
        let mut buf = ReplayBuffer::new(64, 4, 1, 0.99).unwrap();
        fill(&mut buf, &lengths, 5);
        buf.set_her(Some(
            Her::future(
                GoalSlices { achieved: [0, 1], desired: [1, 2] },
                GoalReward::Sparse { threshold: 0.05 },
                4.0,
                4,
            )
            .unwrap(),
        ))
        .unwrap();
        buf.set_closed_episodes_only(true);
        let open = lengths.len();
        let (mut rows, mut relabelled) = (0usize, 0usize);
        let mut seen = std::collections::BTreeSet::new();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..20 {
            let b = buf.sample(1000, &mut rng, Device::Cpu).unwrap();
            let obs = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
            for r in 0..b.reward.size()[0] as usize {
                let o = &obs[4 * r..4 * r + 4];
                let (t, e) = (o[2] as usize, o[3] as usize);
                rows += 1;
                assert!(e < open, "row {t} of the open episode drawn");
                seen.insert(e);
                if o[1] != -1.0 - e as f32 {
                    relabelled += 1;
                    // g' = 100e' + t' + 1: the goal's episode e' is the row's own, closed one.
                    let from = ((o[1] - 1.0) / 100.0).floor() as usize;
                    assert_eq!(from, e, "episode {e} step {t}: goal {} from episode {from}", o[1]);
                    assert!(((o[1] - 1.0) as usize) % 100 < lengths[e]);
                }
            }
        }
        assert!(relabelled > rows / 2, "{relabelled} of {rows}");
        // The ring holds the tail of the episodes that fit: all of those closed ones are drawn.
        let oldest = (0..open).find(|&e| seen.contains(&e)).unwrap();
        assert_eq!(seen, (oldest..open).collect(), "closed episodes drawn");
        // Off: the open episode's rows are drawn too.
        buf.set_closed_episodes_only(false);
        let b = buf.sample(2000, &mut rng, Device::Cpu).unwrap();
        let obs = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
        assert!((0..2000).any(|r| obs[4 * r + 3] as usize == open), "with the option off the open episode is drawn");
    }

    /// The episode column survives a save and load, so a resumed buffer relabels the same rows
    /// with the same goals.
    #[test]
    fn relabelling_is_the_same_after_save_and_load() {
        let mut buf = ReplayBuffer::new(32, 4, 1, 0.99).unwrap();
        fill(&mut buf, &[10, 12, 9], 3);
        let her = Her::future(GoalSlices { achieved: [0, 1], desired: [1, 2] }, GoalReward::Dense, 4.0, 4).unwrap();
        buf.set_her(Some(her.clone())).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replay.bin");
        buf.save(&path).unwrap();
        let mut back = ReplayBuffer::load(&path).unwrap();
        assert!(back.her().is_none(), "HER settings come from the config, not the file");
        back.set_her(Some(her)).unwrap();
        assert_eq!(buf, back);
        // 34 steps in 32 rows: rows 0 and 1 hold steps 32 and 33 of the open episode; row 5 is
        // step 5 of episode 0 (steps 0..=9), row 25 step 25 of episode 2 (steps 22..=30).
        assert_eq!(
            (back.episode_last_row(0), back.episode_last_row(5), back.episode_last_row(25)),
            (None, Some(9), Some(30))
        );
        let x = buf.sample(256, &mut ChaCha8Rng::seed_from_u64(1), Device::Cpu).unwrap();
        let y = back.sample(256, &mut ChaCha8Rng::seed_from_u64(1), Device::Cpu).unwrap();
        assert!(x.obs.equal(&y.obs) && x.next_obs.equal(&y.next_obs) && x.reward.equal(&y.reward));
    }
}
