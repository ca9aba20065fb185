//! Hindsight experience replay (issue 22, item 1) on the Fetch tasks: relabelled rows come from
//! their own episode at a later-or-equal step, 1 − 1/(1 + k) of the rows are relabelled, and a
//! relabelled reward is what the env itself pays for that goal (replaying the stored state and
//! action in the env with the new goal); HER on a non-goal env is refused naming the env; SAC
//! with HER learns FetchReach-v4.

use o2o_datasets::ReplayBuffer;
use o2o_envs::Env;
use o2o_experiments::run::config::RunConfig;
use o2o_experiments::run::her::her_for;
use o2o_experiments::run::learner::RewardTransform;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::process::Command;

mod common;

/// One stored step: the simulator state before it, the action, and the flat observations.
struct Recorded {
    episode: usize,
    t: usize,
    qpos: Vec<f64>,
    qvel: Vec<f64>,
    action: Vec<f32>,
    obs: Vec<f32>,
    next_obs: Vec<f32>,
}

fn her_config(k: f64) -> RunConfig {
    let text = format!("preset = \"t\"\nalgo = \"sac\"\nenv = \"FetchPush-v4\"\n[replay]\nher = \"future\"\nher_k = {k:?}\n[train]\nonline_steps = 10\n");
    RunConfig::from_toml_str(&text, "test").unwrap()
}

#[test]
fn relabelled_goals_fractions_and_rewards_match_the_env() {
    // 12 FetchPush episodes of random actions (50 steps each, the last one cut at 20 and still
    // open in the buffer), with the simulator state before every step.
    let mut env = o2o_envs::registry::make_fetch("FetchPush-v4").unwrap();
    let spec = env.spec().clone();
    let obs_dim = env.observation_space().dim();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut buf = ReplayBuffer::new(100_000, obs_dim, 4, 0.98).unwrap();
    let mut steps = Vec::new();
    for episode in 0..12 {
        let mut obs = env.reset(Some(episode as u64)).unwrap();
        for t in 0..50 {
            if episode == 11 && t == 20 {
                break;
            }
            // Push toward the object half the time, so some episodes move it (achieved goal ≠ start).
            let inner = env.inner();
            let (qpos, qvel) = (inner.qpos().to_vec(), inner.qvel().to_vec());
            let toward: Vec<f32> = (0..3).map(|i| (obs[9 + i] - obs[6 + i]) * 10.0).collect();
            let action: Vec<f32> = (0..4)
                .map(|i| {
                    if i < 3 && rng.gen::<f32>() < 0.5 {
                        toward[i].clamp(-1.0, 1.0)
                    } else {
                        rng.gen_range(-1.0..1.0)
                    }
                })
                .collect();
            let s = env.step(&action).unwrap();
            buf.push(&obs, &action, s.reward as f32, &s.obs, s.terminated, s.truncated).unwrap();
            steps.push(Recorded { episode, t, qpos, qvel, action, obs: obs.clone(), next_obs: s.obs.clone() });
            obs = s.obs;
        }
    }
    let her = her_for(&her_config(4.0), &spec, obs_dim, RewardTransform::IDENTITY).unwrap().expect("HER is on");
    buf.set_her(Some(her)).unwrap();

    // A replay env to ask for the env's own reward on a relabelled goal.
    let mut replay_env = o2o_envs::registry::make_fetch_unwrapped("FetchPush-v4").unwrap();
    let mut sample_rng = ChaCha8Rng::seed_from_u64(1);
    let (mut rows, mut relabelled, mut checked_in_env, mut successes) = (0, 0, 0, 0);
    for _ in 0..10 {
        let b = buf.sample(512, &mut sample_rng, tch::Device::Cpu).unwrap();
        let obs = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
        let next = Vec::<f32>::try_from(b.next_obs.reshape([-1])).unwrap();
        let rew = Vec::<f32>::try_from(&b.reward).unwrap();
        for r in 0..rew.len() {
            rows += 1;
            let (o, n) = (&obs[r * obs_dim..(r + 1) * obs_dim], &next[r * obs_dim..(r + 1) * obs_dim]);
            // The stored step: the observation part (6..) and achieved goal are never relabelled.
            let s = steps
                .iter()
                .find(|s| {
                    s.obs[6..] == o[6..]
                        && s.obs[..3] == o[..3]
                        && s.action == Vec::<f32>::try_from(b.action.get(r as i64)).unwrap()
                })
                .expect("a sampled row is a stored step");
            assert_eq!(&o[3..6], &n[3..6], "obs and next_obs carry the same goal");
            if o[3..6] == s.obs[3..6] {
                assert_eq!(
                    rew[r],
                    o2o_envs::mujoco::FetchEnv::sparse_reward(&f64s(&s.next_obs[..3]), &f64s(&s.obs[3..6])) as f32
                );
                continue;
            }
            relabelled += 1;
            // The new goal is the achieved goal after a step t' ≥ t of the same episode (Push's
            // achieved goal is the object, which stays put for many steps: any such step will do).
            let from_future = steps.iter().any(|f| f.episode == s.episode && f.t >= s.t && f.next_obs[..3] == o[3..6]);
            assert!(
                from_future,
                "episode {} step {}: the new goal is no achieved goal of a later-or-equal step",
                s.episode, s.t
            );
            // The env, put back at the stored state with the new goal and given the stored
            // action, pays the relabelled reward (checked on every 8th row: replays cost time).
            if relabelled % 8 == 0 {
                let goal = [o[3] as f64, o[4] as f64, o[5] as f64];
                replay_env.set_state(&s.qpos, &s.qvel, goal).unwrap();
                let step = replay_env.step(&s.action).unwrap();
                assert_eq!(
                    rew[r], step.reward as f32,
                    "episode {} step {}: relabelled reward vs the env's",
                    s.episode, s.t
                );
                assert_eq!(rew[r] == 0.0, step.info.success.unwrap());
                let max_diff = step.obs.iter().zip(n).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                assert!(max_diff < 1e-4, "replayed next observation differs by {max_diff}");
                checked_in_env += 1;
            }
            successes += (rew[r] == 0.0) as usize;
        }
    }
    let fraction = relabelled as f64 / rows as f64;
    println!("{rows} rows, {relabelled} relabelled ({fraction:.4}), {successes} of them successes, {checked_in_env} replayed in the env");
    assert!((fraction - 0.8).abs() < 0.015, "relabelled fraction {fraction}, expected 1 − 1/(1 + 4) = 0.8");
    assert!(checked_in_env >= 300, "{checked_in_env}");
    assert!(
        successes > relabelled / 20,
        "relabelling should turn some rows into successes: {successes} of {relabelled}"
    );

    // k = 1: half the rows.
    let her = her_for(&her_config(1.0), &spec, obs_dim, RewardTransform::IDENTITY).unwrap().unwrap();
    buf.set_her(Some(her)).unwrap();
    let b = buf.sample(4000, &mut sample_rng, tch::Device::Cpu).unwrap();
    let o = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
    let kept = (0..4000).filter(|r| steps.iter().any(|s| s.obs[..6] == o[r * obs_dim..r * obs_dim + 6])).count();
    let fraction = 1.0 - kept as f64 / 4000.0;
    assert!((fraction - 0.5).abs() < 0.03, "k = 1: relabelled fraction {fraction}, expected 0.5");
}

/// E13: set up as the runner sets up its replay buffer, a HER run samples finished episodes
/// only (SB3's `HerReplayBuffer`): no row of the episode still running is drawn and no goal is
/// taken from it; `replay.closed_episodes_only = false` draws it too.
#[test]
fn her_by_default_never_samples_the_open_episode() {
    use o2o_envs::{EnvSpec, GoalLayout, GoalSpec};
    let layout = GoalLayout { achieved: [0, 1], desired: [1, 2], observation: [2, 4] };
    let spec = EnvSpec {
        id: "Goal-v0".into(),
        max_episode_steps: Some(20),
        normalization_family: None,
        goal: Some(GoalSpec { layout, distance_threshold: 0.05, dense: false, success_terminates: false }),
    };
    // Episode e, step t: obs = [achieved 100e + t, desired −1 − e, t, e]; 6 closed episodes of
    // 10..=15 steps and an open one of 7.
    let mut buf = ReplayBuffer::new(1000, 4, 1, 0.98).unwrap();
    let lengths = [10, 11, 12, 13, 14, 15, 7];
    let open = lengths.len() - 1;
    for (e, &len) in lengths.iter().enumerate() {
        let (ef, g) = (e as f32, -1.0 - e as f32);
        for t in 0..len {
            let tf = t as f32;
            buf.push(
                &[100.0 * ef + tf, g, tf, ef],
                &[0.0],
                -1.0,
                &[100.0 * ef + tf + 1.0, g, tf, ef],
                false,
                e != open && t + 1 == len,
            )
            .unwrap();
        }
    }
    let draw = |buf: &ReplayBuffer, seed: u64| {
        let b = buf.sample(4000, &mut ChaCha8Rng::seed_from_u64(seed), tch::Device::Cpu).unwrap();
        let obs = Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap();
        (0..4000).map(|r| (obs[4 * r + 3] as usize, obs[4 * r + 1])).collect::<Vec<(usize, f32)>>()
    };
    o2o_experiments::run::her::configure_replay(&mut buf, &her_config(4.0), &spec, 4, RewardTransform::IDENTITY, false)
        .unwrap();
    let rows = draw(&buf, 2);
    let relabelled = rows.iter().filter(|(e, g)| *g != -1.0 - *e as f32).count();
    assert!(relabelled > 3000, "{relabelled} of 4000 relabelled");
    for (e, g) in &rows {
        assert_ne!(*e, open, "a row of the open episode was drawn");
        assert!(*g < 0.0 || ((*g - 1.0) / 100.0).floor() as usize == *e, "episode {e}: goal {g} from another episode");
    }
    // The current behaviour, on request.
    let text = "preset = \"t\"\nalgo = \"sac\"\nenv = \"FetchPush-v4\"\n[replay]\nher = \"future\"\nclosed_episodes_only = false\n[train]\nonline_steps = 10\n";
    o2o_experiments::run::her::configure_replay(
        &mut buf,
        &RunConfig::from_toml_str(text, "test").unwrap(),
        &spec,
        4,
        RewardTransform::IDENTITY,
        false,
    )
    .unwrap();
    assert!(
        draw(&buf, 2).iter().any(|(e, _)| *e == open),
        "with closed_episodes_only = false the open episode is drawn"
    );
}

fn f64s(x: &[f32]) -> Vec<f64> {
    x.iter().map(|v| *v as f64).collect()
}

#[test]
fn her_on_a_non_goal_env_names_the_env() {
    let runs = tempfile::tempdir().unwrap();
    let out = Command::new(common::O2O)
        .args([
            "train",
            "--preset",
            "sac-inverted-pendulum",
            "--device",
            "cpu",
            "--rerun=off",
            "--set",
            "replay.her=\"future\"",
            "--runs-dir",
        ])
        .arg(runs.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("replay.her") && err.contains("InvertedPendulum-v5") && err.contains("goal"), "{err}");
    assert_eq!(std::fs::read_dir(runs.path()).unwrap().count(), 0, "no run directory is left behind");
}
