//! AntMaze as D4RL built it (`d4rl/locomotion/{ant,maze_env,goal_reaching_env,wrappers}.py` of
//! `d4rl==1.1`, read for these facts; envsuites.md §2 lists how Gymnasium-Robotics' AntMaze
//! differs).
//!
//! - model: D4RL's own `ant.xml` (timestep 0.02, RK4, motors gear 1 with ctrlrange ±30), read at
//!   run time from the unpacked `d4rl==1.1` wheel ([`crate::assets::d4rl_dir`]), with one wall
//!   box per `1` cell of the map appended to the worldbody, in row-major order:
//!   `block_i_j` at (j·s − x_r, i·s − y_r, h/2·s), half-sizes (s/2, s/2, h/2·s), s = 4 (maze
//!   scaling), h = 0.5, where (x_r, y_r) = (j_r·s, i_r·s) of the reset cell `r`. So the frame's
//!   origin is the reset cell's centre and +row is +y.
//! - frame skip 5 → dt 0.1 s. Actions live in [−1, 1]⁸ and map to torques
//!   `clip(−30 + (a + 1)·½·60, −30, 30)` (NormalizedBoxEnv).
//! - observation 29 = qpos[..15] (x, y included) + qvel[..14]; the eval env appends no goal.
//! - reset: qpos = qpos0 + U(−0.1, 0.1) on all 15, qvel = 0.1·N(0, 1) on all 14 (the ant starts
//!   at the reset cell, the origin). The `-v2` ids draw a new goal at every reset (`v2_resets`),
//!   the `-v0` ids once per env (at its first reset here).
//! - goal: the map's `g` cell (the `*_TEST` maps have exactly one; with none, any free cell),
//!   its centre + U(0, s/4) per axis + U(0, ½)·s/4 per axis, each axis then floored at 0.
//! - reward: sparse, 1 when ‖xy − goal‖ ≤ 0.5, else 0; the eval env terminates on that same
//!   step (`info.success`). The ant's own health rule does not end the episode.
//! - time limit: 700 steps (umaze), 1000 (medium, large), set in the registry.
//!
//! The random streams are ours (ChaCha8), not NumPy's: the start and goal *distributions* are
//! D4RL's, the draws are not; parity replays our starts and goals in the oracle.

use super::noise::{add_normal, add_uniform, EnvRng};
use super::{cached_model, ActionMap, Data, Task};
use crate::env::Info;
use crate::error::EnvError;
use mujoco_rs::prelude::*;
use rand::Rng;
use std::path::PathBuf;
use std::sync::Arc;

/// D4RL's `maze_size_scaling` for every AntMaze id.
pub const MAZE_SCALING: f64 = 4.0;
/// D4RL's `maze_height` (walls are `h·s` = 2 m tall).
pub const MAZE_HEIGHT: f64 = 0.5;
/// Distance to the goal within which the sparse reward is 1 and the eval episode ends.
pub const GOAL_RADIUS: f64 = 0.5;
const RESET_NOISE: f64 = 0.1;
/// qpos[..15] + qvel[..14].
const OBS_QPOS: usize = 15;
const OBS_QVEL: usize = 14;

/// One maze map: rows of cells, `1` wall, `0` free, `r` the reset cell, `g` a goal cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MazeMap {
    /// D4RL's name of the map, e.g. `U_MAZE_TEST`.
    pub name: &'static str,
    /// The rows, top (row 0, lowest y) first.
    pub rows: &'static [&'static str],
}

/// D4RL's `U_MAZE_TEST` (antmaze-umaze*, 5×5): the eval map, one goal.
pub const U_MAZE_TEST: MazeMap = MazeMap { name: "U_MAZE_TEST", rows: &["11111", "1r001", "11101", "1g001", "11111"] };
/// D4RL's `BIG_MAZE_TEST` (antmaze-medium*, 8×8): the eval map, one goal.
pub const BIG_MAZE_TEST: MazeMap = MazeMap {
    name: "BIG_MAZE_TEST",
    rows: &["11111111", "1r011001", "10010001", "11000111", "10010001", "10100101", "100010g1", "11111111"],
};
/// D4RL's `HARDEST_MAZE_TEST` (antmaze-large*, 9×12): the eval map, one goal.
pub const HARDEST_MAZE_TEST: MazeMap = MazeMap {
    name: "HARDEST_MAZE_TEST",
    rows: &[
        "111111111111",
        "1r0001000001",
        "101101010101",
        "100000010001",
        "101111011101",
        "100101000001",
        "110101010111",
        "100100010g01",
        "111111111111",
    ],
};
/// D4RL's `BIG_MAZE` (the medium datasets' generation map: the same walls, three goal cells).
pub const BIG_MAZE: MazeMap = MazeMap {
    name: "BIG_MAZE",
    rows: &["11111111", "1r011001", "100100g1", "11000111", "10010001", "1g100101", "10001g01", "11111111"],
};
/// D4RL's `HARDEST_MAZE` (the large datasets' generation map: the same walls, seven goal cells).
pub const HARDEST_MAZE: MazeMap = MazeMap {
    name: "HARDEST_MAZE",
    rows: &[
        "111111111111",
        "1r0001g00001",
        "101101010101",
        "10000g0100g1",
        "101111011101",
        "10g101000001",
        "110101010111",
        "1001g0g10g01",
        "111111111111",
    ],
};

impl MazeMap {
    /// The eval map of an AntMaze env id (`antmaze-umaze*` → [`U_MAZE_TEST`], `antmaze-medium*`
    /// → [`BIG_MAZE_TEST`], `antmaze-large*` → [`HARDEST_MAZE_TEST`], as the registry builds
    /// them); `None` for any other id.
    pub fn of_env(id: &str) -> Option<MazeMap> {
        let rest = id.strip_prefix("antmaze-")?;
        [("umaze", U_MAZE_TEST), ("medium", BIG_MAZE_TEST), ("large", HARDEST_MAZE_TEST)]
            .into_iter()
            .find(|(p, _)| rest.starts_with(p))
            .map(|(_, m)| m)
    }

    /// Rows × columns.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows.len(), self.rows.first().map_or(0, |r| r.len()))
    }

    /// The cell character at (row, column): `b'1'`, `b'0'`, `b'r'` or `b'g'` (`b'1'` outside).
    pub fn cell(&self, row: usize, col: usize) -> u8 {
        self.rows.get(row).and_then(|r| r.as_bytes().get(col)).copied().unwrap_or(b'1')
    }

    fn cells_where(&self, keep: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
        let (h, w) = self.shape();
        (0..h).flat_map(|i| (0..w).map(move |j| (i, j))).filter(|&(i, j)| keep(self.cell(i, j))).collect()
    }

    /// The reset cell `r`, the first in row-major order (D4RL's `_find_robot`).
    pub fn reset_cell(&self) -> Option<(usize, usize)> {
        self.cells_where(|c| c == b'r').first().copied()
    }

    /// The goal cells `g`, row-major.
    pub fn goal_cells(&self) -> Vec<(usize, usize)> {
        self.cells_where(|c| c == b'g')
    }

    /// Every cell that is not a wall, row-major.
    pub fn free_cells(&self) -> Vec<(usize, usize)> {
        self.cells_where(|c| c != b'1')
    }

    /// The wall cells, row-major (the order their geoms are added in).
    pub fn wall_cells(&self) -> Vec<(usize, usize)> {
        self.cells_where(|c| c == b'1')
    }

    /// The centre of cell (row, col) in D4RL's frame: (col·s − x_r, row·s − y_r).
    pub fn cell_xy(&self, (row, col): (usize, usize)) -> [f64; 2] {
        let (ri, rj) = self.reset_cell().unwrap_or((0, 0));
        [col as f64 * MAZE_SCALING - rj as f64 * MAZE_SCALING, row as f64 * MAZE_SCALING - ri as f64 * MAZE_SCALING]
    }

    /// The cell holding point `xy` (D4RL's `_xy_to_rowcol` generalised to any reset cell:
    /// round to the nearest centre). `None` outside the map.
    pub fn xy_to_cell(&self, xy: [f64; 2]) -> Option<(usize, usize)> {
        let (ri, rj) = self.reset_cell()?;
        let row = (xy[1] / MAZE_SCALING + ri as f64 + 0.5).floor();
        let col = (xy[0] / MAZE_SCALING + rj as f64 + 0.5).floor();
        let (h, w) = self.shape();
        (row >= 0.0 && col >= 0.0 && (row as usize) < h && (col as usize) < w).then(|| (row as usize, col as usize))
    }

    /// The cell D4RL's waypoint planner puts point `xy` in (`maze_env.py` `_xy_to_rowcol`):
    /// (r_i + ⌊max(y, 1e-4)/s⌋, r_j + ⌊max(x, 1e-4)/s⌋) — not the nearest centre: the cell
    /// boundaries are at the centres' grid lines, half a cell off (D4RL's maps all have r at
    /// (1, 1), where this is its `int(1 + y/s)`). `None` outside the map.
    pub fn d4rl_rowcol(&self, xy: [f64; 2]) -> Option<(usize, usize)> {
        let (ri, rj) = self.reset_cell()?;
        let row = ri + (xy[1].max(1e-4) / MAZE_SCALING).floor() as usize;
        let col = rj + (xy[0].max(1e-4) / MAZE_SCALING).floor() as usize;
        let (h, w) = self.shape();
        (row < h && col < w).then_some((row, col))
    }

    /// The next cell on a shortest path from `current` to `target` over the free cells (4-way
    /// moves): a breadth-first search from `target`, returning the cell from which `current`
    /// was first reached (D4RL's `_get_best_next_rowcol`, neighbours in its order left, right,
    /// down, up). `target` itself when the two are equal; `None` when no path exists. `current`
    /// may be a wall cell (the half-cell-off [`MazeMap::d4rl_rowcol`] can put the ant in one).
    pub fn next_cell(&self, current: (usize, usize), target: (usize, usize)) -> Option<(usize, usize)> {
        self.next_cell_avoiding(current, target, &[])
    }

    /// [`MazeMap::next_cell`] with the `blocked` cells counted as walls (paths never pass through
    /// them; `current` may be one). `None` when every path to `target` crosses a blocked cell.
    pub fn next_cell_avoiding(
        &self,
        current: (usize, usize),
        target: (usize, usize),
        blocked: &[(usize, usize)],
    ) -> Option<(usize, usize)> {
        if current == target {
            return Some(target);
        }
        let (h, w) = self.shape();
        let mut visited = vec![false; h * w];
        let mut frontier = vec![target];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for (row, col) in frontier {
                visited[row * w + col] = true;
                let around = [
                    (row as i64, col as i64 - 1),
                    (row as i64, col as i64 + 1),
                    (row as i64 + 1, col as i64),
                    (row as i64 - 1, col as i64),
                ];
                for (r, c) in around {
                    if r < 0 || c < 0 || r as usize >= h || c as usize >= w {
                        continue;
                    }
                    let cell = (r as usize, c as usize);
                    if cell == current {
                        return Some((row, col));
                    }
                    if self.cell(cell.0, cell.1) == b'1' || blocked.contains(&cell) || visited[cell.0 * w + cell.1] {
                        continue;
                    }
                    next.push(cell);
                }
            }
            frontier = next;
        }
        None
    }

    /// The world-frame centres `[x, y, z]` and half-sizes of the wall boxes, in geom order.
    pub fn wall_boxes(&self) -> Vec<([f64; 3], [f64; 3])> {
        let half = [0.5 * MAZE_SCALING, 0.5 * MAZE_SCALING, MAZE_HEIGHT / 2.0 * MAZE_SCALING];
        self.wall_cells()
            .into_iter()
            .map(|c| {
                let [x, y] = self.cell_xy(c);
                ([x, y, MAZE_HEIGHT / 2.0 * MAZE_SCALING], half)
            })
            .collect()
    }

    /// D4RL's `ant.xml` text with this map's walls appended to the worldbody (as `maze_env.py`
    /// builds it; numbers printed with six decimals like its `%f`).
    pub fn maze_xml(&self, ant_xml: &str) -> Result<String, String> {
        if self.reset_cell().is_none() {
            return Err(format!("maze map {} has no reset cell `r`", self.name));
        }
        let at = ant_xml.rfind("</worldbody>").ok_or("the ant XML has no </worldbody>")?;
        let mut walls = String::new();
        for ((i, j), (pos, size)) in self.wall_cells().into_iter().zip(self.wall_boxes()) {
            walls.push_str(&format!(
                "<geom name=\"block_{i}_{j}\" pos=\"{:.6} {:.6} {:.6}\" size=\"{:.6} {:.6} {:.6}\" type=\"box\" \
                 contype=\"1\" conaffinity=\"1\" rgba=\"0.7 0.5 0.3 1.0\" />\n",
                pos[0], pos[1], pos[2], size[0], size[1], size[2]
            ));
        }
        Ok(format!("{}{walls}{}", &ant_xml[..at], &ant_xml[at..]))
    }
}

/// The AntMaze task on one map.
#[derive(Debug, Clone)]
pub struct AntMaze {
    map: MazeMap,
    /// Draw a new goal at every reset (`-v2`, D4RL's `v2_resets`) or once per env (`-v0`).
    resample_goal: bool,
    goal: Option<[f64; 2]>,
    /// End the episode at the goal (the eval env); D4RL's data-collection env never ends.
    terminate_at_goal: bool,
}

/// The sparse reward 1[‖xy − goal‖ ≤ 0.5] (√(dx² + dy²) as NumPy's `linalg.norm`).
pub fn sparse_reward(xy: [f64; 2], goal: [f64; 2]) -> f64 {
    let (dx, dy) = (xy[0] - goal[0], xy[1] - goal[1]);
    if (dx * dx + dy * dy).sqrt() <= GOAL_RADIUS {
        1.0
    } else {
        0.0
    }
}

impl AntMaze {
    /// The task on `map`; `resample_goal` as D4RL's `v2_resets`.
    pub fn new(map: MazeMap, resample_goal: bool) -> Self {
        Self { map, resample_goal, goal: None, terminate_at_goal: true }
    }

    /// The data-collection env D4RL's generator used: the same task, but reaching the goal
    /// does not end the episode (only the caller's time limit does).
    pub fn collecting(map: MazeMap) -> Self {
        Self { terminate_at_goal: false, ..Self::new(map, false) }
    }

    /// The maze map.
    pub fn map(&self) -> &MazeMap {
        &self.map
    }

    /// D4RL's `goal_sampler`: a goal cell (any free cell when the map marks none), its centre
    /// + U(0, s/4) per axis + U(0, ½)·s/4 per axis, each axis floored at 0.
    pub fn sample_goal(&self, rng: &mut EnvRng) -> [f64; 2] {
        let goals = self.map.goal_cells();
        let choices = if goals.is_empty() { self.map.free_cells() } else { goals };
        self.sample_goal_in(&choices, rng)
    }

    /// [`AntMaze::sample_goal`] over the given cells (non-empty) instead of the map's goal cells.
    pub fn sample_goal_in(&self, choices: &[(usize, usize)], rng: &mut EnvRng) -> [f64; 2] {
        let cell = choices[rng.gen_range(0..choices.len())];
        let [x, y] = self.map.cell_xy(cell);
        let (x, y) = (x + rng.gen::<f64>() * MAZE_SCALING * 0.25, y + rng.gen::<f64>() * MAZE_SCALING * 0.25);
        let (dx, dy) = (rng.gen::<f64>() * 0.5 * 0.25 * MAZE_SCALING, rng.gen::<f64>() * 0.5 * 0.25 * MAZE_SCALING);
        [(x + dx).max(0.0), (y + dy).max(0.0)]
    }

    /// ‖xy − goal‖ as NumPy's `linalg.norm` of a 2-vector computes it: √(dx² + dy²).
    fn goal_distance(&self, data: &Data) -> f64 {
        let q = data.qpos();
        let g = self.goal.unwrap_or([0.0, 0.0]);
        let (dx, dy) = (q[0] - g[0], q[1] - g[1]);
        (dx * dx + dy * dy).sqrt()
    }
}

impl Task for AntMaze {
    fn xml_file(&self) -> &'static str {
        "ant.xml"
    }

    /// D4RL's `ant.xml` from the unpacked wheel plus this map's walls, compiled once per map.
    fn model(&self) -> Result<Arc<MjModel>, EnvError> {
        let ant = crate::assets::d4rl_dir()?.join("d4rl/locomotion/assets/ant.xml");
        let key = PathBuf::from(format!("{}#{}", ant.display(), self.map.name));
        cached_model(&key, || {
            let text = std::fs::read_to_string(&ant).map_err(|e| format!("cannot read {}: {e}", ant.display()))?;
            let xml = self.map.maze_xml(&text)?;
            MjModel::from_xml_string(&xml).map_err(|e| e.to_string())
        })
    }

    fn frame_skip(&self) -> usize {
        5
    }

    fn model_is_gym_asset(&self) -> bool {
        false
    }

    fn obs_dim(&self, _model: &MjModel) -> usize {
        OBS_QPOS + OBS_QVEL
    }

    fn action_map(&self) -> ActionMap {
        ActionMap::Normalized
    }

    fn begin_episode(&mut self, rng: &mut EnvRng) {
        if self.resample_goal || self.goal.is_none() {
            self.goal = Some(self.sample_goal(rng));
        }
    }

    fn goal(&self) -> Option<[f64; 2]> {
        self.goal
    }

    fn set_goal(&mut self, goal: [f64; 2]) -> bool {
        self.goal = Some(goal);
        true
    }

    /// The goal (on the floor) and the ant's torso, whose path a viewer draws.
    fn markers(&self, data: &Data) -> Vec<super::Marker> {
        let q = data.qpos();
        let mut out = vec![super::Marker { name: "ant", pos: [q[0], q[1], q[2]], trail: true }];
        if let Some([x, y]) = self.goal {
            out.push(super::Marker { name: "goal", pos: [x, y, 0.0], trail: false });
        }
        out
    }

    /// qpos += U(−0.1, 0.1) on all 15, qvel += 0.1·N(0, 1) on all 14 (`AntEnv.reset_model`).
    fn reset_noise(&self, rng: &mut EnvRng, qpos: &mut [f64], qvel: &mut [f64]) {
        add_uniform(rng, qpos, RESET_NOISE);
        add_normal(rng, qvel, RESET_NOISE);
    }

    fn position(&self, data: &Data) -> [f64; 2] {
        let q = data.qpos();
        [q[0], q[1]]
    }

    fn observe(&self, data: &Data, out: &mut [f64]) {
        out[..OBS_QPOS].copy_from_slice(&data.qpos()[..OBS_QPOS]);
        out[OBS_QPOS..OBS_QPOS + OBS_QVEL].copy_from_slice(&data.qvel()[..OBS_QVEL]);
    }

    /// r = 1[‖xy − goal‖ ≤ 0.5]; terminated on the same condition (D4RL's eval env).
    fn reward(&self, data: &Data, _before: [f64; 2], _action: &[f64], _dt: f64, info: &mut Info) -> (f64, bool) {
        let distance = self.goal_distance(data);
        let g = self.goal.unwrap_or([0.0, 0.0]);
        let reward = sparse_reward([data.qpos()[0], data.qpos()[1]], g);
        let reached = reward > 0.0;
        info.set("x_position", data.qpos()[0]);
        info.set("y_position", data.qpos()[1]);
        info.set("goal_x", g[0]);
        info.set("goal_y", g[1]);
        info.set("goal_distance", distance);
        info.success = Some(reached);
        (reward, reached && self.terminate_at_goal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mujoco::noise::rng_from_seed;

    #[test]
    fn frame_puts_the_reset_cell_at_the_origin_and_rows_along_plus_y() {
        let m = U_MAZE_TEST;
        assert_eq!(m.reset_cell(), Some((1, 1)));
        assert_eq!(m.goal_cells(), vec![(3, 1)]);
        assert_eq!(m.cell_xy((1, 1)), [0.0, 0.0]);
        assert_eq!(m.cell_xy((3, 1)), [0.0, 8.0]);
        assert_eq!(m.cell_xy((1, 3)), [8.0, 0.0]);
        assert_eq!(m.xy_to_cell([0.3, 7.0]), Some((3, 1)));
        assert_eq!(m.xy_to_cell([-100.0, 0.0]), None);
        assert_eq!(m.wall_cells().len(), 18);
        assert_eq!(BIG_MAZE_TEST.goal_cells(), vec![(6, 6)]);
        assert_eq!(HARDEST_MAZE_TEST.goal_cells(), vec![(7, 9)]);
        assert_eq!(BIG_MAZE.goal_cells().len(), 3);
        assert_eq!(HARDEST_MAZE.goal_cells().len(), 7);
        // The generation maps have the eval maps' walls.
        assert_eq!(BIG_MAZE.wall_cells(), BIG_MAZE_TEST.wall_cells());
        assert_eq!(HARDEST_MAZE.wall_cells(), HARDEST_MAZE_TEST.wall_cells());
    }

    #[test]
    fn the_planner_walks_the_shortest_path_and_uses_d4rls_cells() {
        // umaze: (1,1) → (1,2) → (1,3) → (2,3) → (3,3) → (3,2) → (3,1).
        let m = U_MAZE_TEST;
        let mut at = (1, 1);
        let mut path = vec![at];
        while at != (3, 1) {
            at = m.next_cell(at, (3, 1)).unwrap();
            path.push(at);
        }
        assert_eq!(path, vec![(1, 1), (1, 2), (1, 3), (2, 3), (3, 3), (3, 2), (3, 1)]);
        assert_eq!(m.next_cell((3, 1), (3, 1)), Some((3, 1)));
        // From a wall cell next to the path the search still answers.
        assert_eq!(m.next_cell((2, 1), (3, 1)), Some((3, 1)));
        assert_eq!(m.next_cell((2, 2), (3, 1)), Some((3, 2)));
        // With the goal arm's cells (3, 2), (3, 1) blocked, paths stay in the other cells.
        assert_eq!(m.next_cell_avoiding((1, 1), (3, 3), &[(3, 2), (3, 1)]), Some((1, 2)));
        assert_eq!(
            m.next_cell_avoiding((3, 2), (1, 1), &[(3, 2), (3, 1)]),
            Some((3, 3)),
            "the ant's own cell may be blocked"
        );
        assert_eq!(m.next_cell_avoiding((1, 1), (3, 3), &[(2, 3)]), None, "every path crosses a blocked cell");
        assert_eq!(MazeMap::of_env("antmaze-umaze-diverse-v2"), Some(U_MAZE_TEST));
        assert_eq!(MazeMap::of_env("antmaze-medium-play-v0"), Some(BIG_MAZE_TEST));
        assert_eq!(MazeMap::of_env("antmaze-large-diverse-v2"), Some(HARDEST_MAZE_TEST));
        assert_eq!(MazeMap::of_env("hopper-v2"), None);
        // An unreachable target.
        let island = MazeMap { name: "ISLAND", rows: &["11111", "1r101", "11111"] };
        assert_eq!(island.next_cell((1, 1), (1, 3)), None);
        // D4RL's cells: (1 + ⌊y/4⌋, 1 + ⌊x/4⌋), with x, y floored at 1e-4.
        assert_eq!(m.d4rl_rowcol([-1.5, -0.3]), Some((1, 1)));
        assert_eq!(m.d4rl_rowcol([3.9, 0.2]), Some((1, 1)));
        assert_eq!(m.d4rl_rowcol([4.1, 8.5]), Some((3, 2)));
        assert_eq!(m.d4rl_rowcol([40.0, 0.0]), None);
    }

    #[test]
    fn goals_fall_in_d4rls_box_and_cover_it() {
        // umaze: G = (3, 1) → centre (0, 8); goal ∈ [0, 1.5] × [8, 9.5], mean (0.75, 8.75).
        let task = AntMaze::new(U_MAZE_TEST, true);
        let mut rng = rng_from_seed(3);
        let goals: Vec<[f64; 2]> = (0..4000).map(|_| task.sample_goal(&mut rng)).collect();
        for g in &goals {
            assert!((0.0..=1.5).contains(&g[0]) && (8.0..=9.5).contains(&g[1]), "{g:?}");
        }
        let mean = |k: usize| goals.iter().map(|g| g[k]).sum::<f64>() / goals.len() as f64;
        assert!((mean(0) - 0.75).abs() < 0.02 && (mean(1) - 8.75).abs() < 0.02, "{} {}", mean(0), mean(1));
        assert!(goals.iter().any(|g| g[0] > 1.4) && goals.iter().any(|g| g[1] < 8.1));
        // large: G = (7, 9), R = (1, 1) → centre (32, 24).
        let g = AntMaze::new(HARDEST_MAZE_TEST, true).sample_goal(&mut rng);
        assert!((32.0..=33.5).contains(&g[0]) && (24.0..=25.5).contains(&g[1]), "{g:?}");
    }

    #[test]
    fn maze_xml_appends_one_box_per_wall_cell() {
        let ant = "<mujoco><worldbody><geom name='floor'/></worldbody></mujoco>";
        let xml = U_MAZE_TEST.maze_xml(ant).unwrap();
        assert_eq!(xml.matches("type=\"box\"").count(), 18);
        assert!(
            xml.contains("name=\"block_0_0\" pos=\"-4.000000 -4.000000 1.000000\" size=\"2.000000 2.000000 1.000000\""),
            "{xml}"
        );
        assert!(xml.find("floor").unwrap() < xml.find("block_0_0").unwrap());
        assert!(U_MAZE_TEST.maze_xml("<mujoco/>").is_err());
    }
}
