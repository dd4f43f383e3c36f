//! The rooms of perfaux-core keep one direction: the modules that import
//! each other in a circle (a strongly connected group of `crate::`
//! references) stay small, so that event/buffer/pmu sit below the
//! overflow/sample/aux/output path, which sits below the system calls.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules each source file of `src/` names through `crate::` (test
/// modules left out).
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut text = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
        if p.extension().is_some_and(|x| x == "rs") && name != "lib" {
            let s = std::fs::read_to_string(&p).unwrap();
            let s = s.split("#[cfg(test)]").next().unwrap().to_owned();
            text.insert(name, s);
        }
    }
    let mods: BTreeSet<String> = text.keys().cloned().collect();
    let mut out = BTreeMap::new();
    for (m, s) in &text {
        let mut to = BTreeSet::new();
        for line in s.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                // `crate::x::..` or `crate::{x, y::..}`.
                let names = match rest.strip_prefix('{') {
                    Some(g) => g.split('}').next().unwrap_or(""),
                    None => rest,
                };
                for word in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    if mods.contains(word) && word != m {
                        to.insert(word.to_owned());
                    }
                    if names.as_ptr() == rest.as_ptr() {
                        break;
                    }
                }
            }
        }
        out.insert(m.clone(), to);
    }
    out
}

/// The strongly connected groups (Tarjan), largest first.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                c.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            c.sort();
            t.out.push(c);
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    t.out
}

#[test]
fn no_import_circle_spans_more_than_five_modules() {
    let g = edges();
    assert!(g.len() > 15, "found the sources: {:?}", g.keys());
    // The parser sees both forms of import.
    assert!(g["overflow"].contains("sample") && g["control"].contains("output"));
    let c = circles(&g);
    assert!(
        c[0].len() <= 5,
        "import circle of {} modules: {:?}",
        c[0].len(),
        c[0]
    );
}

#[test]
fn the_object_layer_does_not_import_the_paths_above_it() {
    let g = edges();
    for low in [
        "event", "buffer", "pmu", "thread", "remote", "clock", "mlock", "registry", "fd",
    ] {
        for high in [
            "aux", "output", "overflow", "sample", "open", "control", "mmap", "uevent",
        ] {
            assert!(!g[low].contains(high), "{low} imports {high}");
        }
    }
}
