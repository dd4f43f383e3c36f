//! C++ exceptions through traced frames (crates/preload/tests/c/exceptions.cpp): thrown by the
//! program and by libstdc++, rethrown, caught at several depths, with destructors run on the
//! way. Under -pg and -pg -mfentry the runtime hijacks return addresses; an exception must
//! still unwind (it ended in std::terminate before the runtime restored them for the unwinder),
//! the program must print what it prints alone, and every call must be counted as uftrace
//! counts it. uftrace 0.13 itself dies on this program under -pg, so its report of the
//! -finstrument-functions build judges all three flavours (the calls are the same program's).

mod calls;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use calls::*;

/// The functions of exceptions.cpp compared (uftrace names them without their parameters).
const FUNCTIONS: [&str; 8] = [
    "Guard::Guard",
    "Guard::~Guard",
    "leaf",
    "lib_throws",
    "main",
    "mid",
    "rethrows",
    "top",
];

const ROUNDS: &str = "12";

fn build(dir: &Path, flags: &[&str], name: &str) -> PathBuf {
    build_cxx(dir, "exceptions.cpp", flags, name)
}

/// Counts of [`FUNCTIONS`] among `names` (a C++ name's parameter list dropped).
fn counted(names: impl Iterator<Item = String>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for n in names {
        let base = n.split('(').next().unwrap_or("").to_string();
        if FUNCTIONS.contains(&base.as_str()) {
            *m.entry(base).or_insert(0) += 1;
        }
    }
    m
}

#[test]
fn exceptions_unwind_through_traced_frames_with_uftraces_call_counts() {
    perfaux_testutil::require_oracle!("g++");
    perfaux_testutil::require_oracle!("uftrace");
    let dir = tempfile::tempdir().unwrap();
    let judge = build(dir.path(), &["-finstrument-functions"], "judge");
    let want = uftrace_counts_of(dir.path(), &judge, &[ROUNDS], |n| FUNCTIONS.contains(&n));
    assert_eq!(want.len(), FUNCTIONS.len(), "uftrace's report: {want:?}");
    let alone = Command::new(&judge).arg(ROUNDS).output().unwrap();
    assert!(alone.status.success());
    for (flags, name) in [
        (&["-finstrument-functions"][..], "ex_fi"),
        (&["-pg"][..], "ex_pg"),
        (&["-pg", "-mfentry"][..], "ex_fentry"),
    ] {
        let prog = build(dir.path(), flags, name);
        let (out, data) = record(dir.path(), &prog, &[ROUNDS]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, alone.stdout, "{name}: the program's output");
        assert_eq!(
            counted(call_trace(&data).into_iter()),
            want,
            "{name}: calls against uftrace's"
        );
    }
}
