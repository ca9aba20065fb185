//! `commands/` only parses (issue 48, item 6): a file under `experiments/src/commands/` defines a
//! subcommand's arguments, turns them into the library's options, calls the library and prints;
//! the work (rollouts, files, manifests, measurements, tables) lives in library modules such as
//! `benchmarks/`, `bench/` and `studies/`. This test counts the program lines of every file under
//! `src/commands/` and fails, naming the file, where one holds more than [`CAP`].
//!
//! Program lines are the lines before the file's top-level `#[cfg(test)]` that hold code, outside
//! comments and outside clap declarations (a struct or enum deriving `Args`, `Subcommand`,
//! `Parser` or `ValueEnum`): a long list of documented flags is a declarative table, which
//! STYLE.md exempts from size rules, and does not make a file a program.

mod source_files;

use source_files::{rust_files, workspace_root};

/// The most program lines a file under `commands/` may hold.
const CAP: usize = 300;

/// Files that still hold whole programs, to be moved into the library as the dataset makers,
/// benches and experiments were (issue 48, item 6). Each must still exceed [`CAP`]; once one is
/// moved, take it off this list, so that it cannot grow back.
const PENDING: [&str; 0] = [];

/// The derives that make a struct or an enum a clap declaration.
const CLAP: [&str; 4] = ["Args", "Subcommand", "Parser", "ValueEnum"];

/// Brace depth after `line` (strings, character literals and `//` comments left out), starting
/// from `depth` and `in_string`; returns whether the line holds code.
fn scan(line: &str, depth: &mut i64, in_string: &mut bool) -> bool {
    let chars: Vec<char> = line.chars().collect();
    let (mut code, mut i) = (false, 0);
    while i < chars.len() {
        let c = chars[i];
        if *in_string {
            code |= !c.is_whitespace();
            match c {
                '\\' => i += 1,
                '"' => *in_string = false,
                _ => {}
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            break;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            // `'{'`: a character literal, not a brace.
            code = true;
            i += 2;
        } else {
            code |= !c.is_whitespace();
            match c {
                '"' => *in_string = true,
                '{' => *depth += 1,
                '}' => *depth -= 1,
                _ => {}
            }
        }
        i += 1;
    }
    code
}

/// Whether `line` is a `#[derive(...)]` that names a clap trait.
fn clap_derive(line: &str) -> bool {
    line.starts_with("#[derive(")
        && line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|token| CLAP.contains(&token))
}

/// The program lines of a source file (module docs).
fn program_lines(text: &str) -> usize {
    let (mut count, mut depth, mut in_string) = (0, 0i64, false);
    // A clap derive seen and its item not yet reached; the depth a clap item's body closes at.
    let (mut pending_item, mut clap_body): (bool, Option<i64>) = (false, None);
    for line in text.lines() {
        let trimmed = line.trim();
        if depth == 0 && !in_string && trimmed == "#[cfg(test)]" {
            break;
        }
        let before = depth;
        let code = scan(line, &mut depth, &mut in_string);
        if let Some(end) = clap_body {
            if depth <= end {
                clap_body = None;
            }
            continue;
        }
        if clap_derive(trimmed) {
            pending_item = true;
            continue;
        }
        if pending_item {
            // The derive's other attributes, then the item's first line.
            if trimmed.contains("struct ") || trimmed.contains("enum ") {
                pending_item = false;
                if depth > before {
                    clap_body = Some(before);
                }
            }
            continue;
        }
        if code {
            count += 1;
        }
    }
    count
}

#[test]
fn command_files_only_parse_and_print() {
    let root = workspace_root().join("experiments/src/commands");
    let files = rust_files(&root);
    assert!(files.len() > 20, "found only {} files under src/commands", files.len());
    let mut bad = Vec::new();
    let mut pending_seen = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let name = file.strip_prefix(&root).unwrap_or(file).to_string_lossy().replace('\\', "/");
        let n = program_lines(&text);
        if PENDING.contains(&name.as_str()) {
            pending_seen.push(name.clone());
            if n <= CAP {
                bad.push(format!("{name}: {n} program lines, within the cap: take it off PENDING"));
            }
        } else if n > CAP {
            bad.push(format!(
                "{name}: {n} program lines (cap {CAP}): move the work into a library module, keep the arguments here"
            ));
        }
    }
    for p in PENDING {
        if !pending_seen.iter().any(|s| s == p) {
            bad.push(format!("{p}: listed in PENDING but not found under src/commands"));
        }
    }
    assert!(bad.is_empty(), "commands/ files that do more than parse and print:\n{}", bad.join("\n"));
}

#[test]
fn the_count_leaves_out_comments_clap_declarations_and_tests() {
    let text = r#"//! A module.

use clap::Args;

/// Arguments.
#[derive(Args, Debug)]
#[command(about = "x")]
pub struct A {
    /// A flag with {braces in its doc.
    #[arg(long, default_value = "{")]
    pub n: usize,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub n: usize,
}

pub fn run(a: A) -> usize {
    // A comment.
    let brace = '{';
    let s = "a } in a string";
    a.n + s.len() + brace.len_utf8()
}

#[cfg(test)]
mod tests {
    #[test]
    fn t() {}
}
"#;
    // `use`, the Options derive, its struct, field and `}`, `run`'s 5 lines.
    assert_eq!(program_lines(text), 10);
    assert!(clap_derive("#[derive(clap::Args)]") && clap_derive("#[derive(Subcommand, Debug)]"));
    assert!(!clap_derive("#[derive(Debug, Clone, Serialize)]"));
}
