//! The sinks a run gets besides `metrics.jsonl` (which the runner always opens itself): a Rerun
//! recording chosen by `--rerun`.
//!
//! ```text
//! --rerun save           recording.rrd in the run directory (the default)
//! --rerun spawn          start the set-up's viewer (`rerun` from the venv) and stream to it;
//!                        on a machine without a display, save instead (with a warning)
//! --rerun connect        stream to a running viewer at 127.0.0.1:9876
//! --rerun connect=ADDR   … at ADDR = host:port, or a full rerun+http://…/proxy URL
//!                        (also --rerun connect --rerun-addr ADDR)
//! --rerun off            no recording
//!
//! `--rerun` takes exactly one value, so it never swallows the positional argument after it
//! (`o2o resume --rerun off runs/x`).
//! ```

use super::layout::{self, Layout, RunPlan};
use super::rerun_sink::{
    save_stream, EpisodeLogger, RerunSink, DEFAULT_QUEUE, FILE_FLUSH_TIMEOUT, STREAM_FLUSH_TIMEOUT,
};
use super::MetricSink;
use crate::run::config::RunConfig;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};

/// Rerun options shared by every command that runs training (`#[command(flatten)]` them).
#[derive(Args, Debug, Clone)]
pub struct RerunArgs {
    /// Rerun output: `save` (recording.rrd in the run directory), `spawn` (start the venv's
    /// viewer and stream to it; saves instead without a display), `connect` or
    /// `connect=ADDR` (stream to a running viewer, default 127.0.0.1:9876), or `off`.
    #[arg(long = "rerun", value_name = "MODE", default_value = "save")]
    pub rerun: String,
    /// The viewer to stream to with `--rerun connect`: host:port or a rerun+http://…/proxy URL.
    #[arg(long = "rerun-addr", value_name = "ADDR")]
    pub rerun_addr: Option<String>,
    /// How many messages may wait for the Rerun thread; beyond that new ones are dropped (and
    /// counted) so that logging never slows the run.
    #[arg(long = "rerun-queue", default_value_t = DEFAULT_QUEUE)]
    pub rerun_queue: usize,
}

impl Default for RerunArgs {
    fn default() -> Self {
        Self { rerun: "save".into(), rerun_addr: None, rerun_queue: DEFAULT_QUEUE }
    }
}

impl RerunArgs {
    /// No recording (tests, benchmarks).
    pub fn off() -> Self {
        Self { rerun: "off".into(), ..Self::default() }
    }

    /// The parsed `--rerun` value.
    pub fn target(&self) -> Result<RerunTarget> {
        let (mode, inline_addr) = match self.rerun.split_once('=') {
            Some((m, a)) => (m, Some(a)),
            None => (self.rerun.as_str(), None),
        };
        let addr = match (inline_addr, self.rerun_addr.as_deref()) {
            (Some(_), Some(_)) => bail!("--rerun {} and --rerun-addr both give an address; give one", self.rerun),
            (a, b) => a.or(b),
        };
        let target = match mode {
            "save" => RerunTarget::Save,
            "spawn" => RerunTarget::Spawn,
            "off" => RerunTarget::Off,
            "connect" => RerunTarget::Connect(proxy_url(addr.unwrap_or("127.0.0.1:9876"))?),
            other => bail!("--rerun: unknown mode {other:?}; expected save, spawn, connect, connect=ADDR or off"),
        };
        if let (Some(a), false) = (addr, matches!(target, RerunTarget::Connect(_))) {
            bail!("--rerun {mode} takes no address, found {a:?} (the address goes with --rerun connect)");
        }
        Ok(target)
    }
}

/// Where the Rerun data goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // see the module's table
pub enum RerunTarget {
    /// `recording.rrd` in the run directory.
    Save,
    /// Start the set-up's viewer and stream to it.
    Spawn,
    /// A `rerun+http://host:port/proxy` URL.
    Connect(String),
    /// No recording.
    Off,
}

impl RerunTarget {
    /// How long the end of a run waits for this target to take the rest of the data.
    pub fn flush_timeout(&self) -> std::time::Duration {
        match self {
            RerunTarget::Save | RerunTarget::Off => FILE_FLUSH_TIMEOUT,
            RerunTarget::Spawn | RerunTarget::Connect(_) => STREAM_FLUSH_TIMEOUT,
        }
    }
}

/// `host:port` → `rerun+http://host:port/proxy`; a `rerun+http(s)://host:port/…` URL is kept as
/// it is. Anything else (no port, a port that is not a number in 1..=65535, another scheme) is
/// refused here, before a run starts, rather than as a stream that never connects.
fn proxy_url(addr: &str) -> Result<String> {
    let bad = || {
        anyhow::anyhow!(
            "--rerun connect: {addr:?} is not an address: expected host:port (e.g. 127.0.0.1:9876) or a rerun+http://host:port/proxy URL"
        )
    };
    let host_port = match addr.split_once("://") {
        Some((scheme, rest)) if scheme == "rerun+http" || scheme == "rerun+https" => {
            rest.split('/').next().unwrap_or("")
        }
        Some(_) => return Err(bad()),
        None => addr,
    };
    let (host, port) = host_port.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.contains(char::is_whitespace) || !port.parse::<u16>().is_ok_and(|p| p > 0) {
        return Err(bad());
    }
    Ok(if addr.contains("://") { addr.to_string() } else { format!("rerun+http://{addr}/proxy") })
}

/// The extra sinks of one run (not `metrics.jsonl`), plus the logger for its evaluation episodes
/// (when Rerun is on).
pub struct RunSinks {
    /// The Rerun sink, or nothing with `--rerun off`.
    pub sinks: Vec<Box<dyn MetricSink>>,
    /// The logger for evaluation episodes in 3D, when Rerun is on.
    pub episodes: Option<EpisodeLogger>,
}

/// The recording file for a run: `recording.rrd`, or `recording.N.rrd` when a resumed run finds
/// earlier files (they share a recording id, so the viewer shows them as one recording).
pub fn recording_path(run_dir: &Path) -> PathBuf {
    let first = run_dir.join("recording.rrd");
    if !first.exists() {
        return first;
    }
    (1..).map(|n| run_dir.join(format!("recording.{n}.rrd"))).find(|p| !p.exists()).unwrap_or(first)
}

/// Every recording file of a run, oldest first.
pub fn recording_files(run_dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![run_dir.join("recording.rrd")];
    files.extend((1..).map(|n| run_dir.join(format!("recording.{n}.rrd"))).take_while(|p| p.exists()));
    files.retain(|p| p.exists());
    files
}

/// Open a recording stream for `target`: `Save` writes `save_path`; `recording_id` groups files
/// of one run in the viewer; `layout` is the default viewer layout. `Off` gives `None`.
pub fn open_stream(
    target: &RerunTarget,
    save_path: &Path,
    recording_id: &str,
    layout: &Layout,
) -> Result<Option<rerun::RecordingStream>> {
    let builder = || {
        rerun::RecordingStreamBuilder::new("o2o")
            .recording_id(recording_id.to_string())
            .recording_name(recording_id.to_string())
            .default_enabled(true)
    };
    let rec = match target {
        RerunTarget::Off => None,
        RerunTarget::Save => return Ok(Some(save_stream(save_path, recording_id, layout)?)),
        RerunTarget::Spawn if !has_display() => {
            eprintln!(
                "warning: --rerun spawn: no display here (DISPLAY and WAYLAND_DISPLAY are unset); saving the recording to {} instead (open it with `o2o view --web`)",
                save_path.display()
            );
            return Ok(Some(save_stream(save_path, recording_id, layout)?));
        }
        RerunTarget::Spawn => {
            let mut opts = rerun::SpawnOptions::default();
            let venv_rerun = crate::paths::venv_dir().join("bin/rerun");
            if venv_rerun.exists() {
                opts.executable_path = Some(venv_rerun.to_string_lossy().into_owned());
            }
            Some(
                builder()
                    .spawn_opts(&opts)
                    .context("--rerun spawn: cannot start the Rerun viewer (is scripts/setup.sh done?)")?,
            )
        }
        RerunTarget::Connect(url) => Some(
            builder()
                .connect_grpc_opts(url.clone())
                .with_context(|| format!("--rerun connect: cannot stream to {url}"))?,
        ),
    };
    if let Some(rec) = &rec {
        layout.send(rec).context("cannot send the viewer layout")?;
    }
    Ok(rec)
}

/// Whether a viewer window could open here.
fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// The layout and plan of the run `config` describes: its kind's panels, and the 3D framing of
/// its env's model when it is a MuJoCo task (whose evaluation episodes the sink draws).
pub fn run_layout(config: &RunConfig) -> (Layout, RunPlan) {
    let camera = o2o_envs::make_unwrapped(&config.env).ok().and_then(|mut env| {
        use o2o_envs::Env;
        env.reset(Some(0)).ok()?;
        layout::camera_for(&super::scene::model_geometry(&env), &super::scene::body_poses(&env))
    });
    let normalized = o2o_envs::registry::spec(&config.env).is_ok_and(|s| s.normalization_family.is_some());
    (layout::run_layout(config, camera, normalized), RunPlan::of(config))
}

/// Open the Rerun sink that `args` asks for, for the run in `run_dir` that `config` describes
/// (its kind chooses the viewer layout).
pub fn open_run_sinks(run_dir: &Path, args: &RerunArgs, config: &RunConfig) -> Result<RunSinks> {
    let mut sinks: Vec<Box<dyn MetricSink>> = Vec::new();
    // The run directory's name identifies the recording across resumed sessions.
    let run_id = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "o2o-run".into());
    let mut episodes = None;
    let target = args.target()?;
    let (layout, plan) = run_layout(config);
    if let Some(stream) = open_stream(&target, &recording_path(run_dir), &run_id, &layout)? {
        let sink = RerunSink::new(stream, args.rerun_queue, target.flush_timeout())?.with_plan(plan);
        episodes = sink.episode_logger();
        sinks.push(Box::new(sink));
    }
    Ok(RunSinks { sinks, episodes })
}

/// The extra sinks for a run in `run_dir` that `config` describes (the runner's `extra_sinks`:
/// `metrics.jsonl` is not among them): the Rerun sink chosen by `args`, or none. Use
/// [`open_run_sinks`] to also get the evaluation-episode logger.
pub fn sinks_for_run(run_dir: &Path, args: &RerunArgs, config: &RunConfig) -> Result<Vec<Box<dyn MetricSink>>> {
    Ok(open_run_sinks(run_dir, args, config)?.sinks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rerun: RerunArgs,
        rest: Vec<String>,
    }

    fn parse(args: &[&str]) -> Result<RerunTarget> {
        let cli = Cli::try_parse_from(std::iter::once("o2o").chain(args.iter().copied()))?;
        cli.rerun.target()
    }

    #[test]
    fn rerun_flag_forms() {
        assert_eq!(parse(&[]).unwrap(), RerunTarget::Save);
        assert_eq!(parse(&["--rerun", "off"]).unwrap(), RerunTarget::Off);
        assert_eq!(parse(&["--rerun=spawn", "hopper"]).unwrap(), RerunTarget::Spawn);
        assert_eq!(
            parse(&["--rerun", "connect"]).unwrap(),
            RerunTarget::Connect("rerun+http://127.0.0.1:9876/proxy".into())
        );
        assert_eq!(
            parse(&["--rerun", "connect=10.1.2.3:9000"]).unwrap(),
            RerunTarget::Connect("rerun+http://10.1.2.3:9000/proxy".into())
        );
        assert_eq!(
            parse(&["--rerun", "connect", "--rerun-addr", "h:1"]).unwrap(),
            RerunTarget::Connect("rerun+http://h:1/proxy".into())
        );
        assert!(parse(&["--rerun", "off", "--rerun-addr", "h:1"])
            .unwrap_err()
            .to_string()
            .contains("takes no address"));
        assert!(parse(&["--rerun", "tensorboard"]).unwrap_err().to_string().contains("unknown mode"));
        // A malformed address is refused when the flag is read (issue 47, item 3).
        for bad in ["notanaddr", "host:", ":9876", "h:99999", "h:0", "http://h:1/proxy", "h :1"] {
            let e = parse(&["--rerun", &format!("connect={bad}")]).unwrap_err().to_string();
            assert!(e.contains("is not an address") && e.contains(bad), "{bad}: {e}");
        }
        assert_eq!(
            parse(&["--rerun", "connect=rerun+http://viewer.lan:9876/proxy"]).unwrap(),
            RerunTarget::Connect("rerun+http://viewer.lan:9876/proxy".into())
        );
        // A positional after the mode is never taken as an address (issue 17, item 4).
        for mode in ["off", "save", "spawn", "connect"] {
            let cli = Cli::try_parse_from(["o2o", "--rerun", mode, "runs/x"]).unwrap();
            assert_eq!(cli.rest, ["runs/x"], "--rerun {mode}");
        }
    }

    #[test]
    fn off_gives_no_sink_and_save_writes_numbered_recordings() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run-a");
        std::fs::create_dir(&run).unwrap();
        let config = RunConfig::from_toml_str(
            "preset = 't'\nalgo = 'sac'\nenv = 'InvertedPendulum-v5'\n[train]\nonline_steps = 10\n",
            "test",
        )
        .unwrap();
        let s = open_run_sinks(&run, &RerunArgs::off(), &config).unwrap();
        assert_eq!(s.sinks.len(), 0);
        assert!(s.episodes.is_none());
        drop(s);
        for expect in ["recording.rrd", "recording.1.rrd"] {
            let mut s = open_run_sinks(&run, &RerunArgs::default(), &config).unwrap();
            assert_eq!(s.sinks.len(), 1);
            let mut logger = crate::logging::Logger::new(std::mem::take(&mut s.sinks));
            logger.log(1, 0, &[("train/critic_loss", 0.25)]).unwrap();
            drop(s);
            drop(logger);
            assert!(run.join(expect).exists(), "{expect} missing");
        }
        assert_eq!(recording_files(&run), vec![run.join("recording.rrd"), run.join("recording.1.rrd")]);
        assert!(!run.join("metrics.jsonl").exists()); // the runner's own sink writes that
    }
}
