//! Which modules of a crate import each other: the `crate::` paths each
//! module's source names, and the circles (strongly connected groups) they
//! make. The layer tests of the workspace read crates' sources with it.
//!
//! Hand-written because no crate answers it: `cargo modules` and the like
//! are programs to install, not libraries, and `syn` would parse far more
//! than a module's imports need. The reading is a small lexer and a `use`
//! tree parser:
//!
//! - a node is one module the crate root (`lib.rs`, else `main.rs`)
//!   declares in a file (`mod foo;`: `src/foo.rs` or `src/foo/mod.rs`);
//!   the files of the modules it declares in turn (`src/foo/bar.rs`, at
//!   any depth) count as `foo`: a module's inner modules are its own
//!   business, what layers is the crate's first floor of modules;
//! - an edge `a -> b` is a path `crate::b::...` (or `crate::{b, ...}`) in
//!   a source file of `a`, or `crate::Name` where the crate root
//!   (`lib.rs`, `main.rs`) re-exports `Name` from `b` with `use`;
//! - comments, string and char literals are blanked first, and items under
//!   `#[cfg(test)]` are left out, test modules in files of their own too
//!   (a test may reach anywhere); `super::` is not followed (it names the
//!   module's own parent, inside the node), nor `#[path]`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name -> the crate's modules it names.
pub type ModuleGraph = BTreeMap<String, BTreeSet<String>>;

/// The `crate::` references between the top modules of the crate whose
/// sources are under `src` (see the module doc for what counts). Panics
/// naming the file it could not read: a test's input is the repository.
pub fn module_imports(src: &Path) -> ModuleGraph {
    let root_file = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{}: no lib.rs or main.rs", src.display()));
    let root = code_of(&read(&root_file));
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in mod_decls(&root) {
        let mut texts = Vec::new();
        read_module(src, &name, &mut texts);
        files.insert(name, texts);
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    // Names the crate root re-exports, by the module they come from.
    let mut reexports = BTreeMap::new();
    for tree in use_trees(&root) {
        for (path, alias) in tree {
            let first = path.first().map(String::as_str);
            if let (Some(first), Some(name)) = (first, alias.or(path.last().cloned()))
                && modules.contains(first)
                && path.len() > 1
            {
                reexports.insert(name, first.to_owned());
            }
        }
    }
    let mut graph = ModuleGraph::new();
    for (module, texts) in &files {
        let mut to = BTreeSet::new();
        for text in texts {
            for path in crate_paths(text) {
                let Some(first) = path.first() else { continue };
                let target = if modules.contains(first) {
                    Some(first)
                } else {
                    reexports.get(first)
                };
                if let Some(t) = target
                    && t != module
                {
                    to.insert(t.clone());
                }
            }
        }
        graph.insert(module.clone(), to);
    }
    graph
}

/// The circles of `graph`: its strongly connected groups of two modules or
/// more (Tarjan), each sorted, the largest first.
pub fn circles(graph: &ModuleGraph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a ModuleGraph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on_stack.insert(v);
        let next = w.graph.get(v).into_iter().flatten();
        for u in next {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                visit(w, u);
                let lu = w.low[u];
                let lv = w.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lu);
            } else if w.on_stack.contains(u) {
                let iu = w.index[u];
                let lv = w.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iu);
            }
        }
        if w.low[v] == w.index[v] {
            let mut group = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                group.push(u.to_owned());
                if u == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                w.out.push(group);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out
        .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    w.out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The code of module `name`, declared in the module whose children live
/// in `dir`, and of the modules it declares in files, at any depth
/// (`name.rs` or `name/mod.rs`; children in `name/`).
fn read_module(dir: &Path, name: &str, out: &mut Vec<String>) {
    let file = [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .unwrap_or_else(|| {
        panic!(
            "{}: no {name}.rs or {name}/mod.rs (a #[path] module is not followed)",
            dir.display()
        )
    });
    let code = code_of(&read(&file));
    let children = mod_decls(&code);
    out.push(code);
    for child in children {
        read_module(&dir.join(name), &child, out);
    }
}

/// The modules `code` declares in files of their own (`mod x;`, any
/// visibility), in order.
fn mod_decls(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = code[at + "mod ".len()..].trim_start();
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') {
            out.push(name);
        }
    }
    out
}

/// `text` with its comments and string and char literals blanked (lines
/// kept) and its `#[cfg(test)]` items left out.
pub fn code_of(text: &str) -> String {
    without_test_items(&blank_literals(text))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Replaces comments and the insides of string and char literals with
/// spaces, keeping newlines, so that what is left is code.
fn blank_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && is_ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && !prev_ident
            && let Some(hashes) = raw_string_start(&c[i + 1..])
        {
            // r"..." or r#"..."#: no escapes, ends at the quote and as many #.
            let body = i + 1 + hashes + 1;
            for &ch in &c[i..body] {
                blank(&mut out, ch);
            }
            i = body;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    out.push(' ');
                    i += 1;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{7f}'), else a lifetime or label.
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// After an `r`: the number of `#` of a raw string that starts here.
fn raw_string_start(after_r: &[char]) -> Option<usize> {
    let hashes = after_r.iter().take_while(|&&c| c == '#').count();
    (after_r.get(hashes) == Some(&'"')).then_some(hashes)
}

/// Leaves out each item under `#[cfg(test)]`: up to its `;` or through its
/// braced body, whichever comes first.
fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let item = &rest[at + ATTR.len()..];
        let end = match item.find(['{', ';']) {
            Some(i) if item.as_bytes()[i] == b'{' => {
                let mut depth = 0usize;
                let mut end = item.len();
                for (j, b) in item.bytes().enumerate().skip(i) {
                    match b {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            Some(i) => i + 1,
            None => item.len(),
        };
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// One token of a path or `use` tree.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep,
    Open,
    Close,
    Comma,
    Star,
}

/// The tokens of a path or `use` tree that starts at `s`: outside braces
/// it goes on only through `::` (and ends after an `as NAME`); a group
/// ends at its balancing brace.
fn path_tokens(s: &str) -> Vec<Tok> {
    let b: Vec<char> = s.chars().collect();
    let skip_ws = |i: &mut usize| {
        while b.get(*i).is_some_and(|c| c.is_whitespace()) {
            *i += 1;
        }
    };
    let word = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(|&c| is_ident(c)) {
            *i += 1;
        }
        b[start..*i].iter().collect::<String>()
    };
    let mut toks = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    loop {
        skip_ws(&mut i);
        let Some(&c) = b.get(i) else { break };
        if is_ident(c) {
            toks.push(Tok::Ident(word(&mut i)));
            if depth == 0 {
                let mut j = i;
                skip_ws(&mut j);
                if b.get(j) == Some(&':') && b.get(j + 1) == Some(&':') {
                    continue;
                }
                if word(&mut j.clone()) == "as" {
                    let mut k = j + 2;
                    skip_ws(&mut k);
                    toks.push(Tok::Ident("as".to_owned()));
                    toks.push(Tok::Ident(word(&mut k)));
                }
                break;
            }
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            toks.push(Tok::Sep);
            i += 2;
        } else if c == '{' {
            depth += 1;
            toks.push(Tok::Open);
            i += 1;
        } else if c == '}' && depth > 0 {
            depth -= 1;
            toks.push(Tok::Close);
            i += 1;
            if depth == 0 {
                break;
            }
        } else if c == ',' && depth > 0 {
            toks.push(Tok::Comma);
            i += 1;
        } else if c == '*' {
            toks.push(Tok::Star);
            i += 1;
            if depth == 0 {
                break;
            }
        } else {
            break;
        }
    }
    toks
}

/// A path's leaf: its segments and its `as` name.
type Leaf = (Vec<String>, Option<String>);

/// The leaves of a `use` tree (a glob names the path before it).
fn tree_leaves(toks: &[Tok]) -> Vec<Leaf> {
    fn walk(toks: &[Tok], i: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Leaf>) {
        let depth = prefix.len();
        loop {
            match toks.get(*i) {
                Some(Tok::Ident(w)) => {
                    prefix.push(w.clone());
                    *i += 1;
                    if toks.get(*i) == Some(&Tok::Sep) {
                        *i += 1;
                        if matches!(toks.get(*i), Some(Tok::Ident(_) | Tok::Open | Tok::Star)) {
                            continue;
                        }
                    }
                    let mut alias = None;
                    if matches!(toks.get(*i), Some(Tok::Ident(a)) if a == "as") {
                        if let Some(Tok::Ident(a)) = toks.get(*i + 1) {
                            alias = Some(a.clone());
                        }
                        *i += 2;
                    }
                    out.push((prefix.clone(), alias));
                    break;
                }
                Some(Tok::Open) => {
                    *i += 1;
                    while !matches!(toks.get(*i), None | Some(Tok::Close)) {
                        let at = *i;
                        walk(toks, i, prefix, out);
                        if toks.get(*i) == Some(&Tok::Comma) {
                            *i += 1;
                        } else if *i == at || toks.get(*i) != Some(&Tok::Close) {
                            break;
                        }
                    }
                    if toks.get(*i) == Some(&Tok::Close) {
                        *i += 1;
                    }
                    break;
                }
                Some(Tok::Star) => {
                    *i += 1;
                    out.push((prefix.clone(), None));
                    break;
                }
                _ => break,
            }
        }
        prefix.truncate(depth);
    }
    let mut out = Vec::new();
    let mut i = 0;
    walk(toks, &mut i, &mut Vec::new(), &mut out);
    // `self` in a group names the prefix itself.
    for (path, _) in &mut out {
        if path.last().is_some_and(|w| w == "self") {
            path.pop();
        }
    }
    out
}

/// Every path that starts with `crate::` (or `$crate::`), as the segments
/// after it (one per leaf of a group).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        let toks = path_tokens(&code[at + "crate::".len()..]);
        out.extend(tree_leaves(&toks).into_iter().map(|(p, _)| p));
    }
    out
}

/// The trees of the `use` declarations in `code`, as their leaves, with
/// a leading `crate::` or `self::` dropped.
fn use_trees(code: &str) -> Vec<Vec<Leaf>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        let toks = path_tokens(&code[at + "use ".len()..]);
        let mut leaves = tree_leaves(&toks);
        for (path, _) in &mut leaves {
            if path.first().is_some_and(|w| w == "crate" || w == "self") {
                path.remove(0);
            }
        }
        out.push(leaves);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(code: &str) -> Vec<String> {
        crate_paths(&code_of(code))
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    }

    #[test]
    fn paths_are_read_in_every_form_of_import_and_use() {
        assert_eq!(paths("use crate::a::B;"), ["a::B"]);
        assert_eq!(paths("let x = crate::a::f(1);"), ["a::f"]);
        assert_eq!(
            paths("use crate::{a, b::{C, D as E}, self};"),
            ["a", "b::C", "b::D", ""]
        );
        assert_eq!(
            paths("use crate::{\n    a::X,\n    // crate::z\n    b,\n};"),
            ["a::X", "b"]
        );
        assert_eq!(paths("$crate::m::f!()"), ["m::f"]);
        assert_eq!(paths("pub(crate) fn f() {}"), Vec::<String>::new());
    }

    #[test]
    fn comments_literals_and_test_items_are_not_code() {
        let code = "// crate::a\n/* crate::b /* nested */ crate::c */\n\
                    let s = \"crate::d {\"; let r = r#\"crate::e\"#; let c = '{';\n\
                    fn f<'a>(x: &'a u8) {}\n\
                    #[cfg(test)]\nmod tests { use crate::f; fn g() { let _ = crate::g; } }\n\
                    #[cfg(test)]\nuse crate::h;\n\
                    use crate::i;";
        assert_eq!(paths(code), ["i"]);
        assert_eq!(code_of(code).lines().count(), code.lines().count());
    }

    #[test]
    fn use_trees_name_their_leaves_and_renames() {
        let trees = use_trees("pub use a::{B, c::D as E};\nuse crate::f::G;");
        let leaves: Vec<_> = trees.concat();
        assert_eq!(
            leaves,
            [
                (vec!["a".into(), "B".into()], None),
                (vec!["a".into(), "c".into(), "D".into()], Some("E".into())),
                (vec!["f".into(), "G".into()], None),
            ]
        );
    }

    #[test]
    fn modules_in_files_are_declared_ones_outside_tests() {
        let code = "pub mod a;\nmod b { fn f() {} }\npub(crate) mod c ;\n\
                    // mod d;\n#[cfg(test)]\nmod tests;\nfn mod_e() {}";
        assert_eq!(mod_decls(&code_of(code)), ["a", "c"]);
    }

    #[test]
    fn circles_are_the_strongly_connected_groups() {
        let mut g = ModuleGraph::new();
        let mut edge = |a: &str, b: &str| {
            g.entry(a.into()).or_default().insert(b.into());
            g.entry(b.into()).or_default();
        };
        edge("a", "b");
        edge("b", "c");
        edge("c", "a");
        edge("c", "d");
        edge("d", "e");
        edge("e", "d");
        edge("f", "a");
        assert_eq!(
            circles(&g),
            [vec!["a", "b", "c"], vec!["d", "e"]]
                .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>())
        );
    }
}
