//! PERF_RECORD_CGROUP: `{ hdr; u64 id; char path[]; sample_id }`, the path
//! NUL-terminated and padded to 8.

use super::{EncodeRecord, cstr_len, split_trailer, write_cstr, write_trailer};
use crate::consts::PERF_RECORD_CGROUP;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_CGROUP: a cgroup was created.
pub struct CgroupRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The cgroup id (its kernfs node id, as PERF_SAMPLE_CGROUP gives it).
    pub id: u64,
    /// Without its NUL and padding.
    pub path: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> CgroupRecord<'a> {
    /// Decodes a PERF_RECORD_CGROUP body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_CGROUP, body, info, e)?;
        Ok(Self {
            misc,
            id: r.u64("id")?,
            path: r.rest().until_nul(),
            sample_id,
        })
    }
}

impl EncodeRecord for CgroupRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_CGROUP
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + cstr_len(&self.path) + info.sample_id_len(PERF_RECORD_CGROUP)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.id));
        write_cstr(&self.path, sink);
        write_trailer(PERF_RECORD_CGROUP, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = CgroupRecord {
            misc: 0,
            id: 77,
            path: RawData::Single(b"/"),
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(77)
            .bytes(b"/")
            .zeros(7)
            .sid()
            .with_header(PERF_RECORD_CGROUP, 0);
        check_layout(&Record::Cgroup(rec), &sid_info(), &want);
    }
}
