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
    // Only files that exist: cargo reruns a build script on every build while a watched path is
    // missing (a repository without packed refs has no `packed-refs`). A loose branch ref that
    // `git pack-refs` later removes goes missing, which reruns the script, as it should.
    let abs = |p: String| if Path::new(&p).is_absolute() { PathBuf::from(p) } else { dir.join(p) };
    let watch = |p: PathBuf| {
        if p.is_file() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    };
    if let Some(git_dir) = git(&dir, &["rev-parse", "--git-dir"]).map(abs) {
        watch(git_dir.join("HEAD"));
    }
    if let Some(common) = git(&dir, &["rev-parse", "--git-common-dir"]).map(abs) {
        watch(common.join("packed-refs"));
        if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
            watch(common.join(branch));
        }
    }
}
