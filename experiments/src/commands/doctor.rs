//! `o2o doctor`: what is installed, and what to do about what is not.

use anyhow::{bail, Result};
use clap::Args;

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
        Check { name: "libtorch", found: o2o_experiments::paths::libtorch_version() },
        Check { name: "cuda backend", found: cuda_backend_check() },
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
        Check {
            name: "nats-server",
            found: o2o_experiments::fleet::server::find_nats_server()
                .map(|b| format!("{}.{}.{} ({})", b.version.0, b.version.1, b.version.2, b.path.display()))
                .map_err(|e| format!("{e:#} (needed for `o2o fleet` and its tests)")),
        },
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

fn venv_python_check() -> std::result::Result<String, String> {
    let py = o2o_experiments::paths::venv_python();
    if py.is_file() {
        Ok(py.display().to_string())
    } else {
        Err(format!("{} not found (needed for `o2o env parity` and the benchmarks)", py.display()))
    }
}

/// `libtorch_cuda.so` loaded (with its path), or why not. Only a libtorch that has the backend
/// while this binary was linked without it is a failure; a CPU-only libtorch is fine.
fn cuda_backend_check() -> std::result::Result<String, String> {
    match o2o_experiments::paths::cuda_backend() {
        Ok(lib) => Ok(format!("loaded ({})", lib.display())),
        Err(why) if why.starts_with("not in this libtorch") => Ok(why),
        Err(_) if option_env!("O2O_CUDA_LINK_OPTED_OUT").is_some() => {
            Ok("not linked (built with O2O_LINK_CUDA=0: CPU only)".to_string())
        }
        Err(why) => Err(why),
    }
}
