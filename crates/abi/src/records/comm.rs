//! PERF_RECORD_COMM: `{ hdr; u32 pid, tid; char comm[]; sample_id }`, the
//! name NUL-terminated and padded to 8. `misc & PERF_RECORD_MISC_COMM_EXEC`
//! marks a name change by exec.

use super::{EncodeRecord, cstr_len, split_trailer, write_cstr, write_trailer};
use crate::consts::PERF_RECORD_COMM;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_COMM: a task's name changed.
pub struct CommRecord<'a> {
    /// `header.misc`: `PERF_RECORD_MISC_COMM_EXEC` when exec changed the name.
    pub misc: u16,
    /// The process id.
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
    /// Without its NUL and padding.
    pub comm: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> CommRecord<'a> {
    /// Decodes a PERF_RECORD_COMM body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_COMM, body, info, e)?;
        Ok(Self {
            misc,
            pid: r.u32("pid")?,
            tid: r.u32("tid")?,
            comm: r.rest().until_nul(),
            sample_id,
        })
    }
}

impl EncodeRecord for CommRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_COMM
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + cstr_len(&self.comm) + info.sample_id_len(PERF_RECORD_COMM)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
        write_cstr(&self.comm, sink);
        write_trailer(PERF_RECORD_COMM, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::PERF_RECORD_MISC_COMM_EXEC;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = CommRecord {
            misc: PERF_RECORD_MISC_COMM_EXEC,
            pid: 9,
            tid: 9,
            comm: RawData::Single(b"ls"),
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(9)
            .u32(9)
            .bytes(b"ls")
            .zeros(6)
            .sid()
            .with_header(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
        check_layout(&Record::Comm(rec), &sid_info(), &want);
    }

    #[test]
    fn name_without_nul_takes_the_whole_field() {
        // A producer that filled the padded field with name bytes.
        let body = Le::new().u32(1).u32(1).bytes(b"abcdefgh").0;
        let rec = CommRecord::parse(
            0,
            RawData::Single(&body),
            &RecordParseInfo::default(),
            Endianness::Little,
        )
        .unwrap();
        assert_eq!(rec.comm, RawData::Single(b"abcdefgh"));
    }
}
