//! Checkpoints: exact resume (N updates straight == N/2, save, load into a fresh agent, N/2),
//! partial warm-start loads, and typed errors for bad files.

use o2o_agents::iql::{Iql, IqlConfig};
use o2o_agents::rng::AgentRng;
use o2o_agents::sac::{Sac, SacConfig};
use o2o_agents::{build, Agent, AgentConfig, AgentError, Metrics, Stateful};
use o2o_datasets::TransitionBatch;
use tch::{Device, Kind, Tensor};

const OBS: usize = 5;
const ACT: usize = 2;

fn batches(n: usize) -> Vec<TransitionBatch> {
    let mut rng = AgentRng::new(99);
    (0..n)
        .map(|_| TransitionBatch {
            obs: rng.normal(&[64, OBS as i64], Device::Cpu),
            action: rng.normal(&[64, ACT as i64], Device::Cpu).tanh(),
            reward: rng.normal(&[64], Device::Cpu),
            next_obs: rng.normal(&[64, OBS as i64], Device::Cpu),
            terminal: rng.uniform_tensor(&[64], Device::Cpu).ge(0.8).to_kind(Kind::Float),
            mc_return: None,
            is_offline: None,
        })
        .collect()
}

fn configs() -> Vec<AgentConfig> {
    vec![
        AgentConfig::Sac(SacConfig { critic_steps: 2, ..SacConfig::default() }),
        // The WSRL-style critic: subsets, LayerNorm, softplus temperature, plus dropout so the
        // dropout masks' random stream is exercised too.
        AgentConfig::Sac(SacConfig {
            subset_with_replacement: true,
            critic: o2o_agents::nn::MlpConfig {
                hidden: vec![32, 32],
                layer_norm: true,
                dropout: 0.1,
                ..Default::default()
            },
            num_critics: 5,
            temperature_form: o2o_agents::nn::TemperatureForm::Softplus,
            ..SacConfig::default()
        }),
        // CQL in its Lagrange form (the multiplier and its moments are state too), and RLPD's
        // strided minibatches with the actor on the last one.
        AgentConfig::Cql(o2o_agents::cql::CqlConfig {
            cql: o2o_agents::cql::CqlTerm { cql_lagrange: true, cql_n_actions: 3, ..Default::default() },
            ..Default::default()
        }),
        AgentConfig::Rlpd(o2o_agents::rlpd::RlpdConfig(SacConfig {
            critic_steps: 4,
            num_critics: 4,
            ..o2o_agents::rlpd::RlpdConfig::default().0
        })),
        AgentConfig::Iql(IqlConfig {
            actor_lr_decay_steps: 10,
            actor: o2o_agents::nn::GaussianConfig {
                mlp: o2o_agents::nn::MlpConfig { dropout: 0.1, ..Default::default() },
                ..Default::default()
            },
            ..IqlConfig::default()
        }),
    ]
}

fn state(agent: &dyn Agent, dir: &std::path::Path, tag: &str) -> Vec<(String, Tensor)> {
    let p = dir.join(format!("{tag}.ot"));
    agent.save(&p).unwrap();
    let mut v = Tensor::load_multi(&p).unwrap();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn resume_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let data = batches(8);
    for cfg in configs() {
        let mut straight = build(&cfg, OBS, ACT, Device::Cpu, 7).unwrap();
        let m_straight: Vec<Metrics> = data.iter().map(|b| straight.update(b)).collect();

        let mut first = build(&cfg, OBS, ACT, Device::Cpu, 7).unwrap();
        let mut m_resumed: Vec<Metrics> = data[..4].iter().map(|b| first.update(b)).collect();
        let ck = dir.path().join("half.ot");
        first.save(&ck).unwrap();
        drop(first);
        // A fresh agent with another seed: everything must come from the checkpoint.
        let mut second = build(&cfg, OBS, ACT, Device::Cpu, 12345).unwrap();
        second.load(&ck).unwrap();
        m_resumed.extend(data[4..].iter().map(|b| second.update(b)));

        assert_eq!(m_straight, m_resumed, "{}: metrics differ", cfg.algo());
        let (a, b) = (state(straight.as_ref(), dir.path(), "a"), state(second.as_ref(), dir.path(), "b"));
        assert_eq!(a.len(), b.len());
        for ((na, ta), (nb, tb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            assert!(ta.equal(tb), "{}: tensor {na} differs after resume", cfg.algo());
        }
        // The random stream continues identically too.
        let obs = Tensor::ones([3, OBS as i64], (Kind::Float, Device::Cpu));
        assert!(straight.act(&obs, false).equal(&second.act(&obs, false)));
    }
}

#[test]
fn same_seed_same_run_other_seed_differs() {
    let data = batches(3);
    let run = |seed| {
        let mut a = build(&configs()[0], OBS, ACT, Device::Cpu, seed).unwrap();
        data.iter().map(|b| a.update(b)).collect::<Vec<Metrics>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn bad_checkpoints_give_typed_errors_and_leave_the_agent_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sac_path = dir.path().join("sac.ot");
    Sac::new(SacConfig::default(), OBS as i64, ACT as i64, Device::Cpu, 0).unwrap().save(&sac_path).unwrap();

    // Different architecture → ShapeMismatch naming the tensor.
    let mut wide = Sac::new(
        SacConfig {
            critic: o2o_agents::nn::MlpConfig { hidden: vec![64, 64], ..Default::default() },
            ..SacConfig::default()
        },
        OBS as i64,
        ACT as i64,
        Device::Cpu,
        0,
    )
    .unwrap();
    let before = wide.named_tensors().iter().map(|(_, t)| t.copy()).collect::<Vec<_>>();
    match wide.load(&sac_path) {
        Err(AgentError::ShapeMismatch { name, .. }) => assert!(name.starts_with("critic"), "{name}"),
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    for (t, b) in wide.named_tensors().iter().map(|(_, t)| t).zip(&before) {
        assert!(t.equal(b), "a failed load changed the agent");
    }
    // More critics → the extra LayerNorm tensors are missing.
    let mut ln = Sac::new(SacConfig::ensemble10(), OBS as i64, ACT as i64, Device::Cpu, 0).unwrap();
    assert!(matches!(ln.load(&sac_path), Err(AgentError::ShapeMismatch { .. } | AgentError::MissingTensor { .. })));
    // Another algorithm's checkpoint.
    let mut iql = Iql::new(IqlConfig::default(), OBS as i64, ACT as i64, Device::Cpu, 0).unwrap();
    let e = iql.load(&sac_path).unwrap_err();
    assert!(matches!(e, AgentError::Checkpoint { .. }) && e.to_string().contains("sac"), "{e}");
    // Garbage, truncated and absent files.
    let junk = dir.path().join("junk.ot");
    std::fs::write(&junk, b"PK\x03\x04 definitely not a checkpoint").unwrap();
    assert!(matches!(iql.load(&junk), Err(AgentError::Checkpoint { .. })));
    let bytes = std::fs::read(&sac_path).unwrap();
    let cut = dir.path().join("cut.ot");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let mut sac = Sac::new(SacConfig::default(), OBS as i64, ACT as i64, Device::Cpu, 0).unwrap();
    assert!(matches!(sac.load(&cut), Err(AgentError::Checkpoint { .. })));
    assert!(matches!(sac.load(&dir.path().join("absent.ot")), Err(AgentError::Checkpoint { .. })));
}

/// Warm start by part: actor and critics from one agent into another of the same
/// architecture, leaving its optimizer moments and counters alone.
#[test]
fn partial_load_copies_only_the_selected_parts() {
    let dir = tempfile::tempdir().unwrap();
    let mut trained = Sac::new(SacConfig::default(), OBS as i64, ACT as i64, Device::Cpu, 1).unwrap();
    for b in &batches(3) {
        trained.update(b);
    }
    let p = dir.path().join("offline.ot");
    trained.save(&p).unwrap();
    let mut online = Sac::new(SacConfig::default(), OBS as i64, ACT as i64, Device::Cpu, 2).unwrap();
    online.load_parts(&p, &["actor", "critic", "critic_target"]).unwrap();
    let src: std::collections::HashMap<String, Tensor> = trained.named_tensors().into_iter().collect();
    for (name, t) in online.named_tensors() {
        let same = t.equal(&src[&name]);
        let part = name.split('/').next().unwrap();
        assert_eq!(same, ["actor", "critic", "critic_target"].contains(&part), "{name}");
    }
    assert_eq!(online.progress().0, 0);
    let e = online.load_parts(&p, &["actr"]).unwrap_err();
    assert!(matches!(e, AgentError::Config(_)) && e.to_string().contains("actr"), "{e}");
}
