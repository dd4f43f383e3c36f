//! `perfaux report -D` on files other tools wrote agrees with perf 6.1's
//! own dump of them (the golden texts in testdata/, made with
//! Debian's perf 6.1): the same records at the same file offsets, with the
//! same sizes and type names, and the same "Aggregated stats" table.
//! perfaux prints records in file order, perf in time order, so the
//! records are compared as sorted lists.

mod common;

use common::*;
use perfaux_testutil::{fixture, fixture_text};

fn check(file: &str, golden: &str, offset_shift: u64) {
    let f = fixture(file);
    let g = fixture_text(golden);
    let ours = perfaux(&["report", "-D", "-i", path_str(&f)]);
    assert_eq!(ours.code, 0, "{file}: {}", ours.stderr);
    // For a file whose attrs it only half knows (simpleperf's attr_size 144),
    // perf 6.1 synthesizes ATTR records and dumps them at offset 0: they
    // are not in the file, so they are not compared.
    let all = record_lines(&g);
    let synthesized = all
        .iter()
        .filter(|(o, _, n)| *o == 0 && n == "ATTR")
        .count() as u64;
    let theirs: Vec<_> = all
        .into_iter()
        .filter(|(o, _, n)| !(*o == 0 && n == "ATTR"))
        .collect();
    assert!(!theirs.is_empty(), "{golden} has no record lines");
    let mine: Vec<_> = record_lines(&ours.stdout)
        .into_iter()
        .map(|(o, s, n)| (o - offset_shift, s, n))
        .collect();
    assert_eq!(mine, theirs, "{file}: records differ from perf's dump");
    let their_stats: Vec<(String, u64)> = stats_rows(&g)
        .into_iter()
        .filter_map(|(n, c)| match n.as_str() {
            "TOTAL" => Some((n, c - synthesized)),
            "ATTR" if c == synthesized => None,
            "ATTR" => Some((n, c - synthesized)),
            _ => Some((n, c)),
        })
        .collect();
    assert_eq!(
        stats_rows(&ours.stdout),
        their_stats,
        "{file}: stats differ"
    );
}

#[test]
fn intel_pt_file_mode() {
    check(
        "intel_pt/perf.data.intel_pt-4.14",
        "intel_pt/quipper_intel_pt-4.14.records.perf-D.txt.xz",
        0,
    );
}

#[test]
fn intel_pt_pipe_mode() {
    // In pipe mode perf 6.1 counts offsets from the end of the 16-byte
    // pipe header.
    check(
        "intel_pt/perf.data.piped.intel_pt-4.14",
        "intel_pt/quipper_piped_intel_pt-4.14.records.perf-D.txt.xz",
        16,
    );
}

#[test]
fn simpleperf_files() {
    for (f, g) in [
        (
            "simpleperf_etm/perf_etm.data",
            "simpleperf_etm/simpleperf_perf_etm.perf-D.txt.xz",
        ),
        (
            "simpleperf_etm/perf_kernel.data",
            "simpleperf_etm/simpleperf_perf_kernel.perf-D.txt.xz",
        ),
        (
            "simpleperf_etm/perf_with_missing_aux_data.data",
            "simpleperf_etm/simpleperf_perf_with_missing_aux_data.perf-D.txt.xz",
        ),
        (
            "simpleperf_etm/perf_with_unformatted_trace.data",
            "simpleperf_etm/simpleperf_perf_with_unformatted_trace.perf-D.txt.xz",
        ),
    ] {
        check(f, g, 0);
    }
}

#[test]
fn intel_pt_record_lines_match_perf_text_exactly() {
    // Beyond offsets and names: the PERF_RECORD lines of kernel records
    // whose fields perfaux formats (MMAP, MMAP2, COMM, EXIT, AUX,
    // ITRACE_START, SWITCH_CPU_WIDE, SAMPLE) are perf's, character for
    // character, time stamp included.
    let f = fixture("intel_pt/perf.data.intel_pt-4.14");
    let g = fixture_text("intel_pt/quipper_intel_pt-4.14.records.perf-D.txt.xz");
    let ours = perfaux(&["report", "-D", "-i", path_str(&f)]).stdout;
    let pick = |t: &str| {
        let mut v: Vec<String> = t
            .lines()
            .filter(|l| {
                [
                    "MMAP ",
                    "MMAP2 ",
                    "COMM",
                    "EXIT",
                    "AUX ",
                    "ITRACE_START",
                    "SWITCH_CPU_WIDE",
                    "SAMPLE(",
                ]
                .iter()
                .any(|k| l.contains(&format!("PERF_RECORD_{k}")))
            })
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    let (a, b) = (pick(&g), pick(&ours));
    assert!(a.len() > 200, "kernel records of the fixture: {}", a.len());
    assert_eq!(a, b);
}

/// A group whose leader samples the group's counters (`:S`,
/// PERF_SAMPLE_READ with PERF_FORMAT_GROUP): `script` prints one line per
/// member with that member's counter delta as the period, line for line as
/// perf 6.1 prints the same file.
#[test]
fn group_read_prints_one_line_per_member_as_perf_does() {
    perfaux_testutil::require_oracle!("perf");
    let dir = tempdir();
    let f = dir.path().join("group.data");
    let rec = perf(
        &[
            "record",
            "-e",
            "{cpu-clock,task-clock}:S",
            "-o",
            path_str(&f),
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ],
        dir.path(),
    );
    assert_eq!(rec.code, 0, "perf record: {}", rec.stderr);
    let theirs = perf(
        &[
            "script",
            "-F",
            "comm,tid,time,period,event",
            "-i",
            path_str(&f),
        ],
        dir.path(),
    );
    assert_eq!(theirs.code, 0, "{}", theirs.stderr);
    let ours = perfaux(&["script", "-i", path_str(&f)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let (a, b) = (script_columns(&theirs.stdout), script_columns(&ours.stdout));
    assert!(a.len() > 20, "perf printed {} lines", a.len());
    for ev in ["cpu-clock:", "task-clock:"] {
        assert!(a.iter().any(|l| l[4] == ev), "{ev} in perf's lines");
    }
    assert_eq!(a, b);
}

/// comm, tid, time, period, event: the first five columns of `script`'s
/// lines (the comm is one word in these files; a cpu column, if any, is
/// left out).
fn script_columns(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .filter(|w| !w.starts_with('['))
                .take(5)
                .map(String::from)
                .collect()
        })
        .collect()
}

/// A file perf 6.1 wrote where `sh` exec'd on one CPU and ran on the
/// other: the other CPU's buffer, with the samples after the exec, was
/// written before the buffer with the exec's COMM. perf names every sample
/// after the exec `sh` (COMM records are time-ordered with the samples);
/// a name taken in file order says `perf-exec` for 314 of them.
#[test]
fn a_comm_written_after_later_samples_names_them_as_perf_does() {
    let f = fixture("perf_data/group_read.exec_migrated.data");
    let theirs = script_columns(&fixture_text(
        "perf_data/group_read.exec_migrated.script.txt.xz",
    ));
    assert!(
        theirs.iter().all(|l| l[0] == "sh"),
        "perf names every sample sh"
    );
    let ours = perfaux(&["script", "-i", path_str(&f)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = script_columns(&ours.stdout);
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
}

/// `report` reads the same file in time order too (the records queued by time between rounds,
/// as perf's ordered events): every sample is `sh`'s, as `perf report --sort comm` says; read
/// in file order, 54.9 % of them were `perf-exec`'s.
#[test]
fn report_names_samples_by_the_comm_of_their_time_as_perf_report_does() {
    perfaux_testutil::require_oracle!("perf");
    let f = fixture("perf_data/group_read.exec_migrated.data");
    let d = tempdir();
    let theirs = perf_report_sorted("comm", &f, d.path());
    assert!(theirs.ok(), "{}", theirs.stderr);
    let ours = perfaux(&["report", "--sort", "comm", "-i", path_str(&f)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    // "  100.00%  sh" rows (perf may repeat the overhead for its children column).
    let rows = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains('%'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0].to_string(), f[f.len() - 1].to_string())
            })
            .collect()
    };
    let theirs = rows(&theirs.stdout);
    assert_eq!(theirs, [("100.00%".to_string(), "sh".to_string())]);
    assert_eq!(rows(&ours.stdout), theirs, "{}", ours.stdout);
}

/// The Intel PT packet lines `report -D` prints for each AUXTRACE payload, in file order.
fn intel_pt_dumps(text: &str) -> Vec<String> {
    let mut dumps = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.starts_with(". ... Intel Processor Trace data: size ") {
            let mut d = format!("{l}\n");
            for l in lines.by_ref().take_while(|l| !l.is_empty()) {
                d.push_str(l);
                d.push('\n');
            }
            dumps.push(d);
        }
    }
    dumps
}

/// `report -D` on an intel_pt recording decodes each AUXTRACE payload as perf 6.1 does: the
/// packet lines perf printed for the same payloads, byte for byte, in file and pipe mode.
#[test]
fn intel_pt_payloads_dump_as_perfs_packet_lines() {
    for (file, prefix) in [
        ("intel_pt/perf.data.intel_pt-4.14", "quipper_intel_pt-4.14"),
        (
            "intel_pt/perf.data.piped.intel_pt-4.14",
            "quipper_piped_intel_pt-4.14",
        ),
    ] {
        let f = fixture(file);
        let ours = perfaux(&["report", "-D", "-i", path_str(&f)]);
        assert_eq!(ours.code, 0, "{file}: {}", ours.stderr);
        let dumps = intel_pt_dumps(&ours.stdout);
        assert_eq!(dumps.len(), 2, "{file}: AUXTRACE payloads dumped");
        for (i, d) in dumps.iter().enumerate() {
            let theirs = fixture_text(&format!("intel_pt/{prefix}.auxtrace{i}.perf-D.txt.xz"));
            assert!(theirs.lines().count() > 1000);
            assert!(
                *d == theirs,
                "{file}: payload {i} differs from perf's packet lines"
            );
        }
    }
}
