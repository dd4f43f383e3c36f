//! Damaged files: real fixture files cut short or with bytes flipped (a
//! seeded loop, so every run checks the same cases). The reader must never
//! panic, must stop, must hand out every record that lies before the
//! damage exactly as in the intact file, and must end with an error that
//! names a file offset whenever it stops early.

mod common;

use common::*;
use perfaux_perfdata::{PerfDataReader, ReaderOptions};
use perfaux_testutil::CountingAlloc;
use std::io::Cursor;

// Counts what each test thread allocates, for the tests that promise to
// refuse a lying size without allocating it.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// xorshift64*: a fixed sequence without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// (file offset, decompressed offset, type, bytes + payload) of each record.
type Rec = (u64, Option<u64>, u32, Vec<u8>);

/// Reads everything; `Err` if the file did not even open.
fn read(
    bytes: &[u8],
) -> Result<(Vec<Rec>, Option<perfaux_perfdata::Error>), perfaux_perfdata::Error> {
    let opts = ReaderOptions {
        max_payload: 16 << 20,
        max_feature_size: 16 << 20,
    };
    let mut r = PerfDataReader::with_options(Cursor::new(bytes), opts)?;
    let mut recs = Vec::new();
    let err = loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                let _ = rec.parse();
                let _ = rec.user_record();
                let mut b = rec.bytes.to_vec();
                b.extend_from_slice(rec.payload);
                recs.push((
                    rec.location.file_offset,
                    rec.location.decompressed_offset,
                    rec.header.type_,
                    b,
                ));
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    // Finished means finished.
    assert!(matches!(r.next_record(), Ok(None)));
    Ok((recs, err))
}

const FILES: [&str; 7] = [
    "perf_data/sleep.data",
    "intel_pt/perf.data.intel_pt-4.14",
    "perf_data/sleep.compressed.data",
    "perf_data/sleep.compressed.pipe.data",
    "perf_data/fibo.compressed2.pipe.data",
    "intel_pt/perf.data.piped.intel_pt-4.14",
    "simpleperf_etm/perf_etm.data",
];

/// The last byte a record occupies in the file (for a record from a
/// compressed chunk, the chunk holding its start is not enough: it may end
/// in a later chunk, so the bound is the next chunk's start).
fn ends_before(recs: &[Rec], i: usize, cut: u64) -> bool {
    let (off, dec, _, b) = &recs[i];
    match dec {
        None => off + b.len() as u64 <= cut,
        // Inside compressed data: safe if the next outer record starts before the cut.
        Some(_) => recs[i + 1..]
            .iter()
            .find(|r| r.1.is_none())
            .is_some_and(|r| r.0 < cut && r.0 > *off),
    }
}

#[test]
fn truncated_files_deliver_every_record_before_the_cut() {
    let mut rng = Rng(0x5eed_0001);
    for f in FILES {
        let full = std::fs::read(fixture(f)).unwrap();
        let (base, err) = read(&full).unwrap();
        assert!(err.is_none(), "{f} intact: {err:?}");
        let mut opened = 0;
        for _ in 0..30 {
            let cut = rng.below(full.len());
            let Ok((got, err)) = read(&full[..cut]) else {
                // Only the header and attrs are needed to open a file.
                continue;
            };
            opened += 1;
            let whole = (0..base.len())
                .take_while(|&i| ends_before(&base, i, cut as u64))
                .count();
            assert!(
                got.len() >= whole,
                "{f} cut at {cut}: {} records, {whole} lie before the cut",
                got.len()
            );
            assert_eq!(&got[..whole], &base[..whole], "{f} cut at {cut}");
            if got.len() < base.len() {
                // Stopping early is an error, unless a pipe ends on a record boundary.
                let clean_end = got
                    .last()
                    .is_some_and(|r| r.1.is_none() && r.0 + r.3.len() as u64 == cut as u64);
                if !clean_end {
                    let e = err.unwrap_or_else(|| {
                        panic!(
                            "{f} cut at {cut}: stopped after {} records without an error",
                            got.len()
                        )
                    });
                    assert!(e.offset().is_some(), "{f} cut at {cut}: {e}");
                }
            }
        }
        // Cuts land in the data far more often than in the header and attrs.
        assert!(opened >= 20, "{f}: only {opened} of 30 cut files opened");
    }
}

#[test]
fn flipped_bytes_never_panic_and_keep_the_records_before_them() {
    let mut rng = Rng(0x5eed_0002);
    for f in FILES {
        let full = std::fs::read(fixture(f)).unwrap();
        let (base, _) = read(&full).unwrap();
        for round in 0..60 {
            let mut bad = full.clone();
            let flips = 1 + rng.below(4);
            let mut first = usize::MAX;
            for _ in 0..flips {
                let at = rng.below(bad.len());
                // Size fields and small counts are where damage hurts: bias to them.
                bad[at] = match round % 3 {
                    0 => bad[at] ^ (1 << rng.below(8)),
                    1 => 0xff,
                    _ => rng.next() as u8,
                };
                first = first.min(at);
            }
            let Ok((got, err)) = read(&bad) else { continue };
            if let Some(e) = &err {
                // The error says where: at or after the start of the record
                // (or compressed chunk) that holds the first flipped byte,
                // never at an intact record before it.
                let holder = base
                    .iter()
                    .map(|r| r.0)
                    .filter(|&o| o <= first as u64)
                    .max()
                    .unwrap_or(0);
                let at = e
                    .offset()
                    .unwrap_or_else(|| panic!("{f}: error without an offset: {e}"));
                assert!(
                    at >= holder,
                    "{f} flipped from {first}: error placed at {at:#x}, before the damaged record at {holder:#x}: {e}"
                );
            }
            // Records wholly before the first damaged byte, and after the
            // metadata (damage to attrs changes how every record parses),
            // are the intact file's.
            let data_start = base.first().map_or(u64::MAX, |r| r.0);
            if (first as u64) > data_start {
                let whole = (0..base.len())
                    .take_while(|&i| ends_before(&base, i, first as u64))
                    .count();
                let n = whole.min(got.len());
                assert_eq!(&got[..n], &base[..n], "{f} flipped from {first}");
                if got.len() < whole {
                    panic!(
                        "{f} flipped at {first}: only {} of {whole} undamaged records",
                        got.len()
                    );
                }
            }
        }
    }
}

#[test]
fn lying_size_fields_are_refused_without_allocating() {
    // An AUXTRACE record claiming an 8 EiB payload, in a pipe: refused by
    // the payload limit before any buffer is sized from it.
    let mut pipe =
        perfaux_perfdata::header::pipe_header_bytes(perfaux_abi::Endianness::Little).to_vec();
    let rec = perfaux_abi::user::AuxtraceRecord {
        size: 1 << 63,
        ..Default::default()
    };
    rec.write(&mut pipe, perfaux_abi::Endianness::Little);
    let level = CountingAlloc::reset_peak();
    let (got, err) = read(&pipe).unwrap();
    let peak = CountingAlloc::peak_since(level);
    assert!(
        peak < 1 << 20,
        "reading a 64-byte lie allocated {peak} bytes"
    );
    assert!(got.is_empty());
    let e = err.unwrap();
    assert_eq!(e.offset(), Some(16), "{e}");
    // In a file, the payload is checked against the data section.
    let mut file = std::fs::read(fixture("intel_pt/perf.data.intel_pt-4.14")).unwrap();
    let (base, _) = read(&file).unwrap();
    let (off, ..) = base
        .iter()
        .find(|r| r.2 == perfaux_abi::consts::PERF_RECORD_AUXTRACE)
        .unwrap();
    let at = *off as usize + 8;
    file[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let level = CountingAlloc::reset_peak();
    let (got, err) = read(&file).unwrap();
    let peak = CountingAlloc::peak_since(level);
    // What it holds is the records read (the test keeps copies, about the
    // file's size) and reader buffers, never the claimed terabyte.
    assert!(peak < 4 * file.len() + (1 << 20), "allocated {peak} bytes");
    let e = err.unwrap();
    assert_eq!(e.offset(), Some(*off), "{e}");
    assert!(e.to_string().contains("payload"), "{e}");
    assert_eq!(got.len(), base.iter().position(|r| r.0 == *off).unwrap());
    // A header.size below 8 would never advance: an error, not a loop.
    let mut file = std::fs::read(fixture("perf_data/sleep.data")).unwrap();
    let (base, _) = read(&file).unwrap();
    let second = base[1].0 as usize;
    file[second + 6..second + 8].copy_from_slice(&4u16.to_le_bytes());
    let (got, err) = read(&file).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(err.unwrap().offset(), Some(second as u64));
}

#[test]
fn compressed_chunk_claiming_a_huge_record_is_refused_without_inflating_it() {
    // A real COMPRESSED2 pipe file, its first chunk replaced by a tiny one
    // whose zstd stream holds an AUXTRACE header claiming 900 MiB: a few
    // bytes of zstd could inflate that far (zeros compress ~40000-fold).
    let full = std::fs::read(fixture("perf_data/sleep.compressed2.pipe.data")).unwrap();
    let (base, _) = read(&full).unwrap();
    let (chunk, ..) = base
        .iter()
        .find(|r| r.2 == perfaux_abi::consts::PERF_RECORD_COMPRESSED2)
        .unwrap();
    let rec = perfaux_abi::user::AuxtraceRecord {
        size: 900 << 20,
        ..Default::default()
    };
    let mut inner = Vec::new();
    rec.write(&mut inner, perfaux_abi::Endianness::Little);
    // 24 MiB of the claimed payload really there: a reader that inflates
    // toward the claim holds it all.
    inner.resize(inner.len() + (24 << 20), 0);
    let z = zstd::bulk::compress(&inner, 3).unwrap();
    let padded = z.len().div_ceil(8) * 8;
    // perf_record_compressed2: header, data_size, data padded to 8.
    let mut bad = full[..*chunk as usize].to_vec();
    bad.extend_from_slice(&perfaux_abi::consts::PERF_RECORD_COMPRESSED2.to_le_bytes());
    bad.extend_from_slice(&0u16.to_le_bytes());
    bad.extend_from_slice(&((16 + padded) as u16).to_le_bytes());
    bad.extend_from_slice(&(z.len() as u64).to_le_bytes());
    bad.extend_from_slice(&z);
    bad.resize(*chunk as usize + 16 + padded, 0);
    // The CLI's limit (ReaderOptions::default, 1 GiB) would allow 900 MiB
    // outside a compressed chunk.
    let level = CountingAlloc::reset_peak();
    let mut r = PerfDataReader::new(Cursor::new(&bad[..])).unwrap();
    let mut n = 0;
    let err = loop {
        match r.next_record() {
            Ok(Some(_)) => n += 1,
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let peak = CountingAlloc::peak_since(level);
    assert!(peak < 8 << 20, "reading it allocated {peak} bytes");
    let e = err.expect("the lying record is an error");
    assert!(e.to_string().contains("limit"), "{e}");
    assert_eq!(e.offset(), Some(*chunk), "{e}");
    // Every record before the chunk, and the chunk record itself.
    assert_eq!(n, base.iter().position(|r| r.0 == *chunk).unwrap() + 1);
}
