//! Records the source revision the `o2o` binary is built from (`O2O_BUILD_GIT_REVISION`), so a
//! run's manifest names the code that ran, not whatever the checkout holds when it runs.
//! Reruns when the checkout's HEAD moves (a commit, a checkout, a merge).

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok().filter(|o| o.status.success())?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rev = git(&dir, &["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=O2O_BUILD_GIT_REVISION={rev}");
    // HEAD itself (a checkout), the branch it points to and packed refs (a commit): in a
    // worktree HEAD lives in its own git dir and the refs in the common one.
    let abs = |p: String| if Path::new(&p).is_absolute() { PathBuf::from(p) } else { dir.join(p) };
    if let Some(git_dir) = git(&dir, &["rev-parse", "--git-dir"]).map(abs) {
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    }
    if let Some(common) = git(&dir, &["rev-parse", "--git-common-dir"]).map(abs) {
        println!("cargo:rerun-if-changed={}", common.join("packed-refs").display());
        if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", common.join(branch).display());
        }
    }
}
