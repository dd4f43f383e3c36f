//! PERF_RECORD_AUX_OUTPUT_HW_ID: `{ hdr; u64 hw_id; sample_id }`: the
//! hardware id that AUX output of this event is tagged with.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_AUX_OUTPUT_HW_ID;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuxOutputHwIdRecord {
    pub misc: u16,
    pub hw_id: u64,
    pub sample_id: SampleId,
}

impl AuxOutputHwIdRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_AUX_OUTPUT_HW_ID, body, info, e)?;
        Ok(Self {
            misc,
            hw_id: r.u64("hw_id")?,
            sample_id,
        })
    }
}

impl EncodeRecord for AuxOutputHwIdRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_AUX_OUTPUT_HW_ID
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + info.sample_id_len(PERF_RECORD_AUX_OUTPUT_HW_ID)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.hw_id));
        write_trailer(PERF_RECORD_AUX_OUTPUT_HW_ID, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = AuxOutputHwIdRecord {
            misc: 0,
            hw_id: 0x55,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0x55)
            .sid()
            .with_header(PERF_RECORD_AUX_OUTPUT_HW_ID, 0);
        check_layout(&Record::AuxOutputHwId(rec), &sid_info(), &want);
    }
}
