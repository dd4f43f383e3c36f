//! `perfaux record -- ./prog` against `uftrace record` of the same program, whole processes,
//! in the same run (the overhead of a traced call, against uftrace's):
//! crates/preload/tests/c/calls.c built with -finstrument-functions and with -pg, run as
//! `calls 0 30 nojmp` (fib(30) and its leaf calls on one thread, about four million traced
//! calls), plainly, under perfaux and under uftrace (and under perfaux with
//! `swtrace/timing=periodic:256/`, the cheapest timing mode).
//! The overhead per call is (recorded - plain) / calls; the calls in the trace are
//! counted once per build (`perfaux script --call-trace`) and printed to stderr. Each run is
//! also made with fib(25) (`*_fib25`, about a tenth of the calls): the difference between the
//! two depths over the difference in calls is the marginal cost of a call, without what a
//! recording costs once (start, calibration, the file's end). Without gcc nothing is
//! measured; without uftrace its peer is left out (both said on stderr).
//!
//! `record_program_patched`: calls.c built with no instrumentation at all, under `perfaux
//! record -P . --no-libcall` and `uftrace record -P . --no-libcall` (both patch the entries at
//! the start).
//!
//! `record_program_snapshots`: the flight recorder (`-S`, 64 KiB areas, so that what each
//! snapshot writes stays small beside the run) on the -finstrument-functions build, alone and
//! with a SIGUSR2 to perfaux every millisecond (a snapshot each, taken while the program
//! runs): if a snapshot stopped the traced thread, the second would take longer by the
//! snapshots' time. The whole recording is timed, so the second also pays perfaux's writing of
//! the snapshots.
//!
//! `record_program_switches`: the kernel's context switches in the recording, on a
//! request-serving program (benches/data/pingpong.c: a client and a server thread over two
//! pipes, 20,000 requests, two switches or more each) built with -finstrument-functions: run
//! plainly, under `perfaux record` (switches recorded, the default) and under `perfaux record
//! --no-switch-events`, and with `perf record --switch-events -e dummy:u` and `perf record -e
//! dummy:u` as peers (without perf, they are left out, said on stderr). The switches and calls
//! in the recording are counted once and printed to stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};

const ARGS: [&str; 3] = ["0", "30", "nojmp"];
/// The shallower run of the marginal cost.
const ARGS_25: [&str; 3] = ["0", "25", "nojmp"];

fn run(c: &mut Command) {
    let st = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(st.success(), "{c:?}: {st}");
}

fn build(dir: &Path, flag: &str) -> Option<PathBuf> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../preload/tests/c/calls.c");
    let prog = dir.join(format!("calls{}", flag.replace(' ', "")));
    let ok = Command::new("gcc")
        .args(["-O2", "-g", "-pthread"])
        .args(flag.split(' '))
        .arg("-o")
        .arg(&prog)
        .arg(src)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(prog)
}

fn perfaux() -> Command {
    Command::new(env!("CARGO_BIN_EXE_perfaux"))
}

/// The calls in a perfaux recording of `prog` run with `args`.
fn traced_calls(dir: &Path, prog: &Path, args: &[&str]) -> usize {
    let data = dir.join("count.data");
    run(perfaux()
        .args(["record", "-m", ",64M", "-o"])
        .arg(&data)
        .arg("--")
        .arg(prog)
        .args(args));
    let out = perfaux()
        .args(["script", "--call-trace", "-i"])
        .arg(&data)
        .output()
        .expect("perfaux script");
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let have_uftrace = Command::new("uftrace")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_uftrace {
        eprintln!("skipped: the uftrace peer (uftrace not found)");
    }
    for flag in ["-finstrument-functions", "-pg"] {
        let Some(prog) = build(dir.path(), flag) else {
            eprintln!("skipped: record_program{flag} (gcc not found)");
            return;
        };
        eprintln!(
            "record_program{flag}: {} calls in the trace, {} with fib(25)",
            traced_calls(dir.path(), &prog, &ARGS),
            traced_calls(dir.path(), &prog, &ARGS_25)
        );
        let group = format!("record_program{flag}");
        peers(c, &group, dir.path(), &prog, &[], &[], have_uftrace);
    }
    patched(c, dir.path(), have_uftrace);
    if let Some(prog) = build(dir.path(), "-finstrument-functions") {
        let data = dir.path().join("s.data");
        let mut g = c.benchmark_group("record_program_snapshots");
        g.sample_size(10);
        let flight = |signals: bool| {
            let mut cmd = perfaux();
            // SIGUSR2 blocked from exec until perfaux's handlers are in (perfaux unblocks it
            // then): a signal in that window would otherwise end it (SIGUSR2's default).
            perfaux_testutil::block_sigusr2_until_handled(&mut cmd);
            let mut child = cmd
                .args(["record", "-S", "-m", ",64K", "-o"])
                .arg(&data)
                .arg("--")
                .arg(&prog)
                .args(ARGS)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn perfaux");
            let st = loop {
                if let Some(st) = child.try_wait().expect("wait") {
                    break st;
                }
                if signals {
                    // SAFETY: kill has no memory preconditions; the pid is this bench's child.
                    unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            };
            assert!(st.success(), "perfaux record -S: {st}");
        };
        g.bench_function("S_no_snapshots", |b| b.iter(|| flight(false)));
        g.bench_function("S_snapshot_every_ms", |b| b.iter(|| flight(true)));
        g.finish();
    }
    switches(c, dir.path());
}

/// The requests of the switch-cost runs.
const PINGPONG_REQUESTS: &str = "20000";

/// `record_program_switches`: the pingpong server plainly, recorded with its switches, and
/// recorded without them.
fn switches(c: &mut Criterion, dir: &Path) {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/data/pingpong.c");
    let prog = dir.join("pingpong");
    let built = Command::new("gcc")
        .args(["-O2", "-g", "-pthread", "-finstrument-functions", "-o"])
        .arg(&prog)
        .arg(src)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        eprintln!("skipped: record_program_switches (gcc not found)");
        return;
    }
    let data = dir.join("p.data");
    let record = |extra: &[&str]| {
        run(perfaux()
            .arg("record")
            .args(extra)
            .arg("-o")
            .arg(&data)
            .arg("--")
            .arg(&prog)
            .arg(PINGPONG_REQUESTS))
    };
    record(&[]);
    let lines = |args: &[&str]| {
        let out = perfaux()
            .args(args)
            .arg("-i")
            .arg(&data)
            .output()
            .expect("perfaux script");
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let switches = lines(&["script", "--show-switch-events"]) - lines(&["script"]);
    eprintln!(
        "record_program_switches: {switches} switches and {} calls in a recording of {} \
         requests",
        lines(&["script", "--call-trace"]),
        PINGPONG_REQUESTS
    );
    let mut g = c.benchmark_group("record_program_switches");
    g.sample_size(10);
    g.bench_function("plain", |b| {
        b.iter(|| run(Command::new(&prog).arg(PINGPONG_REQUESTS)))
    });
    g.bench_function("perfaux_record", |b| b.iter(|| record(&[])));
    g.bench_function("perfaux_record_no_switch_events", |b| {
        b.iter(|| record(&["--no-switch-events"]))
    });
    // The peer: perf recording the same program's switches (a user-only dummy event with
    // --switch-events), and perf with the dummy event alone (what a per-task kernel event
    // costs each switch, recorded or not).
    let have_perf = Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if have_perf {
        let pdata = dir.join("perf.data");
        for (name, extra) in [
            ("perf_record_switch_events", &["--switch-events"][..]),
            ("perf_record_dummy", &[][..]),
        ] {
            g.bench_function(name, |b| {
                b.iter(|| {
                    run(Command::new("perf")
                        .args(["record", "-q", "-e", "dummy:u"])
                        .args(extra)
                        .arg("-o")
                        .arg(&pdata)
                        .arg(&prog)
                        .arg(PINGPONG_REQUESTS))
                })
            });
        }
    } else {
        eprintln!("skipped: the perf peer of record_program_switches (perf not found)");
    }
    g.finish();
}

/// The group `name`: `prog` run plainly, under `perfaux record` (with `opts`) in the default
/// and the periodic timing, and under `uftrace record` (with `uftrace_opts`), with fib(30)
/// and fib(25).
fn peers(
    c: &mut Criterion,
    name: &str,
    dir: &Path,
    prog: &Path,
    opts: &[&str],
    uftrace_opts: &[&str],
    have_uftrace: bool,
) {
    let data = dir.join("b.data");
    let udir = dir.join("u.data");
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    for (suffix, args) in [("", ARGS), ("_fib25", ARGS_25)] {
        g.bench_function(format!("plain{suffix}"), |b| {
            b.iter(|| run(Command::new(prog).args(args)))
        });
        g.bench_function(format!("perfaux_record{suffix}"), |b| {
            b.iter(|| {
                run(perfaux()
                    .arg("record")
                    .args(opts)
                    .args(["-m", ",64M", "-o"])
                    .arg(&data)
                    .arg("--")
                    .arg(prog)
                    .args(args))
            })
        });
        // The cheapest timing mode (one timestamp per 256 packets, the others
        // interpolated): what tracing costs when exact per-call durations are not needed.
        g.bench_function(format!("perfaux_record_periodic{suffix}"), |b| {
            b.iter(|| {
                run(perfaux()
                    .arg("record")
                    .args(opts)
                    .args(["-e", "swtrace/timing=periodic:256/", "-m", ",64M"])
                    .arg("-o")
                    .arg(&data)
                    .arg("--")
                    .arg(prog)
                    .args(args))
            })
        });
        if have_uftrace {
            g.bench_function(format!("uftrace_record{suffix}"), |b| {
                b.iter(|| {
                    run(Command::new("uftrace")
                        .arg("record")
                        .args(uftrace_opts)
                        .arg("-d")
                        .arg(&udir)
                        .arg(prog)
                        .args(args))
                })
            });
        }
    }
    g.finish();
}

/// `record_program_patched`: the same program built with no instrumentation (`gcc -O2`), its
/// functions' entries patched at its start (`-P . --no-libcall`), against `uftrace record -P .
/// --no-libcall` (the same functions, patched by uftrace; library calls off in both).
fn patched(c: &mut Criterion, dir: &Path, have_uftrace: bool) {
    // No instrumentation flag: the define only gives the build a name of its own.
    let Some(prog) = build(dir, "-DPLAIN") else {
        return;
    };
    let p = ["-P", ".", "--no-libcall"];
    let u = ["-P", ".", "--no-libcall"];
    peers(
        c,
        "record_program_patched",
        dir,
        &prog,
        &p,
        &u,
        have_uftrace,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
