//! Helpers for the record layout tests: a little-endian byte builder for
//! the expected bytes, and a round trip that parses at every split.

use super::{EncodeRecord, Record};
use crate::consts::{PERF_SAMPLE_TID, PERF_SAMPLE_TIME};
use crate::endian::Endianness;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::{PidTid, SampleId};

/// Expected bytes, built field by field in little-endian.
#[derive(Default)]
pub(crate) struct Le(pub Vec<u8>);

impl Le {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn zeros(mut self, n: usize) -> Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    /// The header `{type, misc, size}` in front of the body built so far.
    pub fn with_header(self, ty: u32, misc: u16) -> Vec<u8> {
        let size = (self.0.len() + 8) as u16;
        let mut v = Le::new().u32(ty).u16(misc).u16(size).0;
        v.extend_from_slice(&self.0);
        v
    }
    /// Appends the trailer of [`sid`] under [`sid_info`].
    pub fn sid(self) -> Self {
        self.u32(101).u32(102).u64(103)
    }
}

/// sample_id_all with TID|TIME: a 16-byte trailer.
pub(crate) fn sid_info() -> RecordParseInfo {
    RecordParseInfo {
        sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
        sample_id_all: true,
        ..Default::default()
    }
}

/// The trailer that [`Le::sid`] encodes.
pub(crate) fn sid() -> SampleId {
    SampleId {
        tid: Some(PidTid { pid: 101, tid: 102 }),
        time: Some(103),
        ..Default::default()
    }
}

/// Writes `rec` in both byte orders, checks `encoded_len` and the header,
/// and parses it back from every split of the bytes. Returns the
/// little-endian bytes.
pub(crate) fn round_trip(rec: &Record<'_>, info: &RecordParseInfo) -> Vec<u8> {
    let mut le = Vec::new();
    for e in [Endianness::Little, Endianness::Big] {
        let bytes = rec.to_vec(info, e).expect("encodes");
        assert_eq!(bytes.len(), rec.encoded_len(info), "encoded_len of {rec:?}");
        for k in 0..=bytes.len() {
            let data = RawData::new(&bytes[..k], &bytes[k..]);
            let (back, n) = Record::parse_record(data, info, e)
                .unwrap_or_else(|err| panic!("{err} parsing {rec:?} split at {k} ({e:?})"));
            assert_eq!(n, bytes.len());
            assert_eq!(&back, rec, "split at {k} ({e:?})");
        }
        if e == Endianness::Little {
            le = bytes;
        }
    }
    le
}

/// `round_trip`, and the little-endian bytes equal `want`.
pub(crate) fn check_layout(rec: &Record<'_>, info: &RecordParseInfo, want: &[u8]) {
    let got = round_trip(rec, info);
    assert_eq!(got, want, "bytes of {rec:?}");
}
