//! Reading a recording back: `rerun rrd print|stats` from the set-up's virtualenv, and the
//! chunks (entity, rows, timelines) its output lists — what the tests check recordings with.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The set-up's `rerun` command (the viewer and rrd tools matching the SDK).
pub fn rerun_cli() -> PathBuf {
    crate::paths::venv_dir().join("bin/rerun")
}

/// The output (stdout, then stderr) of `rerun rrd <what> <file>`: `print` (with `-vv`), `stats`.
pub fn rrd(what: &str, file: &Path) -> Result<String> {
    let out = Command::new(rerun_cli())
        .args(["rrd", what])
        .args(if what == "print" { &["-vv"][..] } else { &[][..] })
        .arg(file)
        .output()
        .with_context(|| format!("cannot run {} (run scripts/setup.sh)", rerun_cli().display()))?;
    if !out.status.success() {
        bail!("rerun rrd {what} {} failed: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// One chunk of `rerun rrd print -vv` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its entity path, e.g. `/train/critic_loss`.
    pub entity: String,
    /// Rows in the chunk.
    pub rows: usize,
    /// The timelines it is indexed by.
    pub timelines: Vec<String>,
}

/// Parse `rerun rrd print -vv`: a header line `Chunk(id) with N rows (size) - /entity - …`
/// followed by a table whose column headers say `index_name: <timeline>`.
pub fn chunks(printed: &str) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::new();
    for line in printed.lines() {
        if let Some(rest) = line.strip_prefix("Chunk(") {
            let rows =
                rest.split(" with ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            let entity = rest.split(" - ").nth(1).unwrap_or("").trim().to_string();
            out.push(Chunk { entity, rows, timelines: Vec::new() });
        } else if let Some(c) = out.last_mut() {
            for part in line.split("index_name: ").skip(1) {
                let name: String = part.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
                c.timelines.push(name);
            }
        }
    }
    out
}
