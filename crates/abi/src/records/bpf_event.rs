//! PERF_RECORD_BPF_EVENT: `{ hdr; u16 type; u16 flags; u32 id; u8 tag[8]; sample_id }`
//! (type: PERF_BPF_EVENT_PROG_LOAD 1, PROG_UNLOAD 2).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_BPF_EVENT;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

/// `BPF_TAG_SIZE`.
pub const BPF_TAG_SIZE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BpfEventRecord {
    pub misc: u16,
    pub type_: u16,
    pub flags: u16,
    pub id: u32,
    pub tag: [u8; BPF_TAG_SIZE],
    pub sample_id: SampleId,
}

impl BpfEventRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_BPF_EVENT, body, info, e)?;
        Ok(Self {
            misc,
            type_: r.u16("type")?,
            flags: r.u16("flags")?,
            id: r.u32("id")?,
            tag: r.byte_array("tag")?,
            sample_id,
        })
    }
}

impl EncodeRecord for BpfEventRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_BPF_EVENT
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        16 + info.sample_id_len(PERF_RECORD_BPF_EVENT)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u16_bytes(self.type_));
        sink.put(&e.u16_bytes(self.flags));
        sink.put(&e.u32_bytes(self.id));
        sink.put(&self.tag);
        write_trailer(PERF_RECORD_BPF_EVENT, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let tag = [1, 2, 3, 4, 5, 6, 7, 8];
        let rec = BpfEventRecord {
            misc: 0,
            type_: 1,
            flags: 0,
            id: 42,
            tag,
            sample_id: sid(),
        };
        let want = Le::new()
            .u16(1)
            .u16(0)
            .u32(42)
            .bytes(&tag)
            .sid()
            .with_header(PERF_RECORD_BPF_EVENT, 0);
        check_layout(&Record::BpfEvent(rec), &sid_info(), &want);
    }
}
