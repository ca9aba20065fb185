//! Finding Gymnasium's MuJoCo XML assets in the set-up's virtualenv (never copied into the repo).

use crate::error::EnvError;
use std::path::{Path, PathBuf};

/// What to tell the user when the assets are missing.
pub const INSTALL_HINT: &str =
    "run `make setup` (it installs gymnasium[mujoco]==1.4.0 into $O2O_HOME/venv), or set O2O_GYM_ASSETS to gymnasium/envs/mujoco/assets";

/// The folder holding Gymnasium's MuJoCo XMLs: `$O2O_GYM_ASSETS` at run time (strict: when set,
/// nothing else is tried), else the path the
/// set-up wrote at build time, else `$O2O_HOME/venv` (default `~/.cache/o2o/venv`) searched for
/// `site-packages/gymnasium/envs/mujoco/assets`.
pub fn gym_assets_dir() -> Result<PathBuf, EnvError> {
    // An explicit run-time setting is taken as the user's word: no silent fallback past it.
    if let Some(dir) = std::env::var_os("O2O_GYM_ASSETS") {
        let dir = PathBuf::from(dir);
        if dir.join("half_cheetah.xml").is_file() {
            return Ok(dir);
        }
        return Err(EnvError::MissingAsset {
            path: dir.join("half_cheetah.xml"),
            hint: format!(
                "O2O_GYM_ASSETS is set to {} but it holds no Gymnasium MuJoCo XMLs; {INSTALL_HINT}",
                dir.display()
            ),
        });
    }
    let mut tried = Vec::new();
    if let Some(dir) = option_env!("O2O_GYM_ASSETS") {
        let dir = PathBuf::from(dir);
        if dir.join("half_cheetah.xml").is_file() {
            return Ok(dir);
        }
        tried.push(dir);
    }
    if let Some(dir) = find_in_venv("site-packages/gymnasium/envs/mujoco/assets", "half_cheetah.xml", &mut tried) {
        return Ok(dir);
    }
    let shown = tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    Err(EnvError::MissingAsset {
        path: PathBuf::from("gymnasium/envs/mujoco/assets/half_cheetah.xml"),
        hint: format!("looked in [{shown}]; {INSTALL_HINT}"),
    })
}

/// The full path of one asset file, e.g. `asset_path("hopper.xml")`.
pub fn asset_path(file: &str) -> Result<PathBuf, EnvError> {
    let path = gym_assets_dir()?.join(file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(EnvError::MissingAsset { path, hint: INSTALL_HINT.to_string() })
    }
}

/// Search `$O2O_HOME/venv/lib/*/<rel>` (default home `~/.cache/o2o`) for a folder holding
/// `probe`; every folder looked at is added to `tried`.
fn find_in_venv(rel: &str, probe: &str, tried: &mut Vec<PathBuf>) -> Option<PathBuf> {
    let home = std::env::var_os("O2O_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/o2o")))?;
    for e in std::fs::read_dir(home.join("venv/lib")).ok()?.flatten() {
        let dir = e.path().join(rel);
        if dir.join(probe).is_file() {
            return Some(dir);
        }
        tried.push(dir);
    }
    None
}

/// What to tell the user when gymnasium-robotics' assets are missing.
pub const ROBOTICS_HINT: &str = "run `make setup` (it installs gymnasium-robotics==1.4.2 into $O2O_HOME/venv), or set O2O_ROBOTICS_ASSETS to gymnasium_robotics/envs/assets";

/// The folder holding gymnasium-robotics' XML assets (the Fetch models):
/// `$O2O_ROBOTICS_ASSETS` (strict when set), else the venv searched for
/// `site-packages/gymnasium_robotics/envs/assets`.
pub fn robotics_assets_dir() -> Result<PathBuf, EnvError> {
    let probe = "fetch/push.xml";
    if let Some(dir) = std::env::var_os("O2O_ROBOTICS_ASSETS") {
        let dir = PathBuf::from(dir);
        if dir.join(probe).is_file() {
            return Ok(dir);
        }
        return Err(EnvError::MissingAsset {
            path: dir.join(probe),
            hint: format!(
                "O2O_ROBOTICS_ASSETS is set to {} but it holds no Fetch XMLs; {ROBOTICS_HINT}",
                dir.display()
            ),
        });
    }
    let mut tried = Vec::new();
    if let Some(dir) = find_in_venv("site-packages/gymnasium_robotics/envs/assets", probe, &mut tried) {
        return Ok(dir);
    }
    let shown = tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    Err(EnvError::MissingAsset {
        path: PathBuf::from("gymnasium_robotics/envs/assets").join(probe),
        hint: format!("looked in [{shown}]; {ROBOTICS_HINT}"),
    })
}

/// What to tell the user when D4RL's files are missing.
pub const D4RL_HINT: &str =
    "run `make setup` (it downloads the d4rl==1.1 wheel with `pip download --no-deps` and unpacks it \
into $O2O_HOME/d4rl/1.1; nothing is installed), or set O2O_D4RL_DIR to a folder holding d4rl/locomotion/assets/ant.xml";

/// The unpacked `d4rl==1.1` wheel (a folder holding `d4rl/`), a file source for D4RL's own
/// models (AntMaze's `ant.xml`): `$O2O_D4RL_DIR` when set (strict), else `$O2O_HOME/d4rl/1.1`
/// (default `~/.cache/o2o/d4rl/1.1`), where `scripts/setup.sh` unpacks it. Never copied into
/// the repository.
pub fn d4rl_dir() -> Result<PathBuf, EnvError> {
    const PROBE: &str = "d4rl/locomotion/assets/ant.xml";
    if let Some(dir) = std::env::var_os("O2O_D4RL_DIR") {
        let dir = PathBuf::from(dir);
        if dir.join(PROBE).is_file() {
            return Ok(dir);
        }
        return Err(EnvError::MissingAsset {
            path: dir.join(PROBE),
            hint: format!("O2O_D4RL_DIR is set to {} but it holds no {PROBE}; {D4RL_HINT}", dir.display()),
        });
    }
    let home = std::env::var_os("O2O_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/o2o")));
    let dir = home.map(|h| h.join("d4rl/1.1")).unwrap_or_else(|| PathBuf::from("d4rl/1.1"));
    if dir.join(PROBE).is_file() {
        Ok(dir)
    } else {
        Err(EnvError::MissingAsset { path: dir.join(PROBE), hint: D4RL_HINT.to_string() })
    }
}

/// The folder holding Gymnasium-Robotics 1.4.2's Adroit XMLs and meshes
/// (`site-packages/gymnasium_robotics/envs/assets/adroit_hand`): `$O2O_ADROIT_ASSETS` when set
/// (strict), else found in `$O2O_HOME/venv` (default `~/.cache/o2o/venv`). Never copied into the
/// repository.
pub fn adroit_assets_dir() -> Result<PathBuf, EnvError> {
    const PROBE: &str = "adroit_door.xml";
    let hint = "run `make setup` (it installs gymnasium-robotics==1.4.2 into $O2O_HOME/venv), or set O2O_ADROIT_ASSETS to gymnasium_robotics/envs/assets/adroit_hand";
    if let Some(dir) = std::env::var_os("O2O_ADROIT_ASSETS") {
        let dir = PathBuf::from(dir);
        if dir.join(PROBE).is_file() {
            return Ok(dir);
        }
        return Err(EnvError::MissingAsset {
            path: dir.join(PROBE),
            hint: format!("O2O_ADROIT_ASSETS holds no {PROBE}; {hint}"),
        });
    }
    let mut tried = Vec::new();
    if let Some(dir) = find_in_venv("site-packages/gymnasium_robotics/envs/assets/adroit_hand", PROBE, &mut tried) {
        return Ok(dir);
    }
    let shown = tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    Err(EnvError::MissingAsset { path: PathBuf::from(PROBE), hint: format!("looked in [{shown}]; {hint}") })
}
