//! Offline IQL on transitions built in memory (a noisy PD controller balancing
//! InvertedPendulum-v5, no file involved), then online fine-tuning from that agent.
//!
//!     cargo run --release --example own_dataset -- [RUNS_DIR] [OFFLINE_STEPS] [ONLINE_STEPS]
use anyhow::Result;
use o2o_agents::rng::AgentRng;
use o2o_datasets::d4rl::{Columns, D4rlDataset};
use o2o_experiments::Run;

/// IQL with small networks; the data itself is handed over with `Run::dataset`.
const CONFIG: &str = r#"
algo = "iql"
env = "InvertedPendulum-v5"
[dataset]
in_memory = true
reward = "none"
transitions = "corrected"
[train]
batch_size = 128
log_every = 500
[eval]
every = 1000
episodes = 5
[checkpoint]
every = 1000
[agent]
expectile = 0.7
beta = 3.0
actor_lr_decay_steps = 0
critic = { hidden = [64, 64] }
value = { hidden = [64, 64] }
actor = { mlp = { hidden = [64, 64] } }
"#;

/// `episodes` episodes of a PD controller on the pole with Gaussian noise, as columns.
fn pd_controller_data(episodes: u64) -> Result<D4rlDataset> {
    let mut env = o2o_envs::make("InvertedPendulum-v5")?;
    let mut noise = AgentRng::new(7);
    let mut c = Columns { obs_dim: 4, act_dim: 1, ..Columns::default() };
    for ep in 0..episodes {
        let mut obs = env.reset(Some(ep))?;
        loop {
            let pd = 0.5 * obs[0] + 10.0 * obs[1] + obs[2] + 2.0 * obs[3];
            let a = (pd + noise.normal_vec(1)[0]).clamp(-3.0, 3.0);
            let s = env.step(&[a])?;
            c.observations.extend_from_slice(&obs);
            c.actions.push(a);
            c.rewards.push(s.reward as f32);
            c.terminals.push(s.terminated);
            c.timeouts.push(s.truncated && !s.terminated);
            if s.done() {
                break;
            }
            obs = s.obs;
        }
    }
    Ok(D4rlDataset::from_columns(c)?)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let runs_dir = args.next().unwrap_or_else(|| "runs".into());
    let offline_steps: u64 = args.next().map_or(Ok(5000), |s| s.parse())?;
    let online_steps: u64 = args.next().map_or(Ok(3000), |s| s.parse())?;
    let data = pd_controller_data(20)?;
    println!("dataset: {} transitions, sha256 {}", data.len(), &data.content_sha256()[..12]);

    // Offline (d3rlpy's `fit`), then online from that run's final agent (`fit_online`).
    let offline = Run::from_toml_str("iql-pendulum", CONFIG)?
        .dataset(data.clone())?
        .runs_dir(&runs_dir)
        .device(tch::Device::Cpu)
        .fit(offline_steps)?;
    let online = Run::finetune(&offline.dir)?
        .dataset(data)?
        .runs_dir(&runs_dir)
        .device(tch::Device::Cpu)
        .fit_online(online_steps)?;
    for (what, done) in [("offline", &offline), ("online", &online)] {
        let ret = done.summary.final_eval.map_or(f64::NAN, |e| e.mean_return);
        println!("{what}: {} return {ret:.1}", done.dir.display());
    }
    Ok(())
}
