//! State coverage of AntMaze transitions on D4RL's cell grid: which cells of a maze the ant's
//! states lay in, and from which env step on (the coverage measure of `o2o experiment
//! sera-ablation` on AntMaze tasks, read from a run's recorded `dataset.hdf5`).
//!
//! A state's cell is the nearest cell centre of its x, y ([`MazeMap::xy_to_cell`], the first two
//! observation numbers of AntMaze's layout). Row `i` of a recording is env step `i + 1`; a cell is
//! visited at the first step whose row's state or the state after it (`next_observations`, when
//! the file has them) lies in it. Cells visited after `t` steps are those first visited at a step
//! ≤ `t`.

use anyhow::{bail, Result};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::mujoco::antmaze::MazeMap;
use std::collections::{BTreeMap, BTreeSet};

/// A maze cell: (row, column).
pub type Cell = (usize, usize);

/// When each cell was first visited by a sequence of transitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// Cell → the first env step (1-based) at which a state lay in it.
    pub first_visit: BTreeMap<Cell, u64>,
    /// Transitions (env steps) read.
    pub steps: u64,
}

impl Coverage {
    /// The coverage of transitions given as (state x, y, the next state's x, y when known), in
    /// env-step order. Points outside the map count for no cell.
    pub fn of_points(map: &MazeMap, rows: impl IntoIterator<Item = ([f64; 2], Option<[f64; 2]>)>) -> Self {
        let mut first_visit = BTreeMap::new();
        let mut steps = 0u64;
        for (xy, next) in rows {
            steps += 1;
            for p in std::iter::once(xy).chain(next) {
                if let Some(cell) = map.xy_to_cell(p) {
                    first_visit.entry(cell).or_insert(steps);
                }
            }
        }
        Self { first_visit, steps }
    }

    /// The coverage of a D4RL-layout file of AntMaze observations (x, y first), its
    /// `next_observations` included when it has them.
    pub fn of_dataset(ds: &D4rlDataset, map: &MazeMap) -> Result<Self> {
        if ds.obs_dim < 2 {
            bail!("{}: observations of {} numbers have no x, y", ds.source.display(), ds.obs_dim);
        }
        let d = ds.obs_dim;
        let xy = |v: &[f32], i: usize| [v[i * d] as f64, v[i * d + 1] as f64];
        let next = ds.next_observations.as_ref();
        Ok(Self::of_points(map, (0..ds.len()).map(|i| (xy(&ds.observations, i), next.map(|n| xy(n, i))))))
    }

    /// Distinct cells visited in the first `step` env steps.
    pub fn cells_at(&self, step: u64) -> usize {
        self.first_visit.values().filter(|&&s| s <= step).count()
    }

    /// Every cell visited.
    pub fn cells(&self) -> BTreeSet<Cell> {
        self.first_visit.keys().copied().collect()
    }

    /// `(step, cells visited by then)` at each of `steps`.
    pub fn curve(&self, steps: &[u64]) -> Vec<(f64, f64)> {
        steps.iter().map(|&s| (s as f64, self.cells_at(s) as f64)).collect()
    }

    /// Cells visited that are not in `known` (e.g. the offline data's cells).
    pub fn new_cells(&self, known: &BTreeSet<Cell>) -> usize {
        self.first_visit.keys().filter(|c| !known.contains(c)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use o2o_envs::mujoco::antmaze::U_MAZE_TEST;

    #[test]
    fn cells_count_from_their_first_step() {
        // U_MAZE_TEST: (1, 1) at the origin, cells 4 m apart, +row along +y.
        let rows = [
            ([0.1, 0.2], Some([2.1, 0.0])),
            ([2.1, 0.0], Some([2.2, 0.1])),
            ([8.0, 8.0], None),
            ([100.0, 0.0], Some([0.0, 1.9])),
        ];
        let c = Coverage::of_points(&U_MAZE_TEST, rows);
        assert_eq!(c.steps, 4);
        assert_eq!(c.first_visit, BTreeMap::from([((1, 1), 1), ((1, 2), 1), ((3, 3), 3)]));
        assert_eq!((c.cells_at(0), c.cells_at(1), c.cells_at(2), c.cells_at(3), c.cells_at(99)), (0, 2, 2, 3, 3));
        assert_eq!(c.curve(&[0, 3]), vec![(0.0, 0.0), (3.0, 3.0)]);
        assert_eq!(c.new_cells(&BTreeSet::from([(1, 1), (1, 3)])), 2);
    }
}
