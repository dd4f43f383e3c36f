//! Any bytes are safe input: every decoder dialect gives a packet no longer than what is left
//! or an error at a position, and both dumps finish on any bytes, with output bounded by the
//! input (a line for each byte at most, and the diagnostics of at most one resync each). Any
//! bytes are safe as a perf_event sideband file too: back-to-back records or an error at the
//! record that could not be read, and ptdump's and ptxed's output with them bounded the same
//! way.

use perfaux_intelpt::decode::{Context, Dialect, decode};
use perfaux_intelpt::ptdump_sideband::{PeventFile, ProcessConfig, SidebandFlags, SidebandOptions};
use perfaux_intelpt::{perf_dump, pevent, ptdump, ptxed, ptxed_sideband};
use proptest::prelude::*;

/// Bytes biased towards packets: PSBs, opcodes and their payloads, so the decoders go deep.
fn tracey() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(perfaux_intelpt::decode::PSB.to_vec()),
        Just(vec![0x02, 0x23]),
        Just(vec![0x02, 0xf3]),
        Just(vec![0x02, 0x63, 0x80]),
        Just(vec![0x02, 0x63, 0x00]),
        Just(vec![0x02, 0x73, 0x10, 0, 0, 4, 0]),
        Just(vec![0x19, 1, 2, 3, 4, 5, 6, 7]),
        Just(vec![0x59, 0x10]),
        Just(vec![0x02, 0x03, 0x02, 0x00]),
        any::<u8>().prop_map(|b| vec![b | 3]),
        any::<[u8; 3]>().prop_map(|b| vec![0x02, b[0], b[1], b[2]]),
        any::<[u8; 9]>().prop_map(|b| b.to_vec()),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(piece, 0..200).prop_map(|v| v.concat())
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    for dialect in [Dialect::Sdm, Dialect::Libipt, Dialect::Perf] {
        let mut ctx = Context::new(dialect);
        for at in 0..bytes.len() {
            if let Ok((_, len)) = decode(&bytes[at..], &mut ctx) {
                prop_assert!(len >= 1 && len <= bytes.len() - at);
            }
        }
    }
    let mut out = Vec::new();
    perf_dump::dump(bytes, &mut out).unwrap();
    // A header and at most a line a byte.
    prop_assert!(out.iter().filter(|&&b| b == b'\n').count() <= bytes.len() + 1);
    for args in [
        &[][..],
        &["--no-sync", "--lastip", "--raw"][..],
        &[
            "--no-sync",
            "--time",
            "--time-delta",
            "--mtc-freq",
            "3",
            "--cpuid-0x15.eax",
            "1",
            "--cpuid-0x15.ebx",
            "3",
            "--nom-freq",
            "2",
        ][..],
        &[
            "--no-sync",
            "--tcal",
            "--cpu",
            "6/142",
            "--mtc-freq",
            "9",
            "--cpuid-0x15.eax",
            "1",
            "--cpuid-0x15.ebx",
            "4",
        ][..],
        &[
            "--no-sync",
            "--cpu",
            "6/85",
            "--exec-mode",
            "--no-wall-clock",
            "--time",
        ][..],
    ] {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.push("unused".into());
        let (o, _) = ptdump::parse_args(&a).unwrap();
        let mut out = Vec::new();
        ptdump::dump(bytes, &o, &mut out).unwrap();
        // A packet line a byte at most, and per resync (each moves the sync point on by a
        // byte at least) one diagnostic and a handful of time diagnostics.
        prop_assert!(out.iter().filter(|&&b| b == b'\n').count() <= 8 * (bytes.len() + 1));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_break_a_decoder_or_a_dump(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&bytes)?;
    }

    #[test]
    fn packet_like_bytes_never_break_a_decoder_or_a_dump(bytes in tracey()) {
        check(&bytes)?;
    }
}

/// A well-formed record of a type the reader decodes (or of another type), its body's
/// fields random, with `words` 8-byte sample fields.
fn record(words: usize) -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![4 => 1u32..=7, 4 => 10u32..=15, 1 => 8u32..=9, 1 => 16u32..100];
    (
        kind,
        any::<u16>(),
        prop::collection::vec(any::<u8>(), 72),
        "[a-z./]{0,20}",
        prop::collection::vec(0u64..16, words),
    )
        .prop_map(|(kind, misc, fixed, name, sample)| {
            let (len, string) = match kind {
                1 => (32, true),
                3 => (8, true),
                10 => (64, true),
                2 => (16, false),
                4..=7 | 11 => (24, false),
                12 | 13 | 15 => (8, false),
                _ => (0, false),
            };
            let mut body = fixed[..len].to_vec();
            if string {
                body.extend(name.as_bytes());
                body.push(0);
                body.resize(body.len().next_multiple_of(8), 0);
            }
            for w in &sample {
                body.extend(w.to_le_bytes());
            }
            let mut r = kind.to_le_bytes().to_vec();
            r.extend(misc.to_le_bytes());
            r.extend(((8 + body.len()) as u16).to_le_bytes());
            r.extend(body);
            r
        })
}

/// Bytes biased towards perf_event records: mostly whole records with as many sample fields
/// as one of [`pevent_configs`] asks for (0, 1, 2 or 6), some headers of the types the reader
/// decodes with sizes near the real ones, strings with and without their NUL, and 8-byte
/// fields.
fn sidebandy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(0usize), Just(1), Just(2), Just(6), 0usize..8].prop_flat_map(|words| {
        let header = (0u32..17, any::<u16>(), 0u16..120).prop_map(|(t, misc, size)| {
            let mut h = t.to_le_bytes().to_vec();
            h.extend(misc.to_le_bytes());
            h.extend(size.to_le_bytes());
            h
        });
        let piece = prop_oneof![
            60 => record(words),
            1 => header,
            1 => Just(b"a.out\0\0\0".to_vec()),
            1 => Just(b"sh".to_vec()),
            1 => Just(vec![0; 8]),
            1 => any::<u64>().prop_map(|v| v.to_le_bytes().to_vec()),
            1 => any::<u8>().prop_map(|b| vec![b]),
        ];
        prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
    })
}

/// The sample configurations the sideband checks read with: none, libipt's tests' two, all
/// fields, per-identifier types (one of them bad), and time conversions that overflow or
/// cannot be done.
fn pevent_configs() -> Vec<pevent::Config> {
    use pevent::sample::*;
    let all = TID | TIME | ID | STREAM_ID | CPU | IDENTIFIER;
    vec![
        pevent::Config::default(),
        pevent::Config {
            sample_type: TIME,
            ..Default::default()
        },
        pevent::Config {
            sample_type: all,
            time_zero: 5,
            time_shift: 63,
            time_mult: 3,
            tsc_offset: 7,
            ..Default::default()
        },
        pevent::Config {
            sample_type: TID | TIME,
            sample_types: vec![(0, all), (1, TIME), (2, TIME | IDENTIFIER)],
            time_mult: 0,
            tsc_offset: (-3i64) as u64,
            ..Default::default()
        },
    ]
}

fn check_sideband(sb: &[u8], trace: &[u8]) -> Result<(), TestCaseError> {
    for cfg in pevent_configs() {
        let mut end = 0;
        let mut records = 0;
        for r in pevent::Reader::new(sb, &cfg) {
            match r {
                Ok(r) => {
                    // Back to back, each at least a header, none past the end.
                    prop_assert_eq!(r.offset, end);
                    prop_assert!(r.size >= 8 && r.offset + r.size <= sb.len());
                    end = r.offset + r.size;
                    records += 1;
                }
                Err(e) => prop_assert!(e.offset == end && e.offset + 8 <= sb.len()),
            }
        }
        prop_assert!(records <= sb.len() / 8);
        for show in [
            SidebandFlags {
                compact: true,
                offset: true,
                time: true,
                ..Default::default()
            },
            SidebandFlags {
                verbose: true,
                filename: true,
                offset: true,
                time: true,
                ..Default::default()
            },
        ] {
            // The same file twice, to interleave two streams.
            let file = PeventFile {
                path: "sb".into(),
                config: cfg.clone(),
                bytes: sb.to_vec(),
                primary: true,
                process: Default::default(),
            };
            let o = ptdump::Options {
                sideband: SidebandOptions {
                    show,
                    warn: false,
                    files: vec![file.clone(), file],
                },
                ..Default::default()
            };
            let mut out = Vec::new();
            ptdump::dump(trace, &o, &mut out).unwrap();
            // Each file's records (a record per 8 bytes at most, 20 lines each in the verbose
            // form, and a string's newlines), and one error line; the trace's lines as in
            // `check`.
            let lines = out.iter().filter(|&&b| b == b'\n').count();
            prop_assert!(lines <= 2 * (20 * sb.len() / 8 + sb.len() + 1) + 8 * (trace.len() + 1));
        }
        check_ptxed_sideband(sb, trace, &cfg)?;
    }
    Ok(())
}

/// ptxed with the file as primary and as secondary sideband: as many lines as without it,
/// and for each record at most its own lines, a problem and a context switch, and a line
/// for each file's end.
fn check_ptxed_sideband(
    sb: &[u8],
    trace: &[u8],
    cfg: &pevent::Config,
) -> Result<(), TestCaseError> {
    let run = |files: Vec<PeventFile>| {
        let setup = ptxed::Setup {
            options: ptxed::Options::default(),
            image: Default::default(),
            trace: trace.to_vec(),
            sideband: ptxed_sideband::Sideband {
                options: SidebandOptions {
                    show: SidebandFlags {
                        compact: true,
                        offset: true,
                        ..Default::default()
                    },
                    warn: true,
                    files,
                },
                switch: true,
                kernel: Default::default(),
            },
        };
        let mut out = Vec::new();
        ptxed::run(&setup, &mut out).unwrap();
        out.iter().filter(|&&b| b == b'\n').count()
    };
    let file = |primary| PeventFile {
        path: "sb".into(),
        config: cfg.clone(),
        bytes: sb.to_vec(),
        primary,
        // No mapped file can be found, so the code stays what it is without sideband (none).
        process: ProcessConfig {
            sysroot: Some("/nonexistent/".into()),
            kernel_start: 0xffff_8000_0000_0000,
            ..Default::default()
        },
    };
    let without = run(Vec::new());
    let with = run(vec![file(true), file(false)]);
    prop_assert!(with <= without + 2 * (3 * sb.len() / 8 + sb.len() + 1));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_as_sideband_give_records_or_errors(
        sb in prop::collection::vec(any::<u8>(), 0..1024),
        trace in tracey(),
    ) {
        check_sideband(&sb, &trace)?;
    }

    #[test]
    fn record_like_bytes_as_sideband_give_records_or_errors(
        sb in sidebandy(),
        trace in tracey(),
    ) {
        check_sideband(&sb, &trace)?;
    }
}
