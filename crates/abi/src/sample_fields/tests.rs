//! [`SampleFields::parse`] against the full parser: the same fields, or the
//! same error, for well-formed, cut-off and crafted bodies, whole or split.

use super::*;
use proptest::prelude::*;

fn info(sample_type: u64) -> RecordParseInfo {
    RecordParseInfo {
        sample_type,
        read_format: PERF_FORMAT_ID,
        regs_user_count: 2,
        ..Default::default()
    }
}

/// What the full parser gives for the fields.
fn oracle<'a>(
    body: RawData<'a>,
    info: &RecordParseInfo,
    e: Endianness,
) -> Result<SampleFields<'a>, ParseError> {
    SampleRecord::parse(0, body, info, e).map(|s| SampleFields::from(&s))
}

/// The bits a sample_type is drawn from: the located ones and some that
/// send it to the full parser.
const BITS: [u64; 15] = [
    PERF_SAMPLE_IDENTIFIER,
    PERF_SAMPLE_IP,
    PERF_SAMPLE_TID,
    PERF_SAMPLE_TIME,
    PERF_SAMPLE_ADDR,
    PERF_SAMPLE_ID,
    PERF_SAMPLE_STREAM_ID,
    PERF_SAMPLE_CPU,
    PERF_SAMPLE_PERIOD,
    PERF_SAMPLE_CALLCHAIN,
    PERF_SAMPLE_RAW,
    PERF_SAMPLE_READ,
    PERF_SAMPLE_REGS_USER,
    PERF_SAMPLE_WEIGHT,
    PERF_SAMPLE_AUX,
];

/// A body laid out for `st` (head words, then a callchain of `nr` ips and
/// RAW of `raw` bytes where selected), in byte order `e`; the test cuts it.
fn body_for(st: u64, words: &[u64], nr: u64, raw: u32, e: Endianness) -> Vec<u8> {
    let mut b = Vec::new();
    let mut w = words.iter().copied().cycle();
    for _ in 0..(st & HEAD_BITS).count_ones() {
        b.extend_from_slice(&e.u64_bytes(w.next().unwrap_or(0)));
    }
    if st & PERF_SAMPLE_CALLCHAIN != 0 {
        b.extend_from_slice(&e.u64_bytes(nr));
        for _ in 0..nr.min(8) {
            b.extend_from_slice(&e.u64_bytes(w.next().unwrap_or(0)));
        }
    }
    if st & PERF_SAMPLE_RAW != 0 {
        let size = match e {
            Endianness::Little => raw.to_le_bytes(),
            Endianness::Big => raw.to_be_bytes(),
        };
        b.extend_from_slice(&size);
        b.extend((0..raw.min(64)).map(|i| i as u8));
    }
    b
}

#[test]
fn uevent_layout_reads_its_fields_in_place() {
    let st = PERF_SAMPLE_IDENTIFIER
        | PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_RAW;
    let e = Endianness::Little;
    let mut b = Vec::new();
    for w in [7u64, 0x40_1000, 11 << 32 | 10, 123_456, 1] {
        b.extend_from_slice(&e.u64_bytes(w));
    }
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&[1, 2, 3, 4]);
    let f = SampleFields::parse(RawData::Single(&b), &info(st), e).expect("well formed");
    assert_eq!(f.ip, Some(0x40_1000));
    assert_eq!(f.tid, Some(PidTid { pid: 10, tid: 11 }));
    assert_eq!(f.time, Some(123_456));
    assert_eq!(f.period, None);
    assert_eq!(f.callchain, None);
    assert_eq!(f.raw.map(|r| r.to_vec()), Some(vec![1, 2, 3, 4]));
}

#[test]
fn a_raw_size_past_the_body_is_an_error_naming_raw_data() {
    let st = PERF_SAMPLE_TID | PERF_SAMPLE_RAW;
    let e = Endianness::Little;
    let mut b = e.u64_bytes(1).to_vec();
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    let err = SampleFields::parse(RawData::Single(&b), &info(st), e).expect_err("crafted size");
    assert_eq!(err.what, "raw data");
    assert_eq!(err.offset, 12);
    assert_eq!(Err(err), oracle(RawData::Single(&b), &info(st), e));
}

#[test]
fn a_huge_callchain_nr_is_an_error_not_an_allocation() {
    let st = PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    let e = Endianness::Big;
    let mut b = e.u64_bytes(5).to_vec();
    b.extend_from_slice(&e.u64_bytes(u64::MAX));
    let err = SampleFields::parse(RawData::Single(&b), &info(st), e).expect_err("crafted nr");
    assert_eq!(err.what, "callchain ips");
    assert_eq!(Err(err), oracle(RawData::Single(&b), &info(st), e));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn fields_are_the_full_parsers(
        mask in 0u32..(1 << BITS.len()),
        words in proptest::collection::vec(any::<u64>(), 1..6),
        nr in prop_oneof![0u64..5, any::<u64>()],
        raw in prop_oneof![0u32..40, any::<u32>()],
        cut in any::<proptest::sample::Index>(),
        split in any::<proptest::sample::Index>(),
        big in any::<bool>(),
        noise in proptest::collection::vec(any::<u8>(), 0..96),
        use_noise in any::<bool>(),
    ) {
        let st = BITS
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .fold(0, |a, (_, b)| a | b);
        let e = if big { Endianness::Big } else { Endianness::Little };
        let info = info(st);
        let full = if use_noise { noise } else { body_for(st, &words, nr, raw, e) };
        // Well-formed, cut anywhere (at its end too), or crafted bytes.
        let b = &full[..cut.index(full.len() + 1)];
        let whole = RawData::Single(b);
        prop_assert_eq!(SampleFields::parse(whole, &info, e), oracle(whole, &info, e));
        // Split as the ring splits a record that wraps.
        let at = split.index(b.len() + 1);
        let parts = RawData::new(&b[..at], &b[at..]);
        prop_assert_eq!(SampleFields::parse(parts, &info, e), oracle(parts, &info, e));
    }
}
