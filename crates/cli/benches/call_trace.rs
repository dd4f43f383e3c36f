//! `perfaux script --call-trace` against `uftrace replay` on the same calls: a recursive
//! program (fib(30), built with gcc -O2 -pg) recorded by `perfaux record --` and by
//! `uftrace record`, each view's output to /dev/null, measured in the same run. Without
//! uftrace or gcc the bench is left out (said on stderr).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};

const FIB_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 30;
    printf("%d\n", fib(n));
    return 0;
}
"#;

fn ok(c: &mut Command) -> bool {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The program, perfaux's recording and uftrace's, or `None` without gcc or uftrace.
fn recordings(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let src = dir.join("fib.c");
    std::fs::write(&src, FIB_C).unwrap();
    let prog = dir.join("fib");
    let data = dir.join("fib.data");
    let uft = dir.join("uftrace.data");
    let built = ok(Command::new("gcc")
        .args(["-O2", "-pg", "-o"])
        .arg(&prog)
        .arg(&src));
    if !built
        || !ok(Command::new("uftrace")
            .arg("record")
            .arg("-d")
            .arg(&uft)
            .arg(&prog))
    {
        eprintln!("skipped: the call-trace bench (uftrace or gcc not found)");
        return None;
    }
    let rec = ok(Command::new(env!("CARGO_BIN_EXE_perfaux"))
        .args(["record", "-m", ",64M", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&prog));
    assert!(rec, "perfaux record failed");
    Some((data, uft))
}

/// Runs `c` with its output to /dev/null; true when it succeeded.
fn to_null(c: &mut Command) -> bool {
    let null = File::create("/dev/null").unwrap();
    c.stdout(null)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let Some((data, uft)) = recordings(dir.path()) else {
        return;
    };
    let mut g = c.benchmark_group("call_trace_fib30");
    g.sample_size(10);
    g.bench_function("perfaux_script_call_trace", |b| {
        b.iter(|| {
            assert!(to_null(
                Command::new(env!("CARGO_BIN_EXE_perfaux"))
                    .args(["script", "--call-trace", "-i"])
                    .arg(&data)
            ))
        })
    });
    g.bench_function("uftrace_replay", |b| {
        b.iter(|| {
            assert!(to_null(
                Command::new("uftrace").args(["replay", "-d"]).arg(&uft)
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
