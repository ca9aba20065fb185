//! The device-generic path, the one CUDA takes, gives the CPU fast path's losses for every agent
//! (issue 49): each family is built twice from one config and seed, small networks, and runs the
//! same updates (offline, then online after `begin_online`; on-policy agents a rollout of their
//! own) once on the fast path (taped passes, fused and closed-form gradients, AVX-512 products)
//! and once with the generic path forced ([`force_generic`]: libtorch ops and autograd only).
//!
//! The two runs must log the same metric keys; the first update's losses must agree to
//! `1e-5 (1 + |x|)`, being the same function of the same weights in another summation order;
//! every later metric to `1e-4 (1 + |x|)`, and the weights after the run to `1e-3 (1 + max|w|)`
//! (the first Adam step moves each weight by about `lr · sign(g)`, so a gradient within
//! rounding of zero can step the other way: the losses are compared tightly, the weights
//! loosely). [`fast_hits`] proves which path ran: some gates took the fast path on the first
//! run, none on the second. Uni-O4's offline stages (the dynamics step, both offline critics,
//! BC and BPPO, the value refit) are driven through their public API the same way.
//!
//! (Its own test binary: the switch is process-wide, and the tests here take turns holding it.)

use o2o_agents::nn::{fast_hits, force_generic, Activation, Adam, MlpConfig, ParamSet};
use o2o_agents::rng::AgentRng;
use o2o_agents::unio4::bc::{PolicyConfig, PolicyEnsemble};
use o2o_agents::unio4::critic::{CriticConfig, CriticPath};
use o2o_agents::unio4::dynamics::{Dynamics, DynamicsConfig};
use o2o_agents::unio4::value_refit::{ValueRefit, ValueRefitConfig};
use o2o_agents::unio4::{offline_critic, Data};
use o2o_agents::{build, AgentConfig, Metrics, Phase};
use o2o_datasets::{RolloutBuffer, TransitionBatch};
use std::sync::Mutex;
use tch::{Device, Kind, Tensor};

const OBS: i64 = 5;
const ACT: i64 = 3;
const ROWS: i64 = 64;
const SEED: u64 = 3;
/// Updates in each phase (offline, then online), or rollout updates of an on-policy agent.
const UPDATES: usize = 3;

/// The first update's losses: the same function of the same weights on either path.
const FIRST_LOSS_TOL: f64 = 1e-5;
/// Every metric of every update, after Adam steps that may differ in a near-zero gradient's sign.
const METRIC_TOL: f64 = 1e-4;
/// The weights after the run, as [`METRIC_TOL`].
const WEIGHT_TOL: f64 = 1e-3;

/// Held while a test sets the process-wide switch and counts the fast path's hits.
static SWITCH: Mutex<()> = Mutex::new(());

/// Networks of two hidden layers of 32 for every algorithm's nets (the key layout differs).
const ACTOR: &str = "actor = { mlp = { hidden = [32, 32] } }";
const CRITIC: &str = "critic = { hidden = [32, 32] }";
const VALUE: &str = "value = { hidden = [32, 32] }";
const BALANCE: &str = "balance = { mlp = { hidden = [32, 32] } }";

/// Random CPU batches: N(0, 1) states, rewards and Monte-Carlo returns (Cal-QL's floor), tanh'd
/// N(0, 1) actions, a terminal row with probability 0.1.
fn batches(n: usize) -> Vec<TransitionBatch> {
    let mut rng = AgentRng::new(7);
    (0..n)
        .map(|_| TransitionBatch {
            obs: rng.normal(&[ROWS, OBS], Device::Cpu),
            action: rng.normal(&[ROWS, ACT], Device::Cpu).tanh(),
            reward: rng.normal(&[ROWS], Device::Cpu),
            next_obs: rng.normal(&[ROWS, OBS], Device::Cpu),
            terminal: rng.uniform_tensor(&[ROWS], Device::Cpu).ge(0.9).to_kind(Kind::Float),
            mc_return: Some(rng.normal(&[ROWS], Device::Cpu)),
            is_offline: None,
        })
        .collect()
}

/// One run's metrics (one entry per update), its state afterwards, and the fast path's hits.
struct Run {
    metrics: Vec<Metrics>,
    /// The updates that start from the initial weights (each stage's first).
    first: Vec<usize>,
    state: Vec<(String, Tensor)>,
    hits: u64,
}

/// `f` with the generic path forced or not, and the fast-path hits it made.
fn on_path<T>(generic: bool, f: impl FnOnce() -> T) -> (T, u64) {
    force_generic(generic);
    let before = fast_hits();
    let out = f();
    let hits = fast_hits() - before;
    force_generic(false);
    (out, hits)
}

/// The agent `toml` describes, built from [`SEED`], through its updates; then its checkpoint.
fn run_agent(toml: &str, generic: bool) -> Run {
    let cfg = AgentConfig::from_toml(toml::from_str(toml).expect("TOML")).expect("config");
    let ((metrics, state), hits) = on_path(generic, || {
        let mut agent = build(&cfg, OBS as usize, ACT as usize, Device::Cpu, SEED).expect("agent");
        let data = batches(2 * UPDATES);
        let mut metrics = Vec::new();
        if let Some(op) = agent.on_policy() {
            // A rollout of the agent's own actions on the batches' states (8 steps of 16 envs).
            let (steps, envs) = (8, 16);
            op.use_dataset_stats(&[0.0; OBS as usize], &[1.0; OBS as usize]);
            let mut rollout = RolloutBuffer::new(steps, envs, OBS as usize, ACT as usize);
            let host = |t: &Tensor| Vec::<f32>::try_from(&t.flatten(0, -1)).expect("floats");
            let truncated = vec![false; envs];
            for step in 0..steps {
                let b = &data[step % data.len()];
                let obs = op.normalize_obs(&b.obs.narrow(0, 0, envs as i64), true);
                let (a, lp, v) = op.act_value(&obs);
                let reward = host(&b.reward.narrow(0, 0, envs as i64));
                let done: Vec<bool> = host(&b.terminal.narrow(0, 0, envs as i64)).iter().map(|d| *d > 0.5).collect();
                rollout.push_step(&host(&obs), &host(&a), &host(&lp), &host(&v), &reward, &done, &truncated).unwrap();
            }
            metrics.extend((0..UPDATES).map(|_| op.update_rollout(&rollout, 0, 1000)));
        } else {
            for (i, b) in data.iter().enumerate() {
                if i == 0 {
                    agent.set_phase(Phase::Offline);
                } else if i == UPDATES {
                    agent.set_phase(Phase::Online);
                    agent.begin_online();
                }
                metrics.push(agent.update(b));
            }
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("agent.ot");
        agent.save(&path).expect("save");
        (metrics, Tensor::load_multi(&path).expect("read the checkpoint"))
    });
    Run { metrics, first: vec![0], state, hits }
}

/// `|a − b| / (1 + |a|)`, with two NaNs equal and one NaN infinitely far.
fn rel(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0.0,
        (false, false) if a == b => 0.0,
        (false, false) => (a - b).abs() / (1.0 + a.abs()),
        _ => f64::INFINITY,
    }
}

/// The two runs agree as the module doc says; the largest loss difference `|Δ| / (1 + |x|)` over
/// every update and the largest weight one are printed (`--nocapture` shows them).
fn assert_agree(family: &str, fast: &Run, generic: &Run) {
    assert!(fast.hits > 0, "{family}: the fast run took no fast path");
    assert_eq!(generic.hits, 0, "{family}: the generic run took a fast path");
    assert_eq!(fast.metrics.len(), generic.metrics.len(), "{family}: number of updates");
    let (mut worst_loss, mut worst_weight) = (0f64, 0f64);
    for (i, (f, g)) in fast.metrics.iter().zip(&generic.metrics).enumerate() {
        let (fk, gk): (Vec<&str>, Vec<&str>) = (f.iter().map(|m| m.0).collect(), g.iter().map(|m| m.0).collect());
        assert_eq!(fk, gk, "{family}: update {i} logs other keys on the generic path");
        for ((key, a), (_, b)) in f.iter().zip(g) {
            let d = rel(*a, *b);
            if key.contains("loss") {
                worst_loss = worst_loss.max(d);
            }
            let tol = if fast.first.contains(&i) && key.contains("loss") { FIRST_LOSS_TOL } else { METRIC_TOL };
            assert!(
                d <= tol,
                "{family}: update {i} `{key}`: fast {a} vs generic {b} (|Δ|/(1+|x|) = {d:.2e} > {tol:.0e})"
            );
        }
    }
    assert_eq!(fast.state.len(), generic.state.len(), "{family}: checkpoint tensors");
    for ((name, a), (gname, b)) in fast.state.iter().zip(&generic.state) {
        assert_eq!(name, gname, "{family}: checkpoint order");
        if !matches!(a.kind(), Kind::Float | Kind::Double) {
            assert!(a.equal(b), "{family}: {name} differs");
            continue;
        }
        let (a, b) = (a.to_kind(Kind::Double), b.to_kind(Kind::Double));
        let scale = 1.0 + a.abs().max().double_value(&[]);
        let d = (&a - &b).abs().max().double_value(&[]) / scale;
        worst_weight = worst_weight.max(d);
        assert!(d <= WEIGHT_TOL, "{family}: {name} differs by {d:.2e} (relative to 1 + max|w|)");
    }
    eprintln!(
        "{family}: max loss |Δ|/(1+|x|) {worst_loss:.2e}, max weight |Δ|/(1+max|w|) {worst_weight:.2e}, fast hits {}",
        fast.hits
    );
}

/// One family: both runs of `toml`, compared.
fn family(name: &str, toml: &str) {
    let _turn = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let (fast, generic) = (run_agent(toml, false), run_agent(toml, true));
    assert_agree(name, &fast, &generic);
}

/// A family's config: `algo`, then its lines.
fn config(algo: &str, lines: &[&str]) -> String {
    format!("algo = {algo:?}\n{}\n", lines.join("\n"))
}

#[test]
fn sac() {
    family("sac", &config("sac", &[ACTOR, CRITIC]));
}

#[test]
fn sac_ten_layer_norm_critics_subset_two() {
    let critic = "critic = { hidden = [32, 32], layer_norm = true }";
    family("sac-10-ln", &config("sac", &[ACTOR, critic, "num_critics = 10", "target_subset = 2"]));
}

/// Four critic steps per update on strided slices (the one-pass TD target on strided columns),
/// the optimizers' idle steps, and the actor through the mean over the members.
#[test]
fn sac_four_critic_steps_mean_actor_q() {
    let lines = [ACTOR, CRITIC, "critic_steps = 4", "zero_grad_adam_steps = true", "actor_q = \"mean\""];
    family("sac-utd4-mean", &config("sac", &lines));
}

/// The max-target backup (several next actions per state: the TD target's tensor ops).
#[test]
fn sac_max_target_backup() {
    family("sac-max-backup", &config("sac", &[ACTOR, CRITIC, "max_target_backup = true"]));
}

#[test]
fn iql() {
    family("iql", &config("iql", &[ACTOR, CRITIC, VALUE]));
}

#[test]
fn cql() {
    family("cql", &config("cql", &[ACTOR, CRITIC]));
}

/// The Lagrange form of α' and the log-mean-exp with the data action (whose share of the
/// gradient goes through the critic step's own pass).
#[test]
fn cql_lagrange_without_importance_sampling() {
    let lines = [ACTOR, CRITIC, "cql_lagrange = true", "cql_importance_sample = false"];
    family("cql-lagrange-no-is", &config("cql", &lines));
}

#[test]
fn calql() {
    family("calql", &config("calql", &[ACTOR, CRITIC]));
}

#[test]
fn rlpd() {
    family("rlpd", &config("rlpd", &[ACTOR, CRITIC]));
}

#[test]
fn wsrl() {
    family("wsrl", &config("wsrl", &[ACTOR, CRITIC]));
}

/// Cal-QL pre-training and a conservative online phase.
#[test]
fn wsrl_calql_online_conservative() {
    let lines = [ACTOR, CRITIC, "pretrain = \"calql\"", "online_conservative = true"];
    family("wsrl-calql-conservative", &config("wsrl", &lines));
}

#[test]
fn famo2o_cql() {
    family("famo2o-cql", &config("famo2o-cql", &[ACTOR, CRITIC, BALANCE]));
}

#[test]
fn famo2o_cql_balance_entropy() {
    family("famo2o-cql-entropy", &config("famo2o-cql", &[ACTOR, CRITIC, BALANCE, "balance_entropy = true"]));
}

#[test]
fn famo2o_iql() {
    family("famo2o-iql", &config("famo2o-iql", &[ACTOR, CRITIC, VALUE, BALANCE]));
}

#[test]
fn td3bc() {
    family("td3bc", &config("td3bc", &["actor = { hidden = [32, 32] }", CRITIC]));
}

#[test]
fn bc() {
    family("bc", &config("bc", &["actor = { hidden = [32, 32] }"]));
}

#[test]
fn ppo() {
    family("ppo", &config("ppo", &[ACTOR, CRITIC, "epochs = 2"]));
}

#[test]
fn unio4_online() {
    let online = "online = { actor = { mlp = { hidden = [32, 32] } }, critic = { hidden = [32, 32] }, epochs = 2 }";
    family("unio4", &config("unio4", &[online]));
}

/// Uni-O4's offline stages on one small dataset: three dynamics steps (the SiLU ensemble's
/// written-out pass), three steps of each offline critic (IQL's and SARSA's), two BC steps and
/// two BPPO steps of the policy ensemble against the IQL critic's `min Q − V`, and three value
/// refit steps; the stages' losses as metrics, their networks' weights as the state.
fn unio4_offline(generic: bool) -> Run {
    let ((metrics, first, state), hits) = on_path(generic, || {
        let mut rng = AgentRng::new(11);
        let n = 200usize;
        let mut host = |len: usize| rng.normal_vec(len);
        let (obs, next_obs) = (host(n * OBS as usize), host(n * OBS as usize));
        let action: Vec<f32> = host(n * ACT as usize).iter().map(|a| a.tanh()).collect();
        let reward = host(n);
        let terminal: Vec<f32> = (0..n).map(|i| (i % 37 == 36) as u8 as f32).collect();
        let episode_end: Vec<f32> = (0..n).map(|i| (i % 37 == 36 || i % 50 == 49) as u8 as f32).collect();
        let data = Data::new(
            &obs,
            &action,
            &reward,
            &next_obs,
            &terminal,
            &episode_end,
            OBS as usize,
            ACT as usize,
            Device::Cpu,
        )
        .expect("data");
        let small = MlpConfig { hidden: vec![32, 32], ..MlpConfig::default() };
        let (mut metrics, mut first): (Vec<Metrics>, Vec<usize>) = (Vec::new(), Vec::new());
        let mut state: Vec<(String, Tensor)> = Vec::new();
        let keep = |state: &mut Vec<(String, Tensor)>, prefix: &str, params: &ParamSet| {
            state.extend(params.named().iter().map(|(k, t)| (format!("{prefix}/{k}"), t.detach().copy())))
        };

        // The dynamics ensemble: 3 members of 2×32 SiLU, one batch of 64 rows per member.
        let cfg = DynamicsConfig {
            net: MlpConfig { activation: Activation::Silu, ..small.clone() },
            members: 3,
            elites: 2,
            batch_size: 64,
            weight_decay: vec![2.5e-5, 5e-5, 1e-4],
            ..DynamicsConfig::default()
        };
        let mut init = AgentRng::new(SEED);
        let dynamics = Dynamics::new(cfg, OBS, ACT, Device::Cpu, &mut init).expect("dynamics");
        let mut opt = Adam::new(dynamics.params(), 1e-3);
        let x = init.normal(&[3, 64, OBS + ACT], Device::Cpu);
        let y = init.normal(&[3, 64, OBS + 1], Device::Cpu) * 0.3;
        first.push(metrics.len());
        for _ in 0..UPDATES {
            metrics.push(vec![("dynamics_loss", dynamics.train_step(&mut opt, &x, &y))]);
        }
        keep(&mut state, "dynamics", dynamics.params());

        // Both offline critics.
        let critic_cfg = |path| CriticConfig {
            q: small.clone(),
            value: small.clone(),
            batch_size: 64,
            path,
            ..CriticConfig::default()
        };
        let mut iql = offline_critic(&critic_cfg(CriticPath::Iql), &data, Device::Cpu, SEED).expect("IQL critic");
        let mut sarsa = offline_critic(&critic_cfg(CriticPath::Sarsa), &data, Device::Cpu, SEED).expect("SARSA critic");
        first.extend([metrics.len(), metrics.len() + 1]);
        for _ in 0..UPDATES {
            metrics.push(iql.update(&data, true));
            metrics.push(sarsa.update(&data, true));
        }
        let probe = data.norm_obs(&data.obs.narrow(0, 0, 32), true);
        let probe_a = data.action.narrow(0, 0, 32);
        state.push(("iql/q".into(), iql.q(&probe, &probe_a)));
        state.push(("sarsa/q".into(), sarsa.q(&probe, &probe_a)));
        keep(&mut state, "iql", iql.value_params());
        keep(&mut state, "sarsa", sarsa.value_params());

        // The policy ensemble: BC, then BPPO against the IQL critic's advantage.
        let mut policy_cfg = PolicyConfig { members: 2, batch_size: 64, ..PolicyConfig::default() };
        policy_cfg.actor.mlp.hidden = vec![32, 32];
        let mut policy = PolicyEnsemble::new(policy_cfg, OBS, ACT, Device::Cpu, SEED).expect("policy");
        first.push(metrics.len());
        for _ in 0..2 {
            metrics.push(policy.bc_update(&data, true));
        }
        for _ in 0..2 {
            let mut advantage = |s: &Tensor, a: &Tensor| iql.q(s, a) - iql.value(s);
            metrics.push(policy.bppo_update(&data, true, &mut advantage, None));
        }
        state.extend(policy.member_tensors(0, "policy").into_iter().map(|(k, t)| (k, t.copy())));

        // The value refit.
        let refit_cfg = ValueRefitConfig { value: small.clone(), batch_size: 64, ..ValueRefitConfig::default() };
        let mut refit = ValueRefit::new(refit_cfg, &data, Device::Cpu, SEED).expect("value refit");
        first.push(metrics.len());
        for _ in 0..UPDATES {
            metrics.push(refit.update(&data, true));
        }
        keep(&mut state, "refit", refit.params());
        (metrics, first, state)
    });
    Run { metrics, first, state, hits }
}

#[test]
fn unio4_offline_stages() {
    let _turn = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let (fast, generic) = (unio4_offline(false), unio4_offline(true));
    assert_agree("unio4-offline", &fast, &generic);
}
