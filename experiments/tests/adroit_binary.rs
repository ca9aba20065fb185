//! Adroit's binary setting through the runner (issue #25): every `{calql,wsrl,rlpd}-{pen,door,relocate}-binary`
//! preset resolves and builds its agent for the task's sizes, and `dataset.relabel = "adroit-binary"`
//! on a small D4RL-layout file written here gives the rewards, terminals and Monte-Carlo returns
//! Cal-QL's `get_hand_dataset_with_mc_calculation` defines, with the success flags the
//! `*-binary-v0` env reports.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::scores::RewardPreset;
use o2o_envs::{make_mujoco, Env};
use o2o_experiments::run::config::{DatasetConfig, Relabel, TransitionRule};
use o2o_experiments::run::{data, prepare::build_agent, presets};
use o2o_experiments::Run;
use std::path::PathBuf;

#[test]
fn every_binary_preset_builds_its_agent_and_names_its_data() {
    tch::set_num_threads(1); // libtorch's spinning OpenMP threads only slow a shared 2-core machine
    let mut seen = 0;
    for name in presets::names().into_iter().filter(|n| n.ends_with("-binary")) {
        let c = Run::preset(name).unwrap().config().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let task = ["pen", "door", "relocate"].into_iter().find(|t| name.contains(&format!("-{t}-"))).unwrap();
        assert_eq!(c.env, format!("{task}-binary-v0"), "{name}");
        let d = c.dataset.as_ref().unwrap();
        assert_eq!(
            (d.id.as_deref(), d.relabel),
            (Some(format!("{task}-human-v1").as_str()), Some(Relabel::AdroitBinary)),
            "{name}"
        );
        // Cal-QL and WSRL scale −1/0 to −5/+5; RLPD keeps the env's rewards.
        assert_eq!(d.reward.name(), if c.algo == "rlpd" { "none" } else { "adroit-binary" }, "{name}");
        let (obs, act) = match task {
            "pen" => (45, 24),
            "door" => (39, 28),
            _ => (39, 30),
        };
        // Building 10 critics of 3×512 is the slow part: one task per algorithm.
        if task == "door" {
            let mut agent = build_agent(&c, obs, act, tch::Device::Cpu).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            let a = agent.act(&tch::Tensor::zeros([1, obs as i64], (tch::Kind::Float, tch::Device::Cpu)), true);
            assert_eq!(a.size(), vec![1, act as i64], "{name}");
        }
        seen += 1;
    }
    assert_eq!(seen, 9);
}

/// Two door-v1 episodes in D4RL's human-demo layout (timeouts on the last row, no terminals,
/// no `next_observations`): in the first the door is forced open at steps 6 and 9 (success
/// flags as the env reports them), in the second it never opens. Returns the file and, per row
/// of the first episode, the binary reward `1[info.success] − 1` of `door-binary-v0` (whose
/// reward is that, `o2o-envs` `tests/adroit.rs`) for the same transitions.
fn door_file(dir: &std::path::Path) -> (PathBuf, Vec<f64>) {
    let mut dense = make_mujoco("door-v1").unwrap();
    let dof = {
        let m = dense.inner().model();
        m.jnt_dofadr()[m.joint("door_hinge").unwrap().id] as usize
    };
    let mut ds = D4rlDataset::empty(PathBuf::from("test"), 39, 28);
    ds.next_observations = None;
    let mut binary_rewards = Vec::new();
    for ep in 0..2u64 {
        let mut obs = dense.reset(Some(ep)).unwrap();
        for t in 0..12 {
            if ep == 0 && (t == 6 || t == 9) {
                let mut qpos = dense.inner().qpos().to_vec();
                qpos[dof] = 1.5;
                let qvel = vec![0.0; qpos.len()];
                dense.inner_mut().set_state(&qpos, &qvel).unwrap();
            }
            let a = vec![0.0f32; 28];
            let s = dense.step(&a).unwrap();
            if ep == 0 {
                binary_rewards.push(if s.info.success.unwrap() { 0.0 } else { -1.0 });
            }
            ds.observations.extend_from_slice(&obs);
            ds.actions.extend_from_slice(&a);
            ds.rewards.push(s.reward as f32);
            ds.terminals.push(0.0);
            ds.timeouts.as_mut().unwrap().push(if t == 11 { 1.0 } else { 0.0 });
            obs = s.obs;
        }
    }
    let path = dir.join("door-small.hdf5");
    ds.write(&path).unwrap();
    (path, binary_rewards)
}

#[test]
fn adroit_binary_relabel_equals_calqls_processing() {
    let dir = tempfile::tempdir().unwrap();
    let (file, binary_rewards) = door_file(dir.path());
    let env = make_mujoco("door-binary-v0").unwrap();
    let cfg = DatasetConfig {
        id: None,
        path: Some(file),
        reward: RewardPreset::AdroitBinary,
        transitions: TransitionRule::Qlearning,
        in_memory: false,
        format: None,
        lerobot: None,
        rows: None,
        real_fraction: None,
        relabel: Some(Relabel::AdroitBinary),
    };
    let mc = McConfig { gamma: 0.99, sparse_failure_reward: Some(-5.0) };
    let data = data::load(&cfg, None, env.action_space(), "door-binary-v0", 39, 28, Some(200), Some(mc)).unwrap();
    // qlearning drops the timeout row: episode 1 keeps rows 0..11, whose next states are the
    // states after steps 0..10. The env's binary rewards of those steps, cut after the last 0:
    let raw: Vec<f64> = binary_rewards[..11].to_vec();
    let last = raw.iter().rposition(|r| *r == 0.0).expect("the forced openings are successes");
    assert!(raw.iter().filter(|r| **r == 0.0).count() >= 2, "{raw:?}");
    let want_r: Vec<f32> = raw[..=last].iter().map(|r| (10.0 * r + 5.0) as f32).collect();
    assert_eq!(data.buffer.len(), want_r.len(), "episode 2 never opens the door and is dropped");
    // Cal-QL's calc_return_to_go with dones = (r == 0): G_t = r_t + γ (1 − d_t) G_{t+1}.
    let mut want_g = vec![0.0f32; want_r.len()];
    let mut g = 0.0f64;
    for t in (0..want_r.len()).rev() {
        let done = raw[t] == 0.0;
        g = want_r[t] as f64 + 0.99 * if done { 0.0 } else { g };
        want_g[t] = g as f32;
    }
    let (r, g, d) = (data.buffer.rewards(), data.buffer.mc_returns().unwrap(), data.buffer.terminals());
    assert_eq!(r, &want_r[..]);
    for t in 0..want_r.len() {
        assert!((g[t] - want_g[t]).abs() < 1e-4, "MC return at {t}: {} vs {}", g[t], want_g[t]);
        assert_eq!(d[t], if raw[t] == 0.0 { 1.0 } else { 0.0 }, "terminal at {t}");
    }
}
