//! Files recorded by Linux perf on this machine: perfaux reads every record
//! with the counts `perf report -D` prints, and writes them back so that
//! `perf script` and `perf report -D` (file offsets aside) print the same.
//! Skipped with a printed reason where perf is missing or not permitted.

mod common;

use common::*;
use perfaux_abi::consts::*;
use perfaux_perfdata::feature::Feature;
use perfaux_perfdata::writer::HEADER_LAST_FEATURE;
use perfaux_perfdata::{
    EventAttr, HostInfo, PerfDataReader, PerfDataWriter, PerfPipeWriter, WriterEvent, WriterOptions,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `perf record <args> -o <out>` (pipe: `-o -` into the file); `None` with a
/// printed reason if perf cannot record here.
fn record(dir: &Path, name: &str, events: &[&str], pipe: bool) -> Option<PathBuf> {
    if !have_perf() {
        return None;
    }
    let out = dir.join(name);
    let mut cmd = Command::new("perf");
    cmd.arg("record");
    for e in events {
        cmd.args(["-e", e]);
    }
    if pipe {
        cmd.args(["-o", "-"])
            .stdout(std::fs::File::create(&out).unwrap());
    } else {
        cmd.arg("-o").arg(&out).stdout(Stdio::null());
    }
    // A workload that calls getpid(2) for the tracepoint.
    cmd.args([
        "--",
        "python3",
        "-c",
        "import os; [os.getpid() for _ in range(3)]",
    ]);
    let res = cmd.stderr(Stdio::piped()).output().unwrap();
    if !res.status.success() {
        eprintln!(
            "skipping {name}: perf record {events:?} failed: {}",
            String::from_utf8_lossy(&res.stderr).trim()
        );
        return None;
    }
    Some(out)
}

/// The tracepoint needs tracefs; mount it if it is not there (root only).
fn tracefs_ready() -> bool {
    let p = Path::new("/sys/kernel/tracing/events/syscalls");
    if p.exists() || Path::new("/sys/kernel/debug/tracing/events/syscalls").exists() {
        return true;
    }
    let ok = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping the tracepoint recording: cannot mount tracefs (not root?)");
    }
    ok && p.exists()
}

fn check_counts(path: &Path, pipe: bool) -> ReadAll {
    let r = read_all(path);
    assert!(r.error.is_none(), "{}: {:?}", path.display(), r.error);
    let (ok, out, err) = perf_report_d(path, pipe);
    assert!(ok, "perf report -D {}: {err}", path.display());
    let (perf, total) = parse_perf_stats(&out);
    assert_eq!(
        r.counts,
        perf,
        "{}: record counts, ours vs perf report -D",
        path.display()
    );
    assert_eq!(r.counts.values().sum::<u64>(), total);
    // Every record of a kernel type parses with its event's layout, and
    // every sample finds its event.
    let mut rd = PerfDataReader::open(path).unwrap();
    while let Some(rec) = rd.next_record().unwrap() {
        if let Some(p) = rec.parse() {
            p.unwrap_or_else(|e| panic!("{}: record at {:?}: {e}", path.display(), rec.location));
        }
        if rec.header.type_ == PERF_RECORD_SAMPLE {
            assert!(rec.attr_index.is_some());
        }
        if let Some(u) = rec.user_record() {
            u.unwrap_or_else(|e| panic!("{}: record at {:?}: {e}", path.display(), rec.location));
        }
    }
    r
}

fn writer_events(attrs: &[EventAttr]) -> Vec<WriterEvent> {
    attrs
        .iter()
        .map(|a| WriterEvent {
            attr: a.attr,
            ids: a.ids.clone(),
            name: a.name.clone().unwrap_or_default(),
        })
        .collect()
}

/// Reads `src` and writes every record back in the same mode; the feature
/// sections are copied as they are (the AUXTRACE index is recomputed).
fn rewrite(src: &Path, dst: &Path, pipe: bool) {
    // First pass: the metadata (a pipe's arrives with its records).
    let meta = read_all(src).meta;
    let mut opts = WriterOptions::new(HostInfo::fixed());
    opts.endian = meta.endian;
    opts.attr_size = meta.attrs.first().map(|a| a.attr.size);
    opts.only_raw_features = true;
    for f in meta.features.features() {
        if f.0 < HEADER_LAST_FEATURE as u32 && f != Feature::AUXTRACE {
            opts.raw_features
                .insert(f, meta.features.raw(f).unwrap().data.clone());
        }
    }
    let events = writer_events(&meta.attrs);
    let out = std::fs::File::create(dst).unwrap();
    let mut rd = PerfDataReader::open(src).unwrap();
    if pipe {
        let mut w = PerfPipeWriter::new(out, events, opts).unwrap();
        while let Some(rec) = rd.next_record().unwrap() {
            // The writer puts its own HEADER_ATTR/HEADER_FEATURE records first.
            let t = rec.header.type_;
            if rec.location.decompressed_offset.is_none()
                && t != PERF_RECORD_HEADER_ATTR
                && t != PERF_RECORD_HEADER_FEATURE
            {
                w.write_record_with_payload(rec.bytes, rec.payload).unwrap();
            }
        }
        w.finish().unwrap();
    } else {
        let mut w = PerfDataWriter::new(out, events, opts).unwrap();
        while let Some(rec) = rd.next_record().unwrap() {
            if rec.location.decompressed_offset.is_none() {
                w.write_record_with_payload(rec.bytes, rec.payload).unwrap();
            }
        }
        w.finish().unwrap();
    }
}

/// perf copies the vDSO to a temporary file with a random name
/// (/tmp/perf-vdso.so-XXXXXX) on every run.
fn without_temp_names(text: &str) -> String {
    const TAG: &str = "perf-vdso.so-";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(TAG) {
        let end = (i + TAG.len() + 6).min(rest.len());
        out.push_str(&rest[..i + TAG.len()]);
        out.push_str("XXXXXX");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `perf report -D` output with the file offsets taken out: the token
/// before a `[0x<size>]` is an offset (`0x1e0` or `0x1e0@path`).
fn without_offsets(text: &str) -> String {
    let text = without_temp_names(text);
    let mut out = String::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        let mut kept = Vec::with_capacity(w.len());
        for (i, tok) in w.iter().enumerate() {
            let next_is_size = w.get(i + 1).is_some_and(|n| n.starts_with("[0x"));
            if next_is_size && tok.starts_with("0x") {
                kept.push("OFFSET");
            } else {
                kept.push(tok);
            }
        }
        out.push_str(&kept.join(" "));
        out.push('\n');
    }
    out
}

fn check_round_trip(src: &Path, pipe: bool) {
    let dst = src.with_extension("rewritten");
    rewrite(src, &dst, pipe);
    let (ok1, a, e1) = perf_report_d(src, pipe);
    let (ok2, b, e2) = perf_report_d(&dst, pipe);
    assert!(ok1 && ok2, "{e1}\n{e2}");
    assert_eq!(unexpected_stderr(&e2), unexpected_stderr(&e1));
    let (a, b) = (without_offsets(&a), without_offsets(&b));
    if a != b {
        let first = a.lines().zip(b.lines()).position(|(x, y)| x != y);
        panic!(
            "{}: perf report -D differs after a rewrite at line {first:?}: {:?} vs {:?}",
            src.display(),
            first.map(|i| a.lines().nth(i)),
            first.map(|i| b.lines().nth(i))
        );
    }
    let args = ["script", "-f", "--show-task-events", "--show-mmap-events"];
    let (ok1, a, e1) = run_perf(&args, src, pipe);
    let (ok2, b, e2) = run_perf(&args, &dst, pipe);
    assert!(ok1 && ok2, "{e1}\n{e2}");
    assert!(!a.is_empty());
    let (a, b) = (without_temp_names(&a), without_temp_names(&b));
    assert_eq!(
        a,
        b,
        "{}: perf script differs after a rewrite",
        src.display()
    );
}

#[test]
fn cpu_clock_recording() {
    let dir = tempfile::tempdir().unwrap();
    for pipe in [false, true] {
        let name = if pipe {
            "cpu-clock.pipe"
        } else {
            "cpu-clock.data"
        };
        let Some(path) = record(dir.path(), name, &["cpu-clock"], pipe) else {
            return;
        };
        let r = check_counts(&path, pipe);
        assert_eq!(r.meta.attrs[0].name.as_deref(), Some("cpu-clock"));
        check_round_trip(&path, pipe);
    }
}

#[test]
fn tracepoint_recording() {
    if !tracefs_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for pipe in [false, true] {
        let name = if pipe { "getpid.pipe" } else { "getpid.data" };
        let Some(path) = record(dir.path(), name, &["syscalls:sys_enter_getpid"], pipe) else {
            return;
        };
        let r = check_counts(&path, pipe);
        assert!(
            r.counts.get(&PERF_RECORD_SAMPLE).is_some_and(|&n| n >= 3),
            "{:?}",
            r.counts
        );
        if pipe {
            // The tracepoint formats travel inline: HEADER_TRACING_DATA and its payload.
            let (_, _, len) = *r
                .records
                .iter()
                .find(|x| x.1 == PERF_RECORD_HEADER_TRACING_DATA)
                .unwrap();
            assert!(len > 0);
        } else {
            assert!(r.meta.features.contains(Feature::TRACING_DATA));
        }
        check_round_trip(&path, pipe);
    }
}

#[test]
fn fixture_round_trip() {
    if !have_perf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // An older perf's AUX recording (AUXTRACE payloads, the AUXTRACE index)
    // and a compressed pipe file. (hotspot's plain `perf record true` file
    // was here; it is GPL and left out of testdata/.)
    for (f, pipe) in [
        ("intel_pt/perf.data.intel_pt-4.14", false),
        ("perf_data/sleep.compressed.pipe.data", true),
    ] {
        let src = dir.path().join(f.replace('/', "_"));
        std::fs::copy(fixture(f), &src).unwrap();
        check_round_trip(&src, pipe);
    }
}

/// The BUILD_ID feature of a recording perf wrote with every mapped file's build id
/// (`--buildid-all`) reads as `perf buildid-list` lists it: each id and path.
#[test]
fn build_ids_read_as_perf_buildid_list_lists_them() {
    if !have_perf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ids.data");
    let res = Command::new("perf")
        .args(["record", "--buildid-all", "-e", "cpu-clock", "-o"])
        .arg(&out)
        .args(["--", "python3", "-c", "pass"])
        .env("HOME", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    if !res.status.success() {
        eprintln!(
            "skipping: perf record failed: {}",
            String::from_utf8_lossy(&res.stderr).trim()
        );
        return;
    }
    let listed = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(&out)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(listed.status.success());
    let mut theirs: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let reader = PerfDataReader::open(&out).unwrap();
    let entries = reader
        .metadata()
        .features
        .build_ids()
        .expect("a BUILD_ID section")
        .unwrap();
    let mut ours: Vec<String> = entries
        .iter()
        .map(|e| {
            let hex: String = e.build_id.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex} {}", e.filename)
        })
        .collect();
    theirs.sort();
    ours.sort();
    ours.dedup();
    theirs.dedup();
    assert!(
        theirs.len() >= 2,
        "the loader and python at least: {theirs:?}"
    );
    assert_eq!(ours, theirs);
}
