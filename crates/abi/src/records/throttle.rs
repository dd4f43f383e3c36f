//! PERF_RECORD_THROTTLE and PERF_RECORD_UNTHROTTLE share one layout:
//! `{ hdr; u64 time; u64 id; u64 stream_id; sample_id }`.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::{PERF_RECORD_THROTTLE, PERF_RECORD_UNTHROTTLE};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

/// Which of the two types a [`ThrottleRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThrottleKind {
    #[default]
    Throttle,
    Unthrottle,
}

impl ThrottleKind {
    pub fn record_type(self) -> u32 {
        match self {
            ThrottleKind::Throttle => PERF_RECORD_THROTTLE,
            ThrottleKind::Unthrottle => PERF_RECORD_UNTHROTTLE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThrottleRecord {
    pub kind: ThrottleKind,
    pub misc: u16,
    pub time: u64,
    pub id: u64,
    pub stream_id: u64,
    pub sample_id: SampleId,
}

impl ThrottleRecord {
    pub fn parse(
        kind: ThrottleKind,
        misc: u16,
        body: RawData<'_>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(kind.record_type(), body, info, e)?;
        Ok(Self {
            kind,
            misc,
            time: r.u64("time")?,
            id: r.u64("id")?,
            stream_id: r.u64("stream_id")?,
            sample_id,
        })
    }
}

impl EncodeRecord for ThrottleRecord {
    fn record_type(&self) -> u32 {
        self.kind.record_type()
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        24 + info.sample_id_len(self.record_type())
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.time));
        sink.put(&e.u64_bytes(self.id));
        sink.put(&e.u64_bytes(self.stream_id));
        write_trailer(self.record_type(), &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        for (kind, ty) in [
            (ThrottleKind::Throttle, PERF_RECORD_THROTTLE),
            (ThrottleKind::Unthrottle, PERF_RECORD_UNTHROTTLE),
        ] {
            let rec = ThrottleRecord {
                kind,
                misc: 0,
                time: 1,
                id: 2,
                stream_id: 3,
                sample_id: sid(),
            };
            let want = Le::new().u64(1).u64(2).u64(3).sid().with_header(ty, 0);
            check_layout(&Record::Throttle(rec), &sid_info(), &want);
        }
    }
}
