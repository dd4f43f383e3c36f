//! The floors of perfaux-core keep one direction (src/lib.rs and the
//! README list them): the objects (event, buffer, pmu, thread, remote and
//! the leaves below them) sit below the overflow path, whose modules import
//! each other downward only (sample_id, output, aux, sample, overflow),
//! and that below the system calls. The only circle left is the objects'
//! own, which the workspace's layer test lists with its reason.
//!
//! The reading of the sources is perfaux-testutil's `layers` (`crate::`
//! paths between the crate's modules, outside `#[cfg(test)]`).

use std::path::Path;

use perfaux_testutil::layers::{ModuleGraph, circles, module_imports};

fn graph() -> ModuleGraph {
    let g = module_imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.len() > 15, "found the sources: {:?}", g.keys());
    // The reader sees both forms of import, and a path that names a
    // re-export of the crate root.
    assert!(g["overflow"].contains("sample") && g["control"].contains("output"));
    g
}

/// The overflow path, bottom first.
const OVERFLOW_PATH: [&str; 5] = ["sample_id", "output", "aux", "sample", "overflow"];
/// The system calls.
const SYSTEM_CALLS: [&str; 4] = ["open", "control", "mmap", "uevent"];
/// The objects and the leaves they stand on.
const OBJECTS: [&str; 14] = [
    "event",
    "buffer",
    "pmu",
    "thread",
    "remote",
    "clock",
    "mlock",
    "registry",
    "fd",
    "error",
    "rcu",
    "grave",
    "wire",
    "sample_rate",
];

#[test]
fn no_import_circle_spans_more_than_five_modules() {
    let c = circles(&graph());
    let largest = c.first().map_or(0, Vec::len);
    assert!(largest <= 5, "import circle of {largest} modules: {c:?}");
}

#[test]
fn the_object_layer_does_not_import_the_paths_above_it() {
    let g = graph();
    for low in OBJECTS {
        for high in OVERFLOW_PATH.iter().chain(&SYSTEM_CALLS) {
            assert!(!g[low].contains(*high), "{low} imports {high}");
        }
    }
}

#[test]
fn the_overflow_path_imports_only_downward_and_no_system_call() {
    let g = graph();
    for (i, low) in OVERFLOW_PATH.iter().enumerate() {
        for high in OVERFLOW_PATH[i + 1..].iter().chain(&SYSTEM_CALLS) {
            assert!(!g[*low].contains(*high), "{low} imports {high}");
        }
    }
    let c = circles(&g);
    for m in OVERFLOW_PATH {
        assert!(
            !c.iter().any(|circle| circle.iter().any(|x| x == m)),
            "{m} is in an import circle: {c:?}"
        );
    }
}

#[test]
fn every_module_but_the_facade_sits_on_a_floor() {
    // A new module is placed in the lists above, so that the floors' tests
    // see it.
    for m in graph().keys().filter(|m| *m != "driver") {
        assert!(
            OBJECTS
                .iter()
                .chain(&OVERFLOW_PATH)
                .chain(&SYSTEM_CALLS)
                .any(|x| x == m),
            "{m} is on no floor"
        );
    }
}

#[test]
fn no_module_imports_the_drivers_facade() {
    for (m, to) in &graph() {
        assert!(!to.contains("driver"), "{m} imports the driver facade");
    }
}
