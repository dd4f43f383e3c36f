//! PERF_RECORD_LOST: `{ hdr; u64 id; u64 lost; sample_id }`: records the
//! data area had no room for, emitted once room returns.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_LOST;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LostRecord {
    pub misc: u16,
    pub id: u64,
    pub lost: u64,
    pub sample_id: SampleId,
}

impl LostRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_LOST, body, info, e)?;
        Ok(Self {
            misc,
            id: r.u64("id")?,
            lost: r.u64("lost")?,
            sample_id,
        })
    }
}

impl EncodeRecord for LostRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_LOST
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        16 + info.sample_id_len(PERF_RECORD_LOST)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.id));
        sink.put(&e.u64_bytes(self.lost));
        write_trailer(PERF_RECORD_LOST, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = LostRecord {
            misc: 0,
            id: 7,
            lost: 12,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(7)
            .u64(12)
            .sid()
            .with_header(PERF_RECORD_LOST, 0);
        check_layout(&Record::Lost(rec), &sid_info(), &want);
        let bare = LostRecord {
            sample_id: SampleId::default(),
            ..rec
        };
        let want = Le::new().u64(7).u64(12).with_header(PERF_RECORD_LOST, 0);
        check_layout(&Record::Lost(bare), &RecordParseInfo::default(), &want);
    }
}
