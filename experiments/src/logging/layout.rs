//! The viewer layouts (Rerun blueprints) sent with o2o recordings, chosen by the kind of run, so
//! a recording opens on the run's story instead of one panel per metric key.
//!
//! A layout is plain data first ([`Layout`]: panels with a title, a kind and the entity paths
//! they show), turned into a Rerun blueprint only when it is sent. That keeps the choice of
//! panels testable without a viewer: the tests check that every entity a panel names is in the
//! recording. The kinds of run today:
//!
//! - **offline → online** (WSRL, Cal-QL, IQL fine-tuning, any run with offline steps or a parent
//!   and then env steps): evaluation return and normalized score across the phases with the
//!   phase ends marked, the recalibration panels (Q on online and offline batches against their
//!   Monte-Carlo returns, and `q − mc`), critic and actor losses in plots of their own,
//!   temperature and entropy, steps per second and dropped records;
//! - **online only** and **offline only**: the same without what does not apply (no phase
//!   marks without a phase change, no online recalibration without online data);
//! - **`o2o dataset view`**: the replayed body, the episodes' returns, actions and rewards.
//!
//! Which metric panels a run gets follows the keys its agent declares it logs
//! ([`o2o_agents::AgentConfig::metric_keys`]: a loss panel per declared loss, the temperature
//! panel where `alpha` is logged, the recalibration panels where the diagnostics give
//! `q_minus_mc`, the β panels where `beta_mean` is logged), never the algorithm's name, so a new
//! algorithm gets its panels by declaring its keys.
//!
//! Kinds still to come (robot runs: commands before and after the safety layer, interventions,
//! loop timing; fleet learners: actors and throughput; shaped runs: potential and shaped reward;
//! FamO2O: the chosen β) add a [`RunKind`] and their panels here.
//!
//! The x axis of every curve is the `run_step` timeline: loop steps, i.e. offline gradient steps
//! and then env steps, so one axis holds all phases (on `env_step` the whole offline phase sits
//! at 0; on `grad_step` a warm-up without updates has no width).
//!
//! What the Rust SDK (0.36) cannot say, and what is used instead:
//! - *vertical lines at the phase ends*: time series have no markers across the plot; the
//!   evaluations at the phase ends are drawn as large labelled points instead (`phases/…`);
//! - *a 3D camera*: `Spatial3DView` has no camera setter; the view's `EyeControls3D` (target,
//!   position, tracked entity) and `LineGrid3D` properties are logged into the blueprint store
//!   next to the SDK's own blueprint messages ([`Layout::send`]). The web viewer does not apply
//!   the tracked entity at the opening cursor, so the camera is fixed in the view's frame
//!   ([`SCENE_ORIGIN`]) and the recording's follow frame ([`SCENE`]) keeps the body before it;
//! - *a y range from the data*: a blueprint range is fixed before the run; the steps per second
//!   of windows without updates, which would set the scale, get a plot of their own
//!   ([`STEPS_WITHOUT_UPDATES`]);
//! - *where the time cursor starts*: the time panel takes no cursor position; it opens
//!   *following*, which puts the cursor at the end of the data (the end of the run);
//! - *a per-view timeline*: every view follows the one time cursor, so the curves (on
//!   `run_step`) and the moving body (on `eval_step`) cannot play at once; on `run_step` the 3D
//!   view shows each evaluation's body as that evaluation left it, with its title, rewards and
//!   actions; select `eval_step` and press play to watch the episodes move.
//!
//! They are *default* blueprints: a layout the user rearranged in the viewer is kept, and
//! *Reset to default blueprint* brings this one back. Recordings made before these layouts keep
//! the layout they were written with.

use super::shapes::{entity_name, rotate, GeomKind, ModelGeometry, Pose};
use crate::run::config::RunConfig;
use crate::run::phases::{self, PhaseKind};
use anyhow::Result;
use rerun::blueprint::components::{PanelState, PlayState};
use rerun::blueprint::{
    BarChartView, Blueprint, BlueprintActivation, BlueprintPanel, ContainerLike, Horizontal, SelectionPanel,
    Spatial2DView, Spatial3DView, TextDocumentView, TimePanel, TimeSeriesView, Vertical,
};
use rerun::external::re_log_types::{BlueprintActivationCommand, LogMsg};
use rerun::external::re_sdk_types::blueprint::archetypes::{EyeControls3D, LineGrid3D, TimeAxis};
use rerun::external::re_sdk_types::blueprint::components::{Eye3DKind, LinkAxis};
use rerun::external::re_sdk_types::datatypes::{TimeInt, TimeRange, TimeRangeBoundary};

/// The training timeline of the run layouts: loop steps (offline gradient steps, then env steps).
pub const RUN_STEP: &str = "run_step";

/// The 3D views' origin: the parent of the follow frame [`SCENE`].
pub const SCENE_ORIGIN: &str = "episode";
/// The scene: every body, the world's geoms, the markers and paths. Its transform is the follow
/// frame: the root body's horizontal position taken away (`rerun_sink.rs`), so a camera fixed in
/// [`SCENE_ORIGIN`] keeps the body in view however far it runs.
pub const SCENE: &str = "episode/world";

/// Where the recording draws the steps per second of windows without a gradient update (random
/// steps, warm-up), which are about 50 times the training rate and would set the scale of the
/// "steps per second" plot if drawn there.
pub const STEPS_WITHOUT_UPDATES: &str = "perf/steps_per_s_without_updates";

/// What a panel draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelKind {
    /// Scalars against the selected timeline.
    TimeSeries,
    /// The bodies in 3D.
    Spatial3D,
    /// A text entry (which evaluation the body belongs to).
    Text,
    /// Bar charts (one evaluation episode's rewards or actions, step by step).
    BarChart,
    /// 2-D points (a scatter of one quantity against another, e.g. FamO2O's β(s) against Q).
    Scatter,
}

/// Where a 3D view looks: at `target`, from `position`, following the entity `tracking`.
#[derive(Debug, Clone, PartialEq)]
pub struct Camera {
    /// The entity the camera follows (the model's root body).
    pub tracking: String,
    /// The point looked at, in world coordinates (the root body at reset).
    pub target: [f32; 3],
    /// The eye, in world coordinates: beside the target at a distance from the model's extent.
    pub position: [f32; 3],
}

impl Camera {
    /// Half the angle of the cone around the line of sight that counts as in view: inside the
    /// viewer's default field of view (55° high, wider across a landscape panel), with a margin.
    pub const HALF_VIEW_DEG: f64 = 25.0;

    /// Whether `point` (in the 3D views' frame, [`SCENE_ORIGIN`]) is in front of the camera and
    /// within [`Camera::HALF_VIEW_DEG`] of its line of sight.
    pub fn sees(&self, point: [f64; 3]) -> bool {
        let eye = self.position.map(f64::from);
        let axis: Vec<f64> = (0..3).map(|i| self.target[i] as f64 - eye[i]).collect();
        let to: Vec<f64> = (0..3).map(|i| point[i] - eye[i]).collect();
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cos = axis.iter().zip(&to).map(|(a, b)| a * b).sum::<f64>() / (norm(&axis) * norm(&to)).max(1e-12);
        cos >= Self::HALF_VIEW_DEG.to_radians().cos()
    }
}

/// One panel: its title, what it draws and the entities it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The title shown on the panel, in words a user reads.
    pub title: String,
    /// What it draws.
    pub kind: PanelKind,
    /// The entity paths it shows (each one logged by the recording it is sent with).
    pub entities: Vec<String>,
    /// The 3D camera, for a [`PanelKind::Spatial3D`] panel.
    pub camera: Option<Camera>,
}

impl Panel {
    fn new(title: &str, kind: PanelKind, entities: &[&str]) -> Self {
        Self { title: title.into(), kind, entities: entities.iter().map(|e| e.to_string()).collect(), camera: None }
    }

    fn series(title: &str, entities: &[&str]) -> Node {
        Node::Panel(Self::new(title, PanelKind::TimeSeries, entities))
    }
}

/// A layout tree: panels in rows and columns, with relative sizes.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// One panel.
    Panel(Panel),
    /// Children side by side, with their width shares.
    Row(Vec<Node>, Vec<f32>),
    /// Children one above the other, with their height shares.
    Column(Vec<Node>, Vec<f32>),
}

impl Node {
    fn row(nodes: Vec<Node>) -> Self {
        let n = nodes.len();
        Node::Row(nodes, vec![1.0; n])
    }

    fn column(nodes: Vec<Node>) -> Self {
        let n = nodes.len();
        Node::Column(nodes, vec![1.0; n])
    }

    fn panels<'a>(&'a self, out: &mut Vec<&'a Panel>) {
        match self {
            Node::Panel(p) => out.push(p),
            Node::Row(c, _) | Node::Column(c, _) => c.iter().for_each(|n| n.panels(out)),
        }
    }
}

/// A whole viewer layout: the panels, the timeline selected and whether it plays.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The panels.
    pub root: Node,
    /// The timeline the time panel opens on.
    pub timeline: &'static str,
    /// Play the timeline (a replay) instead of following the end of the data (a run).
    pub play: bool,
    /// The x range of every time series, on `timeline` (a run: all its loop steps), so the
    /// curves open on the whole run; `None`: the viewer's default.
    pub x_range: Option<(i64, i64)>,
}

/// The kind of a run, which decides its panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Offline training (or an offline parent), then env steps.
    OfflineToOnline,
    /// Env steps only.
    Online,
    /// Offline gradient steps only.
    Offline,
}

impl RunKind {
    /// The kind of the run `config` describes.
    pub fn of(config: &RunConfig) -> Self {
        let t = &config.train;
        let offline = t.offline_steps > 0 || config.parent.is_some();
        let online = t.random_steps + t.warmup_steps + t.online_steps > 0;
        match (offline, online) {
            (true, true) => RunKind::OfflineToOnline,
            (true, false) => RunKind::Offline,
            (false, _) => RunKind::Online,
        }
    }
}

/// A marked evaluation: the one at the end of a phase, or the starting point of a fine-tuning run.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseMark {
    /// The loop step (`run_step`) of the evaluation.
    pub run_step: u64,
    /// The entity name under `phases/`: `offline_end`, `warmup_end`, `random_end`, `start`.
    pub name: &'static str,
    /// Its legend label.
    pub label: &'static str,
}

/// What the Rerun sink of a run needs to know about the run: its kind, how to turn
/// `(grad_step, env_step)` into `run_step`, and which evaluations mark a phase end.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    /// The kind of run.
    pub kind: RunKind,
    /// The run's offline gradient steps: `run_step = env_step + min(grad_step, offline_steps)`.
    pub offline_steps: u64,
    /// The marked evaluations.
    pub marks: Vec<PhaseMark>,
}

impl RunPlan {
    /// The plan of the run `config` describes.
    pub fn of(config: &RunConfig) -> Self {
        let plan = phases::plan(&config.train);
        let mut marks = Vec::new();
        if config.parent.is_some() && config.eval.at_start {
            marks.push(PhaseMark { run_step: 0, name: "start", label: "start (the parent's agent)" });
        }
        if config.eval.at_phase_end {
            let mut at = 0;
            // The last phase ends with the run: its evaluation is the final one, not a boundary.
            for p in plan.iter().take(plan.len().saturating_sub(1)) {
                at += p.steps;
                let (name, label) = match p.kind {
                    PhaseKind::Offline => ("offline_end", "end of offline training"),
                    PhaseKind::Random => ("random_end", "end of random exploration"),
                    PhaseKind::Warmup => ("warmup_end", "end of warm-up"),
                    PhaseKind::Online => continue,
                };
                marks.push(PhaseMark { run_step: at, name, label });
            }
        }
        Self { kind: RunKind::of(config), offline_steps: config.train.offline_steps, marks }
    }

    /// The loop step of a record made after `grad_step` updates and `env_step` env steps.
    pub fn run_step(&self, grad_step: u64, env_step: u64) -> u64 {
        env_step + grad_step.min(self.offline_steps)
    }
}

/// Whether a whole `log_every` window of the run lies in its random and warm-up steps, which
/// make no update: then the sink draws at least one rate on [`STEPS_WITHOUT_UPDATES`], and the
/// layout gives it a plot. (Windows are counted in loop steps from 0, as the runner logs them.)
fn logs_a_rate_without_updates(t: &crate::run::config::TrainConfig) -> bool {
    let every = t.log_every.max(1);
    let (start, end) = (t.offline_steps, t.offline_steps + t.random_steps + t.warmup_steps);
    start.div_ceil(every) * every + every <= end
}

/// The 3D framing of a model: the root body's entity and a camera on it.
pub fn camera_for(geometry: &ModelGeometry, poses_at_reset: &[Pose]) -> Option<Camera> {
    // Body 0 is MuJoCo's world; bodies are numbered depth-first, so body 1 is the first body
    // on the world: the root of the model (a locomotion task's torso).
    let root = 1;
    let name = geometry.body_names.get(root)?;
    let root_pos = poses_at_reset.get(root)?.pos;
    // The model's extent: the farthest geom surface from the root at reset.
    let mut extent: f64 = 0.1;
    for g in geometry.geoms.iter().filter(|g| g.body != 0 && g.kind != GeomKind::Plane) {
        let Some(p) = poses_at_reset.get(g.body) else { continue };
        let off = rotate(p.quat_wxyz, g.pos);
        let centre = [p.pos[0] + off[0], p.pos[1] + off[1], p.pos[2] + off[2]];
        let r = match g.kind {
            GeomKind::Capsule | GeomKind::Cylinder => g.size[0] + g.size[1],
            _ => g.size.iter().cloned().fold(0.0, f64::max),
        };
        let d =
            ((centre[0] - root_pos[0]).powi(2) + (centre[1] - root_pos[1]).powi(2) + (centre[2] - root_pos[2]).powi(2))
                .sqrt();
        extent = extent.max(d + r);
    }
    // From the side (−y, the locomotion tasks move along +x) and a little above, far enough to
    // hold the whole model with room to move. In the views' frame the root body always stands
    // over the origin (the follow frame, `SCENE`), at its own height.
    let dir = [0.0, -1.0, 0.35];
    let norm = (dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]) as f64;
    let dist = (2.2 * extent).max(1.0) / norm.sqrt();
    let followed = [0.0, 0.0, root_pos[2]];
    let target = followed.map(|x| x as f32);
    let position = [0, 1, 2].map(|i| (followed[i] + dist * dir[i]) as f32);
    Some(Camera { tracking: format!("/{SCENE}/{}", entity_name(name, root)), target, position })
}

/// The 3D view of the bodies (floor included: the camera frames the body, not the scene), from
/// [`SCENE_ORIGIN`], so the follow frame's transform on [`SCENE`] moves what it shows.
fn body_panel(title: &str, camera: Camera) -> Node {
    let mut p = Panel::new(title, PanelKind::Spatial3D, &[&format!("/{SCENE}")]);
    p.camera = Some(camera);
    Node::Panel(p)
}

/// The layout of a run: `config` decides the kind and the panels; `camera` is the framing of
/// the evaluation env's model (`None`: no 3D evaluation episodes, e.g. a non-MuJoCo env);
/// `normalized` says whether the env has a normalized score.
pub fn run_layout(config: &RunConfig, camera: Option<Camera>, normalized: bool) -> Layout {
    let plan = RunPlan::of(config);
    // The panels follow the keys the agent declares it logs, never the algorithm's name.
    let keys = config.agent.metric_keys();
    let marks =
        |metric: &str| -> Vec<String> { plan.marks.iter().map(|k| format!("/phases/{}/{metric}", k.name)).collect() };
    let with_marks = |title: &str, metric: &str| {
        let mut e = vec![format!("/eval/{metric}")];
        e.extend(marks(metric));
        Node::Panel(Panel { title: title.into(), kind: PanelKind::TimeSeries, entities: e, camera: None })
    };

    let mut story = vec![with_marks("evaluation return", "return")];
    if normalized {
        story.push(with_marks("normalized score", "normalized_score"));
    }
    // Recalibration: Q against Monte-Carlo returns on online batches (once there are any) and on
    // dataset batches (when the run has a dataset).
    let diag = keys.diagnoses("q_minus_mc") && config.diagnostics.every > 0;
    let sources: Vec<&str> = [("online", plan.kind != RunKind::Offline), ("offline", config.dataset.is_some())]
        .into_iter()
        .filter_map(|(s, has)| (diag && has).then_some(s))
        .collect();
    if !sources.is_empty() {
        let q: Vec<String> =
            sources.iter().flat_map(|s| [format!("/diag/{s}/q"), format!("/diag/{s}/mc_return")]).collect();
        let gap: Vec<String> = sources.iter().map(|s| format!("/diag/{s}/q_minus_mc")).collect();
        let title = match plan.kind {
            RunKind::OfflineToOnline => "recalibration: Q against Monte-Carlo return",
            _ => "Q against Monte-Carlo return",
        };
        story.push(Node::row(vec![
            Node::Panel(Panel { title: title.into(), kind: PanelKind::TimeSeries, entities: q, camera: None }),
            Node::Panel(Panel {
                title: "Q − Monte-Carlo return".into(),
                kind: PanelKind::TimeSeries,
                entities: gap,
                camera: None,
            }),
        ]));
    }
    let losses = [
        ("critic loss", "critic_loss"),
        ("actor loss", "actor_loss"),
        ("policy loss", "policy_loss"),
        ("behaviour-cloning loss", "bc_loss"),
        ("value loss", "value_loss"),
    ];
    let mut training: Vec<Node> = losses
        .into_iter()
        .filter(|(_, key)| keys.updates(key))
        .map(|(title, key)| Panel::series(title, &[&format!("/train/{key}")]))
        .collect();
    if keys.updates("alpha") && keys.updates("entropy") {
        training.push(Panel::series("temperature α and policy entropy", &["/train/alpha", "/train/entropy"]));
    }
    if config.sera.enabled {
        training.push(Panel::series(
            "SERA: r_int mean and std, bonus share of the reward",
            &["/train/sera/r_int_mean", "/train/sera/r_int_std", "/train/sera/bonus_share"],
        ));
    }
    if !training.is_empty() {
        story.push(Node::row(training));
    }
    // FamO2O: the balance chosen over the batch, and β(s) against Q(s, a) and return-to-go at
    // the latest diagnostics (the scatters come from `Agent::diagnose_rows`).
    let family = keys.updates("beta_mean");
    if family {
        let mut beta = vec![Panel::series(
            "balance β(s) over the batch: mean, 10% and 90%",
            &["/train/beta_mean", "/train/beta_q10", "/train/beta_q90"],
        )];
        let diag_sources: Vec<&str> =
            [("online", plan.kind != RunKind::Offline), ("offline", config.dataset.is_some())]
                .into_iter()
                .filter_map(|(s, has)| (config.diagnostics.every > 0 && has).then_some(s))
                .collect();
        for (title, name) in [("β(s) against Q(s, a)", "beta_vs_q"), ("β(s) against return-to-go", "beta_vs_return")]
        {
            if !diag_sources.is_empty() {
                let e: Vec<String> = diag_sources.iter().map(|s| format!("/diag/{s}/{name}")).collect();
                beta.push(Node::Panel(Panel {
                    title: title.into(),
                    kind: PanelKind::Scatter,
                    entities: e,
                    camera: None,
                }));
            }
        }
        story.push(Node::row(beta));
    }
    let mut perf = vec![Panel::series("steps per second", &["/perf/steps_per_s"])];
    if logs_a_rate_without_updates(&config.train) {
        perf.push(Panel::series("steps/s, no updates", &[&format!("/{STEPS_WITHOUT_UPDATES}")]));
    }
    perf.push(Panel::series("dropped records", &["/perf/rerun_dropped"]));
    story.push(Node::row(perf));
    let n = story.len();
    let mut shares = vec![1.0; n];
    shares[0] = 1.3;
    let right = Node::Column(story, shares);

    let root = match camera {
        Some(camera) => {
            let mut panels = vec![
                Node::Panel(Panel::new("which evaluation", PanelKind::Text, &["/episode/title"])),
                body_panel("evaluation episode", camera),
                Node::Panel(Panel::new("its rewards, step by step", PanelKind::BarChart, &["/episode/last/reward"])),
                Node::Panel(Panel::new("its actions, step by step", PanelKind::BarChart, &["/episode/last/action"])),
            ];
            let mut shares = vec![0.5, 3.0, 1.0, 1.0];
            if family {
                panels.push(Node::Panel(Panel::new(
                    "the β it chose, step by step",
                    PanelKind::BarChart,
                    &["/episode/last/beta"],
                )));
                shares.push(1.0);
            }
            let left = Node::Column(panels, shares);
            Node::Row(vec![left, right], vec![1.0, 1.2])
        }
        None => right,
    };
    let total = phases::total_steps(&phases::plan(&config.train)) as i64;
    Layout { root, timeline: RUN_STEP, play: false, x_range: Some((0, total)) }
}

/// `o2o dataset view`: the replayed body (when the env's model is known), each episode's return,
/// and its actions and rewards, on `dataset_step`, playing.
pub fn dataset_layout(camera: Option<Camera>, observations: bool) -> Layout {
    let mut series = vec![
        Panel::series("episode return", &["/episode/return"]),
        Panel::series("actions", &["/episode/action"]),
        Panel::series("rewards", &["/episode/reward"]),
    ];
    if observations {
        series.push(Panel::series("observations", &["/episode/observation"]));
    }
    let right = Node::column(series);
    let root = match camera {
        Some(camera) => Node::Row(
            vec![
                Node::Column(
                    vec![
                        Node::Panel(Panel::new("which episode", PanelKind::Text, &["/episode/title"])),
                        body_panel("dataset episode", camera),
                    ],
                    vec![0.45, 3.0],
                ),
                right,
            ],
            vec![1.2, 1.0],
        ),
        None => right,
    };
    Layout { root, timeline: "dataset_step", play: true, x_range: None }
}

impl Layout {
    /// Every panel, depth-first.
    pub fn panels(&self) -> Vec<&Panel> {
        let mut out = Vec::new();
        self.root.panels(&mut out);
        out
    }

    /// Every entity path a panel names.
    pub fn entities(&self) -> Vec<String> {
        let mut e: Vec<String> = self.panels().iter().flat_map(|p| p.entities.iter().cloned()).collect();
        e.sort();
        e.dedup();
        e
    }

    /// The SDK's blueprint, and the 3D views' cameras and the time series views, by their
    /// blueprint paths.
    fn blueprint(&self) -> (Blueprint, Views) {
        let mut views = Views::default();
        let root = container(&self.root, &mut views);
        let time = TimePanel::new().with_timeline(self.timeline);
        let time = if self.play {
            time.with_play_state(PlayState::Playing).with_loop_mode(rerun::blueprint::components::LoopMode::All)
        } else {
            time.with_play_state(PlayState::Following)
        };
        let bp = Blueprint::new(root)
            .with_auto_views(false)
            .with_time_panel(time)
            .with_blueprint_panel(BlueprintPanel::from_state(PanelState::Collapsed))
            .with_selection_panel(SelectionPanel::from_state(PanelState::Collapsed));
        (bp, views)
    }

    /// Send the layout to `rec` as its default, active blueprint: the SDK's blueprint messages
    /// plus the 3D views' camera and grid properties (which the SDK's `Spatial3DView` cannot
    /// set), logged into the same blueprint store.
    pub fn send(&self, rec: &rerun::RecordingStream) -> Result<()> {
        let (bp, views) = self.blueprint();
        // The SDK's messages for the blueprint, captured in memory.
        let (mem, storage) = rerun::RecordingStreamBuilder::new("o2o").memory()?;
        bp.send(&mem, BlueprintActivation { make_active: true, make_default: true })?;
        let msgs = storage.take();
        let mut activation = None;
        let mut blueprint = Vec::new();
        for msg in msgs {
            match msg {
                LogMsg::BlueprintActivationCommand(cmd) => activation = Some(cmd),
                other => blueprint.push(other),
            }
        }
        let activation: BlueprintActivationCommand =
            activation.ok_or_else(|| anyhow::anyhow!("the Rerun SDK made no blueprint activation"))?;
        blueprint.retain(|m| *m.store_id() == activation.blueprint_id);
        // The properties, into the same blueprint store at the same blueprint time.
        if !views.cameras.is_empty() || (self.x_range.is_some() && !views.series.is_empty()) {
            let id = &activation.blueprint_id;
            let (extra, extra_storage) = rerun::RecordingStreamBuilder::new(id.application_id().clone())
                .recording_id(id.recording_id().clone())
                .blueprint()
                .memory()?;
            extra.set_time_sequence("blueprint", 0);
            if let Some((lo, hi)) = self.x_range {
                let range = TimeRange {
                    start: TimeRangeBoundary::Absolute(TimeInt(lo)),
                    end: TimeRangeBoundary::Absolute(TimeInt(hi)),
                };
                for path in &views.series {
                    // Not linked to the other plots: a linked axis ignores its own range.
                    extra.log(
                        format!("{path}/TimeAxis"),
                        &TimeAxis::new().with_link(LinkAxis::Independent).with_view_range(range.clone()),
                    )?;
                }
            }
            for (path, c) in &views.cameras {
                let eye = EyeControls3D::new()
                    .with_kind(Eye3DKind::Orbital)
                    .with_look_target(c.target)
                    .with_position(c.position)
                    .with_eye_up([0.0, 0.0, 1.0])
                    .with_tracking_entity(c.tracking.as_str());
                extra.log(format!("{path}/EyeControls3D"), &eye)?;
                // The drawn floor is the ground; the viewer's grid would fight with its surface.
                extra.log(format!("{path}/LineGrid3D"), &LineGrid3D::new().with_visible(false))?;
            }
            blueprint.extend(
                extra_storage
                    .take()
                    .into_iter()
                    .filter(|m| *m.store_id() == *id && !matches!(m, LogMsg::SetStoreInfo(_))),
            );
        }
        rec.send_blueprint(blueprint, activation);
        Ok(())
    }
}

/// The blueprint paths of the views that get properties the SDK cannot set.
#[derive(Default)]
struct Views {
    cameras: Vec<(String, Camera)>,
    series: Vec<String>,
}

fn container(node: &Node, views: &mut Views) -> ContainerLike {
    match node {
        Node::Panel(p) => {
            let contents = p.entities.iter().map(|e| {
                if p.kind == PanelKind::Spatial3D {
                    format!("+ {e}/**")
                } else {
                    format!("+ {e}")
                }
            });
            let view: ContainerLike = match p.kind {
                PanelKind::TimeSeries => TimeSeriesView::new(&p.title).with_contents(contents).into(),
                PanelKind::Text => TextDocumentView::new(&p.title).with_contents(contents).into(),
                PanelKind::BarChart => BarChartView::new(&p.title)
                    .with_contents(contents.chain(p.entities.iter().map(|e| format!("+ {e}/**"))))
                    .into(),
                PanelKind::Spatial3D => {
                    Spatial3DView::new(&p.title).with_origin(format!("/{SCENE_ORIGIN}")).with_contents(contents).into()
                }
                PanelKind::Scatter => Spatial2DView::new(&p.title).with_contents(contents).into(),
            };
            if let ContainerLike::View(v) = &view {
                if let Some(c) = &p.camera {
                    views.cameras.push((v.blueprint_path().to_string(), c.clone()));
                }
                if p.kind == PanelKind::TimeSeries {
                    views.series.push(v.blueprint_path().to_string());
                }
            }
            view
        }
        Node::Row(children, shares) => {
            Horizontal::new(children.iter().map(|c| container(c, views))).with_column_shares(shares.clone()).into()
        }
        Node::Column(children, shares) => {
            Vertical::new(children.iter().map(|c| container(c, views))).with_row_shares(shares.clone()).into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::scene::{body_poses, model_geometry};
    use o2o_envs::Env;

    fn config(toml: &str) -> RunConfig {
        RunConfig::from_toml_str(toml, "test").unwrap()
    }

    const WSRL: &str = r#"
        preset = "t"
        algo = "wsrl"
        env = "hopper-v2"
        [dataset]
        path = "x.hdf5"
        [train]
        offline_steps = 100
        warmup_steps = 50
        online_steps = 200
    "#;

    #[test]
    fn kinds_and_phase_marks_follow_the_config() {
        let c = config(WSRL);
        let plan = RunPlan::of(&c);
        assert_eq!(plan.kind, RunKind::OfflineToOnline);
        let marks: Vec<(u64, &str)> = plan.marks.iter().map(|m| (m.run_step, m.name)).collect();
        assert_eq!(marks, [(100, "offline_end"), (150, "warmup_end")]);
        assert_eq!(plan.run_step(37, 0), 37);
        assert_eq!(plan.run_step(100, 0), 100);
        assert_eq!(plan.run_step(160, 60), 160); // 60 env steps after the offline 100
        let online =
            config("preset = 't'\nalgo = 'sac'\nenv = 'Hopper-v5'\n[train]\nrandom_steps = 10\nonline_steps = 20\n");
        assert_eq!(RunKind::of(&online), RunKind::Online);
        assert_eq!(RunPlan::of(&online).marks.iter().map(|m| m.name).collect::<Vec<_>>(), ["random_end"]);
        let offline = config(
            "preset = 't'\nalgo = 'iql'\nenv = 'hopper-v2'\n[dataset]\npath = 'x'\n[train]\noffline_steps = 10\n",
        );
        assert_eq!(RunKind::of(&offline), RunKind::Offline);
        assert!(RunPlan::of(&offline).marks.is_empty());
    }

    #[test]
    fn each_kind_gets_only_the_panels_that_apply() {
        let titles = |l: &Layout| l.panels().iter().map(|p| p.title.clone()).collect::<Vec<_>>();
        let wsrl = run_layout(&config(WSRL), None, true);
        let e = wsrl.entities();
        for want in [
            "/eval/return",
            "/phases/offline_end/return",
            "/phases/warmup_end/normalized_score",
            "/diag/online/q_minus_mc",
            "/diag/offline/mc_return",
            "/train/alpha",
            "/perf/rerun_dropped",
        ] {
            assert!(e.iter().any(|x| x == want), "{want} missing from {e:?}");
        }
        assert!(titles(&wsrl).iter().any(|t| t.starts_with("recalibration")));
        let iql = run_layout(
            &config(
                "preset = 't'\nalgo = 'iql'\nenv = 'hopper-v2'\n[dataset]\npath = 'x'\n[train]\noffline_steps = 10\n",
            ),
            None,
            true,
        );
        let e = iql.entities();
        assert!(e.iter().all(|x| !x.starts_with("/phases") && !x.starts_with("/diag") && x != "/train/alpha"), "{e:?}");
        assert!(e.iter().any(|x| x == "/train/value_loss"));
        let sac = run_layout(
            &config("preset = 't'\nalgo = 'sac'\nenv = 'InvertedPendulum-v5'\n[train]\nonline_steps = 20\n"),
            None,
            false,
        );
        let e = sac.entities();
        assert!(e.iter().all(|x| !x.contains("normalized") && !x.starts_with("/diag/offline")), "{e:?}");
        assert!(e.iter().any(|x| x == "/diag/online/q"));
        // SERA's statistics when it is on; FamO2O's β over the batch and its two scatters.
        let sera = run_layout(&config(&format!("{WSRL}\n[sera]\nenabled = true\n")), None, true);
        assert!(sera.entities().iter().any(|x| x == "/train/sera/bonus_share"));
        assert!(wsrl.entities().iter().all(|x| !x.contains("sera") && !x.contains("beta")));
        let famo2o = run_layout(&config("preset = 't'\nalgo = 'famo2o-cql'\nenv = 'hopper-v2'\n[dataset]\npath = 'x'\n[train]\noffline_steps = 10\nonline_steps = 10\n"), None, true);
        let e = famo2o.entities();
        for want in ["/train/beta_mean", "/train/beta_q90", "/diag/online/beta_vs_q", "/diag/offline/beta_vs_return"] {
            assert!(e.iter().any(|x| x == want), "{want} missing from {e:?}");
        }
        assert_eq!(famo2o.panels().iter().filter(|p| p.kind == PanelKind::Scatter).count(), 2);
    }

    /// The training panels are the losses the agent declares it logs
    /// ([`o2o_agents::AgentConfig::metric_keys`]), whatever the algorithm is called: no critic
    /// or actor loss for BC or PPO, which log neither, and every panel's key a declared one.
    #[test]
    fn training_panels_follow_the_declared_keys() {
        let losses = |algo: &str, extra: &str| -> Vec<String> {
            let c = config(&format!(
                "preset = 't'\nalgo = '{algo}'\nenv = 'hopper-v2'\n[dataset]\npath = 'x'\n[train]\n{extra}\n"
            ));
            let keys = c.agent.metric_keys();
            let train: Vec<String> =
                run_layout(&c, None, true).entities().into_iter().filter(|e| e.starts_with("/train/")).collect();
            for e in &train {
                assert!(keys.updates(e.trim_start_matches("/train/")), "{algo}: {e} is not declared");
            }
            train
        };
        assert_eq!(losses("bc", "offline_steps = 10"), ["/train/bc_loss"]);
        assert_eq!(losses("ppo", "online_steps = 10"), ["/train/policy_loss", "/train/value_loss"]);
        // (`entities` are sorted.)
        let td3bc = losses("td3bc", "offline_steps = 10");
        assert_eq!(td3bc, ["/train/actor_loss", "/train/bc_loss", "/train/critic_loss"]);
        let wsrl = losses("wsrl", "offline_steps = 10\nonline_steps = 10");
        assert_eq!(wsrl, ["/train/actor_loss", "/train/alpha", "/train/critic_loss", "/train/entropy"]);
    }

    /// The rates of windows without updates get a plot of their own when a whole logging window
    /// lies in the random and warm-up steps (so the sink draws one there), and only then.
    #[test]
    fn steps_without_updates_get_a_plot_when_a_window_has_none() {
        let perf = |extra: &str| {
            let l = run_layout(&config(&format!("{WSRL}{extra}")), None, true);
            l.entities().iter().any(|e| e == "/perf/steps_per_s_without_updates")
        };
        // WSRL: offline 100, warm-up 50 (loop steps 100..150); logging every 1000 (the default),
        // 50, 40, 30.
        assert!(!perf(""));
        assert!(perf("log_every = 50\n"), "window 100..150 is the warm-up");
        assert!(!perf("log_every = 40\n"), "windows 80..120 and 120..160 straddle it");
        assert!(perf("log_every = 30\n"), "window 120..150 lies in it");
    }

    /// The camera follows the model's root body (Hopper's torso) and stands back by its size.
    #[test]
    fn the_camera_tracks_the_root_body() {
        let mut env = o2o_envs::make_unwrapped("hopper-v2").unwrap();
        env.reset(Some(0)).unwrap();
        let c = camera_for(&model_geometry(&env), &body_poses(&env)).unwrap();
        assert_eq!(c.tracking, "/episode/world/torso");
        assert!((c.target[2] - 1.25).abs() < 0.05, "{:?}", c.target);
        let d = (0..3).map(|i| (c.position[i] - c.target[i]).powi(2)).sum::<f32>().sqrt();
        assert!((2.0..8.0).contains(&d), "camera {d} m from the torso");
        let layout = run_layout(&config(WSRL), Some(c), true);
        let (_, views) = layout.blueprint();
        assert_eq!(views.cameras.len(), 1);
        assert!(views.cameras[0].0.starts_with("/view/"), "{}", views.cameras[0].0);
        assert_eq!(views.series.len(), layout.panels().iter().filter(|p| p.kind == PanelKind::TimeSeries).count());
    }
}
