//! No partial files: everything this crate writes goes to a temp file in the destination's
//! folder first and is renamed into place only when complete (a rename within one filesystem
//! is atomic), so a crash or an error leaves either the old file or none.

use std::path::{Path, PathBuf};

use crate::error::{DatasetError, Result};

/// `<path>.tmp-<pid>`, in the same folder as `path` so the final rename is atomic.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".tmp-{}", std::process::id()));
    path.with_file_name(name)
}

/// Runs `write` on a temp path, then renames the result to `path`. On error the temp file is
/// removed and `path` is left untouched.
pub fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path);
    let result = write(&tmp).and_then(|()| std::fs::rename(&tmp, path).map_err(|e| DatasetError::io(path, e)));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
