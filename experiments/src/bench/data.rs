//! `o2o bench data [--json]`: dataset loading and replay sampling ([`run`] with
//! [`DataOptions`]; [`DataReport`] is what it measured).
//!
//! 1. Writes a D4RL-format file of `--transitions` rows (default 1M; HalfCheetah shapes: obs 17,
//!    act 6, float32, bool flags, with `next_observations`) to a temp folder.
//! 2. Times our full load (`D4rlDataset::read`: every key, plus validation: shapes, lengths,
//!    NaN/∞ scan) against h5py reading the same keys into numpy (`scripts/bench_h5py.py`), in
//!    the same run, on the same (page-cached) file, alternating the two; best of `--repeats` each.
//! 3. Measures uniform replay sampling (batches of 256, gathered into tensors) on one thread,
//!    against numpy fancy-index sampling of the same columns in the same script.
//!
//! With `--json` the last line is one JSON object with keys `transitions`, `ours_load_s`,
//! `h5py_load_s`, `sample_transitions_per_s` (plus `numpy_sample_transitions_per_s`).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use o2o_datasets::d4rl::{BuildOptions, D4rlDataset};
use o2o_datasets::OfflineBuffer;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// What `o2o bench data` measures.
#[derive(Debug, Clone)]
pub struct DataOptions {
    /// Rows in the generated file.
    pub transitions: usize,
    /// Loads timed per reader (the best is reported).
    pub repeats: usize,
    /// Batches drawn for the sampling rate.
    pub batches: usize,
}

/// What `o2o bench data` measured.
#[derive(Debug, Clone)]
pub struct DataReport {
    /// Rows of the file.
    pub transitions: usize,
    /// Our full load (read and validate), seconds, best of the repeats.
    pub ours_load_s: f64,
    /// h5py reading the same keys into numpy, seconds, best of the repeats.
    pub h5py_load_s: f64,
    /// Our uniform replay sampling, transitions per second (batches of 256, one thread).
    pub sample_transitions_per_s: f64,
    /// numpy fancy-index sampling of the same columns, transitions per second.
    pub numpy_sample_transitions_per_s: f64,
}

impl DataReport {
    /// The table `o2o bench data` prints.
    pub fn table(&self) -> String {
        let (n, ours, h5py, rate, numpy_rate) = (
            self.transitions,
            self.ours_load_s,
            self.h5py_load_s,
            self.sample_transitions_per_s,
            self.numpy_sample_transitions_per_s,
        );
        [
            format!("transitions                 {n}"),
            format!("load, ours (read+validate)  {ours:.3} s"),
            format!("load, h5py -> numpy         {h5py:.3} s"),
            format!("load speed ratio            {:.2}x h5py (>= 1 is the target)", h5py / ours),
            format!("sampling, ours (1 thread)   {:.2} M transitions/s (batch 256; target >= 1 M/s)", rate / 1e6),
            format!("sampling, numpy reference   {:.2} M transitions/s ({:.2}x)", numpy_rate / 1e6, rate / numpy_rate),
        ]
        .join("\n")
    }

    /// The JSON object `o2o bench data --json` prints last.
    pub fn json(&self) -> serde_json::Value {
        json!({"transitions": self.transitions, "ours_load_s": self.ours_load_s, "h5py_load_s": self.h5py_load_s, "sample_transitions_per_s": self.sample_transitions_per_s, "numpy_sample_transitions_per_s": self.numpy_sample_transitions_per_s})
    }
}

/// Write the file into a scratch folder (removed afterwards), time the loads and the sampling.
pub fn run(opts: &DataOptions) -> Result<DataReport> {
    let (n, od, ad) = (opts.transitions, 17usize, 6usize);
    let dir = std::env::temp_dir().join(format!("o2o-bench-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("halfcheetah_bench-v2.hdf5");
    let result = bench(opts, &path, n, od, ad);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn bench(args: &DataOptions, path: &std::path::Path, n: usize, od: usize, ad: usize) -> Result<DataReport> {
    // 1. A synthetic D4RL file: 1000-step episodes ending in a timeout, values from a seeded RNG.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut col = |len: usize| (0..len).map(|_| rng.gen_range(-1.0f32..1.0)).collect::<Vec<f32>>();
    let ds = D4rlDataset {
        source: path.to_path_buf(),
        obs_dim: od,
        act_dim: ad,
        observations: col(n * od),
        actions: col(n * ad),
        rewards: col(n),
        terminals: vec![0.0; n],
        timeouts: Some((0..n).map(|i| ((i + 1) % 1000 == 0) as u8 as f32).collect()),
        next_observations: Some(col(n * od)),
        infos: Default::default(),
        metadata: Default::default(),
        dtypes: Default::default(),
    };
    let t = Instant::now();
    ds.write(path)?;
    eprintln!("wrote {} rows to {} in {:.2} s", n, path.display(), t.elapsed().as_secs_f64());
    drop(ds);

    // 2. Loads, alternating ours and h5py (one load per python process, start-up not timed) so
    //    both see the same machine load; best of `repeats` each.
    let script = crate::paths::scripts_dir().join("bench_h5py.py");
    let python = crate::paths::venv_python();
    let reference = |batches: usize| -> Result<serde_json::Value> {
        let out = std::process::Command::new(&python)
            .arg(&script)
            .arg(path)
            .args(["--repeats", "1", "--batches", &batches.to_string()])
            .output()
            .with_context(|| format!("running {} {}", python.display(), script.display()))?;
        if !out.status.success() {
            bail!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
        }
        serde_json::from_slice(out.stdout.trim_ascii()).context("parsing bench_h5py.py output")
    };
    let (mut ours, mut h5py) = (f64::INFINITY, f64::INFINITY);
    let mut loaded = None;
    for _ in 0..args.repeats.max(1) {
        let t = Instant::now();
        let d = D4rlDataset::read(path)?;
        ours = ours.min(t.elapsed().as_secs_f64());
        loaded = Some(d);
        h5py = h5py.min(reference(0)?["load_s"].as_f64().context("bench_h5py.py: no load_s")?);
    }
    let d = loaded.context("no load ran")?;
    let numpy_rate = reference(2000)?["sample_transitions_per_s"].as_f64().unwrap_or(f64::NAN);

    // 3. Sampling on one thread, batches of 256.
    tch::set_num_threads(1);
    let buf = OfflineBuffer::new(d.corrected_transitions(&BuildOptions::default())?)?;
    drop(d);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for _ in 0..50 {
        buf.sample(256, &mut rng, tch::Device::Cpu)?;
    }
    let t = Instant::now();
    for _ in 0..args.batches {
        let b = buf.sample(256, &mut rng, tch::Device::Cpu)?;
        std::hint::black_box(&b);
    }
    let rate = (256 * args.batches) as f64 / t.elapsed().as_secs_f64();
    Ok(DataReport {
        transitions: n,
        ours_load_s: ours,
        h5py_load_s: h5py,
        sample_transitions_per_s: rate,
        numpy_sample_transitions_per_s: numpy_rate,
    })
}
