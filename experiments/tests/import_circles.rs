//! No import circles between the files of a crate (issue 48 item 3 cut them; this keeps them cut).
//!
//! A circle is a set of files that reach each other through `use` and path references
//! (`crate::a::b`, `super::c`, `self::d`, a child module's name): runner.rs using eval.rs while
//! eval.rs uses runner.rs, or a longer ring. Such files cannot be read, tested or moved one at a
//! time, which is why the runner's shared services live in files of their own.
//!
//! How the graph is made, per crate root (`lib.rs`, and `main.rs` with the modules it declares):
//! - the module tree follows `mod name;` declarations from the root, as rustc does
//!   (`dir/name.rs` or `dir/name/mod.rs`);
//! - a file's edges are the paths in its `use` trees and the `crate::`/`super::`/`self::` paths in
//!   its code, each resolved to the deepest module file it names (an item of a module belongs to
//!   that module's file); comments and string literals are skipped;
//! - a module's references to its own descendants are not edges: a parent declares and re-exports
//!   its children (`mod a; pub use a::A;`), and a child using what its parent defines is the
//!   ordinary direction. Sibling and cousin references are edges;
//! - a `#[cfg(test)]` inline module's references are not edges: a file's tests may use the
//!   modules that use the file (they are its clients, not its dependencies).
//!
//! The check: every strongly connected component of the graph is a single file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path from the crate root: `[]` is the root, `["run", "eval"]` is `crate::run::eval`.
type ModPath = Vec<String>;

/// One crate root's module tree: module path → file.
struct ModuleTree {
    files: BTreeMap<ModPath, PathBuf>,
}

impl ModuleTree {
    /// The tree declared from `root` (a `lib.rs` or `main.rs`).
    fn from_root(root: &Path) -> Self {
        let mut files = BTreeMap::new();
        Self::walk(root, Vec::new(), true, &mut files);
        Self { files }
    }

    /// `file` as module `path`, then every `mod name;` it declares. `owns_dir` is true for
    /// `lib.rs`, `main.rs` and `mod.rs`, whose children sit beside them; a `name.rs` file's
    /// children sit in `name/`.
    fn walk(file: &Path, path: ModPath, owns_dir: bool, files: &mut BTreeMap<ModPath, PathBuf>) {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dir = if owns_dir { file.parent().unwrap().to_path_buf() } else { file.with_extension("") };
        let declared = declared_modules(&tokens(&text));
        files.insert(path.clone(), file.to_path_buf());
        for name in declared {
            let (flat, nested) = (dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs"));
            let mut child = path.clone();
            child.push(name);
            if flat.is_file() {
                Self::walk(&flat, child, false, files);
            } else if nested.is_file() {
                Self::walk(&nested, child, true, files);
            }
        }
    }

    /// The deepest module file that `path` names, and that module's path.
    fn resolve(&self, path: &[String]) -> Option<ModPath> {
        (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| self.files.contains_key(p))
    }

    /// Each file's module path → the module paths it refers to (not itself, not its descendants).
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges = BTreeMap::new();
        for (module, file) in &self.files {
            let text = fs::read_to_string(file).unwrap();
            let mut targets = BTreeSet::new();
            for (inline, path) in references(&tokens(&text)) {
                let Some(absolute) = self.absolute(module, &inline, &path) else { continue };
                if let Some(target) = self.resolve(&absolute) {
                    if !target.starts_with(module) {
                        targets.insert(target);
                    }
                }
            }
            edges.insert(module.clone(), targets);
        }
        edges
    }

    /// `path` as written in `module` inside the inline modules `inline`, from the crate root;
    /// `None` for a path into another crate.
    fn absolute(&self, module: &ModPath, inline: &[String], path: &[String]) -> Option<ModPath> {
        let mut here: ModPath = module.iter().chain(inline).cloned().collect();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                here.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    here.pop()?;
                    rest = &rest[1..];
                }
            }
            // A child module of this file used by its bare name (`use runner::Runner;` in mod.rs).
            Some(first) if self.files.contains_key(&[here.as_slice(), &[first.to_string()]].concat()) => {}
            _ => return None,
        }
        here.extend(rest.iter().cloned());
        Some(here)
    }
}

/// A token of Rust source with comments, strings and characters taken out.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(&'static str),
}

/// The identifiers and the punctuation that paths and modules are made of (`::`, `{`, `}`, `,`,
/// `;`, `*`); everything else is `Punct("")`.
fn tokens(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || (next == Some('#') && raw_string_start(&chars, i + 1))) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            i += 2 + hashes;
            while i < chars.len() && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|&h| h == '#')) {
                i += 1;
            }
            i += 1 + hashes;
            out.push(Tok::Punct(""));
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Tok::Punct(""));
        } else if c == '\'' {
            // A character ('a', '\n', '\u{..}') or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
            out.push(Tok::Punct(""));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
            out.push(Tok::Punct(""));
        } else if c == ':' && next == Some(':') {
            out.push(Tok::Punct("::"));
            i += 2;
        } else {
            out.push(Tok::Punct(match c {
                '{' => "{",
                '}' => "}",
                ',' => ",",
                ';' => ";",
                '*' => "*",
                _ => "",
            }));
            i += 1;
        }
    }
    out
}

/// Whether `r#…"` starts a raw string at `chars[at]` (the first `#`), not a raw identifier.
fn raw_string_start(chars: &[char], at: usize) -> bool {
    chars[at..].iter().skip_while(|&&c| c == '#').next() == Some(&'"')
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The `mod name;` declarations at the file's top level (inline `mod name { … }` excluded).
fn declared_modules(toks: &[Tok]) -> Vec<String> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Punct("{") => depth += 1,
            Tok::Punct("}") => depth = depth.saturating_sub(1),
            Tok::Ident(kw) if kw == "mod" && depth == 0 => {
                if let (Some(name), Some(Tok::Punct(";"))) = (ident(toks.get(i + 1)), toks.get(i + 2)) {
                    out.push(name.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// Every path the file refers to, with the inline modules it sits in: the leaves of each `use`
/// tree, and each `crate::…`, `super::…`, `self::…` path elsewhere.
fn references(toks: &[Tok]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    // The inline modules around the cursor: name, brace depth inside it, whether it is `#[cfg(test)]`.
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    let here = |inline: &[(String, usize, bool)]| inline.iter().map(|(n, _, _)| n.clone()).collect::<Vec<_>>();
    let in_tests = |inline: &[(String, usize, bool)]| inline.iter().any(|(_, _, test)| *test);
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct("{") => {
                depth += 1;
                i += 1;
            }
            Tok::Punct("}") => {
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(name), Some(Tok::Punct("{"))) = (ident(toks.get(i + 1)), toks.get(i + 2)) {
                    // `#[cfg(test)]` just before (`pub` between them allowed).
                    let before = &toks[i.saturating_sub(8)..i];
                    let cfg = before.iter().position(|t| *t == Tok::Ident("cfg".into()));
                    let test = cfg.is_some_and(|c| before[c..].contains(&Tok::Ident("test".into())));
                    inline.push((name.to_string(), depth + 1, test));
                }
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" => {
                let end = (i..toks.len()).find(|&j| toks[j] == Tok::Punct(";")).unwrap_or(toks.len());
                let mut leaves = Vec::new();
                use_tree(&toks[i + 1..end], Vec::new(), &mut leaves);
                if !in_tests(&inline) {
                    out.extend(leaves.into_iter().map(|p| (here(&inline), p)));
                }
                i = end + 1;
            }
            Tok::Ident(first) if matches!(first.as_str(), "crate" | "super" | "self") => {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Punct("::")) {
                    match ident(toks.get(j + 1)) {
                        Some(seg) => path.push(seg.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                if path.len() > 1 && !in_tests(&inline) {
                    out.push((here(&inline), path));
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

/// The full paths of a `use` tree's leaves (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`).
fn use_tree(toks: &[Tok], prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(kw) if kw == "pub" || kw == "as" => {
                // `pub(crate) use`: skip the visibility; `x as y`: the rename ends this leaf.
                if kw == "as" {
                    i += 2;
                    continue;
                }
                i += 1;
            }
            Tok::Ident(seg) => {
                path.push(seg.clone());
                i += 1;
            }
            Tok::Punct("::") | Tok::Punct("*") | Tok::Punct("") => i += 1,
            Tok::Punct("{") => {
                // Split the group at its top-level commas.
                let mut depth = 0;
                let mut start = i + 1;
                let mut j = i + 1;
                while j < toks.len() {
                    match toks[j] {
                        Tok::Punct("{") => depth += 1,
                        Tok::Punct("}") if depth == 0 => break,
                        Tok::Punct("}") => depth -= 1,
                        Tok::Punct(",") if depth == 0 => {
                            use_tree(&toks[start..j], path.clone(), out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                use_tree(&toks[start..j], path.clone(), out);
                return;
            }
            _ => i += 1,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The strongly connected components with more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let Some((w, _)) = s.edges.get_key_value(w) else { continue };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[w].min(s.low[v]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.index[w].min(s.low[v]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The circles of the crate roots found in `src` (`lib.rs`, `main.rs`), as file lists.
fn circles_in(src: &Path) -> Vec<Vec<PathBuf>> {
    graph_of(src).2
}

/// The files, the edges and the circles of the crate roots in `src`.
fn graph_of(src: &Path) -> (usize, usize, Vec<Vec<PathBuf>>) {
    let (mut files, mut edges, mut out) = (0, 0, Vec::new());
    for root in ["lib.rs", "main.rs"].map(|f| src.join(f)).into_iter().filter(|f| f.is_file()) {
        let tree = ModuleTree::from_root(&root);
        let graph = tree.edges();
        files += tree.files.len();
        edges += graph.values().map(BTreeSet::len).sum::<usize>();
        for circle in circles(&graph) {
            out.push(circle.iter().map(|m| tree.files[m].clone()).collect());
        }
    }
    (files, edges, out)
}

#[test]
fn no_crate_in_the_workspace_has_an_import_circle() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let crates = ["envs", "datasets", "agents", "reward-models", "robot", "experiments", "python"];
    let (mut files, mut edges, mut found) = (0, 0, Vec::new());
    for krate in crates {
        let src = workspace.join(krate).join("src");
        assert!(src.join("lib.rs").is_file(), "{} has no lib.rs", src.display());
        let (f, e, c) = graph_of(&src);
        (files, edges) = (files + f, edges + e);
        found.extend(c);
    }
    println!("{files} files, {edges} references between them");
    // A reader that missed the module tree or the references would pass vacuously.
    assert!(files > 200 && edges > 400, "only {files} files and {edges} references found");
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter().map(|f| f.strip_prefix(workspace).unwrap().display().to_string()).collect::<Vec<_>>().join(" ↔ ")
        })
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", shown.join("\n"));
}

/// The checker on a crate written here: it must find a sibling circle through every spelling
/// (a grouped `use super::{…}`, an inline `crate::` path, a child's bare name, an inline module's
/// `super::super`), and nothing in the parent ↔ child and comment/string cases.
#[test]
fn the_checker_finds_the_circles_it_should_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let file = src.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
    };
    write("lib.rs", "pub mod run;\npub mod clean;\npub mod quiet;\npub use run::runner::Runner;\n");
    // run/: runner ↔ eval through a grouped use and an inline path; mod.rs re-exports both.
    write("run/mod.rs", "pub mod runner;\npub mod eval;\npub mod leaf;\npub use eval::evaluate;\npub struct Shared;\n");
    write("run/runner.rs", "use super::{eval::{self, evaluate}, Shared};\npub struct Runner;\n");
    // A child using its parent's item, and a leaf used by both: no circle.
    write("run/leaf.rs", "use super::Shared;\n#[cfg(test)]\nmod tests {\n    use crate::run::eval;\n}\n");
    // leaf's tests use eval, and eval uses leaf: the tests are a client, no circle.
    write("run/eval.rs", "use super::leaf;\npub fn evaluate() { let _ = crate::run::runner::Runner; }\n");
    // clean.rs has a child module in clean/ that uses it back through an inline test module.
    write("clean.rs", "mod inner;\npub fn f() { inner::g(); }\n");
    write("clean/inner.rs", "pub fn g() {}\n#[cfg(test)]\nmod tests { use super::super::f; }\n");
    // Mentions in comments and strings are not references.
    write("quiet.rs", "// use crate::run::runner;\n/* crate::run::eval */\nconst S: &str = \"crate::run::runner\";\nconst R: &str = r#\"crate::run::eval\"#;\nfn l<'a>(x: &'a str) -> char { let _ = x; 'x' }\n");
    let found = circles_in(src);
    assert_eq!(found, vec![vec![src.join("run/eval.rs"), src.join("run/runner.rs")]], "{found:?}");

    // quiet.rs then really refers to both: quiet → runner, runner → quiet closes a second circle.
    write("quiet.rs", "use crate::run::runner::Runner as R;\n");
    write("run/runner.rs", "use super::{eval::{self, evaluate}, Shared};\nuse crate::quiet;\npub struct Runner;\n");
    let found = circles_in(src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0], vec![src.join("quiet.rs"), src.join("run/eval.rs"), src.join("run/runner.rs")]);
}
