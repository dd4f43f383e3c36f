//! A second real program no one here wrote: SQLite, from the amalgamation (`sqlite3.c`) that
//! the libsqlite3-sys crate bundles (a dev-dependency of this crate for its sources only),
//! driven by crates/preload/tests/c/sqlite_rounds.c and built with -finstrument-functions and
//! with -pg. Every function's call count in `perfaux report` is uftrace's (`uftrace record
//! --no-libcall`: perfaux traces the compiler's hooks only, uftrace the PLT calls too by
//! default), and tracing does not change the program's output.

mod calls;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use calls::*;

/// The directory of `sqlite3.c` and `sqlite3.h` in libsqlite3-sys's package.
fn sqlite_sources() -> Option<PathBuf> {
    let dir = package_dir("libsqlite3-sys")?.join("sqlite3");
    dir.join("sqlite3.c").is_file().then_some(dir)
}

/// gcc building sqlite_rounds with SQLite into `prog` with `flag` (-O0: the whole amalgamation
/// builds in 3 s, against 16 s at -O2, which the benchmarks use).
fn gcc(src: &Path, flag: &str, prog: &Path) -> Child {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/sqlite_rounds.c");
    Command::new("gcc")
        .args([
            "-O0",
            flag,
            "-DSQLITE_THREADSAFE=0",
            "-DSQLITE_OMIT_LOAD_EXTENSION",
        ])
        .arg("-I")
        .arg(src)
        .arg("-o")
        .arg(prog)
        .arg(driver)
        .arg(src.join("sqlite3.c"))
        .arg("-lm")
        .spawn()
        .expect("gcc")
}

#[test]
fn sqlite_call_counts_equal_uftraces_under_finstrument_functions_and_pg() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("uftrace");
    let src = sqlite_sources().expect("libsqlite3-sys's bundled sqlite3.c (cargo fetch)");
    let dir = tempfile::tempdir().unwrap();
    let builds: Vec<(&str, PathBuf, Child)> = [
        ("-finstrument-functions", "sqlite_fi"),
        ("-pg", "sqlite_pg"),
    ]
    .into_iter()
    .map(|(flag, name)| {
        let prog = dir.path().join(name);
        let child = gcc(&src, flag, &prog);
        (flag, prog, child)
    })
    .collect();
    let args = ["2", "300"];
    for (flag, prog, mut child) in builds {
        assert!(child.wait().unwrap().success(), "building sqlite {flag}");
        let alone = Command::new(&prog).args(args).output().unwrap();
        assert!(alone.status.success(), "sqlite_rounds {flag}");
        let want = uftrace_counts_with(dir.path(), &prog, &args, &["--no-libcall"], |n| {
            !n.contains(':')
        });
        assert!(want.len() > 200, "{flag}: uftrace traced {want:?}");
        let (out, data) = record(dir.path(), &prog, &args);
        assert!(
            out.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, alone.stdout, "{flag}: the program's output");
        assert_eq!(
            report_counts(&data),
            want,
            "{flag}: perfaux report against uftrace report"
        );
    }
}
