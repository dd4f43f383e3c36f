//! `perfaux intel-pt dump`, the command: libipt's ptdump's output on a real stream, its
//! options and ranges, and what it says about bad input.

mod common;

use common::*;
use perfaux_testutil::{fixture, fixture_text};

#[test]
fn a_real_stream_dumps_as_libipts_ptdump() {
    let f = fixture("intel_pt/quipper_intel_pt-4.14.auxtrace1.bin");
    let ours = perfaux(&["intel-pt", "dump", path_str(&f)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let theirs = fixture_text("intel_pt/quipper_intel_pt-4.14.auxtrace1.ptdump.txt.xz");
    assert!(ours.stdout == theirs, "the dump differs from ptdump's");
}

/// `FILE:FROM-TO` reads that range and prints offsets from FROM, as ptdump does; the PSB
/// search starts there.
#[test]
fn a_range_dumps_from_its_start() {
    let f = fixture("intel_pt/quipper_intel_pt-4.14.auxtrace1.bin");
    let whole = perfaux(&["intel-pt", "dump", "--no-pad", path_str(&f)]).stdout;
    // The second PSB of the stream, and the bytes from it to the end.
    let second = whole
        .lines()
        .filter(|l| l.ends_with("  psb"))
        .nth(1)
        .expect("two PSBs");
    let at = u64::from_str_radix(&second[..16], 16).unwrap();
    let range = format!("{}:{at:#x}-{:#x}", path_str(&f), 137728);
    let part = perfaux(&["intel-pt", "dump", "--no-pad", &range]);
    assert_eq!(part.code, 0, "{}", part.stderr);
    let shifted: Vec<String> = whole
        .lines()
        .skip_while(|l| *l != second)
        .map(|l| {
            let off = u64::from_str_radix(&l[..16], 16).unwrap() - at;
            format!("{off:016x}{}", &l[16..])
        })
        .collect();
    assert_eq!(part.stdout.lines().collect::<Vec<_>>(), shifted);
}

#[test]
fn bad_options_and_files_are_named() {
    let r = perfaux(&["intel-pt", "dump", "--lastipp", "x.pt"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("unknown option: --lastipp"),
        "{}",
        r.stderr
    );
    let r = perfaux(&["intel-pt", "dump", "--time", "--tcal", "x.pt"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("either --time or --tcal"), "{}", r.stderr);
    let r = perfaux(&["intel-pt", "dump", "/nonexistent/x.pt"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("failed to open /nonexistent/x.pt"),
        "{}",
        r.stderr
    );
    let f = fixture("intel_pt/quipper_intel_pt-4.14.auxtrace0.bin");
    let r = perfaux(&["intel-pt", "dump", &format!("{}:0x10000", path_str(&f))]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("bad offset 0x10000"), "{}", r.stderr);
}

/// On a machine without Intel PT (this one, and CI's), `record -e intel_pt//` says so, names
/// the PMUs the machine has (the kernel's own list) and what to use instead.
#[test]
fn recording_intel_pt_without_the_pmu_says_which_pmus_there_are() {
    let dir = std::path::Path::new("/sys/bus/event_source/devices");
    if dir.join("intel_pt").exists() {
        eprintln!("skipped: this machine has intel_pt");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let f = out.path().join("x.data");
    let r = perfaux(&["record", "-e", "intel_pt//u", "-o", path_str(&f)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("this machine has no intel_pt PMU"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("software"), "{}", r.stderr);
    assert!(r.stderr.contains("-e swtrace//"), "{}", r.stderr);
    assert!(!f.exists(), "no file is written");
}
