//! Helpers shared by the integration tests: records with a writer id and
//! a sequence number in their body, so a test can tell each one apart.

#![allow(dead_code)]

use perfaux_abi::{Endianness, PerfEventHeader};

/// A record type no kernel record uses in these tests' streams.
pub const TEST_TYPE: u32 = perfaux_abi::consts::PERF_RECORD_SAMPLE;

/// A `size`-byte record (size >= 24, multiple of 8): header, writer, seq,
/// then bytes derived from seq.
pub fn record(writer: u64, seq: u64, size: usize) -> Vec<u8> {
    assert!(size >= 24 && size.is_multiple_of(8));
    let mut r = Vec::with_capacity(size);
    let h = PerfEventHeader::new(TEST_TYPE, 0, size as u16);
    r.extend_from_slice(&h.to_bytes(Endianness::NATIVE));
    r.extend_from_slice(&writer.to_ne_bytes());
    r.extend_from_slice(&seq.to_ne_bytes());
    while r.len() < size {
        r.push((seq as u8).wrapping_add(r.len() as u8));
    }
    r
}

/// (writer, seq) of a test record, checking its filler bytes.
pub fn parse(bytes: &[u8]) -> (u64, u64) {
    let writer = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    let seq = u64::from_ne_bytes(bytes[16..24].try_into().unwrap());
    for (i, &b) in bytes.iter().enumerate().skip(24) {
        assert_eq!(
            b,
            (seq as u8).wrapping_add(i as u8),
            "filler byte {i} of record {writer}/{seq}"
        );
    }
    (writer, seq)
}

/// The `lost` field of a PERF_RECORD_LOST.
pub fn lost_count(bytes: &[u8]) -> u64 {
    u64::from_ne_bytes(bytes[16..24].try_into().unwrap())
}
