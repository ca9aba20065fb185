//! Issue 28: the recording of every kind of run carries the viewer layout of its kind, and
//! every entity that layout's panels name is in the recording (no panel points at nothing);
//! the 3D view's camera follows the model's root body, which is in its view at the cursor the
//! viewer opens on.

mod common;

use o2o_experiments::logging::inspect::{chunks, last_time, latest_at, numbers, rrd, rrd_cells, tables, Chunk};
use o2o_experiments::logging::layout::{PanelKind, RunKind, RunPlan};
use o2o_experiments::run::config::RunConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run `o2o run --preset <preset>` with `sets`, recording to `recording.rrd` (the default), and
/// return the run directory.
fn run(preset: &str, sets: &[String]) -> PathBuf {
    let runs = tempfile::Builder::new().prefix("o2o-layouts-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let mut c = Command::new(common::O2O);
    c.args(["run", "--preset", preset, "--device", "cpu", "--threads", "1", "--runs-dir"]).arg(&runs);
    for s in sets {
        c.args(["--set", s]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "o2o run {preset} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

/// Small InvertedPendulum runs on the test fixture's data (when `data`), tiny networks.
fn sets(data: bool, extra: &[&str]) -> Vec<String> {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/inverted-pendulum-sac-replay.hdf5");
    let mut v: Vec<String> = vec![
        "env=InvertedPendulum-v5".into(),
        "eval.episodes=1".into(),
        "checkpoint.every=0".into(),
        "train.log_every=50".into(),
        "train.batch_size=32".into(),
    ];
    if data {
        v.push(format!("dataset.path={:?}", fixture.display().to_string()));
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// The run's layout (recomputed from its config.toml, as the sink did) against its recording.
fn check(run: &Path, kind: RunKind) -> Vec<Chunk> {
    let config = RunConfig::read(&run.join("config.toml")).unwrap();
    assert_eq!(RunPlan::of(&config).kind, kind);
    let (layout, _) = o2o_experiments::logging::sinks::run_layout(&config);
    let chunks = chunks(&rrd("print", &run.join("recording.rrd")).unwrap());
    let logged = |e: &str| chunks.iter().any(|c| c.entity == e || c.entity.starts_with(&format!("{e}/")));
    for p in layout.panels() {
        for e in &p.entities {
            assert!(logged(e), "{kind:?}: panel {:?} shows {e}, which the recording never logs", p.title);
        }
    }
    // The layout went with the recording: its views are in the blueprint store, the 3D one with
    // its camera.
    let views = chunks
        .iter()
        .filter(|c| {
            c.entity.starts_with("/view/") && !c.entity.contains("/ViewContents") && c.entity.matches('/').count() == 2
        })
        .count();
    assert_eq!(views, layout.panels().len(), "{kind:?}: views in the recording's blueprint");
    assert!(
        chunks.iter().any(|c| c.entity.starts_with("/view/") && c.entity.ends_with("/EyeControls3D")),
        "{kind:?}: no camera in the blueprint"
    );
    // The camera follows the model's root body (InvertedPendulum: the cart), which moves.
    let body = layout
        .panels()
        .iter()
        .find(|p| p.kind == PanelKind::Spatial3D)
        .expect("a 3D panel")
        .camera
        .clone()
        .expect("a camera");
    assert_eq!(body.tracking, "/episode/world/cart");
    assert!(
        chunks.iter().any(|c| c.entity == body.tracking && c.timelines.iter().any(|t| t == "run_step")),
        "the root body has no pose on run_step"
    );
    // Issue 47 item 10: at the cursor the viewer opens on (the end of run_step, the last
    // evaluation's result) the root body, moved by the follow frame, is in the camera's view.
    let cells = tables(&rrd_cells(&run.join("recording.rrd")).unwrap());
    let cursor = last_time(&cells, "run_step").expect("records on run_step");
    let at = |e: &str| {
        let cell = latest_at(&cells, e, "Transform3D:translation", "run_step", cursor);
        numbers(cell.unwrap_or_else(|| panic!("{kind:?}: {e} has no transform at run_step {cursor}")))
    };
    let (p, shift) = (at(&body.tracking), at("/episode/world"));
    let seen = [p[0] + shift[0], p[1] + shift[1], p[2] + shift[2]];
    assert!(body.sees(seen), "{kind:?}: the root body at {seen:?} is out of the view of {body:?}");
    chunks
}

#[test]
fn every_kind_of_run_records_the_entities_its_layout_shows() {
    // Offline → online (WSRL: pre-training, frozen warm-up, fine-tuning).
    let wsrl = run(
        "wsrl-hopper-small",
        &sets(
            true,
            &[
                "dataset.transitions=corrected",
                "agent.critic.hidden=[16, 16]",
                "agent.actor.mlp.hidden=[16, 16]",
                "train.offline_steps=100",
                "train.warmup_steps=100",
                "train.online_steps=200",
                "train.online_batch_size=32",
                "eval.every=100",
                "diagnostics.every=100",
                "diagnostics.window=100",
                "diagnostics.dense_every=50",
            ],
        ),
    );
    let c = check(&wsrl, RunKind::OfflineToOnline);
    for e in [
        "/phases/offline_end/return",
        "/phases/warmup_end/return",
        "/diag/online/q_minus_mc",
        "/diag/offline/q_minus_mc",
    ] {
        assert!(c.iter().any(|x| x.entity == e), "{e} missing");
    }
    // Online only (SAC from scratch, random steps first).
    let sac = run(
        "sac-inverted-pendulum",
        &sets(
            false,
            &[
                "train.random_steps=100",
                "train.online_steps=200",
                "eval.every=100",
                "agent.critic.hidden=[16, 16]",
                "agent.actor.mlp.hidden=[16, 16]",
            ],
        ),
    );
    let c = check(&sac, RunKind::Online);
    assert!(!c.iter().any(|x| x.entity.starts_with("/diag/offline")));
    // Offline only (IQL on the fixture).
    let iql = run(
        "iql-hopper-medium",
        &sets(
            true,
            &[
                "dataset.reward=\"none\"",
                "train.offline_steps=200",
                "eval.every=100",
                "agent.critic.hidden=[16, 16]",
                "agent.value.hidden=[16, 16]",
                "agent.actor.mlp.hidden=[16, 16]",
            ],
        ),
    );
    check(&iql, RunKind::Offline);
    // FamO2O-CQL with SERA on: the β panels (over the batch, the two scatters, along the
    // evaluation episode) and SERA's statistics are recorded too.
    let famo2o = run(
        "famo2o-cql-hopper-small",
        &sets(
            true,
            &[
                "dataset.transitions=corrected",
                "agent.critic.hidden=[16, 16]",
                "agent.actor.mlp.hidden=[16, 16]",
                "agent.balance.mlp.hidden=[16, 16]",
                "train.offline_steps=100",
                "train.online_steps=200",
                "eval.every=100",
                "diagnostics.every=100",
                "diagnostics.dense_every=100",
                "sera.enabled=true",
            ],
        ),
    );
    let c = check(&famo2o, RunKind::OfflineToOnline);
    for e in ["/diag/online/beta_vs_q", "/train/sera/bonus_share", "/episode/last/beta"] {
        assert!(c.iter().any(|x| x.entity == e || x.entity.starts_with(&format!("{e}/"))), "{e} missing");
    }
}
