//! A run as a list of phases: data, not flags.
//!
//! Each phase says how actions are chosen and whether the agent learns; the loop asks the phase
//! instead of testing booleans. Today's phases, in order: offline gradient steps, uniformly
//! random exploration, a frozen-policy warm-up (WSRL: K env steps with the pretrained policy
//! and no updates), and online learning. A new recipe is a new list, not a new branch in the loop.

use super::config::TrainConfig;

/// What one loop step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    /// One gradient step on a batch of offline data; no env.
    Offline,
    /// One env step with a uniformly random action; no update.
    Random,
    /// One env step with the current (stochastic) policy; no update.
    Warmup,
    /// One env step with the current policy, then `updates_per_step` gradient steps.
    Online,
}

impl PhaseKind {
    /// The name used in logs and the progress bar.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Offline => "offline",
            PhaseKind::Random => "random",
            PhaseKind::Warmup => "warmup",
            PhaseKind::Online => "online",
        }
    }

    /// Whether a loop step of this phase steps the env (and so counts env steps).
    pub fn steps_env(self) -> bool {
        !matches!(self, PhaseKind::Offline)
    }
}

/// A phase and its length in loop steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// What happens in it.
    pub kind: PhaseKind,
    /// Its loop steps.
    pub steps: u64,
}

/// The phases of a run, in order, without empty ones.
pub fn plan(train: &TrainConfig) -> Vec<Phase> {
    [
        (PhaseKind::Offline, train.offline_steps),
        (PhaseKind::Random, train.random_steps),
        (PhaseKind::Warmup, train.warmup_steps),
        (PhaseKind::Online, train.online_steps),
    ]
    .into_iter()
    .filter(|(_, steps)| *steps > 0)
    .map(|(kind, steps)| Phase { kind, steps })
    .collect()
}

/// Total loop steps of a plan.
pub fn total_steps(plan: &[Phase]) -> u64 {
    plan.iter().map(|p| p.steps).sum()
}

/// The phase that loop step `step` (0-based) belongs to; `None` past the end.
pub fn phase_at(plan: &[Phase], step: u64) -> Option<Phase> {
    let mut start = 0;
    for p in plan {
        if step < start + p.steps {
            return Some(*p);
        }
        start += p.steps;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_orders_phases_and_drops_empty_ones() {
        let t =
            TrainConfig { offline_steps: 3, random_steps: 0, warmup_steps: 2, online_steps: 5, ..Default::default() };
        let p = plan(&t);
        assert_eq!(
            p.iter().map(|p| p.kind).collect::<Vec<_>>(),
            vec![PhaseKind::Offline, PhaseKind::Warmup, PhaseKind::Online]
        );
        assert_eq!(total_steps(&p), 10);
        assert_eq!(phase_at(&p, 0).unwrap().kind, PhaseKind::Offline);
        assert_eq!(phase_at(&p, 2).unwrap().kind, PhaseKind::Offline);
        assert_eq!(phase_at(&p, 3).unwrap().kind, PhaseKind::Warmup);
        assert_eq!(phase_at(&p, 5).unwrap().kind, PhaseKind::Online);
        assert_eq!(phase_at(&p, 9).unwrap().kind, PhaseKind::Online);
        assert_eq!(phase_at(&p, 10), None);
    }
}
