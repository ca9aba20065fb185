//! `o2o doctor`: what is installed, and what to do about what is not.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct DoctorArgs {}

/// One line of the report: a name, what was found, and the fix when something is missing.
struct Check {
    name: &'static str,
    found: std::result::Result<String, String>,
}

pub fn run(_args: DoctorArgs) -> Result<()> {
    let checks = vec![
        Check { name: "o2o", found: Ok(env!("CARGO_PKG_VERSION").to_string()) },
        Check { name: "libtorch", found: libtorch_version() },
        Check {
            name: "cuda",
            found: Ok(if tch::Cuda::is_available() {
                format!("available ({} device(s))", tch::Cuda::device_count())
            } else {
                "not available (CPU only)".to_string()
            }),
        },
        Check { name: "torch threads", found: Ok(tch::get_num_threads().to_string()) },
        Check { name: "mujoco", found: Ok(o2o_envs::mujoco_version()) },
        Check { name: "hdf5", found: Ok(o2o_datasets::hdf5_version()) },
        Check { name: "rerun sdk", found: Ok(rerun::build_info().version.to_string()) },
        Check {
            name: "gymnasium assets",
            found: o2o_envs::assets::gym_assets_dir().map(|p| p.display().to_string()).map_err(|e| e.to_string()),
        },
        Check { name: "python (venv)", found: venv_python_check() },
    ];
    let mut missing = 0;
    for c in &checks {
        match &c.found {
            Ok(v) => println!("{:<18} {v}", c.name),
            Err(why) => {
                missing += 1;
                println!("{:<18} MISSING: {why}", c.name);
            }
        }
    }
    if missing > 0 {
        bail!("{missing} check(s) failed; run `make setup` from the o2o repository to install what is missing");
    }
    Ok(())
}

/// The version of the libtorch actually loaded into this process: find `libtorch_cpu.so` in
/// `/proc/self/maps`, then read the `version.py` of the torch package it belongs to.
pub(crate) fn libtorch_version() -> std::result::Result<String, String> {
    // Touch libtorch so it is certainly mapped.
    let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libtorch_cpu.so"))
        .map(PathBuf::from)
        .ok_or_else(|| "libtorch_cpu.so is not loaded".to_string())?;
    let torch_dir = lib.parent().and_then(|p| p.parent()).ok_or("unexpected libtorch location")?;
    let version_py = torch_dir.join("version.py");
    let text = std::fs::read_to_string(&version_py).map_err(|e| format!("{}: {e}", version_py.display()))?;
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("__version__"))
        .and_then(|rest| rest.split('=').nth(1))
        .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        .ok_or_else(|| format!("no __version__ in {}", version_py.display()))?;
    Ok(format!("{version} ({})", torch_dir.display()))
}

fn venv_python_check() -> std::result::Result<String, String> {
    let py = crate::paths::venv_python();
    if py.is_file() {
        Ok(py.display().to_string())
    } else {
        Err(format!("{} not found (needed for `o2o env parity` and the benchmarks)", py.display()))
    }
}
