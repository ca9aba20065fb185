//! Robots through the CLI (issue 23), on the `sim` driver with faults injected: record
//! demonstrations, read them with `o2o dataset info`, pre-train on them with `o2o train`,
//! fine-tune on the robot with `o2o robot run --from` (killed mid-run and resumed), and RLPD
//! with the demonstrations as prior data; the safety counters show the envelope held.

use o2o_datasets::d4rl::D4rlDataset;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;

use common::O2O;

const CPU: &[&str] = &["--device", "cpu", "--threads", "1", "--rerun=off", "--progress", "off"];

/// Small networks and batches: every run here takes seconds.
const SMALL: &[&str] = &[
    "--set",
    "agent.critic.hidden=[32, 32]",
    "--set",
    "agent.actor.mlp.hidden=[32, 32]",
    "--set",
    "agent.num_critics=2",
    "--set",
    "eval.episodes=1",
    "--set",
    "train.log_every=25",
];

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../robot/configs")
}

fn o2o(dir: &Path, args: &[&str]) -> Output {
    Command::new(O2O).current_dir(dir).args(args).stdin(Stdio::null()).output().unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{what} failed:\n{text}");
    text
}

fn only_run(runs: &Path, prefix: &str) -> PathBuf {
    let mut d: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    d.pop().unwrap()
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("robot.json")).unwrap()).unwrap()
}

/// Sum of one safety counter over the run's envs.
fn total(r: &serde_json::Value, key: &str) -> u64 {
    r["envs"].as_array().unwrap().iter().map(|e| e["safety"][key].as_u64().unwrap()).sum()
}

#[test]
fn record_pretrain_and_finetune_on_the_sim_robot_with_faults() {
    let work = tempfile::Builder::new().prefix("robot-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let (sim, faults) = (configs().join("sim.toml"), configs().join("sim-faults.toml"));
    let (sim, faults) = (sim.to_str().unwrap(), faults.to_str().unwrap());

    // 1. The check: connect, dry-run the envelope.
    let out = ok(&o2o(&work, &["robot", "check", faults]), "robot check");
    assert!(out.contains("inside the envelope") && out.contains("step window 0.0200"), "{out}");
    assert!(out.contains("physical limits (pusher.xml)") && out.contains("the envelope is inside them"), "{out}");

    // 2. Demonstrations by the scripted teleoperator, a D4RL file `o2o dataset info` reads.
    let out = ok(
        &o2o(
            &work,
            &[
                "robot",
                "record",
                "--config",
                sim,
                "--teleop",
                "reacher",
                "--episodes",
                "12",
                "--out",
                "demos.hdf5",
                "--lerobot",
                "demos-lerobot",
            ],
        ),
        "robot record",
    );
    assert!(out.contains("12 successful"), "{out}");
    let info = ok(&o2o(&work, &["dataset", "info", "demos.hdf5"]), "dataset info");
    assert!(info.contains("infos/intervention") && info.contains("episodes: 12 (12 terminated"), "{info}");
    let demos = D4rlDataset::read(&work.join("demos.hdf5")).unwrap();
    assert!(demos.infos["infos/intervention"].data.iter().all(|v| *v == 1.0));
    // The same recording as a LeRobotDataset v3.0 folder beside it (HIL-SERL's fields).
    let lr = o2o_datasets::lerobot::LeRobotDataset::read(&work.join("demos-lerobot"), &Default::default()).unwrap();
    assert_eq!(lr.episodes.len(), 12);
    assert_eq!((&lr.d4rl.observations, &lr.d4rl.actions), (&demos.observations, &demos.actions));
    assert_eq!((&lr.d4rl.rewards, &lr.d4rl.terminals), (&demos.rewards, &demos.terminals));
    assert_eq!(lr.d4rl.infos["infos/intervention"].data, demos.infos["infos/intervention"].data);

    // 3. `o2o train` pre-trains on them offline (WSRL's CQL phase), evaluating on the robot.
    let env = format!("env=\"robot:{sim}\"");
    let mut args = vec![
        "train",
        "--preset",
        "wsrl-robot-sim",
        "--runs-dir",
        "runs",
        "--set",
        &env,
        "--set",
        "dataset.path=demos.hdf5",
    ];
    args.extend([
        "--set",
        "train.offline_steps=60",
        "--set",
        "train.warmup_steps=0",
        "--set",
        "train.online_steps=0",
        "--set",
        "train.batch_size=64",
    ]);
    args.extend(SMALL);
    args.extend(CPU);
    ok(&o2o(&work, &args), "train (offline on robot data)");
    let parent = only_run(&work.join("runs"), "wsrl-robot-sim-");

    // 4. Fine-tune on the faulty robot from that run; killed mid-run, resumed.
    let parent_s = parent.to_str().unwrap();
    let mut args =
        vec!["robot", "run", "--config", faults, "--from", parent_s, "--online-steps", "240", "--runs-dir", "runs"];
    args.extend([
        "--set",
        "train.online_batch_size=64",
        "--set",
        "checkpoint.every=40",
        "--set",
        "eval.every=120",
        "--set",
        "eval.episodes=1",
    ]);
    args.extend(CPU);
    let killed = Command::new(O2O)
        .current_dir(&work)
        .args(&args)
        .env("O2O_FAULT", "step:150")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!killed.status.success(), "the run was meant to be killed");
    let run = only_run(&work.join("runs"), "wsrl-robot-sim-finetune-");
    let before = D4rlDataset::read(&run.join("robot.hdf5")).unwrap().len();
    assert!(before > 0, "the recording is in the run directory by the first checkpoint");
    let mut args = vec!["robot", "run", "--resume", run.to_str().unwrap()];
    args.extend(CPU);
    let out = ok(&o2o(&work, &args), "robot run --resume");
    assert!(out.contains("robot:") && out.contains("transitions recorded"), "{out}");
    let r = report(&run);
    let log = D4rlDataset::read(&run.join("robot.hdf5")).unwrap();
    assert!(log.len() > before + 80, "the resumed session appended to the log: {} then {}", before, log.len());
    assert_eq!(r["transitions"].as_u64().unwrap() as usize, log.len());
    // The envelope held: faults were injected and caught, nothing reached a latched arm,
    // and every latch was cleared by the (scripted) operator or is the one still set.
    let injected = total(&r, "driver_faults") + total(&r, "link_drops") + total(&r, "dropped_commands");
    assert!(injected > 0, "faults were injected: {r}");
    assert_eq!(total(&r, "refused_latched"), 0, "{r}");
    assert!(total(&r, "sent") > 100 && total(&r, "clipped_commands") > 0, "{r}");
    let latched_at_end = r["envs"].as_array().unwrap().iter().filter(|e| !e["latch"].is_null()).count() as u64;
    let latches = total(&r, "driver_faults")
        + total(&r, "link_drops")
        + total(&r, "deadline_faults")
        + total(&r, "overspeed_faults");
    assert_eq!(total(&r, "latch_clears") + latched_at_end, latches, "{r}");
    // The recorded log is a dataset like any other.
    let info =
        ok(&o2o(&work, &["dataset", "info", run.join("robot.hdf5").to_str().unwrap()]), "dataset info (robot log)");
    assert!(info.contains("infos/latched"), "{info}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["finished"], true);

    // 5. RLPD with the demonstrations as prior data, on the faulty robot.
    let mut args = vec![
        "robot",
        "run",
        "--config",
        faults,
        "--preset",
        "rlpd-robot-sim",
        "--online-steps",
        "100",
        "--runs-dir",
        "runs",
    ];
    args.extend([
        "--set",
        "dataset.path=demos.hdf5",
        "--set",
        "train.random_steps=50",
        "--set",
        "train.batch_size=64",
        "--set",
        "agent.critic_steps=2",
        "--set",
        "eval.every=0",
    ]);
    args.extend(SMALL);
    args.extend(CPU);
    let out = ok(&o2o(&work, &args), "robot run (rlpd)");
    let run = only_run(&work.join("runs"), "rlpd-robot-sim-");
    assert!(out.contains("transitions recorded"), "{out}");
    let r = report(&run);
    assert!(total(&r, "sent") > 50, "{r}");
    assert_eq!(total(&r, "refused_latched"), 0, "{r}");
}

/// HIL-SERL's intervention buffer (issue 23): with `train.intervention_share = 0.5` the
/// operator's takeovers go to a buffer of their own, every online batch takes half its rows
/// from it once it has any, and a run killed mid-way resumes with the buffer it checkpointed.
#[test]
fn interventions_get_their_own_buffer_and_share_of_each_batch_across_a_resume() {
    let work = tempfile::Builder::new().prefix("robot-int-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    // The sim robot with a scripted operator taking over on four stretches of steps.
    let sim = std::fs::read_to_string(configs().join("sim.toml")).unwrap();
    let scripted = "kind = \"scripted\"\ntakeover = [[30, 49], [90, 109]]\naction = [0.01, 0.0, 0.0]\n";
    // Env steps in [from, to) the operator takes over (each env counts its steps from 0).
    let taken = |from: u64, to: u64| (from..to).filter(|s| (30..=49).contains(s) || (90..=109).contains(s)).count();
    let text = sim.replace("kind = \"unattended\"", scripted);
    assert_ne!(text, sim);
    let config = work.join("sim-operator.toml");
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let mut args = vec![
        "robot",
        "run",
        "--config",
        config,
        "--preset",
        "sac-robot-sim",
        "--online-steps",
        "200",
        "--runs-dir",
        "runs",
    ];
    args.extend([
        "--set",
        "train.random_steps=20",
        "--set",
        "train.batch_size=32",
        "--set",
        "train.intervention_share=0.5",
        "--set",
        "checkpoint.every=40",
        "--set",
        "eval.every=0",
    ]);
    args.extend(SMALL);
    args.extend(CPU);
    let killed = Command::new(O2O)
        .current_dir(&work)
        .args(&args)
        .env("O2O_FAULT", "step:150")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!killed.status.success(), "the run was meant to be killed");
    let run = only_run(&work.join("runs"), "sac-robot-sim-");
    let newest = || {
        std::fs::read_dir(run.join("checkpoints"))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse::<u64>().ok())
            .max()
            .unwrap()
    };
    let len_at = |step: u64| {
        o2o_datasets::ReplayBuffer::load(&run.join(format!("checkpoints/step-{step:010}/interventions.bin")))
            .unwrap()
            .len()
    };
    // Checkpoints wait for an episode's end, so the newest one before the kill is at some
    // step S ≤ 150 past the first takeover; it holds the takeovers of steps [0, S).
    let s = newest();
    assert!((50..=150).contains(&s), "newest checkpoint at step {s}");
    assert_eq!(len_at(s), taken(0, s));
    let mut resume = vec!["robot", "run", "--resume", run.to_str().unwrap()];
    resume.extend(CPU);
    ok(&o2o(&work, &resume), "robot run --resume");
    // The resumed session kept those and added its own (its env counts from 0 again).
    assert_eq!(newest(), 220);
    assert_eq!(len_at(220), taken(0, s) + taken(0, 220 - s));
    // Every logged online batch took half its rows from the intervention buffer.
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let shares: Vec<f64> = metrics
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("train/intervention_fraction")?.as_f64())
        .collect();
    assert!(shares.len() >= 4, "{} logged shares", shares.len());
    assert!(shares.iter().all(|s| *s == 0.5), "{shares:?}");
    let cfg = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(cfg.contains("intervention_share = 0.5"), "the resumed run's config keeps the share");
}

/// The robot loop in the run's Rerun recording (issue 23): joint states, commands before and
/// after the envelope, clips, interventions and loop timing of every control step, on the
/// `robot_step` timeline, through the run's non-blocking Rerun sink.
#[test]
fn a_robot_runs_recording_holds_its_control_loop() {
    use o2o_experiments::logging::inspect::{chunks, rrd};
    let work = tempfile::Builder::new().prefix("robot-rrd-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let sim = configs().join("sim.toml");
    let mut args = vec![
        "robot",
        "run",
        "--config",
        sim.to_str().unwrap(),
        "--preset",
        "sac-robot-sim",
        "--online-steps",
        "30",
        "--runs-dir",
        "runs",
    ];
    args.extend([
        "--set",
        "train.random_steps=10",
        "--set",
        "train.batch_size=16",
        "--set",
        "checkpoint.every=0",
        "--set",
        "eval.every=0",
    ]);
    args.extend(SMALL);
    args.extend(["--device", "cpu", "--threads", "1", "--rerun", "save", "--progress", "off"]);
    ok(&o2o(&work, &args), "robot run (recorded)");
    let run = only_run(&work.join("runs"), "sac-robot-sim-");
    // Issue 47 C6: `o2o eval` rebuilds the robot env from the run's robot config.
    let before = std::fs::read(run.join("recording.rrd")).unwrap();
    let o = o2o(&work, &["eval", run.to_str().unwrap(), "--episodes", "1", "--json", "--device", "cpu"]);
    let out = ok(&o, "eval of a robot run");
    let line = String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().to_string();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["mean_return"].as_f64().is_some_and(f64::is_finite), "{v}");
    assert_eq!(std::fs::read(run.join("recording.rrd")).unwrap(), before, "eval leaves the run untouched");
    let chunks = chunks(&rrd("print", &run.join("recording.rrd")).unwrap());
    let on_robot_step = |pred: &dyn Fn(&str) -> bool| {
        chunks
            .iter()
            .filter(|c| pred(&c.entity) && c.timelines.iter().any(|t| t == "robot_step"))
            .map(|c| c.rows)
            .sum::<usize>()
    };
    let rows = |suffix: &str| on_robot_step(&|e: &str| e.starts_with("/robot/arm") && e.ends_with(suffix));
    // The acting arm stepped 40 times: every step is in the recording.
    for key in [
        "/command/requested/0",
        "/command/sent/0",
        "/safety/clipped",
        "/intervention",
        "/loop/missed_deadlines",
        "/reward",
    ] {
        assert!(rows(key) >= 40, "{key}: {} rows", rows(key));
    }
    // Periods from the second step of each episode on.
    assert!(rows("/loop/period_ms") >= 30 && rows("/loop/jitter_ms") >= 30);
    // Joint states: position and velocity of each of the Pusher's 7 joints, the tip's x, y, z.
    let joints = |kind: &str| {
        chunks
            .iter()
            .filter(|c| c.entity.starts_with("/robot/arm") && c.entity.contains("/joints/") && c.entity.ends_with(kind))
            .map(|c| c.entity.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert!(joints("/position").len() >= 7 && joints("/velocity").len() >= 7, "{:?}", joints("/position"));
    assert!(rows("/ee/z") >= 40);
}

/// `o2o robot check` on the Koch config with no bus adapter plugged in says which port is
/// missing and where to set it, naming the config (issue 23).
#[test]
fn checking_a_koch_arm_without_its_adapter_names_the_port() {
    let work = tempfile::Builder::new().prefix("robot-koch-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let text = std::fs::read_to_string(configs().join("koch.toml")).unwrap();
    let missing = work.join("ttyUSB-not-here");
    let config = work.join("koch.toml");
    std::fs::write(&config, text.replace("/dev/ttyUSB0", missing.to_str().unwrap())).unwrap();
    let out = o2o(&work, &["robot", "check", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("koch.toml") && err.contains("ttyUSB-not-here is absent") && err.contains("driver.port"),
        "{err}"
    );
}

/// `robot check` refuses an envelope the arm cannot physically follow (issue 47, C3: a speed of
/// 100 m/s, a ±100 m workspace), naming the key, the value and the model's limit, and accepts it
/// with a warning under `allow_beyond_model = true`.
#[test]
fn robot_check_refuses_limits_beyond_the_model() {
    let work = tempfile::Builder::new().prefix("robot-limits-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sim = std::fs::read_to_string(configs().join("sim.toml")).unwrap();
    let fast = sim.replacen("max_velocity = 0.3", "max_velocity = 100.0", 1);
    let wide = sim
        .replacen("workspace_low = [0.55, -0.8, -0.1]", "workspace_low = [-100.0, -100.0, -100.0]", 1)
        .replacen("workspace_high = [0.8, -0.4, 0.25]", "workspace_high = [100.0, 100.0, 100.0]", 1);
    assert!(fast != sim && wide != sim, "sim.toml's envelope changed; update this test's replacements");
    for (name, text, key, limit) in
        [("fast", &fast, "max_velocity", "85.38"), ("wide", &wide, "workspace_low[0]", "0.8210")]
    {
        let path = work.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let o = o2o(work.path(), &["robot", "check", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name}: accepted:\n{}", String::from_utf8_lossy(&o.stdout));
        assert!(err.contains(key) && err.contains(limit) && err.contains("allow_beyond_model"), "{name}: {err}");
        let allowed = text.replacen("[envelope]", "[envelope]\nallow_beyond_model = true", 1);
        std::fs::write(&path, allowed).unwrap();
        let out = ok(&o2o(work.path(), &["robot", "check", path.to_str().unwrap()]), name);
        assert!(
            out.contains("WARNING") && out.contains(key) && out.contains("beyond them (allow_beyond_model = true)"),
            "{out}"
        );
    }
}
