//! Bad input gives a non-zero exit and one clear line on stderr naming what
//! and where: an unknown event or term (with its position), a missing file,
//! a truncated or corrupt file (with the file offset), a command to trace.

mod common;

use common::*;

fn one_error_line(r: &Run) -> &str {
    assert_ne!(r.code, 0, "expected failure, got success: {}", r.stdout);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {:?}", r.stderr);
    assert!(lines[0].starts_with("perfaux: error: "), "{}", lines[0]);
    lines[0]
}

#[test]
fn unknown_event_names_token_and_position() {
    let r = perfaux(&[
        "record",
        "-o",
        "/nonexistent/x",
        "-e",
        "swtrace//,cycles-of-doom",
    ]);
    let l = one_error_line(&r);
    assert!(
        l.contains("'cycles-of-doom'") && l.contains("position 10"),
        "{l}"
    );
}

#[test]
fn bad_term_names_token_and_position() {
    let r = perfaux(&["record", "-o", "/nonexistent/x", "-e", "swtrace/perod=10/"]);
    let l = one_error_line(&r);
    assert!(
        l.contains("'perod'") && l.contains("position 8") && l.contains("unknown term"),
        "{l}"
    );
    let r = perfaux(&[
        "record",
        "-o",
        "/nonexistent/x",
        "-e",
        "probe:no_such_function",
    ]);
    let l = one_error_line(&r);
    assert!(l.contains("no_such_function"), "{l}");
}

#[test]
fn aux_action_without_aux_leader() {
    let r = perfaux(&[
        "record",
        "-e",
        "{task-clock,probe:compute/aux-action=pause/}",
    ]);
    let l = one_error_line(&r);
    assert!(
        l.contains("Events with aux-action must have AUX area event group leader"),
        "{l}"
    );
}

/// A program built without instrumentation (ls) is traced by nothing: the error names it and
/// the flags that make it traceable, and no file that looks like success is left.
#[test]
fn a_command_without_hooks_names_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    let r = perfaux(&["record", "-o", out.to_str().unwrap(), "--", "ls", "-l"]);
    let l = one_error_line(&r);
    assert!(
        l.contains("'ls'") && l.contains("-finstrument-functions") && l.contains("-pg -mfentry"),
        "{l}"
    );
    assert!(!out.exists());
}

#[test]
fn missing_file() {
    for sub in [&["report", "-D"][..], &["script"][..]] {
        let mut a = sub.to_vec();
        a.extend(["-i", "/nonexistent/perf.data"]);
        let r = perfaux(&a);
        let l = one_error_line(&r);
        assert!(l.contains("/nonexistent/perf.data"), "{l}");
    }
}

#[test]
fn truncated_and_corrupt_files() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "t.data", &["--requests", "5"]);
    let bytes = std::fs::read(&f).unwrap();
    // Cut inside the data section (a record runs past the end), and cut
    // inside the feature sections (the records are whole, the trace
    // section is gone): both name the file offset.
    let data_start = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    for (name, len) in [
        ("cut-data.data", data_start + 100),
        ("cut-features.data", bytes.len() - 64),
    ] {
        let cut = dir.path().join(name);
        std::fs::write(&cut, &bytes[..len]).unwrap();
        for sub in [&["report", "-D"][..], &["script"][..]] {
            let mut a = sub.to_vec();
            a.extend(["-i", path_str(&cut)]);
            let r = perfaux(&a);
            let l = one_error_line(&r);
            assert!(l.contains("offset 0x") && l.contains(name), "{l}");
        }
    }
    // Not a perf.data at all.
    let junk = dir.path().join("junk.data");
    std::fs::write(&junk, b"this is not a perf.data file, not at all").unwrap();
    let r = perfaux(&["report", "-D", "-i", path_str(&junk)]);
    one_error_line(&r);
    // A few bytes only.
    let tiny = dir.path().join("tiny.data");
    std::fs::write(&tiny, &bytes[..10]).unwrap();
    let r = perfaux(&["script", "-i", path_str(&tiny)]);
    one_error_line(&r);
}

#[test]
fn standard_input() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempdir();
    let (f, _) = record(dir.path(), "in.data", &["--requests", "3"]);
    // Redirected from a file: read like the file.
    let by_path = perfaux(&["report", "-D", "-i", path_str(&f)]);
    let o = Command::new(PERFAUX)
        .args(["report", "-D", "-i", "-"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        stats_rows(&String::from_utf8_lossy(&o.stdout)),
        stats_rows(&by_path.stdout)
    );
    // A pipe carrying a file-mode perf.data: one clear line.
    let mut c = Command::new(PERFAUX)
        .args(["script", "-i", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&f).unwrap();
    let _ = c.stdin.take().unwrap().write_all(&bytes);
    let o = c.wait_with_output().unwrap();
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    let l = one_error_line(&r);
    assert!(l.contains("file-mode") && l.contains("-i FILE"), "{l}");
}

#[test]
fn kernel_refusals_reach_the_user_as_one_line() {
    // perf_event_open: pause/resume needs an AUX leader with PERF_PMU_CAP_AUX_PAUSE
    // (EINVAL); AUX sampling needs a leader whose PMU has snapshot_aux (EINVAL).
    let r = perfaux(&[
        "record",
        "-o",
        "/tmp/never-written.data",
        "-e",
        "uevent_aux//",
        "-e",
        "probe:fib/aux-action=pause/",
    ]);
    let l = one_error_line(&r);
    assert!(l.contains("EINVAL") && l.contains("probe:fib"), "{l}");
    let r = perfaux(&[
        "record",
        "-o",
        "/tmp/never-written.data",
        "-e",
        "{uevent_aux//,uevent:1}",
        "--aux-sample",
    ]);
    let l = one_error_line(&r);
    assert!(l.contains("EINVAL") && l.contains("snapshot_aux"), "{l}");
}

/// The kernel's locked-memory rule (perf_mmap_calc_limits): without
/// CAP_IPC_LOCK, buffers past perf_event_mlock_kb pin memory against
/// RLIMIT_MEMLOCK, and past it the mapping is EPERM, reported with perf's
/// advice. The child runs with a 64 KiB RLIMIT_MEMLOCK and CAP_IPC_LOCK
/// dropped from its bounding set (so a root child has none either), and
/// asks for an AUX area past the user's allowance
/// (perf_event_mlock_kb per online CPU).
#[test]
fn locked_memory_limit_refuses_the_buffers_with_perfs_advice() {
    use std::os::unix::process::CommandExt;
    let sysctl = |name: &str, default: i64| -> i64 {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map_or(default, |s| s.trim().parse().unwrap_or(default))
    };
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let allowance = sysctl("perf_event_mlock_kb", 516) as u64 * 1024 / page * cpus;
    let aux_pages = (allowance + 32).next_power_of_two();
    let dir = tempdir();
    let out = dir.path().join("locked.data");
    let mut c = std::process::Command::new(PERFAUX);
    let m = format!("16,{aux_pages}");
    c.args(["record", "-o", path_str(&out), "-m", &m]);
    let limit_child = || {
        let lim = libc::rlimit {
            rlim_cur: 64 << 10,
            rlim_max: 64 << 10,
        };
        // SAFETY: a valid rlimit; lowering a limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: PR_CAPBSET_DROP takes a capability number and touches
        // nothing else; it fails without CAP_SETPCAP, when there is no
        // CAP_IPC_LOCK to drop either.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, 14, 0, 0, 0) };
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and only
    // makes two system calls (async-signal-safe), touching no shared state.
    unsafe { c.pre_exec(limit_child) };
    let r = run(c);
    if sysctl("perf_event_paranoid", 2) == -1 {
        // Not paranoid: the RLIMIT_MEMLOCK check does not apply.
        assert_eq!(r.code, 0, "{}", r.stderr);
        return;
    }
    assert_ne!(r.code, 0, "expected EPERM: {}", r.stdout);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(
        lines[0].starts_with("perfaux: error: event 'swtrace//' on thread ")
            && lines[0].contains("EPERM"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("perf_event_mlock_kb"), "{}", r.stderr);
}

/// `perfaux script` on a damaged file prints every line the intact part
/// holds, then one error line, and exits non-zero (as `perf script` prints
/// the good samples and then the error).
#[test]
fn script_prints_every_line_before_the_damage() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "d.data", &["--requests", "20"]);
    let bytes = std::fs::read(&f).unwrap();
    let intact = perfaux(&["script", "-i", path_str(&f)]);
    assert_eq!(intact.code, 0, "{}", intact.stderr);
    let all: Vec<&str> = intact.stdout.lines().collect();
    assert!(all.len() > 20, "{} lines", all.len());

    // A cut inside the feature area: every record is whole, so every line
    // is printed (the columns before the symbol: the probe names are in the
    // lost trace section), then the error.
    let cut = dir.path().join("cut-features.data");
    std::fs::write(&cut, &bytes[..bytes.len() - 64]).unwrap();
    let r = perfaux(&["script", "-i", path_str(&cut)]);
    let l = one_error_line(&r);
    assert!(
        l.contains("offset 0x") && l.contains("cut-features.data"),
        "{l}"
    );
    let got: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(got.len(), all.len(), "{}", r.stdout);
    for (a, b) in all.iter().zip(&got) {
        assert_eq!(a.get(..40), b.get(..40));
    }

    // One sample made unparseable, the stream kept in step: its header.size
    // is cut to 16 and the bytes freed become a record of a type nobody
    // knows. The lines of every record before it are printed, then the
    // error naming its offset.
    let mut r = perfaux_perfdata::PerfDataReader::open(&f).unwrap();
    let mut samples = Vec::new();
    while let Ok(Some(rec)) = r.next_record() {
        if rec.header.type_ == 9 && rec.header.size >= 32 {
            samples.push((rec.location.file_offset as usize, rec.header.size));
        }
    }
    let (at, size) = samples[samples.len() / 2];
    let mut bad = bytes.clone();
    bad[at + 6..at + 8].copy_from_slice(&16u16.to_le_bytes());
    let rest = at + 16;
    bad[rest..rest + 4].copy_from_slice(&0x7fffu32.to_le_bytes());
    bad[rest + 4..rest + 6].copy_from_slice(&0u16.to_le_bytes());
    bad[rest + 6..rest + 8].copy_from_slice(&(size - 16).to_le_bytes());
    let badf = dir.path().join("bad-sample.data");
    std::fs::write(&badf, &bad).unwrap();
    let r = perfaux(&["script", "-i", path_str(&badf)]);
    let l = one_error_line(&r);
    assert!(l.contains(&format!("{at:#x}")), "{l}");
    let got: Vec<&str> = r.stdout.lines().collect();
    assert!(
        got.len() >= samples.len() / 2,
        "{} lines before the damaged sample {} of {}",
        got.len(),
        samples.len() / 2,
        samples.len()
    );
    // What is printed is the intact file's lines (time order: a subset).
    for line in &got {
        assert!(all.contains(line), "{line}");
    }
}

/// A chunk header of perfaux's trace section claiming more bytes than the
/// section holds: `script --call-trace` prints the calls of the windows
/// before it, `report -D` dumps the chunks before it, and each then says
/// which chunk is bad and at which file offset, and exits non-zero.
#[test]
fn a_bad_trace_chunk_is_named_after_the_chunks_before_it() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "c.data", &["--requests", "300", "-m", ",64K"]);
    let reader = perfaux_perfdata::PerfDataReader::open(&f).unwrap();
    let section = reader.trace_section().expect("trace section").unwrap();
    let chunks: Vec<_> = section.chunks().map(Result::unwrap).collect();
    let n = chunks.len();
    assert!(n >= 2, "{n} chunks");
    let last = chunks[n - 1];
    // Every call of the intact file, and the ones of the windows before the
    // last chunk (the last chunk's window starts with it or holds it).
    let intact = perfaux(&["script", "--call-trace", "-i", path_str(&f)]);
    assert_eq!(intact.code, 0, "{}", intact.stderr);
    drop(section);
    drop(reader);

    let mut bytes = std::fs::read(&f).unwrap();
    let size_at = last.header_offset as usize + 24;
    bytes[size_at..size_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let bad = dir.path().join("bad-chunk.data");
    std::fs::write(&bad, &bytes).unwrap();
    let what = format!("chunk {} of {n}: size 1099511627776 exceeds", n - 1);
    let at = format!("offset {size_at:#x}");

    let r = perfaux(&["script", "--call-trace", "-i", path_str(&bad)]);
    let l = one_error_line(&r);
    assert!(l.contains(&what) && l.contains(&at), "{l}");
    let got: Vec<&str> = r.stdout.lines().collect();
    assert!(
        !got.is_empty(),
        "the windows before the bad chunk are shown"
    );
    let all: std::collections::HashSet<&str> = intact.stdout.lines().collect();
    for line in &got {
        assert!(all.contains(line), "{line}");
    }

    let r = perfaux(&["report", "-D", "-i", path_str(&bad)]);
    let l = one_error_line(&r);
    assert!(l.contains(&what) && l.contains(&at), "{l}");
    assert_eq!(
        r.stdout.matches(" event id: ").count(),
        n - 1,
        "the chunks before the bad one are dumped"
    );
}
