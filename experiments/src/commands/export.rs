//! `o2o export <run-dir> [--checkpoint step-N] --to torchscript [--out FILE]`: the run's
//! deterministic policy as a file that runs without o2o (see the library's `export` module).

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// A TorchScript module (`torch.jit.load` in Python, `tch::CModule` in Rust).
    Torchscript,
}

/// Arguments of `o2o export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The checkpoint to export (`step-N`); default: the newest complete one.
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// The format.
    #[arg(long = "to", value_enum, default_value = "torchscript")]
    pub to: ExportFormat,
    /// The file to write (default: `<run-dir>/export/policy.pt`); a JSON description is written
    /// beside it with the extension .json.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `o2o export`.
pub fn run(args: ExportArgs) -> Result<()> {
    let out = args.out.clone().unwrap_or_else(|| args.run_dir.join("export").join("policy.pt"));
    match args.to {
        ExportFormat::Torchscript => {
            let done =
                o2o_experiments::export::export_torchscript(&args.run_dir, args.checkpoint.as_deref(), &out, None)?;
            println!("{}", done.module.display());
            eprintln!(
                "wrote {} (observation float32 [B, {}] -> action float32 [B, {}] in {}'s bounds, from {} at step {}) and {}",
                done.module.display(),
                done.spec.input.shape[1],
                done.spec.output.shape[1],
                done.spec.env,
                done.spec.checkpoint,
                done.spec.step,
                done.spec_path.display()
            );
        }
    }
    Ok(())
}
