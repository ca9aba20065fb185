//! The algorithm files never choose a fast path (issue 48, ARCHITECTURE.md "Conventions"): every
//! taped pass, fused or AVX-512 kernel and closed-form gradient lives in `agents/src/nn/`, behind
//! a loss-level operation that picks the path inside. This test reads the non-test code of every
//! file under `agents/src/algos/` (the lines before its top-level `#[cfg(test)]`) and fails,
//! naming file and line, where one of the dispatch identifiers appears: `is_taped`,
//! `tape_applies`, `Device::Cpu`, an identifier ending in `_cpu`, or one naming the kernels
//! (`gemm`, `silu`, `team`, alone or as a `_`-separated part of a name).
//!
//! It checks the agents crate from here, beside the workspace's other layout checks
//! (`commands_layering.rs`, `import_circles.rs`), so that they share one source walker.

mod source_files;

use source_files::{rust_files, workspace_root};

/// Identifiers (or `_`-separated parts of one) that name the fast path's machinery.
const KERNEL_PARTS: [&str; 3] = ["gemm", "silu", "team"];
/// Whole identifiers that ask which path applies.
const DISPATCH: [&str; 2] = ["is_taped", "tape_applies"];

/// What on `line` is a dispatch point, if anything.
fn offenses(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    if line.contains("Device::Cpu") {
        found.push("Device::Cpu".to_string());
    }
    for token in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|t| !t.is_empty()) {
        let named = DISPATCH.contains(&token)
            || token.ends_with("_cpu")
            || token.split('_').any(|part| KERNEL_PARTS.contains(&part));
        if named {
            found.push(token.to_string());
        }
    }
    found
}

#[test]
fn algorithm_files_hold_no_dispatch_points() {
    let root = workspace_root().join("agents");
    let files = rust_files(&root.join("src/algos"));
    assert!(files.len() > 10, "found only {} files under src/algos", files.len());
    let mut bad = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for (i, line) in text.lines().take_while(|l| l.trim_end() != "#[cfg(test)]").enumerate() {
            for what in offenses(line) {
                let shown = file.strip_prefix(&root).unwrap_or(file).display();
                bad.push(format!("{shown}:{}: `{what}` in: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "dispatch points in algorithm files (move them behind an operation in agents/src/nn/):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_finds_what_it_should_and_nothing_else() {
    let hits = |l: &str| offenses(l);
    assert_eq!(hits("if pass.is_taped() {"), ["is_taped"]);
    assert_eq!(hits("let y = td_target_cpu(&q)"), ["td_target_cpu"]);
    assert_eq!(hits("crate::nn::gemm::bmm(x, w, None)"), ["gemm"]);
    assert_eq!(hits("let layers = net.silu_layers()?;"), ["silu_layers"]);
    assert_eq!(hits("let n = crate::nn::team::threads();"), ["team"]);
    assert_eq!(hits("if device == Device::Cpu {"), ["Device::Cpu"]);
    assert!(hits("activation: Activation::Silu, // a steam of teammates").is_empty());
    assert!(hits("crate::alloc::tune_allocator_for(device);").is_empty());
}
