//! perf 6.1 itself as the oracle for the packets the real recording does not hold: a copy of
//! that recording (testdata/intel_pt) whose first AUXTRACE payload is replaced by test bytes
//! (every packet kind, perf's edge cases, and random bytes), read by `perf report -D`, prints
//! the same packet lines as perfaux's dump of those bytes.

use std::path::{Path, PathBuf};

use perfaux_intelpt::perf_dump;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/intel_pt")
}

/// Where the first AUXTRACE payload lies in the recording, and its size.
const PAYLOAD_AT: usize = 0x29f0;
const PAYLOAD_LEN: usize = 12240;

/// Every packet kind perf knows, and the cases where it reads bytes its own way.
fn packets() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        vec![
            0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
            0x02, 0x82,
        ],
        vec![0x02, 0x23],
        vec![0x02, 0xf3],
        vec![0x02, 0x83],
        vec![0x06],
        vec![0xee],
        vec![0x80],
        vec![0x02, 0xa3, 0x02, 0, 0, 0, 0, 0],
        vec![0x02, 0xa3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        vec![0x02, 0xa3, 0, 0, 0, 0, 0, 0],
        vec![0x02, 0xa3, 0x01, 0, 0, 0, 0, 0],
        vec![0x0d],
        vec![0x2d, 0x94, 0xd7],
        vec![0x4d, 0xa2, 0x20, 0x74, 0xb9],
        vec![0x71, 0x02, 0xd3, 0x60, 0xb9, 0xff, 0xff],
        vec![0x81, 0x02, 0xd3, 0x60, 0xb9, 0xff, 0xff],
        vec![0xdd, 1, 2, 3, 4, 5, 6, 7, 8],
        vec![0x11],
        vec![0x01],
        vec![0x1d],
        vec![0xad, 1, 2, 3],
        vec![0xed, 1, 2],
        vec![0x99, 0x00],
        vec![0x99, 0x01],
        vec![0x99, 0x02],
        vec![0x99, 0x03],
        vec![0x99, 0x05],
        vec![0x99, 0x20],
        vec![0x99, 0x21],
        vec![0x99, 0x22],
        vec![0x99, 0x23],
        vec![0x99, 0x40],
        vec![0x02, 0x43, 0x01, 0x34, 0xd4, 0x3f, 0, 0],
        vec![0x19, 0xe8, 0xcf, 0xd2, 0x4c, 0xbc, 0, 0],
        vec![0x59, 0x48],
        vec![0x02, 0x73, 0x3c, 0xb2, 0xff, 0x30, 0xff],
        vec![0x02, 0x03, 0x1d, 0x00],
        vec![0x02, 0x03, 0xff, 0xff],
        vec![0x03],
        vec![0x07, 0x02],
        vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0e],
        vec![
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0e,
        ],
        vec![0x02, 0xc8, 0xcd, 0xab, 0, 0, 0],
        vec![
            0x02, 0xc3, 0x88, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0x42, 0x22, 0x2a,
        ],
        vec![0x02, 0xc3, 0x87],
        vec![0x02, 0x12, 0xef, 0xcd, 0xab, 0x90],
        vec![0x02, 0xb2, 1, 2, 3, 4, 5, 6, 7, 8],
        vec![0x02, 0x52, 1, 2, 3, 4],
        vec![0x02, 0x62],
        vec![0x02, 0xe2],
        vec![0x02, 0xc2, 0x0b, 0, 0, 0, 0x01, 0, 0, 0],
        vec![0x02, 0x22, 0x80, 0x34],
        vec![0x02, 0xa2, 0x05, 0x01, 0, 0, 0],
        vec![0x02, 0xa2, 0xff, 0xff, 0xff, 0xff, 0xff],
        // A block of 4-byte items: a BIP, a FUP and a bad byte inside it, then a TNT ends it.
        vec![0x02, 0x63, 0x80],
        vec![0x0c, 1, 2, 3, 4],
        vec![0x3d, 1, 2],
        vec![0x0c, 1, 2, 3, 4],
        vec![0xd9],
        vec![0x0c, 1, 2, 3, 4],
        vec![0x06],
        vec![0x0c],
        // A block of 8-byte items ended by a BEP.
        vec![0x02, 0x63, 0x05],
        vec![0xfc, 1, 2, 3, 4, 5, 6, 7, 8],
        vec![0x02, 0xb3],
        vec![0x0c],
        vec![0x02, 0x33],
        vec![0x02, 0x13, 0x81, 0x03],
        vec![0x02, 0x13, 0x02, 0x00],
        vec![0x02, 0x53, 0x09, 1, 2, 3, 4, 5, 6, 7, 0],
        vec![0x02, 0xff],
        vec![0x05],
        vec![0x39],
        // Zeros: folded after a short packet, up to 8 bytes a line, never after a long one.
        vec![0x59, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        vec![0x19, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0],
        vec![0; 17],
        vec![
            0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    ];
    // A PSB cut short.
    v.push([0x02, 0x82].repeat(4));
    v
}

/// xorshift64*: random bytes from a seed, the same on every run.
fn random(seed: u64, n: usize, packet_like: bool) -> Vec<u8> {
    let mut s = seed;
    let mut next = || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let kinds = packets();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = next();
        if packet_like && r % 4 != 0 {
            out.extend_from_slice(&kinds[(r >> 8) as usize % kinds.len()]);
        } else {
            out.push((r >> 32) as u8);
        }
    }
    out.truncate(n);
    out
}

fn perf_lines(payload: &[u8], dir: &Path) -> String {
    assert_eq!(payload.len(), PAYLOAD_LEN);
    let mut file = std::fs::read(testdata().join("perf.data.intel_pt-4.14")).unwrap();
    let original = std::fs::read(testdata().join("quipper_intel_pt-4.14.auxtrace0.bin")).unwrap();
    assert_eq!(
        &file[PAYLOAD_AT..PAYLOAD_AT + PAYLOAD_LEN],
        &original[..],
        "the recording's first AUXTRACE payload is where this test writes"
    );
    file[PAYLOAD_AT..PAYLOAD_AT + PAYLOAD_LEN].copy_from_slice(payload);
    let path = dir.join("perf.data");
    std::fs::write(&path, &file).unwrap();
    let run = perfaux_testutil::perf_on_file(&["report", "-D"], &path, false, dir);
    assert!(run.ok(), "perf report -D: {}", run.stderr);
    let header = format!(". ... Intel Processor Trace data: size {PAYLOAD_LEN} bytes");
    let mut lines = run.stdout.lines().skip_while(|l| *l != header);
    let mut out = String::new();
    for l in lines.by_ref() {
        if l.is_empty() {
            break;
        }
        out.push_str(l);
        out.push('\n');
    }
    assert!(!out.is_empty(), "perf printed no Intel PT dump");
    out
}

fn ours(payload: &[u8]) -> String {
    let mut out = Vec::new();
    perf_dump::dump(payload, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn compare(name: &str, payload: &[u8], dir: &Path) {
    let theirs = perf_lines(payload, dir);
    let ours = ours(payload);
    for (n, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "{name}: line {}", n + 1);
    }
    assert_eq!(
        ours.lines().count(),
        theirs.lines().count(),
        "{name}: line count"
    );
}

#[test]
fn every_packet_kind_dumps_as_perf_6_1_dumps_it() {
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let mut payload: Vec<u8> = packets().concat();
    // The rest PADs, then a TIP cut off by the end of the payload.
    payload.resize(PAYLOAD_LEN - 3, 0);
    payload.extend_from_slice(&[0x4d, 0x01, 0x02]);
    compare("packet kinds", &payload, dir.path());
}

#[test]
fn random_bytes_dump_as_perf_6_1_dumps_them() {
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=3u64 {
        compare(
            &format!("random bytes, seed {seed}"),
            &random(seed, PAYLOAD_LEN, false),
            dir.path(),
        );
        compare(
            &format!("random packets, seed {seed}"),
            &random(seed * 7919, PAYLOAD_LEN, true),
            dir.path(),
        );
    }
}
