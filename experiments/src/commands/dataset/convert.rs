//! `o2o dataset convert <in> <out> --to d4rl|minari|lerobot`: between a D4RL-format file, a
//! Minari dataset folder and a LeRobotDataset folder (read: v3.0 and v2.x; written: v3.0).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use o2o_datasets::lerobot::{write_v30, WriteOptions};
use o2o_datasets::minari::MinariDataset;
use o2o_datasets::registry;

/// Output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// A D4RL-format HDF5 file.
    D4rl,
    /// A Minari dataset folder (`<out>/data/metadata.json`, `<out>/data/main_data.hdf5`).
    Minari,
    /// A LeRobotDataset v3.0 folder (`meta/info.json`, `meta/stats.json`, `meta/tasks.parquet`,
    /// `meta/episodes/…`, `data/chunk-000/file-000.parquet`), which `lerobot` loads with
    /// `LeRobotDataset(repo_id, root=<out>)`.
    Lerobot,
}

/// Arguments of `o2o dataset convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input: a D4RL-format .hdf5 file, a Minari dataset folder or a LeRobotDataset folder.
    pub input: PathBuf,
    /// Output file (D4RL) or folder (Minari, LeRobot; a LeRobot folder must not exist yet).
    pub output: PathBuf,
    /// Output format.
    #[arg(long)]
    pub to: Format,
    /// Minari `dataset_id` to record (default: the registry id recognised from the input's file
    /// name, else the input's file stem).
    #[arg(long)]
    pub id: Option<String>,
    /// Time limit used to split episodes of D4RL files that have no `timeouts` key.
    #[arg(long)]
    pub max_episode_steps: Option<usize>,
    /// LeRobot output: frames per second (`fps` in info.json; default: the env's control rate
    /// when the input is a known registry file, else 30).
    #[arg(long)]
    pub fps: Option<u32>,
    /// LeRobot output: the task string of every frame (default: the registry id or file stem).
    #[arg(long)]
    pub task: Option<String>,
    /// LeRobot output: `robot_type` (default: the env id when known).
    #[arg(long)]
    pub robot_type: Option<String>,
    /// LeRobot output: start a new data file when the current one would pass this many MB
    /// (uncompressed; LeRobot's `data_files_size_in_mb`).
    #[arg(long, default_value_t = 100.0)]
    pub data_files_size_mb: f64,
    #[command(flatten)]
    pub lerobot: super::LeRobotKeyArgs,
}

/// `o2o dataset convert`.
pub fn run(args: ConvertArgs) -> Result<()> {
    let d4rl = super::read_rows(&args.input, &args.lerobot.keys())?;
    let entry = args.input.file_name().and_then(|n| registry::lookup_file(&n.to_string_lossy()));
    let id =
        args.id.clone().or_else(|| entry.as_ref().map(|e| e.id.clone())).unwrap_or_else(|| super::stem(&args.input));
    let max_steps = args.max_episode_steps.or(entry.as_ref().map(|e| e.max_episode_steps));
    match args.to {
        Format::D4rl => {
            d4rl.write(&args.output)?;
            println!("wrote {} ({} rows, D4RL format)", args.output.display(), d4rl.len());
        }
        Format::Minari => {
            let m = MinariDataset::from_d4rl(&d4rl, &id, max_steps);
            m.write(&args.output)?;
            println!(
                "wrote {} ({} episodes, {} steps, Minari format, dataset_id {id})",
                args.output.display(),
                m.episodes.len(),
                m.total_steps()
            );
        }
        Format::Lerobot => {
            // A MuJoCo task's control rate, 1 / (timestep · frame_skip): Hopper's 125 Hz.
            let env_fps = entry
                .as_ref()
                .and_then(|e| o2o_envs::make_unwrapped(&e.env_id).ok())
                .map(|env| (1.0 / env.dt()).round() as u32)
                .filter(|f| *f > 0);
            let opts = WriteOptions {
                fps: args.fps.or(env_fps).unwrap_or(30),
                task: args.task.clone().unwrap_or_else(|| id.clone()),
                robot_type: args.robot_type.clone().or(entry.as_ref().map(|e| e.env_id.clone())),
                max_episode_steps: max_steps,
                data_files_size_in_mb: args.data_files_size_mb,
                ..WriteOptions::default()
            };
            let s = write_v30(&d4rl, &args.output, &opts)
                .with_context(|| format!("writing the LeRobot dataset {}", args.output.display()))?;
            println!(
                "wrote {} ({} episodes, {} frames, {} data file(s), LeRobotDataset v3.0, fps {}, task {:?})",
                args.output.display(),
                s.episodes,
                s.frames,
                s.data_files.len(),
                opts.fps,
                opts.task
            );
        }
    }
    Ok(())
}
