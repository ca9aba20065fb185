//! [`RobotEnv`]: an [`Env`] over any guarded driver, stepped at a fixed control rate on a
//! [`Clock`].
//!
//! One `step(action)`:
//! 1. the watchdog is polled (on a real clock a thread also polls it four times a period);
//! 2. the operator may press the e-stop or take over (the executed action is theirs);
//! 3. the deadline: a step that starts later than `deadline_slack` periods after its tick is
//!    a missed deadline; `max_missed_deadlines` in a row latch a fault;
//! 4. the command goes through the safety layer — joint mode: target = measured q + action,
//!    end-effector mode: the action is the Cartesian delta — and the loop sleeps to the end of
//!    the period;
//! 5. the arm is read; observation = [q, q̇, end-effector position (if any), goal]; reward and
//!    success from the [`ReachTask`], success overridden by the operator's label.
//!
//! The action space is `[−w, w]` per dimension (`w` the envelope's step window), so the
//! runner's `[−1, 1]` policy box maps onto exactly what the envelope allows. A set latch ends
//! the episode as a *safety stop* (`truncated`, info `safety/latched = 1`): the next `reset`
//! asks the operator, and only an explicit clear lets the run go on.
//!
//! Loop timing (period, jitter, missed deadlines) is in every step's info under `loop/` and in
//! [`RobotEnv::loop_stats`]; every transition, with its executed action, intervention flag and
//! labels, goes to the [`crate::recording::Recording`] when one is attached.

use crate::clock::Clock;
use crate::driver::{ControlMode, Robot, RobotState};
use crate::guard::{GuardError, Guarded, Latch, SafetyCounters};
use crate::intervention::{Operator, ResetDecision};
use crate::recording::{Recording, StepRecord};
use crate::task::ReachTask;
use o2o_envs::{BoxSpace, Env, EnvError, EnvSpec, Info, Step};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Attempts of one `reset` when the link drops or the arm faults during it.
pub const RESET_ATTEMPTS: u32 = 3;

/// The `[loop]` table of a robot config.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopConfig {
    /// Control rate (Hz); SERL and HIL-SERL run at 10.
    pub rate_hz: f64,
    /// Episode length (truncated after).
    pub max_episode_steps: usize,
    /// How late (in periods) a step may start before it counts as a missed deadline.
    pub deadline_slack: f64,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self { rate_hz: 10.0, max_episode_steps: 100, deadline_slack: 0.1 }
    }
}

impl LoopConfig {
    /// The control period, `1 / rate_hz`.
    pub fn period(&self) -> Result<Duration, String> {
        if !(self.rate_hz > 0.0 && self.rate_hz <= 1000.0) {
            return Err(format!("loop.rate_hz: expected a rate in (0, 1000] Hz, found {}", self.rate_hz));
        }
        if !(self.deadline_slack >= 0.0 && self.deadline_slack < 1.0) {
            return Err(format!(
                "loop.deadline_slack: expected a fraction of a period in [0, 1), found {}",
                self.deadline_slack
            ));
        }
        if self.max_episode_steps == 0 {
            return Err("loop.max_episode_steps: expected at least 1, found 0".into());
        }
        Ok(Duration::from_secs_f64(1.0 / self.rate_hz))
    }
}

/// Timing of the control loop since the env was made.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoopStats {
    /// Steps taken.
    pub steps: u64,
    /// Mean command-to-command period (s), over steps that followed another step.
    pub mean_period_s: f64,
    /// Largest |period − nominal| (s).
    pub max_jitter_s: f64,
    /// Mean |period − nominal| (s).
    pub mean_jitter_s: f64,
    /// Steps that started after their deadline.
    pub missed_deadlines: u64,
    /// The longest run of missed deadlines in a row.
    pub max_missed_in_a_row: u32,
    /// Interventions (steps an operator took over).
    pub interventions: u64,
    /// Episodes started.
    pub episodes: u64,
    #[serde(skip)]
    periods: u64,
}

impl LoopStats {
    fn add_period(&mut self, period: f64, nominal: f64) {
        let jitter = (period - nominal).abs();
        self.periods += 1;
        let n = self.periods as f64;
        self.mean_period_s += (period - self.mean_period_s) / n;
        self.mean_jitter_s += (jitter - self.mean_jitter_s) / n;
        self.max_jitter_s = self.max_jitter_s.max(jitter);
    }
}

/// What an env did, handed to its report sink when it is dropped.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EnvReport {
    /// The env's id.
    pub id: String,
    /// Safety counters.
    pub safety: SafetyCounters,
    /// Loop timing.
    pub timing: LoopStats,
    /// The latch in effect at the end, if any.
    pub latch: Option<String>,
}

/// Where dropped envs leave their [`EnvReport`]s.
pub type ReportSink = Arc<Mutex<Vec<EnvReport>>>;

/// One control step as the loop saw it, handed to a [`LoopObserver`] (the run's Rerun
/// recording): the arm's state after the step, the command before and after the envelope, and
/// the step's info (`intervention`, `safety/clipped`, `safety/rejected`, `safety/dropped`,
/// `safety/latched`, `safety/latch_kind`, `loop/period_ms`, `loop/jitter_ms`, `loop/late`,
/// `loop/missed_deadlines`, `label`).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopSample {
    /// Which env of the run (the k-th made on this robot: acting, evaluating), as given to
    /// [`RobotEnv::with_observer`].
    pub arm: u64,
    /// The env's step counter (every step of every episode).
    pub step: u64,
    /// Joint names, in the order of the joint vectors.
    pub joints: Vec<String>,
    /// Measured joint positions after the step.
    pub joint_positions: Vec<f64>,
    /// Measured joint velocities after the step.
    pub joint_velocities: Vec<f64>,
    /// Measured end-effector position, when the driver reports it.
    pub ee_position: Option<[f64; 3]>,
    /// The command offered to the envelope (joint targets or an end-effector delta); empty when
    /// the step ended before one was made.
    pub requested: Vec<f64>,
    /// What the envelope let through to the driver (`None`: rejected, dropped or latched).
    pub sent: Option<Vec<f64>>,
    /// The step's reward.
    pub reward: f64,
    /// The step's info.
    pub info: Info,
}

/// Sees every control step of the envs it is attached to ([`RobotEnv::with_observer`]); called
/// on the loop's thread, so it must return at once (the Rerun logger only queues).
pub trait LoopObserver: Send {
    /// One step.
    fn observe(&mut self, sample: &LoopSample);
}

/// Where a run puts its observer once its logging is up; envs made before that check it at
/// every step.
pub type ObserverSlot = Arc<Mutex<Option<Box<dyn LoopObserver>>>>;

/// A watchdog thread polling the guard four times a period (real clocks only).
struct WatchdogThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for WatchdogThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The robot as an [`Env`].
pub struct RobotEnv<R: Robot + 'static> {
    spec: EnvSpec,
    observation_space: BoxSpace,
    action_space: BoxSpace,
    guard: Arc<Mutex<Guarded<R>>>,
    _watchdog: Option<WatchdogThread>,
    clock: Arc<dyn Clock>,
    period: Duration,
    config: LoopConfig,
    mode: ControlMode,
    task: ReachTask,
    goal: Vec<f64>,
    operator: Box<dyn Operator>,
    rng: ChaCha8Rng,
    recording: Option<Arc<Mutex<Recording>>>,
    reports: Option<ReportSink>,
    next_tick: Duration,
    last_command_at: Option<Duration>,
    missed_in_a_row: u32,
    stats: LoopStats,
    episode_steps: usize,
    global_step: u64,
    obs: Option<Vec<f32>>,
    executed: Option<Vec<f32>>,
    observer: Option<(ObserverSlot, u64)>,
    /// This step's command before and after the envelope (for the observer).
    requested: Vec<f64>,
    sent: Option<Vec<f64>>,
}

/// Errors making a robot env.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RobotEnvError {
    /// A config value is wrong.
    #[error("{0}")]
    Config(String),
    /// The safety layer refused (the envelope, the start pose, the driver).
    #[error(transparent)]
    Guard(#[from] GuardError),
}

impl<R: Robot + 'static> RobotEnv<R> {
    /// Connect `driver` through the safety layer and build the env. `id` names it (the run's
    /// `env`).
    pub fn new(
        id: &str,
        driver: R,
        envelope: crate::guard::EnvelopeConfig,
        config: LoopConfig,
        task: ReachTask,
        operator: Box<dyn Operator>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RobotEnvError> {
        let period = config.period().map_err(RobotEnvError::Config)?;
        let caps = driver.capabilities().clone();
        task.check(caps.joints.len(), caps.has_end_effector).map_err(RobotEnvError::Config)?;
        let mode = envelope.mode;
        let guard = Guarded::connect(driver, envelope, period, clock.clone())?;
        // Limits beyond the arm's own, let through by `allow_beyond_model`: said loudly, every run.
        for w in guard.warnings() {
            eprintln!("o2o robot: WARNING: {w}");
        }
        let w = guard.step_window() as f32;
        let dim = guard.command_dim();
        let state = guard.last_state().cloned().unwrap_or_default();
        let obs_dim = observation(&state, &task.goal_low).len();
        let guard = Arc::new(Mutex::new(guard));
        let watchdog = clock.is_real().then(|| spawn_watchdog(guard.clone(), period));
        Ok(Self {
            spec: EnvSpec {
                id: id.to_string(),
                max_episode_steps: Some(config.max_episode_steps),
                normalization_family: None,
                goal: None,
            },
            observation_space: BoxSpace::unbounded(obs_dim),
            action_space: BoxSpace::new(vec![-w; dim], vec![w; dim]),
            guard,
            _watchdog: watchdog,
            clock,
            period,
            config,
            mode,
            goal: task.goal_low.clone(),
            task,
            operator,
            rng: ChaCha8Rng::seed_from_u64(0),
            recording: None,
            reports: None,
            next_tick: Duration::ZERO,
            last_command_at: None,
            missed_in_a_row: 0,
            stats: LoopStats::default(),
            episode_steps: 0,
            global_step: 0,
            obs: None,
            executed: None,
            observer: None,
            requested: Vec::new(),
            sent: None,
        })
    }

    /// Record every transition into `recording` (see [`Recording`]); several envs on one
    /// robot (acting and evaluating) may share one.
    pub fn with_recording(mut self, recording: Arc<Mutex<Recording>>) -> Self {
        self.recording = Some(recording);
        self
    }

    /// Show every step to the observer in `slot` (when one is there), as env number `arm`.
    pub fn with_observer(mut self, slot: ObserverSlot, arm: u64) -> Self {
        self.observer = Some((slot, arm));
        self
    }

    /// Leave this env's [`EnvReport`] in `sink` when it is dropped.
    pub fn with_report_sink(mut self, sink: ReportSink) -> Self {
        self.reports = Some(sink);
        self
    }

    /// What the env did so far.
    pub fn report(&self) -> EnvReport {
        let g = self.guard();
        EnvReport {
            id: self.spec.id.clone(),
            safety: g.counters().clone(),
            timing: self.stats.clone(),
            latch: g.latch().map(|l| l.to_string()),
        }
    }

    /// The safety layer (locked): counters, latch, the driver read-only, operator actions.
    pub fn guard(&self) -> MutexGuard<'_, Guarded<R>> {
        self.guard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The safety counters.
    pub fn counters(&self) -> SafetyCounters {
        self.guard().counters().clone()
    }

    /// Loop timing so far.
    pub fn loop_stats(&self) -> &LoopStats {
        &self.stats
    }

    /// The control period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The current goal.
    pub fn goal(&self) -> &[f64] {
        &self.goal
    }

    fn obs_of(&self, state: &RobotState) -> Vec<f32> {
        observation(state, &self.goal)
    }
}

/// [q, q̇, end-effector position (if any), goal], as `f32`.
fn observation(state: &RobotState, goal: &[f64]) -> Vec<f32> {
    let ee = state.ee_position.iter().flatten();
    state
        .joint_positions
        .iter()
        .chain(&state.joint_velocities)
        .chain(ee)
        .chain(&state.extra)
        .chain(goal)
        .map(|v| *v as f32)
        .collect()
}

/// A number per latch kind for step info and logs: 1 e-stop, 2 driver fault, 3 link lost,
/// 4 overspeed, 5 missed deadlines.
pub fn latch_code(latch: &Latch) -> f64 {
    match latch {
        Latch::EStop { .. } => 1.0,
        Latch::DriverFault { .. } => 2.0,
        Latch::LinkLost { .. } => 3.0,
        Latch::Overspeed { .. } => 4.0,
        Latch::MissedDeadlines { .. } => 5.0,
    }
}

fn spawn_watchdog<R: Robot + 'static>(guard: Arc<Mutex<Guarded<R>>>, period: Duration) -> WatchdogThread {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("o2o-robot-watchdog".into())
        .spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(period / 4);
                guard.lock().unwrap_or_else(|p| p.into_inner()).poll();
            }
        })
        .ok();
    WatchdogThread { stop, handle }
}

fn env_err(id: &str, e: impl std::fmt::Display) -> EnvError {
    EnvError::Other(format!("{id}: {e}"))
}

impl<R: Robot + 'static> Env for RobotEnv<R> {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &BoxSpace {
        &self.action_space
    }

    /// Ask the operator (who alone can clear a latch), home the arm, draw a goal. A lost link
    /// or a fault during the reset is tried again (asking the operator again) up to
    /// [`RESET_ATTEMPTS`] times; the operator's abort is final.
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>, EnvError> {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_reset() {
                Ok(obs) => return Ok(obs),
                Err((e, retry)) if !retry || attempt >= RESET_ATTEMPTS => return Err(e),
                Err(_) => {}
            }
        }
    }

    fn step(&mut self, action: &[f32]) -> Result<Step, EnvError> {
        let id = self.spec.id.clone();
        let Some(obs) = self.obs.clone() else { return Err(EnvError::NeedsReset { env: id }) };
        if action.len() != self.action_space.dim() {
            return Err(EnvError::ActionLength { env: id, expected: self.action_space.dim(), found: action.len() });
        }
        let step_index = self.global_step;
        self.global_step += 1;
        let mut info = Info::default();
        (self.requested, self.sent) = (Vec::new(), None);

        // 1–2. Watchdog, e-stop, takeover.
        self.guard().poll();
        if self.operator.estop(step_index) {
            self.guard().estop("operator e-stop");
        }
        let takeover = self.operator.intervene(step_index, &obs, action);
        let intervened = takeover.is_some();
        let executed: Vec<f32> = takeover.unwrap_or_else(|| action.to_vec());
        info.set("intervention", if intervened { 1.0 } else { 0.0 });
        self.stats.interventions += u64::from(intervened);

        // 3. The deadline of this step's command.
        let now = self.clock.now();
        let late = now > self.next_tick + self.period.mul_f64(self.config.deadline_slack);
        let tick = if late { now } else { self.next_tick.max(now) };
        if late {
            self.stats.missed_deadlines += 1;
            self.missed_in_a_row += 1;
            self.stats.max_missed_in_a_row = self.stats.max_missed_in_a_row.max(self.missed_in_a_row);
        } else {
            self.missed_in_a_row = 0;
        }
        info.set("loop/late", if late { 1.0 } else { 0.0 });
        info.set("loop/missed_deadlines", self.stats.missed_deadlines as f64);
        let max_missed = self.guard().envelope().max_missed_deadlines;
        if self.missed_in_a_row >= max_missed {
            self.guard().trip(Latch::MissedDeadlines { count: self.missed_in_a_row });
        }

        // 4. Command through the safety layer, then sleep to the end of the period.
        let command: Vec<f64> = match self.mode {
            ControlMode::JointPosition => {
                let q = self.guard().last_state().map(|s| s.joint_positions.clone()).unwrap_or_default();
                executed.iter().zip(&q).map(|(a, q)| q + *a as f64).collect()
            }
            ControlMode::EndEffectorDelta => executed.iter().map(|a| *a as f64).collect(),
        };
        let sent_at = self.clock.now();
        self.requested = command.clone();
        let outcome = self.guard().command(&command);
        let sent = match outcome {
            Ok(s) => s,
            Err(GuardError::Latched(latch)) => {
                return Ok(self.finish_stopped(&latch, info, &obs, &executed, intervened))
            }
            Err(e) => {
                let latch = self.guard().latch().cloned();
                match latch {
                    Some(l) => return Ok(self.finish_stopped(&l, info, &obs, &executed, intervened)),
                    None => return Err(env_err(&id, e)),
                }
            }
        };
        if let Some(prev) = self.last_command_at.replace(sent_at) {
            let p = (sent_at - prev).as_secs_f64();
            self.stats.add_period(p, self.period.as_secs_f64());
            info.set("loop/period_ms", p * 1e3);
            info.set("loop/jitter_ms", (p - self.period.as_secs_f64()).abs() * 1e3);
        }
        self.sent = sent.sent.clone();
        info.set("safety/clipped", f64::from(sent.clipped));
        info.set("safety/rejected", if sent.rejected { 1.0 } else { 0.0 });
        info.set("safety/dropped", if sent.dropped { 1.0 } else { 0.0 });
        // The action as executed, in the env's units: a rejected or dropped command moved
        // nothing (zero delta); a clipped one moved by what was sent.
        let measured_before = self.guard().last_state().cloned().unwrap_or_default();
        let executed_env: Vec<f32> = match (&sent.sent, self.mode) {
            (None, _) => vec![0.0; executed.len()],
            (Some(v), ControlMode::JointPosition) => {
                v.iter().zip(&measured_before.joint_positions).map(|(t, q)| (t - q) as f32).collect()
            }
            (Some(v), ControlMode::EndEffectorDelta) => v.iter().map(|d| *d as f32).collect(),
        };
        self.next_tick = tick + self.period;
        self.clock.sleep_until(self.next_tick);

        // 5. Read the arm (one retry on a dropped read), reward, labels.
        let read = self.guard().read_state_retry(2);
        let state = match read {
            Ok(s) => s,
            Err(GuardError::Latched(latch)) => {
                return Ok(self.finish_stopped(&latch, info, &obs, &executed_env, intervened))
            }
            Err(e) => {
                let latch = self.guard().latch().cloned();
                match latch {
                    Some(l) => return Ok(self.finish_stopped(&l, info, &obs, &executed_env, intervened)),
                    // A read dropped twice: the step goes on with the last reading.
                    None if matches!(e, GuardError::Driver(crate::driver::DriverError::Dropped { .. })) => {
                        measured_before.clone()
                    }
                    None => return Err(env_err(&id, e)),
                }
            }
        };
        let next_obs = self.obs_of(&state);
        let (reward, reached) = self.task.reward(&state, &self.goal);
        let label = self.operator.label(step_index, &next_obs);
        let success = label.unwrap_or(reached);
        if let Some(l) = label {
            info.set("label", if l { 1.0 } else { 0.0 });
        }
        info.success = Some(success);
        self.episode_steps += 1;
        self.stats.steps += 1;
        let terminated = success && self.task.terminate_on_success;
        let truncated = !terminated && self.episode_steps >= self.config.max_episode_steps;
        let step = Step { obs: next_obs.clone(), reward, terminated, truncated, info };
        self.record(&obs, &executed_env, &step, intervened, label);
        self.observe(&state, &step);
        if step.done() {
            // Hold at the episode's end: an env that is not stepped again (the evaluation env
            // between evaluations) then never has its watchdog act on the arm.
            let _ = self.guard().stop();
        }
        self.executed = Some(executed_env);
        self.obs = if step.done() { None } else { Some(next_obs) };
        Ok(step)
    }

    fn executed_action(&self) -> Option<&[f32]> {
        self.executed.as_deref()
    }
}

impl<R: Robot + 'static> RobotEnv<R> {
    /// One reset attempt; the error says whether another attempt may succeed.
    fn try_reset(&mut self) -> Result<Vec<f32>, (EnvError, bool)> {
        let id = self.spec.id.clone();
        let episode = self.stats.episodes;
        let latch = self.guard().latch().cloned();
        match self.operator.confirm_reset(episode, latch.as_ref()) {
            ResetDecision::Go if latch.is_some() => {
                let l = latch.map(|l| l.to_string()).unwrap_or_default();
                return Err((
                    env_err(&id, format!("safety latch set ({l}); the operator went on without clearing it")),
                    false,
                ));
            }
            ResetDecision::Go => {}
            ResetDecision::ClearLatch => {
                let cleared = self.guard().clear_latch();
                cleared.map_err(|e| (env_err(&id, e), true))?;
            }
            ResetDecision::Abort(why) => {
                return Err((env_err(&id, format!("the operator stopped the run: {why}")), false))
            }
        }
        let homed = self.guard().home();
        let state = homed.map_err(|e| (env_err(&id, e), true))?;
        self.goal = self.task.sample_goal(&mut self.rng);
        self.stats.episodes += 1;
        self.episode_steps = 0;
        self.missed_in_a_row = 0;
        self.next_tick = self.clock.now();
        self.last_command_at = None;
        let obs = self.obs_of(&state);
        self.obs = Some(obs.clone());
        Ok(obs)
    }

    /// End the episode with a safety stop (the latch is set), recording the transition.
    /// The arm is held where it was, so the next observation is the last one, `truncated`
    /// (not a task end: learners still bootstrap), info `safety/latched = 1`.
    fn finish_stopped(
        &mut self,
        latch: &Latch,
        mut info: Info,
        obs: &[f32],
        executed: &[f32],
        intervened: bool,
    ) -> Step {
        let held = vec![0.0; executed.len()];
        info.set("safety/latched", 1.0);
        info.set("safety/latch_kind", latch_code(latch));
        let step = Step { obs: obs.to_vec(), reward: 0.0, terminated: false, truncated: true, info };
        self.stats.steps += 1;
        self.record(obs, &held, &step, intervened, None);
        let state = self.guard().last_state().cloned().unwrap_or_default();
        self.sent = None;
        self.observe(&state, &step);
        self.executed = Some(held);
        self.obs = None;
        step
    }

    fn observe(&self, state: &RobotState, step: &Step) {
        let Some((slot, arm)) = &self.observer else { return };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(observer) = slot.as_mut() else { return };
        let joints = self.guard().driver().capabilities().joints.clone();
        observer.observe(&LoopSample {
            arm: *arm,
            step: self.global_step - 1,
            joints,
            joint_positions: state.joint_positions.clone(),
            joint_velocities: state.joint_velocities.clone(),
            ee_position: state.ee_position,
            requested: self.requested.clone(),
            sent: self.sent.clone(),
            reward: step.reward,
            info: step.info.clone(),
        });
    }

    fn record(&mut self, obs: &[f32], action: &[f32], step: &Step, intervention: bool, label: Option<bool>) {
        if let Some(rec) = &self.recording {
            rec.lock().unwrap_or_else(|p| p.into_inner()).push(&StepRecord { obs, action, step, intervention, label });
        }
    }
}

impl<R: Robot + 'static> Drop for RobotEnv<R> {
    /// The arm stops when the env goes away (end of run, error, panic unwinding).
    fn drop(&mut self) {
        let _ = self.guard().stop();
        if let Some(sink) = &self.reports {
            let report = self.report();
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(report);
        }
        if let Some(rec) = &self.recording {
            if let Err(e) = rec.lock().unwrap_or_else(|p| p.into_inner()).flush() {
                eprintln!("warning: {}: could not write the robot recording: {e}", self.spec.id);
            }
        }
    }
}
