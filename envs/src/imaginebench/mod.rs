//! ImagineBench's Mujoco-v0 instruction tasks (LAMDA-RL/ImagineBench, arXiv 2505.10010;
//! formats.md §3.3): HalfCheetah told in words what to do.
//!
//! A level is a set of tasks ([`Level::tasks`]): `real` (the four tasks the real rollouts
//! cover), `rephrase` (the same four with unseen paraphrases), `easy` (faster versions) and
//! `hard` (a turn-around and a jump on the spot). [`ImagineBenchEnv`] cycles through its level's
//! tasks round-robin, one per reset, and shows each episode a random paraphrase of its task's
//! instruction, encoded as a vector after the 18 state numbers.
//!
//! Per task ([`TaskKind`]): the reward from HalfCheetah-v4's `reward_run` (Δx/dt) and
//! `reward_ctrl` (−0.1‖a‖²) ([`TaskKind::reward`]), and a success rule on the history of
//! per-step Δx ([`TaskKind::success`]); the episode terminates on success and is truncated at
//! 200 steps.
//!
//! The released code pairs `jump-forward` with the *backward* jump sentences and vice versa
//! (`get_instructions`). o2o pairs them as named by default; [`Instructions::Released`] keeps
//! the released pairing, to evaluate policies trained on the released data as it was made.

mod env;
pub mod instructions;
pub mod parity;

pub use env::{ImagineBenchEnv, ImagineBenchOptions};
pub use instructions::{builtin_embedding, InstructionEncoder, EMBED_DIM};

/// Steps per episode (the benchmark's `_max_episode_steps`).
pub const MAX_EPISODE_STEPS: usize = 200;

/// State numbers before the instruction vector: Δx, then HalfCheetah's 17.
pub const STATE_DIM: usize = 18;

/// A set of tasks evaluated together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// The tasks the real rollouts cover.
    Real,
    /// The real tasks with paraphrased instructions.
    Rephrase,
    /// Faster versions of the move tasks.
    Easy,
    /// Turn-arounds and a jump on the spot.
    Hard,
}

impl Level {
    /// Every level, in the benchmark's order.
    pub const ALL: [Level; 4] = [Level::Real, Level::Rephrase, Level::Easy, Level::Hard];

    /// `real`, `rephrase`, `easy` or `hard`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Real => "real",
            Level::Rephrase => "rephrase",
            Level::Easy => "easy",
            Level::Hard => "hard",
        }
    }

    /// The level named `name`.
    pub fn from_name(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The level's tasks, in the order the env cycles through them.
    pub fn tasks(self) -> &'static [TaskKind] {
        use TaskKind::*;
        match self {
            Level::Real => &[JumpForward, JumpBackward, MoveForward, MoveBackward],
            Level::Rephrase => &[RepJumpForward, RepJumpBackward, RepMoveForward, RepMoveBackward],
            Level::Easy => &[MoveForwardFast, MoveBackwardFast],
            Level::Hard => &[MoveForwardBackward, MoveBackwardForward, JumpInPlace],
        }
    }

    /// The registry id of the level's env: `imaginebench-mujoco-<level>-v0`.
    pub fn env_id(self) -> &'static str {
        match self {
            Level::Real => "imaginebench-mujoco-real-v0",
            Level::Rephrase => "imaginebench-mujoco-rephrase-v0",
            Level::Easy => "imaginebench-mujoco-easy-v0",
            Level::Hard => "imaginebench-mujoco-hard-v0",
        }
    }

    /// The level of a registry id.
    pub fn from_env_id(id: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.env_id() == id)
    }
}

/// The env that cycles through the tasks of every level (13 tasks, real → hard), so one
/// evaluation reports the success of every level and task.
pub const ALL_LEVELS_ID: &str = "imaginebench-mujoco-all-v0";

/// Every ImagineBench env id: one per level, then [`ALL_LEVELS_ID`].
pub fn env_ids() -> Vec<&'static str> {
    Level::ALL.iter().map(|l| l.env_id()).chain([ALL_LEVELS_ID]).collect()
}

/// Whether `id` is an ImagineBench env id.
pub fn is_env_id(id: &str) -> bool {
    env_ids().contains(&id)
}

/// The level of an env id: `Some(Some(level))` for a level's env, `Some(None)` for
/// [`ALL_LEVELS_ID`], `None` for any other id.
pub fn level_of_env_id(id: &str) -> Option<Option<Level>> {
    if id == ALL_LEVELS_ID {
        return Some(None);
    }
    Level::from_env_id(id).map(Some)
}

/// Every task of every level, in level order.
pub fn all_tasks() -> Vec<TaskKind> {
    Level::ALL.iter().flat_map(|l| l.tasks()).copied().collect()
}

/// Which sentences the two real jump tasks are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Instructions {
    /// As named: `jump-forward` gets the forward jump sentences (o2o's default).
    #[default]
    Fixed,
    /// As the released code: `jump-forward` gets the backward sentences and vice versa.
    Released,
}

/// Which way the task's reward pays for motion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// r = reward_run + reward_ctrl.
    Forward,
    /// r = −reward_run + reward_ctrl.
    Backward,
    /// r = |reward_run| + reward_ctrl (the turn-around tasks).
    Either,
    /// r = −|reward_run| + reward_ctrl (jump in place).
    Still,
}

/// One instruction task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is its benchmark name, see `TaskKind::name`
pub enum TaskKind {
    JumpForward,
    JumpBackward,
    MoveForward,
    MoveBackward,
    RepJumpForward,
    RepJumpBackward,
    RepMoveForward,
    RepMoveBackward,
    MoveForwardFast,
    MoveBackwardFast,
    MoveForwardBackward,
    MoveBackwardForward,
    JumpInPlace,
}

/// Running statistics of the per-step Δx history the success rules read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct History {
    /// Steps taken t.
    pub steps: usize,
    /// S = Σ Δx.
    pub sum: f64,
    /// Steps with Δx > 0.
    pub n_positive: usize,
    /// Steps with Δx < 0.
    pub n_negative: usize,
    /// Σ of the positive Δx.
    pub sum_positive: f64,
    /// Σ of the negative Δx.
    pub sum_negative: f64,
}

impl History {
    /// Record one step's Δx.
    pub fn push(&mut self, dx: f64) {
        self.steps += 1;
        self.sum += dx;
        if dx > 0.0 {
            self.n_positive += 1;
            self.sum_positive += dx;
        } else if dx < 0.0 {
            self.n_negative += 1;
            self.sum_negative += dx;
        }
    }

    /// The history of a whole Δx sequence.
    pub fn of(dx: &[f64]) -> Self {
        let mut h = Self::default();
        dx.iter().for_each(|d| h.push(*d));
        h
    }
}

impl TaskKind {
    /// The benchmark's name, e.g. `jump-forward`, `rep-move-backward`, `jump-in-place`.
    pub fn name(self) -> &'static str {
        use TaskKind::*;
        match self {
            JumpForward => "jump-forward",
            JumpBackward => "jump-backward",
            MoveForward => "move-forward",
            MoveBackward => "move-backward",
            RepJumpForward => "rep-jump-forward",
            RepJumpBackward => "rep-jump-backward",
            RepMoveForward => "rep-move-forward",
            RepMoveBackward => "rep-move-backward",
            MoveForwardFast => "move-forward-fast",
            MoveBackwardFast => "move-backward-fast",
            MoveForwardBackward => "move-forward-backward",
            MoveBackwardForward => "move-backward-forward",
            JumpInPlace => "jump-in-place",
        }
    }

    /// The task named `name`.
    pub fn from_name(name: &str) -> Option<TaskKind> {
        Level::ALL.iter().flat_map(|l| l.tasks()).copied().find(|t| t.name() == name)
    }

    /// The level it belongs to.
    pub fn level(self) -> Level {
        *Level::ALL.iter().find(|l| l.tasks().contains(&self)).expect("every task is in a level")
    }

    /// `<level>/<task>`, the key of its success rate (`eval/success/<level>/<task>`).
    pub fn key(self) -> &'static str {
        use TaskKind::*;
        match self {
            JumpForward => "real/jump-forward",
            JumpBackward => "real/jump-backward",
            MoveForward => "real/move-forward",
            MoveBackward => "real/move-backward",
            RepJumpForward => "rephrase/rep-jump-forward",
            RepJumpBackward => "rephrase/rep-jump-backward",
            RepMoveForward => "rephrase/rep-move-forward",
            RepMoveBackward => "rephrase/rep-move-backward",
            MoveForwardFast => "easy/move-forward-fast",
            MoveBackwardFast => "easy/move-backward-fast",
            MoveForwardBackward => "hard/move-forward-backward",
            MoveBackwardForward => "hard/move-backward-forward",
            JumpInPlace => "hard/jump-in-place",
        }
    }

    /// The sentences an episode of this task is shown one of.
    pub fn instructions(self, which: Instructions) -> &'static [&'static str] {
        use instructions as s;
        use TaskKind::*;
        let released = which == Instructions::Released;
        match self {
            // The released code's `get_instructions` swaps these two (formats.md §3.3).
            JumpForward if released => s::JUMP_BACKWARD,
            JumpBackward if released => s::JUMP_FORWARD,
            JumpForward => s::JUMP_FORWARD,
            JumpBackward => s::JUMP_BACKWARD,
            MoveForward => s::MOVE_FORWARD,
            MoveBackward => s::MOVE_BACKWARD,
            RepJumpForward => s::REP_JUMP_FORWARD,
            RepJumpBackward => s::REP_JUMP_BACKWARD,
            RepMoveForward => s::REP_MOVE_FORWARD,
            RepMoveBackward => s::REP_MOVE_BACKWARD,
            MoveForwardFast => s::MOVE_FORWARD_FAST,
            MoveBackwardFast => s::MOVE_BACKWARD_FAST,
            MoveForwardBackward => s::MOVE_FORWARD_BACKWARD,
            MoveBackwardForward => s::MOVE_BACKWARD_FORWARD,
            JumpInPlace => s::JUMP_IN_PLACE,
        }
    }

    /// Which way the reward pays.
    pub fn direction(self) -> Direction {
        use TaskKind::*;
        match self {
            JumpForward | MoveForward | RepJumpForward | RepMoveForward | MoveForwardFast => Direction::Forward,
            JumpBackward | MoveBackward | RepJumpBackward | RepMoveBackward | MoveBackwardFast => Direction::Backward,
            MoveForwardBackward | MoveBackwardForward => Direction::Either,
            JumpInPlace => Direction::Still,
        }
    }

    /// The task's reward from HalfCheetah-v4's terms: `reward_run` = Δx/dt and
    /// `reward_ctrl` = −0.1‖a‖² (see [`Direction`]).
    pub fn reward(self, reward_run: f64, reward_ctrl: f64) -> f64 {
        match self.direction() {
            Direction::Forward => reward_run + reward_ctrl,
            Direction::Backward => -reward_run + reward_ctrl,
            Direction::Either => reward_run.abs() + reward_ctrl,
            Direction::Still => -reward_run.abs() + reward_ctrl,
        }
    }

    /// Whether the history so far is a success (formats.md §3.3; S = Σ Δx, t = steps):
    /// jumps S > 0 / S < 0 with t ≥ 5; moves S > 7 / S < −7 with t ≥ 99; fast moves ±8.5 with
    /// t ≥ 99; turn-arounds more than 30 positive and 30 negative steps, positive sum > 3,
    /// negative sum < −3, t ≥ 199; jump in place |S| < 1.05 with t ≥ 15.
    pub fn success(self, h: &History) -> bool {
        use TaskKind::*;
        let (s, t) = (h.sum, h.steps);
        match self {
            JumpForward | RepJumpForward => s > 0.0 && t >= 5,
            JumpBackward | RepJumpBackward => s < 0.0 && t >= 5,
            MoveForward | RepMoveForward => s > 7.0 && t >= 99,
            MoveBackward | RepMoveBackward => s < -7.0 && t >= 99,
            MoveForwardFast => s > 8.5 && t >= 99,
            MoveBackwardFast => s < -8.5 && t >= 99,
            MoveForwardBackward | MoveBackwardForward => {
                h.n_negative > 30 && h.n_positive > 30 && h.sum_negative < -3.0 && h.sum_positive > 3.0 && t >= 199
            }
            JumpInPlace => s.abs() < 1.05 && t >= 15,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(task: TaskKind, dx: &[f64]) -> bool {
        task.success(&History::of(dx))
    }

    #[test]
    fn jump_rules_need_five_steps_and_the_sign() {
        use TaskKind::*;
        let fwd = [0.01; 5];
        assert!(ok(JumpForward, &fwd) && ok(RepJumpForward, &fwd));
        assert!(!ok(JumpForward, &fwd[..4]), "t = 4 < 5");
        assert!(!ok(JumpBackward, &fwd));
        let back = [0.3, -0.2, -0.2, 0.0, 0.05];
        assert!(ok(JumpBackward, &back) && ok(RepJumpBackward, &back) && !ok(JumpForward, &back));
        assert!(!ok(JumpForward, &[0.0; 10]) && !ok(JumpBackward, &[0.0; 10]), "S = 0 is neither");
    }

    #[test]
    fn move_rules_need_99_steps_and_the_distance() {
        use TaskKind::*;
        let fwd = vec![7.2 / 99.0; 99];
        assert!(ok(MoveForward, &fwd) && ok(RepMoveForward, &fwd));
        assert!(!ok(MoveForward, &fwd[..98]), "t = 98");
        assert!(!ok(MoveForwardFast, &fwd), "7.2 < 8.5");
        let fast = vec![8.6 / 99.0; 99];
        assert!(ok(MoveForwardFast, &fast) && !ok(MoveBackwardFast, &fast));
        let back: Vec<f64> = fast.iter().map(|v| -v).collect();
        assert!(ok(MoveBackward, &back) && ok(RepMoveBackward, &back) && ok(MoveBackwardFast, &back));
        assert!(!ok(MoveBackward, &vec![-6.9 / 150.0; 150]), "S = −6.9 > −7");
    }

    #[test]
    fn turn_around_needs_both_directions_and_199_steps() {
        use TaskKind::*;
        // 100 steps forward by 0.05 (sum 5), 99 back by −0.05 (sum −4.95): t = 199.
        let mut dx = vec![0.05; 100];
        dx.extend(vec![-0.05; 99]);
        assert!(ok(MoveForwardBackward, &dx) && ok(MoveBackwardForward, &dx), "the rule does not check the order");
        assert!(!ok(MoveForwardBackward, &dx[..198]), "t = 198");
        // 31 negative steps are needed: 30 are not enough.
        let mut few = vec![0.05; 169];
        few.extend(vec![-0.2; 30]);
        assert!(!ok(MoveForwardBackward, &few));
        few.insert(0, -0.01);
        assert!(ok(MoveForwardBackward, &few));
        // A small backward sum (−2.9) fails.
        let mut weak = vec![0.05; 150];
        weak.extend(vec![-2.9 / 49.0; 49]);
        assert!(!ok(MoveBackwardForward, &weak));
    }

    #[test]
    fn jump_in_place_needs_fifteen_steps_near_the_start() {
        use TaskKind::*;
        let mut dx = vec![0.1; 10];
        dx.extend(vec![-0.1; 5]);
        assert!(ok(JumpInPlace, &dx), "|S| = 0.5 < 1.05, t = 15");
        assert!(!ok(JumpInPlace, &dx[..14]));
        assert!(!ok(JumpInPlace, &[0.07; 15]), "|S| = 1.05 is not < 1.05");
        assert!(!ok(JumpInPlace, &[-0.08; 20]));
    }

    #[test]
    fn rewards_follow_the_direction() {
        use TaskKind::*;
        assert_eq!(JumpForward.reward(2.0, -0.5), 1.5);
        assert_eq!(MoveBackwardFast.reward(2.0, -0.5), -2.5);
        assert_eq!(MoveForwardBackward.reward(-2.0, -0.5), 1.5);
        assert_eq!(JumpInPlace.reward(-2.0, -0.5), -2.5);
    }

    #[test]
    fn released_option_swaps_only_the_two_jump_tasks() {
        use TaskKind::*;
        assert_eq!(JumpForward.instructions(Instructions::Fixed)[0], "Jump a step forward.");
        assert_eq!(JumpForward.instructions(Instructions::Released)[0], "Jump a step backward.");
        assert_eq!(JumpBackward.instructions(Instructions::Released), JumpForward.instructions(Instructions::Fixed));
        for t in Level::ALL.iter().flat_map(|l| l.tasks()).filter(|t| !matches!(t, JumpForward | JumpBackward)) {
            assert_eq!(t.instructions(Instructions::Fixed), t.instructions(Instructions::Released), "{}", t.name());
        }
    }

    #[test]
    fn names_levels_and_keys_round_trip() {
        for l in Level::ALL {
            assert_eq!(Level::from_name(l.name()), Some(l));
            assert_eq!(Level::from_env_id(l.env_id()), Some(l));
            for t in l.tasks() {
                assert_eq!(TaskKind::from_name(t.name()), Some(*t));
                assert_eq!(t.level(), l);
                assert_eq!(t.key(), format!("{}/{}", l.name(), t.name()));
            }
        }
        assert_eq!(Level::ALL.iter().map(|l| l.tasks().len()).sum::<usize>(), 13);
    }
}
