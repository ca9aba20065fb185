//! `o2o dataset convert <in> <out> --to d4rl|minari`: D4RL-format file ↔ Minari dataset folder.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::minari::MinariDataset;
use o2o_datasets::registry;

/// Output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// A D4RL-format HDF5 file.
    D4rl,
    /// A Minari dataset folder (`<out>/data/metadata.json`, `<out>/data/main_data.hdf5`).
    Minari,
}

/// Arguments of `o2o dataset convert`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input: a D4RL-format .hdf5 file or a Minari dataset folder.
    pub input: PathBuf,
    /// Output file (D4RL) or folder (Minari).
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
}

/// `o2o dataset convert`.
pub fn run(args: ConvertArgs) -> Result<()> {
    let d4rl = if args.input.is_dir() {
        MinariDataset::read(&args.input)
            .with_context(|| format!("reading Minari dataset {}", args.input.display()))?
            .to_d4rl()
    } else {
        D4rlDataset::read(&args.input)?
    };
    match args.to {
        Format::D4rl => {
            d4rl.write(&args.output)?;
            println!("wrote {} ({} rows, D4RL format)", args.output.display(), d4rl.len());
        }
        Format::Minari => {
            let entry = args.input.file_name().and_then(|n| registry::lookup_file(&n.to_string_lossy()));
            let id = args.id.clone().or_else(|| entry.as_ref().map(|e| e.id.clone())).unwrap_or_else(|| {
                args.input.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into())
            });
            let max_steps = args.max_episode_steps.or(entry.map(|e| e.max_episode_steps));
            let m = MinariDataset::from_d4rl(&d4rl, &id, max_steps);
            m.write(&args.output)?;
            println!(
                "wrote {} ({} episodes, {} steps, Minari format, dataset_id {id})",
                args.output.display(),
                m.episodes.len(),
                m.total_steps()
            );
        }
    }
    Ok(())
}
