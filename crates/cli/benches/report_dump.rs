//! `perfaux report -D` against `perf report -D` (Debian perf 6.1) on the
//! same files, both run as processes with stdout to /dev/null: the Intel PT
//! fixture (perf 4.14, 178 KiB) and a recording of the built-in workload
//! made here (20000 requests per worker, ~23 MiB with the trace section).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};

const PERFAUX: &str = env!("CARGO_BIN_EXE_perfaux");
/// The Intel PT fixture in the repository's testdata/.
fn fixture() -> PathBuf {
    perfaux_testutil::fixture("intel_pt/perf.data.intel_pt-4.14")
}

fn run(cmd: &str, file: &Path, home: &Path) {
    let st = Command::new(cmd)
        .args(["report", "-D", "-i"])
        .arg(file)
        .env("HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(st.success(), "{cmd} report -D failed on {}", file.display());
}

fn recorded(dir: &Path) -> PathBuf {
    let out = dir.join("workload.data");
    let st = Command::new(PERFAUX)
        .args(["record", "--requests", "20000", "-m", ",16M", "-o"])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .expect("spawn perfaux record");
    assert!(st.success());
    out
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let big = recorded(dir.path());
    for (label, file) in [("intel_pt-fixture", fixture()), ("workload-20000", big)] {
        let mut g = c.benchmark_group(format!("report-D/{label}"));
        g.sample_size(10);
        g.bench_function("perfaux", |b| b.iter(|| run(PERFAUX, &file, &home)));
        g.bench_function("perf-6.1", |b| b.iter(|| run("perf", &file, &home)));
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
