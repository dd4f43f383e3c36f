//! PERF_RECORD_NAMESPACES: `{ hdr; u32 pid, tid; u64 nr_namespaces;
//! { u64 dev; u64 ino; } link_info[nr_namespaces]; sample_id }`
//! (index: NET_NS_INDEX 0, UTS 1, IPC 2, PID 3, USER 4, MNT 5, CGROUP 6, TIME 7).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::array::{Array, ArrayItem};
use crate::consts::PERF_RECORD_NAMESPACES;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::{RawData, RawReader};
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

/// `struct perf_ns_link_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NsLinkInfo {
    /// The namespace file's device number.
    pub dev: u64,
    /// The namespace's inode number.
    pub ino: u64,
}

impl ArrayItem for NsLinkInfo {
    type Ctx = ();
    fn size(_: ()) -> usize {
        16
    }
    fn read(r: &mut RawReader<'_>, _: ()) -> Result<Self, ParseError> {
        Ok(Self {
            dev: r.u64("ns dev")?,
            ino: r.u64("ns ino")?,
        })
    }
    fn write<S: ByteSink + ?Sized>(&self, _: (), e: Endianness, sink: &mut S) {
        sink.put(&e.u64_bytes(self.dev));
        sink.put(&e.u64_bytes(self.ino));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_NAMESPACES: the namespaces of a task.
pub struct NamespacesRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The process id.
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
    /// `link_info[nr_namespaces]`, indexed by `NET_NS_INDEX` .. `TIME_NS_INDEX`.
    pub link_info: Array<'a, NsLinkInfo>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> NamespacesRecord<'a> {
    /// Decodes a PERF_RECORD_NAMESPACES body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_NAMESPACES, body, info, e)?;
        let pid = r.u32("pid")?;
        let tid = r.u32("tid")?;
        let nr = r.u64("nr_namespaces")?;
        Ok(Self {
            misc,
            pid,
            tid,
            link_info: Array::parse(&mut r, nr, (), "link_info")?,
            sample_id,
        })
    }
}

impl EncodeRecord for NamespacesRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_NAMESPACES
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        16 + self.link_info.encoded_len(()) + info.sample_id_len(PERF_RECORD_NAMESPACES)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u32_bytes(self.pid));
        sink.put(&e.u32_bytes(self.tid));
        sink.put(&e.u64_bytes(self.link_info.len() as u64));
        self.link_info.write((), e, sink);
        write_trailer(PERF_RECORD_NAMESPACES, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let links = [
            NsLinkInfo {
                dev: 4,
                ino: 0xf000_0001,
            },
            NsLinkInfo {
                dev: 4,
                ino: 0xf000_0002,
            },
        ];
        let rec = NamespacesRecord {
            misc: 0,
            pid: 1,
            tid: 1,
            link_info: Array::Items(&links),
            sample_id: sid(),
        };
        let want = Le::new()
            .u32(1)
            .u32(1)
            .u64(2)
            .u64(4)
            .u64(0xf000_0001)
            .u64(4)
            .u64(0xf000_0002)
            .sid()
            .with_header(PERF_RECORD_NAMESPACES, 0);
        check_layout(&Record::Namespaces(rec), &sid_info(), &want);
    }

    #[test]
    fn count_beyond_the_record_is_an_error() {
        let body = Le::new().u32(1).u32(1).u64(1000).u64(4).u64(5).0;
        let err = NamespacesRecord::parse(
            0,
            RawData::Single(&body),
            &RecordParseInfo::default(),
            Endianness::Little,
        )
        .unwrap_err();
        assert_eq!((err.what, err.offset), ("link_info", 16));
    }
}
