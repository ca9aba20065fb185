//! `o2o view <run-dir>`: open a run's Rerun recording in the set-up's viewer.
//!
//! The viewer is the `rerun` command that `scripts/setup.sh` installs into the virtualenv
//! (`rerun-sdk` of the same version as the SDK o2o links, so the file format matches). On a
//! machine without a display, `--web` serves the web viewer on 127.0.0.1 instead; the command to
//! do that by hand (and the SSH tunnel to look at it from a laptop) is printed either way.

use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_experiments::logging::sinks::recording_files;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `o2o view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// A run directory (holding recording.rrd) or an .rrd file.
    pub run: PathBuf,
    /// Serve the web viewer on 127.0.0.1 instead of opening a window (for a machine without a display).
    #[arg(long)]
    pub web: bool,
    /// Port of the web viewer page (with --web).
    #[arg(long, default_value_t = 9090)]
    pub web_port: u16,
    /// Port of the viewer's data server (with --web).
    #[arg(long, default_value_t = 9876)]
    pub grpc_port: u16,
    /// Only print the commands, start nothing.
    #[arg(long)]
    pub print: bool,
}

/// The set-up's `rerun` executable.
pub fn rerun_executable() -> PathBuf {
    o2o_experiments::paths::venv_dir().join("bin/rerun")
}

/// The recording files to open for `run` (a run directory or a file).
fn files_for(run: &Path) -> Result<Vec<PathBuf>> {
    if run.is_file() {
        // A Rerun recording starts with the magic bytes `RRF2` (older: `RRF0`, `RRF1`).
        let mut magic = [0u8; 4];
        let read = std::fs::File::open(run).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic));
        if read.is_err() || !(magic[..3] == *b"RRF" && magic[3].is_ascii_digit()) {
            bail!("{} is not a Rerun recording (an .rrd file starts with RRF2); give a run directory or its recording.rrd", run.display());
        }
        return Ok(vec![run.to_path_buf()]);
    }
    if !run.is_dir() {
        bail!("{} is neither a run directory nor an .rrd file", run.display());
    }
    let files = recording_files(run);
    if files.is_empty() {
        bail!("{} has no recording.rrd (was the run started with --rerun off, spawn or connect?)", run.display());
    }
    Ok(files)
}

/// The web-viewer command line for `files` (as words).
fn web_command(exe: &Path, files: &[PathBuf], web_port: u16, grpc_port: u16) -> Vec<String> {
    let mut cmd = vec![
        exe.display().to_string(),
        "--web-viewer".into(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--web-viewer-port".into(),
        web_port.to_string(),
        "--port".into(),
        grpc_port.to_string(),
    ];
    cmd.extend(files.iter().map(|f| f.display().to_string()));
    cmd
}

/// `o2o view`.
pub fn run(args: ViewArgs) -> Result<()> {
    let files = files_for(&args.run)?;
    let exe = rerun_executable();
    let web = web_command(&exe, &files, args.web_port, args.grpc_port);
    println!("Recording: {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" "));
    println!("On a remote machine, serve the web viewer there:");
    println!("  {}", web.join(" "));
    println!("then tunnel both ports from your computer and open the page:");
    println!("  ssh -N -L {p}:127.0.0.1:{p} -L {g}:127.0.0.1:{g} <remote>", p = args.web_port, g = args.grpc_port);
    println!("  http://127.0.0.1:{}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{}%2Fproxy", args.web_port, args.grpc_port);
    if args.print {
        return Ok(());
    }
    if !exe.exists() {
        bail!(
            "the Rerun viewer {} is missing; run scripts/setup.sh (it installs rerun-sdk into the virtualenv)",
            exe.display()
        );
    }
    // No display to open a window on (an SSH session, a server): serve the web viewer instead.
    let headless = std::env::var_os("DISPLAY").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none()
        && cfg!(target_os = "linux");
    if headless && !args.web {
        println!(
            "No display ($DISPLAY and $WAYLAND_DISPLAY are unset): serving the web viewer instead (Ctrl-C to stop)."
        );
    }
    let status = if args.web || headless {
        Command::new(&web[0]).args(&web[1..]).status()
    } else {
        Command::new(&exe).args(&files).status()
    }
    .with_context(|| format!("cannot start {}", exe.display()))?;
    if !status.success() {
        bail!("{} exited with {status}", exe.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_command_binds_to_loopback_and_lists_files() {
        let cmd = web_command(Path::new("/v/bin/rerun"), &[PathBuf::from("r/recording.rrd")], 9090, 9876);
        assert_eq!(
            cmd.join(" "),
            "/v/bin/rerun --web-viewer --bind 127.0.0.1 --web-viewer-port 9090 --port 9876 r/recording.rrd"
        );
    }

    #[test]
    fn a_run_without_recording_says_why() {
        let d = tempfile::tempdir().unwrap();
        let err = files_for(d.path()).unwrap_err().to_string();
        assert!(err.contains("has no recording.rrd"), "{err}");
        // Any other file is not taken for a recording (issue 47, C8).
        let text = d.path().join("text.hdf5");
        std::fs::write(&text, "not a recording").unwrap();
        let err = files_for(&text).unwrap_err().to_string();
        assert!(err.contains("is not a Rerun recording"), "{err}");
        let rrd = d.path().join("x.rrd");
        std::fs::write(&rrd, b"RRF2\0\0\0\0").unwrap();
        assert_eq!(files_for(&rrd).unwrap(), vec![rrd.clone()]);
    }
}
