//! How a uevent travels in a perf.data that perf 6.1 reads: as a sample of
//! a software event with config `PERF_COUNT_SW_BPF_OUTPUT`, named
//! [`UEVENT_EVENT_NAME`], whose RAW data is the seed's uevent body
//! (seed 002: `{ u32 type; u32 size; char data[size]; padding to 8 }`).
//!
//! perf 6.1 refuses the seed's own record type ("failed to process type",
//! docs/PERF-COMPAT.md) but prints BPF output samples with a hex dump of
//! RAW, so the body goes there unchanged and perfaux's reader rebuilds the
//! exact PERF_RECORD_UEVENT from it. The body is encoded by perfaux-abi's
//! [`UeventRecord`] (one encoder of the layout).

use perfaux_abi::Endianness;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::PERF_RECORD_MISC_USER;
use perfaux_abi::error::EncodeError;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{EncodeRecord, UeventRecord};
use perfaux_abi::sample::SampleRecord;

/// The EVENT_DESC name of the uevent attr.
pub const UEVENT_EVENT_NAME: &str = "perfaux:uevent";

/// The RAW bytes for a uevent: the seed's body, padded to 8.
pub fn uevent_raw(type_: u32, data: &[u8]) -> Vec<u8> {
    let rec = UeventRecord {
        misc: 0,
        type_,
        data: RawData::new(data, &[]),
        sample_id: Default::default(),
    };
    // No sample_id_all: the body alone, without a trailer.
    let info = RecordParseInfo::new(&PerfEventAttr::default());
    let mut v = Vec::with_capacity(rec.body_len(&info));
    rec.write_body(&info, Endianness::Little, &mut v);
    v
}

/// The uevent type and payload in a sample's RAW data, or `None` if the
/// bytes are too short for the size they state.
pub fn uevent_from_raw(raw: &RawData<'_>) -> Option<(u32, Vec<u8>)> {
    uevent_in_raw(raw).map(|(ty, data)| (ty, data.to_vec()))
}

/// [`uevent_from_raw`] without copying: the payload is the part of `raw`
/// that holds it (the views read every uevent; copying each cost two
/// allocations).
pub fn uevent_in_raw<'a>(raw: &RawData<'a>) -> Option<(u32, RawData<'a>)> {
    let word = |b: &[u8], at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    // Contiguous bytes (nearly always) are read in place: the header copied
    // out byte by byte, and the payload cut by `RawData::slice` (its pieces
    // returned through memory), were read back with wider loads than their
    // stores, two store-forwarding stalls per uevent.
    if let Some(b) = raw.as_single() {
        let (ty, size) = (word(b, 0)?, word(b, 4)? as usize);
        let data = b.get(8..8usize.checked_add(size)?)?;
        return Some((ty, RawData::Single(data)));
    }
    let mut head = [0u8; 8];
    if raw.copy_to(&mut head) < 8 {
        return None;
    }
    let (ty, size) = (word(&head, 0)?, word(&head, 4)?);
    let data = raw.slice(8, size as usize)?;
    Some((ty, data))
}

/// The BPF-output sample that stands for the uevent `u` in a file whose
/// uevent attr is `file_info` (see [`crate::record_attrs::file_attr`]).
pub fn uevent_sample(
    u: &UeventRecord<'_>,
    file_info: &RecordParseInfo,
    e: Endianness,
) -> Result<Vec<u8>, EncodeError> {
    let raw = uevent_raw(u.type_, &u.data.to_vec());
    let sid = u.sample_id;
    SampleRecord {
        misc: PERF_RECORD_MISC_USER,
        identifier: sid.identifier,
        ip: Some(0),
        tid: sid.tid,
        time: sid.time,
        cpu: sid.cpu,
        period: Some(1),
        raw: Some(RawData::new(&raw, &[])),
        ..Default::default()
    }
    .to_vec(file_info, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_body_is_the_seed_layout_and_round_trips() {
        let raw = uevent_raw(7, b"request start");
        // seed 002: type, size, data, padding to 8.
        assert_eq!(&raw[..8], &[7, 0, 0, 0, 13, 0, 0, 0]);
        assert_eq!(raw.len(), 8 + 16);
        let back = uevent_from_raw(&RawData::new(&raw, &[])).unwrap();
        assert_eq!(back, (7, b"request start".to_vec()));
        // A stated size beyond the bytes is refused, not read past.
        let mut bad = raw.clone();
        bad[4] = 200;
        assert_eq!(uevent_from_raw(&RawData::new(&bad, &[])), None);
    }

    #[test]
    fn a_body_split_anywhere_by_the_ring_reads_the_same() {
        let raw = uevent_raw(3, b"slow path");
        for cut in 0..=raw.len() {
            let (a, b) = raw.split_at(cut);
            let (ty, data) = uevent_in_raw(&RawData::new(a, b)).unwrap();
            assert_eq!((ty, data.to_vec()), (3, b"slow path".to_vec()), "cut {cut}");
            // Too short for its header or its stated size: none.
            let short = &raw[..cut];
            assert_eq!(
                uevent_in_raw(&RawData::new(short, &[])).is_some(),
                cut >= 8 + 9,
                "cut {cut}"
            );
        }
    }
}
