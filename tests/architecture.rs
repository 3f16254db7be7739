//! The crate's layers, checked from the source: every `crate::` path in
//! src/ (shipped code, not `#[cfg(test)]` code) must point from a top-level
//! module to one below it in `LAYERS`, so the top-level modules can never
//! import each other in a cycle; and the module graph in lib.rs's doc must
//! be the one the code has, so a newcomer can trust it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first. A module may import only modules
/// before it. A new top-level module goes here, in its place.
const LAYERS: &[&str] = &[
    "domain",
    "stats",
    "records",
    "fingerprint",
    "judge",
    "config",
    "engine",
    "verdict",
    "results",
    "report",
    "cli",
    "testkit",
];

/// Each top-level module and the top-level modules it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments (doc comments name modules in prose) and
/// string literals' contents.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // A char literal with an escape: '\'', '\"', '\u{..}'.
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3;
        } else if let Some(hashes) = raw_string_start(b, i) {
            // r"..." or r#"..."#: ends at a quote and as many hashes.
            let end: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&end) {
                i += 1;
            }
            i += end.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The number of `#`s of a raw string starting at `i`, if one does.
fn raw_string_start(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'r' || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// `code` without its `#[cfg(test)]` items (an inline `mod tests { ... }`,
/// a `use`), and the names of the test-only modules it declares in files of
/// their own (`#[cfg(test)] mod tests;`).
fn shipped(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = rest[at + "#[cfg(test)]".len()..].trim_start();
        let end_line = item.find(['{', ';']).unwrap_or(item.len());
        let head = &item[..end_line];
        let words: Vec<&str> = head.split_whitespace().collect();
        if item[end_line..].starts_with(';') {
            if let [.., "mod", name] = words[..] {
                test_files.push(name.to_string());
            }
            rest = &item[end_line + 1..];
        } else {
            // Skip the braced item.
            let mut depth = 0;
            let mut end = item.len();
            for (j, c) in item.char_indices().filter(|&(j, _)| j >= end_line) {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = j + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &item[end..];
        }
    }
    out.push_str(rest);
    (out, test_files)
}

/// The top-level modules `code` names through `crate::`, including inside
/// `use crate::{a::X, b}`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        if at > 0 {
            let before = code[..at].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' || before == '$' {
                continue;
            }
        }
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(group.split(',').map(ident).filter(|s| !s.is_empty()));
        } else {
            let name = ident(after);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// The import graph of the crate's shipped code, by top-level module.
fn graph() -> Graph {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut test_only = BTreeSet::new();
    let mut per_file = Vec::new();
    for path in &files {
        let (code, tests) = shipped(&code_only(&std::fs::read_to_string(path).unwrap()));
        // `#[cfg(test)] mod x;` in a/mod.rs or a.rs is the file a/x.rs.
        let dir = match path.file_name().unwrap().to_str().unwrap() {
            "mod.rs" | "lib.rs" | "main.rs" => path.parent().unwrap().to_path_buf(),
            _ => path.with_extension(""),
        };
        for t in tests {
            test_only.insert(dir.join(format!("{t}.rs")));
            test_only.insert(dir.join(t).join("mod.rs"));
        }
        per_file.push((path.clone(), code));
    }
    let mut g = Graph::new();
    for (path, code) in per_file {
        let rel = path.strip_prefix(&root).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let top = first.strip_suffix(".rs").unwrap_or(first);
        // lib.rs only declares the modules; main.rs is the binary on top.
        if top == "lib" || top == "main" || test_only.contains(&path) {
            continue;
        }
        let edges = g.entry(top.to_string()).or_default();
        edges.extend(imports(&code).into_iter().filter(|m| m != top));
    }
    g
}

/// A cycle in `g`, as the path of modules around it, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let g = graph();
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "import cycle between top-level modules: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn every_import_points_down_the_layers() {
    let g = graph();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong = Vec::new();
    for (from, tos) in &g {
        let Some(r) = rank(from) else {
            wrong.push(format!("{from} is not in LAYERS (tests/architecture.rs)"));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(t) if t < r => {}
                _ => wrong.push(format!("{from} imports {to}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers {LAYERS:?}:\n{}",
        wrong.join("\n")
    );
    assert!(
        g["domain"].is_empty(),
        "domain must import nothing of the crate"
    );
}

/// The pure layers decide from data alone: no clap, no syscalls; and the
/// results schema can be read without knowing how a run is made.
#[test]
fn the_pure_layers_stay_pure() {
    let mut files = Vec::new();
    rust_files(&src().join("judge"), &mut files);
    for path in files {
        let (code, _) = shipped(&code_only(&std::fs::read_to_string(&path).unwrap()));
        for word in ["clap", "libc::", "unsafe"] {
            assert!(!code.contains(word), "{} uses {word}", path.display());
        }
    }
    let (domain, _) = shipped(&code_only(
        &std::fs::read_to_string(src().join("domain.rs")).unwrap(),
    ));
    assert!(!domain.contains("crate::"), "domain.rs imports the crate");
    let (schema, _) = shipped(&code_only(
        &std::fs::read_to_string(src().join("results/schema.rs")).unwrap(),
    ));
    for word in ["crate::engine", "crate::cli", "clap"] {
        assert!(
            !schema.contains(word),
            "results/schema.rs (the run.json schema) uses {word}"
        );
    }
}

/// lib.rs's doc draws the graph between ```text markers as lines
/// `module -> a, b` (or `module -> nothing`); it must be the code's.
#[test]
fn the_module_graph_in_lib_rs_is_the_code_s() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let block = lib
        .split("```text")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("lib.rs doc has a ```text block with the module graph");
    let mut drawn = Graph::new();
    for line in block.lines().filter(|l| l.contains("->")) {
        let (from, to) = line.split_once("->").unwrap();
        let tos = drawn.entry(from.trim().to_string()).or_default();
        if to.trim() != "nothing" {
            tos.extend(to.split(',').map(|m| m.trim().to_string()));
        }
    }
    assert_eq!(drawn, graph(), "lib.rs's module graph is stale");
}

#[test]
fn imports_are_found_in_every_form() {
    let code = code_only(
        "use crate::a::B;\nuse crate::{b::C, c};\n// crate::commented\nfn f() { crate::d::e(); \"crate::quoted\"; r#\"crate::raw \"q\"\"#; '\"'; }\nmacro_rules! m { () => { $crate::z } }",
    );
    let found: Vec<String> = imports(&code).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
    let (code, tests) = shipped(
        "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::x;\n    fn f() { {} }\n}\n#[cfg(test)]\nmod fake;\nuse crate::b;",
    );
    assert_eq!(tests, ["fake"]);
    assert_eq!(imports(&code).into_iter().collect::<Vec<_>>(), ["a", "b"]);
    let cyclic = Graph::from([
        ("x".to_string(), BTreeSet::from(["y".to_string()])),
        ("y".to_string(), BTreeSet::from(["x".to_string()])),
    ]);
    assert_eq!(find_cycle(&cyclic).unwrap(), ["x", "y", "x"]);
}
