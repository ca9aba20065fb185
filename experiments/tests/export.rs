//! `o2o export --to torchscript` (issue 16, item 4): the exported policy, loaded with PyTorch
//! alone (the venv's python, `torch.jit.load`) and with `tch::CModule` in Rust, gives o2o's own
//! evaluation actions on 1000 observations to 1e-6 — for SAC's tanh-Gaussian actor and IQL's
//! Gaussian one — and the JSON beside it describes both spaces.

use o2o_datasets::d4rl::{Columns, D4rlDataset};
use o2o_envs::Env;
use o2o_experiments::logging::RerunArgs;
use o2o_experiments::run::actor::{ActionScale, AgentPolicy, Policy};
use o2o_experiments::run::{checkpoint, prepare};
use o2o_experiments::Run;
use std::path::{Path, PathBuf};
use std::process::Command;
use tch::{Device, Tensor};

mod common;

fn runs_dir(prefix: &str) -> PathBuf {
    tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep()
}

/// 1000 observations around the env's reset states (scaled normal noise), row-major.
fn observations(dim: usize) -> Vec<Vec<f32>> {
    let mut rng = o2o_agents::rng::AgentRng::new(11);
    (0..1000).map(|_| rng.normal_vec(dim).into_iter().map(|x| 0.5 * x).collect()).collect()
}

/// o2o's deterministic actions in env units, one observation at a time (as evaluation acts).
fn o2o_actions(run: &Path, obs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut loaded = prepare::load_checkpoint_agent(run, None, None, Device::Cpu).unwrap();
    let scale = ActionScale::new(loaded.env.action_space(), &loaded.config.env).unwrap();
    let mut policy = AgentPolicy { agent: &mut *loaded.agent, device: Device::Cpu, deterministic: true };
    obs.iter().map(|o| scale.to_env(&policy.act(o).unwrap())).collect()
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f32::max)
}

/// Export with the real CLI, then check the module from Python and from Rust.
fn check_export(run: &Path, normalization: &str) {
    let out = run.join("export").join("policy.pt");
    let o = Command::new(common::O2O).arg("export").arg(run).args(["--to", "torchscript"]).output().unwrap();
    assert!(o.status.success(), "o2o export failed: {}", String::from_utf8_lossy(&o.stderr));
    assert!(out.is_file() && run.join("export/policy.json").is_file());
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("export/policy.json")).unwrap()).unwrap();
    assert_eq!(spec["format"], "o2o-policy-v1");
    assert_eq!(spec["env"], "InvertedPendulum-v5");
    assert_eq!(spec["input"]["shape"], serde_json::json!([-1, 4]));
    assert_eq!(spec["output"]["shape"], serde_json::json!([-1, 1]));
    assert_eq!(spec["output"]["low"], serde_json::json!([-3.0]));
    assert_eq!(spec["input"]["low"][0], serde_json::Value::Null, "unbounded observations are null");
    assert!(
        spec["observation_normalization"].as_str().is_some_and(|n| n.starts_with(normalization)),
        "{}",
        spec["observation_normalization"]
    );

    let obs = observations(4);
    let want = o2o_actions(run, &obs);
    // Actions that reach both ends of the box would hide a missing rescale; these must not all clip.
    assert!(want.iter().any(|a| a[0].abs() < 2.9), "the test observations only give clipped actions");

    // PyTorch alone.
    let obs_file = run.join("export/obs.json");
    std::fs::write(&obs_file, serde_json::json!({ "obs": obs }).to_string()).unwrap();
    let py = Command::new(o2o_experiments::paths::venv_python())
        .arg(o2o_experiments::paths::scripts_dir().join("run_export.py"))
        .arg(&out)
        .arg(&obs_file)
        .output()
        .unwrap();
    assert!(py.status.success(), "torch.jit.load failed: {}", String::from_utf8_lossy(&py.stderr));
    let got: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    let from_python: Vec<Vec<f32>> = serde_json::from_value(got["actions"].clone()).unwrap();
    let d = max_abs_diff(&want, &from_python);
    assert!(d <= 1e-6, "python: max |Δaction| = {d}");

    // tch::CModule, batched.
    let module = tch::CModule::load(&out).unwrap();
    let flat: Vec<f32> = obs.iter().flatten().copied().collect();
    let a = module.forward_ts(&[Tensor::from_slice(&flat).view([1000, 4])]).unwrap();
    let from_rust: Vec<Vec<f32>> =
        Vec::<f32>::try_from(&a.flatten(0, -1)).unwrap().chunks(1).map(|c| c.to_vec()).collect();
    let d = max_abs_diff(&want, &from_rust);
    assert!(d <= 1e-6, "tch::CModule: max |Δaction| = {d}");
}

#[test]
fn sac_export_matches_o2o_actions_in_python_and_rust() {
    let done = Run::preset("sac-inverted-pendulum")
        .unwrap()
        .set(["train.random_steps=300", "train.online_steps=300", "eval.episodes=1", "checkpoint.every=200"])
        .unwrap()
        .runs_dir(runs_dir("export-sac-"))
        .device(Device::Cpu)
        .rerun(RerunArgs::off())
        .run()
        .unwrap();
    check_export(&done.dir, "none");

    // A named checkpoint, and a name that is not there.
    let ckpts = checkpoint::list(&done.dir).unwrap();
    assert!(ckpts.len() >= 2, "{ckpts:?}");
    let first = ckpts[0].file_name().unwrap().to_string_lossy().to_string();
    let step: u64 = first.trim_start_matches("step-").parse().unwrap();
    let o = Command::new(common::O2O)
        .arg("export")
        .arg(&done.dir)
        .args(["--checkpoint", &format!("step-{step}"), "--out"])
        .arg(done.dir.join("early.pt"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(done.dir.join("early.json")).unwrap()).unwrap();
    assert_eq!(spec["step"], step);
    let o = Command::new(common::O2O).arg("export").arg(&done.dir).args(["--checkpoint", "step-77"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("step-77") && err.contains(&first), "{err}");
}

#[test]
fn iql_export_matches_o2o_actions_in_python_and_rust() {
    // IQL's Gaussian actor, trained offline on a few noisy-controller episodes held in memory.
    let mut env = o2o_envs::make("InvertedPendulum-v5").unwrap();
    let mut c = Columns { obs_dim: 4, act_dim: 1, ..Columns::default() };
    for ep in 0..5 {
        let mut obs = env.reset(Some(ep)).unwrap();
        for _ in 0..60 {
            let a = (10.0 * obs[1] + 2.0 * obs[3]).clamp(-3.0, 3.0);
            let s = env.step(&[a]).unwrap();
            c.observations.extend_from_slice(&obs);
            c.actions.push(a);
            c.rewards.push(s.reward as f32);
            c.terminals.push(s.terminated);
            c.timeouts.push(s.truncated);
            obs = s.obs.clone();
            if s.done() {
                break;
            }
        }
        *c.timeouts.last_mut().unwrap() |= !*c.terminals.last().unwrap();
    }
    let data = D4rlDataset::from_columns(c).unwrap();
    let done = Run::preset("iql-hopper-medium")
        .unwrap()
        .set([
            "env=InvertedPendulum-v5",
            "dataset.reward=\"none\"",
            "agent.critic.hidden=[32, 32]",
            "agent.value.hidden=[32, 32]",
            "agent.actor.mlp.hidden=[32, 32]",
            "eval.episodes=1",
        ])
        .unwrap()
        .dataset(data)
        .unwrap()
        .runs_dir(runs_dir("export-iql-"))
        .device(Device::Cpu)
        .rerun(RerunArgs::off())
        .fit(200)
        .unwrap();
    check_export(&done.dir, "none");
}

/// PPO normalizes observations inside its policy (CleanRL's running mean and variance); the
/// exported module carries the statistics of the checkpoint and its policy.json says so (issue
/// 47, C8).
#[test]
fn ppo_export_normalizes_inside_the_module_and_says_so() {
    let done = Run::preset("ppo-inverted-pendulum")
        .unwrap()
        .set(["rollout.num_envs=2", "rollout.steps=64", "train.online_steps=256", "eval.episodes=1", "eval.every=128"])
        .unwrap()
        .runs_dir(runs_dir("export-ppo-"))
        .device(Device::Cpu)
        .rerun(RerunArgs::off())
        .run()
        .unwrap();
    check_export(&done.dir, "running mean and variance");
}
