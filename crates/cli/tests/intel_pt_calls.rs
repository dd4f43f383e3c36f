//! Calls and views from an Intel PT recording (issue 24 item 3), judged by perf 6.1.
//!
//! The machine has no Intel PT, so the recording is made by perfaux-ptgen (crates/ptgen): a
//! real run of a program built here, single-stepped under ptrace and encoded as the trace
//! `perf record --per-thread -e intel_pt/tsc=1,noretcomp=1/u` would hold, its binaries on
//! disk. perf 6.1 decodes that file itself (`--itrace=c`: a branch sample per call, with its
//! target's symbol); perfaux's call trace, report and exports of the same file must show
//! the same calls, and the program's own count of its calls.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static unsigned long fib_calls, leaf_calls;
#ifdef EXTRA
/* The program rebuilt with more code: another build id. */
__attribute__((noinline, used)) int extra(int x) { return x * 7 + 2; }
#endif

__attribute__((noinline)) static int leaf(int x) { leaf_calls++; return x * 3 + 1; }

__attribute__((noinline)) static int fib(int n) {
    fib_calls++;
    if (n < 2) return leaf(n);
    int a = fib(n - 1);
    /* kept out of tail position: gcc -O2 turns the second call into a loop otherwise */
    __asm__ volatile("" : "+r"(a));
    return a + fib(n - 2);
}

static int (*volatile through)(int) = fib;

int main(int argc, char **argv) {
    int n = argc > 1 ? argv[1][0] - 'a' : 10;
    int r = through(n);
    char buf[96];
    int len = snprintf(buf, sizeof buf, "%d %lu %lu\n", r, fib_calls, leaf_calls);
    write(1, buf, len);
    return 0;
}
"#;

/// Builds the program in `dir`.
fn build(dir: &Path) -> PathBuf {
    build_with(dir, &[])
}

/// Builds the program in `dir` with more compiler flags (`-DEXTRA`: with more code).
fn build_with(dir: &Path, flags: &[&str]) -> PathBuf {
    std::fs::write(dir.join("calls.c"), PROGRAM).unwrap();
    let out = dir.join("calls");
    let st = std::process::Command::new("gcc")
        .current_dir(dir)
        .args(["-O2", "-g", "-fno-optimize-sibling-calls", "-fno-inline"])
        .args(flags)
        .args(["calls.c", "-o", "calls"])
        .status()
        .expect("gcc");
    assert!(st.success());
    out
}

/// The program run with `p` (fib(15) at its end) recorded plainly in `dir`, and its own count
/// of fib's calls.
fn plain_fib15(dir: &Path, prog: &Path) -> (perfaux_ptgen::Recorded, u64) {
    let plain = perfaux_ptgen::record(prog, &["p"], &dir.join("plain.data"))
        .expect("single-stepped recording");
    let (fibs, _) = own_counts(&plain.stdout);
    assert_eq!(fibs, 1973, "fib(15) makes 1973 calls");
    (plain, fibs)
}

/// The program's own counts: (fib calls, leaf calls).
fn own_counts(stdout: &[u8]) -> (u64, u64) {
    let s = String::from_utf8_lossy(stdout);
    let w: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (w[1], w[2])
}

/// `perfaux export -F chrome` of `data` into `json`: its trace events.
fn chrome_events(data: &Path, json: &Path) -> Vec<serde_json::Value> {
    let r = perfaux(&[
        "export",
        "-F",
        "chrome",
        "-o",
        path_str(json),
        "-i",
        path_str(data),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    v.get("traceEvents")
        .and_then(|e| e.as_array())
        .cloned()
        .or_else(|| v.as_array().cloned())
        .expect("a trace event array")
}

/// perf 6.1's decode of `data` (`--itrace=ce`: a branch sample a call, and the errors),
/// which must have no error.
fn perf_decode(data: &Path, home: &Path) -> String {
    let r = perf(&["script", "-i", path_str(data), "--itrace=ce"], home);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains("instruction trace error"),
        "perf could not decode the trace: {}",
        r.stdout
    );
    r.stdout
}

/// Every function perf saw called is called as often in perfaux's call trace; but `_init`:
/// perf 6.1 names the PLT's `.plt.sec` stubs (`snprintf@plt`, ...) by the symbol before them,
/// `_init`, where perfaux names each stub.
fn assert_perfs_calls_are_ours(theirs: &BTreeMap<String, u64>, ours: &BTreeMap<String, u64>) {
    for (f, n) in theirs.iter().filter(|(f, _)| *f != "_init") {
        assert_eq!(
            ours.get(f),
            Some(n),
            "calls of {f}: perf {n}; perf {theirs:?}, ours {ours:?}"
        );
    }
}

/// Calls per function name in `perfaux script --call-trace` lines (the name is all after
/// the time's `: ` and the indentation).
fn perfaux_calls(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let Some((_, body)) = l.split_once(": ") else {
            continue;
        };
        let name = body.trim_start();
        if name.starts_with('[') && name.ends_with(']') && name.contains("skipped") {
            continue;
        }
        *m.entry(name.to_owned()).or_insert(0) += 1;
    }
    m
}

/// Calls per target function in perf's `--itrace=c` branch samples of `dso` (`ip sym+off
/// (dso) => addr sym+off (dso)`).
fn perf_calls(text: &str, dso: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let Some((_, to)) = l.split_once("=>") else {
            continue;
        };
        let to = to.trim();
        let Some(open) = to.rfind(" (") else { continue };
        let in_dso = &to[open + 2..to.len() - 1];
        if !in_dso.ends_with(dso) {
            continue;
        }
        // `ADDR SYM+0xOFF`
        let Some((_, sym)) = to[..open].split_once(' ') else {
            continue;
        };
        let sym = sym.rsplit_once('+').map_or(sym, |s| s.0);
        *m.entry(sym.to_owned()).or_insert(0) += 1;
    }
    m
}

#[test]
fn each_call_perf_decodes_from_the_trace_is_perfauxs_call_with_the_programs_own_counts() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt.data");
    let rec = perfaux_ptgen::record(&prog, &["m"], &data).expect("single-stepped recording");
    let (fibs, leaves) = own_counts(&rec.stdout);
    assert_eq!(fibs, 465, "fib(12) makes 465 calls");

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf_decode(&data, &home);
    let theirs = perf_calls(&decoded, "/calls");
    assert_eq!(theirs.get("fib"), Some(&fibs), "{theirs:?}");
    assert_eq!(theirs.get("leaf"), Some(&leaves), "{theirs:?}");

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours_all = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours_all);
    // And the calls into the C library and the loader too: the same count in all.
    let total_perf = {
        let all = perf(&["script", "-i", path_str(&data), "--itrace=c"], &home);
        // perf counts a `syscall` as a call too (its "tr end syscall", to address 0).
        all.stdout
            .lines()
            .filter_map(|l| l.split_once("=>"))
            .filter(|(_, to)| !to.trim_start().starts_with("0 "))
            .count() as u64
    };
    let total_ours: u64 = ours_all.values().sum();
    assert_eq!(total_ours, total_perf, "calls in all");
}

/// The report's per-function table and the Chrome export count the same calls, and the
/// times lie within the recording's (the perf clock of the TIME_CONV).
#[test]
fn the_report_and_the_chrome_export_show_the_traced_calls() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt.data");
    let rec = perfaux_ptgen::record(&prog, &["h"], &data).expect("single-stepped recording");
    let (fibs, _) = own_counts(&rec.stdout);
    assert_eq!(fibs, 41, "fib(7) makes 41 calls");

    let json = dir.path().join("calls.json");
    let events = chrome_events(&data, &json);
    let begins = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "B" && e["name"] == name)
            .count() as u64
    };
    assert_eq!(begins("fib"), fibs);
    let ends = events
        .iter()
        .filter(|e| e["ph"] == "E" && e["name"] == "fib")
        .count() as u64;
    assert_eq!(ends, fibs, "every fib call returned");
    let first = perfaux_ptgen::tsc_to_perf_time(rec.tsc_range.0);
    let last = perfaux_ptgen::tsc_to_perf_time(rec.tsc_range.1);
    for e in events.iter().filter(|e| e["name"] == "fib") {
        let ts_ns = (e["ts"].as_f64().unwrap() * 1000.0) as u64;
        assert!(
            (first / 1000 * 1000..=last + 1000).contains(&ts_ns),
            "{ts_ns} outside {first}..{last}"
        );
    }

    let report = perfaux(&["report", "-i", path_str(&data)]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    let row = report
        .stdout
        .lines()
        .find(|l| l.split_whitespace().last() == Some("fib"))
        .unwrap_or_else(|| panic!("no fib row: {}", report.stdout));
    assert!(
        row.split_whitespace().any(|w| w == fibs.to_string()),
        "{row}"
    );
}

/// A trace corrupted in the middle: the calls before and after the damage are shown, the
/// bytes passed over are said, and nothing panics or fails.
#[test]
fn a_corrupt_stretch_of_trace_is_skipped_to_the_next_psb_and_said() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt.data");
    perfaux_ptgen::record(&prog, &["h"], &data).expect("single-stepped recording");
    let whole = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let whole_calls: u64 = perfaux_calls(&whole.stdout).values().sum();
    assert!(!whole.stdout.contains("skipped"), "{}", whole.stdout);

    // The PSBs of the payload; bytes that are no packets between the second and the third.
    let mut bytes = std::fs::read(&data).unwrap();
    let psb: Vec<u8> = [0x02u8, 0x82].repeat(8);
    let psbs: Vec<usize> = bytes
        .windows(psb.len())
        .enumerate()
        .filter(|(_, w)| *w == psb.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert!(psbs.len() >= 3, "{} PSBs", psbs.len());
    let (from, to) = (psbs[1] + psb.len() + 64, psbs[2] - 64);
    assert!(from < to);
    // A reserved opcode (0x02 0x00 is no packet in any version).
    for b in bytes[from..to].chunks_mut(2) {
        b.copy_from_slice(&[0x02, 0x00][..b.len()]);
    }
    let bad = dir.path().join("bad.data");
    std::fs::write(&bad, &bytes).unwrap();
    let r = perfaux(&["script", "--call-trace", "-i", path_str(&bad)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let skipped: u64 = r
        .stdout
        .lines()
        .filter_map(|l| l.split_once(": [")?.1.split_once(" trace bytes skipped"))
        .map(|(n, _)| n.parse::<u64>().unwrap())
        .sum();
    // From the damage to the next PSB at most: the rest decodes.
    assert!(
        skipped > 0 && skipped <= (psbs[2] - from) as u64,
        "{skipped} bytes said skipped of {}",
        to - from
    );
    let calls: u64 = perfaux_calls(&r.stdout).values().sum();
    assert!(
        calls > 0 && calls < whole_calls,
        "{calls} calls of {whole_calls}"
    );
}

/// The program moved under a system root after recording: `--symfs ROOT` finds it there, as
/// perf's option does, and the calls are those of the file in place.
#[test]
fn symfs_finds_the_recordings_files_under_another_root() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt.data");
    let rec = perfaux_ptgen::record(&prog, &["h"], &data).expect("single-stepped recording");
    let before = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(before.code, 0, "{}", before.stderr);
    let root = dir.path().join("sysroot");
    let moved = root.join(prog.strip_prefix("/").unwrap());
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&prog, &moved).unwrap();
    let without = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(without.code, 0, "{}", without.stderr);
    assert!(
        !perfaux_calls(&without.stdout).contains_key("fib"),
        "the program's code is gone: {}",
        without.stdout
    );
    // The libraries the recording names, copied under the root too.
    for m in rec.mappings.iter().filter(|m| m.name.starts_with('/')) {
        let to = root.join(m.name.trim_start_matches('/'));
        if !to.exists() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&m.name, &to).unwrap();
        }
    }
    let with = perfaux(&[
        "script",
        "--call-trace",
        "--symfs",
        path_str(&root),
        "-i",
        path_str(&data),
    ]);
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert_eq!(perfaux_calls(&with.stdout), perfaux_calls(&before.stdout));
}

/// The same run recorded per CPU (`perf record -e intel_pt//u` without `--per-thread`): one
/// CPU's buffer (tid -1), whose thread only the context switch and ITRACE_START records on
/// its CPU name. perf 6.1 and perfaux must both give the buffer's calls to the program's
/// thread, each function called as often, fib as often as the program counted.
#[test]
fn a_cpu_wide_buffer_is_its_threads_calls() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt-cpu.data");
    let opts = perfaux_ptgen::Options {
        cpu_wide: true,
        ..Default::default()
    };
    let rec =
        perfaux_ptgen::record_with(&prog, &["k"], &data, &opts).expect("single-stepped recording");
    let (fibs, leaves) = own_counts(&rec.stdout);
    assert_eq!(fibs, 177, "fib(10) makes 177 calls");

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf_decode(&data, &home);
    // perf gave the calls to the program's thread too (`comm tid/tid` or `comm tid`).
    let tid = rec.tid.to_string();
    assert!(
        decoded.lines().filter(|l| l.contains("=>")).all(|l| l
            .split_whitespace()
            .nth(1)
            .is_some_and(|w| w.split('/').any(|x| x == tid))),
        "perf's calls not all of thread {tid}: {}",
        decoded
    );
    let theirs = perf_calls(&decoded, "/calls");
    assert_eq!(theirs.get("fib"), Some(&fibs), "{theirs:?}");
    assert_eq!(theirs.get("leaf"), Some(&leaves), "{theirs:?}");

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours_all = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours_all);
    assert_eq!(ours_all.get("fib"), Some(&fibs));
    // Every call line is the program's thread's.
    let call_lines: Vec<&str> = ours.stdout.lines().filter(|l| l.contains(": ")).collect();
    assert!(!call_lines.is_empty(), "no calls: {}", ours.stdout);
    for l in &call_lines {
        assert!(
            l.split_whitespace().any(|w| w == tid),
            "a call not of thread {tid}: {l}"
        );
    }
}

/// `perfaux ARGS` with `HOME` set to `home` (where perf's build-id cache, `.debug`, is).
fn perfaux_home(args: &[&str], home: &Path) -> Run {
    let mut c = std::process::Command::new(PERFAUX);
    c.args(args).env("HOME", home);
    run(c)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The program rebuilt at its path after the recording: its build id is not the one the
/// recording's HEADER_BUILD_ID holds (what `perf buildid-list` lists), so perfaux says so
/// and does not decode the trace over the new code, as perf does not; with the original in
/// perf's build-id cache (`HOME/.debug/.build-id/ab/cdef.../elf`) both decode the calls
/// that ran, perfaux the same as before the rebuild.
#[test]
fn a_rebuilt_program_is_refused_and_the_build_id_cache_used() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt.data");
    let rec = perfaux_ptgen::record(&prog, &["h"], &data).expect("single-stepped recording");
    let (fibs, _) = own_counts(&rec.stdout);
    assert_eq!(fibs, 41, "fib(7) makes 41 calls");
    let original = std::fs::read(&prog).unwrap();
    let id = hex(&perfaux_ptgen::elf_build_id(&original).expect("gcc's build id"));

    // perf lists the build ids of the files the recording mapped.
    let empty = dir.path().join("empty-home");
    std::fs::create_dir_all(&empty).unwrap();
    let listed = perf(&["buildid-list", "-i", path_str(&data)], &empty);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    for m in rec.mappings.iter().filter(|m| m.is_file()) {
        let want = hex(&perfaux_ptgen::elf_build_id(&std::fs::read(&m.name).unwrap()).unwrap());
        assert!(
            listed
                .stdout
                .lines()
                .any(|l| l == format!("{want} {}", m.name)),
            "{want} {} not listed: {}",
            m.name,
            listed.stdout
        );
    }

    let before = perfaux_home(&["script", "--call-trace", "-i", path_str(&data)], &empty);
    assert_eq!(before.code, 0, "{}", before.stderr);
    assert!(!before.stderr.contains("warning"), "{}", before.stderr);
    let before = perfaux_calls(&before.stdout);
    assert_eq!(before.get("fib"), Some(&fibs), "{before:?}");

    // Rebuilt with more code at the same path.
    build_with(dir.path(), &["-DEXTRA"]);
    let rebuilt = hex(&perfaux_ptgen::elf_build_id(&std::fs::read(&prog).unwrap()).unwrap());
    assert_ne!(rebuilt, id);

    // (a) No copy of the original: refused and said, not decoded over the wrong code.
    let r = perfaux_home(&["script", "--call-trace", "-i", path_str(&data)], &empty);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.lines().any(|l| l.contains("warning")
            && l.contains(path_str(&prog))
            && l.contains(&rebuilt)
            && l.contains(&id)),
        "no warning about {}: {}",
        prog.display(),
        r.stderr
    );
    let refused = perfaux_calls(&r.stdout);
    assert!(!refused.contains_key("fib"), "{refused:?}");
    // perf too decodes none of the program's calls then.
    let theirs = perf(&["script", "-i", path_str(&data), "--itrace=ce"], &empty);
    assert_eq!(theirs.code, 0, "{}", theirs.stderr);
    assert!(
        !perf_calls(&theirs.stdout, "/calls").contains_key("fib"),
        "{}",
        theirs.stdout
    );

    // (b) The original in perf's build-id cache of another HOME.
    let home = dir.path().join("home");
    let cached = home
        .join(".debug/.build-id")
        .join(&id[..2])
        .join(&id[2..])
        .join("elf");
    std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
    std::fs::write(&cached, &original).unwrap();
    let r = perfaux_home(&["script", "--call-trace", "-i", path_str(&data)], &home);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let ours = perfaux_calls(&r.stdout);
    assert_eq!(ours, before);
    let decoded = perf_decode(&data, &home);
    let theirs = perf_calls(&decoded, "/calls");
    assert_eq!(theirs.get("fib"), Some(&fibs), "{theirs:?}");
    assert_perfs_calls_are_ours(&theirs, &ours);
}

/// The same kind of run recorded in snapshot mode (`perf record -S -e intel_pt//u`): the
/// trace as copies of an 8 KiB AUX area in overwrite mode, taken at points chosen so that
/// some hold bytes of the one before (to be decoded once) and some are more than the area
/// after it (the trace between is lost). perf 6.1 decodes it (its `intel_pt_find_overlap`
/// the judge of what is shared); perfaux's calls per function are perf's, and its report
/// says the stretches of trace the snapshots make up.
#[test]
fn snapshots_are_decoded_once_where_they_overlap() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    // A plain recording first: how many instructions the run takes (fib(15) at its end).
    let (plain, fibs) = plain_fib15(dir.path(), &prog);
    let n = plain.instructions;
    // Points some less and some more than the 8 KiB area apart in trace (checked below).
    let aux_size = 8192;
    let plan = perfaux_ptgen::SnapshotPlan {
        aux_size,
        at_insns: vec![n - 42_000, n - 37_000, n - 7_000],
    };
    let data = dir.path().join("pt-snap.data");
    let opts = perfaux_ptgen::Options {
        snapshot: Some(plan),
        ..Default::default()
    };
    let rec =
        perfaux_ptgen::record_with(&prog, &["p"], &data, &opts).expect("single-stepped recording");
    // The plan did what it meant: each snapshot after the first either shares more than a
    // PSB period with the one before (a PSB to find the overlap by) or nothing at all.
    let snaps = &rec.snapshots;
    assert_eq!(snaps.len(), 4, "{snaps:?}");
    assert!(snaps.iter().all(|s| s.to - s.from == aux_size), "{snaps:?}");
    let mut stretches = 1;
    let mut bytes = (snaps[0].to - snaps[0].from) as u64;
    let (mut shared, mut apart) = (0, 0);
    for w in snaps.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.from >= a.to {
            apart += 1;
            stretches += 1;
            bytes += (b.to - b.from) as u64;
        } else {
            assert!(
                b.from + perfaux_ptgen::PSB_PERIOD + 128 < a.to,
                "{a:?} {b:?}: too little shared"
            );
            shared += 1;
            bytes += (b.to - a.to) as u64;
        }
    }
    assert!(shared >= 2 && apart >= 1, "{snaps:?}");

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf_decode(&data, &home);
    let theirs = perf_calls(&decoded, "/calls");
    // Some of the calls were lost between snapshots, many are there (how many moves with
    // the run's length, which address-space layout changes by a few hundred instructions).
    let perf_fibs = theirs.get("fib").copied().unwrap_or(0);
    assert!(
        perf_fibs > fibs / 4 && perf_fibs < fibs,
        "perf shows {perf_fibs} of {fibs} fib calls"
    );

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours);

    // The report says the stretches the snapshots make, their bytes, and what time each
    // holds: within the run, one after the other.
    let report = perfaux(&["report", "-i", path_str(&data)]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    let head = format!("# snapshots: {stretches} ({bytes} bytes of trace)");
    assert!(
        report.stdout.contains(&head),
        "no {head:?}: {}",
        report.stdout
    );
    let spans: Vec<(f64, f64)> = report
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("snapshot ")?.split_once(": holds "))
        .map(|(_, r)| {
            let w: Vec<&str> = r.split_whitespace().collect();
            (w[0].parse().unwrap(), w[2].parse().unwrap())
        })
        .collect();
    assert_eq!(spans.len(), stretches, "{}", report.stdout);
    let secs = |tsc: u64| perfaux_ptgen::tsc_to_perf_time(tsc) as f64 / 1e9;
    let mut after = secs(rec.tsc_range.0) - 1e-9;
    for (k, &(b, e)) in spans.iter().enumerate() {
        assert!(
            after <= b && b <= e && e <= secs(rec.tsc_range.1) + 1e-9,
            "snapshot {}: {b} .. {e}, not after {after}: {}",
            k + 1,
            report.stdout
        );
        after = e;
    }
}

/// The same kind of run recorded with AUX sampling (`perf record --aux-sample=8188 -e
/// '{intel_pt//u,instructions/period=10000/u}'`): no AUXTRACE records, the trace only as
/// the last 8188 bytes each `instructions` sample carries (PERF_SAMPLE_AUX, padded by the
/// kernel to 8192 with zeros). A snippet holds much of the one before: decoded once, the
/// padding passed over as perf's `adj_for_padding` does (decoding the shared bytes again
/// would show more calls than perf). perf 6.1 decodes the snippets; perfaux's calls per
/// function are perf's.
#[test]
fn aux_samples_snippets_are_the_trace() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let data = dir.path().join("pt-aux.data");
    let plan = perfaux_ptgen::AuxSamplePlan {
        size: 8188,
        every_insns: 10_000,
    };
    let opts = perfaux_ptgen::Options {
        aux_sample: Some(plan),
        ..Default::default()
    };
    let rec =
        perfaux_ptgen::record_with(&prog, &["p"], &data, &opts).expect("single-stepped recording");
    let (fibs, _) = own_counts(&rec.stdout);
    assert_eq!(fibs, 1973, "fib(15) makes 1973 calls");
    let samples = &rec.aux_samples;
    assert_eq!(samples.len() as u64, rec.instructions / plan.every_insns);
    // Snippets share bytes with the one before (more than a PSB period: a PSB+ to find
    // where by).
    let shared = samples
        .windows(2)
        .filter(|w| w[1].from + perfaux_ptgen::PSB_PERIOD + 128 < w[0].to)
        .count();
    assert!(shared >= 2, "{samples:?}");

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf_decode(&data, &home);
    // perf shows the samples themselves too.
    assert!(
        decoded.contains("instructions/period=10000/u:"),
        "{decoded}"
    );
    let theirs = perf_calls(&decoded, "/calls");
    let perf_fibs = theirs.get("fib").copied().unwrap_or(0);
    assert!(
        perf_fibs > 0 && perf_fibs <= fibs,
        "perf shows {perf_fibs} of {fibs} fib calls"
    );

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours);
}

/// The address of fib in a run: the call target called as often as the program counted
/// its fib calls (leaf is called fewer times, the rest once or a few).
fn fib_address(rec: &perfaux_ptgen::Recorded, fibs: u64) -> u64 {
    use perfaux_ptgen::BranchKind;
    let mut by_target: BTreeMap<u64, u64> = BTreeMap::new();
    for b in rec
        .branches
        .iter()
        .filter(|b| matches!(b.kind, BranchKind::Call | BranchKind::IndirectCall))
    {
        *by_target.entry(b.to).or_insert(0) += 1;
    }
    let fib: Vec<u64> = by_target
        .iter()
        .filter(|&(_, &n)| n == fibs)
        .map(|(&a, _)| a)
        .collect();
    assert_eq!(fib.len(), 1, "fib's address among {by_target:?}");
    fib[0]
}

/// The instruction indices of the calls of `target` in a run.
fn calls_of(rec: &perfaux_ptgen::Recorded, target: u64) -> Vec<u64> {
    use perfaux_ptgen::BranchKind;
    rec.branches
        .iter()
        .zip(&rec.branch_insns)
        .filter(|(b, _)| {
            b.to == target && matches!(b.kind, BranchKind::Call | BranchKind::IndirectCall)
        })
        .map(|(_, &i)| i)
        .collect()
}

/// The same kind of run with its trace paused and resumed (Linux 6.13's aux-action: `perf
/// record -e intel_pt/aux-action=start-paused/u -e task-clock/aux-action=resume/u -e
/// task-clock/aux-action=pause/u`): it starts paused, and samples of the resume and pause
/// events, at points over fib's calls, turn it on and off; a pause while paused is dropped.
/// perf 6.1 decodes the trace (no errors) and perfaux's calls per function are perf's; fib's
/// are those the run made while the trace was on, fewer than all; the Chrome export shows
/// each sample, at its time and in order, the dropped one marked. (With the aux-action
/// samples ignored, the export would show none.)
#[test]
fn paused_and_resumed_traces_hold_the_calls_made_while_on() {
    use perfaux_ptgen::PauseAction::{Pause, Resume};
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    // A plain run first: where fib's calls lie in it (fib(15) near the end).
    let (plain, fibs) = plain_fib15(dir.path(), &prog);
    let calls = calls_of(&plain, fib_address(&plain, fibs));
    let (first, last) = (calls[0], calls[calls.len() - 1]);
    let at = |percent: u64| first + (last - first) * percent / 100;
    // Start paused; resume, pause, pause again (dropped), resume, pause, resume: ends on.
    let plan = perfaux_ptgen::PausePlan {
        start_paused: true,
        at_insns: vec![
            (at(10), Resume),
            (at(35), Pause),
            (at(50), Pause),
            (at(60), Resume),
            (at(80), Pause),
            (at(90), Resume),
        ],
    };
    let opts = perfaux_ptgen::Options {
        pauses: Some(plan.clone()),
        ..Default::default()
    };
    let data = dir.path().join("pt-pause.data");
    let rec =
        perfaux_ptgen::record_with(&prog, &["p"], &data, &opts).expect("single-stepped recording");
    let (fibs, leaves) = own_counts(&rec.stdout);
    assert_eq!(fibs, 1973);
    let samples = &rec.pause_samples;
    assert_eq!(samples.len(), plan.at_insns.len(), "{samples:?}");
    let dropped: Vec<usize> = (0..samples.len()).filter(|&i| samples[i].dropped).collect();
    assert_eq!(
        dropped,
        [2],
        "only the second pause in a row dropped: {samples:?}"
    );
    assert_eq!(rec.traced.len(), 3, "{:?}", rec.traced);
    // The ground truth: fib's calls made while the trace was on.
    let on: u64 = calls_of(&rec, fib_address(&rec, fibs))
        .iter()
        .filter(|&&i| rec.traced.iter().any(|w| w.contains(&i)))
        .count() as u64;
    assert!(on > 0 && on < fibs, "{on} of {fibs} fib calls traced");

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf_decode(&data, &home);
    let theirs = perf_calls(&decoded, "/calls");
    assert_eq!(theirs.get("fib"), Some(&on), "{theirs:?}");
    assert!(
        theirs.get("leaf").is_some_and(|&n| n > 0 && n < leaves),
        "{theirs:?}"
    );

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours);
    assert_eq!(ours.get("fib"), Some(&on));

    // The Chrome export: a "paused" slice from each pause to the resume after it, an
    // instant for the dropped request, at the samples' times, in order.
    let json = dir.path().join("pause.json");
    let events = chrome_events(&data, &json);
    let shown: Vec<(String, String, f64)> = events
        .iter()
        .filter(|e| {
            matches!(
                e["name"].as_str(),
                Some("paused" | "dropped pause" | "dropped resume")
            )
        })
        .map(|e| {
            (
                e["ph"].as_str().unwrap().to_owned(),
                e["name"].as_str().unwrap().to_owned(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, String, f64)> = samples
        .iter()
        .map(|s| {
            let (ph, name) = match (s.pause, s.dropped) {
                (true, true) => ("i", "dropped pause"),
                (false, true) => ("i", "dropped resume"),
                (true, false) => ("B", "paused"),
                (false, false) => ("E", "paused"),
            };
            let ts = perfaux_ptgen::tsc_to_perf_time(s.tsc) as f64 / 1000.0;
            (ph.to_owned(), name.to_owned(), ts)
        })
        .collect();
    assert_eq!(shown.len(), want.len(), "{shown:?}");
    for (s, w) in shown.iter().zip(&want) {
        assert!(
            s.0 == w.0 && s.1 == w.1 && (s.2 - w.2).abs() < 0.0015,
            "shown {shown:?}, samples {want:?}"
        );
    }
}

/// A trace of the kernel too (`perf record -e intel_pt//` without `u`, no `--kcore`): the
/// kernel's code is not in the recording. perf reports errors at each system call and goes on
/// where the flow comes back to the program; perfaux passes over the same passages (an
/// interrupt inside each: ptgen's `KERNEL_EXCURSION`; before, it lost the flow to the next
/// PSB: 346 calls of 1,224), says so once, and shows the calls perf shows, at perf's times,
/// the same as in the user-only trace of the same run.
#[test]
fn a_trace_through_the_kernel_without_its_code_keeps_the_programs_calls() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempdir();
    let prog = build(dir.path());
    let user = dir.path().join("user.data");
    perfaux_ptgen::record(&prog, &["h"], &user).expect("single-stepped recording");
    let data = dir.path().join("kernel.data");
    let opts = perfaux_ptgen::Options {
        kernel: true,
        ..Default::default()
    };
    let rec =
        perfaux_ptgen::record_with(&prog, &["h"], &data, &opts).expect("single-stepped recording");
    let (fibs, leaves) = own_counts(&rec.stdout);

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let decoded = perf(&["script", "-i", path_str(&data), "--itrace=ce"], &home);
    assert_eq!(decoded.code, 0, "{}", decoded.stderr);
    let errors = decoded
        .stdout
        .lines()
        .filter(|l| l.contains("instruction trace error"))
        .count() as u64;
    // An error where each passage enters the kernel, and one where the interrupt in it
    // lands (perf resyncs at the FUP, in the kernel again).
    assert_eq!(errors, 2 * rec.syscalls, "perf: errors of the passages");
    let theirs = perf_calls(&decoded.stdout, "/calls");
    assert_eq!(theirs.get("fib"), Some(&fibs), "{theirs:?}");
    assert_eq!(theirs.get("leaf"), Some(&leaves), "{theirs:?}");

    let ours = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    assert!(
        !ours.stdout.contains("skipped"),
        "no trace lost: {}",
        ours.stdout
    );
    assert_eq!(
        ours.stderr.matches("passes through the kernel").count(),
        1,
        "said once: {}",
        ours.stderr
    );
    let ours_all = perfaux_calls(&ours.stdout);
    assert_perfs_calls_are_ours(&theirs, &ours_all);
    // The same calls at the same depths as in the user-only trace of the same run (no time,
    // no thread id): the calls open across each system call stay open.
    let user_only = perfaux(&["script", "--call-trace", "-i", path_str(&user)]);
    assert_eq!(user_only.code, 0, "{}", user_only.stderr);
    let tree = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once(": ").map(|(_, call)| call.to_owned()))
            .collect()
    };
    let (ours_tree, user_tree) = (tree(&ours.stdout), tree(&user_only.stdout));
    assert_eq!(ours_tree.len(), user_tree.len());
    assert!(ours_tree == user_tree, "the call trees differ");
    // And each call at perf's time for it (the time the trace gives on the way back out of
    // the kernel is the calls' after it), in order; perf's `syscall` "calls" (into the
    // kernel) left out.
    let perf_times = perf(
        &[
            "script",
            "-i",
            path_str(&data),
            "--itrace=c",
            "--ns",
            "-F",
            "time,addr",
        ],
        &home,
    );
    assert_eq!(perf_times.code, 0, "{}", perf_times.stderr);
    let theirs: Vec<&str> = perf_times
        .stdout
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .last()
                .is_some_and(|to| to != "0" && !to.starts_with("ffff"))
        })
        .filter_map(|l| l.split_whitespace().next()?.strip_suffix(':'))
        .collect();
    let ours_times: Vec<&str> = ours
        .stdout
        .lines()
        .filter_map(|l| l.split_once(": ")?.0.split_whitespace().last())
        .collect();
    assert_eq!(ours_times.len(), theirs.len());
    if let Some(k) = (0..theirs.len()).find(|&k| ours_times[k] != theirs[k]) {
        panic!("call {k} at {} where perf has {}", ours_times[k], theirs[k]);
    }
}
