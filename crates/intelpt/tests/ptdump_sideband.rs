//! ptdump's sideband printing, end to end through `ptdump::dump`: records placed before the
//! timing packet that reaches their time, ties broken by file order, what is left printed at
//! the end, errors said with their file and offset.
use perfaux_intelpt::pevent;
use perfaux_intelpt::ptdump::{self, parse_args};
use perfaux_intelpt::ptdump_sideband::*;

/// A SWITCH record (type 14) with a time sample.
fn switch(out: bool, time: u64) -> Vec<u8> {
    let mut v = 14u32.to_le_bytes().to_vec();
    v.extend(u16::from(out).wrapping_shl(13).to_le_bytes());
    v.extend(16u16.to_le_bytes());
    v.extend(time.to_le_bytes());
    v
}

fn file(path: &str, bytes: Vec<u8>) -> PeventFile {
    PeventFile {
        path: path.into(),
        config: pevent::Config {
            sample_type: pevent::sample::TIME,
            ..Default::default()
        },
        bytes,
        primary: true,
        process: Default::default(),
    }
}

fn dump(trace: &[u8], files: Vec<PeventFile>) -> String {
    let o = ptdump::Options {
        sideband: SidebandOptions {
            show: SidebandFlags {
                compact: true,
                filename: true,
                time: true,
                ..Default::default()
            },
            warn: false,
            files,
        },
        ..Default::default()
    };
    let mut out = Vec::new();
    ptdump::dump(trace, &o, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn records_print_before_the_timing_packet_that_reaches_them() {
    // psb, tsc 5, psbend, tsc 9.
    let mut trace = perfaux_intelpt::decode::PSB.to_vec();
    trace.extend([
        0x19, 5, 0, 0, 0, 0, 0, 0, 0x02, 0x23, 0x19, 9, 0, 0, 0, 0, 0, 0,
    ]);
    let a = [switch(false, 1), switch(true, 6), switch(false, 20)].concat();
    let b = [switch(true, 1), switch(false, 5)].concat();
    let got = dump(&trace, vec![file("a", a), file("b", b)]);
    let got: Vec<String> = got
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        got,
        [
            "0000000000000000 psb",
            // Equal times: the file given first, then the other.
            "a 0000000000000001 PERF_RECORD_SWITCH.IN { 1 }",
            "b 0000000000000001 PERF_RECORD_SWITCH.OUT { 1 }",
            "b 0000000000000005 PERF_RECORD_SWITCH.IN { 5 }",
            "0000000000000010 tsc 5",
            "0000000000000018 psbend",
            "a 0000000000000006 PERF_RECORD_SWITCH.OUT { 6 }",
            "000000000000001a tsc 9",
            // Past the trace's last time: at the end.
            "a 0000000000000014 PERF_RECORD_SWITCH.IN { 14 }",
        ]
    );
}

#[test]
fn a_bad_record_is_reported_where_it_starts_and_ends_its_file() {
    let mut bad = switch(false, 1);
    bad.extend(switch(false, 2));
    bad[16 + 6] = 24;
    bad.extend([0; 8]);
    let got = dump(&[], vec![file("x", bad)]);
    assert_eq!(
        got,
        "x  0000000000000001  PERF_RECORD_SWITCH.IN  { 1 }\n\
         [x:0000000000000010 sideband error: decoder out of sync]\n"
    );
}

#[test]
fn options_load_files_with_the_settings_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sb");
    std::fs::write(&path, [switch(false, 1), switch(true, 2)].concat()).unwrap();
    let p = path.display().to_string();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (o, _) = parse_args(&args(&[
        "--sb:verbose",
        "--pevent:sample-type",
        "4",
        "--pevent:sample-config",
        "7:0x10004",
        "--pevent",
        &format!("{p}:16-0x100"),
        "--pevent:time-mult",
        "3",
        "--pevent:secondary",
        &p,
        "--quiet",
        "--sb:offset",
        "trace",
    ]))
    .unwrap();
    let sb = &o.sideband;
    assert_eq!(
        sb.show,
        SidebandFlags {
            offset: true,
            ..Default::default()
        }
    );
    assert_eq!(sb.files.len(), 2);
    assert_eq!(sb.files[0].path, p);
    // The range's end is cut to the file's.
    assert_eq!(sb.files[0].bytes, switch(true, 2));
    assert_eq!(sb.files[0].config.sample_types, [(7, 0x10004)]);
    assert_eq!(sb.files[0].config.time_mult, 1);
    assert_eq!(sb.files[1].config.time_mult, 3);
    assert_eq!(sb.files[1].bytes.len(), 32);
    for bad in [
        &["--pevent:time-shift", "64", "t"][..],
        &["--pevent:sample-config", "7", "t"],
        &["--pevent", "/nonexistent/sb", "t"],
        &["--sb:nothing", "t"],
        &["t", "--pevent"],
    ] {
        assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
    }
}
