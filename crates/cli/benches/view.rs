//! `perfaux report` and `perfaux export` of a recording with millions of
//! calls, against uftrace's `report` and `dump --chrome` on a recording of
//! a comparable number of calls (benches/data/uftrace_calls.c, built with
//! -finstrument-functions and recorded by `uftrace record`), measured in the
//! same run. perfaux's side is the built-in workload: 20000 requests per
//! worker, about 2.82 million calls; the C program makes about 2.88 million.
//! Without uftrace or gcc the peers are left out (said on stderr).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux::export::{ExportArgs, Format, export};
use perfaux::progress::Progress;
use perfaux::report::{ViewArgs, report};

fn ok(c: &mut Command) -> bool {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn recording(dir: &Path) -> PathBuf {
    let data = dir.join("calls.data");
    let rec = ok(Command::new(env!("CARGO_BIN_EXE_perfaux")).args([
        "record",
        "-o",
        data.to_str().unwrap(),
        "--requests",
        "20000",
        "-m",
        ",16M",
    ]));
    assert!(rec, "perfaux record failed");
    data
}

/// The uftrace recording's directory, or `None` without uftrace or gcc.
fn uftrace_recording(dir: &Path) -> Option<PathBuf> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/data/uftrace_calls.c");
    let prog = dir.join("uftrace_calls");
    let data = dir.join("uftrace.data");
    let built = ok(Command::new("gcc")
        .args(["-O0", "-finstrument-functions", "-o"])
        .arg(&prog)
        .arg(src));
    if !built
        || !ok(Command::new("uftrace")
            .arg("record")
            .arg("-d")
            .arg(&data)
            .arg(&prog))
    {
        eprintln!("skipped: the uftrace peers (uftrace or gcc not found)");
        return None;
    }
    Some(data)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let data = recording(dir.path());
    let uft = uftrace_recording(dir.path());
    let mut g = c.benchmark_group("view_2.8M_calls");
    g.sample_size(10);
    g.bench_function("perfaux_report", |b| {
        b.iter(|| report(&data, &ViewArgs::default(), &mut std::io::sink()).unwrap())
    });
    for (name, format) in [
        ("perfaux_export_perfetto", Format::Perfetto),
        ("perfaux_export_chrome", Format::Chrome),
    ] {
        let args = ExportArgs {
            input: data.clone(),
            format,
            output: Some(PathBuf::from("/dev/null")),
            tid: Vec::new(),
            comm: Vec::new(),
            symfs: None,
        };
        g.bench_function(name, |b| {
            b.iter(|| export(&args, &mut Progress::quiet()).unwrap())
        });
    }
    if let Some(u) = &uft {
        g.bench_function("uftrace_report", |b| {
            b.iter(|| assert!(ok(Command::new("uftrace").arg("report").arg("-d").arg(u))))
        });
        g.bench_function("uftrace_dump_chrome", |b| {
            b.iter(|| {
                assert!(ok(Command::new("uftrace")
                    .args(["dump", "--chrome", "-d"])
                    .arg(u)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
