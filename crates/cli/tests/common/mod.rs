//! Helpers for the integration tests: run the built `perfaux` binary and
//! Linux `perf` (6.1, the judge of perf.data compatibility) on files, and
//! parse what they print.

#![allow(dead_code)]

pub mod timing;

use std::path::{Path, PathBuf};
use std::process::Command;

pub const PERFAUX: &str = env!("CARGO_BIN_EXE_perfaux");

#[allow(unused_imports)]
pub use perfaux_testutil::{Run, require_oracle};

/// Runs `c` to the end with no stdin; panics naming the program if it
/// cannot start.
pub fn run(c: Command) -> Run {
    perfaux_testutil::run(c, None)
}

/// Whether python3 has the official Perfetto protos (PyPI `perfetto`); says the test skips
/// when not (a failure under PERFAUX_REQUIRE_ORACLES).
pub fn perfetto_protos() -> bool {
    let python = Command::new("python3")
        .arg("-c")
        .arg("from perfetto.protos.perfetto.trace import perfetto_trace_pb2")
        .output();
    if python.is_ok_and(|o| o.status.success()) {
        return true;
    }
    perfaux_testutil::skip(
        "python3 with the perfetto package not found (pip install perfetto protobuf)",
    );
    false
}

/// The official protos' reading of the Perfetto trace `file` (tests/oracle/perfetto_slices.py):
/// its lines.
pub fn perfetto_slices(file: &Path) -> String {
    let mut c = Command::new("python3");
    c.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/oracle/perfetto_slices.py"
    ))
    .arg(file);
    let py = run(c);
    assert_eq!(
        py.code, 0,
        "the official protos refused the trace: {}",
        py.stderr
    );
    py.stdout
}

/// `perfaux ARGS`.
pub fn perfaux(args: &[&str]) -> Run {
    let mut c = Command::new(PERFAUX);
    c.args(args);
    run(c)
}

/// `perf ARGS`, with a private HOME so no ~/.perfconfig or buildid cache
/// of the machine changes what it prints.
pub fn perf(args: &[&str], home: &Path) -> Run {
    run(perfaux_testutil::perf_command(args, home))
}

/// As root, `perfaux ARGS` run by an ordinary user (uid 65534, through `setpriv`) in `dir`,
/// which it is given to write in, from a copy of the binary there (it carries its runtime).
/// `None` when not root (the tests already run as an ordinary user) or without setpriv (said).
pub fn perfaux_as_ordinary_user(dir: &Path) -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    if !perfaux_testutil::tool_present("setpriv") {
        perfaux_testutil::skip("setpriv not found (util-linux)");
        return None;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let copy = dir.join("perfaux");
    std::fs::copy(PERFAUX, &copy).unwrap();
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(copy)
        .current_dir(dir);
    Some(c)
}

/// `perf report`'s flat histogram of `file` by the `sort` keys (no call graph, no children
/// column), as the tests compare perfaux's with it.
pub fn perf_report_sorted(sort: &str, file: &Path, home: &Path) -> Run {
    perf(
        &[
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--sort",
            sort,
            "-i",
            path_str(file),
        ],
        home,
    )
}

/// kernel.perf_event_paranoid (2, the kernel's default, if it cannot be read).
pub fn perf_event_paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// `perf report -n --sort sym`'s rows of `data`: samples per symbol (perf's warnings fail).
pub fn perf_samples_by_symbol(data: &Path, home: &Path) -> std::collections::HashMap<String, u64> {
    let r = perf(
        &[
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "-n",
            "--sort",
            "sym",
            "-i",
            path_str(data),
        ],
        home,
    );
    assert!(r.ok(), "perf report: {}", r.stderr);
    assert!(!r.stderr.to_lowercase().contains("warning"), "{}", r.stderr);
    r.stdout
        .lines()
        .filter(|l| l.contains('%') && !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "[.]").then(|| (f[3].to_string(), f[1].parse().unwrap()))
        })
        .collect()
}

/// A time as report and replay print it (`2.603 ms`: a value and its unit) in ns.
pub fn printed_ns(value: &str, unit: &str) -> u64 {
    let v: f64 = value.parse().unwrap_or_else(|_| panic!("time {value:?}"));
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => panic!("unit {u:?}"),
    };
    (v * scale).round() as u64
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Records into `dir/name` with `args`; returns the file and record's stderr.
pub fn record(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, Run) {
    let out = dir.join(name);
    let mut a = vec!["record", "-o", path_str(&out)];
    a.extend_from_slice(args);
    let r = perfaux(&a);
    assert_eq!(r.code, 0, "perfaux record {args:?} failed: {}", r.stderr);
    (out, r)
}

/// Records the built-in workload's `requests` requests into `dir/name` with tracing paused
/// but inside serve_request ... send_response (aux-action start-paused, resume, pause).
pub fn record_windows(dir: &Path, name: &str, requests: &str) -> (PathBuf, Run) {
    record(
        dir,
        name,
        &[
            "--requests",
            requests,
            "-e",
            "swtrace/aux-action=start-paused/",
            "-e",
            "probe:serve_request/aux-action=resume/",
            "-e",
            "probe:send_response/aux-action=pause/",
        ],
    )
}

/// The numbers of `[ perfaux record: Captured and wrote X MB FILE (N records,
/// B bytes of AUX, L lost, S snapshots, D dropped pause/resume) ]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    pub records: u64,
    pub aux_bytes: u64,
    pub lost: u64,
    pub snapshots: u64,
    pub dropped: u64,
}

pub fn parse_captured(stderr: &str) -> Captured {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[ perfaux record: Captured and wrote "))
        .unwrap_or_else(|| panic!("no summary line in: {stderr}"));
    let inner = line.split_once('(').expect("(").1;
    let nums: Vec<u64> = inner
        .split(',')
        .map(|part| {
            part.split_whitespace()
                .next()
                .expect("number")
                .parse()
                .expect("u64")
        })
        .collect();
    assert_eq!(nums.len(), 5, "{line}");
    Captured {
        records: nums[0],
        aux_bytes: nums[1],
        lost: nums[2],
        snapshots: nums[3],
        dropped: nums[4],
    }
}

/// (offset, size, type name) of every `0xOFF [0xSIZE]: PERF_RECORD_NAME`
/// line of a `report -D` text, sorted by offset.
pub fn record_lines(text: &str) -> Vec<(u64, u64, String)> {
    let mut v = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find(": PERF_RECORD_") else {
            continue;
        };
        let head = &line[..at];
        let mut words = head.rsplit(' ');
        let size = words
            .next()
            .and_then(|w| w.strip_prefix("[0x"))
            .and_then(|w| w.strip_suffix(']'));
        // C's %#x prints 0 without the prefix.
        let off = words.next().and_then(|w| {
            if w == "0" {
                Some("0")
            } else {
                w.strip_prefix("0x")
            }
        });
        let (Some(size), Some(off)) = (size, off) else {
            continue;
        };
        let name: String = line[at + 14..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit())
            .collect();
        v.push((
            u64::from_str_radix(off, 16).expect("hex"),
            u64::from_str_radix(size, 16).expect("hex"),
            name,
        ));
    }
    v.sort();
    v
}

/// The rows of the "Aggregated stats" table (TOTAL first), as printed.
pub fn stats_rows(text: &str) -> Vec<(String, u64)> {
    perfaux::dump::parse_aggregated_stats(text)
        .unwrap_or_else(|| panic!("no Aggregated stats in output"))
}
