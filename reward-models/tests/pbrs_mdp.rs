//! Potential-based shaping on finite MDPs, by value iteration (algorithms-next.md §4.6 tests 5
//! and 6; issue #22 item 7): the greedy policy is unchanged and Q_shaped = Q − Φ when
//! Φ(terminal) = 0, and the terminal convention decides whether a chain MDP's optimal policy
//! flips.

use o2o_reward_models::PotentialShaping;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A finite MDP whose episodes end in absorbing terminal states (value 0 after them).
struct Mdp {
    /// p[s][a][s'].
    p: Vec<Vec<Vec<f64>>>,
    /// r[s][a][s'].
    r: Vec<Vec<Vec<f64>>>,
    terminal: Vec<bool>,
}

/// Q by value iteration; terminal states have Q = 0 and no continuation.
fn q_values(mdp: &Mdp, gamma: f64, reward: &dyn Fn(usize, usize, usize) -> f64) -> Vec<Vec<f64>> {
    let (ns, na) = (mdp.p.len(), mdp.p[0].len());
    let mut q = vec![vec![0.0; na]; ns];
    for _ in 0..3000 {
        let v: Vec<f64> = (0..ns)
            .map(|s| if mdp.terminal[s] { 0.0 } else { q[s].iter().cloned().fold(f64::NEG_INFINITY, f64::max) })
            .collect();
        for s in (0..ns).filter(|&s| !mdp.terminal[s]) {
            for a in 0..na {
                q[s][a] = (0..ns).map(|s2| mdp.p[s][a][s2] * (reward(s, a, s2) + gamma * v[s2])).sum();
            }
        }
    }
    q
}

fn greedy(q: &[Vec<f64>], terminal: &[bool]) -> Vec<Option<usize>> {
    q.iter()
        .zip(terminal)
        .map(
            |(row, &t)| if t { None } else { Some((0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap()) },
        )
        .collect()
}

#[test]
fn shaping_keeps_the_greedy_policy_and_shifts_q_by_phi() {
    let gamma = 0.9;
    let shaping = PotentialShaping::new(gamma).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    for _ in 0..20 {
        // |S| = 6 non-terminal states + 1 absorbing goal, |A| = 3.
        let (ns, na) = (7, 3);
        let mut p = vec![vec![vec![0.0; ns]; na]; ns];
        let mut r = vec![vec![vec![0.0; ns]; na]; ns];
        for s in 0..ns - 1 {
            for a in 0..na {
                let w: Vec<f64> = (0..ns).map(|_| rng.gen_range(0.0..1.0f64).powi(3)).collect();
                let z: f64 = w.iter().sum();
                for s2 in 0..ns {
                    p[s][a][s2] = w[s2] / z;
                    r[s][a][s2] = if s2 == ns - 1 { 1.0 } else { rng.gen_range(-0.1..0.1) };
                }
            }
        }
        let mut terminal = vec![false; ns];
        terminal[ns - 1] = true;
        let mdp = Mdp { p, r, terminal };
        let phi: Vec<f64> = (0..ns).map(|s| if mdp.terminal[s] { 0.0 } else { rng.gen_range(0.0..1.0) }).collect();
        let q = q_values(&mdp, gamma, &|s, a, s2| mdp.r[s][a][s2]);
        let qs = q_values(&mdp, gamma, &|s, a, s2| shaping.shape(mdp.r[s][a][s2], phi[s], phi[s2], mdp.terminal[s2]));
        assert_eq!(greedy(&q, &mdp.terminal), greedy(&qs, &mdp.terminal));
        for s in (0..ns).filter(|&s| !mdp.terminal[s]) {
            for a in 0..na {
                assert!(
                    (qs[s][a] - (q[s][a] - phi[s])).abs() < 1e-8,
                    "s={s} a={a}: {} vs {}",
                    qs[s][a],
                    q[s][a] - phi[s]
                );
            }
        }
    }
}

/// Chain: s_0 chooses fail (terminate, r = 0) or walk; L = 20 walk steps reach the goal
/// (r = 1 on arrival). States 0..L are the chain (L = goal), L+1 = fail. Action 0 = walk, 1 = fail.
fn chain(l: usize) -> Mdp {
    let ns = l + 2;
    let mut p = vec![vec![vec![0.0; ns]; 2]; ns];
    let mut r = vec![vec![vec![0.0; ns]; 2]; ns];
    for s in 0..l {
        p[s][0][s + 1] = 1.0;
        // Off s_0, "fail" is not offered: it walks too.
        if s == 0 {
            p[s][1][l + 1] = 1.0;
        } else {
            p[s][1][s + 1] = 1.0;
        }
    }
    for s in 0..l {
        r[s][0][l] = 1.0;
        r[s][1][l] = 1.0;
    }
    let mut terminal = vec![false; ns];
    terminal[l] = true;
    terminal[l + 1] = true;
    Mdp { p, r, terminal }
}

#[test]
fn terminal_potential_convention_decides_the_chain() {
    let (l, gamma) = (20, 0.9);
    let mdp = chain(l);
    let shaping = PotentialShaping::new(gamma).unwrap();
    // Φ = progress i/L on the chain; both terminal states carry Φ = 1.
    let phi: Vec<f64> = (0..l + 2).map(|s| if s <= l { s as f64 / l as f64 } else { 1.0 }).collect();
    let at_s0 = |q: &Vec<Vec<f64>>| (q[0][1], q[0][0]); // (fail, walk)
    let close = |got: (f64, f64), want: (f64, f64)| (got.0 - want.0).abs() < 1e-4 && (got.1 - want.1).abs() < 1e-4;

    let plain = at_s0(&q_values(&mdp, gamma, &|s, a, s2| mdp.r[s][a][s2]));
    assert!(close(plain, (0.0, 0.1351)), "unshaped {plain:?}");
    // PBRS with Φ(terminal) := 0: the same values at s_0 (Φ(s_0) = 0), walking stays optimal.
    let pbrs =
        at_s0(&q_values(&mdp, gamma, &|s, a, s2| shaping.shape(mdp.r[s][a][s2], phi[s], phi[s2], mdp.terminal[s2])));
    assert!(close(pbrs, (0.0, 0.1351)), "PBRS, Φ(terminal)=0: {pbrs:?}");
    assert!(pbrs.1 > pbrs.0);
    // PBRS with the terminal potential left at 1: failing becomes optimal.
    let leaky = at_s0(&q_values(&mdp, gamma, &|s, a, s2| shaping.shape(mdp.r[s][a][s2], phi[s], phi[s2], false)));
    assert!(close(leaky, (0.9, 0.2567)), "PBRS, Φ(terminal)=1: {leaky:?}");
    assert!(leaky.0 > leaky.1);
    // Naive progress reward Φ(s') − Φ(s) with terminal Φ = 1: flips too.
    let naive = at_s0(&q_values(&mdp, gamma, &|s, a, s2| mdp.r[s][a][s2] + phi[s2] - phi[s]));
    assert!(close(naive, (1.0, 0.5743)), "naive {naive:?}");
    assert!(naive.0 > naive.1);
}
