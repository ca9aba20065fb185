//! Records the source revision the `o2o` binary is built from (`O2O_BUILD_GIT_REVISION`), so a
//! run's manifest names the code that ran, not whatever the checkout holds when it runs.
//! Reruns when the checkout's HEAD moves (a commit, a checkout, a merge) or a preset file changes.
//!
//! Also writes the table of embedded presets (`$OUT_DIR/presets.rs`, see [`preset_table`]), and
//! links libtorch's CUDA backend into the `o2o` binary when the libtorch it builds against has
//! one (see [`link_cuda_backend`]).

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
    preset_table(&dir);
    link_cuda_backend();
    // A build of a copied tree (scripts/gpu/bundle.sh) names its source's revision itself.
    println!("cargo:rerun-if-env-changed=O2O_GIT_REVISION");
    let rev = std::env::var("O2O_GIT_REVISION").ok().or_else(|| git(&dir, &["rev-parse", "HEAD"])).unwrap_or_default();
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

/// The presets: `presets/*.toml` are the presets, `presets/base/*.toml` the bases they extend
/// (`src/run/presets.rs`). Both go into the binary through a table written to
/// `$OUT_DIR/presets.rs`, so a new file needs no code; a preset and a base may not share a name.
fn preset_table(dir: &Path) {
    let folder = dir.join("presets");
    println!("cargo:rerun-if-changed={}", folder.display());
    let toml_files = |folder: &Path| -> Vec<(String, PathBuf)> {
        let entries = std::fs::read_dir(folder).unwrap_or_else(|e| panic!("cannot list {}: {e}", folder.display()));
        let mut files: Vec<(String, PathBuf)> = entries
            .map(|e| e.unwrap_or_else(|e| panic!("cannot list {}: {e}", folder.display())).path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
            .map(|p| (p.file_stem().expect("a .toml file has a stem").to_string_lossy().to_string(), p))
            .collect();
        files.sort();
        files
    };
    let (presets, bases) = (toml_files(&folder), toml_files(&folder.join("base")));
    if let Some((name, _)) = bases.iter().find(|(b, _)| presets.iter().any(|(p, _)| p == b)) {
        panic!("presets/{name}.toml and presets/base/{name}.toml: a preset and a base share the name `{name}`");
    }
    let rows = |files: &[(String, PathBuf)]| -> String {
        files
            .iter()
            .map(|(name, path)| format!("    ({name:?}, include_str!({:?})),\n", path.display().to_string()))
            .collect()
    };
    let code = format!(
        "/// Every preset: (name, TOML text), sorted by name; the name is the file name without `.toml`.\n\
         pub const PRESETS: &[(&str, &str)] = &[\n{}];\n\n\
         /// The bases presets extend (`presets/base/`): (name, TOML text), sorted by name.\n\
         pub const BASES: &[(&str, &str)] = &[\n{}];\n",
        rows(&presets),
        rows(&bases)
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("presets.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}

/// Link `libtorch_cuda.so` into the `o2o` binary whenever the libtorch being linked has it
/// (`$LIBTORCH/lib`, as `make setup` and `scripts/gpu/bundle.sh` set it).
///
/// Nothing in o2o calls a symbol of `libtorch_cuda.so`, so the linker's default `--as-needed`
/// drops it; libtorch then never runs its CUDA backend's static registration and
/// `tch::Cuda::is_available()` is false on any GPU machine (tch-rs issue #980). Listing it
/// between `--no-as-needed` and `--as-needed` keeps the NEEDED entry, as tch-rs's own build
/// script does for its examples. Only the binaries get it: the test binaries that run agents in
/// process stay CPU-only and start faster. `O2O_LINK_CUDA=0` at build time opts out.
fn link_cuda_backend() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=O2O_LINK_CUDA");
    if std::env::var("O2O_LINK_CUDA").is_ok_and(|v| v == "0") {
        // `o2o doctor` reports the opt-out instead of a missing backend.
        println!("cargo:rustc-env=O2O_CUDA_LINK_OPTED_OUT=1");
        return;
    }
    let Some(lib) = std::env::var_os("LIBTORCH").map(|t| PathBuf::from(t).join("lib")) else { return };
    if lib.join("libtorch_cuda.so").is_file() {
        println!("cargo:rustc-link-search=native={}", lib.display());
        for arg in ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"] {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
}
