//! PERF_RECORD_ITRACE_START: `{ hdr; u32 pid, tid; sample_id }`, logged when
//! an instruction-trace event is scheduled in, until the driver says it started.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_ITRACE_START;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItraceStartRecord {
    pub misc: u16,
    pub pid: u32,
    pub tid: u32,
    pub sample_id: SampleId,
}

impl ItraceStartRecord {
    pub fn parse(
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_ITRACE_START, body, info, e)?;
        Ok(Self {
            misc,
            pid: r.u32("pid")?,
            tid: r.u32("tid")?,
            sample_id,
        })
    }
}

impl EncodeRecord for ItraceStartRecord {
    fn record_type(&self) -> u32 {
        PERF_RECORD_ITRACE_START
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + info.sample_id_len(PERF_RECORD_ITRACE_START)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
        write_trailer(PERF_RECORD_ITRACE_START, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = ItraceStartRecord {
            misc: 0,
            pid: 1234,
            tid: 1235,
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(1234)
            .u32(1235)
            .sid()
            .with_header(PERF_RECORD_ITRACE_START, 0);
        check_layout(&Record::ItraceStart(rec), &sid_info(), &want);
    }
}
