//! Helpers shared by the integration tests: fixture paths, reading every
//! record of a file, and parsing `perf report -D`'s stats table.

#![allow(dead_code)]

pub mod synth;

use perfaux_perfdata::{Error, Metadata, PerfDataReader};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

#[allow(unused_imports)]
pub use perfaux_testutil::{fixture, fixture_bytes, fixture_text};

/// What reading a whole file gave.
pub struct ReadAll {
    pub meta: Metadata,
    /// Records per header.type, as perf's stats count them.
    pub counts: BTreeMap<u32, u64>,
    /// (file offset, header.type, payload length) of every record, in order.
    pub records: Vec<(u64, u32, usize)>,
    pub auxtrace_payloads: Vec<Vec<u8>>,
    /// (file offset, record) of every AUXTRACE.
    pub auxtrace: Vec<(u64, perfaux_abi::user::AuxtraceRecord)>,
    pub error: Option<Error>,
}

pub fn read_all_from<R: Read>(mut r: PerfDataReader<R>) -> ReadAll {
    let mut counts = BTreeMap::new();
    let mut records = Vec::new();
    let mut auxtrace_payloads = Vec::new();
    let mut auxtrace = Vec::new();
    let error = loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                *counts.entry(rec.header.type_).or_insert(0) += 1;
                records.push((
                    rec.location.file_offset,
                    rec.header.type_,
                    rec.payload.len(),
                ));
                if rec.header.type_ == perfaux_abi::consts::PERF_RECORD_AUXTRACE {
                    auxtrace_payloads.push(rec.payload.to_vec());
                    let a =
                        perfaux_abi::user::AuxtraceRecord::parse(rec.bytes, rec.endian).unwrap();
                    auxtrace.push((rec.location.file_offset, a));
                }
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    ReadAll {
        meta: r.metadata().clone(),
        counts,
        records,
        auxtrace_payloads,
        auxtrace,
        error,
    }
}

pub fn read_all(path: &Path) -> ReadAll {
    let r = PerfDataReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_all_from(r)
}

/// perf's `perf_event__names[]` (tools/perf/util/event.c) → record type.
pub fn perf_type_by_stat_name(name: &str) -> Option<u32> {
    const KERNEL: [&str; 22] = [
        "TOTAL",
        "MMAP",
        "LOST",
        "COMM",
        "EXIT",
        "THROTTLE",
        "UNTHROTTLE",
        "FORK",
        "READ",
        "SAMPLE",
        "MMAP2",
        "AUX",
        "ITRACE_START",
        "LOST_SAMPLES",
        "SWITCH",
        "SWITCH_CPU_WIDE",
        "NAMESPACES",
        "KSYMBOL",
        "BPF_EVENT",
        "CGROUP",
        "TEXT_POKE",
        "AUX_OUTPUT_HW_ID",
    ];
    const USER: [&str; 20] = [
        "ATTR",
        "EVENT_TYPE",
        "TRACING_DATA",
        "BUILD_ID",
        "FINISHED_ROUND",
        "ID_INDEX",
        "AUXTRACE_INFO",
        "AUXTRACE",
        "AUXTRACE_ERROR",
        "THREAD_MAP",
        "CPU_MAP",
        "STAT_CONFIG",
        "STAT",
        "STAT_ROUND",
        "EVENT_UPDATE",
        "TIME_CONV",
        "FEATURE",
        "COMPRESSED",
        "FINISHED_INIT",
        "COMPRESSED2",
    ];
    if name == "TOTAL" {
        return None;
    }
    if let Some(i) = KERNEL.iter().position(|&n| n == name) {
        return Some(i as u32);
    }
    USER.iter().position(|&n| n == name).map(|i| 64 + i as u32)
}

/// The "Aggregated stats" table at the end of `perf report -D`:
/// `<NAME> events: <count>` lines up to the first per-event table, plus TOTAL.
pub fn parse_perf_stats(text: &str) -> (BTreeMap<u32, u64>, u64) {
    let mut counts = BTreeMap::new();
    let mut total = 0;
    let start = text
        .find("Aggregated stats:")
        .expect("perf -D output has an Aggregated stats table");
    for line in text[start..].lines().skip(1) {
        let line = line.trim();
        let Some((name, rest)) = line.split_once(" events:") else {
            break;
        };
        let n: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        if name == "TOTAL" {
            total = n;
        } else {
            let t = perf_type_by_stat_name(name)
                .unwrap_or_else(|| panic!("unknown perf stat name {name}"));
            counts.insert(t, n);
        }
    }
    (counts, total)
}

/// Whether perf is there; prints `skipped: perf not found` (or fails under
/// PERFAUX_REQUIRE_ORACLES) when it is not.
pub fn have_perf() -> bool {
    perfaux_testutil::oracle("perf")
}

/// Runs perf with `args`; a pipe-format file is fed through a real pipe
/// (perf 6.1 misreads AUXTRACE payloads when stdin is a regular file).
/// Returns (exit ok, stdout, stderr).
pub fn run_perf(args: &[&str], path: &Path, pipe: bool) -> (bool, String, String) {
    let mut cmd = Command::new("perf");
    cmd.args(args);
    let stdin = if pipe {
        cmd.args(["-i", "-"]);
        Some(std::fs::read(path).unwrap())
    } else {
        cmd.arg("-i").arg(path);
        None
    };
    let r = perfaux_testutil::run(cmd, stdin);
    (r.ok(), r.stdout, r.stderr)
}

/// `perf report -D` of a file; returns (exit ok, stdout, stderr).
pub fn perf_report_d(path: &Path, pipe: bool) -> (bool, String, String) {
    run_perf(&["report", "-D", "-f"], path, pipe)
}

/// perf's stderr without the warnings that are not about the file's
/// format: the LOST-records notice (the file says records were lost, and
/// perf warns about it) and the kallsyms notices of a machine with
/// kptr_restrict.
pub fn unexpected_stderr(stderr: &str) -> Vec<String> {
    const ALLOWED: [&str; 9] = [
        "Warning:",
        "Processed ",
        "Check IO/CPU overload!",
        "Kernel address maps (/proc/{kallsyms,modules}) were restricted.",
        "Check /proc/sys/kernel/kptr_restrict before running 'perf record'.",
        "As no suitable kallsyms nor vmlinux was found, kernel samples",
        "can't be resolved.",
        "Samples in kernel functions may not be resolved if a suitable vmlinux",
        "file is not found in the buildid cache or in the vmlinux path.",
    ];
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| !ALLOWED.iter().any(|a| l.starts_with(a)))
        .filter(|l| !l.starts_with("Samples in kernel modules can't be resolved as well."))
        .map(String::from)
        .collect()
}

/// The AUXTRACE lines of `perf report -D`:
/// `<cpu> <time> 0x<off> [0x30]: PERF_RECORD_AUXTRACE size: S  offset: O  ref: R  idx: I  tid: T  cpu: C`
/// as (file offset, size, offset, reference, idx, tid, cpu).
pub fn perf_auxtrace_lines(text: &str) -> Vec<(u64, u64, u64, u64, u32, i32, i32)> {
    let num = |s: &str| -> i128 {
        if let Some(h) = s.strip_prefix("0x") {
            i128::from_str_radix(h, 16).unwrap()
        } else {
            s.parse().unwrap()
        }
    };
    text.lines()
        .filter(|l| l.contains("]: PERF_RECORD_AUXTRACE size:"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let field = |k: &str| num(w[w.iter().position(|x| *x == k).unwrap() + 1]);
            (
                num(w[2]) as u64,
                field("size:") as u64,
                field("offset:") as u64,
                field("ref:") as u64,
                field("idx:") as u32,
                field("tid:") as i32,
                field("cpu:") as i32,
            )
        })
        .collect()
}

/// Our AUXTRACE records in the shape of [`perf_auxtrace_lines`].
pub fn our_auxtrace_lines(r: &ReadAll) -> Vec<(u64, u64, u64, u64, u32, i32, i32)> {
    r.auxtrace
        .iter()
        .map(|(off, a)| {
            (
                *off,
                a.size,
                a.offset,
                a.reference,
                a.idx,
                a.tid as i32,
                a.cpu as i32,
            )
        })
        .collect()
}
