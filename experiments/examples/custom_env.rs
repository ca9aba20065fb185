//! An env of your own, trained online with SAC through the o2o library: a point mass on the
//! plane that must reach a goal. The run directory gets a Rerun recording and checkpoints.
//!
//!     cargo run --release --example custom_env -- [RUNS_DIR] [ONLINE_STEPS]
use anyhow::Result;
use o2o_envs::{BoxSpace, Env, EnvError, EnvSpec, Info, Step};
use o2o_experiments::Run;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Observation (x, y, goal x, goal y) in [-1, 1]²; action a velocity in [-1, 1]²; reward the
/// negative distance to the goal; the episode ends at the goal or after 50 steps.
struct PointMass {
    spec: EnvSpec,
    obs_space: BoxSpace,
    act_space: BoxSpace,
    rng: ChaCha8Rng,
    pos: [f32; 2],
    goal: [f32; 2],
    t: usize,
}

impl PointMass {
    fn new() -> Self {
        let spec =
            EnvSpec { id: "PointMass-v0".into(), max_episode_steps: Some(50), normalization_family: None, goal: None };
        let (obs_space, act_space) =
            (BoxSpace::new(vec![-1.0; 4], vec![1.0; 4]), BoxSpace::new(vec![-1.0; 2], vec![1.0; 2]));
        Self { spec, obs_space, act_space, rng: ChaCha8Rng::seed_from_u64(0), pos: [0.0; 2], goal: [0.0; 2], t: 0 }
    }
    fn obs(&self) -> Vec<f32> {
        vec![self.pos[0], self.pos[1], self.goal[0], self.goal[1]]
    }
}

impl Env for PointMass {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn observation_space(&self) -> &BoxSpace {
        &self.obs_space
    }
    fn action_space(&self) -> &BoxSpace {
        &self.act_space
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        if let Some(s) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(s);
        }
        self.pos = [self.rng.gen_range(-1.0..1.0), self.rng.gen_range(-1.0..1.0)];
        self.goal = [self.rng.gen_range(-1.0..1.0), self.rng.gen_range(-1.0..1.0)];
        self.t = 0;
        Ok(self.obs())
    }
    fn step(&mut self, a: &[f32]) -> Result<Step, EnvError> {
        if a.len() != 2 {
            return Err(EnvError::ActionLength { env: self.spec.id.clone(), expected: 2, found: a.len() });
        }
        for i in 0..2 {
            self.pos[i] = (self.pos[i] + 0.1 * a[i].clamp(-1.0, 1.0)).clamp(-1.0, 1.0);
        }
        self.t += 1;
        let dist = ((self.pos[0] - self.goal[0]).powi(2) + (self.pos[1] - self.goal[1]).powi(2)).sqrt();
        let reached = dist < 0.1;
        let info = Info { values: vec![("distance", dist as f64)], success: Some(reached), task: None };
        Ok(Step {
            obs: self.obs(),
            reward: -dist as f64,
            terminated: reached,
            truncated: !reached && self.t >= 50,
            info,
        })
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let runs_dir = args.next().unwrap_or_else(|| "runs".into());
    let steps: u64 = args.next().map_or(Ok(6000), |s| s.parse())?;
    // SAC with the small-task preset's networks; the env's id replaces the preset's env.
    let done = Run::preset("sac-inverted-pendulum")?
        .set(["train.random_steps=500", "eval.every=1000", "eval.episodes=10", "checkpoint.every=1000"])?
        .env(|| Ok(PointMass::new()))
        .runs_dir(runs_dir)
        .device(tch::Device::Cpu)
        .fit_online(steps)?;
    let eval = done.summary.final_eval.expect("a finished run has a final evaluation");
    println!(
        "{}: return {:.2}, success rate {:.2}",
        done.dir.display(),
        eval.mean_return,
        eval.success_rate.unwrap_or(0.0)
    );
    Ok(())
}
