//! Robo-Dopamine label construction and progress reconstruction (algorithms-next.md §4.6,
//! tests 1–3; issue #22 item 7).

use o2o_reward_models::labels::{hop, progress, sample_frames, sample_pairs, zero_pair_offset, LabelConfig, SubTask};
use o2o_reward_models::reconstruct::{self, StepHops, Tracker};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn label_example_of_the_reference() {
    // Keyframes [(0,100), (100,400)], k = 20 → L = 400, n = 20, m = round(20/2) = 10.
    let frames = sample_frames(&[SubTask::new(0, 100), SubTask::new(100, 400)], 20);
    let mut want: Vec<usize> = (0..=10).map(|i| i * 10).collect();
    want.extend((1..=10).map(|i| 100 + i * 30));
    assert_eq!(frames, want);
    assert_eq!(frames.len(), 21);
    let m = frames.len() - 1;
    let i100 = frames.iter().position(|&f| f == 100).unwrap();
    assert_eq!(progress(i100, m), 0.5);
    // hop(5 → 15) = 10/15, hop(15 → 5) = −10/15; one decimal in percent: ±66.7 %.
    assert!((hop(5, 15, m) - 2.0 / 3.0).abs() < 1e-15);
    assert!((hop(15, 5, m) + 2.0 / 3.0).abs() < 1e-15);
    assert_eq!(format!("{:+.1}%", 100.0 * hop(5, 15, m)), "+66.7%");
    assert_eq!(format!("{:+.1}%", 100.0 * hop(15, 5, m)), "-66.7%");
    assert_eq!(hop(7, 7, m), 0.0);
    // A zero pair around frame 130 (neighbours 100 and 160) moves it by ⌊0.075 · 60⌋ = 4 frames.
    let i130 = frames.iter().position(|&f| f == 130).unwrap();
    assert_eq!(zero_pair_offset(&frames, i130, 0.075), 4);
    // And the sampler's zero pairs around 130 are exactly 126 or 134.
    let pairs = sample_pairs(
        &frames,
        &LabelConfig { pairs_per_episode: 2000, ..Default::default() },
        &mut ChaCha8Rng::seed_from_u64(1),
    );
    let around: Vec<usize> = pairs.iter().filter(|p| p.hop == 0.0 && p.before == 130).map(|p| p.after).collect();
    assert!(!around.is_empty());
    assert!(around.iter().all(|&a| a == 126 || a == 134), "{around:?}");
    // Every hop label equals the formula on its sample indices.
    for p in pairs.iter().filter(|p| p.hop != 0.0) {
        let (a, b) = (frames.binary_search(&p.before).unwrap(), frames.binary_search(&p.after).unwrap());
        assert_eq!(p.hop, hop(a, b, m));
    }
}

#[test]
fn sub_tasks_get_equal_progress_whatever_their_length() {
    // Three sub-tasks of 30, 300 and 90 frames: each boundary sits at progress 1/3, 2/3.
    let frames = sample_frames(&[SubTask::new(0, 30), SubTask::new(30, 330), SubTask::new(330, 420)], 20);
    let m = frames.len() - 1;
    for (f, want) in [(30usize, 1.0 / 3.0), (330, 2.0 / 3.0), (420, 1.0)] {
        let i = frames.iter().position(|&x| x == f).unwrap();
        assert!((progress(i, m) - want).abs() < 1e-12, "frame {f}: {}", progress(i, m));
    }
}

/// True progress along an episode that wanders: up, back, up to the goal.
fn true_phi() -> Vec<f64> {
    vec![0.0, 0.1, 0.35, 0.3, 0.2, 0.45, 0.7, 0.65, 0.9, 1.0]
}

/// H(s_p, s_q) computed from true progress (the relative hop of the label pipeline).
fn exact_hop(pp: f64, pq: f64) -> f64 {
    if pq > pp {
        (pq - pp) / (1.0 - pp)
    } else if pq < pp {
        (pq - pp) / pp
    } else {
        0.0
    }
}

#[test]
fn exact_hops_reconstruct_phi_in_every_mode() {
    let phi = true_phi();
    let inc_hops: Vec<f64> = phi.windows(2).map(|w| exact_hop(w[0], w[1])).collect();
    let inc = reconstruct::incremental(&inc_hops);
    let mut tracker = Tracker::new(20.0, 1e-6);
    for (t, &p) in phi.iter().enumerate() {
        let f = reconstruct::forward(exact_hop(phi[0], p));
        let b = reconstruct::backward(exact_hop(1.0, p));
        assert!((inc[t] - p).abs() < 1e-12, "incremental t={t}: {} vs {p}", inc[t]);
        assert!((f - p).abs() < 1e-12, "forward t={t}");
        assert!((b - p).abs() < 1e-12, "backward t={t}");
        assert!((reconstruct::mean(inc[t], f, b) - p).abs() < 1e-12, "fused t={t}");
        let h = if t == 0 { 0.0 } else { inc_hops[t - 1] };
        let e =
            tracker.step(StepHops { incremental: h, from_start: exact_hop(phi[0], p), from_goal: exact_hop(1.0, p) });
        assert!((e.weighted - p).abs() < 1e-12, "weighted t={t}: {} vs {p}", e.weighted);
        assert!((e.mean - p).abs() < 1e-12 && (e.incremental - p).abs() < 1e-12);
        if t > 0 {
            assert!((e.weight - 1.0).abs() < 1e-12, "anchors agree, so w = 1");
        }
    }
}

#[test]
fn incremental_reconstruction_stays_in_the_unit_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for _ in 0..200 {
        let mut hops: Vec<f64> = (0..100).map(|_| rng.gen_range(-1.0..=1.0)).collect();
        // Include the extremes, which land exactly on the bounds.
        hops[10] = 1.0;
        hops[50] = -1.0;
        for p in reconstruct::incremental(&hops) {
            assert!((0.0..=1.0).contains(&p), "Φ_I = {p}");
            lo = lo.min(p);
            hi = hi.max(p);
        }
    }
    assert_eq!((lo, hi), (0.0, 1.0));
}
