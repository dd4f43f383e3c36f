//! PERF_RECORD_READ: `{ hdr; u32 pid, tid; read_format values; sample_id }`
//! (attr.inherit_stat: a child's counts at its exit).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_READ;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::read_format::ReadFormat;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_READ: an inherited child's counter values at its exit.
pub struct ReadRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The exiting child's process id.
    pub pid: u32,
    /// The exiting child's thread id.
    pub tid: u32,
    /// The counter values, laid out by `attr.read_format`.
    pub values: ReadFormat<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> ReadRecord<'a> {
    /// Decodes a PERF_RECORD_READ body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_READ, body, info, e)?;
        Ok(Self {
            misc,
            pid: r.u32("pid")?,
            tid: r.u32("tid")?,
            values: ReadFormat::parse(&mut r, info.read_format)?,
            sample_id,
        })
    }
}

impl EncodeRecord for ReadRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_READ
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + self.values.encoded_len(info.read_format) + info.sample_id_len(PERF_RECORD_READ)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
        self.values.write(info.read_format, e, sink);
        write_trailer(PERF_RECORD_READ, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::consts::{
        PERF_FORMAT_GROUP, PERF_FORMAT_ID, PERF_FORMAT_LOST, PERF_FORMAT_TOTAL_TIME_RUNNING,
    };
    use crate::read_format::{ReadValue, ReadValues};
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout_single_and_group() {
        let mut info = sid_info();
        info.read_format = PERF_FORMAT_ID | PERF_FORMAT_LOST;
        let single = ReadRecord {
            misc: 0,
            pid: 3,
            tid: 4,
            values: ReadFormat {
                values: ReadValues::Single(ReadValue {
                    value: 50,
                    id: Some(7),
                    lost: Some(1),
                }),
                ..Default::default()
            },
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(3)
            .u32(4)
            .u64(50)
            .u64(7)
            .u64(1)
            .sid()
            .with_header(PERF_RECORD_READ, 0);
        check_layout(&Record::Read(single), &info, &want);

        info.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
        let items = [
            ReadValue {
                value: 5,
                id: Some(1),
                lost: None,
            },
            ReadValue {
                value: 6,
                id: Some(2),
                lost: None,
            },
        ];
        let group = ReadRecord {
            values: ReadFormat {
                time_enabled: None,
                time_running: Some(900),
                values: ReadValues::Group(Array::Items(&items)),
            },
            ..single
        };
        // pid, tid, nr, time_running, {value, id} x2.
        let want = Le::new()
            .u32(3)
            .u32(4)
            .u64(2)
            .u64(900)
            .u64(5)
            .u64(1)
            .u64(6)
            .u64(2)
            .sid()
            .with_header(PERF_RECORD_READ, 0);
        check_layout(&Record::Read(group), &info, &want);
    }
}
