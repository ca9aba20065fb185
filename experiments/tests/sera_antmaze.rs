//! SERA's sparse-navigation regime (issue 42): AntMaze data that keeps out of maze cells
//! (`o2o dataset make-benchmark antmaze-umaze --avoid-cells …`), the coverage measure on D4RL's
//! cell grid (`report::coverage`), and `o2o experiment sera-ablation` reporting coverage and
//! success on the `sera-calql-antmaze-umaze-onearm-small` preset end to end at a tiny budget.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::mujoco::antmaze::{MazeMap, U_MAZE_TEST};
use o2o_experiments::report::coverage::Coverage;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// `make-benchmark antmaze-umaze` with the committed controller and `avoid` cells, into `out`.
fn make(out: &Path, avoid: &[&str], extra: &[&str]) -> Value {
    let controller = root().join("data/antmaze-controller");
    let o = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args([
            "dataset",
            "make-benchmark",
            "antmaze-umaze",
            "--controller",
            controller.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .args(["--threads", "1", "--device", "cpu", "--avoid-cells"])
        .args(avoid)
        .output()
        .unwrap();
    assert!(o.status.success(), "make-benchmark failed:\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap()
}

/// With the bottom row (3, 1), (3, 2), (3, 3) avoided and a strong action noise (0.8, where the
/// ant strays: at seed 0 one episode is cut), no row's state lies in an avoided cell, goals lie
/// outside them, episodes are full length except the last and the cut ones (as many as the
/// manifest counts), the manifest records the cells and the rule, and the same seed makes the
/// same file.
#[test]
fn made_antmaze_data_keeps_out_of_the_avoided_cells() {
    const ROWS: usize = 6000;
    const EPISODE: usize = 600;
    let dir = tempfile::Builder::new().prefix("o2o-avoid-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let avoid = ["3,1", "3,2", "3,3"];
    let cells: BTreeSet<(usize, usize)> = [(3, 1), (3, 2), (3, 3)].into();
    let extra = [
        "--transitions",
        "6000",
        "--episode-steps",
        "600",
        "--action-noise",
        "0.8",
        "--eval-episodes",
        "2",
        "--seed",
        "0",
    ];
    let m = make(&dir.path().join("a"), &avoid, &extra);
    let ds = D4rlDataset::read(&dir.path().join("a/antmaze-umaze-v2.hdf5")).unwrap();
    assert_eq!(ds.len(), ROWS);
    let map = U_MAZE_TEST;
    let cell = |x: f32, y: f32| map.xy_to_cell([x as f64, y as f64]).unwrap();
    let (qpos, goal) = (&ds.infos["infos/qpos"], &ds.infos["infos/goal"]);
    let mut seen = BTreeSet::new();
    for i in 0..ds.len() {
        let o = ds.obs(i);
        let c = cell(o[0], o[1]);
        assert!(!cells.contains(&c), "row {i}: state in avoided cell {c:?}");
        assert_eq!(cell(qpos.data[i * 15], qpos.data[i * 15 + 1]), c);
        let g = cell(goal.data[2 * i], goal.data[2 * i + 1]);
        assert!(!cells.contains(&g), "row {i}: goal in avoided cell {g:?}");
        seen.insert(c);
    }
    // Episodes: full length, but for the last (cut at --transitions) and the cut ones.
    let timeouts = ds.timeouts.as_ref().unwrap();
    let ends: Vec<usize> = (0..ROWS).filter(|&i| timeouts[i] != 0.0).collect();
    assert_eq!(ends.last(), Some(&(ROWS - 1)));
    let lengths: Vec<usize> = ends
        .iter()
        .scan(0, |start, &e| {
            let n = e + 1 - *start;
            *start = e + 1;
            Some(n)
        })
        .collect();
    let short = lengths[..lengths.len() - 1].iter().filter(|&&n| n < EPISODE).count();
    assert!(lengths.iter().all(|&n| n <= EPISODE), "{lengths:?}");
    let a = &m["avoided"];
    assert_eq!(a["cells"], serde_json::json!([[3, 1], [3, 2], [3, 3]]));
    assert!(a["rule"].as_str().unwrap().contains("cut there"), "{a}");
    assert_eq!(a["cut_episodes"].as_u64(), Some(short as u64), "short episodes {lengths:?}");
    assert!(
        short >= 1,
        "this setting strays into the avoided cells (one cut at seed 0), so the cut is exercised: {lengths:?}"
    );
    assert_eq!(m["data"]["episodes"].as_u64(), Some(lengths.len() as u64));
    assert_eq!(a["free_cells"].as_u64(), Some(7));
    // The manifest's covered cells hold every row's cell (and the states after the rows), none avoided.
    let covered: BTreeSet<(usize, usize)> = a["cells_covered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_u64().unwrap() as usize, c[1].as_u64().unwrap() as usize))
        .collect();
    assert!(seen.is_subset(&covered) && covered.is_disjoint(&cells), "rows {seen:?}, manifest {covered:?}");
    assert!(
        m["collection"]["goals"].as_str().unwrap().contains("[(1, 1), (1, 2), (1, 3), (2, 3)]"),
        "{}",
        m["collection"]
    );
    assert!(m["differences_from_d4rl"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_str().unwrap().contains("avoids cells")));
    // Same seed, same file.
    let again = make(&dir.path().join("b"), &avoid, &extra);
    assert_eq!(again["file"]["sha256"], m["file"]["sha256"]);
    // A D4RL-layout file records no avoided cells; cells that cut the maze apart are refused.
    let o = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .args([
            "dataset",
            "make-benchmark",
            "antmaze-umaze",
            "--out",
            dir.path().join("c").to_str().unwrap(),
            "--avoid-cells",
            "2,3",
        ])
        .output()
        .unwrap();
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("cannot be reached"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let shipped: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("data/antmaze-umaze-small/manifest.json")).unwrap())
            .unwrap();
    assert!(shipped.get("avoided").is_none());
}

/// A hand-made file: rows at known x, y of U_MAZE_TEST (cells 4 m apart, (1, 1) at the origin,
/// +row along +y); the cells and the step each is first visited at are counted by hand.
#[test]
fn coverage_counts_the_cells_of_a_hand_made_file() {
    let mut ds = D4rlDataset::empty(PathBuf::from("hand"), 29, 8);
    // (state x, y, next x, y): step 1 in (1, 1) → (1, 2); step 2 in (1, 2); step 3 (1, 3) → (2, 3);
    // step 4 back in (1, 1) (a reset); step 5 (2, 3) → (3, 3); step 6 (3, 3) → (3, 2).
    let rows = [
        ([0.5, 0.5], [2.5, 0.0]),
        ([2.5, 0.0], [5.9, 1.0]),
        ([6.1, 1.0], [8.0, 2.1]),
        ([0.0, 0.0], [0.3, 0.0]),
        ([8.0, 5.0], [8.0, 6.2]),
        ([7.0, 8.0], [5.5, 8.0]),
    ];
    let mut next = Vec::new();
    for (s, n) in rows {
        let mut o = vec![0.0f32; 29];
        (o[0], o[1]) = (s[0], s[1]);
        ds.observations.extend_from_slice(&o);
        (o[0], o[1]) = (n[0], n[1]);
        next.extend_from_slice(&o);
        ds.actions.extend_from_slice(&[0.0; 8]);
        ds.rewards.push(0.0);
        ds.terminals.push(0.0);
        ds.timeouts.as_mut().unwrap().push(0.0);
    }
    ds.next_observations = Some(next);
    let c = Coverage::of_dataset(&ds, &U_MAZE_TEST).unwrap();
    let want = BTreeMap::from([((1, 1), 1), ((1, 2), 1), ((1, 3), 3), ((2, 3), 3), ((3, 3), 5), ((3, 2), 6)]);
    assert_eq!(c.first_visit, want);
    assert_eq!(c.steps, 6);
    assert_eq!((1..=6).map(|t| c.cells_at(t)).collect::<Vec<_>>(), vec![2, 2, 4, 4, 5, 6]);
    assert_eq!(c.new_cells(&[(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)].into()), 1);
    // Without next_observations only the rows' own states count: (1, 2) from step 2, (2, 3) at
    // step 5, and (3, 2) never.
    ds.next_observations = None;
    let c = Coverage::of_dataset(&ds, &U_MAZE_TEST).unwrap();
    assert_eq!(c.first_visit, BTreeMap::from([((1, 1), 1), ((1, 2), 2), ((1, 3), 3), ((2, 3), 5), ((3, 3), 6)]));
    assert_eq!(MazeMap::of_env("antmaze-umaze-v2"), Some(U_MAZE_TEST));
}

/// The cells a recorded run's states visited, counted here by hand (not through
/// `report::coverage`).
fn cells_of(run: &Path) -> (usize, usize) {
    let ds = D4rlDataset::read(&run.join("dataset.hdf5")).unwrap();
    let next = ds.next_observations.as_ref().unwrap();
    let mut cells = BTreeSet::new();
    for i in 0..ds.len() {
        for v in [ds.obs(i), &next[i * 29..(i + 1) * 29]] {
            let (row, col) = (((v[1] as f64) / 4.0 + 1.5).floor(), ((v[0] as f64) / 4.0 + 1.5).floor());
            cells.insert((row as i64, col as i64));
        }
    }
    (cells.len(), ds.len())
}

/// `o2o experiment sera-ablation --task antmaze-umaze-onearm-small` at a tiny budget on the
/// shipped one-arm data: the fine-tuning runs record their transitions, and the table and
/// results.json hold the maze cells per seed (as counted from the recordings), the offline
/// data's cells, success, and the paired differences of coverage and success.
#[test]
fn sera_ablation_reports_maze_coverage_on_antmaze() {
    let out = tempfile::Builder::new()
        .prefix("o2o-sera-ablation-antmaze-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    let mut c = Command::new(common::O2O);
    c.current_dir(root())
        .args([
            "experiment",
            "sera-ablation",
            "--task",
            "antmaze-umaze-onearm-small",
            "--seeds",
            "2",
            "--jobs",
            "1",
            "--device",
            "cpu",
            "--out",
        ])
        .arg(&out);
    // 800 online steps: the first 700-step episode closes, so the last 100 update with the bonus.
    for s in [
        "train.offline_steps=50",
        "train.online_steps=800",
        "train.batch_size=64",
        "train.log_every=100",
        "eval.every=400",
        "eval.episodes=1",
        "checkpoint.every=0",
        "agent.critic.hidden=[16, 16]",
        "agent.actor.mlp.hidden=[16, 16]",
    ] {
        c.args(["--set", s]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "sera-ablation failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("## Maze coverage (U_MAZE_TEST: 7 free cells; eval goal cell [(3, 1)])"), "{table}");
    assert!(
        table.contains(
            "The offline data's states visit 5 of the 7 free cells: {(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)}."
        ),
        "{table}"
    );
    for measure in [
        "cells visited, final",
        "cells visited, mean over the online evaluations",
        "cells outside the offline data's",
        "final success (%)",
        "final score",
    ] {
        assert!(table.contains(&format!("| {measure} | sera-calql − calql |")), "{measure}:\n{table}");
    }
    assert!(out.join("coverage.png").is_file() && out.join("curves.png").is_file());
    let r: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let maze = &r["maze"];
    assert_eq!(maze["coverage_steps"], serde_json::json!([400, 800]));
    let per = &maze["per_seed"];
    for v in ["calql", "sera-calql"] {
        for seed in 0..2u64 {
            let dir = std::fs::read_dir(out.join("runs").join(v).join(format!("seed-{seed}")))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let (cells, rows) = cells_of(&dir);
            assert_eq!(rows, 800, "{v} seed {seed}: one recorded row per online env step");
            assert_eq!(per["cells_final"][v][seed.to_string()].as_f64(), Some(cells as f64), "{v} seed {seed}");
            let success = per["final_success_pct"][v][seed.to_string()].as_f64().unwrap();
            assert!((0.0..=100.0).contains(&success));
            let curve = maze["coverage_curves"][v][seed as usize].as_array().unwrap();
            assert_eq!(curve.last().unwrap()[1].as_f64(), Some(cells as f64));
        }
    }
    // The paired rows are the per-seed differences of those values.
    let paired = r["maze"]["paired"].as_array().unwrap();
    let cells = paired.iter().find(|p| p["measure"] == "cells visited, final").unwrap();
    let diff = |s: &str| {
        per["cells_final"]["sera-calql"][s].as_f64().unwrap() - per["cells_final"]["calql"][s].as_f64().unwrap()
    };
    assert_eq!(cells["comparison"]["diffs"], serde_json::json!([diff("0"), diff("1")]));
    // The SERA runs computed a bonus that varies over a batch.
    let spread = &r["per_seed"]["bonus_spread"]["sera-calql"];
    assert!(spread["0"].as_f64().is_some_and(|s| s > 0.0), "{spread}");
}
