//! The two Intel PT streams of a real Skylake recording (testdata/intel_pt, quipper's
//! perf.data, BSD-3) against the dumps libipt's ptdump and perf 6.1 made of them: byte for
//! byte.

use std::path::{Path, PathBuf};

use perfaux_intelpt::{perf_dump, ptdump};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/intel_pt")
}

fn unxz(name: &str) -> String {
    let raw = std::fs::read(testdata().join(name)).unwrap();
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut raw.as_slice(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn stream(i: u32) -> Vec<u8> {
    std::fs::read(testdata().join(format!("quipper_intel_pt-4.14.auxtrace{i}.bin"))).unwrap()
}

/// The first line that differs, with its number, for a readable failure.
fn first_difference(ours: &str, theirs: &str) -> Option<String> {
    let (mut a, mut b) = (ours.lines(), theirs.lines());
    for n in 1.. {
        match (a.next(), b.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => return Some(format!("line {n}:\n  expected {y:?}\n  perfaux  {x:?}")),
        }
    }
    None
}

/// Each stream's dump by `dump` equals the tool's, kept xz-compressed as `SUFFIX`.
fn check(suffix: &str, dump: impl Fn(&[u8], &mut Vec<u8>)) {
    for i in 0..2 {
        let mut out = Vec::new();
        dump(&stream(i), &mut out);
        let ours = String::from_utf8(out).unwrap();
        let theirs = unxz(&format!("quipper_intel_pt-4.14.auxtrace{i}.{suffix}"));
        assert!(theirs.lines().count() > 1000);
        if let Some(d) = first_difference(&ours, &theirs) {
            panic!("auxtrace{i}: {d}");
        }
        assert_eq!(ours, theirs, "auxtrace{i}");
    }
}

#[test]
fn real_streams_dump_as_libipts_ptdump_does() {
    check("ptdump.txt.xz", |s, out| {
        ptdump::dump(s, &ptdump::Options::default(), out).unwrap()
    });
}

#[test]
fn real_streams_dump_as_perf_report_d_does() {
    check("perf-D.txt.xz", |s, out| perf_dump::dump(s, out).unwrap());
}
