//! No crate of the workspace grows an import circle between its modules
//! unnoticed: every crate's circles (strongly connected groups of `crate::`
//! paths between its top modules, read by `perfaux_testutil::layers`) are
//! exactly the ones listed in [`KNOWN_CIRCLES`], each with the reason it
//! stays. A new circle fails, and so does a listed one that is gone (the
//! list says what is, not what was).
//!
//! The rule: modules import downward. A circle is allowed only where the
//! modules are one set of types that refer to each other, as the kernel's
//! structs do, and never beyond five modules (perfaux-core's own
//! tests/layers.rs holds its floors to more than that).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use perfaux_testutil::layers::{circles, module_imports};

/// (crate directory under `crates/`, the circle's modules sorted, why it
/// stays).
const KNOWN_CIRCLES: &[(&str, &[&str], &str)] = &[
    (
        "abi",
        &["records", "sample"],
        "one family of types over two files: the Record enum holds a SampleRecord, which \
         implements the records' EncodeRecord",
    ),
    (
        "core",
        &["buffer", "event", "pmu", "remote", "thread"],
        "the core's objects, which refer to each other as the kernel's structs do: an event \
         holds its buffer and PMU, a PMU is handed events and their AUX areas, a thread's \
         context lists its events, and an event's thread is reached by a remote call",
    ),
];

/// Every crate directory of the workspace: `crates/NAME` and
/// `crates/NAME/SUB` with a Cargo.toml and a `src/`.
fn crate_dirs(crates: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![crates.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if !path.is_dir() || path.ends_with("src") || path.ends_with("tests") {
                continue;
            }
            let depth = path.strip_prefix(crates).unwrap().components().count();
            if path.join("Cargo.toml").is_file() && path.join("src").is_dir() {
                out.push(path.clone());
            }
            if depth < 2 {
                dirs.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_crates_import_circles_are_the_listed_ones() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = crate_dirs(&crates);
    let names: Vec<String> = dirs
        .iter()
        .map(|d| {
            d.strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // The workspace's members, nested ones included.
    for member in [
        "abi",
        "core",
        "recorder",
        "preload",
        "preload/abi",
        "preload/runtime",
        "testutil",
    ] {
        assert!(
            names.iter().any(|n| n == member),
            "{member} not found in {names:?}"
        );
    }
    let mut found = BTreeMap::new();
    for (dir, name) in dirs.iter().zip(&names) {
        let g = module_imports(&dir.join("src"));
        for c in circles(&g) {
            assert!(
                c.len() <= 5,
                "{name}: an import circle of {} modules: {c:?}",
                c.len()
            );
            found.insert((name.clone(), c), ());
        }
    }
    let known: BTreeMap<(String, Vec<String>), &str> = KNOWN_CIRCLES
        .iter()
        .map(|(krate, c, why)| {
            let c: Vec<String> = c.iter().map(|m| (*m).to_owned()).collect();
            ((krate.to_string(), c), *why)
        })
        .collect();
    for key in found.keys() {
        assert!(
            known.contains_key(key),
            "{}: a new import circle {:?}: import downward, or list it with its reason",
            key.0,
            key.1
        );
    }
    for (key, why) in &known {
        assert!(
            found.contains_key(key),
            "{}: the listed circle {:?} ({why}) is gone: take it off the list",
            key.0,
            key.1
        );
    }
}
