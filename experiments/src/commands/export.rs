//! `o2o export <run-dir> [--checkpoint step-N] --to torchscript|onnx [--out FILE] [--beta B]`:
//! the run's deterministic policy as a file that runs without o2o (see the library's `export`
//! module).

use anyhow::Result;
use clap::{Args, ValueEnum};
use o2o_experiments::export::{BetaChoice, Format};
use std::path::PathBuf;

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// A TorchScript module (`torch.jit.load` in Python, `tch::CModule` in Rust).
    Torchscript,
    /// An ONNX model, opset 17 (onnxruntime, tract, TensorRT, …), normalization and rescaling inside.
    Onnx,
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
    /// The file to write (default: `<run-dir>/export/policy.pt`, or `policy.onnx`); a JSON
    /// description is written beside it with the extension .json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// FamO2O (ONNX only): β from the agent's balance model inside the graph, as o2o acts
    /// (`agent`, the default), a second input `beta` float32 [B] (`input`), or a fixed number.
    #[arg(long, default_value = "agent")]
    pub beta: BetaChoice,
}

/// `o2o export`.
pub fn run(args: ExportArgs) -> Result<()> {
    let format = match args.to {
        ExportFormat::Torchscript => Format::Torchscript,
        ExportFormat::Onnx => Format::Onnx,
    };
    let out = args.out.clone().unwrap_or_else(|| args.run_dir.join("export").join(format.default_file()));
    let done =
        o2o_experiments::export::export(&args.run_dir, args.checkpoint.as_deref(), &out, None, format, args.beta)?;
    println!("{}", done.module.display());
    let beta = match &done.spec.beta {
        Some(b) => format!(", β: {}", b.source),
        None => String::new(),
    };
    eprintln!(
        "wrote {} ({}: observation float32 [B, {}] -> action float32 [B, {}] in {}'s bounds{beta}, from {} at step {}) and {}",
        done.module.display(),
        format.name(),
        done.spec.input.shape[1],
        done.spec.output.shape[1],
        done.spec.env,
        done.spec.checkpoint,
        done.spec.step,
        done.spec_path.display()
    );
    Ok(())
}
