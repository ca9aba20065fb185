//! The run directory: `runs/<preset>-<seed>-<timestamp>/` with `config.toml`, `manifest.json`,
//! `metrics.jsonl`, `checkpoints/` and, at the end, `summary.json`.
//!
//! Every file is written whole (temp file, then rename), so a killed run never leaves a
//! half-written file behind; `metrics.jsonl` is append-only and truncated back to the last
//! checkpoint's length on resume.

use super::config::RunConfig;
use super::state::{EvalResult, PhaseEval, RunnerState};
use crate::Error;
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// File names inside a run directory.
pub const CONFIG: &str = "config.toml";
/// `manifest.json`: where the run came from.
pub const MANIFEST: &str = "manifest.json";
/// `metrics.jsonl`: one JSON object per record.
pub const METRICS: &str = "metrics.jsonl";
/// `summary.json`: how the run ended.
pub const SUMMARY: &str = "summary.json";
/// The checkpoints folder.
pub const CHECKPOINTS: &str = "checkpoints";
/// The run's env transitions as a D4RL-format file (`train.record_dataset`).
pub const DATASET: &str = "dataset.hdf5";

/// `summary.json`: how the run ended.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Summary {
    /// The run reached its last step.
    pub finished: bool,
    /// Loop steps done.
    pub steps: u64,
    /// Gradient updates done.
    pub grad_steps: u64,
    /// Env steps done.
    pub env_steps: u64,
    /// Training episodes finished.
    pub episodes: u64,
    /// Seconds this process ran (a resumed run counts only its own part).
    pub wall_s: f64,
    /// The last evaluation.
    pub final_eval: Option<EvalResult>,
    /// The best evaluation (by mean return).
    pub best_eval: Option<EvalResult>,
    /// Evaluations at the start and at the end of each phase (`eval.at_start`,
    /// `eval.at_phase_end`).
    pub phase_evals: Vec<PhaseEval>,
    /// The final checkpoint, relative to the run directory.
    pub checkpoint: String,
    /// What the budget made useless (e.g. a fine-tuning phase with no updates).
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Summary {
    /// The summary of a run that finished with the checkpoint `ckpt` holding `state`.
    pub fn finished(dir: &Path, ckpt: &Path, state: &RunnerState, wall_s: f64, warnings: Vec<String>) -> Self {
        Self {
            finished: true,
            steps: state.step,
            grad_steps: state.grad_step,
            env_steps: state.env_step,
            episodes: state.episode,
            wall_s,
            final_eval: state.last_eval,
            best_eval: state.best_eval,
            phase_evals: state.phase_evals.clone(),
            checkpoint: ckpt.strip_prefix(dir).unwrap_or(ckpt).display().to_string(),
            warnings,
        }
    }
}

/// The lock file inside a run directory (see [`RunLock`]).
pub const LOCK: &str = ".lock";

/// Prefix of a run directory being created (renamed into place once complete).
pub const CREATING: &str = ".creating-";

/// Create a run directory under `runs_dir` named `<name>-<seed>-<UTC timestamp>` (a `-2`,
/// `-3`, … suffix if that exists already) atomically: `fill` writes its files (config,
/// manifest) into a hidden `.creating-…` folder, which is renamed into place only when `fill`
/// succeeded. So a run directory, once it exists, always has its config and manifest, and a
/// failure or a kill before that leaves no run directory (a killed creation's folder is removed
/// by the next one). The returned lock is held on the new directory.
pub fn create(
    runs_dir: &Path,
    name: &str,
    seed: u64,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<(PathBuf, RunLock)> {
    std::fs::create_dir_all(runs_dir)
        .with_context(|| format!("cannot create the runs folder {}", runs_dir.display()))?;
    remove_abandoned_creations(runs_dir);
    let base = format!("{name}-{seed}-{}", utc_timestamp_compact());
    let tmp = runs_dir.join(format!("{CREATING}{base}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("cannot remove the stale {}", tmp.display()))?;
    }
    std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let filled = (|| {
        std::fs::create_dir(tmp.join(CHECKPOINTS))
            .with_context(|| format!("cannot create {}/{CHECKPOINTS}", tmp.display()))?;
        let lock = RunLock::acquire(&tmp)?;
        fill(&tmp)?;
        Ok(lock)
    })();
    let lock = match filled {
        Ok(lock) => lock,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    for k in 1..1000 {
        let dir = if k == 1 { runs_dir.join(&base) } else { runs_dir.join(format!("{base}-{k}")) };
        match rename_noreplace(&tmp, &dir) {
            Ok(()) => {
                if let Ok(d) = std::fs::File::open(runs_dir) {
                    let _ = d.sync_all();
                }
                super::fault::point("created");
                return Ok((dir, lock));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e).with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display()));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    bail!("cannot find a free run directory name for {base} in {}", runs_dir.display())
}

/// `rename(from, to)` that fails with `AlreadyExists` instead of replacing `to`.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let (f, t) =
        (std::ffi::CString::new(from.as_os_str().as_bytes())?, std::ffi::CString::new(to.as_os_str().as_bytes())?);
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        // A file system without RENAME_NOREPLACE: check, then rename (not atomic, but runs
        // directories are named by the second and the pid-named temp folder).
        Some(libc::EINVAL) | Some(libc::ENOSYS) if !to.exists() => std::fs::rename(from, to),
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "exists"))
        }
        _ => Err(err),
    }
}

/// Remove `.creating-*` folders whose creating process is gone (killed mid-creation).
fn remove_abandoned_creations(runs_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(runs_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) =
            name.strip_prefix(CREATING).and_then(|r| r.rsplit('-').next()).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !process_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether a process with this pid exists on this machine.
pub fn process_alive(pid: i32) -> bool {
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// An exclusive hold on a run directory while a process trains in it: an advisory `flock` on
/// `<dir>/.lock`, released by the kernel when the process ends however it ends, so a lock left
/// by a killed process is taken over (with a note naming it) and a live one is refused.
#[derive(Debug)]
pub struct RunLock {
    file: std::fs::File,
}

impl RunLock {
    /// Take the lock of the run in `dir`, or fail naming the process that holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        use std::io::{Read, Seek, Write};
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim().to_string();
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                // The holder writes its name right after taking the lock: read it again.
                let mut who = String::new();
                for _ in 0..50 {
                    who = std::fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                    if !who.is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                let who = if who.is_empty() { "another o2o process".to_string() } else { who };
                let text = anyhow!(
                    "{} is in use by {who}; wait for it to end (or stop it) before running it again",
                    dir.display()
                );
                return Err(Error::run_in_use(dir, who, text).into());
            }
            return Err(err).with_context(|| format!("cannot lock {}", path.display()));
        }
        if !holder.is_empty() {
            eprintln!("note: {}: taking over the lock left by {holder}, which is no longer running", dir.display());
        }
        let me = format!("pid {} on {} since {}", std::process::id(), Machine::hostname(), utc_timestamp());
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(me.as_bytes())?;
        file.sync_all()?;
        Ok(Self { file })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // A clean end leaves an empty lock file: only a killed holder's name stays behind.
        let _ = self.file.set_len(0);
    }
}

/// Write `bytes` to `path` atomically: a temp file beside it, synced, then renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let file_name = path.file_name().with_context(|| format!("{} has no file name", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", file_name.to_string_lossy()));
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.sync_all().with_context(|| format!("cannot sync {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

/// Write a value as pretty JSON, atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// The config of the run in `dir`; an [`Error::RunDir`] when it has no `config.toml` that reads
/// as a run config.
pub fn read_config(dir: &Path) -> Result<RunConfig, Error> {
    RunConfig::read(&dir.join(CONFIG)).map_err(|e| {
        let text = anyhow::Error::from(e).context(format!("{} is not a run directory", dir.display()));
        Error::run_dir(dir, text)
    })
}

/// Write the resolved config, atomically.
pub fn write_config(dir: &Path, config: &RunConfig) -> Result<()> {
    write_atomic(&dir.join(CONFIG), config.to_toml_string()?.as_bytes())
}

/// Where a file came from: the o2o build and the command line that wrote it. Every manifest
/// o2o writes (a run's, a made benchmark's, AntMaze's, Adroit's) carries these four keys at its
/// top level (`#[serde(flatten)]`), made in one place by [`Provenance::now`].
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The o2o version that wrote it.
    pub o2o_version: String,
    /// `git rev-parse HEAD` of the source tree the binary was built from (`-dirty` with
    /// uncommitted changes), or "unknown"; see [`git_revision`].
    pub git_revision: String,
    /// When it was written (UTC, RFC 3339).
    pub created_utc: String,
    /// The command line that wrote it.
    pub command: Vec<String>,
}

impl Provenance {
    /// This binary, this process's command line, now.
    pub fn now() -> Self {
        Self {
            o2o_version: env!("CARGO_PKG_VERSION").to_string(),
            git_revision: git_revision(),
            created_utc: utc_timestamp(),
            command: std::env::args().collect(),
        }
    }
}

/// `manifest.json`: where the run came from and what it ran on.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Manifest {
    /// The o2o version, source revision, creation time and command line of the run.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The preset (or config name).
    pub preset: String,
    /// The algorithm.
    pub algo: String,
    /// The env id.
    pub env: String,
    /// The run seed and the seeds derived from it.
    pub seeds: Seeds,
    /// The offline data, when the run has some.
    pub dataset: Option<DatasetInfo>,
    /// The run this one started from, for fine-tuning runs.
    pub parent: Option<ParentInfo>,
    /// The device it started on.
    pub device: String,
    /// libtorch's intra-op threads.
    pub torch_threads: i64,
    /// The machine it started on.
    pub machine: Machine,
    /// Each `o2o resume` of this run: when, and from which checkpoint.
    #[serde(default)]
    pub resumes: Vec<ResumeInfo>,
    /// ImagineBench runs: where the instruction vectors came from (the built-in encoding, or
    /// which `{sentence → vector}` table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_embeddings: Option<String>,
    /// What trained the run when not the single-process runner: [`FLEET_LEARNER`] for
    /// `o2o fleet learner`, which learns from transitions that actor processes send through
    /// NATS JetStream. Absent: `o2o run`/`train`/`finetune` (and every run written before this
    /// field; `o2o report` then recognises a fleet learner by its `fleet.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<String>,
}

/// [`Manifest::trainer`] of a run trained by `o2o fleet learner`.
pub const FLEET_LEARNER: &str = "fleet learner";

/// The run seed and the seeds derived from it.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Seeds {
    /// The run seed.
    pub run: u64,
    /// The agent's seed.
    pub agent: u64,
    /// The runner RNG's seed.
    pub runner_rng: u64,
    /// Episode k of training resets with `derive_seed(run, 1, k)`, evaluation episode k with
    /// `derive_seed(run, 2, k)` (see `actor.rs`).
    pub episode_seed_rule: String,
}

/// The offline data a run used.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DatasetInfo {
    /// The registry id, when it has one.
    pub id: Option<String>,
    /// The file (or `(in-memory dataset)`).
    pub path: String,
    /// sha256 of the file, or of the contents for data in memory.
    pub sha256: String,
    /// Transitions built from it.
    pub transitions: usize,
}

/// The run a fine-tuning run started from.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ParentInfo {
    /// The parent run directory.
    pub run_dir: String,
    /// The checkpoint started from.
    pub checkpoint: String,
    /// The parent's git revision.
    pub git_revision: Option<String>,
}

/// One resume.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ResumeInfo {
    /// When.
    pub at_utc: String,
    /// The checkpoint continued from.
    pub checkpoint: String,
    /// The device it continued on.
    pub device: String,
}

/// The machine a run ran on.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// CPU model.
    pub cpu_model: String,
    /// Logical cores.
    pub cores: usize,
    /// Operating system.
    pub os: String,
    /// The libtorch loaded.
    pub torch: String,
    /// The MuJoCo loaded.
    pub mujoco: String,
}

impl Machine {
    /// This machine's host name.
    pub fn hostname() -> String {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
        read("/proc/sys/kernel/hostname").or_else(|| read("/etc/hostname")).unwrap_or_else(|| "unknown".into())
    }

    /// Describe this machine; anything unreadable is "unknown".
    pub fn current() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
        let cpu_model = read("/proc/cpuinfo")
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
                })
            })
            .unwrap_or_else(|| "unknown".into());
        Self {
            hostname: Self::hostname(),
            cpu_model,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            torch: crate::paths::libtorch_version().unwrap_or_else(|e| format!("unknown ({e})")),
            mujoco: o2o_envs::mujoco_version(),
        }
    }
}

/// The source revision this binary was built from: `git rev-parse HEAD` at build time
/// (`experiments/build.rs`), with `-dirty` when the tree it was built from still has the same
/// HEAD and uncommitted changes to tracked files; "unknown" for a build outside a git checkout.
/// When the checkout has moved on since the build (HEAD is another commit now, or the tree is
/// gone), the build's revision alone: it is the code that runs, whatever the tree holds now.
pub fn git_revision() -> String {
    revision_of_build(env!("O2O_BUILD_GIT_REVISION"), Path::new(env!("CARGO_MANIFEST_DIR")))
}

fn revision_of_build(built: &str, tree: &Path) -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if built.is_empty() {
        return "unknown".into();
    }
    let same_head = tree.is_dir() && run(&["rev-parse", "HEAD"]).is_some_and(|h| h == built);
    let dirty = same_head && run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{built}-dirty")
    } else {
        built.to_string()
    }
}

/// Now as `2026-11-30T10:58:11Z`.
pub fn utc_timestamp() -> String {
    let (y, mo, d, h, mi, s) = utc_now();
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Now as `20261130T105811Z` (for directory names).
pub fn utc_timestamp_compact() -> String {
    let (y, mo, d, h, mi, s) = utc_now();
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

fn utc_now() -> (i64, u32, u32, u32, u32, u32) {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    civil_from_unix(secs)
}

/// Unix seconds → (year, month, day, hour, minute, second) in UTC, by the days-to-civil
/// algorithm on the proleptic Gregorian calendar (eras of 400 years = 146097 days).
fn civil_from_unix(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (sod / 3600) as u32, (sod % 3600 / 60) as u32, (sod % 60) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The revision is the build's: `-dirty` only while the tree is at that commit with edits,
    /// the build's alone once the tree has moved on or is gone.
    #[test]
    fn the_revision_is_the_builds_not_the_trees() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path();
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
                .args(args)
                .output()
                .expect("git runs");
            assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        git(&["init", "-q"]);
        std::fs::write(repo.join("a.txt"), "1").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "one"]);
        let first = git(&["rev-parse", "HEAD"]);
        assert_eq!(revision_of_build(&first, repo), first);
        std::fs::write(repo.join("a.txt"), "2").unwrap();
        assert_eq!(revision_of_build(&first, repo), format!("{first}-dirty"));
        // A commit after the build: the binary still runs `first`'s code, edits or not.
        git(&["commit", "-qam", "two"]);
        std::fs::write(repo.join("a.txt"), "3").unwrap();
        assert_eq!(revision_of_build(&first, repo), first);
        assert_eq!(revision_of_build(&first, &repo.join("gone")), first);
        assert_eq!(revision_of_build("", repo), "unknown");
    }

    #[test]
    fn civil_dates_match_known_instants() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil_from_unix(1_796_036_291), (2026, 11, 30, 10, 58, 11));
    }

    #[test]
    fn run_dirs_are_unique_and_complete() {
        let tmp = tempfile::tempdir().unwrap();
        let fill = |d: &Path| Ok(std::fs::write(d.join(CONFIG), b"x")?);
        let (a, _la) = create(tmp.path(), "sac-x", 3, fill).unwrap();
        let (b, _lb) = create(tmp.path(), "sac-x", 3, fill).unwrap();
        assert_ne!(a, b);
        assert!(a.join(CHECKPOINTS).is_dir() && b.join(CHECKPOINTS).is_dir() && a.join(CONFIG).is_file());
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("sac-x-3-"));
        // A failed fill leaves nothing behind.
        assert!(create(tmp.path(), "sac-y", 3, |_| anyhow::bail!("bad dataset")).is_err());
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_held_lock_is_refused_and_a_dead_holders_lock_taken_over() {
        let tmp = tempfile::tempdir().unwrap();
        let held = RunLock::acquire(tmp.path()).unwrap();
        let err = Error::from(RunLock::acquire(tmp.path()).unwrap_err());
        assert!(matches!(&err, Error::RunInUse { holder, .. } if holder.starts_with("pid ")), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("is in use by pid") && err.contains(&std::process::id().to_string()), "{err}");
        drop(held);
        assert_eq!(std::fs::read_to_string(tmp.path().join(LOCK)).unwrap(), "", "a clean end clears the lock file");
        // A holder killed without cleaning up leaves its name; the lock itself is free.
        std::fs::write(tmp.path().join(LOCK), "pid 999999 on elsewhere since 2026-01-01T00:00:00Z").unwrap();
        let _taken = RunLock::acquire(tmp.path()).unwrap();
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
