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
    "check",
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
    let mut g = Graph::new();
    // `Files` holds the shipped files but main.rs (the binary on top).
    for (rel, code) in Files::read().code {
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let top = first.strip_suffix(".rs").unwrap_or(first);
        // lib.rs only declares the modules.
        if top == "lib" {
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
    // The fitness battery measures through `ProbeKernel` only.
    let mut files = Vec::new();
    rust_files(&src().join("check"), &mut files);
    for path in files {
        let (code, _) = shipped(&code_only(&std::fs::read_to_string(&path).unwrap()));
        for word in ["clap", "unsafe"] {
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

/// A module path inside the crate (`["judge", "interrupts", "rules"]`).
type ModPath = Vec<String>;

/// The module a file of src/ is (lib.rs is the crate root).
fn module_of(rel: &Path) -> ModPath {
    let mut segs: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    let last = segs.pop().unwrap();
    match last.as_str() {
        "mod.rs" | "lib.rs" => {}
        file => segs.push(file.strip_suffix(".rs").unwrap().to_string()),
    }
    segs
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every leaf of a use tree (`a::{b, c::{d as e, *}}`) as its path and the
/// name it binds (`None` for a glob).
fn use_leaves(tree: &str, prefix: &[String], out: &mut Vec<(ModPath, Option<String>)>) {
    let tree = tree.trim();
    // The top-level comma-separated parts of a group.
    if let Some(inner) = tree.strip_prefix('{') {
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_leaves(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_leaves(&inner[start..], prefix, out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    match tree.split_once("::") {
        Some((head, rest)) => {
            let mut p = prefix.to_vec();
            p.push(head.trim().to_string());
            use_leaves(rest, &p, out);
        }
        None if tree == "*" => out.push((prefix.to_vec(), None)),
        None => {
            let (name, alias) = match tree.split_once(" as ") {
                Some((n, a)) => (n.trim(), a.trim()),
                None => (tree, tree),
            };
            let mut p = prefix.to_vec();
            if name == "self" {
                out.push((p.clone(), p.last().cloned()));
            } else {
                p.push(name.to_string());
                out.push((p, Some(alias.to_string())));
            }
        }
    }
}

/// The paths a file's code names: each `use` leaf, and each inline
/// `crate::`, `super::` or `self::` path outside a `use`.
fn named_paths(code: &str) -> Vec<(ModPath, Option<String>)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut in_use = Vec::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].trim_end();
        let starts = before.is_empty()
            || before.ends_with([';', '{', '}', ']'])
            || before.ends_with("pub")
            || before.ends_with(')');
        if (at > 0 && is_ident_byte(b[at - 1])) || !starts {
            continue;
        }
        let end = code[at..].find(';').map_or(code.len(), |e| at + e);
        use_leaves(&code[at + 4..end], &[], &mut out);
        in_use.push(at..end);
    }
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            if (at > 0 && (is_ident_byte(b[at - 1]) || b[at - 1] == b'$' || b[at - 1] == b':'))
                || in_use.iter().any(|r| r.contains(&at))
            {
                continue;
            }
            let mut segs = Vec::new();
            let mut i = at;
            loop {
                let len = b[i..].iter().take_while(|&&c| is_ident_byte(c)).count();
                if len == 0 {
                    break;
                }
                segs.push(code[i..i + len].to_string());
                i += len;
                if !b[i..].starts_with(b"::") {
                    break;
                }
                i += 2;
            }
            let name = segs.last().cloned();
            out.push((segs, name));
        }
    }
    out
}

/// `path` as named in module `m`, made absolute (crate root first), or
/// None for another crate's path.
fn absolute(
    m: &[String],
    path: &[String],
    modules: &BTreeMap<ModPath, PathBuf>,
) -> Option<ModPath> {
    let mut segs = path.iter().peekable();
    let mut base: ModPath = match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("self") => {
            segs.next();
            m.to_vec()
        }
        Some("super") => {
            let mut base = m.to_vec();
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                segs.next();
                base.pop();
            }
            base
        }
        Some(first) => {
            let mut child = m.to_vec();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            m.to_vec()
        }
        None => return None,
    };
    base.extend(segs.cloned());
    Some(base)
}

/// Whether `code` defines an item called `name`.
fn defines(code: &str, name: &str) -> bool {
    [
        "struct",
        "enum",
        "fn",
        "trait",
        "type",
        "const",
        "static",
        "union",
        "macro_rules!",
    ]
    .iter()
    .any(|kw| {
        code.match_indices(&format!("{kw} {name}")).any(|(at, m)| {
            let end = at + m.len();
            (at == 0 || !is_ident_byte(code.as_bytes()[at - 1]))
                && code.as_bytes().get(end).is_none_or(|&c| !is_ident_byte(c))
        })
    })
}

/// The crate's shipped files by module, with their code and `use` leaves.
struct Files {
    modules: BTreeMap<ModPath, PathBuf>,
    code: BTreeMap<PathBuf, String>,
}

impl Files {
    fn read() -> Files {
        let root = src();
        let mut all = Vec::new();
        rust_files(&root, &mut all);
        let mut test_only = BTreeSet::new();
        let mut code = BTreeMap::new();
        for path in &all {
            let (c, tests) = shipped(&code_only(&std::fs::read_to_string(path).unwrap()));
            let dir = match path.file_name().unwrap().to_str().unwrap() {
                "mod.rs" | "lib.rs" | "main.rs" => path.parent().unwrap().to_path_buf(),
                _ => path.with_extension(""),
            };
            for t in tests {
                test_only.insert(dir.join(format!("{t}.rs")));
                test_only.insert(dir.join(t).join("mod.rs"));
            }
            code.insert(path.strip_prefix(&root).unwrap().to_path_buf(), c);
        }
        code.retain(|rel, _| !test_only.contains(&root.join(rel)) && rel != Path::new("main.rs"));
        let modules = code
            .keys()
            .map(|rel| (module_of(rel), rel.clone()))
            .collect();
        Files { modules, code }
    }

    /// The file that defines what the absolute `path` names: its deepest
    /// module's file, or, where that file only re-exports the name, the
    /// file the re-export leads to.
    fn defining_file(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        let mut m = Vec::new();
        let mut i = 0;
        while i < path.len() {
            let mut next = m.clone();
            next.push(path[i].clone());
            if !self.modules.contains_key(&next) {
                break;
            }
            m = next;
            i += 1;
        }
        let file = self.modules.get(&m)?.clone();
        let Some(name) = path.get(i).filter(|n| *n != "*" && depth < 8) else {
            return Some(file);
        };
        let code = &self.code[&file];
        if defines(code, name) {
            return Some(file);
        }
        for (leaf, bound) in named_paths(code) {
            if bound.as_deref() == Some(name.as_str())
                && let Some(abs) = absolute(&m, &leaf, &self.modules)
                && abs != path
            {
                return self.defining_file(&abs, depth + 1).or(Some(file));
            }
        }
        Some(file)
    }

    /// The inline paths through a child module (`fake::Scripted` in the
    /// module that declares `fake`), which no `crate::` marks.
    fn child_paths(&self, m: &[String], code: &str) -> Vec<(ModPath, Option<String>)> {
        let b = code.as_bytes();
        let mut out = Vec::new();
        for child in self
            .modules
            .keys()
            .filter(|k| k.len() == m.len() + 1 && k.starts_with(m))
        {
            let name = child.last().unwrap();
            for (at, _) in code.match_indices(&format!("{name}::")) {
                if at > 0 && (is_ident_byte(b[at - 1]) || b[at - 1] == b':') {
                    continue;
                }
                let rest = &code[at + name.len() + 2..];
                let len = rest.bytes().take_while(|&c| is_ident_byte(c)).count();
                out.push((vec![name.clone(), rest[..len].to_string()], None));
            }
        }
        out
    }

    /// Each file and the files it takes names from.
    fn graph(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut g = BTreeMap::new();
        for (m, file) in &self.modules {
            let mut to = BTreeSet::new();
            let code = &self.code[file];
            for (leaf, _) in named_paths(code)
                .into_iter()
                .chain(self.child_paths(m, code))
            {
                if let Some(abs) = absolute(m, &leaf, &self.modules)
                    && let Some(target) = self.defining_file(&abs, 0)
                    && &target != file
                {
                    to.insert(target);
                }
            }
            g.insert(file.clone(), to);
        }
        g
    }
}

/// The groups of files that reach each other through imports (each a
/// circle, or several): reachability from every file, then the files that
/// reach each other.
fn circles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<String>> {
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&PathBuf> = g[from].iter().collect();
        while let Some(f) = todo.pop() {
            if seen.insert(f.clone()) {
                todo.extend(g.get(f).into_iter().flatten());
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = g.keys().map(|f| (f, reach(f))).collect();
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for (f, r) in &reaches {
        if r.contains(*f) {
            groups.insert(
                r.iter()
                    .filter(|o| reaches[o].contains(*f))
                    .map(|o| o.display().to_string())
                    .collect(),
            );
        }
    }
    groups.into_iter().collect()
}

#[test]
fn no_import_circle_between_files() {
    let found = circles(&Files::read().graph());
    assert!(
        found.is_empty(),
        "files of src/ that import each other, around a circle (a name a file takes from its \
         parent's mod.rs counts as taken from that mod.rs):\n{}",
        found
            .iter()
            .map(|c| c.join(" <-> "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn file_imports_are_resolved_through_re_exports() {
    let mut leaves = Vec::new();
    use_leaves("a::{b, c::{d as e, *}, self}", &[], &mut leaves);
    let want: Vec<(ModPath, Option<String>)> = vec![
        (vec!["a".into(), "b".into()], Some("b".into())),
        (vec!["a".into(), "c".into(), "d".into()], Some("e".into())),
        (vec!["a".into(), "c".into()], None),
        (vec!["a".into()], Some("a".into())),
    ];
    assert_eq!(leaves, want);
    let paths = named_paths("pub use child::X;\nfn f() { super::y::z(); crate::q::R::new(); }");
    let found: Vec<String> = paths.iter().map(|(p, _)| p.join("::")).collect();
    assert_eq!(found, ["child::X", "crate::q::R::new", "super::y::z"]);
    // A file that takes a name its parent only re-exports depends on the
    // file defining it, not on the parent.
    let files = Files {
        modules: BTreeMap::from([
            (vec![], "lib.rs".into()),
            (vec!["j".into()], "j/mod.rs".into()),
            (vec!["j".into(), "a".into()], "j/a.rs".into()),
            (vec!["j".into(), "b".into()], "j/b.rs".into()),
        ]),
        code: BTreeMap::from([
            ("lib.rs".into(), "pub mod j;".to_string()),
            (
                "j/mod.rs".into(),
                "pub mod a; pub mod b; pub use a::Thing; pub struct Own; fn f() { b::go() }"
                    .to_string(),
            ),
            ("j/a.rs".into(), "pub struct Thing;".to_string()),
            (
                "j/b.rs".into(),
                "use crate::j::Thing; use super::Own;".to_string(),
            ),
        ]),
    };
    let g = files.graph();
    assert_eq!(
        g[Path::new("j/b.rs")],
        BTreeSet::from([PathBuf::from("j/a.rs"), PathBuf::from("j/mod.rs")])
    );
    assert_eq!(
        g[Path::new("j/mod.rs")],
        BTreeSet::from([PathBuf::from("j/a.rs"), PathBuf::from("j/b.rs")])
    );
    assert_eq!(
        circles(&g),
        [["j/b.rs".to_string(), "j/mod.rs".to_string()]]
    );
}
