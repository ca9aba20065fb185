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

/// The budget in words, every phase named: `30000 offline updates, then 5000 random + 2500
/// warm-up + 45000 online env steps (52500 env steps)`. `train.online_steps` counts the online
/// phase only; random and warm-up steps come on top of it, and this line says so.
pub fn describe(plan: &[Phase]) -> String {
    let offline: u64 = plan.iter().filter(|p| p.kind == PhaseKind::Offline).map(|p| p.steps).sum();
    let env: Vec<&Phase> = plan.iter().filter(|p| p.kind.steps_env()).collect();
    let env_total: u64 = env.iter().map(|p| p.steps).sum();
    let words = |k: PhaseKind| match k {
        PhaseKind::Warmup => "warm-up",
        other => other.name(),
    };
    let env_part = env.iter().map(|p| format!("{} {}", p.steps, words(p.kind))).collect::<Vec<_>>().join(" + ");
    match (offline > 0, env.is_empty()) {
        (true, true) => format!("{offline} offline updates, no env steps"),
        (true, false) => format!("{offline} offline updates, then {env_part} env steps ({env_total} env steps)"),
        (false, false) => format!("{env_part} env steps ({env_total} env steps)"),
        (false, true) => "no steps".to_string(),
    }
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
    fn the_budget_names_every_phase_and_the_env_total() {
        let t = |offline, random, warmup, online| {
            describe(&plan(&TrainConfig {
                offline_steps: offline,
                random_steps: random,
                warmup_steps: warmup,
                online_steps: online,
                ..TrainConfig::default()
            }))
        };
        assert_eq!(
            t(30000, 0, 2500, 45000),
            "30000 offline updates, then 2500 warm-up + 45000 online env steps (47500 env steps)"
        );
        assert_eq!(t(0, 5000, 0, 800), "5000 random + 800 online env steps (5800 env steps)");
        assert_eq!(t(1000, 0, 0, 0), "1000 offline updates, no env steps");
    }

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
