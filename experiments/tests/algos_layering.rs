//! The algorithm files never choose a fast path (issue 48, ARCHITECTURE.md "Conventions"): every
//! taped pass, fused or AVX-512 kernel and closed-form gradient lives in `agents/src/nn/`, behind
//! a loss-level operation that picks the path inside. This test reads the non-test code of every
//! file under `agents/src/algos/` (the lines before its top-level `#[cfg(test)]`) and fails,
//! naming file and line, where one of the dispatch identifiers appears: `is_taped`,
//! `tape_applies`, `Device::Cpu`, an identifier ending in `_cpu`, or one naming the kernels
//! (`gemm`, `silu`, `team`, alone or as a `_`-separated part of a name).
//!
//! Inside `agents/src/nn/` the gates themselves ask one switch (issue 49): whether a tensor may
//! take the CPU fast path is `nn::path::fast_cpu` (a float32 CPU tensor, and the device-generic
//! path not forced), so a test can force every agent down the path CUDA takes. The second test
//! fails, naming file and line, where a non-test line of `agents/src/nn/` outside `path.rs` asks
//! the device itself: `Device::Cpu` compared (`==`, `!=`, a `match` arm, `matches!`) or
//! `is_cuda()`/`is_cpu()`. Creating a tensor on the CPU (`(Kind::Float, Device::Cpu)`) and
//! reading one back (`to_device(Device::Cpu)`) choose no path and pass, as do a fused kernel's
//! `assert!`s of its inputs (a precondition, checked after the gate chose).
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

/// What on `line` asks the device instead of `nn::path`: `Device::Cpu` (with or without `tch::`)
/// beside `==` or `!=`, before `=>`, inside `matches!`, or `is_cuda()`/`is_cpu()`.
fn device_questions(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in line.match_indices("Device::Cpu") {
        let before = line[..at].trim_end_matches("tch::").trim_end();
        let after = line[at + "Device::Cpu".len()..].trim_start();
        let compared = before.ends_with("==") || before.ends_with("!=") || after.starts_with("==");
        if compared || after.starts_with("!=") || after.starts_with("=>") || line.contains("matches!") {
            found.push("Device::Cpu compared".to_string());
        }
    }
    for call in ["is_cuda()", "is_cpu()"] {
        if line.contains(call) {
            found.push(call.to_string());
        }
    }
    found
}

/// The lines of `text` before its top-level `#[cfg(test)]`, each with whether it lies inside an
/// `assert!`-family macro call (`assert!`, `debug_assert!`, `assert_eq!`, …), whose parentheses
/// are followed across lines (those inside string literals aside).
fn lines_outside_tests(text: &str) -> Vec<(usize, &str, bool)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    for (i, line) in text.lines().take_while(|l| l.trim_end() != "#[cfg(test)]").enumerate() {
        let opens_assert = line.find("assert").and_then(|at| line[at..].find("!(").map(|p| at + p + 1));
        let start = if depth > 0 { Some(0) } else { opens_assert };
        let in_assert = start.is_some();
        if let Some(start) = start {
            let mut in_string = false;
            let mut prev = ' ';
            for c in line[start..].chars() {
                match c {
                    '"' if prev != '\\' => in_string = !in_string,
                    '(' if !in_string => depth += 1,
                    ')' if !in_string => depth -= 1,
                    _ => {}
                }
                prev = c;
            }
            depth = depth.max(0);
        }
        out.push((i + 1, line, in_assert));
    }
    out
}

#[test]
fn nn_gates_ask_the_path_switch() {
    let root = workspace_root().join("agents");
    let files = rust_files(&root.join("src/nn"));
    assert!(files.len() > 20, "found only {} files under src/nn", files.len());
    let mut bad = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("nn/path.rs")) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for (number, line, in_assert) in lines_outside_tests(&text) {
            if in_assert || line.trim_start().starts_with("//") {
                continue;
            }
            for what in device_questions(line) {
                let shown = file.strip_prefix(&root).unwrap_or(file).display();
                bad.push(format!("{shown}:{number}: `{what}` in: {}", line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "fast-path gates that ask the device instead of nn::path::fast_cpu (or generic_forced):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_device_scan_finds_comparisons_and_skips_creation_and_asserts() {
    let hits = |l: &str| device_questions(l);
    assert_eq!(hits("if q.device() != Device::Cpu || q.kind() != Kind::Float {"), ["Device::Cpu compared"]);
    assert_eq!(hits("&& head.weight.device() == tch::Device::Cpu"), ["Device::Cpu compared"]);
    assert_eq!(hits("if Device::Cpu == t.device() {"), ["Device::Cpu compared"]);
    assert_eq!(hits("Device::Cpu => self.closed_form(p, h),"), ["Device::Cpu compared"]);
    assert_eq!(hits("let on_cpu = matches!(t.device(), Device::Cpu);"), ["Device::Cpu compared"]);
    assert_eq!(hits("if !t.device().is_cuda() {"), ["is_cuda()"]);
    assert!(hits("Tensor::empty([rows], (Kind::Float, Device::Cpu))").is_empty());
    assert!(hits("let v = t.to_device(tch::Device::Cpu).to_kind(Kind::Float);").is_empty());
    assert!(hits("if path::fast_cpu(q) && q.dim() == 2 {").is_empty());
    let text = "fn f(t: &Tensor) {\n    assert!(\n        t.device() == Device::Cpu,\n        \"a (CPU\"\n    );\n    \
                if t.device() == Device::Cpu {}\n}\n#[cfg(test)]\nmod tests {}\n";
    let lines = lines_outside_tests(text);
    let asserted: Vec<(usize, bool)> = lines.iter().map(|(n, _, a)| (*n, *a)).collect();
    assert_eq!(asserted, [(1, false), (2, true), (3, true), (4, true), (5, true), (6, false), (7, false)]);
}
