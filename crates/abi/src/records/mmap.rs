//! PERF_RECORD_MMAP: `{ hdr; u32 pid, tid; u64 addr; u64 len; u64 pgoff;
//! char filename[]; sample_id }`, the name NUL-terminated and padded to 8.
//! `misc & PERF_RECORD_MISC_MMAP_DATA` marks a data (non-exec) mapping.

use super::{EncodeRecord, cstr_len, split_trailer, write_cstr, write_trailer};
use crate::consts::PERF_RECORD_MMAP;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_MMAP: a mapping was created.
pub struct MmapRecord<'a> {
    /// `header.misc`: the CPU mode (user or kernel map) and
    /// `PERF_RECORD_MISC_MMAP_DATA`.
    pub misc: u16,
    /// The process id (-1 as u32 for kernel maps).
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
    /// The mapping's start address.
    pub addr: u64,
    /// The mapping's length in bytes.
    pub len: u64,
    /// The file offset of the mapping's start, in bytes.
    pub pgoff: u64,
    /// Without its NUL and padding.
    pub filename: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> MmapRecord<'a> {
    /// Decodes a PERF_RECORD_MMAP body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_MMAP, body, info, e)?;
        Ok(Self {
            misc,
            pid: r.u32("pid")?,
            tid: r.u32("tid")?,
            addr: r.u64("addr")?,
            len: r.u64("len")?,
            pgoff: r.u64("pgoff")?,
            filename: r.rest().until_nul(),
            sample_id,
        })
    }
}

impl EncodeRecord for MmapRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_MMAP
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        32 + cstr_len(&self.filename) + info.sample_id_len(PERF_RECORD_MMAP)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
        sink.put(&e.u64_bytes(self.addr));
        sink.put(&e.u64_bytes(self.len));
        sink.put(&e.u64_bytes(self.pgoff));
        write_cstr(&self.filename, sink);
        write_trailer(PERF_RECORD_MMAP, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{PERF_RECORD_MISC_MMAP_DATA, PERF_RECORD_MISC_USER};
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_DATA;
        let rec = MmapRecord {
            misc,
            pid: 1,
            tid: 2,
            addr: 0x40_0000,
            len: 0x1000,
            pgoff: 0,
            filename: RawData::Single(b"/bin/true"),
            sample_id: sid(),
        };
        // 9 name bytes + NUL = 10, padded to 16.
        let want = Le::new()
            .u32(1)
            .u32(2)
            .u64(0x40_0000)
            .u64(0x1000)
            .u64(0)
            .bytes(b"/bin/true")
            .zeros(7)
            .sid()
            .with_header(PERF_RECORD_MMAP, misc);
        check_layout(&Record::Mmap(rec), &sid_info(), &want);
        // A name of exactly 8 bytes still gets its NUL: 16 bytes.
        let eight = MmapRecord {
            filename: RawData::Single(b"/lib/abc"),
            ..rec
        };
        assert_eq!(eight.body_len(&sid_info()), 32 + 16 + 16);
    }
}
