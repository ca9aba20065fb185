//! A run's own account of where its loop's time goes: `perf/sample_s` and `perf/update_s`
//! beside `perf/steps_per_s` in metrics.jsonl (issue 27: the loop's cost beside the update,
//! measured in the same seconds).

mod common;

use std::path::Path;

/// Every `perf/steps_per_s` record's `(window seconds, perf/sample_s, perf/update_s)`.
fn windows(run: &Path, log_every: f64) -> Vec<(f64, f64, f64)> {
    let (rate, sample, update) = (
        common::metric(run, "perf/steps_per_s"),
        common::metric(run, "perf/sample_s"),
        common::metric(run, "perf/update_s"),
    );
    assert_eq!(
        (sample.len(), update.len()),
        (rate.len(), rate.len()),
        "every perf/steps_per_s record carries perf/sample_s and perf/update_s"
    );
    rate.iter().zip(sample).zip(update).map(|((r, s), u)| (log_every / r, s, u)).collect()
}

#[test]
fn runs_log_the_seconds_their_loop_spends_sampling_and_updating() {
    // Offline: every step samples and updates.
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/halfcheetah-small/halfcheetah-medium-v2.hdf5");
    let sets = [
        "train.offline_steps=300",
        "train.log_every=100",
        "eval.every=0",
        "eval.at_phase_end=false",
        "diagnostics.every=0",
    ]
    .map(String::from);
    let run =
        common::run_o2o("o2o-loop-time-", &["train", "--preset", "iql-halfcheetah-medium", "--dataset", data], &sets);
    let w = windows(&run, 100.0);
    assert_eq!(w.len(), 3);
    for (secs, sample, update) in w {
        assert!(sample > 0.0 && update > 0.0, "offline window: sample {sample} s, update {update} s");
        assert!(
            sample + update <= secs * 1.001 + 1e-4,
            "the parts ({sample} + {update} s) exceed the window ({secs} s)"
        );
    }
    // Online: no updates during the random steps, then one per env step.
    let sets = [
        "train.random_steps=200",
        "train.online_steps=200",
        "train.log_every=100",
        "eval.every=0",
        "eval.at_phase_end=false",
        "diagnostics.every=0",
    ]
    .map(String::from);
    let run = common::run_o2o("o2o-loop-time-", &["train", "--preset", "sac-halfcheetah"], &sets);
    let w = windows(&run, 100.0);
    assert_eq!(w.len(), 4);
    for &(_, sample, update) in &w[..2] {
        assert_eq!((sample, update), (0.0, 0.0), "random steps neither sample nor update");
    }
    for &(secs, sample, update) in &w[2..] {
        assert!(
            sample > 0.0 && update > 0.0 && sample + update < secs,
            "online window of {secs} s: sample {sample} s, update {update} s"
        );
    }
}
