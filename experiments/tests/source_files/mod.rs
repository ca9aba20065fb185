//! Reading the workspace's own source, for the tests that hold its layout to the rules of issue 48
//! (`commands_layering.rs`, `algos_layering.rs`). A folder module, so cargo builds it into each
//! test that declares it rather than as a test of its own.

use std::path::{Path, PathBuf};

/// The workspace root (the folder above this crate), where each crate's `src/` is found.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the experiments crate sits in the workspace").to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}
