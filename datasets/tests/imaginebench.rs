//! ImagineBench: a synthetic dataset in ImagineBench's released structure (pickled-numpy dicts
//! with padded (N, T, ·) arrays and masks, plus a {sentence: vector} encodings file), converted
//! by scripts/imaginebench_convert.py, read back in Rust, and sampled with real/imaginary weights.

use std::path::{Path, PathBuf};

use o2o_datasets::imaginebench::{ImagineBenchDataset, Rows};
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::replay::sample_weighted;
use rand::SeedableRng;

fn python() -> String {
    std::env::var("O2O_PYTHON")
        .ok()
        .or_else(|| option_env!("O2O_PYTHON").map(String::from))
        .expect("O2O_PYTHON is not set: run `make setup` (it writes .cargo/config.toml) so the venv python with numpy/h5py is known")
}

/// Real: 2 trajectories (T = 4, valid 3 and 2 steps); imaginary: 1 trajectory (valid 4 steps).
/// obs row (n, t) = [10 n + t, 0, 1] (imaginary: + 100), reward = t, action = [t, −t].
fn converted(dir: &Path) -> PathBuf {
    let script = r#"
import sys, os, numpy as np
d = sys.argv[1]
def make(N, valid, off, sentences):
    T = 4
    obs = np.zeros((N, T, 3), np.float32); act = np.zeros((N, T, 2), np.float32)
    rew = np.zeros((N, T, 1), np.float32); mask = np.zeros((N, T, 1), np.float32)
    for n in range(N):
        for t in range(T):
            obs[n, t] = [10 * n + t + off, 0, 1]; act[n, t] = [t, -t]; rew[n, t, 0] = t
        mask[n, :valid[n], 0] = 1
    instr = np.array([[s] for s in sentences], dtype=object)
    return {"observations": obs, "actions": act, "rewards": rew, "masks": mask, "instructions": instr}
np.save(os.path.join(d, "real.npy"), make(2, [3, 2], 0, ["Move forward.", "Jump."]), allow_pickle=True)
np.save(os.path.join(d, "imag.npy"), make(1, [4], 100, ["Move forward faster."]), allow_pickle=True)
enc = {"Move forward.": np.full(5, 0.1, np.float32), "Jump.": np.full(5, 0.2, np.float32), "Move forward faster.": np.full(5, 0.3, np.float32)}
np.save(os.path.join(d, "encode.npy"), enc, allow_pickle=True)
"#;
    let py = python();
    let res = std::process::Command::new(&py).arg("-c").arg(script).arg(dir).output().unwrap();
    assert!(res.status.success(), "fixture: {}", String::from_utf8_lossy(&res.stderr));
    let conv = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../scripts/imaginebench_convert.py");
    let out = dir.join("ib.hdf5");
    let res = std::process::Command::new(&py)
        .arg(conv)
        .args(["--real", dir.join("real.npy").to_str().unwrap(), "--imaginary", dir.join("imag.npy").to_str().unwrap()])
        .args(["--encodings", dir.join("encode.npy").to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(res.status.success(), "converter: {}", String::from_utf8_lossy(&res.stderr));
    assert!(String::from_utf8_lossy(&res.stdout).contains("9 transitions (5 real, 4 imaginary)"));
    out
}

#[test]
fn converter_flattens_masked_trajectories_and_rust_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = ImagineBenchDataset::read(&converted(dir.path())).unwrap();
    assert_eq!((d.len(), d.n_imaginary(), d.obs_dim, d.act_dim, d.embed_dim), (9, 4, 3, 2, 5));
    assert_eq!(d.rewards, vec![0.0, 1.0, 2.0, 0.0, 1.0, 0.0, 1.0, 2.0, 3.0]);
    assert_eq!(d.terminals, vec![0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(d.trajectory, vec![0, 0, 0, 1, 1, 0, 0, 0, 0]);
    assert_eq!(d.instructions, vec!["Move forward.", "Jump.", "Move forward faster."]);
    // Row 3 = real trajectory 1, step 0: obs [10, 0, 1], next [11, 0, 1].
    assert_eq!(d.observations[9..12], [10.0, 0.0, 1.0]);
    assert_eq!(d.next_observations[9..12], [11.0, 0.0, 1.0]);
    // Policy input = obs ++ embedding.
    let t = d.transitions(Rows::Imaginary, true, Some(McConfig::dense(0.5))).unwrap();
    assert_eq!(t.obs_dim, 8);
    assert_eq!(t.observations[..8], [100.0, 0.0, 1.0, 0.3, 0.3, 0.3, 0.3, 0.3]);
    // Returns of rewards 0, 1, 2, 3 with γ = 0.5: 1.375, 2.75, 3.5, 3.
    assert_eq!(t.mc_returns.unwrap(), vec![1.375, 2.75, 3.5, 3.0]);
    assert_eq!(d.transitions(Rows::Real, false, None).unwrap().len(), 5);
}

#[test]
fn weighted_sampling_of_real_against_imaginary() {
    let dir = tempfile::tempdir().unwrap();
    let d = ImagineBenchDataset::read(&converted(dir.path())).unwrap();
    let (real, imag) = d.buffers(true, None).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let b = sample_weighted(&real, &imag, 0.25, 64, &mut rng, tch::Device::Cpu).unwrap();
    let flag = Vec::<f32>::try_from(b.is_offline.as_ref().unwrap()).unwrap();
    let obs0 = Vec::<f32>::try_from(b.obs.select(1, 0)).unwrap();
    assert_eq!(flag.iter().filter(|&&f| f == 1.0).count(), 16, "25% real");
    for (f, o) in flag.iter().zip(&obs0) {
        assert_eq!(*f == 1.0, *o < 100.0, "real rows have obs[0] < 100, imaginary ≥ 100");
    }
}

#[test]
fn missing_key_in_a_converted_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = converted(dir.path());
    o2o_datasets::h5util::open_rw(&p).unwrap().unlink("source").unwrap();
    let err = ImagineBenchDataset::read(&p).unwrap_err().to_string();
    assert!(err.contains("source") && err.contains("ib.hdf5"), "{err}");
}
