//! The semantic trap, by value iteration on a 1-D abstraction of FetchReachTerminal-v4 with the
//! trap preset's numbers (`sac-fetch-reach-trap`: γ = 0.98, 50-step episodes, gold reward 1 at
//! success, which terminates; λ = 0.1), using the crate's own reward functions. The derivation
//! is written out in `experiments/src/studies/dopamine.rs`.
//!
//! Chain: state k = the gripper's distance to the goal in units of 0.025 m, k = 0..=10 (0 to
//! 0.25 m, FetchReach's goal offsets reach 0.26 m). One step moves k by −2..=+2 (Fetch moves the
//! gripper at most 0.05 m per step along an axis). k ≤ 1 is success (d < 0.05 m): r_gold = 1
//! and the episode truly terminates. Φ(k) = 1 − d/0.25 = 1 − k/10 (the true distance potential;
//! 0.8 at the best state short of success, k = 2). The 50-step time limit is a truncation that
//! the learner bootstraps through, so the values it learns are the infinite-horizon ones
//! computed here; greedy rollouts of 50 steps then give success and episode length.

use o2o_reward_models::{naive_reward, progress_reward, PotentialShaping};

const K: usize = 10;
const GAMMA: f64 = 0.98;
const HORIZON: usize = 50;
const MOVES: [i64; 5] = [-2, -1, 0, 1, 2];
/// The index of "stay" in `MOVES`, and of "finish" from k = 2 (−2: straight to the goal).
const STAY: usize = 2;
const FINISH: usize = 0;

fn next(k: usize, a: usize) -> usize {
    (k as i64 + MOVES[a]).clamp(0, K as i64) as usize
}

fn success(k: usize) -> bool {
    k <= 1
}

fn phi(k: usize) -> f64 {
    1.0 - k as f64 / K as f64
}

/// Q(k, a) of reward `r(k, k', terminated)` by value iteration; success states are absorbing
/// (value 0 after the terminating step). Rows 0 and 1 are unused.
fn q_values(r: &dyn Fn(usize, usize, bool) -> f64) -> Vec<Vec<f64>> {
    let mut q = vec![vec![0.0; MOVES.len()]; K + 1];
    for _ in 0..5000 {
        let v: Vec<f64> = (0..=K)
            .map(|k| if success(k) { 0.0 } else { q[k].iter().cloned().fold(f64::NEG_INFINITY, f64::max) })
            .collect();
        for k in 2..=K {
            for a in 0..MOVES.len() {
                let k2 = next(k, a);
                let done = success(k2);
                q[k][a] = r(k, k2, done) + if done { 0.0 } else { GAMMA * v[k2] };
            }
        }
    }
    q
}

fn greedy(q: &[Vec<f64>], k: usize) -> usize {
    (0..MOVES.len()).max_by(|&a, &b| q[k][a].total_cmp(&q[k][b])).unwrap()
}

/// The greedy policy's 50-step episode from the farthest state: (success, length).
fn rollout(q: &[Vec<f64>]) -> (bool, usize) {
    let mut k = K;
    for t in 1..=HORIZON {
        k = next(k, greedy(q, k));
        if success(k) {
            return (true, t);
        }
    }
    (false, HORIZON)
}

fn gold(done: bool) -> f64 {
    done as u8 as f64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

/// (a) the sparse optimum finishes, (b) the per-step progress reward λΦ(s') with λ = 0.1
/// hovers at k = 2 (d = 0.05 m, just short of success) for the whole episode, (c) PBRS keeps
/// the sparse optimum with Q shifted by −Φ(s); and the weight decides: the trap opens at
/// λ > (1 − γ)·r_gold / Φ(k = 2) = 0.025.
#[test]
fn progress_reward_hovers_short_of_success_where_pbrs_and_sparse_finish() {
    // (a) sparse gold reward: finish now (1) beats one more step (γ · 1).
    let sparse = q_values(&|_, _, done| gold(done));
    assert!(close(sparse[2][FINISH], 1.0) && close(sparse[2][STAY], 0.98), "{:?}", sparse[2]);
    assert_eq!(rollout(&sparse), (true, 5), "the sparse optimum finishes in 5 steps from 0.25 m");

    // (b) progress: hovering at k = 2 forever is worth λΦ/(1 − γ) = 0.1 · 0.8 / 0.02 = 4.0
    // against 1.0 for finishing.
    let progress = q_values(&|_, k2, done| progress_reward(gold(done), phi(k2), done, 0.1));
    assert!(close(progress[2][FINISH], 1.0) && close(progress[2][STAY], 4.0), "{:?}", progress[2]);
    assert_eq!(greedy(&progress, 2), STAY);
    assert_eq!(rollout(&progress), (false, HORIZON), "the progress optimum never finishes");

    // (c) PBRS with Φ(terminal) = 0: same greedy actions as sparse, Q = Q_sparse − Φ(s).
    let shaping = PotentialShaping::new(GAMMA).unwrap();
    let pbrs = q_values(&|k, k2, done| shaping.shape(gold(done), phi(k), phi(k2), done));
    for k in 2..=K {
        // Where two moves reach the goal equally fast, either is greedy: PBRS's choice is one of
        // the sparse task's optimal moves.
        let best = sparse[k].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        assert!(close(sparse[k][greedy(&pbrs, k)], best), "k = {k}");
        for a in 0..MOVES.len() {
            assert!(close(pbrs[k][a], sparse[k][a] - phi(k)), "k = {k} a = {a}");
        }
    }
    assert!(close(pbrs[2][FINISH], 0.2) && close(pbrs[2][STAY], 0.18), "{:?}", pbrs[2]);
    assert_eq!(rollout(&pbrs), (true, 5));

    // The threshold: at λ = 1 − γ = 0.02 (the weight at which the per-step reward equals the
    // naive difference reward up to a constant) hovering is worth 0.996 < 1, no trap; at
    // λ = 0.03 it is worth 1.2 > 1.
    let at = |lambda: f64| q_values(&|_, k2, done| progress_reward(gold(done), phi(k2), done, lambda));
    let (below, above) = (at(0.02), at(0.03));
    assert!(close(below[2][STAY], 0.996) && rollout(&below) == (true, 5), "{:?}", below[2]);
    assert!(close(above[2][STAY], 1.2) && rollout(&above) == (false, HORIZON), "{:?}", above[2]);
}

/// Today's `naive` mode, r_gold + Φ(s') − Φ(s) with Φ(s') kept at the terminating step, does
/// not trap here: the last transition pays Φ(goal) at full weight, so finishing from k = 2 (1.2)
/// beats waiting a step (γ · 1.2 = 1.176), and hovering for good is worth 0; it only bends the
/// path towards the highest-Φ success state. The paper's
/// literal naive reward Φ(s') − Φ(s) without r_gold, under the episodic convention Φ(terminal)
/// = 0, does trap: finishing costs −Φ(s) = −0.8, hovering costs 0.
#[test]
fn the_naive_difference_reward_traps_only_without_its_terminal_potential() {
    let naive = q_values(&|k, k2, done| naive_reward(gold(done), phi(k), phi(k2)));
    assert!(close(naive[2][FINISH], 1.2) && close(naive[2][STAY], 1.176), "{:?}", naive[2]);
    assert_eq!(rollout(&naive), (true, 5));

    let literal = q_values(&|k, k2, done| naive_reward(0.0, phi(k), if done { 0.0 } else { phi(k2) }));
    assert!(close(literal[2][FINISH], -0.8) && close(literal[2][STAY], 0.0), "{:?}", literal[2]);
    assert_eq!(rollout(&literal), (false, HORIZON));
}
