//! The Rerun sink: scalars on the `grad_step`, `env_step` and `wall_time` timelines, and
//! evaluation episodes as moving 3D bodies, written by a thread of its own.
//!
//! The caller only ever pushes onto a bounded [`DroppingQueue`]: a full queue drops the message
//! and counts it (see `queue.rs` for why). The worker thread owns the [`rerun::RecordingStream`]
//! and is the only code that talks to Rerun, so a slow disk or a stalled viewer delays the worker,
//! never the training loop.
//!
//! Entity layout of a recording:
//! - `<key>` for every metric key (`train/critic_loss`, `eval/return`, …), timelines
//!   `grad_step`, `env_step` (sequences), `wall_time` (seconds since the logger started) and,
//!   for a run's sink ([`RerunSink::with_plan`]), `run_step` (loop steps: offline gradient steps,
//!   then env steps — the x axis of the run layouts in `layout.rs`);
//! - `phases/<phase>_end/return` and `…/normalized_score`: the evaluation at the end of a phase
//!   again, drawn as a large labelled point (`phases/start/…`: a fine-tuning run's start);
//! - `episode/world/<body>/geom<i>` (static) the model's geoms in their body's frame, and
//!   `episode/world/<body>` a `Transform3D` per evaluation step (the body's world pose);
//! - `episode/world` a `Transform3D` with every pose (the *follow frame*): the horizontal
//!   position of the root body (body 1) taken away, so the 3D view (origin `episode`) keeps
//!   the body in front of its fixed camera however far it has run; each floor plane
//!   (`episode/world/world/geom<i>`) moved back by whole checker periods, so it stays under the
//!   body (see [`Worker::follow`]);
//! - `episode/action` (one series per action dimension), `episode/reward`, `episode/grad_step`
//!   on the timelines `eval_step` (counts every logged evaluation step of the run, so episodes
//!   play one after another) and `episode_step` (step within the episode); `o2o dataset view`
//!   uses the same layout with `dataset_step` for `eval_step`, plus `episode/observation` and
//!   `episode/return` (each episode's return, from its first row);
//! - `episode/title` (markdown): which evaluation (or dataset episode) the body belongs to;
//! - at each evaluation's result (`eval/return`), on the training timelines: the bodies' last
//!   poses of the recorded episode (`episode/world/<body>`), its title, and its rewards and
//!   actions step by step as bar charts (`episode/last/reward`, `episode/last/action/a<i>`), so
//!   the training timelines show the body next to the curves as that evaluation left it;
//! - `diag/<source>/<name>` (2-D points): an agent's per-row diagnostics at each evaluation
//!   (`Agent::diagnose_rows`; FamO2O's `beta_vs_q`, `beta_vs_return`), on the training timelines;
//! - `episode/<name>` beside `episode/action`: what the agent chose with each action
//!   (`Agent::act_info`; FamO2O's `episode/beta`), and `episode/last/<name>` as a bar chart;
//! - `robot/arm<k>/…` on the `robot_step` timeline: a robot's control loop step by step (see
//!   [`RobotLoopLogger`]);
//! - `perf/rerun_dropped`: how many messages the queue dropped so far, with every
//!   `perf/steps_per_s` record and once at the end;
//! - `perf/steps_per_s_without_updates`: the `perf/steps_per_s` of a window without gradient
//!   updates (random steps, warm-up), apart from the training rate ([`STEPS_WITHOUT_UPDATES`]).

use super::layout::{RunPlan, RUN_STEP, SCENE, SCENE_ORIGIN, STEPS_WITHOUT_UPDATES};
use super::markers::{log_markers, Trails, PATH_EVERY};
use super::queue::{DroppingQueue, QueueSender, QueueStats};
use super::shapes::{
    entity_name, rotate, shape_of, GeomKind, ModelGeometry, Pose, Shape, INFINITE_PLANE_HALF, PLANE_THICKNESS,
};
use super::{MetricSink, Record};
use anyhow::{Context, Result};
use o2o_envs::mujoco::Marker;
use rerun::RecordingStream;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

/// Messages from the callers to the Rerun thread.
pub(crate) enum Msg {
    Scalars {
        grad_step: u64,
        env_step: u64,
        wall_s: f64,
        values: Vec<(String, f64)>,
    },
    Geometry(ModelGeometry),
    /// `grad_step: None`: the last `grad_step` the metrics carried. `summary`: the return and
    /// length of a replayed episode, known before it is logged.
    EpisodeStart {
        timeline: &'static str,
        eval_step: u64,
        grad_step: Option<u64>,
        episode: u64,
        summary: Option<(f64, usize)>,
    },
    /// The run's plan (sent first by [`RerunSink::with_plan`]).
    Plan(RunPlan),
    /// `values`: what the agent chose besides the action at this step (FamO2O's β).
    /// `markers`: the task's points in this state ([`EpisodeLogger::set_markers`]).
    EpisodeStep {
        timeline: &'static str,
        eval_step: u64,
        episode_step: u64,
        poses: Vec<Pose>,
        obs: Vec<f32>,
        action: Vec<f32>,
        reward: f64,
        values: Vec<(String, f64)>,
        markers: Vec<Marker>,
    },
    /// Paired per-row values drawn as 2-D points at `path` (x, y).
    Scatter {
        grad_step: u64,
        env_step: u64,
        path: String,
        x: Vec<f32>,
        y: Vec<f32>,
    },
    /// One control step of a robot env: `robot/arm<arm>/<name>` scalars on `robot_step`.
    RobotStep {
        arm: u64,
        step: u64,
        values: Vec<(String, f64)>,
    },
    Flush,
    Shutdown,
}

/// The timeline of robot control steps.
pub const ROBOT_STEP: &str = "robot_step";

/// Logs a robot's control loop through a [`RerunSink`]'s queue (never blocking the loop): per
/// step, under `robot/arm<k>/`, `joints/<name>/position` and `/velocity`, `ee/x|y|z`,
/// `command/requested/<i>` (before the envelope) and `command/sent/<i>` (after it; absent when
/// nothing was sent), `reward`, and the step's info — `intervention`, `safety/clipped`,
/// `safety/rejected`, `safety/dropped`, `safety/latched`, `safety/latch_kind`,
/// `loop/period_ms`, `loop/jitter_ms`, `loop/late`, `loop/missed_deadlines`, `label`.
pub struct RobotLoopLogger {
    sender: QueueSender<Msg>,
}

impl o2o_robot::LoopObserver for RobotLoopLogger {
    fn observe(&mut self, s: &o2o_robot::LoopSample) {
        let mut values: Vec<(String, f64)> = Vec::with_capacity(4 * s.joints.len() + 16);
        for (i, name) in s.joints.iter().enumerate() {
            if let Some(q) = s.joint_positions.get(i) {
                values.push((format!("joints/{name}/position"), *q));
            }
            if let Some(v) = s.joint_velocities.get(i) {
                values.push((format!("joints/{name}/velocity"), *v));
            }
        }
        if let Some(p) = s.ee_position {
            values.extend(["x", "y", "z"].iter().zip(p).map(|(a, v)| (format!("ee/{a}"), v)));
        }
        values.extend(s.requested.iter().enumerate().map(|(i, v)| (format!("command/requested/{i}"), *v)));
        values.extend(s.sent.iter().flatten().enumerate().map(|(i, v)| (format!("command/sent/{i}"), *v)));
        values.push(("reward".into(), s.reward));
        values.extend(s.info.values.iter().map(|(k, v)| ((*k).to_string(), *v)));
        self.sender.push(Msg::RobotStep { arm: s.arm, step: s.step, values });
    }
}

/// Default number of messages that may wait for the Rerun thread.
pub const DEFAULT_QUEUE: usize = 4096;

/// How long the end of a run waits for Rerun to write a recording file out.
pub const FILE_FLUSH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the end of a run waits for a viewer to take the rest of a stream (it may be gone).
pub const STREAM_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`MetricSink`] that hands records to a Rerun thread without ever blocking.
pub struct RerunSink {
    queue: DroppingQueue<Msg>,
    stats: Arc<QueueStats>,
    flush_timeout: Duration,
    finished: bool,
}

impl RerunSink {
    /// Start the Rerun thread over `rec`, with room for `capacity` waiting messages. At the end
    /// the thread gets `flush_timeout` to write out what it holds ([`FILE_FLUSH_TIMEOUT`] for a
    /// file, [`STREAM_FLUSH_TIMEOUT`] for a viewer).
    pub fn new(rec: RecordingStream, capacity: usize, flush_timeout: Duration) -> Result<Self> {
        Self::spawn(rec, capacity, flush_timeout, None)
    }

    /// `stall`, when given, runs on the worker after it receives its first message and before it
    /// handles it: tests use it to hold the worker still.
    fn spawn(
        rec: RecordingStream,
        capacity: usize,
        flush_timeout: Duration,
        stall: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<Self> {
        let queue = DroppingQueue::spawn("o2o-rerun", capacity, move |rx, stats| {
            run_worker(rec, rx, stats, flush_timeout, stall)
        })
        .context("cannot start the Rerun logging thread")?;
        let stats = queue.sender().map(|s| s.stats().clone()).unwrap_or_default();
        Ok(Self { queue, stats, flush_timeout, finished: false })
    }

    /// Tell the sink which run it records: records then also go on the `run_step` timeline, and
    /// the evaluations at the plan's phase ends are marked.
    pub fn with_plan(self, plan: RunPlan) -> Self {
        if let Some(s) = self.sender() {
            s.send_blocking(Msg::Plan(plan));
        }
        self
    }

    fn sender(&self) -> Option<&QueueSender<Msg>> {
        self.queue.sender()
    }

    /// The queue's counters (accepted and dropped messages), shared with every episode logger.
    pub fn stats(&self) -> Arc<QueueStats> {
        self.stats.clone()
    }

    /// A logger for evaluation episodes that feeds the same queue.
    pub fn episode_logger(&self) -> Option<EpisodeLogger> {
        self.sender().map(|s| EpisodeLogger::new(s.clone()))
    }

    /// A logger for robot control loops that feeds the same queue.
    pub fn robot_logger(&self) -> Option<RobotLoopLogger> {
        self.sender().map(|s| RobotLoopLogger { sender: s.clone() })
    }

    /// Stop accepting, let the thread write what it accepted, wait for it (a bounded time: a
    /// vanished viewer cannot keep a finished run from exiting), and return how many messages
    /// were dropped. Waiting happens here, at the end of a run, never while logging.
    pub fn finish(&mut self) -> u64 {
        if self.finished {
            return self.stats.dropped();
        }
        self.finished = true;
        if let Some(s) = self.sender() {
            // The one blocking send: the end-of-run marker must not be lost to a full queue.
            s.send_blocking(Msg::Shutdown);
        }
        let (dropped, done) = self.queue.finish_within(self.flush_timeout + Duration::from_secs(2));
        if !done {
            eprintln!(
                "o2o: gave up waiting for the Rerun thread after {:?}; the recording may be incomplete",
                self.flush_timeout
            );
        }
        if dropped > 0 {
            eprintln!(
                "o2o: the Rerun sink dropped {dropped} messages (its queue was full); metrics.jsonl has every record"
            );
        }
        dropped
    }
}

impl MetricSink for RerunSink {
    fn episode_logger(&self) -> Option<EpisodeLogger> {
        RerunSink::episode_logger(self)
    }

    fn loop_observer(&self) -> Option<Box<dyn o2o_robot::LoopObserver>> {
        self.robot_logger().map(|l| Box::new(l) as Box<dyn o2o_robot::LoopObserver>)
    }

    fn record(&mut self, r: &Record<'_>) -> Result<()> {
        if let Some(s) = self.sender() {
            let values = r.values.iter().map(|(k, v)| ((*k).to_string(), *v)).collect();
            s.push(Msg::Scalars { grad_step: r.grad_step, env_step: r.env_step, wall_s: r.wall_s, values });
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if let Some(s) = self.sender() {
            s.push(Msg::Flush);
        }
        Ok(())
    }

    fn scatter(&mut self, grad_step: u64, env_step: u64, path: &str, x: &[f32], y: &[f32]) -> Result<()> {
        if let Some(s) = self.sender() {
            s.push(Msg::Scatter { grad_step, env_step, path: path.to_string(), x: x.to_vec(), y: y.to_vec() });
        }
        Ok(())
    }
}

impl Drop for RerunSink {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Logs evaluation episodes (bodies, actions, rewards) through a [`RerunSink`]'s queue.
///
/// Call [`EpisodeLogger::set_geometry`] once with the model's geoms, then per episode
/// `begin_episode`, `step` for every env step, and nothing at the end. Every call returns at
/// once; what does not fit in the queue is dropped and counted.
pub struct EpisodeLogger {
    tx: QueueSender<Msg>,
    /// The run-wide step timeline: `eval_step`, or `dataset_step` for `o2o dataset view`.
    timeline: &'static str,
    /// Wait for room instead of dropping (offline replays, where nothing runs against a clock).
    blocking: bool,
    geometry: Option<ModelGeometry>,
    /// The task's markers for the next step ([`EpisodeLogger::set_markers`]).
    markers: Vec<Marker>,
    eval_step: u64,
    episode_step: u64,
    episodes: u64,
}

impl EpisodeLogger {
    fn new(tx: QueueSender<Msg>) -> Self {
        Self {
            tx,
            timeline: "eval_step",
            blocking: false,
            geometry: None,
            markers: Vec::new(),
            eval_step: 0,
            episode_step: 0,
            episodes: 0,
        }
    }

    /// For replaying recorded data (no control loop to protect): name the step timeline
    /// `timeline` and wait for room in the queue instead of dropping.
    pub fn for_replay(mut self, timeline: &'static str) -> Self {
        self.timeline = timeline;
        self.blocking = true;
        self
    }

    fn push(&self, msg: Msg) -> bool {
        if self.blocking {
            self.tx.send_blocking(msg)
        } else {
            self.tx.push(msg)
        }
    }

    /// The model's static geometry; sent with the next episode (again if the queue dropped it).
    pub fn set_geometry(&mut self, geometry: ModelGeometry) {
        self.geometry = Some(geometry);
    }

    /// A new evaluation episode, run after `grad_step` gradient updates (`None`: the last
    /// `grad_step` logged as a metric).
    pub fn begin_episode(&mut self, grad_step: Option<u64>) {
        self.start(grad_step, None);
    }

    /// A replayed episode whose return and length are known up front (`o2o dataset view`): they
    /// are logged as `episode/return` and in `episode/title`.
    pub fn begin_replayed_episode(&mut self, ret: f64, length: usize) {
        self.start(Some(0), Some((ret, length)));
    }

    fn start(&mut self, grad_step: Option<u64>, summary: Option<(f64, usize)>) {
        if let Some(g) = self.geometry.take() {
            if !self.push(Msg::Geometry(g.clone())) {
                self.geometry = Some(g);
            }
        }
        self.episode_step = 0;
        self.push(Msg::EpisodeStart {
            timeline: self.timeline,
            eval_step: self.eval_step,
            grad_step,
            episode: self.episodes,
            summary,
        });
        self.episodes += 1;
    }

    /// The task's markers (goal, ant, hand, object; `markers.rs`) in the state of the next
    /// [`EpisodeLogger::step`] call, which sends them with it.
    pub fn set_markers(&mut self, markers: Vec<Marker>) {
        self.markers = markers;
    }

    /// One env step: every body's world pose (index = body id), the action taken and the reward.
    /// An empty `action` logs only the poses (the state after a reset).
    pub fn step(&mut self, poses: &[Pose], action: &[f32], reward: f64) {
        self.step_with_obs(poses, &[], action, reward);
    }

    /// [`EpisodeLogger::step`] plus the observation (logged as `episode/observation` when not empty).
    pub fn step_with_obs(&mut self, poses: &[Pose], obs: &[f32], action: &[f32], reward: f64) {
        self.step_with_values(poses, obs, action, reward, Vec::new());
    }

    /// [`EpisodeLogger::step_with_obs`] plus named values the agent chose with the action
    /// (FamO2O's β), logged as `episode/<name>` on the episode's timelines.
    pub fn step_with_values(
        &mut self,
        poses: &[Pose],
        obs: &[f32],
        action: &[f32],
        reward: f64,
        values: Vec<(String, f64)>,
    ) {
        let markers = std::mem::take(&mut self.markers);
        self.push(Msg::EpisodeStep {
            timeline: self.timeline,
            eval_step: self.eval_step,
            episode_step: self.episode_step,
            poses: poses.to_vec(),
            obs: obs.to_vec(),
            action: action.to_vec(),
            reward,
            values,
            markers,
        });
        self.eval_step += 1;
        self.episode_step += 1;
    }

    /// The queue's counters.
    pub fn stats(&self) -> &Arc<QueueStats> {
        self.tx.stats()
    }
}

/// The Rerun thread: handle messages in order until `Shutdown` (or every sender is gone), then
/// record the drop count and flush.
fn run_worker(
    rec: RecordingStream,
    rx: Receiver<Msg>,
    stats: Arc<QueueStats>,
    flush_timeout: Duration,
    stall: Option<Box<dyn FnOnce() + Send>>,
) {
    let mut w = Worker {
        rec,
        stats: stats.clone(),
        plan: None,
        body_paths: Vec::new(),
        floors: Vec::new(),
        action_names_sent: false,
        obs_names_sent: false,
        last_grad_step: 0,
        last_time: None,
        episode: None,
        evaluations: 0,
        marks_styled: Vec::new(),
    };
    w.log_static_setup();
    let mut stall = stall;
    for msg in rx.iter() {
        if let Some(hold) = stall.take() {
            hold();
        }
        match msg {
            Msg::Shutdown => break,
            Msg::Flush => {
                let _ = w.rec.flush_async();
            }
            other => w.handle(other),
        }
    }
    // The final drop count, at the last record's time (at no time for a recording without one).
    let dropped = stats.dropped();
    match w.last_time {
        Some((g, e, s)) => w.set_training_time(g, e, s),
        None => w.rec.reset_time(),
    }
    let _ = w.rec.log("perf/rerun_dropped", &rerun::Scalars::single(dropped as f64));
    // Bounded, so a viewer that stopped reading cannot keep a finished run from exiting.
    if let Err(e) = w.rec.flush_with_timeout(flush_timeout) {
        eprintln!("o2o: the Rerun recording could not be flushed within {flush_timeout:?}: {e}");
    }
}

/// The evaluation episode being recorded, kept until its evaluation's result arrives.
struct Episode {
    /// Its first `eval_step`.
    start: u64,
    /// The bodies' latest poses.
    poses: Vec<Pose>,
    /// The paths of the task's trail markers (the ant, Adroit's object).
    trails: Trails,
    rewards: Vec<f64>,
    /// One row per step.
    actions: Vec<Vec<f32>>,
    /// The agent's named values per step (FamO2O's β), each a column.
    values: Vec<(String, Vec<f32>)>,
}

/// A level floor plane drawn as a checkerboard, which the follow frame keeps under the body.
struct Floor {
    path: String,
    quat_wxyz: [f64; 4],
    /// The checkerboard repeats every two tiles.
    period: f64,
}

impl Floor {
    /// The floor's translation when the root body is at `(x, y)`: that point rounded to whole
    /// periods along the floor's own axes, so the shifted checkerboard looks unmoved.
    fn snap(&self, x: f64, y: f64) -> [f32; 3] {
        let q = self.quat_wxyz;
        let local = rotate([q[0], -q[1], -q[2], -q[3]], [x, y, 0.0]);
        let snapped = [local[0], local[1]].map(|v| (v / self.period).round() * self.period);
        rotate(q, [snapped[0], snapped[1], 0.0]).map(|v| v as f32)
    }
}

struct Worker {
    rec: RecordingStream,
    stats: Arc<QueueStats>,
    plan: Option<RunPlan>,
    /// Entity path per body id, filled by the geometry message.
    body_paths: Vec<String>,
    /// The floor planes drawn as checkerboards: entity path, orientation and checker period.
    floors: Vec<Floor>,
    action_names_sent: bool,
    obs_names_sent: bool,
    /// The `grad_step` of the latest metrics record (for episodes that do not know theirs).
    last_grad_step: u64,
    /// `(grad_step, env_step, wall_s)` of the latest metrics record.
    last_time: Option<(u64, u64, f64)>,
    /// The evaluation episode awaiting its result.
    episode: Option<Episode>,
    /// Evaluations whose result arrived.
    evaluations: u64,
    /// Phase marks whose series style was logged.
    marks_styled: Vec<&'static str>,
}

/// `1234567.8` as `1 234 567.8` (`decimals` after the point).
fn thousands(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    let sign = if x < 0.0 { "−" } else { "" };
    if frac.is_empty() {
        format!("{sign}{out}")
    } else {
        format!("{sign}{out}.{frac}")
    }
}

impl Worker {
    fn log_static_setup(&self) {
        // MuJoCo is z-up; the 3D views' origin is the follow frame's parent.
        let _ = self.rec.log_static(SCENE_ORIGIN, &rerun::ViewCoordinates::RIGHT_HAND_Z_UP());
    }

    /// The follow frame at the current time, for `poses`: `episode/world` moved so that the
    /// root body stands over the origin horizontally, and each floor moved back by whole
    /// checker periods (it looks the same, and stays under the body).
    ///
    /// Why not the viewer's camera tracking: a halfcheetah runs tens to hundreds of metres in
    /// an episode (the demo's last one: 320 m), and the web viewer does not apply the
    /// blueprint's tracked entity at the opening cursor, so its camera looked at an empty floor;
    /// and the drawn floor ends where the model's plane size says (40 m), while a MuJoCo plane
    /// is infinite. Moving the scene instead keeps the logged body poses true world poses, needs
    /// no viewer feature, and costs one transform per step, plus one per floor.
    fn follow(&self, poses: &[Pose]) -> Result<()> {
        let Some(root) = poses.get(1) else { return Ok(()) };
        let (x, y) = (root.pos[0], root.pos[1]);
        self.rec.log(SCENE, &rerun::Transform3D::from_translation([-x as f32, -y as f32, 0.0]))?;
        for f in &self.floors {
            self.rec.log(f.path.as_str(), &rerun::Transform3D::from_translation(f.snap(x, y)))?;
        }
        Ok(())
    }

    fn handle(&mut self, msg: Msg) {
        // Logging errors (a closed viewer) are not the training loop's problem: ignore them here.
        let _ = match msg {
            Msg::Scalars { grad_step, env_step, wall_s, values } => self.scalars(grad_step, env_step, wall_s, &values),
            Msg::Geometry(g) => self.geometry(&g),
            Msg::Plan(p) => {
                self.plan = Some(p);
                Ok(())
            }
            Msg::EpisodeStart { timeline, eval_step, grad_step, episode, summary } => {
                self.episode_start(timeline, eval_step, grad_step, episode, summary)
            }
            Msg::EpisodeStep { timeline, eval_step, episode_step, poses, obs, action, reward, values, markers } => {
                self.episode_step(timeline, eval_step, episode_step, &poses, &obs, &action, reward, &values, &markers)
            }
            Msg::Scatter { grad_step, env_step, path, x, y } => self.scatter(grad_step, env_step, &path, &x, &y),
            Msg::RobotStep { arm, step, values } => self.robot_step(arm, step, &values),
            Msg::Flush | Msg::Shutdown => Ok(()),
        };
    }

    /// A robot's control step on its own timeline `robot_step` (the env's step counter).
    fn robot_step(&mut self, arm: u64, step: u64, values: &[(String, f64)]) -> Result<()> {
        self.rec.reset_time();
        self.rec.set_time_sequence(ROBOT_STEP, step as i64);
        for (k, v) in values.iter().filter(|(_, v)| v.is_finite()) {
            let path = format!("robot/arm{arm}/{k}");
            self.rec.log(path.as_str(), &rerun::Scalars::single(*v))?;
        }
        Ok(())
    }

    /// Set the training timelines (`run_step` too when the plan is known) and nothing else.
    fn set_training_time(&self, grad_step: u64, env_step: u64, wall_s: f64) {
        self.rec.reset_time();
        if let Some(p) = &self.plan {
            self.rec.set_time_sequence(RUN_STEP, p.run_step(grad_step, env_step) as i64);
        }
        self.rec.set_time_sequence("grad_step", grad_step as i64);
        self.rec.set_time_sequence("env_step", env_step as i64);
        self.rec.set_duration_secs("wall_time", wall_s);
    }

    fn scalars(&mut self, grad_step: u64, env_step: u64, wall_s: f64, values: &[(String, f64)]) -> Result<()> {
        self.last_grad_step = grad_step;
        self.last_time = Some((grad_step, env_step, wall_s));
        self.set_training_time(grad_step, env_step, wall_s);
        let get = |key: &str| values.iter().find(|(k, v)| k == key && v.is_finite()).map(|(_, v)| *v);
        let without_updates = get("perf/update_s") == Some(0.0);
        for (k, v) in values {
            // A NaN or infinity is skipped: it is null in metrics.jsonl too.
            if v.is_finite() {
                self.rec.log(rerun_path(k, without_updates), &rerun::Scalars::single(*v))?;
            }
        }
        if values.iter().any(|(k, _)| k == "perf/steps_per_s") {
            self.rec.log("perf/rerun_dropped", &rerun::Scalars::single(self.stats.dropped() as f64))?;
        }
        if let Some(ret) = get("eval/return") {
            self.evaluations += 1;
            self.mark_phase(grad_step, env_step, ret, get("eval/normalized_score"))?;
            if let Some(ep) = self.episode.take() {
                self.evaluated_episode(&ep, grad_step, env_step, ret)?;
            }
        }
        Ok(())
    }

    /// An evaluation at a phase end of the plan: its return and score again, as a labelled point.
    fn mark_phase(&mut self, grad_step: u64, env_step: u64, ret: f64, score: Option<f64>) -> Result<()> {
        let Some(plan) = &self.plan else { return Ok(()) };
        let run_step = plan.run_step(grad_step, env_step);
        let Some(mark) = plan.marks.iter().find(|m| m.run_step == run_step).cloned() else { return Ok(()) };
        for (metric, v) in [("return", Some(ret)), ("normalized_score", score)] {
            let Some(v) = v else { continue };
            let path = format!("phases/{}/{metric}", mark.name);
            if !self.marks_styled.contains(&mark.name) {
                let style = rerun::SeriesPoints::new()
                    .with_names([mark.label])
                    .with_markers([if mark.name == "offline_end" {
                        rerun::components::MarkerShape::Diamond
                    } else {
                        rerun::components::MarkerShape::Square
                    }])
                    .with_marker_sizes([8.0]);
                self.rec.log_static(path.as_str(), &style)?;
            }
            self.rec.log(path.as_str(), &rerun::Scalars::single(v))?;
        }
        if !self.marks_styled.contains(&mark.name) {
            self.marks_styled.push(mark.name);
        }
        Ok(())
    }

    /// The recorded episode of an evaluation whose result just arrived (the training timelines
    /// are set to the result's): its last poses, its title, its rewards and actions.
    fn evaluated_episode(&mut self, ep: &Episode, grad_step: u64, env_step: u64, mean_return: f64) -> Result<()> {
        for (body, pose) in ep.poses.iter().enumerate().skip(1) {
            self.rec.log(self.body_path(body), &transform(pose))?;
        }
        self.follow(&ep.poses)?;
        ep.trails.log(&self.rec)?;
        let own: f64 = ep.rewards.iter().sum();
        let at = match &self.plan {
            Some(p) => format!(
                "run step {} ({} gradient, {} env steps)",
                thousands(p.run_step(grad_step, env_step) as f64, 0),
                thousands(grad_step as f64, 0),
                thousands(env_step as f64, 0)
            ),
            None => format!(
                "{} gradient steps, {} env steps",
                thousands(grad_step as f64, 0),
                thousands(env_step as f64, 0)
            ),
        };
        let title = format!(
            "**Evaluation {}** at {at} · mean return {} · the body: its first episode, {} steps, return {}",
            self.evaluations,
            thousands(mean_return, 1),
            ep.rewards.len(),
            thousands(own, 1)
        );
        let doc = rerun::TextDocument::new(title).with_media_type(rerun::MediaType::markdown());
        self.rec.log("episode/title", &doc)?;
        if !ep.rewards.is_empty() {
            let rewards: Vec<f32> = ep.rewards.iter().map(|r| *r as f32).collect();
            self.rec.log("episode/last/reward", &rerun::BarChart::new(rewards.as_slice()))?;
        }
        let dims = ep.actions.first().map_or(0, Vec::len);
        for d in 0..dims {
            let column: Vec<f32> = ep.actions.iter().map(|a| a.get(d).copied().unwrap_or(0.0)).collect();
            self.rec.log(format!("episode/last/action/a{d}"), &rerun::BarChart::new(column.as_slice()))?;
        }
        for (k, column) in &ep.values {
            self.rec.log(format!("episode/last/{k}"), &rerun::BarChart::new(column.as_slice()))?;
        }
        // The same title on the evaluation timeline, over the episode's start entry.
        self.rec.reset_time();
        self.rec.set_time_sequence("eval_step", ep.start as i64);
        self.rec.set_time_sequence("episode_step", 0);
        self.rec.log("episode/title", &doc)?;
        // The whole path at the episode's last step (the reset row is step 0).
        let last = ep.rewards.len() as i64;
        self.rec.set_time_sequence("eval_step", ep.start as i64 + last);
        self.rec.set_time_sequence("episode_step", last);
        ep.trails.log(&self.rec)?;
        Ok(())
    }

    fn body_path(&self, body: usize) -> String {
        match self.body_paths.get(body) {
            Some(p) => p.clone(),
            None => format!("episode/world/body{body}"),
        }
    }

    /// A floor plane as a checkerboard of tiles, so a camera that follows the body still shows
    /// it moving over the ground.
    fn floor(&mut self, path: &str, geom: &super::shapes::Geom) -> Result<()> {
        let half = |h: f64| if h > 0.0 { h } else { INFINITE_PLANE_HALF };
        let (hx, hy) = (half(geom.size[0]), half(geom.size[1]));
        let tile = if hx.min(hy) >= 2.0 { 1.0 } else { hx.min(hy) / 2.0 };
        // A level floor follows the body (`follow`); a tilted plane is a wall or a ramp: it stays.
        if rotate(geom.quat_wxyz, [0.0, 0.0, 1.0])[2] > 0.999 {
            self.floors.push(Floor { path: path.to_string(), quat_wxyz: geom.quat_wxyz, period: 2.0 * tile });
        }
        let (nx, ny) = (((2.0 * hx) / tile).ceil() as i64, ((2.0 * hy) / tile).ceil() as i64);
        let shade = |k: f32| {
            let c = geom.rgba.map(|x| (x.clamp(0.0, 1.0) * k * 255.0).round().min(255.0) as u8);
            rerun::Color::from_unmultiplied_rgba(c[0], c[1], c[2], 255)
        };
        let (light, dark) = (shade(1.0), shade(0.75));
        let (mut centers, mut colors) = (Vec::new(), Vec::new());
        for i in 0..nx {
            for j in 0..ny {
                let local = [-hx + tile * (i as f64 + 0.5), -hy + tile * (j as f64 + 0.5), -PLANE_THICKNESS / 2.0];
                let off = rotate(geom.quat_wxyz, local);
                centers.push([0, 1, 2].map(|k| (geom.pos[k] + off[k]) as f32));
                colors.push(if (i + j) % 2 == 0 { light } else { dark });
            }
        }
        let n = centers.len();
        let q = super::shapes::xyzw_from_wxyz(geom.quat_wxyz);
        self.rec.log_static(
            path,
            &rerun::Boxes3D::from_centers_and_half_sizes(
                centers,
                vec![[tile as f32 / 2.0, tile as f32 / 2.0, PLANE_THICKNESS as f32 / 2.0]; n],
            )
            .with_quaternions(vec![rerun::Quaternion::from_xyzw(q); n])
            .with_colors(colors)
            .with_fill_mode(rerun::components::FillMode::Solid),
        )?;
        Ok(())
    }

    fn geometry(&mut self, g: &ModelGeometry) -> Result<()> {
        self.body_paths =
            g.body_names.iter().enumerate().map(|(i, n)| format!("{SCENE}/{}", entity_name(n, i))).collect();
        self.floors.clear();
        for (i, geom) in g.geoms.iter().enumerate() {
            if geom.rgba[3] <= 0.0 {
                continue; // invisible in MuJoCo's own viewer too
            }
            let Some(shape) = shape_of(geom) else { continue };
            let c = geom.rgba.map(|x| (x.clamp(0.0, 1.0) * 255.0).round() as u8);
            let color = rerun::Color::from_unmultiplied_rgba(c[0], c[1], c[2], c[3]);
            let path = format!("{}/geom{i}", self.body_path(geom.body));
            if geom.kind == GeomKind::Plane {
                self.floor(&path, geom)?;
                continue;
            }
            let solid = rerun::components::FillMode::Solid;
            match shape {
                Shape::Box { center, half_size, quat_xyzw } => self.rec.log_static(
                    path,
                    &rerun::Boxes3D::from_centers_and_half_sizes([center], [half_size])
                        .with_quaternions([rerun::Quaternion::from_xyzw(quat_xyzw)])
                        .with_colors([color])
                        .with_fill_mode(solid),
                )?,
                Shape::Capsule { start, length, radius, quat_xyzw } => self.rec.log_static(
                    path,
                    &rerun::Capsules3D::from_lengths_and_radii([length], [radius])
                        .with_translations([start])
                        .with_quaternions([rerun::Quaternion::from_xyzw(quat_xyzw)])
                        .with_colors([color])
                        .with_fill_mode(solid),
                )?,
                Shape::Cylinder { center, length, radius, quat_xyzw } => self.rec.log_static(
                    path,
                    &rerun::Cylinders3D::from_lengths_and_radii([length], [radius])
                        .with_centers([center])
                        .with_quaternions([rerun::Quaternion::from_xyzw(quat_xyzw)])
                        .with_colors([color])
                        .with_fill_mode(solid),
                )?,
                Shape::Ellipsoid { center, half_size, quat_xyzw } => self.rec.log_static(
                    path,
                    &rerun::Ellipsoids3D::from_centers_and_half_sizes([center], [half_size])
                        .with_quaternions([rerun::Quaternion::from_xyzw(quat_xyzw)])
                        .with_colors([color])
                        .with_fill_mode(solid),
                )?,
            }
        }
        Ok(())
    }

    fn episode_start(
        &mut self,
        timeline: &'static str,
        eval_step: u64,
        grad_step: Option<u64>,
        episode: u64,
        summary: Option<(f64, usize)>,
    ) -> Result<()> {
        let grad_step = grad_step.unwrap_or(self.last_grad_step);
        self.rec.reset_time();
        self.rec.set_time_sequence(timeline, eval_step as i64);
        self.rec.set_time_sequence("episode_step", 0);
        self.rec.log("episode/grad_step", &rerun::Scalars::single(grad_step as f64))?;
        let title = match summary {
            Some((ret, len)) => {
                self.rec.log("episode/return", &rerun::Scalars::single(ret))?;
                format!("**Dataset episode {}**: {len} steps, return {}.", episode + 1, thousands(ret, 1))
            }
            // Completed with the evaluation's result when it arrives (`evaluated_episode`).
            None => format!("**Evaluation episode** after {} gradient steps.", thousands(grad_step as f64, 0)),
        };
        self.rec
            .log("episode/title", &rerun::TextDocument::new(title).with_media_type(rerun::MediaType::markdown()))?;
        self.episode = (timeline == "eval_step").then(|| Episode {
            start: eval_step,
            poses: Vec::new(),
            trails: Trails::default(),
            rewards: Vec::new(),
            actions: Vec::new(),
            values: Vec::new(),
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn episode_step(
        &mut self,
        timeline: &'static str,
        eval_step: u64,
        episode_step: u64,
        poses: &[Pose],
        obs: &[f32],
        action: &[f32],
        reward: f64,
        values: &[(String, f64)],
        markers: &[Marker],
    ) -> Result<()> {
        if !self.action_names_sent && !action.is_empty() {
            self.action_names_sent = true;
            let names: Vec<String> = (0..action.len()).map(|i| format!("a{i}")).collect();
            self.rec.log_static("episode/action", &rerun::SeriesLines::new().with_names(names))?;
        }
        if !self.obs_names_sent && !obs.is_empty() {
            self.obs_names_sent = true;
            let names: Vec<String> = (0..obs.len()).map(|i| format!("o{i}")).collect();
            self.rec.log_static("episode/observation", &rerun::SeriesLines::new().with_names(names))?;
        }
        self.rec.reset_time();
        self.rec.set_time_sequence(timeline, eval_step as i64);
        self.rec.set_time_sequence("episode_step", episode_step as i64);
        // Body 0 is MuJoCo's world body: it never moves, so it gets no transform.
        for (body, pose) in poses.iter().enumerate().skip(1) {
            self.rec.log(self.body_path(body), &transform(pose))?;
        }
        self.follow(poses)?;
        if !obs.is_empty() {
            self.rec.log("episode/observation", &rerun::Scalars::new(obs.iter().map(|o| *o as f64)))?;
        }
        if !action.is_empty() {
            self.rec.log("episode/action", &rerun::Scalars::new(action.iter().map(|a| *a as f64)))?;
            self.rec.log("episode/reward", &rerun::Scalars::single(reward))?;
        }
        for (k, v) in values {
            self.rec.log(format!("episode/{k}"), &rerun::Scalars::single(*v))?;
        }
        log_markers(&self.rec, markers)?;
        if let Some(ep) = self.episode.as_mut() {
            ep.trails.push(markers);
            if episode_step % PATH_EVERY == 0 {
                ep.trails.log(&self.rec)?;
            }
            ep.poses = poses.to_vec();
            if !action.is_empty() {
                ep.rewards.push(reward);
                ep.actions.push(action.to_vec());
            }
            for (k, v) in values {
                match ep.values.iter_mut().find(|(n, _)| n == k) {
                    Some((_, column)) => column.push(*v as f32),
                    None => ep.values.push((k.clone(), vec![*v as f32])),
                }
            }
        }
        Ok(())
    }

    /// Points `(x_i, y_i)` at `path`, on the training timelines of the record they belong to.
    fn scatter(&mut self, grad_step: u64, env_step: u64, path: &str, x: &[f32], y: &[f32]) -> Result<()> {
        self.set_training_time(grad_step, env_step, self.last_time.map_or(0.0, |t| t.2));
        let points: Vec<[f32; 2]> = x.iter().zip(y).map(|(a, b)| [*a, *b]).collect();
        self.rec.log(path, &rerun::Points2D::new(points).with_radii([0.02]))?;
        Ok(())
    }
}

/// The entity of metric `key` in a record; `without_updates`: the record's window made no
/// gradient update (its `perf/update_s` is 0).
///
/// Such a window (random steps, the frozen warm-up, env steps before the replay holds a batch)
/// only steps the env, about 50 times faster than a step with updates: drawn on
/// `perf/steps_per_s`, its rate alone set that plot's scale and the run's steady rate read as
/// zero. It goes to [`STEPS_WITHOUT_UPDATES`] instead, a plot of its own; `metrics.jsonl` keeps
/// every rate under its one key.
fn rerun_path(key: &str, without_updates: bool) -> &str {
    if without_updates && key == "perf/steps_per_s" {
        STEPS_WITHOUT_UPDATES
    } else {
        key
    }
}

/// A body's world pose as a Rerun transform.
fn transform(pose: &Pose) -> rerun::Transform3D {
    rerun::Transform3D::from_translation_rotation(
        pose.pos.map(|x| x as f32),
        rerun::Quaternion::from_xyzw(super::shapes::xyzw_from_wxyz(pose.quat_wxyz)),
    )
}

/// Open a recording that saves to `path`, with an application id shared by all o2o recordings
/// and `recording_id`, so files of one run (a resumed run writes a second file) merge in the
/// viewer, and `layout` as its default, active blueprint.
pub fn save_stream(
    path: &std::path::Path,
    recording_id: &str,
    layout: &super::layout::Layout,
) -> Result<RecordingStream> {
    let rec = rerun::RecordingStreamBuilder::new("o2o")
        .recording_id(recording_id.to_string())
        .recording_name(recording_id.to_string())
        .default_enabled(true)
        .save(path)
        .with_context(|| format!("cannot create the Rerun recording {}", path.display()))?;
    layout.send(&rec).context("cannot send the viewer layout")?;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::super::inspect::{chunks, rrd, Chunk};
    use super::super::shapes::{Geom, GeomKind};
    use super::*;

    fn test_layout() -> crate::logging::layout::Layout {
        crate::logging::layout::dataset_layout(None, false)
    }

    fn two_body_geometry() -> ModelGeometry {
        let geom = |kind, body, size: [f64; 3]| Geom {
            kind,
            size,
            rgba: [0.8, 0.6, 0.4, 1.0],
            body,
            pos: [0.0; 3],
            quat_wxyz: [1.0, 0.0, 0.0, 0.0],
        };
        ModelGeometry {
            body_names: vec!["world".into(), "torso".into(), "front foot".into()],
            geoms: vec![
                geom(GeomKind::Plane, 0, [0.0, 0.0, 1.0]),
                geom(GeomKind::Capsule, 1, [0.05, 0.5, 0.0]),
                geom(GeomKind::Box, 2, [0.1, 0.1, 0.1]),
            ],
        }
    }

    #[test]
    fn recording_has_metric_and_episode_entities_on_all_timelines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recording.rrd");
        let mut sink =
            RerunSink::new(save_stream(&path, "test-run", &test_layout()).unwrap(), 1024, FILE_FLUSH_TIMEOUT).unwrap();
        let mut episodes = sink.episode_logger().unwrap();
        for i in 0..5u64 {
            let values = [("train/critic_loss", 1.0 / (i + 1) as f64), ("eval/normalized_score", 10.0 * i as f64)];
            sink.record(&Record { grad_step: 100 * i, env_step: 10 * i, wall_s: 0.5 * i as f64, values: &values })
                .unwrap();
        }
        episodes.set_geometry(two_body_geometry());
        sink.record(&Record { grad_step: 400, env_step: 40, wall_s: 3.0, values: &[] }).unwrap();
        episodes.begin_episode(None);
        for t in 0..10 {
            let z = 0.1 * t as f64;
            let poses = [Pose { pos: [0.0; 3], quat_wxyz: [1.0, 0.0, 0.0, 0.0] }; 3].map(|mut p| {
                p.pos[2] = z;
                p
            });
            episodes.step(&poses, &[0.1, -0.2], 1.0);
        }
        drop(episodes);
        assert_eq!(sink.finish(), 0);
        let chunks = chunks(&rrd("print", &path).unwrap());
        let timelines = |entity: &str| -> (usize, Vec<String>) {
            let mine: Vec<&Chunk> = chunks.iter().filter(|c| c.entity == entity).collect();
            assert!(
                !mine.is_empty(),
                "entity {entity} missing from `rerun rrd print`; found {:?}",
                chunks.iter().map(|c| &c.entity).collect::<Vec<_>>()
            );
            let mut t: Vec<String> =
                mine.iter().flat_map(|c| c.timelines.iter().cloned()).filter(|t| t != "log_time").collect();
            t.sort();
            t.dedup();
            (mine.iter().map(|c| c.rows).sum(), t)
        };
        let scalar_timelines = vec!["env_step".to_string(), "grad_step".into(), "wall_time".into()];
        let episode_timelines = vec!["episode_step".to_string(), "eval_step".into()];
        assert_eq!(timelines("/train/critic_loss"), (5, scalar_timelines.clone()));
        assert_eq!(timelines("/eval/normalized_score"), (5, scalar_timelines));
        // No evaluation result followed the episode: its poses are on the episode timelines only.
        assert_eq!(timelines("/episode/world/torso"), (10, episode_timelines.clone()));
        assert_eq!(timelines("/episode/world/front_foot"), (10, episode_timelines.clone()));
        assert_eq!(timelines("/episode/reward"), (10, episode_timelines.clone()));
        assert_eq!(timelines("/episode/action").1, episode_timelines.clone()); // plus its static series names
                                                                               // Geometry is static: one row, no timeline.
        for geom in ["/episode/world/torso/geom1", "/episode/world/front_foot/geom2"] {
            assert_eq!(timelines(geom), (1, vec![]), "{geom}");
        }
        // The floor too, and the follow frame moves it with every pose (as it moves the scene).
        assert_eq!(timelines("/episode/world/world/geom0"), (11, episode_timelines.clone()));
        assert_eq!(timelines("/episode/world"), (10, episode_timelines));
        assert_eq!(
            timelines("/perf/rerun_dropped"),
            (1, vec!["env_step".to_string(), "grad_step".into(), "wall_time".into()])
        );
        let stats = rrd("stats", &path).unwrap();
        assert!(!stats.trim().is_empty());
    }

    /// Issue 47 item 10: a body that ran 60 m is in the camera's view at the viewer's opening
    /// cursor (the end of `run_step`, where the last evaluation's result logs its last poses),
    /// with the floor under it; a rate without updates is drawn apart from the training rate.
    #[test]
    fn the_body_stays_in_view_and_on_the_floor_however_far_it_runs() {
        use super::super::inspect::{last_time, latest_at, numbers, rrd_cells, tables};
        use super::super::layout::{camera_for, RunKind};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recording.rrd");
        let plan = RunPlan { kind: RunKind::Online, offline_steps: 0, marks: Vec::new() };
        let mut sink = RerunSink::new(save_stream(&path, "far", &test_layout()).unwrap(), 4096, FILE_FLUSH_TIMEOUT)
            .unwrap()
            .with_plan(plan);
        let mut geometry = two_body_geometry();
        geometry.geoms[0].size = [40.0, 40.0, 1.0]; // halfcheetah's floor: 80 m across
        let pose = |x: f64, z: f64| Pose { pos: [x, 0.0, z], quat_wxyz: [1.0, 0.0, 0.0, 0.0] };
        let at = |x: f64| vec![pose(0.0, 0.0), pose(x, 0.7), pose(x + 0.5, 0.3)];
        let camera = camera_for(&geometry, &at(0.0)).unwrap();
        let mut episodes = sink.episode_logger().unwrap();
        episodes.set_geometry(geometry);
        let rate = |sps: f64, update_s: f64| [("perf/steps_per_s", sps), ("perf/update_s", update_s)];
        sink.record(&Record { grad_step: 0, env_step: 500, wall_s: 0.1, values: &rate(9000.0, 0.0) }).unwrap();
        sink.record(&Record { grad_step: 500, env_step: 1000, wall_s: 2.6, values: &rate(200.0, 2.1) }).unwrap();
        episodes.begin_episode(None);
        episodes.step(&at(0.0), &[], 0.0);
        for t in 1..=100 {
            episodes.step(&at(0.6 * t as f64), &[0.1], 1.0);
        }
        let result = [("eval/return", 100.0)];
        sink.record(&Record { grad_step: 500, env_step: 1000, wall_s: 3.0, values: &result }).unwrap();
        drop(episodes);
        assert_eq!(sink.finish(), 0);

        let t = tables(&rrd_cells(&path).unwrap());
        let cursor = last_time(&t, RUN_STEP).unwrap();
        assert_eq!(cursor, 1000);
        let translation = |entity: &str| -> [f64; 3] {
            let cell = latest_at(&t, entity, "Transform3D:translation", RUN_STEP, cursor)
                .unwrap_or_else(|| panic!("{entity} has no transform at run_step {cursor}"));
            let v = numbers(cell);
            [v[0], v[1], v[2]]
        };
        let shift = translation("/episode/world");
        for body in ["/episode/world/torso", "/episode/world/front_foot"] {
            let p = translation(body);
            assert!(p[0] > 59.0, "{body} keeps its world pose: {p:?}");
            let seen = [p[0] + shift[0], p[1] + shift[1], p[2] + shift[2]];
            assert!(camera.sees(seen), "{body} at {seen:?} is out of the view of {camera:?}");
        }
        // The floor (checker period 2 m) is moved by whole periods to stay under the body.
        let floor = translation("/episode/world/world/geom0");
        let under = floor[0] + shift[0];
        assert!(under.abs() <= 1.0 + 1e-4 && (floor[0] / 2.0).fract().abs() < 1e-4, "floor at {floor:?}, {shift:?}");
        // The warm-up's rate is not on the training rate's plot.
        let sps = |e: &str| t.iter().filter(|c| c.entity == e).flat_map(|c| c.rows.iter()).count();
        assert_eq!((sps("/perf/steps_per_s"), sps("/perf/steps_per_s_without_updates")), (1, 1));
    }

    /// Streaming to an address where no viewer listens: logging calls return, and so does the
    /// end of the run (after the stream flush timeout), instead of hanging on the connection.
    #[test]
    fn a_missing_viewer_neither_blocks_logging_nor_the_end_of_the_run() {
        let rec = rerun::RecordingStreamBuilder::new("o2o")
            .default_enabled(true)
            .connect_grpc_opts("rerun+http://127.0.0.1:1/proxy")
            .unwrap();
        let mut sink = RerunSink::new(rec, 64, Duration::from_secs(1)).unwrap();
        let values = [("train/critic_loss", 1.0)];
        for i in 0..10 {
            sink.record(&Record { grad_step: i, env_step: 0, wall_s: 0.0, values: &values }).unwrap();
        }
        assert_eq!(sink.finish(), 0); // returns: the test would hang otherwise
    }

    #[test]
    fn stalled_rerun_thread_drops_records_and_never_blocks_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recording.rrd");
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let stall: Box<dyn FnOnce() + Send> = Box::new(move || {
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        let capacity = 8;
        let mut sink = RerunSink::spawn(
            save_stream(&path, "stalled", &test_layout()).unwrap(),
            capacity,
            FILE_FLUSH_TIMEOUT,
            Some(stall),
        )
        .unwrap();
        let values = [("train/actor_loss", 0.5)];
        let rec = |i: u64| Record { grad_step: i, env_step: 0, wall_s: 0.0, values: &values };
        sink.record(&rec(0)).unwrap();
        held_rx.recv().unwrap(); // the worker holds message 0 and is stuck
        for i in 1..1000 {
            sink.record(&rec(i)).unwrap(); // each call returns although nothing is consumed
        }
        let stats = sink.stats();
        assert_eq!(stats.accepted(), 1 + capacity as u64);
        assert_eq!(stats.dropped(), 999 - capacity as u64);
        release_tx.send(()).unwrap();
        assert_eq!(sink.finish(), 999 - capacity as u64);
        // The accepted records reached the file: the one held while stalled and the 8 queued.
        let rows: usize = chunks(&rrd("print", &path).unwrap())
            .iter()
            .filter(|c| c.entity == "/train/actor_loss")
            .map(|c| c.rows)
            .sum();
        assert_eq!(rows, 1 + capacity);
    }
}
