//! `o2o dataset make-benchmark antmaze-<maze>`: small AntMaze datasets made the way D4RL made
//! its `antmaze-*-v2` files (`d4rl/locomotion/generate_dataset.py` and `maze_env.py` of
//! `d4rl==1.1`, read for these facts; formats.md §1.3 for the keys):
//!
//! 1. **A goal-reaching ant controller**, trained by o2o: SAC on `ant-goal-v0` (the AntMaze ant
//!    on an open floor walking to a target; reward = progress toward it, see
//!    `o2o_envs::mujoco::ant_goal`), or an existing run given with `--controller RUN_DIR`.
//!    D4RL used a goal-reaching SAC policy of its own that we do not have.
//! 2. **A waypoint planner** over the maze graph at every step (D4RL's
//!    `create_navigation_policy`): the ant's cell and the goal's cell by D4RL's half-cell-off
//!    rule ([`MazeMap::d4rl_rowcol`]), the next cell of a breadth-first shortest path
//!    ([`MazeMap::next_cell`]); the waypoint is that cell's centre + U(0, s/4) per axis (drawn
//!    anew each step), or the goal itself once the next cell is the goal's. The controller sees
//!    the waypoint's offset, its length capped at 6 m (the controller's training range; D4RL
//!    rescaled its offset to length 10, the range of its own policy).
//! 3. **Noisy actions**: the controller's sampled action + 0.2·N(0, 1), clipped to [−1, 1]
//!    (D4RL's `--noisy`, which every v2 file used).
//! 4. **Episodes** of `episode_steps` (1000) rows in the *generation* map (U_MAZE, BIG_MAZE,
//!    HARDEST_MAZE: the eval maps' walls), the goal fixed for the episode (reaching it does not
//!    end the episode, so the ant lingers there, as in D4RL's files). Starts: the reset cell for
//!    `umaze` (`multi_start False`), a uniformly drawn free cell + U(0, 1) m per axis for the
//!    others (`_get_reset_location`). Goals: `play`, and `umaze`, draw from the generation map's
//!    goal cells (a fixed goal set), `diverse` from every free cell, by D4RL's `goal_sampler`.
//! 5. **Keys** as D4RL's v2 files: `observations` (29 = qpos[..15] + qvel[..14]), `actions`,
//!    `rewards` = `terminals` = 1[‖xy' − goal‖ ≤ 0.5] of the state after the step (what D4RL's
//!    relabel script computes from the next row), `timeouts` on each episode's last row,
//!    `infos/goal`, `infos/qpos`, `infos/qvel` (the state before the step); no
//!    `next_observations`.
//!
//! `manifest.json` records the command, revision, seeds, the controller and how well it reaches
//! goals, and the data's own success statistics: how far the file is from D4RL's is measured,
//! not claimed.
//!
//! **Avoided cells** (`--avoid-cells`, not D4RL's; for data that under-covers the maze, e.g.
//! `--avoid-cells 3,1 3,2` on umaze leaves out the arm holding the eval goal): the cells count as
//! walls for the planner, so no waypoint leads into them; goals come from the generation map's goal
//! cells outside them, or, when none is left, from every free cell outside them (D4RL's
//! `goal_sampler` over those cells, as the diverse files); random starts (`multi_start`) too. An
//! episode whose ant strays into an avoided cell anyway (by the nearest-centre cell of its xy,
//! [`MazeMap::xy_to_cell`]) is **cut** there: the step that entered the cell is dropped, the row
//! before it becomes the episode's last (its timeout set), and a new episode starts. So no row's
//! state, and no state a row leads to inside its episode, lies in an avoided cell. The manifest's
//! `avoided` records the cells, this rule, how many episodes were cut and the cells the data does
//! cover.

use super::normal;
use crate::run::actor::derive_seed;
use crate::run::config::{self, RunConfig};
use crate::run::prepare::{build_agent, Hooks, Start};
use crate::run::rundir::{self, Provenance};
use crate::run::runner;
use crate::run::state::RunnerState;
use crate::run::{checkpoint, presets};
use anyhow::{bail, Context, Result};
use o2o_agents::Agent;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use o2o_envs::mujoco::ant_goal::{controller_obs, CONTROLLER_OBS_DIM, TARGET_DISTANCE};
use o2o_envs::mujoco::antmaze::{MazeMap, BIG_MAZE, HARDEST_MAZE, MAZE_SCALING, U_MAZE_TEST};
use o2o_envs::mujoco::{AntMaze, MujocoEnv};
use o2o_envs::Env;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tch::{Device, Tensor};

/// Value of the manifest's `format` field (not the locomotion manifest's: its fields differ).
pub const FORMAT: &str = "o2o-benchmark-antmaze/1";
/// The env the controller is trained and measured on.
pub const CONTROLLER_ENV: &str = "ant-goal-v0";
/// The controller's network width when o2o trains it (both layers, actor and critics).
pub const CONTROLLER_HIDDEN: usize = 64;
/// The ant's 8 hip and ankle motors.
const ANT_ACTIONS: usize = 8;

/// The six D4RL AntMaze datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maze {
    /// `antmaze-umaze-v2`.
    Umaze,
    /// `antmaze-umaze-diverse-v2`.
    UmazeDiverse,
    /// `antmaze-medium-play-v2`.
    MediumPlay,
    /// `antmaze-medium-diverse-v2`.
    MediumDiverse,
    /// `antmaze-large-play-v2`.
    LargePlay,
    /// `antmaze-large-diverse-v2`.
    LargeDiverse,
}

impl Maze {
    /// Every dataset, in D4RL's order.
    pub const ALL: [Maze; 6] =
        [Maze::Umaze, Maze::UmazeDiverse, Maze::MediumPlay, Maze::MediumDiverse, Maze::LargePlay, Maze::LargeDiverse];

    /// `umaze`, `umaze-diverse`, `medium-play`, …
    pub fn name(self) -> &'static str {
        match self {
            Maze::Umaze => "umaze",
            Maze::UmazeDiverse => "umaze-diverse",
            Maze::MediumPlay => "medium-play",
            Maze::MediumDiverse => "medium-diverse",
            Maze::LargePlay => "large-play",
            Maze::LargeDiverse => "large-diverse",
        }
    }

    /// The D4RL id the file stands in for, e.g. `antmaze-umaze-v2` (also its eval env).
    pub fn id(self) -> String {
        format!("antmaze-{}-v2", self.name())
    }

    /// The map D4RL's generator ran in (the eval map's walls; its goal cells for `play`).
    pub fn generation_map(self) -> MazeMap {
        match self {
            Maze::Umaze | Maze::UmazeDiverse => U_MAZE_TEST,
            Maze::MediumPlay | Maze::MediumDiverse => BIG_MAZE,
            Maze::LargePlay | Maze::LargeDiverse => HARDEST_MAZE,
        }
    }

    /// D4RL's `--multi_start`: every file but umaze's starts anywhere.
    pub fn multi_start(self) -> bool {
        self != Maze::Umaze
    }

    /// Goals from every free cell (`diverse`) rather than the map's goal cells.
    pub fn diverse_goals(self) -> bool {
        matches!(self, Maze::UmazeDiverse | Maze::MediumDiverse | Maze::LargeDiverse)
    }

    /// `antmaze-umaze` etc. → the dataset.
    pub fn parse(s: &str) -> Option<Maze> {
        Maze::ALL.into_iter().find(|m| s == format!("antmaze-{}", m.name()))
    }
}

/// Where the controller comes from.
#[derive(Debug, Clone)]
pub enum ControllerSource {
    /// A finished SAC run on `ant-goal-v0` (its `config.toml` and newest checkpoint).
    Run(PathBuf),
    /// Train one here: SAC env steps in total, the first `random_steps` uniformly random, then
    /// the `--set` overrides of its config.
    Train {
        /// SAC env steps in total.
        steps: u64,
        /// The first of them, with uniformly random actions.
        random_steps: u64,
        /// Env steps between evaluations.
        eval_every: u64,
        /// `--set key=value` overrides of its config.
        overrides: Vec<String>,
    },
}

/// Everything [`generate`] needs.
#[derive(Debug, Clone)]
pub struct AntMazeSpec {
    /// The dataset to make.
    pub maze: Maze,
    /// The folder the file and `manifest.json` go to.
    pub out: PathBuf,
    /// Seed of the collection and the controller's measurement (and of its training here).
    pub seed: u64,
    /// Rows of the file (the last episode is cut there).
    pub rows: usize,
    /// Rows per episode (D4RL: 1000).
    pub episode_steps: usize,
    /// σ of the Gaussian action noise (D4RL: 0.2).
    pub action_noise: f64,
    /// Episodes of `ant-goal-v0` the controller is measured on.
    pub controller_eval_episodes: usize,
    /// Where the controller comes from.
    pub controller: ControllerSource,
    /// Keep a trained controller's run as `<out>/controller-run/`.
    pub keep_run: bool,
    /// gzip level of the columns (`None`: uncompressed).
    pub gzip: Option<u8>,
    /// The device the controller acts (and trains) on.
    pub device: Device,
    /// Cells (row, column) of the generation map the data keeps out of (see the module docs);
    /// empty for D4RL's layout.
    pub avoid_cells: Vec<(usize, usize)>,
}

/// The manifest.
#[derive(Debug, Clone, Serialize)]
pub struct AntMazeManifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// The D4RL id the file stands in for.
    pub id: String,
    /// The env to evaluate agents trained on it in.
    pub env: String,
    /// The map the episodes ran in (D4RL's generation map).
    pub generation_map: String,
    /// Who made it, when, from which revision.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// Every seed used.
    pub seeds: AntMazeSeeds,
    /// The controller and how well it reaches targets.
    pub controller: ControllerRecord,
    /// How the rows were collected.
    pub collection: CollectionRecord,
    /// What the file holds.
    pub data: DataStats,
    /// The cells the data keeps out of (absent without `--avoid-cells`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avoided: Option<AvoidRecord>,
    /// The written file.
    pub file: FileEntry,
    /// How this file differs from D4RL's, in words.
    pub differences_from_d4rl: Vec<String>,
    /// Seconds the whole command took.
    pub wall_s: f64,
}

/// Seeds of each random source.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AntMazeSeeds {
    /// `--seed`.
    pub run: u64,
    /// The seed of the controller's SAC run, from that run's config (also for a loaded
    /// `--controller`, whose seed need not be `--seed`).
    pub controller: u64,
    /// Episode resets, starts, goals, waypoint noise and action noise of the collection.
    pub collection: u64,
    /// The controller's measurement on `ant-goal-v0`.
    pub controller_eval: u64,
}

/// The low-level controller and how well it reaches targets.
#[derive(Debug, Clone, Serialize)]
pub struct ControllerRecord {
    /// `trained here` or the run directory it was loaded from.
    pub source: String,
    /// The env it trained on (`ant-goal-v0`).
    pub env: String,
    /// Its algorithm (`sac`).
    pub algo: String,
    /// Hidden widths of its actor.
    pub actor_hidden: Vec<i64>,
    /// SAC env steps it trained for (from its checkpoint).
    pub env_steps: u64,
    /// Gradient steps it trained for (from its checkpoint).
    pub grad_steps: u64,
    /// `ant-goal-v0` episodes (targets 2–6 m away, 200 steps) with the collection's noisy
    /// actions, and the share that reached the target within 0.5 m.
    pub eval_episodes: usize,
    /// Share of those episodes that reached the target.
    pub goal_success_rate: f64,
    /// Mean steps to the target over the successful episodes (null when none).
    pub mean_steps_to_target: Option<f64>,
    /// Share of episodes that ended by falling (torso out of [0.2, 1.0]).
    pub fall_rate: f64,
}

/// How the rows were collected.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionRecord {
    /// Rows per episode.
    pub episode_steps: usize,
    /// σ of the Gaussian action noise.
    pub action_noise: f64,
    /// Where episodes start, in words.
    pub starts: String,
    /// Where goals are drawn from, in words.
    pub goals: String,
    /// How the waypoints are chosen, in words.
    pub waypoints: String,
}

/// What the file holds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DataStats {
    /// Rows of the file.
    pub rows: usize,
    /// Episodes with at least one row.
    pub episodes: usize,
    /// Share of episodes in which the ant came within 0.5 m of the goal at least once.
    pub success_rate: f64,
    /// Mean step of the first reward over those episodes (null when none).
    pub mean_first_success_step: Option<f64>,
    /// Share of rows with reward 1.
    pub reward_rate: f64,
    /// Mean over episodes of the closest the ant came to the goal, metres.
    pub mean_min_goal_distance: f64,
    /// Mean number of distinct cells the ant visited per episode.
    pub mean_cells_visited: f64,
}

/// What `--avoid-cells` did.
#[derive(Debug, Clone, Serialize)]
pub struct AvoidRecord {
    /// The avoided cells, [row, column] of the generation map.
    pub cells: Vec<[usize; 2]>,
    /// The rule, in words.
    pub rule: String,
    /// Episodes cut short because the ant entered an avoided cell (each lost that one step).
    pub cut_episodes: usize,
    /// Episodes whose first step entered an avoided cell, so no row was kept (not in `episodes`).
    pub empty_episodes: usize,
    /// The cells (nearest centre) of every row's state and of the state after it, [row, column].
    pub cells_covered: Vec<[usize; 2]>,
    /// The generation map's free cells, for comparison.
    pub free_cells: usize,
}

/// The written file.
#[derive(Debug, Clone, Serialize)]
pub struct FileEntry {
    /// The file's name inside the folder.
    pub file: String,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// gzip level of the columns, 0 = uncompressed.
    pub gzip: u8,
}

const STREAM_COLLECTION: u64 = 201;
const STREAM_CONTROLLER_EVAL: u64 = 202;

/// Make `<out>/<id>.hdf5` and `<out>/manifest.json`; returns the manifest.
pub fn generate(spec: &AntMazeSpec) -> Result<AntMazeManifest> {
    if spec.rows == 0 || spec.episode_steps == 0 || spec.controller_eval_episodes == 0 || !(spec.action_noise >= 0.0) {
        bail!(
            "antmaze sizes: expected positive transitions, episode steps and eval episodes and a non-negative noise; found {}, {}, {}, {}",
            spec.rows, spec.episode_steps, spec.controller_eval_episodes, spec.action_noise
        );
    }
    check_avoided(&spec.maze.generation_map(), &spec.avoid_cells)?;
    super::with_work_dir(&spec.out, spec.keep_run.then_some("controller-run"), |work| generate_in(spec, work))
}

/// What `o2o dataset make-benchmark antmaze-*` prints about the folder `out` it made: the file,
/// the controller's and the data's success, and with avoided cells a line on them.
pub fn summary(out: &Path, m: &AntMazeManifest) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let mut text = format!(
        "{}: {} ({} rows, {} episodes, {} bytes) in {:.0} s; controller ({}, {} env steps): target reached in {:.0}% of {} {CONTROLLER} episodes (mean {} steps), fell in {:.0}%; data: goal reached in {:.1}% of episodes (first at step {} on average), {:.2}% reward rows, closest approach {:.2} m on average",
        out.display(), m.file.file, m.data.rows, m.data.episodes, m.file.bytes, m.wall_s, m.controller.source, m.controller.env_steps,
        100.0 * m.controller.goal_success_rate, m.controller.eval_episodes, ms(m.controller.mean_steps_to_target), 100.0 * m.controller.fall_rate,
        100.0 * m.data.success_rate, ms(m.data.mean_first_success_step), 100.0 * m.data.reward_rate, m.data.mean_min_goal_distance,
        CONTROLLER = CONTROLLER_ENV,
    );
    if let Some(a) = &m.avoided {
        text.push_str(&format!(
            "\navoided cells {:?}: {} episodes cut there ({} left empty); the data covers {} of {} free cells: {:?}",
            a.cells,
            a.cut_episodes,
            a.empty_episodes,
            a.cells_covered.len(),
            a.free_cells,
            a.cells_covered
        ));
    }
    text
}

/// The avoided cells must be free cells of `map` other than the reset cell, and every other free
/// cell must stay reachable from the reset cell without crossing one.
pub fn check_avoided(map: &MazeMap, avoid: &[(usize, usize)]) -> Result<()> {
    let reset = map.reset_cell().context("the generation map has no reset cell")?;
    for &(r, c) in avoid {
        if map.cell(r, c) == b'1' || (r, c) == reset {
            bail!(
                "--avoid-cells: ({r}, {c}) is {} of {}; expected a free cell other than the reset cell {reset:?}",
                if map.cell(r, c) == b'1' { "a wall or outside" } else { "the reset cell" },
                map.name
            );
        }
    }
    for cell in map.free_cells().into_iter().filter(|c| !avoid.contains(c) && *c != reset) {
        if map.next_cell_avoiding(reset, cell, avoid).is_none() {
            bail!(
                "--avoid-cells: with {avoid:?} avoided, cell {cell:?} of {} cannot be reached from the reset cell",
                map.name
            );
        }
    }
    Ok(())
}

fn generate_in(spec: &AntMazeSpec, work: &Path) -> Result<AntMazeManifest> {
    let t0 = Instant::now();
    let id = spec.maze.id();
    let mut seeds = AntMazeSeeds {
        run: spec.seed,
        controller: spec.seed,
        collection: derive_seed(spec.seed, STREAM_COLLECTION, 0),
        controller_eval: derive_seed(spec.seed, STREAM_CONTROLLER_EVAL, 0),
    };
    tch::manual_seed(spec.seed as i64);

    // 1. The controller: loaded, or trained here.
    let (run_dir, source) = match &spec.controller {
        ControllerSource::Run(dir) => (dir.clone(), dir.display().to_string()),
        ControllerSource::Train { steps, random_steps, eval_every, overrides } => {
            let dir = work.join("controller-run");
            eprintln!("make-benchmark {id}: [1/3] SAC controller on {CONTROLLER_ENV}, {steps} env steps ({random_steps} random)");
            train_controller(&dir, spec.seed, *steps, *random_steps, *eval_every, overrides, spec.device)?;
            (dir, "trained here".to_string())
        }
    };
    let (config, mut agent, state) = load_controller(&run_dir, spec.device)?;
    seeds.controller = config.seed;
    let mut controller = Controller { agent: &mut *agent, device: spec.device, noise: spec.action_noise };

    // 2. How well it reaches targets on the open floor.
    eprintln!(
        "make-benchmark {id}: [2/3] measuring the controller on {CONTROLLER_ENV}, {} episodes",
        spec.controller_eval_episodes
    );
    let measured = measure_controller(&mut controller, spec.controller_eval_episodes, seeds.controller_eval)?;
    eprintln!(
        "  target reached in {:.0}% of episodes (fell in {:.0}%)",
        100.0 * measured.goal_success_rate,
        100.0 * measured.fall_rate
    );
    let controller_record = ControllerRecord {
        source,
        env: config.env.clone(),
        algo: config.algo.clone(),
        actor_hidden: actor_hidden(&config),
        env_steps: state.env_step,
        grad_steps: state.grad_step,
        ..measured
    };

    // 3. The maze episodes.
    eprintln!(
        "make-benchmark {id}: [3/3] {} rows in {} ({} steps per episode)",
        spec.rows,
        spec.maze.generation_map().name,
        spec.episode_steps
    );
    let (mut ds, data, avoided) = collect(spec, &mut controller, seeds.collection)?;
    let file = format!("{id}.hdf5");
    let path = spec.out.join(&file);
    ds.source = path.clone();
    ds.write_gzip(&path, spec.gzip).with_context(|| format!("writing {}", path.display()))?;
    let (sha256, bytes) = o2o_datasets::download::hash_file(&path)?;
    eprintln!(
        "  {file}: {} rows, {} episodes, goal reached in {:.0}% of episodes, {:.1}% reward rows, {bytes} bytes",
        data.rows,
        data.episodes,
        100.0 * data.success_rate,
        100.0 * data.reward_rate
    );

    let map = spec.maze.generation_map();
    let mut differences_from_d4rl = vec![
        "the controller is o2o's SAC policy trained on ant-goal-v0 (see controller), not D4RL's goal-reaching policy; its measured target success and the data's success rate above are how far it is".into(),
        format!("{} rows instead of D4RL's 1,000,000", spec.rows),
        "episodes have exactly episode_steps rows with the timeout on the last (D4RL's generator made 1001-row episodes); the rows of a goal reached stay in the episode, as in D4RL".into(),
        "the rewards/terminals are the env's sparse reward of the state after each step, also on an episode's last row (D4RL's relabel used the next row, which there is the next episode's first)".into(),
        "random draws come from ChaCha8 streams, not NumPy's".into(),
    ];
    if let Some(a) = &avoided {
        differences_from_d4rl.push(format!(
            "the data avoids cells {:?} of {} (see avoided): goals, starts and waypoints keep out of them and episodes that enter one are cut there ({} of {} episodes), so the file is not D4RL's {id} layout",
            a.cells, map.name, a.cut_episodes, data.episodes
        ));
    }
    let goals_text = if spec.avoid_cells.is_empty() {
        if spec.maze.diverse_goals() {
            "any free cell, by D4RL's goal_sampler (diverse)".into()
        } else {
            format!("the goal cells of {}, by D4RL's goal_sampler (a fixed goal set)", map.name)
        }
    } else {
        let cells = goal_choices(spec.maze, &spec.avoid_cells);
        format!("the cells {cells:?} of {} (its goal cells outside the avoided ones, or every free cell outside them when none is left), by D4RL's goal_sampler", map.name)
    };
    let starts_text = match (spec.maze.multi_start(), spec.avoid_cells.is_empty()) {
        (true, true) => "a uniformly drawn free cell + U(0, 1) m per axis, floored at 0 (D4RL's multi_start)".to_string(),
        (true, false) => "a uniformly drawn free cell outside the avoided ones + U(0, 1) m per axis, floored at 0 (D4RL's multi_start)".to_string(),
        (false, _) => "the reset cell r (D4RL's reset noise only)".to_string(),
    };
    let waypoints_text = if spec.avoid_cells.is_empty() {
        "every step: BFS next cell from D4RL's cell of the ant toward the goal's cell; its centre + U(0, 1) m per axis, or the goal in the goal's cell; the offset capped at 6 m".to_string()
    } else {
        "every step: BFS next cell (the avoided cells counted as walls) from D4RL's cell of the ant toward the goal's cell; its centre + U(0, 1) m per axis, or the goal in the goal's cell; the offset capped at 6 m".to_string()
    };
    let manifest = AntMazeManifest {
        format: FORMAT.to_string(),
        id: id.clone(),
        env: id.clone(),
        generation_map: map.name.to_string(),
        provenance: Provenance::now(),
        seeds,
        controller: controller_record,
        collection: CollectionRecord {
            episode_steps: spec.episode_steps,
            action_noise: spec.action_noise,
            starts: starts_text,
            goals: goals_text,
            waypoints: waypoints_text,
        },
        data,
        avoided,
        file: FileEntry { file, bytes, sha256, gzip: spec.gzip.unwrap_or(0) },
        differences_from_d4rl,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    rundir::write_json(&spec.out.join("manifest.json"), &manifest)?;
    Ok(manifest)
}

/// The controller's SAC config: `sac-ant` on `ant-goal-v0` with 64-unit networks, then the
/// user's overrides.
pub fn controller_config(
    seed: u64,
    steps: u64,
    random_steps: u64,
    eval_every: u64,
    overrides: &[String],
) -> Result<RunConfig> {
    if random_steps >= steps || eval_every == 0 {
        bail!("controller: expected sac-random-steps < sac-steps and a positive eval-every, found {random_steps}, {steps}, {eval_every}");
    }
    let (name, mut table) = presets::load("sac-ant")?;
    table.insert("preset".into(), toml::Value::String(name.clone()));
    let h = CONTROLLER_HIDDEN;
    let mut all = vec![
        format!("env={CONTROLLER_ENV:?}"),
        format!("seed={seed}"),
        format!("train.random_steps={random_steps}"),
        format!("train.online_steps={}", steps - random_steps),
        format!("train.replay_capacity={steps}"),
        format!("eval.every={eval_every}"),
        "eval.episodes=10".to_string(),
        "checkpoint.every=0".to_string(),
        "checkpoint.keep=1".to_string(),
        format!("agent.critic.hidden=[{h},{h}]"),
        format!("agent.actor.mlp.hidden=[{h},{h}]"),
    ];
    all.extend(overrides.iter().cloned());
    config::apply_overrides(&mut table, &all)?;
    let c = RunConfig::from_table(table, &format!("preset {name} for the AntMaze controller"))?;
    if c.algo != "sac" || c.env != CONTROLLER_ENV {
        bail!(
            "--set may tune the controller's SAC but not change `algo` or `env` (found algo {:?}, env {:?})",
            c.algo,
            c.env
        );
    }
    Ok(c)
}

fn train_controller(
    dir: &Path,
    seed: u64,
    steps: u64,
    random_steps: u64,
    eval_every: u64,
    overrides: &[String],
    device: Device,
) -> Result<()> {
    let config = controller_config(seed, steps, random_steps, eval_every, overrides)?;
    std::fs::create_dir_all(dir.join(rundir::CHECKPOINTS))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    rundir::write_config(dir, &config)?;
    runner::execute_with(dir, &config, device, Start::Fresh, Vec::new(), None, Hooks::default())?;
    Ok(())
}

/// The run's config, its agent loaded from the newest checkpoint, and that checkpoint's state.
fn load_controller(run_dir: &Path, device: Device) -> Result<(RunConfig, Box<dyn Agent>, RunnerState)> {
    let config = RunConfig::read(&run_dir.join(rundir::CONFIG))
        .with_context(|| format!("--controller {}: not a run directory", run_dir.display()))?;
    if config.env != CONTROLLER_ENV {
        bail!("--controller {}: expected a run on {CONTROLLER_ENV}, found env {:?}", run_dir.display(), config.env);
    }
    let ckpt =
        checkpoint::latest(run_dir).with_context(|| format!("--controller {}: no checkpoint", run_dir.display()))?;
    let mut agent = build_agent(&config, CONTROLLER_OBS_DIM, ANT_ACTIONS, device)?;
    let weights = ckpt.join(checkpoint::AGENT);
    agent.load(&weights).with_context(|| format!("loading the controller {}", weights.display()))?;
    let state = checkpoint::read_state(&ckpt)?;
    Ok((config, agent, state))
}

fn actor_hidden(config: &RunConfig) -> Vec<i64> {
    match &config.agent {
        o2o_agents::AgentConfig::Sac(sac) => sac.actor.mlp.hidden.clone(),
        _ => Vec::new(),
    }
}

/// The controller with the collection's action noise: a ~ π(·|o) + σ·N(0, 1), clipped to [−1, 1].
struct Controller<'a> {
    agent: &'a mut dyn Agent,
    device: Device,
    noise: f64,
}

impl Controller<'_> {
    fn act(&mut self, obs: &[f64], rng: &mut ChaCha8Rng) -> Result<Vec<f32>> {
        let o: Vec<f32> = obs.iter().map(|v| *v as f32).collect();
        let t = Tensor::from_slice(&o).view([1, o.len() as i64]).to_device(self.device);
        let a = self.agent.act(&t, false).to_device(Device::Cpu).flatten(0, -1);
        let a = Vec::<f32>::try_from(&a).context("cannot read the controller's action")?;
        Ok(a.into_iter().map(|v| (v as f64 + self.noise * normal(rng)).clamp(-1.0, 1.0) as f32).collect())
    }
}

/// `episodes` episodes of `ant-goal-v0` with the noisy controller.
fn measure_controller(controller: &mut Controller, episodes: usize, seed: u64) -> Result<ControllerRecord> {
    let mut env = o2o_envs::make(CONTROLLER_ENV)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut successes, mut falls, mut steps_to_target) = (0usize, 0usize, Vec::new());
    for k in 0..episodes {
        let mut obs = env.reset(Some(derive_seed(seed, 1, k as u64)))?;
        for t in 1.. {
            let o: Vec<f64> = obs.iter().map(|v| *v as f64).collect();
            let step = env.step(&controller.act(&o, &mut rng)?)?;
            if step.terminated {
                if step.info.success == Some(true) {
                    successes += 1;
                    steps_to_target.push(t as f64);
                } else {
                    falls += 1;
                }
            }
            if step.terminated || step.truncated {
                break;
            }
            obs = step.obs;
        }
    }
    let n = episodes as f64;
    Ok(ControllerRecord {
        source: String::new(),
        env: CONTROLLER_ENV.into(),
        algo: String::new(),
        actor_hidden: Vec::new(),
        env_steps: 0,
        grad_steps: 0,
        eval_episodes: episodes,
        goal_success_rate: successes as f64 / n,
        mean_steps_to_target: (!steps_to_target.is_empty())
            .then(|| steps_to_target.iter().sum::<f64>() / steps_to_target.len() as f64),
        fall_rate: falls as f64 / n,
    })
}

/// D4RL's waypoint toward `goal` for an ant at `xy` (see the module docs), the `avoid` cells
/// counted as walls by the planner (none for D4RL's layout), or the goal itself when the planner
/// finds no path (the ant's cell walled off from the goal's).
pub fn waypoint(
    map: &MazeMap,
    xy: [f64; 2],
    goal: [f64; 2],
    avoid: &[(usize, usize)],
    rng: &mut ChaCha8Rng,
) -> [f64; 2] {
    let (Some(here), Some(target)) = (map.d4rl_rowcol(xy), map.d4rl_rowcol(goal)) else { return goal };
    match map.next_cell_avoiding(here, target, avoid) {
        Some(next) if next != target => {
            let [x, y] = map.cell_xy(next);
            [x + rng.gen::<f64>() * 0.25 * MAZE_SCALING, y + rng.gen::<f64>() * 0.25 * MAZE_SCALING]
        }
        _ => goal,
    }
}

/// `to` moved toward `from` so that it is at most `max` away.
fn capped(from: [f64; 2], to: [f64; 2], max: f64) -> [f64; 2] {
    let (dx, dy) = (to[0] - from[0], to[1] - from[1]);
    let d = (dx * dx + dy * dy).sqrt();
    if d <= max {
        to
    } else {
        [from[0] + dx * max / d, from[1] + dy * max / d]
    }
}

/// D4RL's `_get_reset_location`: a uniformly drawn free cell's centre + U(0, 0.5)·s/2 per axis,
/// each axis floored at 0; cells in `avoid` are not drawn.
fn reset_location(map: &MazeMap, avoid: &[(usize, usize)], rng: &mut ChaCha8Rng) -> [f64; 2] {
    let free: Vec<(usize, usize)> = map.free_cells().into_iter().filter(|c| !avoid.contains(c)).collect();
    let [x, y] = map.cell_xy(free[rng.gen_range(0..free.len())]);
    let noise = |rng: &mut ChaCha8Rng| rng.gen::<f64>() * 0.5 * 0.5 * MAZE_SCALING;
    [(x + noise(rng)).max(0.0), (y + noise(rng)).max(0.0)]
}

fn column(data: Vec<f32>, width: usize) -> Column {
    Column { shape: vec![data.len() / width, width], dtype: Dtype::Float32, data }
}

/// The cells goals are drawn from: D4RL's (the generation map's goal cells, or every free cell
/// for `diverse`), less the avoided ones; when none is left, every free cell outside them.
pub fn goal_choices(maze: Maze, avoid: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let map = maze.generation_map();
    let d4rl = if maze.diverse_goals() { map.free_cells() } else { map.goal_cells() };
    let kept: Vec<(usize, usize)> = d4rl.into_iter().filter(|c| !avoid.contains(c)).collect();
    if kept.is_empty() {
        map.free_cells().into_iter().filter(|c| !avoid.contains(c)).collect()
    } else {
        kept
    }
}

/// The maze episodes, in D4RL's layout, and their statistics.
fn collect(
    spec: &AntMazeSpec,
    controller: &mut Controller,
    seed: u64,
) -> Result<(D4rlDataset, DataStats, Option<AvoidRecord>)> {
    let map = spec.maze.generation_map();
    let avoid = spec.avoid_cells.as_slice();
    let goal_cells = goal_choices(spec.maze, avoid);
    let (mut cut_episodes, mut empty_episodes, mut covered) = (0usize, 0usize, std::collections::BTreeSet::new());
    let sampler = AntMaze::collecting(map);
    let mut env = MujocoEnv::new(o2o_envs::spec(&spec.maze.id())?, Box::new(AntMaze::collecting(map)))?;
    let (nq, nv) = (env.qpos().len(), env.qvel().len());
    let obs_dim = env.observation_space().dim();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut obs, mut actions, mut rewards, mut timeouts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut goals, mut qpos, mut qvel) = (Vec::new(), Vec::new(), Vec::new());
    let (mut successes, mut first_steps, mut min_distances, mut cells_visited) =
        (0usize, Vec::new(), Vec::new(), Vec::new());
    let progress = crate::run::progress::Progress::new(spec.rows as u64, 0, Default::default());
    let mut episode = 0u64;
    while rewards.len() < spec.rows {
        env.reset(Some(derive_seed(seed, 1, episode)))?;
        if spec.maze.multi_start() {
            let mut q = env.qpos().to_vec();
            q[..2].copy_from_slice(&reset_location(&map, avoid, &mut rng));
            let v = env.qvel().to_vec();
            env.set_state(&q, &v)?;
        }
        let goal = sampler.sample_goal_in(&goal_cells, &mut rng);
        env.set_goal(goal)?;
        let (mut first, mut min_d, mut visited) = (None, f64::INFINITY, std::collections::BTreeSet::new());
        let len = spec.episode_steps.min(spec.rows - rewards.len());
        let mut kept = 0usize;
        for t in 0..len {
            let (q, v) = (env.qpos().to_vec(), env.qvel().to_vec());
            let xy = [q[0], q[1]];
            visited.insert(map.xy_to_cell(xy));
            let w = capped(xy, waypoint(&map, xy, goal, avoid, &mut rng), TARGET_DISTANCE.1);
            let a = controller.act(&controller_obs(&q, &v, w), &mut rng)?;
            let o = env.observation_f64();
            let step = env.step(&a)?;
            let after = [env.qpos()[0], env.qpos()[1]];
            // The step entered an avoided cell: the episode ends before it (module docs).
            if !avoid.is_empty() && map.xy_to_cell(after).is_some_and(|c| avoid.contains(&c)) {
                cut_episodes += 1;
                break;
            }
            if !avoid.is_empty() {
                covered.extend(map.xy_to_cell(xy));
                covered.extend(map.xy_to_cell(after));
            }
            obs.extend(o.iter().map(|x| *x as f32));
            qpos.extend(q.iter().map(|x| *x as f32));
            qvel.extend(v.iter().map(|x| *x as f32));
            goals.extend(goal.iter().map(|x| *x as f32));
            actions.extend_from_slice(&a);
            min_d = f64::min(min_d, ((after[0] - goal[0]).powi(2) + (after[1] - goal[1]).powi(2)).sqrt());
            if step.reward > 0.0 && first.is_none() {
                first = Some(t as f64);
            }
            rewards.push(step.reward as f32);
            timeouts.push(0.0);
            kept += 1;
        }
        if kept == 0 {
            // Cut at its first step: nothing of it is in the file.
            empty_episodes += 1;
            episode += 1;
            continue;
        }
        *timeouts.last_mut().expect("kept rows") = 1.0;
        if let Some(f) = first {
            successes += 1;
            first_steps.push(f);
        }
        min_distances.push(min_d);
        cells_visited.push(visited.len() as f64);
        episode += 1;
        progress.set(rewards.len() as u64, "antmaze");
    }
    progress.finish();
    let n = rewards.len();
    let episodes = episode as usize - empty_episodes;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let stats = DataStats {
        rows: n,
        episodes,
        success_rate: successes as f64 / episodes as f64,
        mean_first_success_step: (!first_steps.is_empty()).then(|| mean(&first_steps)),
        reward_rate: rewards.iter().filter(|r| **r > 0.0).count() as f64 / n as f64,
        mean_min_goal_distance: mean(&min_distances),
        mean_cells_visited: mean(&cells_visited),
    };
    let mut infos = BTreeMap::new();
    infos.insert("infos/goal".to_string(), column(goals, 2));
    infos.insert("infos/qpos".to_string(), column(qpos, nq));
    infos.insert("infos/qvel".to_string(), column(qvel, nv));
    let mut dtypes = BTreeMap::new();
    // D4RL's relabel script writes the terminals as float32.
    dtypes.insert("terminals".to_string(), Dtype::Float32);
    let ds = D4rlDataset {
        source: PathBuf::new(),
        obs_dim,
        act_dim: ANT_ACTIONS,
        observations: obs,
        actions,
        terminals: rewards.clone(),
        rewards,
        timeouts: Some(timeouts),
        next_observations: None,
        infos,
        metadata: BTreeMap::new(),
        dtypes,
    };
    let avoided = (!avoid.is_empty()).then(|| AvoidRecord {
        cells: avoid.iter().map(|&(r, c)| [r, c]).collect(),
        rule: "goals, random starts and waypoints (the planner counts these cells as walls) keep out of the cells; an episode whose ant enters one (the nearest-centre cell of its xy after a step) is cut there: that step is dropped and the row before it gets the episode's timeout".into(),
        cut_episodes,
        empty_episodes,
        cells_covered: covered.iter().map(|&(r, c)| [r, c]).collect(),
        free_cells: map.free_cells().len(),
    });
    Ok((ds, stats, avoided))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waypoints_follow_the_maze_and_end_at_the_goal() {
        let map = U_MAZE_TEST;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let goal = [0.7, 8.9];
        // From the reset cell the next cell is (1, 2), centre (4, 0), plus U(0, 1) per axis.
        for _ in 0..50 {
            let w = waypoint(&map, [0.2, 0.1], goal, &[], &mut rng);
            assert!((4.0..5.0).contains(&w[0]) && (0.0..1.0).contains(&w[1]), "{w:?}");
        }
        // In (3, 2) the next cell is the goal's: the waypoint is the goal itself.
        assert_eq!(waypoint(&map, [4.5, 8.5], goal, &[], &mut rng), goal);
        // With the goal arm (3, 1), (3, 2) avoided, a goal in (3, 3) is approached from (2, 3):
        // from (1, 3) the waypoint is in (2, 3), and an ant in (3, 2) is sent back to (3, 3).
        let arm = [(3, 1), (3, 2)];
        for _ in 0..50 {
            let w = waypoint(&map, [8.5, 0.5], [8.7, 8.7], &arm, &mut rng);
            assert!((8.0..9.0).contains(&w[0]) && (4.0..5.0).contains(&w[1]), "{w:?}");
            let w = waypoint(&map, [4.5, 8.5], [8.7, 8.7], &arm, &mut rng);
            assert_eq!(w, [8.7, 8.7], "the next cell is the goal's: the waypoint is the goal");
        }
        assert!(check_avoided(&map, &arm).is_ok());
        assert!(check_avoided(&map, &[(1, 1)]).is_err(), "the reset cell");
        assert!(check_avoided(&map, &[(2, 2)]).is_err(), "a wall");
        assert!(check_avoided(&map, &[(2, 3)]).is_err(), "cuts (3, *) off from the reset cell");
        assert_eq!(goal_choices(Maze::Umaze, &[]), vec![(3, 1)]);
        assert_eq!(
            goal_choices(Maze::Umaze, &arm),
            vec![(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)],
            "no goal cell left: every free cell outside the arm"
        );
        assert_eq!(goal_choices(Maze::MediumPlay, &[(2, 6)]), vec![(5, 1), (6, 5)], "BIG_MAZE's other goal cells");
        assert_eq!(capped([0.0, 0.0], [10.0, 0.0], 6.0), [6.0, 0.0]);
        assert_eq!(capped([0.0, 0.0], [3.0, 4.0], 6.0), [3.0, 4.0]);
        for _ in 0..50 {
            let [x, y] = reset_location(&BIG_MAZE, &[], &mut rng);
            let cell = BIG_MAZE.xy_to_cell([x, y]).unwrap();
            assert!(x >= 0.0 && y >= 0.0 && BIG_MAZE.cell(cell.0, cell.1) != b'1', "{x} {y}");
        }
        assert_eq!(Maze::parse("antmaze-medium-diverse"), Some(Maze::MediumDiverse));
        assert_eq!(Maze::parse("antmaze-medium"), None);
        assert!(Maze::MediumPlay.multi_start() && !Maze::MediumPlay.diverse_goals() && !Maze::Umaze.multi_start());
    }
}
