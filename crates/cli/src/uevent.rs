//! How a uevent travels in a perf.data that perf 6.1 reads: as a sample of
//! a software event with config `PERF_COUNT_SW_BPF_OUTPUT`, named
//! [`UEVENT_EVENT_NAME`], whose RAW data is the seed's uevent body
//! (seed 002: `{ u32 type; u32 size; char data[size]; padding to 8 }`).
//!
//! perf 6.1 refuses the seed's own record type ("failed to process type",
//! docs/PERF-COMPAT.md) but prints BPF output samples with a
//! hex dump of RAW, so the body goes there unchanged and perfaux's
//! reader rebuilds the exact PERF_RECORD_UEVENT from it.

use perfaux_abi::raw::RawData;
use perfaux_abi::records::EncodeRecord;

/// The EVENT_DESC name of the uevent attr.
pub const UEVENT_EVENT_NAME: &str = "perfaux:uevent";

/// The BPF-output sample that carries the uevent `u` in perf.data (`file`: the uevent attr as
/// written).
pub fn uevent_sample(
    u: &perfaux_abi::records::UeventRecord<'_>,
    file: &perfaux_abi::parse_info::RecordParseInfo,
    endian: perfaux_abi::Endianness,
) -> Result<Vec<u8>, String> {
    let raw = uevent_raw(u.type_, &u.data.to_vec());
    let sid = u.sample_id;
    perfaux_abi::sample::SampleRecord {
        misc: perfaux_abi::consts::PERF_RECORD_MISC_USER,
        identifier: sid.identifier,
        ip: Some(0),
        tid: sid.tid,
        time: sid.time,
        cpu: sid.cpu,
        period: Some(1),
        raw: Some(RawData::new(&raw, &[])),
        ..Default::default()
    }
    .to_vec(file, endian)
    .map_err(|e| format!("converting a uevent: {e}"))
}

/// The RAW bytes for a uevent: the seed's body, padded to 8.
pub fn uevent_raw(type_: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + data.len().next_multiple_of(8));
    v.extend_from_slice(&type_.to_le_bytes());
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    v.resize(8 + data.len().next_multiple_of(8), 0);
    v
}

/// The uevent type and payload in a sample's RAW data, or `None` if the
/// bytes are too short for the size they state.
pub fn uevent_from_raw(raw: &RawData<'_>) -> Option<(u32, Vec<u8>)> {
    let v = raw.to_vec();
    let ty = u32::from_le_bytes(v.get(0..4)?.try_into().ok()?);
    let size = u32::from_le_bytes(v.get(4..8)?.try_into().ok()?) as usize;
    let data = v.get(8..8usize.checked_add(size)?)?.to_vec();
    Some((ty, data))
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
}
