//! PERF_RECORD_LOST_SAMPLES: `{ hdr; u64 lost; sample_id }`: samples the PMU
//! dropped (`perf_log_lost_samples()`).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_LOST_SAMPLES;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LostSamplesRecord {
    pub misc: u16,
    pub lost: u64,
    pub sample_id: SampleId,
}

impl LostSamplesRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_LOST_SAMPLES, body, info, e)?;
        Ok(Self {
            misc,
            lost: r.u64("lost")?,
            sample_id,
        })
    }
}

impl EncodeRecord for LostSamplesRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_LOST_SAMPLES
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + info.sample_id_len(PERF_RECORD_LOST_SAMPLES)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.lost));
        write_trailer(PERF_RECORD_LOST_SAMPLES, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = LostSamplesRecord {
            misc: 0,
            lost: 99,
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(99)
            .sid()
            .with_header(PERF_RECORD_LOST_SAMPLES, 0);
        check_layout(&Record::LostSamples(rec), &sid_info(), &want);
    }
}
