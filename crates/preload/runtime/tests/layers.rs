//! The runtime's modules import one way: each names through `crate::` only modules of the
//! floors below its own, so no two of them import each other in a circle (the fork handler,
//! the probe interning, the loaded objects, the thread and the trampoline once did).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floors, lowest first: a module may import the modules of lower floors only. `lib.rs`
/// (the constructor and the process-wide words every floor reads) stands outside them.
const FLOORS: &[&[&str]] = &[
    // Leaves: the event table, the recorder's descriptors and liveness, this process's fork
    // words, cancellation held off, the memory of patched stubs, the code made writable, the
    // wrapped functions' next definitions.
    &[
        "events",
        "memfds",
        "lineage",
        "recorder_alive",
        "no_cancel",
        "stub_region",
        "text",
        "wrapped",
    ],
    // The loaded objects; the thread's slot; the slots' mappings kept; the program's SIGTRAP
    // beside the kernel triggers (libc's sigaction and signal wrapped).
    &["objects", "slot", "ring_maps", "sigtrap"],
    // Function address -> probe; the thread's events over its slot.
    &["intern", "traced"],
    // The traced thread and its per-call code.
    &["thread"],
    // What calls into the thread: the hooks, the trampoline, the fork and crash handlers.
    &["hooks", "trampoline", "fork", "crash"],
    // The loader's calls after each load (they need the trampoline's r_brk entry); the PLT
    // slots' stubs (they need the common entry's address).
    &["dl_watch", "plt_hooks"],
    // The unwinder's wrappers (they need the trampoline's address); the patched entries
    // (they need the common entry's, and the loader's calls).
    &["unwind", "patch"],
];

/// The modules each source file of `src/` names through `crate::` (comment lines and test
/// modules left out), with both forms: `crate::x::..` and `crate::{x, y}`.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut text = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
        if p.extension().is_some_and(|x| x == "rs") && name != "lib" {
            let s = std::fs::read_to_string(&p).unwrap();
            let code = s.split("#[cfg(test)]").next().unwrap().to_owned();
            text.insert(name, code);
        }
    }
    let mods: BTreeSet<String> = text.keys().cloned().collect();
    text.iter()
        .map(|(m, s)| {
            let mut to = BTreeSet::new();
            for line in s.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let names = match rest.strip_prefix('{') {
                        Some(g) => g.split('}').next().unwrap_or(""),
                        None => rest
                            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or(""),
                    };
                    for word in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                        if mods.contains(word) && word != m {
                            to.insert(word.to_owned());
                        }
                    }
                }
            }
            (m.clone(), to)
        })
        .collect()
}

fn floor_of(m: &str) -> usize {
    FLOORS
        .iter()
        .position(|f| f.contains(&m))
        .unwrap_or_else(|| panic!("module {m} is on no floor: add it to FLOORS"))
}

#[test]
fn every_import_goes_to_a_lower_floor() {
    let g = edges();
    assert!(g.len() >= 13, "found the sources: {:?}", g.keys());
    // The parser sees the imports that exist.
    assert!(g["thread"].contains("traced") && g["fork"].contains("thread"));
    for (m, to) in &g {
        for t in to {
            assert!(
                floor_of(t) < floor_of(m),
                "{m} (floor {}) imports {t} (floor {})",
                floor_of(m),
                floor_of(t)
            );
        }
    }
}

#[test]
fn every_module_is_on_a_floor() {
    for m in edges().keys() {
        floor_of(m);
    }
}
