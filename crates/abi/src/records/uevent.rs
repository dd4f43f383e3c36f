//! perfaux's PERF_RECORD_UEVENT (seed 002, "perf: Userspace event"):
//! `{ hdr; u32 type; u32 size; char data[size]; padding to 8; sample_id }`.
//!
//! The seed numbered it 11, which mainline gave to PERF_RECORD_AUX; perfaux
//! uses `consts::ext::PERF_RECORD_UEVENT`. `type` is the injector's own tag,
//! passed through untouched. The trailer follows `sample_id_all` as for
//! kernel records (`perf_event__output_id_sample()` in the seed).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::ext::PERF_RECORD_UEVENT;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// perfaux's PERF_RECORD_UEVENT: an event user space injected (seed 002).
pub struct UeventRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The injector's tag.
    pub type_: u32,
    /// `size` bytes; the writer pads them to 8 (`-size & 7` zeros).
    pub data: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> UeventRecord<'a> {
    /// Decodes a PERF_RECORD_UEVENT body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_UEVENT, body, info, e)?;
        let type_ = r.u32("type")?;
        let size = r.u32("size")?;
        Ok(Self {
            misc,
            type_,
            data: r.bytes(size as usize, "data")?,
            sample_id,
        })
    }
}

impl EncodeRecord for UeventRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_UEVENT
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + self.data.len().next_multiple_of(8) + info.sample_id_len(PERF_RECORD_UEVENT)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.type_));
        sink.put(&e.u32_bytes(self.data.len() as u32));
        self.data.write_to(sink);
        sink.put_zeros(self.data.len().next_multiple_of(8) - self.data.len());
        write_trailer(PERF_RECORD_UEVENT, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout_from_the_seed_example() {
        // Seed 002: prctl(PR_TASK_PERF_UEVENT, 0, 8, "Message", 0).
        let rec = UeventRecord {
            misc: 0,
            type_: 0,
            data: RawData::Single(b"Message\0"),
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(0)
            .u32(8)
            .bytes(b"Message\0")
            .sid()
            .with_header(PERF_RECORD_UEVENT, 0);
        check_layout(&Record::Uevent(rec), &sid_info(), &want);
        // 3 bytes: 5 bytes of padding; size stays 3.
        let rec = UeventRecord {
            misc: 0,
            type_: 7,
            data: RawData::Single(b"abc"),
            sample_id: SampleId::default(),
        };
        let want = Le::new()
            .u32(7)
            .u32(3)
            .bytes(b"abc")
            .zeros(5)
            .with_header(PERF_RECORD_UEVENT, 0);
        check_layout(&Record::Uevent(rec), &RecordParseInfo::default(), &want);
    }
}
