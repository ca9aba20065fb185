//! The online shaper on a (tiny, untrained) progress model: over a terminated episode the
//! discounted shaping terms sum to −Φ(s₀) whatever Φ is, truncation keeps Φ(s') and starts the
//! next episode afresh, the naive mode is progress gained, and success detection gives r_gold.

use o2o_reward_models::{
    Demo, GoldReward, ProgressModel, ProgressModelConfig, ProgressPotential, Shaper, ShapingMode, ViewSpec,
};
use tch::Device;

fn model() -> ProgressModel {
    let views = vec![ViewSpec { name: "pos".into(), dim: 2, obs_slice: Some([1, 3]), minus: None }];
    let demo = Demo { name: "d".into(), features: (0..20).map(|i| i as f32 * 0.1).collect(), len: 10, keyframes: None };
    ProgressModel::new(ProgressModelConfig { views, hidden: vec![8], ..Default::default() }, &[demo], Device::Cpu)
        .unwrap()
}

fn episode() -> Vec<Vec<f32>> {
    (0..6).map(|t| vec![9.0, t as f32 * 0.3, (t as f32 * 0.7).sin()]).collect()
}

#[test]
fn pbrs_telescopes_to_minus_phi0_and_truncation_keeps_phi() {
    let gamma = 0.9;
    let obs = episode();
    let mut s =
        Shaper::new(ProgressPotential::new(model(), None).unwrap(), ShapingMode::Pbrs, GoldReward::Env, gamma).unwrap();
    let mut discounted = 0.0;
    let mut phi0 = None;
    for t in 0..5 {
        let terminated = t == 4;
        let r = s.shape(&obs[t], -1.0, &obs[t + 1], terminated, false).unwrap();
        phi0.get_or_insert(r.phi);
        if t > 0 {
            assert!(r.phi.is_finite());
        }
        discounted += gamma.powi(t as i32) * (r.reward - r.gold);
        assert_eq!(r.gold, -1.0);
    }
    assert!((discounted + phi0.unwrap()).abs() < 1e-9, "Σγ^t F = {discounted}, Φ(s0) = {phi0:?}");

    // Truncation: Φ(s') is used (not zeroed), and the next transition restarts the episode.
    let r = s.shape(&obs[0], 0.0, &obs[1], false, true).unwrap();
    assert!((r.reward - (gamma * r.phi_next - r.phi)).abs() < 1e-12);
    let again = s.shape(&obs[0], 0.0, &obs[1], false, false).unwrap();
    assert_eq!(again, r, "a new episode from the same start gives the same potentials");
}

#[test]
fn naive_mode_and_success_gold() {
    let obs = episode();
    let mut s =
        Shaper::new(ProgressPotential::new(model(), None).unwrap(), ShapingMode::Naive, GoldReward::Success, 0.99)
            .unwrap();
    let r = s.shape(&obs[0], -1.0, &obs[1], false, false).unwrap();
    assert_eq!(r.gold, if r.phi_next >= 0.95 { 1.0 } else { 0.0 });
    assert!((r.reward - (r.gold + r.phi_next - r.phi)).abs() < 1e-12);
    // A view outside the observation is a typed error naming it.
    let e = s.shape(&[0.0], 0.0, &[0.0], false, false).unwrap_err().to_string();
    assert!(e.contains("view `pos` reads [1, 3)"), "{e}");
}
