//! PERF_RECORD_AUX: `{ hdr; u64 aux_offset; u64 aux_size; u64 flags; sample_id }`,
//! emitted by `perf_aux_output_end()` (flags: `PERF_AUX_FLAG_*`).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_AUX;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuxRecord {
    pub misc: u16,
    pub aux_offset: u64,
    pub aux_size: u64,
    pub flags: u64,
    pub sample_id: SampleId,
}

impl AuxRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_AUX, body, info, e)?;
        Ok(Self {
            misc,
            aux_offset: r.u64("aux_offset")?,
            aux_size: r.u64("aux_size")?,
            flags: r.u64("flags")?,
            sample_id,
        })
    }
}

impl EncodeRecord for AuxRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_AUX
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        24 + info.sample_id_len(PERF_RECORD_AUX)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.aux_offset));
        sink.put(&e.u64_bytes(self.aux_size));
        sink.put(&e.u64_bytes(self.flags));
        write_trailer(PERF_RECORD_AUX, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{PERF_AUX_FLAG_OVERWRITE, PERF_AUX_FLAG_TRUNCATED};
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let flags = PERF_AUX_FLAG_OVERWRITE | PERF_AUX_FLAG_TRUNCATED;
        let rec = AuxRecord {
            misc: 0,
            aux_offset: 0x10000,
            aux_size: 0x2000,
            flags,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0x10000)
            .u64(0x2000)
            .u64(3)
            .sid()
            .with_header(PERF_RECORD_AUX, 0);
        assert_eq!(want.len(), 48);
        check_layout(&Record::Aux(rec), &sid_info(), &want);
    }
}
