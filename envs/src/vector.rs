//! A vector env: N envs stepped as one, on a fixed set of threads.
//!
//! **Threads.** The envs are split into `threads` contiguous chunks; chunk 0 is stepped on the
//! calling thread, every other chunk on its own long-lived worker thread (std threads and
//! channels, no work stealing). Each env is independent and owns its random source, so results
//! are identical for any thread count; only the wall time changes.
//!
//! **Seeds.** `reset(Some(s))` resets env i with seed s + i (as Gymnasium's vector envs do);
//! `reset(None)` continues each env's own stream.
//!
//! **Autoreset: same-step** (Gymnasium 1.x `AutoresetMode.SAME_STEP`, the 0.x behaviour).
//! When env i's episode ends on a step (terminated or truncated), it is reset inside that same
//! `step` call: row i of `obs` is the first observation of the new episode, the episode's last
//! observation is in `final_obs[i]`, and `reward[i]`, `terminated[i]`, `truncated[i]`, `infos[i]`
//! belong to the step that ended it. We chose this over Gymnasium 1.x's default *next-step*
//! mode (which spends the next call on the reset, ignores that call's action and returns reward
//! 0) because every call then yields one real transition per env, `(obs, action, reward,
//! next_obs = final_obs or obs)`, so a learner stores no dummy rows and never wastes a step;
//! and truncated episodes keep their true last observation for bootstrapping. Use
//! [`VecStep::next_obs`] to get the transition's next observation either way.
//!
//! Errors (a wrong action length, a non-finite action) come back as [`EnvError::SubEnv`] with
//! the env's index; after an error the envs may be at different points, so reset before going on.

use crate::env::{BoxSpace, Env, EnvSpec, Info};
use crate::error::EnvError;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// One env's part of a vector step.
struct SubStep {
    obs: Vec<f32>,
    final_obs: Option<Vec<f32>>,
    reward: f64,
    terminated: bool,
    truncated: bool,
    info: Info,
}

/// The result of [`VecEnv::step`]: one row per env.
#[derive(Debug, Clone, PartialEq)]
pub struct VecStep {
    /// Observations, row-major `[num_envs, obs_dim]`; a row whose episode just ended holds the
    /// new episode's first observation.
    pub obs: Vec<f32>,
    /// Rewards of this step.
    pub reward: Vec<f64>,
    /// True ends (do not bootstrap).
    pub terminated: Vec<bool>,
    /// Cuts, e.g. time limits (bootstrap from `final_obs`).
    pub truncated: Vec<bool>,
    /// For envs whose episode ended on this step: the episode's last observation.
    pub final_obs: Vec<Option<Vec<f32>>>,
    /// Per-env step info (of the step that ended the episode, when one ended).
    pub infos: Vec<Info>,
}

impl VecStep {
    /// The next observation of env `i`'s transition: `final_obs[i]` when its episode ended on
    /// this step, else row `i` of `obs`.
    pub fn next_obs(&self, i: usize) -> &[f32] {
        match &self.final_obs[i] {
            Some(o) => o,
            None => {
                let dim = self.obs.len() / self.reward.len();
                &self.obs[i * dim..(i + 1) * dim]
            }
        }
    }
}

enum Command {
    Reset(Option<u64>),
    Step(Vec<f32>),
}

type Reply = Result<Vec<SubStep>, EnvError>;

/// A chunk of envs, with the global index of its first env.
struct Chunk {
    first: usize,
    envs: Vec<Box<dyn Env>>,
}

impl Chunk {
    fn reset(&mut self, seed: Option<u64>) -> Reply {
        let mut out = Vec::with_capacity(self.envs.len());
        for (k, env) in self.envs.iter_mut().enumerate() {
            let index = self.first + k;
            let seed = seed.map(|s| s.wrapping_add(index as u64));
            let obs = env.reset(seed).map_err(|e| EnvError::SubEnv { index, source: Box::new(e) })?;
            out.push(SubStep {
                obs,
                final_obs: None,
                reward: 0.0,
                terminated: false,
                truncated: false,
                info: Info::default(),
            });
        }
        Ok(out)
    }

    fn step(&mut self, actions: &[f32], act_dim: usize) -> Reply {
        let mut out = Vec::with_capacity(self.envs.len());
        for (k, (env, action)) in self.envs.iter_mut().zip(actions.chunks(act_dim)).enumerate() {
            let index = self.first + k;
            let wrap = |e| EnvError::SubEnv { index, source: Box::new(e) };
            let s = env.step(action).map_err(wrap)?;
            // Same-step autoreset: the ended episode's last obs moves to `final_obs`.
            let (obs, final_obs) =
                if s.terminated || s.truncated { (env.reset(None).map_err(wrap)?, Some(s.obs)) } else { (s.obs, None) };
            out.push(SubStep {
                obs,
                final_obs,
                reward: s.reward,
                terminated: s.terminated,
                truncated: s.truncated,
                info: s.info,
            });
        }
        Ok(out)
    }
}

struct Worker {
    tx: Sender<Command>,
    rx: Receiver<Reply>,
    first: usize,
    len: usize,
    handle: Option<JoinHandle<()>>,
}

/// N envs of the same shape stepped together; see the module docs for threads and autoreset.
pub struct VecEnv {
    spec: EnvSpec,
    observation_space: BoxSpace,
    action_space: BoxSpace,
    num_envs: usize,
    local: Chunk,
    workers: Vec<Worker>,
}

impl VecEnv {
    /// Step `envs` on `threads` threads (the caller's included; clamped to 1..=N). All envs must
    /// share observation and action dimensions.
    pub fn new(envs: Vec<Box<dyn Env>>, threads: usize) -> Result<Self, EnvError> {
        let n = envs.len();
        let first = envs.first().ok_or_else(|| EnvError::Other("VecEnv needs at least one env".into()))?;
        let (spec, observation_space, action_space) =
            (first.spec().clone(), first.observation_space().clone(), first.action_space().clone());
        for (i, e) in envs.iter().enumerate() {
            if e.observation_space().dim() != observation_space.dim() {
                return Err(EnvError::Shape {
                    what: format!("VecEnv: observation of env {i} ({})", e.spec().id),
                    expected: observation_space.dim(),
                    found: e.observation_space().dim(),
                });
            }
            if e.action_space().dim() != action_space.dim() {
                return Err(EnvError::Shape {
                    what: format!("VecEnv: action of env {i} ({})", e.spec().id),
                    expected: action_space.dim(),
                    found: e.action_space().dim(),
                });
            }
        }
        let threads = threads.clamp(1, n);
        let act_dim = action_space.dim();
        // Contiguous balanced chunks: chunk k holds envs [k·n/T, (k+1)·n/T).
        let bounds: Vec<usize> = (0..=threads).map(|k| k * n / threads).collect();
        let mut rest = envs;
        let mut chunks = Vec::with_capacity(threads);
        for k in (0..threads).rev() {
            let tail = rest.split_off(bounds[k]);
            chunks.push(Chunk { first: bounds[k], envs: tail });
        }
        chunks.reverse();
        let mut chunks = chunks.into_iter();
        let local = chunks.next().expect("threads >= 1");
        let mut workers = Vec::with_capacity(threads - 1);
        for mut chunk in chunks {
            let (cmd_tx, cmd_rx) = channel::<Command>();
            let (rep_tx, rep_rx) = channel::<Reply>();
            let (first, len) = (chunk.first, chunk.envs.len());
            let handle = std::thread::Builder::new()
                .name(format!("o2o-vecenv-{first}"))
                .spawn(move || {
                    // Runs until the VecEnv drops its sender.
                    while let Ok(cmd) = recv_spinning(&cmd_rx) {
                        let reply = match cmd {
                            Command::Reset(seed) => chunk.reset(seed),
                            Command::Step(actions) => chunk.step(&actions, act_dim),
                        };
                        if rep_tx.send(reply).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| EnvError::Other(format!("VecEnv: cannot start a worker thread: {e}")))?;
            workers.push(Worker { tx: cmd_tx, rx: rep_rx, first, len, handle: Some(handle) });
        }
        Ok(Self { spec, observation_space, action_space, num_envs: n, local, workers })
    }

    /// `num_envs` copies of the registered task `id` (each in its time limit) on `threads` threads.
    pub fn make(id: &str, num_envs: usize, threads: usize) -> Result<Self, EnvError> {
        let envs = (0..num_envs).map(|_| crate::registry::make(id)).collect::<Result<Vec<_>, _>>()?;
        Self::new(envs, threads)
    }

    /// Number of envs.
    pub fn num_envs(&self) -> usize {
        self.num_envs
    }

    /// Threads stepping the envs (the caller's included).
    pub fn threads(&self) -> usize {
        1 + self.workers.len()
    }

    /// The spec of the first env.
    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// One env's observation space.
    pub fn single_observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    /// One env's action space.
    pub fn single_action_space(&self) -> &BoxSpace {
        &self.action_space
    }

    /// Reset every env (env i with seed `s + i` when a seed is given); returns the observations,
    /// row-major `[num_envs, obs_dim]`.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        for w in &self.workers {
            w.tx.send(Command::Reset(seed)).map_err(|_| Self::dead(w))?;
        }
        let local = self.local.reset(seed);
        let parts = self.collect(local)?;
        Ok(parts.into_iter().flat_map(|s| s.obs).collect())
    }

    /// Step every env; `actions` is row-major `[num_envs, act_dim]`. Envs whose episode ends are
    /// reset in the same call (see the module docs).
    pub fn step(&mut self, actions: &[f32]) -> Result<VecStep, EnvError> {
        let act_dim = self.action_space.dim();
        if actions.len() != self.num_envs * act_dim {
            return Err(EnvError::ActionLength {
                env: format!("VecEnv({} x {})", self.spec.id, self.num_envs),
                expected: self.num_envs * act_dim,
                found: actions.len(),
            });
        }
        for w in &self.workers {
            let slice = actions[w.first * act_dim..(w.first + w.len) * act_dim].to_vec();
            w.tx.send(Command::Step(slice)).map_err(|_| Self::dead(w))?;
        }
        let local_len = self.local.envs.len();
        let local = self.local.step(&actions[..local_len * act_dim], act_dim);
        let parts = self.collect(local)?;
        let mut out = VecStep {
            obs: Vec::with_capacity(self.num_envs * self.observation_space.dim()),
            reward: Vec::with_capacity(self.num_envs),
            terminated: Vec::with_capacity(self.num_envs),
            truncated: Vec::with_capacity(self.num_envs),
            final_obs: Vec::with_capacity(self.num_envs),
            infos: Vec::with_capacity(self.num_envs),
        };
        for s in parts {
            out.obs.extend_from_slice(&s.obs);
            out.reward.push(s.reward);
            out.terminated.push(s.terminated);
            out.truncated.push(s.truncated);
            out.final_obs.push(s.final_obs);
            out.infos.push(s.info);
        }
        Ok(out)
    }

    /// Gather the local chunk's reply and every worker's, in env order. Every worker's reply is
    /// received even after an error, so the channels stay in step.
    fn collect(&self, local: Reply) -> Result<Vec<SubStep>, EnvError> {
        let mut first_err = None;
        let mut parts = Vec::with_capacity(self.num_envs);
        match local {
            Ok(p) => parts.extend(p),
            Err(e) => first_err = Some(e),
        }
        for w in &self.workers {
            match recv_spinning(&w.rx) {
                Ok(Ok(p)) => parts.extend(p),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Self::dead(w));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(parts),
        }
    }

    fn dead(w: &Worker) -> EnvError {
        EnvError::Other(format!(
            "VecEnv: the worker thread for envs {}..{} has stopped (it panicked)",
            w.first,
            w.first + w.len
        ))
    }
}

/// How long a thread polls a channel before it blocks on it. One env step is 5–200 µs, while
/// waking a blocked thread costs tens of µs on a VM: without the poll, the hand-off on every
/// step ate most of the second thread's gain (1.18× instead of the machine's 1.79× measured in
/// the same `o2o bench env` run). Bounded, so an idle VecEnv does not burn a core.
const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// `rx.recv()`, but polling for up to [`SPIN`] first.
fn recv_spinning<T>(rx: &Receiver<T>) -> Result<T, std::sync::mpsc::RecvError> {
    let start = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(std::sync::mpsc::RecvError),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                if start.elapsed() >= SPIN {
                    return rx.recv();
                }
                std::hint::spin_loop();
            }
        }
    }
}

impl Drop for VecEnv {
    fn drop(&mut self) {
        for w in &mut self.workers {
            // Closing the command channel ends the worker's loop.
            let (dummy_tx, _) = channel();
            drop(std::mem::replace(&mut w.tx, dummy_tx));
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }
}
