//! Stopping a run cleanly: SIGINT (Ctrl-C) and SIGTERM (a scheduler, a supervisor) ask the
//! runner to stop; it writes a checkpoint at the next safe point (any offline step, the next
//! episode end online) and returns [`Interrupted`], and the CLI prints the `o2o resume` command.
//! A second signal before that ends the process at once (a SIGTERM within 2 s of the first is
//! taken as the same stop delivered twice).
//!
//! Only the CLI installs the handlers ([`install`]); a program using the library can install
//! them too, or call [`request`] from another thread (a GUI's stop button, a robot's e-stop
//! supervisor) to get the same clean stop.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// A run stopped on request, with a checkpoint to continue from.
#[derive(Debug, thiserror::Error)]
#[error("stopped on request at step {step}; checkpoint {}", checkpoint.display())]
pub struct Interrupted {
    /// The run directory.
    pub dir: PathBuf,
    /// The checkpoint written when it stopped.
    pub checkpoint: PathBuf,
    /// The loop step it stopped at.
    pub step: u64,
}

/// When the first stop signal arrived (CLOCK_MONOTONIC, ms).
static FIRST_MS: AtomicU64 = AtomicU64::new(0);

/// A SIGTERM this soon after the first signal is the same stop arriving twice, not a second
/// request: a supervisor that signals a whole cgroup or session (systemd, Slurm) reaches a run
/// directly and through the sweep or experiment that forwards it.
const REPEAT_GRACE_MS: u64 = 2000;

fn monotonic_ms() -> u64 {
    // SAFETY: clock_gettime is async-signal-safe and only writes the struct it is given.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

extern "C" fn on_signal(sig: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        if sig == libc::SIGTERM && monotonic_ms().saturating_sub(FIRST_MS.load(Ordering::SeqCst)) < REPEAT_GRACE_MS {
            return;
        }
        // The second signal: the user wants out now (async-signal-safe exit).
        unsafe { libc::_exit(130) };
    }
    FIRST_MS.store(monotonic_ms(), Ordering::SeqCst);
    // Only async-signal-safe calls here: a fixed message with write(2).
    let msg = b"\no2o: stopping at the next safe point (writing a checkpoint); signal again to quit at once\n";
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Route SIGINT and SIGTERM to [`request`].
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

extern "C" fn on_stop_signal(_: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        unsafe { libc::_exit(130) };
    }
}

/// Route SIGINT and SIGTERM to [`request`] without a message: for commands that stop
/// something other than a run (`o2o fleet server` stops its nats-server) and say so themselves.
/// Installing a handler also undoes an inherited SIG_IGN (a shell's background job ignores
/// SIGINT), so a signal sent to the process's PID is always heard.
pub fn install_silent() {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Ask the running loop to stop at its next safe point.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Set up `cmd` (an `o2o` child a sweep or an experiment starts) to be stopped only through its
/// parent: in a process group of its own, so a terminal's Ctrl-C does not reach it twice (a second
/// signal makes a run quit without its checkpoint), and sent SIGTERM if the parent dies
/// (`PR_SET_PDEATHSIG`), so no run is orphaned. The parent forwards a stop with [`forward`].
pub fn child_stopped_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Ask a child set up by [`child_stopped_with_parent`] to stop at its next safe point.
pub fn forward(child: &std::process::Child) {
    // SAFETY: kill has no memory-safety preconditions; a child that has exited and not been
    // waited for is still ours (a zombie), so the pid cannot name another process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
}

/// Forget an earlier request, so that a process which goes on after a stopped run (the Python
/// bindings, a GUI) can start the next run.
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}
