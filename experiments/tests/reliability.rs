//! Run directories that survive anything, and a CLI that behaves in scripts (issue 17). Each
//! test names the numbered item it covers; each fails on the behaviour before the fix.
//!
//! The runs are SAC on InvertedPendulum-v5 with 32×32 networks on one thread: a few hundred
//! steps, a second or two each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{metrics_without_time, O2O};

/// A short SAC run: 200 random steps, 300 online; a checkpoint every 25 steps (at episode ends).
const SAC: &[&str] = &[
    "--preset",
    "sac-inverted-pendulum",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--rerun=off",
    "--set",
    "train.random_steps=200",
    "--set",
    "train.online_steps=300",
    "--set",
    "train.batch_size=32",
    "--set",
    "train.log_every=25",
    "--set",
    "eval.every=100",
    "--set",
    "eval.episodes=2",
    "--set",
    "checkpoint.every=25",
    "--set",
    "checkpoint.keep=3",
    "--set",
    "agent.critic.hidden=[32, 32]",
    "--set",
    "agent.actor.mlp.hidden=[32, 32]",
];

fn scratch(prefix: &str) -> PathBuf {
    tempfile::Builder::new().prefix(prefix).tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep()
}

fn o2o(args: &[&str]) -> Command {
    let mut c = Command::new(O2O);
    c.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `o2o train` of [`SAC`] into `runs` with extra arguments; the output.
fn train(runs: &Path, extra: &[&str]) -> Output {
    o2o(&["train"]).args(SAC).arg("--runs-dir").arg(runs).args(extra).output().unwrap()
}

/// The run directories in `runs` (not the hidden `.creating-*` folders).
fn run_dirs(runs: &Path) -> Vec<PathBuf> {
    let mut d: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    d.sort();
    d
}

fn resume(dir: &Path, extra: &[&str]) -> Output {
    o2o(&["resume"]).arg(dir).args(["--device", "cpu", "--threads", "1", "--rerun=off"]).args(extra).output().unwrap()
}

/// The uninterrupted reference run, made once per test that needs it.
fn reference(prefix: &str) -> PathBuf {
    let runs = scratch(prefix);
    let o = train(&runs, &[]);
    assert!(o.status.success(), "{}", text(&o));
    run_dirs(&runs).pop().unwrap()
}

fn killed_by_sigkill(o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(9)
}

/// Items 2 and 14 (fault injection): killed 50 times — during start-up, mid-step, mid-checkpoint,
/// mid-evaluation and before the summary — and resumed each time, every resume continues
/// (or is killed again) and the run ends with exactly the metrics of a run never stopped; a
/// half-started run is never left without its manifest; `o2o report` counts what finished.
#[test]
fn fifty_kills_at_random_moments_end_in_the_uninterrupted_metrics() {
    let want = metrics_without_time(&reference("kill-ref-"));
    let runs = scratch("kill-");
    let mut rng = o2o_agents::rng::AgentRng::new(2024);
    let (mut kills, mut finished_runs) = (0, 0);
    let mut points: BTreeMap<&str, usize> = BTreeMap::new();
    while kills < 50 {
        // A new run, killed at once after its directory appeared (or mid-step), then resumed
        // under random faults until it finishes.
        let start_fault = if rng.uniform() < 0.5 {
            "created:1".to_string()
        } else {
            format!("step:{}", 1 + (rng.uniform() * 40.0) as u64)
        };
        let before = run_dirs(&runs);
        let o = o2o(&["train"]).args(SAC).arg("--runs-dir").arg(&runs).env("O2O_FAULT", &start_fault).output().unwrap();
        assert!(killed_by_sigkill(&o), "train with O2O_FAULT={start_fault} was not killed: {}", text(&o));
        kills += 1;
        *points.entry(if start_fault.starts_with("created") { "created" } else { "step" }).or_default() += 1;
        let dir = run_dirs(&runs).into_iter().find(|d| !before.contains(d)).expect("the killed run's directory exists");
        assert!(
            dir.join("config.toml").is_file() && dir.join("manifest.json").is_file(),
            "{} lacks its config or manifest",
            dir.display()
        );
        loop {
            let u = [rng.uniform(), rng.uniform()];
            let (point, n) = match u[0] {
                x if x < 0.55 => ("step", 1 + (u[1] * 60.0) as u64),
                x if x < 0.75 => ("checkpoint", 1 + (u[1] * 3.0) as u64),
                x if x < 0.95 => ("eval", 1 + (u[1] * 4.0) as u64),
                _ => ("summary", 1),
            };
            let o = o2o(&["resume"])
                .arg(&dir)
                .args(["--device", "cpu", "--threads", "1", "--rerun=off"])
                .env("O2O_FAULT", format!("{point}:{n}"))
                .output()
                .unwrap();
            if killed_by_sigkill(&o) {
                kills += 1;
                *points.entry(point).or_default() += 1;
                continue;
            }
            assert!(o.status.success(), "resume of {} after a kill failed: {}", dir.display(), text(&o));
            break;
        }
        assert_eq!(
            metrics_without_time(&dir),
            want,
            "{} ended with other metrics than the uninterrupted run",
            dir.display()
        );
        finished_runs += 1;
    }
    assert!(points.len() >= 4, "kills should hit start-up, steps, checkpoints and evaluations: {points:?}");
    // Every directory is a finished run, and report sees them so.
    let out = scratch("kill-report-");
    let o = o2o(&["report"])
        .arg(&runs)
        .arg("--out")
        .arg(&out)
        .args(["--metric", "eval/return", "--reps", "100"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let rows = md.lines().filter(|l| l.contains("| finished |")).count();
    assert_eq!((rows, run_dirs(&runs).len()), (finished_runs, finished_runs), "{md}");
    eprintln!("{kills} kills over {finished_runs} runs: {points:?}");
}

/// Item 1: two resumes of one run at once — one refuses, naming the other; the run ends clean.
#[test]
fn two_resumes_of_one_run_one_refuses() {
    let runs = scratch("lock-");
    let o = o2o(&["train"]).args(SAC).arg("--runs-dir").arg(&runs).env("O2O_FAULT", "step:30").output().unwrap();
    assert!(killed_by_sigkill(&o));
    let dir = run_dirs(&runs).pop().unwrap();
    let lock = std::fs::read_to_string(dir.join(".lock")).unwrap();
    assert!(lock.starts_with("pid "), "the killed process's lock names it: {lock:?}");
    let spawn =
        || o2o(&["resume"]).arg(&dir).args(["--device", "cpu", "--threads", "1", "--rerun=off"]).spawn().unwrap();
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (ok, refused): (Vec<&Output>, Vec<&Output>) = [&a, &b].into_iter().partition(|o| o.status.success());
    assert_eq!((ok.len(), refused.len()), (1, 1), "a: {}\nb: {}", text(&a), text(&b));
    let err = text(refused[0]);
    assert!(err.contains("is in use by pid") && err.contains(&dir.display().to_string()), "{err}");
    assert!(text(ok[0]).contains("taking over the lock left by pid"), "{}", text(ok[0]));
    // No duplicated rows, no step going backwards.
    let m = metrics_without_time(&dir);
    let steps: Vec<(u64, u64)> =
        m.iter().map(|r| (r["grad_step"].as_u64().unwrap(), r["env_step"].as_u64().unwrap())).collect();
    assert!(steps.windows(2).all(|w| w[1].1 >= w[0].1), "env_step went backwards");
    assert_eq!(m, metrics_without_time(&reference("lock-ref-")));
}

/// Item 3: errors found before the run starts leave no run directory behind.
#[test]
fn bad_input_leaves_no_run_directory() {
    let runs = scratch("noleft-");
    let bad = runs.join("bad.hdf5");
    std::fs::write(&bad, b"not an hdf5 file").unwrap();
    let bad_set = format!("dataset.path={:?}", bad.display().to_string());
    let set = |kv: &str| vec!["--set".to_string(), kv.to_string()];
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("dataset file", [set("train.offline_ratio=0.5"), set(&bad_set)].concat(), "bad.hdf5"),
        ("unknown env", set("env=Nope-v0"), "Nope-v0"),
        // Issue 47 item 3: refused here, not as a NaN action 888 updates later.
        ("negative learning rate", set("agent.actor_lr=-1"), "agent.actor_lr"),
        ("zero learning rate", set("agent.temperature_lr=0"), "agent.temperature_lr"),
        ("replay smaller than a batch", set("train.replay_capacity=8"), "train.replay_capacity"),
        ("the seed given twice", [vec!["--seed".into(), "1".into()], set("seed=2")].concat(), "disagree"),
    ];
    for (what, extra, needle) in &cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let o = train(&runs, &extra);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(text(&o).contains(needle), "{what}: the error names {needle}: {}", text(&o));
        assert!(run_dirs(&runs).is_empty(), "{what} left {:?}", run_dirs(&runs));
    }
    // A malformed `--rerun connect` address (SAC's own `--rerun=off` left out).
    let o = o2o(&["train"])
        .args(SAC.iter().filter(|a| **a != "--rerun=off"))
        .args(["--rerun", "connect=notanaddr", "--runs-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not an address"), "{}", text(&o));
    assert!(run_dirs(&runs).is_empty(), "a bad --rerun address left {:?}", run_dirs(&runs));
    // A parent to fine-tune from, then parents that cannot be used.
    let parent_runs = scratch("noleft-parent-");
    assert!(train(&parent_runs, &[]).status.success());
    let parent = run_dirs(&parent_runs).pop().unwrap();
    let finetune = |from: &Path, extra: &[&str]| {
        o2o(&["finetune", "--from"])
            .arg(from)
            .args(["--steps", "50", "--device", "cpu", "--rerun=off", "--runs-dir"])
            .arg(&runs)
            .args(extra)
            .output()
            .unwrap()
    };
    // Another env: the parent's networks do not fit Hopper's sizes.
    let o = finetune(&parent, &["--env", "Hopper-v5"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // `run --from` a parent of another algorithm (a SAC agent into a CQL preset).
    let o = o2o(&["run", "--preset", "cql-hopper-medium", "--from"])
        .arg(&parent)
        .args([
            "--set",
            "env=InvertedPendulum-v5",
            "--set",
            "dataset.reward=\"none\"",
            "--device",
            "cpu",
            "--rerun=off",
            "--runs-dir",
        ])
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // A truncated parent checkpoint: refused with libtorch's message but none of its C++ frames.
    let last = o2o_experiments::run::checkpoint::latest(&parent).unwrap();
    let agent = last.join("agent.ot");
    let bytes = std::fs::read(&agent).unwrap();
    std::fs::write(&agent, &bytes[..bytes.len() / 3]).unwrap();
    let o = finetune(&parent, &[]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("frame #") && err.lines().count() < 8, "{err}");
    // No checkpoint at all.
    for c in o2o_experiments::run::checkpoint::list(&parent).unwrap() {
        std::fs::remove_dir_all(c).unwrap();
    }
    let o = finetune(&parent, &[]);
    assert!(o.status.code() == Some(2) && text(&o).contains("no complete checkpoint"), "{}", text(&o));
    assert!(run_dirs(&runs).is_empty(), "left {:?}", run_dirs(&runs));
}

/// Item 10: a damaged newest checkpoint is moved aside and the run continues from the one
/// before, exactly; `--checkpoint step-N` resumes from an older one on purpose.
#[test]
fn a_damaged_newest_checkpoint_falls_back_to_the_one_before() {
    let want = metrics_without_time(&reference("damage-ref-"));
    let runs = scratch("damage-");
    let o = o2o(&["train"]).args(SAC).arg("--runs-dir").arg(&runs).env("O2O_FAULT", "step:400").output().unwrap();
    assert!(killed_by_sigkill(&o));
    let dir = run_dirs(&runs).pop().unwrap();
    let all = o2o_experiments::run::checkpoint::list(&dir).unwrap();
    assert!(all.len() >= 2, "{all:?}");
    let newest = all.last().unwrap().clone();
    std::fs::write(newest.join("agent.ot"), b"garbage").unwrap();
    let o = resume(&dir, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("is damaged") && out.contains(".damaged-step-"), "{out}");
    assert!(!out.contains("frame #"), "{out}");
    assert_eq!(metrics_without_time(&dir), want);

    // On purpose: continue from the first checkpoint of a finished run; newer ones move aside.
    let first = o2o_experiments::run::checkpoint::list(&dir).unwrap()[0].clone();
    let name = first.file_name().unwrap().to_string_lossy().to_string();
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let o = resume(&dir, &["--checkpoint", &name]);
    assert!(o.status.success() && text(&o).contains(".discarded-step-"), "{}", text(&o));
    assert_eq!(metrics_without_time(&dir), want);
}

/// Items 7 and 11: a relative dataset path is stored absolute (fine-tuning from another folder
/// works); with stderr not a terminal, plain progress lines appear.
#[test]
fn relative_dataset_paths_and_plain_progress() {
    let work = scratch("relpath-");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/inverted-pendulum-sac-replay.hdf5");
    std::fs::copy(&data, work.join("replay.hdf5")).unwrap();
    let o = Command::new(O2O)
        .current_dir(&work)
        .args([
            "train",
            "--preset",
            "iql-hopper-medium",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--rerun=off",
            "--runs-dir",
            "runs",
        ])
        .args([
            "--set",
            "env=InvertedPendulum-v5",
            "--set",
            "dataset.path=replay.hdf5",
            "--set",
            "dataset.reward=\"none\"",
            "--set",
            "train.offline_steps=300",
        ])
        .args([
            "--set",
            "eval.every=0",
            "--set",
            "eval.episodes=1",
            "--set",
            "agent.critic.hidden=[32, 32]",
            "--set",
            "agent.value.hidden=[32, 32]",
            "--set",
            "agent.actor.mlp.hidden=[32, 32]",
        ])
        .args(["--progress-every", "0.05"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("o2o: step "), "no plain progress: {}", text(&o));
    let dir = run_dirs(&work.join("runs")).pop().unwrap();
    let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    let abs = std::fs::canonicalize(work.join("replay.hdf5")).unwrap();
    assert!(config.contains(&format!("path = {:?}", abs.display().to_string())), "{config}");
    let elsewhere = scratch("relpath-elsewhere-");
    let o = Command::new(O2O)
        .current_dir(&elsewhere)
        .args(["finetune", "--from"])
        .arg(&dir)
        .args(["--steps", "60", "--device", "cpu", "--rerun=off", "--progress", "off", "--runs-dir", "runs"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("o2o: step "), "--progress off still printed");
}

/// Item 13: Ctrl-C (SIGINT) writes a checkpoint at the next safe point and prints the resume
/// command; resuming ends exactly as a run never stopped.
#[test]
fn sigint_checkpoints_and_says_how_to_resume() {
    let want = metrics_without_time(&reference("sigint-ref-"));
    let runs = scratch("sigint-");
    let child = o2o(&["train"]).args(SAC).arg("--runs-dir").arg(&runs).spawn().unwrap();
    // Wait until the run is under way (its directory holds a metrics file).
    let t0 = Instant::now();
    while run_dirs(&runs).first().is_none_or(|d| !d.join("metrics.jsonl").exists())
        && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(150));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let dir = run_dirs(&runs).pop().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    if o.status.success() {
        // The run was faster than the signal: nothing to check.
        eprintln!("the run finished before SIGINT arrived");
        return;
    }
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains(&format!("o2o resume {}", dir.display())), "{err}");
    assert!(!o2o_experiments::run::checkpoint::list(&dir).unwrap().is_empty());
    let o = resume(&dir, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(metrics_without_time(&dir), want);
}

/// SIGTERM to `child`'s PID (not its group, as a supervisor sends it), `times` times 50 ms apart,
/// once `runs` holds `n` run directories with a metrics file (at most a minute); its output and
/// stderr.
fn sigterm_when_under_way(child: std::process::Child, runs: &Path, n: usize, times: usize) -> (Output, String) {
    let t0 = Instant::now();
    while run_dirs(runs).iter().filter(|d| d.join("metrics.jsonl").exists()).count() < n
        && t0.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..times {
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    (o, err)
}

/// Issue 47 C1: SIGTERM to a sweep's PID (not its group, as a supervisor sends it) reaches every
/// running seed once: each writes a checkpoint, no new seed starts, and the sweep names each
/// stopped run with its resume command ("stopped", not "failed") and the seed it did not start,
/// then exits with 130.
#[test]
fn sigterm_to_a_sweep_stops_its_runs_with_checkpoints_and_starts_no_more() {
    let runs = scratch("sweep-stop-");
    let child = o2o(&["train"])
        .args(SAC)
        .args(["--set", "train.online_steps=20000", "--seeds", "0..3", "--jobs", "2", "--runs-dir"])
        .arg(&runs)
        .spawn()
        .unwrap();
    // Both running seeds under way (each directory holds a metrics file).
    let (o, err) = sigterm_when_under_way(child, &runs, 2, 1);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let dirs = run_dirs(&runs);
    assert_eq!(dirs.len(), 2, "seed 2 never starts: {dirs:?}\n{err}");
    for dir in &dirs {
        assert!(err.contains(&format!("o2o resume {}", dir.display())), "no resume line for {}: {err}", dir.display());
        assert!(!dir.join("summary.json").exists(), "{} ran to its end", dir.display());
        assert!(
            !o2o_experiments::run::checkpoint::list(dir).unwrap().is_empty(),
            "{} has no checkpoint",
            dir.display()
        );
    }
    assert!(err.contains("seed 0: stopped at step") && err.contains("seed 1: stopped at step"), "{err}");
    assert!(!err.contains("failed"), "a stopped run is not a failed one: {err}");
    assert!(err.contains("not started: seeds 2; run them with --seeds 2"), "{err}");
}

/// C1 for experiments: SIGTERM to an `o2o experiment`'s PID (as a supervisor sends it) is
/// forwarded to its running run, which stops with a checkpoint; nothing new starts, no run is
/// left behind as an orphan (it used to run on after the experiment had died), and the
/// experiment says how to continue and exits with 130.
#[test]
fn sigterm_to_an_experiment_stops_its_run_with_a_checkpoint() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = scratch("experiment-stop-");
    let mut c = o2o(&["experiment", "wsrl-ablation", "--task", "hopper-medium", "--seeds", "1", "--jobs", "1"]);
    c.current_dir(root).args(["--device", "cpu", "--out"]).arg(&out);
    for s in [
        "train.offline_steps=200000",
        "train.warmup_steps=300",
        "train.online_steps=600",
        "train.online_batch_size=128",
        "checkpoint.every=0",
        "agent.critic.hidden=[16, 16]",
        "agent.actor.mlp.hidden=[16, 16]",
    ] {
        c.args(["--set", s]);
    }
    let child = c.spawn().unwrap();
    // The pre-training under way (its run directory holds a metrics file).
    let pretrain = out.join("runs/pretrain/seed-0");
    let (o, err) = sigterm_when_under_way(child, &pretrain, 1, 1);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("the experiment was stopped") && err.contains("run the same command again"), "{err}");
    assert!(err.contains("pretrain seed 0 stopped with a checkpoint"), "{err}");
    let dirs = run_dirs(&pretrain);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(!dirs[0].join("summary.json").exists(), "the pre-training ran to its end: {err}");
    assert!(!o2o_experiments::run::checkpoint::list(&dirs[0]).unwrap().is_empty(), "no checkpoint: {err}");
    // Nothing started after the stop, and no o2o process of this experiment is left.
    assert!(!out.join("runs/wsrl").exists() && !out.join("runs/rlpd").exists(), "a run started after the stop");
    let mine = out.display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&mine))
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// The same SIGTERM delivered twice (a supervisor signalling the whole cgroup reaches a run both
/// directly and through the sweep or experiment that forwards it) is one stop: the run still
/// writes its checkpoint and prints its resume line, instead of quitting at the second signal.
#[test]
fn a_sigterm_delivered_twice_is_one_clean_stop() {
    let runs = scratch("double-term-");
    let child = o2o(&["train"])
        .args(SAC)
        .args(["--set", "train.online_steps=200000", "--runs-dir"])
        .arg(&runs)
        .spawn()
        .unwrap();
    let (o, err) = sigterm_when_under_way(child, &runs, 1, 2);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let dir = run_dirs(&runs).pop().unwrap();
    assert!(err.contains(&format!("o2o resume {}", dir.display())), "{err}");
    assert!(!o2o_experiments::run::checkpoint::list(&dir).unwrap().is_empty(), "no checkpoint: {err}");
}

/// Issue 47 item 3: an agent driven to NaN by an absurd learning rate is named as the culprit,
/// with the update number and the last update's losses, not the env that refused its action.
#[test]
fn a_diverged_agent_is_blamed_with_its_update_and_losses() {
    let runs = scratch("diverge-");
    let o = train(&runs, &["--set", "agent.critic_lr=1e30", "--set", "agent.actor_lr=1e30"]);
    let err = text(&o);
    assert!(!o.status.success(), "the run should diverge: {err}");
    assert!(err.contains("the agent's output is not finite"), "{err}");
    assert!(err.contains("the losses of update"), "{err}");
    assert!(err.contains("the agent's action is not finite at index"), "{err}");
}

/// Issue 47 item 4: `--max-time` stops a run at its next safe point with a checkpoint, as
/// Ctrl-C does, and says which limit it was; a malformed duration is refused before the run
/// directory exists.
#[test]
fn max_time_stops_at_a_checkpoint_and_bad_durations_are_refused() {
    let runs = scratch("max-time-");
    let o = train(&runs, &["--set", "train.online_steps=200000", "--max-time", "4s"]);
    let err = text(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("--max-time 4s reached"), "{err}");
    let dir = run_dirs(&runs).pop().unwrap();
    assert!(err.contains(&format!("o2o resume {}", dir.display())), "{err}");
    assert!(!o2o_experiments::run::checkpoint::list(&dir).unwrap().is_empty());
    assert!(!dir.join("summary.json").exists());
    for bad in ["0s", "-5m", "ten", "3w"] {
        let runs = scratch("max-time-bad-");
        let o = train(&runs, &[&format!("--max-time={bad}")]);
        assert!(!o.status.success() && text(&o).contains("--max-time"), "{bad}: {}", text(&o));
        assert!(run_dirs(&runs).is_empty(), "{bad}: a run directory was made");
    }
}

/// `--max-time` on a sweep bounds the whole sweep: when it passes, the running seed stops with
/// its checkpoint and the seeds not yet started stay unstarted (each seed does not get the full
/// budget from its own start).
#[test]
fn max_time_bounds_a_whole_sweep() {
    let runs = scratch("max-time-sweep-");
    let o = o2o(&["train"])
        .args(SAC)
        .args(["--set", "train.online_steps=200000", "--seeds", "0..3", "--jobs", "1", "--max-time", "5s"])
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .unwrap();
    let err = text(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert_eq!(err.matches("--max-time 5s reached").count(), 1, "only the sweep's own limit fires: {err}");
    let dirs = run_dirs(&runs);
    assert_eq!(dirs.len(), 1, "seeds 1 and 2 never start: {dirs:?}\n{err}");
    assert!(!o2o_experiments::run::checkpoint::list(&dirs[0]).unwrap().is_empty(), "{err}");
    assert!(err.contains("seed 0: stopped at step"), "{err}");
    assert!(err.contains("not started: seeds 1, 2"), "{err}");
}

/// Items 12 and 13: a budget whose online batch never fills says so (and in the stage table);
/// `--rerun spawn` without a display saves the recording; `finetune` of an offline-only run
/// needs `--steps`.
#[test]
fn shrunk_budgets_headless_spawn_and_finetune_steps() {
    let runs = scratch("budget-");
    let sac: Vec<&str> = SAC.iter().copied().filter(|a| *a != "--rerun=off").collect();
    let o = o2o(&["run"])
        .args(&sac)
        .args(["--set", "train.online_batch_size=4096", "--rerun", "spawn", "--runs-dir"])
        .arg(&runs)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.matches("fine-tuning makes no updates").count() >= 2,
        "the warning goes to stderr and under the stage table: {out}"
    );
    assert!(out.contains("no display here"), "{out}");
    let dir = run_dirs(&runs).pop().unwrap();
    assert!(dir.join("recording.rrd").is_file(), "the recording was not saved");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary["warnings"][0].as_str().unwrap().contains("no updates"));

    // An offline-only parent has no online steps to reuse: --steps is required.
    let work = scratch("budget-iql-");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/inverted-pendulum-sac-replay.hdf5");
    let o = o2o(&[
        "train",
        "--preset",
        "iql-hopper-medium",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--rerun=off",
        "--runs-dir",
    ])
    .arg(&work)
    .args([
        "--set",
        "env=InvertedPendulum-v5",
        "--set",
        &format!("dataset.path={:?}", data.display().to_string()),
        "--set",
        "dataset.reward=\"none\"",
        "--set",
        "train.offline_steps=50",
        "--set",
        "eval.episodes=1",
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let parent = run_dirs(&work).pop().unwrap();
    let o = o2o(&["finetune", "--from"]).arg(&parent).args(["--rerun=off", "--runs-dir"]).arg(&work).output().unwrap();
    assert!(o.status.code() == Some(2) && text(&o).contains("--steps is required"), "{}", text(&o));
}

/// Items 4 and 5: `--rerun off` before a positional does not swallow it; a closed pipe ends
/// `o2o env list` quietly (no panic, no exit 101).
#[test]
fn rerun_flag_and_closed_pipes() {
    let runs = scratch("flags-");
    let o = train(&runs, &["--set", "train.online_steps=20", "--set", "train.random_steps=20"]);
    assert!(o.status.success(), "{}", text(&o));
    let dir = run_dirs(&runs).pop().unwrap();
    let o = o2o(&["resume", "--rerun", "off"]).arg(&dir).output().unwrap();
    assert!(o.status.success() && text(&o).contains("already finished"), "{}", text(&o));

    let mut child =
        Command::new(O2O).args(["env", "list"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked") && o.status.code() != Some(101), "{err}");
}

/// `--json`, `--print-config`, `o2o eval`, and a seed sweep ready for `report`.
#[test]
fn json_print_config_eval_and_seed_sweeps() {
    let runs = scratch("cli-");
    let o = o2o(&["train"]).args(SAC).args(["--print-config", "--runs-dir"]).arg(&runs).output().unwrap();
    let printed = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success() && printed.contains("online_steps = 300") && printed.contains("[agent]"), "{printed}");
    // Issue 47 item 4: the random steps come on top of online_steps, and the header says so.
    assert!(printed.starts_with("# budget: 200 random + 300 online env steps (500 env steps)\n"), "{printed}");
    let parsed: Result<toml::Table, _> = printed.parse();
    assert!(parsed.is_ok(), "the printed config is still TOML: {parsed:?}");
    assert!(run_dirs(&runs).is_empty(), "--print-config ran something");

    let o = train(&runs, &["--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let line = String::from_utf8_lossy(&o.stdout).lines().last().unwrap().to_string();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!((v["finished"].as_bool(), v["env_steps"].as_u64()), (Some(true), Some(500)));
    let dir = PathBuf::from(v["run_dir"].as_str().unwrap());

    let o = o2o(&["eval"])
        .arg(&dir)
        .args(["--episodes", "3", "--seed", "7", "--json", "--device", "cpu"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((e["episodes"].as_u64(), e["seed"].as_u64()), (Some(3), Some(7)));
    assert!(e["mean_return"].as_f64().unwrap() > 0.0);
    let again = o2o(&["eval"])
        .arg(&dir)
        .args(["--episodes", "3", "--seed", "7", "--json", "--device", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.stdout, again.stdout, "evaluation is deterministic");

    let sweep = scratch("sweep-");
    let o = o2o(&["train"])
        .args(SAC)
        .args(["--set", "train.online_steps=40", "--seeds", "0..2", "--jobs", "2", "--runs-dir"])
        .arg(&sweep)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("seed 0:") && out.contains("seed 1:"), "{out}");
    assert_eq!(run_dirs(&sweep).len(), 2);
    // The default metric is empty for an env without a D4RL score: report says what to use.
    let o = o2o(&["report"]).arg(&sweep).arg("--out").arg(scratch("sweep-report-default-")).output().unwrap();
    assert!(!o.status.success() && text(&o).contains("use --metric eval/return"), "{}", text(&o));
    let rep = scratch("sweep-report-");
    let o = o2o(&["report"])
        .arg(&sweep)
        .arg("--out")
        .arg(&rep)
        .args(["--metric", "eval/return", "--reps", "100"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    assert!(
        md.lines().any(|l| l.starts_with("| sac · InvertedPendulum-v5") && l.contains("| sac-inverted-pendulum | 2 |")),
        "{md}"
    );
}

/// Items 8 and 9: actions far outside the action box are reported by `dataset info` and at
/// training time; a 0-row file warns; a write failure is not called a corrupt input; `dataset
/// view` reads a Minari folder.
#[test]
fn dataset_warnings_write_failures_and_minari_view() {
    use o2o_datasets::d4rl::D4rlDataset;
    let work = scratch("data-");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/inverted-pendulum-sac-replay.hdf5");
    let mut ds = D4rlDataset::read(&src).unwrap();
    let half = ds.len() / 2;
    for a in ds.actions.iter_mut().take(half) {
        *a *= 50.0;
    }
    let wide = work.join("wide.hdf5");
    ds.write(&wide).unwrap();
    // `dataset info` checks against the registry env's box: a hopper file with scaled actions.
    let hopper = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/hopper-small/hopper-medium-v2.hdf5");
    let mut h = D4rlDataset::read(&hopper).unwrap();
    for a in h.actions.iter_mut() {
        *a *= 50.0;
    }
    let wide_hopper = work.join("hopper-medium-v2.hdf5");
    h.write(&wide_hopper).unwrap();
    let o = o2o(&["dataset", "info"]).arg(&wide_hopper).output().unwrap();
    let out = text(&o);
    assert!(
        o.status.success()
            && out.contains("lie outside the env's action range [-1, 1]")
            && !out.contains("warnings: none"),
        "{out}"
    );
    let o = o2o(&[
        "train",
        "--preset",
        "iql-hopper-medium",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--rerun=off",
        "--runs-dir",
    ])
    .arg(work.join("runs"))
    .args([
        "--set",
        "env=InvertedPendulum-v5",
        "--set",
        &format!("dataset.path={:?}", wide.display().to_string()),
        "--set",
        "dataset.reward=\"none\"",
        "--set",
        "train.offline_steps=10",
        "--set",
        "eval.episodes=1",
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("lie outside the env's action range [-3, 3]") && err.contains("actions[:, 0]"), "{err}");
    let w = ds.action_range_warnings(&[-3.0], &[3.0]);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("% of rows"), "{w:?}");

    let empty = work.join("empty.hdf5");
    D4rlDataset::empty(empty.clone(), 4, 1).write(&empty).unwrap();
    let o = o2o(&["dataset", "info"]).arg(&empty).output().unwrap();
    assert!(text(&o).contains("0 rows"), "{}", text(&o));

    let o = o2o(&["dataset", "convert"])
        .arg(&src)
        .arg(work.join("no/such/folder/out.hdf5"))
        .args(["--to", "d4rl"])
        .output()
        .unwrap();
    let err = text(&o);
    assert!(!o.status.success() && err.contains("cannot create") && !err.contains("not a readable HDF5"), "{err}");

    let minari = work.join("minari");
    let o = o2o(&["dataset", "convert"]).arg(&src).arg(&minari).args(["--to", "minari"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = o2o(&["dataset", "view"])
        .arg(&minari)
        .args(["--env", "InvertedPendulum-v5", "--episodes", "1", "--out"])
        .arg(work.join("m.rrd"))
        .output()
        .unwrap();
    assert!(o.status.success() && work.join("m.rrd").is_file(), "{}", text(&o));
}
