//! `o2o export --to onnx` (issue 46, item 4): for every agent that exports to TorchScript — BC,
//! TD3+BC, SAC, CQL, Cal-QL, RLPD, WSRL, IQL, FamO2O over IQL and CQL, PPO, Uni-O4 — a small
//! agent after a few updates is exported to ONNX and run on 1000 observations by two runtimes,
//! tract (pure Rust) and onnxruntime (the venv's python, `scripts/run_onnx.py`), whose actions
//! must equal o2o's own evaluation actions (the agent's mode, clipped and rescaled to the env's
//! bounds) within 1e-5. FamO2O's policy is also exported with β as an input (fed the β(s) o2o
//! acted with) and with β fixed at export. A real run is exported with the CLI, whose
//! policy.json must describe the graph.
//!
//! onnxruntime comes from scripts/requirements.txt; where it is missing the onnxruntime half is
//! skipped with a message, unless `CI` is set, where that is a failure.

use o2o_agents::rng::AgentRng;
use o2o_agents::Agent;
use o2o_datasets::{RolloutBuffer, TransitionBatch};
use o2o_envs::BoxSpace;
use o2o_experiments::export::{onnx_policy, BetaChoice};
use o2o_experiments::logging::RerunArgs;
use o2o_experiments::run::actor::{ActionScale, AgentPolicy, Policy};
use o2o_experiments::run::prepare;
use o2o_experiments::Run;
use std::path::{Path, PathBuf};
use std::process::Command;
use tch::{Device, Kind, Tensor};

mod common;

const OBS: usize = 5;
const ACT: usize = 3;
const ROWS: usize = 1000;
const TOLERANCE: f32 = 1e-5;

fn scratch(prefix: &str) -> PathBuf {
    tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep()
}

/// The env's action bounds, different per dimension so a wrong rescaling shows.
fn scale() -> ActionScale {
    let space = BoxSpace::new(vec![-2.0, 0.0, -0.5], vec![2.0, 1.0, 3.0]);
    ActionScale::new(&space, "test").unwrap()
}

/// `ROWS` observations, N(0, 1.5²) around a per-dimension offset, row-major.
fn observations() -> Vec<f32> {
    let mut rng = AgentRng::new(46);
    let offset = [0.5f32, -1.0, 2.0, 0.0, -0.3];
    (0..ROWS).flat_map(|_| rng.normal_vec(OBS).into_iter().zip(offset).map(|(x, o)| o + 1.5 * x)).collect()
}

/// The agent of preset `preset` with `sets` on top (small networks), for `OBS`/`ACT` sizes.
fn agent(preset: &str, sets: &[&str]) -> Box<dyn Agent> {
    let config = Run::preset(preset).unwrap().set(sets.iter().copied()).unwrap().config().unwrap();
    prepare::build_agent(&config, OBS, ACT, Device::Cpu).unwrap()
}

/// A few updates on random batches (with Monte-Carlo returns, for Cal-QL), after the dataset
/// statistics the runner would give, so weights and normalization are not at their start.
fn train_off_policy(agent: &mut dyn Agent, updates: usize) {
    let mut rng = AgentRng::new(7);
    agent.set_state_stats(&[0.4, -0.8, 1.5, 0.1, -0.2], &[1.2, 0.7, 2.0, 1.0, 0.5]).unwrap();
    for _ in 0..updates {
        let n = 64;
        let batch = TransitionBatch {
            obs: rng.normal(&[n, OBS as i64], Device::Cpu) * 1.5,
            action: rng.normal(&[n, ACT as i64], Device::Cpu).tanh(),
            reward: rng.normal(&[n], Device::Cpu),
            next_obs: rng.normal(&[n, OBS as i64], Device::Cpu) * 1.5,
            terminal: Tensor::zeros([n], (Kind::Float, Device::Cpu)),
            mc_return: Some(rng.normal(&[n], Device::Cpu)),
            is_offline: None,
        };
        agent.update(&batch);
    }
}

/// Two PPO updates on synthetic rollouts (16 envs × 8 steps) whose observations also move the
/// running normalization; with `dataset` statistics frozen first (Uni-O4).
fn train_on_policy(agent: &mut dyn Agent, dataset: bool) {
    let mut rng = AgentRng::new(8);
    let on = agent.on_policy().unwrap();
    if dataset {
        assert!(on.use_dataset_stats(&[0.4, -0.8, 1.5, 0.1, -0.2], &[1.2, 0.7, 2.0, 1.0, 0.5]));
    }
    for round in 0..2 {
        let (envs, steps) = (16, 8);
        let mut buffer = RolloutBuffer::new(steps, envs, OBS, ACT);
        for t in 0..steps {
            let raw = rng.normal(&[envs as i64, OBS as i64], Device::Cpu) * 2.0 + 1.0;
            let obs = on.normalize_obs(&raw, true);
            let (a, log_prob, v) = on.act_value(&obs);
            let reward: Vec<f32> = Vec::try_from(&a.sum_dim_intlist(-1, false, Kind::Float)).unwrap();
            let f = |t: &Tensor| Vec::<f32>::try_from(&t.flatten(0, -1)).unwrap();
            let done = vec![false; envs];
            buffer.push_step(&f(&obs), &f(&a), &f(&log_prob), &f(&v), &reward, &done, &done).unwrap();
            (0..envs).for_each(|e| buffer.set_next_value(t, e, 0.0));
        }
        on.update_rollout(&buffer, round * 128, 256);
    }
}

/// o2o's own evaluation actions in the env's bounds, the observations in one batch, and the β
/// it acted with (FamO2O; empty for other agents).
fn o2o_actions(agent: &mut dyn Agent, obs: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let a = agent.act(&Tensor::from_slice(obs).view([ROWS as i64, OBS as i64]), true);
    let a: Vec<f32> = Vec::try_from(&a.flatten(0, -1)).unwrap();
    let env: Vec<f32> = a.chunks(ACT).flat_map(|row| scale().to_env(row)).collect();
    let beta = agent.act_info().into_iter().find(|(n, _)| *n == "beta").map(|(_, b)| b).unwrap_or_default();
    (env, beta)
}

/// The model's actions in tract for `obs` (rows of `obs_dim`, and `beta` when it takes β):
/// loaded, optimized for its symbolic batch size and run once on the whole batch.
fn tract_actions(bytes: &[u8], obs: &[f32], obs_dim: usize, beta: Option<&[f32]>) -> Vec<f32> {
    use tract_onnx::prelude::*;
    let rows = obs.len() / obs_dim;
    let model = tract_onnx::onnx().model_for_read(&mut &bytes[..]).unwrap().into_optimized().unwrap();
    let plan = model.into_runnable().unwrap();
    let mut inputs: TVec<TValue> = tvec!(Tensor::from_shape(&[rows, obs_dim], obs).unwrap().into());
    if let Some(b) = beta {
        inputs.push(Tensor::from_shape(&[rows], b).unwrap().into());
    }
    let out = plan.run(inputs).unwrap();
    assert_eq!(out[0].shape()[0], rows);
    out[0].to_plain_array_view::<f32>().unwrap().iter().copied().collect()
}

/// Whether some action lies strictly inside its bounds (a missing rescale would hide behind
/// actions that all clip).
fn some_inside(actions: &[f32]) -> bool {
    let scale = scale();
    let (low, high) = scale.bounds();
    actions.chunks(ACT).any(|row| row.iter().enumerate().any(|(i, a)| *a > low[i] + 1e-3 && *a < high[i] - 1e-3))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// One export to check: its ONNX bytes, the β fed to its `beta` input (empty: it has none),
/// and the actions it must give.
struct Case {
    name: String,
    bytes: Vec<u8>,
    beta: Vec<f32>,
    want: Vec<f32>,
}

/// Export `agent` (an `algo` agent) with `choice`, and check it in tract against `want`
/// (o2o's actions; for β `beta` when `choice` makes β an input).
fn case(name: &str, agent: &dyn Agent, algo: &str, choice: BetaChoice, want: &[f32], beta: &[f32]) -> Case {
    assert!(some_inside(want), "{name}: o2o's actions all lie at a bound");
    let bytes = onnx_policy(agent, algo, &scale(), choice, &[]).unwrap().bytes;
    let beta = if choice == BetaChoice::Input { beta.to_vec() } else { Vec::new() };
    let got = tract_actions(&bytes, &observations(), OBS, (!beta.is_empty()).then_some(&beta[..]));
    let d = max_abs_diff(want, &got);
    eprintln!("tract       {name:<30} max |Δaction| = {d:.2e}");
    assert!(d <= TOLERANCE, "{name} in tract: max |Δaction| = {d}");
    Case { name: name.into(), bytes, beta, want: want.to_vec() }
}

/// Runs every case's model through onnxruntime in the venv's python; `None` when onnxruntime
/// is not installed and `CI` is unset (then the caller skips with a message).
fn onnxruntime_actions(dir: &Path, cases: &[Case], obs: &[f32]) -> Option<serde_json::Value> {
    let mut models = Vec::new();
    for c in cases {
        let path = dir.join(format!("{}.onnx", c.name));
        std::fs::write(&path, &c.bytes).unwrap();
        let beta = (!c.beta.is_empty()).then_some(&c.beta);
        models.push(serde_json::json!({ "name": c.name, "path": path, "beta": beta }));
    }
    let rows: Vec<&[f32]> = obs.chunks(OBS).collect();
    let file = dir.join("cases.json");
    let cases_json = serde_json::json!({ "observation": rows, "models": models });
    std::fs::write(&file, cases_json.to_string()).unwrap();
    let py = o2o_experiments::paths::venv_python();
    let out = Command::new(&py)
        .arg(o2o_experiments::paths::scripts_dir().join("run_onnx.py"))
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED the onnxruntime half: {} (pip install -r scripts/requirements.txt)", stderr.trim());
        return None;
    }
    assert!(out.status.success(), "onnxruntime failed: {stderr}");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn every_exportable_agent_matches_o2o_in_tract_and_onnxruntime() {
    let obs = observations();
    let small = ["agent.actor.mlp.hidden=[16, 16]", "agent.critic.hidden=[16, 16]"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { small.iter().chain(extra).copied().collect() };
    // (name, preset, overrides): the presets' own layer kinds (LayerNorm in WSRL's actor, tanh
    // hidden layers in BC's, TD3+BC's, PPO's and Uni-O4's), plus SAC with SiLU, LayerNorm and a
    // state-independent σ.
    let off_policy: Vec<(&str, &str, Vec<&str>)> = vec![
        ("bc", "bc-imaginebench-mujoco-real", vec!["agent.actor.hidden=[16, 16]"]),
        (
            "td3bc",
            "td3bc-imaginebench-mujoco-real",
            vec!["agent.actor.hidden=[16, 16]", "agent.critic.hidden=[16, 16]"],
        ),
        ("sac", "sac-inverted-pendulum", with(&[])),
        (
            "sac-silu-layernorm-fixed-std",
            "sac-inverted-pendulum",
            with(&[
                "agent.actor.mlp.activation=\"silu\"",
                "agent.actor.mlp.layer_norm=true",
                "agent.actor.state_dependent_std=false",
            ]),
        ),
        ("cql", "cql-hopper-medium", with(&[])),
        ("calql", "calql-hopper-medium", with(&[])),
        ("rlpd", "rlpd-halfcheetah-medium", with(&[])),
        ("wsrl", "wsrl-halfcheetah-small", with(&[])),
        ("iql", "iql-hopper-medium", with(&["agent.value.hidden=[16, 16]"])),
    ];
    let mut cases = Vec::new();
    for (name, preset, sets) in &off_policy {
        let mut a = agent(preset, sets);
        train_off_policy(&mut *a, 20);
        let (want, _) = o2o_actions(&mut *a, &obs);
        cases.push(case(name, &*a, a.name(), BetaChoice::Agent, &want, &[]));
    }

    // On-policy: PPO (running statistics) and Uni-O4's online PPO (the dataset's, frozen).
    let mut ppo = agent("ppo-inverted-pendulum", &["agent.actor.mlp.hidden=[16, 16]", "agent.critic.hidden=[16, 16]"]);
    train_on_policy(&mut *ppo, false);
    let (want, _) = o2o_actions(&mut *ppo, &obs);
    cases.push(case("ppo", &*ppo, "ppo", BetaChoice::Agent, &want, &[]));
    let mut unio4 = agent(
        "unio4-halfcheetah-small",
        &[
            "agent.policy.actor.mlp.hidden=[16, 16]",
            "agent.online.actor.mlp.hidden=[16, 16]",
            "agent.online.critic.hidden=[16, 16]",
            "agent.value_refit.value.hidden=[16, 16]",
        ],
    );
    train_on_policy(&mut *unio4, true);
    let (want, _) = o2o_actions(&mut *unio4, &obs);
    cases.push(case("unio4", &*unio4, "unio4", BetaChoice::Agent, &want, &[]));

    // FamO2O: β from the balance model in the graph (the default); β as an input, fed the β(s)
    // o2o acted with; β fixed at export, against the input fed that constant; and FamO2O-CQL's
    // configured fixed β.
    let famo2o: Vec<(&str, &str, Vec<&str>)> = vec![
        (
            "famo2o-iql",
            "famo2o-iql-hopper-small",
            with(&["agent.value.hidden=[16, 16]", "agent.balance.mlp.hidden=[16, 16]"]),
        ),
        ("famo2o-cql", "famo2o-cql-halfcheetah-mixed-small", with(&["agent.balance.mlp.hidden=[16, 16]"])),
    ];
    for (name, preset, sets) in &famo2o {
        let mut a = agent(preset, sets);
        train_off_policy(&mut *a, 20);
        let (want, beta) = o2o_actions(&mut *a, &obs);
        assert_eq!(beta.len(), ROWS, "{name} reports the β it acted with");
        let spread = beta.iter().fold(f32::MIN, |m, b| m.max(*b)) - beta.iter().fold(f32::MAX, |m, b| m.min(*b));
        assert!(spread > 1e-4, "{name}: β(s) is the same on every observation");
        cases.push(case(name, &*a, a.name(), BetaChoice::Agent, &want, &[]));
        let input = case(&format!("{name}-beta-input"), &*a, a.name(), BetaChoice::Input, &want, &beta);
        let fixed = 1.25f32;
        let at_fixed = tract_actions(&input.bytes, &obs, OBS, Some(&vec![fixed; ROWS]));
        cases.push(input);
        let name = format!("{name}-beta-fixed");
        cases.push(case(&name, &*a, a.name(), BetaChoice::Fixed(fixed as f64), &at_fixed, &[]));
    }
    let sets = with(&["agent.balance.mlp.hidden=[16, 16]", "agent.fixed_beta=0.75"]);
    let mut fixed = agent("famo2o-cql-halfcheetah-mixed-small", &sets);
    train_off_policy(&mut *fixed, 20);
    let (want, _) = o2o_actions(&mut *fixed, &obs);
    cases.push(case("famo2o-cql-config-fixed-beta", &*fixed, "famo2o-cql", BetaChoice::Agent, &want, &[]));

    // Every agent that gives a deterministic policy (what TorchScript export takes) is here.
    let covered: std::collections::BTreeSet<&str> =
        cases.iter().map(|c| c.name.split(&['-'][..]).next().unwrap()).collect();
    for algo in ["bc", "td3bc", "sac", "cql", "calql", "rlpd", "wsrl", "iql", "famo2o", "ppo", "unio4"] {
        assert!(covered.contains(algo), "{algo} is not exported");
    }

    // onnxruntime: the same models, observations and β inputs.
    let Some(ort) = onnxruntime_actions(&scratch("onnx-runtimes-"), &cases, &obs) else { return };
    for c in &cases {
        let rows: Vec<Vec<f32>> = serde_json::from_value(ort[&c.name].clone()).unwrap();
        let got: Vec<f32> = rows.into_iter().flatten().collect();
        let d = max_abs_diff(&c.want, &got);
        eprintln!("onnxruntime {:<30} max |Δaction| = {d:.2e}", c.name);
        assert!(d <= TOLERANCE, "{} in onnxruntime: max |Δaction| = {d}", c.name);
    }
}

/// The CLI on a real run: `o2o export RUN --to onnx` writes `export/policy.onnx` (no temporary
/// file left) and a policy.json that names the format, inputs, outputs and units; the model
/// gives o2o's evaluation actions; β options are refused for a policy without β.
#[test]
fn cli_exports_a_run_to_onnx_with_its_description() {
    let done = Run::preset("sac-inverted-pendulum")
        .unwrap()
        .set([
            "train.random_steps=200",
            "train.online_steps=200",
            "eval.episodes=1",
            "agent.actor.mlp.hidden=[32, 32]",
            "agent.critic.hidden=[32, 32]",
        ])
        .unwrap()
        .runs_dir(scratch("onnx-cli-"))
        .device(Device::Cpu)
        .rerun(RerunArgs::off())
        .run()
        .unwrap();
    let run = &done.dir;
    let o = Command::new(common::O2O).arg("export").arg(run).args(["--to", "onnx"]).output().unwrap();
    assert!(o.status.success(), "o2o export failed: {}", String::from_utf8_lossy(&o.stderr));
    let out = run.join("export/policy.onnx");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), out.display().to_string());
    let names: Vec<String> = std::fs::read_dir(run.join("export"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect();
    assert_eq!(names.len(), 2, "policy.onnx and policy.json only: {names:?}");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("export/policy.json")).unwrap()).unwrap();
    assert_eq!(spec["format"], "o2o-policy-v1");
    assert_eq!(spec["module_format"], "onnx");
    assert_eq!(spec["module"], "policy.onnx");
    assert!(spec.get("method").is_none() && spec.get("beta").is_none(), "{spec}");
    assert_eq!(spec["input"]["name"], "observation");
    assert_eq!(spec["input"]["shape"], serde_json::json!([-1, 4]));
    assert_eq!(spec["output"]["name"], "action");
    assert_eq!(spec["output"]["low"], serde_json::json!([-3.0]));
    assert!(spec["output"]["units"].as_str().unwrap().contains("env's action units"), "{spec}");
    assert_eq!(spec["observation_normalization"], "none");

    // Its actions are o2o's evaluation actions, one observation at a time.
    let mut loaded = prepare::load_checkpoint_agent(run, None, None, Device::Cpu).unwrap();
    let scale = ActionScale::new(loaded.env.action_space(), &loaded.config.env).unwrap();
    let mut policy = AgentPolicy { agent: &mut *loaded.agent, device: Device::Cpu, deterministic: true };
    let mut rng = AgentRng::new(11);
    let obs: Vec<f32> = (0..ROWS * 4).map(|_| 0.5 * rng.normal_vec(1)[0]).collect();
    let want: Vec<f32> = obs.chunks(4).flat_map(|o| scale.to_env(&policy.act(o).unwrap())).collect();
    assert!(want.iter().any(|a| a.abs() < 2.9), "the test observations only give clipped actions");
    let got = tract_actions(&std::fs::read(&out).unwrap(), &obs, 4, None);
    let d = max_abs_diff(&want, &got);
    assert!(d <= TOLERANCE, "CLI export in tract: max |Δaction| = {d}");

    // β options need a β-conditioned policy, and ONNX.
    for args in [&["--to", "onnx", "--beta", "input"][..], &["--to", "torchscript", "--beta", "0.5"][..]] {
        let o = Command::new(common::O2O).arg("export").arg(run).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("β"), "{args:?}: {err}");
    }
    let o = Command::new(common::O2O).arg("export").arg(run).args(["--to", "onnx", "--beta", "lots"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("a number"));
}
