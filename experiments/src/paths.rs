//! Where o2o's installed pieces live: `O2O_HOME`, the set-up's virtualenv and its python.
//!
//! Run-time environment variables win over the paths `scripts/setup.sh` wrote into the build
//! environment, which win over the defaults under `$HOME/.cache/o2o`.

use std::path::PathBuf;

/// `$O2O_HOME`, default `$HOME/.cache/o2o`.
pub fn o2o_home() -> PathBuf {
    if let Some(h) = std::env::var_os("O2O_HOME") {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/o2o")
}

/// The set-up's virtualenv.
pub fn venv_dir() -> PathBuf {
    if let Some(v) = std::env::var_os("O2O_VENV") {
        return PathBuf::from(v);
    }
    if let Some(v) = option_env!("O2O_VENV") {
        let v = PathBuf::from(v);
        if v.exists() {
            return v;
        }
    }
    o2o_home().join("venv")
}

/// The virtualenv's python (used for parity checks and benchmark references).
pub fn venv_python() -> PathBuf {
    if let Some(p) = std::env::var_os("O2O_PYTHON") {
        return PathBuf::from(p);
    }
    venv_dir().join("bin/python")
}

/// The repository's `scripts/` folder, where the Python reference scripts live.
pub fn scripts_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("O2O_SCRIPTS") {
        return PathBuf::from(p);
    }
    // The source tree this binary was built from; a binary reused from another checkout (a
    // shared cargo target dir) may name one that is gone, so fall back to ./scripts.
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts");
    if !built.is_dir() && PathBuf::from("scripts").is_dir() {
        return PathBuf::from("scripts");
    }
    built
}

/// The version of the libtorch actually loaded into this process: find `libtorch_cpu.so` in
/// `/proc/self/maps`, then read the `version.py` of the torch package it belongs to.
pub fn libtorch_version() -> std::result::Result<String, String> {
    let lib = loaded_library("libtorch_cpu.so").ok_or_else(|| "libtorch_cpu.so is not loaded".to_string())?;
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

/// Whether libtorch's CUDA backend is in this process: `Ok` with the loaded
/// `libtorch_cuda.so`'s path, or, when it is not loaded, `Err` saying whether the libtorch in
/// use has one (then the binary was linked without it, see `experiments/build.rs`) or is a
/// CPU-only build.
pub fn cuda_backend() -> std::result::Result<PathBuf, String> {
    if let Some(lib) = loaded_library("libtorch_cuda.so") {
        return Ok(lib);
    }
    match loaded_library("libtorch_cpu.so").and_then(|cpu| cpu.parent().map(|d| d.join("libtorch_cuda.so"))) {
        Some(cuda) if cuda.is_file() => Err(format!(
            "not loaded, although {} exists: this binary was linked without it (O2O_LINK_CUDA=0, or a LIBTORCH without it at build time)",
            cuda.display()
        )),
        _ => Err("not in this libtorch (a CPU-only build)".to_string()),
    }
}

/// The path of a shared library mapped into this process whose file name is `name`.
fn loaded_library(name: &str) -> Option<PathBuf> {
    // Touch libtorch so it is certainly mapped.
    let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let suffix = format!("/{name}");
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.ends_with(&suffix)).map(PathBuf::from)
}
