//! Where a run computes, as the command line names it (`--device auto|cpu|cuda`): a value that
//! is resolved to a [`tch::Device`] only when it is used, so a choice can be handed on (to a
//! child `o2o` process, as the studies do) without libtorch looking for a GPU first.

use anyhow::{bail, Result};
use tch::Device;

/// Where to compute.
// `cpu` and `cuda` carry no doc comment on purpose: clap prints a variant's doc in `--help`, and
// the two explain themselves there.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceArg {
    /// CUDA when available, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

impl DeviceArg {
    /// The tch device; `cuda` fails when no GPU is visible.
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceArg::Auto => Ok(Device::cuda_if_available()),
            DeviceArg::Cpu => Ok(Device::Cpu),
            DeviceArg::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
            DeviceArg::Cuda => {
                bail!("--device cuda: no CUDA device is available (libtorch sees none); use --device cpu or auto")
            }
        }
    }
}
