//! Helpers shared by the tests that drive the real `o2o` binary through whole runs.

#![allow(dead_code)]

use o2o_datasets::d4rl::D4rlDataset;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The `o2o` binary under test.
pub const O2O: &str = env!("CARGO_BIN_EXE_o2o");

/// A child process killed (SIGKILL) when dropped, so a failing test leaves nothing running.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tiny SAC config for fleet tests on `env` (nets of 32 units, 200 random steps, then
/// `online` transitions; a checkpoint every 400, no evaluation until the end).
pub fn tiny_fleet_sac(env: &str, online: u64) -> String {
    format!(
        r#"algo = "sac"
env = "{env}"
seed = 3
[train]
random_steps = 200
online_steps = {online}
batch_size = 32
updates_per_step = 1
replay_capacity = 20000
log_every = 200
[eval]
every = 0
episodes = 1
at_phase_end = false
[checkpoint]
every = 400
keep = 2
[diagnostics]
every = 0
[agent]
critic = {{ hidden = [32, 32] }}
actor = {{ mlp = {{ hidden = [32, 32] }} }}
"#
    )
}

/// Wait until `ok`, polling every 50 ms; fails the test naming `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `o2o <args> --device cpu --threads 1 --rerun=off --runs-dir <fresh dir> [--set s]...`,
/// asserts it succeeded, and returns the one run directory it made. The runs folder lives under
/// cargo's per-target scratch folder (prefixed `prefix`) and is kept so a failing run can be
/// inspected.
pub fn run_o2o<S: AsRef<str>>(prefix: &str, args: &[&str], sets: &[S]) -> PathBuf {
    let runs = tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let mut c = Command::new(O2O);
    c.args(args).args(["--device", "cpu", "--threads", "1", "--rerun=off", "--runs-dir"]).arg(&runs);
    for s in sets {
        c.args(["--set", s.as_ref()]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "o2o {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

/// A run's `metrics.jsonl` without the wall-clock fields (`wall_s`, `perf/*`): what an exact
/// resume must reproduce.
pub fn metrics_without_time(run: &Path) -> Vec<std::collections::BTreeMap<String, serde_json::Value>> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut m: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_str(l).unwrap();
            m.retain(|k, _| k != "wall_s" && !k.starts_with("perf/"));
            m
        })
        .collect()
}

/// Every value of metric `key` in a run's `metrics.jsonl`, in order.
pub fn metric(run: &Path, key: &str) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap().get(key).and_then(|v| v.as_f64()))
        .collect()
}

/// `episodes` episodes on InvertedPendulum-v5 of a PD controller on the pole angle and cart
/// state with Gaussian action noise of σ = `noise` (the action range is ±3), as a D4RL-format
/// file in `dir`. σ = 0.3 gives an expert (return 1000); σ = 3 a poor controller. Returns the
/// path and the mean return.
pub fn pd_dataset(dir: &Path, episodes: u64, noise_std: f32) -> (PathBuf, f64) {
    let mut env = o2o_envs::make("InvertedPendulum-v5").unwrap();
    let mut noise = o2o_agents::rng::AgentRng::new(7);
    let mut ds = D4rlDataset::empty(PathBuf::from("scripted"), 4, 1);
    let mut total = 0.0;
    for ep in 0..episodes {
        let mut obs = env.reset(Some(1000 + ep)).unwrap();
        loop {
            let (x, th, xd, thd) = (obs[0], obs[1], obs[2], obs[3]);
            let a = (0.5 * x + 10.0 * th + 1.0 * xd + 2.0 * thd + noise_std * noise.normal_vec(1)[0]).clamp(-3.0, 3.0);
            let s = env.step(&[a]).unwrap();
            total += s.reward;
            ds.observations.extend_from_slice(&obs);
            ds.actions.push(a);
            ds.rewards.push(s.reward as f32);
            ds.terminals.push(if s.terminated { 1.0 } else { 0.0 });
            ds.timeouts.as_mut().unwrap().push(if s.truncated && !s.terminated { 1.0 } else { 0.0 });
            ds.next_observations.as_mut().unwrap().extend_from_slice(&s.obs);
            obs = s.obs;
            if s.terminated || s.truncated {
                break;
            }
        }
    }
    let path = dir.join(format!("pd-{episodes}-{noise_std}.hdf5"));
    ds.write(&path).unwrap();
    (path, total / episodes as f64)
}
