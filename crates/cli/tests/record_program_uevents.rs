//! A traced program's uevents (include/perfaux.h) are all accounted for: a call that returned 0
//! has its uevent in the file, one refused (ENOSPC: its thread's data area was full) is
//! counted in a PERF_RECORD_LOST that Linux perf reads, and a larger data area (`-m DATA`)
//! never records fewer. The program (crates/preload/tests/c/uevent_server.c) counts its own
//! calls: that count is the oracle.

mod calls;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use calls::*;

/// Requests per thread: 2 uevents of 64 bytes each, 512 KiB a thread, far more than a 16-page
/// data area holds between two of the recorder's passes, and half of a 1 MiB one.
const REQUESTS: u32 = 4000;

/// Per program thread (0..3): (uevents accepted, refused), as the program printed them.
fn program_counts(stdout: &str) -> BTreeMap<String, (u64, u64)> {
    stdout
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 5, "{l:?}");
            (
                w[0].to_string(),
                (w[2].parse().unwrap(), w[4].parse().unwrap()),
            )
        })
        .collect()
}

/// The uevents in the file per program thread (their payload's first word), by perfaux script.
fn file_uevents(data: &Path) -> BTreeMap<String, u64> {
    let out = Command::new(PERFAUX)
        .args(["script", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut n = BTreeMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(u) = l.split("perfaux:uevent: ").nth(1) {
            let payload = u.split('"').nth(1).unwrap_or_else(|| panic!("{l:?}"));
            let t = payload.split_whitespace().next().unwrap().to_string();
            *n.entry(t).or_insert(0) += 1;
        }
    }
    n
}

/// The sum of the file's PERF_RECORD_LOST counts, as Linux perf reads them.
fn perf_lost(data: &Path) -> u64 {
    let out = Command::new("perf")
        .args(["report", "-D", "-i"])
        .arg(data)
        .output()
        .expect("perf report -D");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("PERF_RECORD_LOST:"))
        .map(|l| {
            let n = l.rsplit("lost:").next().unwrap().trim();
            n.parse::<u64>().unwrap_or_else(|_| panic!("{l:?}"))
        })
        .sum()
}

/// One recording with `-m mmap`: (uevents in the file, refused by the calls, perf's LOST sum).
fn record_server(dir: &Path, prog: &Path, mmap: &str) -> (u64, u64, u64) {
    let (out, data) = record_with(dir, prog, &[&REQUESTS.to_string()], &["-m", mmap], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let program = program_counts(&String::from_utf8_lossy(&out.stdout));
    let file = file_uevents(&data);
    let mut totals = (0, 0);
    for (t, &(accepted, refused)) in &program {
        assert_eq!(
            accepted + refused,
            2 * u64::from(REQUESTS),
            "thread {t}: every call returned 0 or ENOSPC"
        );
        assert_eq!(
            file.get(t).copied().unwrap_or(0),
            accepted,
            "-m {mmap}, thread {t}: the uevents whose call returned 0 are those in the file"
        );
        totals.0 += accepted;
        totals.1 += refused;
    }
    assert_eq!(program.len(), 3);
    (totals.0, totals.1, perf_lost(&data))
}

#[test]
fn uevents_that_returned_0_are_in_the_file_and_refused_ones_are_counted() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let include = include.to_str().unwrap();
    let prog = build_c(
        dir.path(),
        "uevent_server.c",
        &["-finstrument-functions", "-I", include],
        "uevent_server",
    );
    let calls = 3 * 2 * u64::from(REQUESTS);

    // 16 pages hold about a thousand uevents a thread: the burst overflows them.
    let (small, refused, lost) = record_server(dir.path(), &prog, "16");
    assert_eq!(small + refused, calls, "written + refused = calls");
    assert!(refused > 0, "the burst overflowed 16 pages");
    assert!(
        lost >= refused,
        "every refused uevent is counted in a PERF_RECORD_LOST: {lost} lost, {refused} refused"
    );

    // 1 MiB holds a thread's 512 KiB of uevents: none is refused.
    let (big, refused, lost) = record_server(dir.path(), &prog, "1M");
    assert_eq!(
        (big, refused, lost),
        (calls, 0, 0),
        "-m 1M holds every uevent"
    );
    assert!(big >= small, "a larger data area records no fewer");
}
