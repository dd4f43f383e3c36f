//! `perfaux record` survives what users do to it: signals end
//! the recording with a complete file, the previous output and links stay
//! intact, a full disk leaves nothing behind, `-o -` streams a pipe-mode
//! perf.data that perf 6.1 reads, and loss is zero at default sizes under
//! load and counted when the consumer is starved. perf 6.1 judges every
//! file written.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;

/// The tests of this file run one at a time: the load test's load must
/// be the four busy loops it names, not the other tests' recordings.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// perf reads `file` without an error or a warning.
fn perf_reads(file: &Path) {
    perf_reads_with(file, false);
}

/// perf reads `file`; with `loss`, its warnings about lost data are expected.
fn perf_reads_with(file: &Path, loss: bool) {
    if !perf_present() {
        return;
    }
    let home = tempdir();
    for args in [
        &["report", "-D", "-i"][..],
        &["script", "-F", "comm,tid,event", "-i"],
    ] {
        let mut a = args.to_vec();
        a.push(path_str(file));
        let r = perf(&a, home.path());
        assert_eq!(r.code, 0, "perf {args:?} failed: {}", r.stderr);
        if loss {
            assert!(
                r.stderr.trim().is_empty() || r.stderr.contains("lost"),
                "{}",
                r.stderr
            );
        } else {
            assert_eq!(r.stderr.trim(), "", "perf {args:?} warned");
        }
    }
}

fn perf_present() -> bool {
    perfaux_testutil::oracle("perf")
}

/// Starts `perfaux -v record ARGS` and waits for "recording started".
fn start(args: &[&str], block_signals: bool) -> (Child, String, std::thread::JoinHandle<String>) {
    start_until(args, block_signals, |l| l.contains("recording started"))
}

/// Whether a `-v` progress line says the recording holds trace bytes ("..., N bytes of AUX").
fn has_trace_bytes(line: &str) -> bool {
    line.split(" bytes of AUX").next().is_some_and(|head| {
        line.contains(" bytes of AUX")
            && head
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0)
    })
}

/// Starts `perfaux -v record ARGS` and reads its stderr until a line satisfies `until`.
fn start_until(
    args: &[&str],
    block_signals: bool,
    until: impl Fn(&str) -> bool,
) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut c = Command::new(PERFAUX);
    c.arg("-v").arg("record").args(args).stderr(Stdio::piped());
    if block_signals {
        perfaux_testutil::block_sigusr2_until_handled(&mut c);
    }
    let mut child = c.spawn().unwrap();
    if block_signals {
        // Sent before perfaux runs: pending until its handlers are in.
        // SAFETY: kill() has no memory effects; the child is alive.
        unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
    }
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut all = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "record ended before it started: {all}"
        );
        all += &line;
        if until(&line) {
            break;
        }
    }
    let t = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    (child, all, t)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn signal_ends_the_recording_with_a_complete_file(sig: i32) {
    let _one = serial();
    let dir = tempdir();
    let out = dir.path().join("int.data");
    // The signal comes once the recording holds trace (a progress line with AUX bytes): sent
    // at "recording started", it could land before a loaded machine ran the first request,
    // and an empty trace would be what was recorded up to the signal.
    let (mut child, _, _rest) = start_until(
        &["--requests", "1000000", "-o", path_str(&out)],
        false,
        has_trace_bytes,
    );
    // SAFETY: kill() has no memory effects; the child is alive.
    unsafe { libc::kill(child.id() as i32, sig) };
    let st = child.wait().unwrap();
    assert!(st.success(), "record exited with {st:?} on signal {sig}");
    assert_eq!(
        names_in(dir.path()),
        ["int.data"],
        "only the output is left"
    );
    // A million requests at full speed on three threads outrun the drain
    // on a shared machine: loss is legitimate here, and perf says so.
    perf_reads_with(&out, true);
    let ct = perfaux(&["script", "--call-trace", "-i", path_str(&out)]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    assert!(
        ct.stdout.contains(" serve_request"),
        "the trace up to the signal is kept"
    );
}

#[test]
fn sigint_writes_a_complete_file() {
    signal_ends_the_recording_with_a_complete_file(libc::SIGINT);
}

#[test]
fn sigterm_writes_a_complete_file() {
    signal_ends_the_recording_with_a_complete_file(libc::SIGTERM);
}

#[test]
fn sighup_writes_a_complete_file() {
    signal_ends_the_recording_with_a_complete_file(libc::SIGHUP);
}

#[test]
fn an_early_sigusr2_takes_a_snapshot_and_does_not_kill() {
    let _one = serial();
    let dir = tempdir();
    let out = dir.path().join("early.data");
    let (mut child, mut all, rest) =
        start(&["-S", "--requests", "300", "-o", path_str(&out)], true);
    let st = child.wait().unwrap();
    all += &rest.join().unwrap();
    assert!(st.success(), "{st:?}: {all}");
    let cap = parse_captured(&all);
    assert!(cap.snapshots >= 1, "the early request was answered: {all}");
    perf_reads(&out);
}

#[test]
fn sigusr2_without_snapshot_mode_is_ignored() {
    let _one = serial();
    let dir = tempdir();
    let out = dir.path().join("u.data");
    let (mut child, _, _rest) = start(&["--requests", "2000", "-o", path_str(&out)], false);
    // SAFETY: kill() has no memory effects; the child is alive.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    perf_reads(&out);
}

#[test]
fn an_existing_output_becomes_old_and_a_link_is_replaced_not_followed() {
    let _one = serial();
    let dir = tempdir();
    let target = dir.path().join("precious");
    std::fs::write(&target, b"not a recording").unwrap();
    let out = dir.path().join("perf.data");
    std::os::unix::fs::symlink(&target, &out).unwrap();
    record(dir.path(), "perf.data", &[]);
    assert_eq!(std::fs::read(&target).unwrap(), b"not a recording");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    let old = dir.path().join("perf.data.old");
    assert!(
        std::fs::symlink_metadata(&old)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Again: the first recording becomes perf.data.old.
    let first = std::fs::read(&out).unwrap();
    record(dir.path(), "perf.data", &[]);
    assert_eq!(std::fs::read(&old).unwrap(), first);
    assert_eq!(
        names_in(dir.path()),
        ["perf.data", "perf.data.old", "precious"]
    );
    perf_reads(&out);
}

/// A directory named `perf.data.old` would stop the end's rename of the previous output
/// (issue 22 item 5): refused before the program runs, saying which name; the previous
/// output and the directory untouched.
#[test]
fn a_directory_named_old_is_refused_before_the_program_runs() {
    let _one = serial();
    let dir = tempdir();
    let out = dir.path().join("perf.data");
    std::fs::write(&out, b"the previous recording").unwrap();
    std::fs::create_dir(dir.path().join("perf.data.old")).unwrap();
    let ran = dir.path().join("ran");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&out),
        "--",
        "touch",
        path_str(&ran),
    ]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("perf.data.old: a directory has that name"),
        "{}",
        r.stderr
    );
    assert!(!ran.exists(), "the program ran: {}", r.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    assert_eq!(names_in(dir.path()), ["perf.data", "perf.data.old"]);
    // The built-in workload's recording alike.
    let r = perfaux(&["record", "-o", path_str(&out)]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("a directory has that name"),
        "{}",
        r.stderr
    );
    assert_eq!(names_in(dir.path()), ["perf.data", "perf.data.old"]);
}

/// A disk without room even for the 4 MiB the recorder holds for a recording's end (a disk
/// that fills later keeps the recording so far: record_full_disk.rs): the recording cannot
/// be kept, and fails with the previous file in place.
#[test]
fn a_full_disk_leaves_the_previous_file_and_no_temporary() {
    let _one = serial();
    let dir = tempdir();
    let mnt = dir.path();
    let ok = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=64k",
            "perfaux-test",
            path_str(mnt),
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        perfaux_testutil::skip("cannot mount a small tmpfs (needs root)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _u = Unmount(mnt);
    let out = mnt.join("perf.data");
    std::fs::write(&out, b"the previous recording").unwrap();
    let r = perfaux(&["record", "-o", path_str(&out)]);
    assert_ne!(r.code, 0, "a recording cannot fit in 64 KiB");
    assert!(
        r.stderr.contains(path_str(&out)),
        "names the user's path: {}",
        r.stderr
    );
    assert!(
        !r.stderr.contains(".perfaux-"),
        "names no internal file: {}",
        r.stderr
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    assert_eq!(names_in(mnt), ["perf.data"]);
}

#[test]
fn dash_o_dash_streams_a_pipe_mode_file_perf_reads() {
    let _one = serial();
    let dir = tempdir();
    let stream = dir.path().join("stream");
    let f = std::fs::File::create(&stream).unwrap();
    let st = Command::new(PERFAUX)
        .args(["record", "-e", "uevent", "-o", "-"])
        .stdout(f)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(names_in(dir.path()), ["stream"], "no file named '-'");
    let head = std::fs::read(&stream).unwrap();
    assert_eq!(&head[..8], b"PERFILE2");
    // A pipe-mode header is 16 bytes (file mode's is 104).
    assert_eq!(u64::from_le_bytes(head[8..16].try_into().unwrap()), 16);
    if !perf_present() {
        return;
    }
    let home = tempdir();
    for args in [
        &["report", "-D", "-i", "-"][..],
        &["script", "-F", "event", "-i", "-"],
    ] {
        let o = Command::new("perf")
            .args(args)
            .env("HOME", home.path())
            .stdin(std::fs::File::open(&stream).unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "perf {args:?}: {err}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("perfaux:uevent") || text.contains("PERF_RECORD_SAMPLE"),
            "{text}"
        );
    }
    // The trace needs the file's feature section: refused up front.
    let r = perfaux(&["record", "-o", "-"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("pipe-mode"), "{}", r.stderr);
}

/// Four busy loops on the machine's cores while `f` runs.
fn under_load<T>(f: impl FnOnce() -> T) -> T {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hogs: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let r = f();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    r
}

#[test]
fn no_record_is_lost_under_load_at_default_sizes_and_at_16m() {
    let _one = serial();
    let dir = tempdir();
    for (name, args) in [
        ("default.data", &["--requests", "5000"][..]),
        ("big.data", &["--requests", "20000", "-m", ",16M"][..]),
    ] {
        let (f, r) = under_load(|| record(dir.path(), name, args));
        let cap = parse_captured(&r.stderr);
        assert_eq!(cap.lost, 0, "{name}: {}", r.stderr);
        perf_reads(&f);
    }
}

#[test]
fn a_starved_consumer_counts_every_lost_record() {
    let _one = serial();
    let dir = tempdir();
    // One page of data and one of AUX per thread: the producer outruns any consumer.
    let (f, r) = record(
        dir.path(),
        "starved.data",
        &["--requests", "2000", "-m", "1,1"],
    );
    let cap = parse_captured(&r.stderr);
    assert!(cap.lost > 0, "one page must overflow: {}", r.stderr);
    let d = perfaux(&["report", "-D", "-i", path_str(&f)]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let mut in_file = 0u64;
    for l in d.stdout.lines() {
        if let Some(rest) = l.split("PERF_RECORD_LOST").nth(1) {
            // LOST: "...: id:N: lost:M"; LOST_SAMPLES: "_SAMPLES: lost M".
            let n = rest.rsplit([':', ' ']).next().unwrap_or("");
            in_file += n.trim().parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
        } else if l.contains("PERF_RECORD_AUX ") && l.contains("flags: 0x") {
            let flags = l
                .split("flags: 0x")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            if u64::from_str_radix(flags, 16).unwrap() & 1 != 0 {
                in_file += 1;
            }
        }
    }
    assert_eq!(
        in_file, cap.lost,
        "the summary counts what the file says was lost"
    );
    perf_reads_with(&f, true);
}

/// Runs `perfaux record ARGS` into a directory holding a previous output,
/// ended by `end` (a kill, a memory limit); the previous file must stay
/// and no other file appear.
fn previous_output_survives(args: &[&str], limit_as: Option<u64>, kill: bool) {
    let dir = tempdir();
    let out = dir.path().join("perf.data");
    std::fs::write(&out, b"the previous recording").unwrap();
    let mut c = Command::new(PERFAUX);
    c.args(["-v", "record", "-o", path_str(&out)])
        .args(args)
        .stderr(Stdio::piped());
    if let Some(bytes) = limit_as {
        let set = move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            // SAFETY: `lim` is a valid rlimit on this stack.
            unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
            Ok(())
        };
        // SAFETY: the closure runs in the forked child before exec and
        // calls only setrlimit, which is async-signal-safe.
        unsafe { c.pre_exec(set) };
    }
    let mut child = c.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    if kill {
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("recording started") {
            line.clear();
        }
        // SAFETY: kill() has no memory effects; the child is alive.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    }
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    let st = child.wait().unwrap();
    assert!(!st.success(), "the recording cannot have finished: {rest}");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    assert_eq!(names_in(dir.path()), ["perf.data"], "{rest}");
}

#[test]
fn sigkill_leaves_the_previous_file_and_no_temporary() {
    let _one = serial();
    previous_output_survives(&["--requests", "1000000"], None, true);
}

#[test]
fn out_of_memory_leaves_the_previous_file_and_no_temporary() {
    let _one = serial();
    // 20 MiB of address space: less than the threads and rings need.
    previous_output_survives(&[], Some(20 << 20), false);
}

/// Peak RSS in KiB of `perfaux record ARGS`, and its stderr, with
/// SIGUSR2 sent every few milliseconds while it runs.
fn peak_rss_with_snapshots(out: &Path, requests: &str, ask: bool) -> (i64, String) {
    // Not asked: one snapshot, at exit (-Se).
    let mode = if ask { "-S" } else { "-Se" };
    let (child, mut all, rest) = start(&[mode, "--requests", requests, "-o", path_str(out)], false);
    let pid = child.id() as i32;
    std::mem::forget(child);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if ask {
            // SAFETY: kill() has no memory effects; pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGUSR2) };
        }
        // SAFETY: wait4 writes `status` and `ru`, both valid on this stack.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    all += &rest.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{all}"
    );
    (ru.ru_maxrss, all)
}

#[test]
fn record_s_memory_is_bounded_by_the_buffers_not_the_snapshots() {
    let _one = serial();
    let dir = tempdir();
    let (one, one_err) = peak_rss_with_snapshots(&dir.path().join("few.data"), "40000", false);
    let (many, all) = peak_rss_with_snapshots(&dir.path().join("many.data"), "40000", true);
    assert_eq!(parse_captured(&one_err).snapshots, 1, "{one_err}");
    let cap = parse_captured(&all);
    assert!(cap.snapshots >= 4, "enough snapshots to tell: {all}");
    // Each snapshot is three AUX areas of 4 MiB; kept in memory, every
    // snapshot after the first would add that much. Streamed, the peak
    // stays the buffers' (and the consumer's one copy of each area): less
    // than two snapshots' worth of growth where kept snapshots add three.
    let per_snapshot_kib = cap.aux_bytes / cap.snapshots / 1024;
    let grown = many - one;
    eprintln!(
        "peak RSS {one} KiB with one snapshot, {many} KiB with {} of {per_snapshot_kib} KiB",
        cap.snapshots
    );
    assert!(
        grown < 2 * per_snapshot_kib as i64,
        "peak RSS grew {grown} KiB over {} snapshots of {per_snapshot_kib} KiB ({one} -> {many} KiB)",
        cap.snapshots
    );
}
