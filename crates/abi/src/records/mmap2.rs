//! PERF_RECORD_MMAP2: `{ hdr; u32 pid, tid; u64 addr; u64 len; u64 pgoff;
//! union { { u32 maj; u32 min; u64 ino; u64 ino_generation; };
//! { u8 build_id_size; u8 __reserved_1; u16 __reserved_2; u8 build_id[20]; } };
//! u32 prot; u32 flags; char filename[]; sample_id }`.
//! `misc & PERF_RECORD_MISC_MMAP_BUILD_ID` selects the build-id arm.

use super::{EncodeRecord, cstr_len, split_trailer, write_cstr, write_trailer};
use crate::consts::{PERF_RECORD_MISC_MMAP_BUILD_ID, PERF_RECORD_MMAP2};
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

/// The 24-byte union: the file's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mmap2FileId {
    /// The file's device and inode (no `PERF_RECORD_MISC_MMAP_BUILD_ID`).
    Inode {
        /// The device's major number.
        maj: u32,
        /// The device's minor number.
        min: u32,
        /// The inode number.
        ino: u64,
        /// The inode's generation.
        ino_generation: u64,
    },
    /// `build_id[..build_id_size]` is the id; the reserved bytes are zero.
    /// The file's build id (`attr.build_id`, `PERF_RECORD_MISC_MMAP_BUILD_ID`).
    BuildId {
        /// Bytes of `build_id` in use (at most 20).
        build_id_size: u8,
        /// The build id, zero-padded.
        build_id: [u8; 20],
    },
}

impl Default for Mmap2FileId {
    fn default() -> Self {
        Mmap2FileId::Inode {
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_MMAP2: a mapping was created, with the file's identity.
pub struct Mmap2Record<'a> {
    /// The MMAP_BUILD_ID bit is written as `file_id` says, whatever it is here.
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
    /// The file's inode data or build id.
    pub file_id: Mmap2FileId,
    /// The mapping's `PROT_*` bits.
    pub prot: u32,
    /// The mapping's `MAP_*` flags.
    pub flags: u32,
    /// Without its NUL and padding.
    pub filename: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> Mmap2Record<'a> {
    /// Decodes a PERF_RECORD_MMAP2 body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_MMAP2, body, info, e)?;
        let pid = r.u32("pid")?;
        let tid = r.u32("tid")?;
        let addr = r.u64("addr")?;
        let len = r.u64("len")?;
        let pgoff = r.u64("pgoff")?;
        let file_id = if misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
            let build_id_size = r.u8("build_id_size")?;
            r.skip(3, "build_id reserved")?;
            Mmap2FileId::BuildId {
                build_id_size,
                build_id: r.byte_array("build_id")?,
            }
        } else {
            Mmap2FileId::Inode {
                maj: r.u32("maj")?,
                min: r.u32("min")?,
                ino: r.u64("ino")?,
                ino_generation: r.u64("ino_generation")?,
            }
        };
        Ok(Self {
            misc,
            pid,
            tid,
            addr,
            len,
            pgoff,
            file_id,
            prot: r.u32("prot")?,
            flags: r.u32("flags")?,
            filename: r.rest().until_nul(),
            sample_id,
        })
    }
}

impl EncodeRecord for Mmap2Record<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_MMAP2
    }
    fn misc(&self) -> u16 {
        match self.file_id {
            Mmap2FileId::Inode { .. } => self.misc & !PERF_RECORD_MISC_MMAP_BUILD_ID,
            Mmap2FileId::BuildId { .. } => self.misc | PERF_RECORD_MISC_MMAP_BUILD_ID,
        }
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        64 + cstr_len(&self.filename) + info.sample_id_len(PERF_RECORD_MMAP2)
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
        match self.file_id {
            Mmap2FileId::Inode {
                maj,
                min,
                ino,
                ino_generation,
            } => {
                sink.put(&e.u32_bytes(maj));
                sink.put(&e.u32_bytes(min));
                sink.put(&e.u64_bytes(ino));
                sink.put(&e.u64_bytes(ino_generation));
            }
            Mmap2FileId::BuildId {
                build_id_size,
                build_id,
            } => {
                sink.put(&[build_id_size, 0, 0, 0]);
                sink.put(&build_id);
            }
        }
        sink.put(&e.u32_bytes(self.prot));
        sink.put(&e.u32_bytes(self.flags));
        write_cstr(&self.filename, sink);
        write_trailer(PERF_RECORD_MMAP2, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::PERF_RECORD_MISC_USER;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout_inode() {
        let rec = Mmap2Record {
            misc: PERF_RECORD_MISC_USER,
            pid: 1,
            tid: 2,
            addr: 0x1000,
            len: 0x2000,
            pgoff: 0x3000,
            file_id: Mmap2FileId::Inode {
                maj: 8,
                min: 1,
                ino: 12345,
                ino_generation: 6,
            },
            prot: 5,
            flags: 2,
            filename: RawData::Single(b"/usr/lib/libc.so.6"),
            sample_id: sid(),
        };
        // 18 name bytes + NUL = 19, padded to 24.
        let want = Le::new()
            .u32(1)
            .u32(2)
            .u64(0x1000)
            .u64(0x2000)
            .u64(0x3000)
            .u32(8)
            .u32(1)
            .u64(12345)
            .u64(6)
            .u32(5)
            .u32(2)
            .bytes(b"/usr/lib/libc.so.6")
            .zeros(6)
            .sid()
            .with_header(PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
        check_layout(&Record::Mmap2(rec), &sid_info(), &want);
    }

    #[test]
    fn layout_build_id() {
        let mut id = [0u8; 20];
        id.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8 + 1);
        let misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID;
        let rec = Mmap2Record {
            misc,
            file_id: Mmap2FileId::BuildId {
                build_id_size: 20,
                build_id: id,
            },
            filename: RawData::Single(b"a"),
            ..Default::default()
        };
        let want = Le::new()
            .u32(0)
            .u32(0)
            .u64(0)
            .u64(0)
            .u64(0)
            .bytes(&[20, 0, 0, 0])
            .bytes(&id)
            .u32(0)
            .u32(0)
            .bytes(b"a")
            .zeros(7)
            .with_header(PERF_RECORD_MMAP2, misc);
        check_layout(&Record::Mmap2(rec), &RecordParseInfo::default(), &want);
    }
}
