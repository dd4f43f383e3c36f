//! The contents of the feature sections: parsed forms of the common ones and
//! their encoders for the writer (tools/perf/util/header.c, `write_*` and
//! `process_*`).
//!
//! Strings are stored as perf's `do_write_string` writes them: a u32 length
//! (the string, its NUL and zero padding up to a multiple of 64,
//! `NAME_ALIGN`) and then those bytes; a reader takes the bytes up to the
//! first NUL. Every count read from a section is checked against the bytes
//! left before anything is allocated for it.

use crate::error::{Error, Result};
use perfaux_abi::Endianness;
use perfaux_abi::attr::PerfEventAttr;

/// perf's `NAME_ALIGN`.
const NAME_ALIGN: usize = 64;

/// A read position in one feature section; errors name file offsets.
pub(crate) struct SectionCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    endian: Endianness,
    /// File offset of `bytes[0]`.
    base: u64,
    what: &'static str,
}

impl<'a> SectionCursor<'a> {
    pub(crate) fn new(bytes: &'a [u8], endian: Endianness, base: u64, what: &'static str) -> Self {
        Self {
            bytes,
            pos: 0,
            endian,
            base,
            what,
        }
    }

    fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() - self.pos {
            return Err(Error::corrupt(
                self.at(),
                format!(
                    "{} section: needs {n} more bytes, {} left",
                    self.what,
                    self.bytes.len() - self.pos
                ),
            ));
        }
        let b = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(self.endian.u32([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(self.endian.u64(a))
    }

    /// A count of `elem`-byte items, checked to fit the bytes left.
    fn count(&self, n: u64, elem: usize) -> Result<usize> {
        let left = self.bytes.len() - self.pos;
        usize::try_from(n)
            .ok()
            .filter(|&n| n.checked_mul(elem).is_some_and(|b| b <= left))
            .ok_or_else(|| {
                Error::corrupt(
                    self.at(),
                    format!(
                        "{} section: count {n} of {elem}-byte items exceeds the {left} bytes left",
                        self.what
                    ),
                )
            })
    }

    pub(crate) fn string(&mut self) -> Result<String> {
        let len = self.u32()?;
        let n = self.count(u64::from(len), 1)?;
        let b = self.take(n)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }
}

/// `HEADER_NRCPUS`: `{u32 nr_cpus_available; u32 nr_cpus_online}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NrCpus {
    /// CPUs the machine has (`nr_cpus_available`).
    pub nr_cpus_available: u32,
    /// CPUs online when recorded.
    pub nr_cpus_online: u32,
}

/// One entry of `HEADER_EVENT_DESC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDesc {
    /// The event's attr.
    pub attr: PerfEventAttr,
    /// Its name.
    pub name: String,
    /// Its sample ids.
    pub ids: Vec<u64>,
}

/// One entry of `HEADER_BUILD_ID`: a file samples or trace touched, and its build id
/// (perf's `struct perf_record_header_build_id` and the name after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// The process, or -1 for the kernel's.
    pub pid: i32,
    /// `header.misc`: the cpumode (PERF_RECORD_MISC_KERNEL, _USER, ...).
    pub misc: u16,
    /// The build id (up to 20 bytes).
    pub build_id: Vec<u8>,
    /// The file's path as the recording named it.
    pub filename: String,
}

/// One entry of `HEADER_AUXTRACE`: where a PERF_RECORD_AUXTRACE is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxtraceIndexEntry {
    /// File offset of the AUXTRACE record (its header).
    pub file_offset: u64,
    /// The record's `header.size` (perf's `auxtrace_index__auxtrace_event`
    /// stores that, not counting the payload).
    pub sz: u64,
}

/// `HEADER_COMPRESSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressedInfo {
    /// Format version (1).
    pub version: u32,
    /// `PERF_COMP_ZSTD` = 1.
    pub type_: u32,
    /// zstd compression level.
    pub level: u32,
    /// Compression ratio perf measured.
    pub ratio: u32,
    /// Bytes of the mmap ring each chunk came from.
    pub mmap_len: u32,
}

/// One entry of `HEADER_GROUP_DESC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDesc {
    /// The group's name (`{a,b}` when it has none).
    pub name: String,
    /// Index of the leader among the file's attrs.
    pub leader_idx: u32,
    /// Events in the group, leader included.
    pub nr_members: u32,
}

/// `HEADER_CLOCK_DATA`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockData {
    /// Format version (1).
    pub version: u32,
    /// The clock id of the events' times.
    pub clockid: u32,
    /// Wall-clock time at the reference point, ns.
    pub wall_clock_ns: u64,
    /// The event clock at the same point, ns.
    pub clockid_time_ns: u64,
}

pub(crate) fn parse_string(c: &mut SectionCursor<'_>) -> Result<String> {
    c.string()
}

pub(crate) fn parse_nrcpus(c: &mut SectionCursor<'_>) -> Result<NrCpus> {
    Ok(NrCpus {
        nr_cpus_available: c.u32()?,
        nr_cpus_online: c.u32()?,
    })
}

pub(crate) fn parse_cmdline(c: &mut SectionCursor<'_>) -> Result<Vec<String>> {
    let nr = c.u32()?;
    // Each string is at least its 4-byte length.
    let n = c.count(u64::from(nr), 4)?;
    (0..n).map(|_| c.string()).collect()
}

pub(crate) fn parse_event_desc(c: &mut SectionCursor<'_>) -> Result<Vec<EventDesc>> {
    let nre = c.u32()?;
    let sz = c.u32()? as usize;
    let n = c.count(u64::from(nre), sz.saturating_add(8))?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.at();
        let raw = c.take(sz)?;
        let (attr, _) = PerfEventAttr::parse(raw, c.endian)
            .map_err(|e| Error::corrupt(at, format!("EVENT_DESC attr: {e}")))?;
        let attr = crate::attr_bits::from_file(attr, c.endian);
        let nr_ids = c.u32()?;
        let name = c.string()?;
        let k = c.count(u64::from(nr_ids), 8)?;
        let ids = (0..k).map(|_| c.u64()).collect::<Result<Vec<_>>>()?;
        out.push(EventDesc { attr, name, ids });
    }
    Ok(out)
}

pub(crate) fn parse_auxtrace_index(c: &mut SectionCursor<'_>) -> Result<Vec<AuxtraceIndexEntry>> {
    let nr = c.u64()?;
    let n = c.count(nr, 16)?;
    (0..n)
        .map(|_| {
            Ok(AuxtraceIndexEntry {
                file_offset: c.u64()?,
                sz: c.u64()?,
            })
        })
        .collect()
}

/// perf's `PERF_RECORD_MISC_BUILD_ID_SIZE`: the entry says its build id's size (else 20).
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `HEADER_BUILD_ID`: records to the section's end, each `{header; pid; build_id[24];
/// filename[]}` (the build id's bytes, its size and padding in the 24).
pub(crate) fn parse_build_ids(c: &mut SectionCursor<'_>) -> Result<Vec<BuildIdEntry>> {
    const FIXED: usize = 8 + 4 + 24;
    let mut v = Vec::new();
    while c.bytes.len() - c.pos >= FIXED {
        let at = c.at();
        let _type = c.u32()?;
        let b = c.take(4)?;
        let misc = c.endian.u16([b[0], b[1]]);
        let size = usize::from(c.endian.u16([b[2], b[3]]));
        let pid = c.u32()? as i32;
        let id = c.take(24)?;
        let name_len = size.checked_sub(FIXED).ok_or_else(|| {
            Error::corrupt(
                at,
                format!("BUILD_ID section: an entry of {size} bytes, less than its {FIXED}"),
            )
        })?;
        let name = c.take(name_len)?;
        let len = if misc & PERF_RECORD_MISC_BUILD_ID_SIZE != 0 {
            usize::from(id[20]).min(20)
        } else {
            20
        };
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        v.push(BuildIdEntry {
            pid,
            misc: misc & !PERF_RECORD_MISC_BUILD_ID_SIZE,
            build_id: id[..len].to_vec(),
            filename: String::from_utf8_lossy(&name[..end]).into_owned(),
        });
    }
    Ok(v)
}

pub(crate) fn parse_compressed(c: &mut SectionCursor<'_>) -> Result<CompressedInfo> {
    Ok(CompressedInfo {
        version: c.u32()?,
        type_: c.u32()?,
        level: c.u32()?,
        ratio: c.u32()?,
        mmap_len: c.u32()?,
    })
}

pub(crate) fn parse_group_desc(c: &mut SectionCursor<'_>) -> Result<Vec<GroupDesc>> {
    let nr = c.u32()?;
    let n = c.count(u64::from(nr), 12)?;
    (0..n)
        .map(|_| {
            Ok(GroupDesc {
                name: c.string()?,
                leader_idx: c.u32()?,
                nr_members: c.u32()?,
            })
        })
        .collect()
}

pub(crate) fn parse_pmu_mappings(c: &mut SectionCursor<'_>) -> Result<Vec<(u32, String)>> {
    let nr = c.u32()?;
    let n = c.count(u64::from(nr), 8)?;
    (0..n).map(|_| Ok((c.u32()?, c.string()?))).collect()
}

pub(crate) fn parse_clock_data(c: &mut SectionCursor<'_>) -> Result<ClockData> {
    Ok(ClockData {
        version: c.u32()?,
        clockid: c.u32()?,
        wall_clock_ns: c.u64()?,
        clockid_time_ns: c.u64()?,
    })
}

/// Encoders: each returns the section bytes in `endian`.
pub(crate) struct SectionBuf {
    pub(crate) bytes: Vec<u8>,
    endian: Endianness,
}

impl SectionBuf {
    pub(crate) fn new(endian: Endianness) -> Self {
        Self {
            bytes: Vec::new(),
            endian,
        }
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&self.endian.u32_bytes(v));
        self
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&self.endian.u64_bytes(v));
        self
    }

    /// perf's `do_write_string`: the string is cut at an interior NUL.
    pub(crate) fn string(&mut self, s: &str) -> &mut Self {
        let s = s.split('\0').next().unwrap_or("");
        let olen = s.len() + 1;
        let len = olen.div_ceil(NAME_ALIGN) * NAME_ALIGN;
        self.u32(len as u32);
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.resize(self.bytes.len() + len - s.len(), 0);
        self
    }

    pub(crate) fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(b);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_do_write_string_writes_them() {
        let mut b = SectionBuf::new(Endianness::Little);
        b.string("x86_64");
        // u32 len = ALIGN(strlen + 1, 64), then the string, NUL and zeros.
        assert_eq!(b.bytes.len(), 4 + 64);
        assert_eq!(&b.bytes[..4], &64u32.to_le_bytes());
        assert_eq!(&b.bytes[4..10], b"x86_64");
        assert!(b.bytes[10..].iter().all(|&c| c == 0));
        // 63 characters and a NUL fill 64 exactly; 64 need 128.
        let mut b = SectionBuf::new(Endianness::Little);
        b.string(&"a".repeat(63)).string(&"b".repeat(64));
        assert_eq!(b.bytes.len(), 4 + 64 + 4 + 128);
        let mut c = SectionCursor::new(&b.bytes, Endianness::Little, 0, "test");
        assert_eq!(c.string().unwrap(), "a".repeat(63));
        assert_eq!(c.string().unwrap(), "b".repeat(64));
    }

    #[test]
    fn counts_past_the_section_are_errors_at_their_offset() {
        // CMDLINE claiming 1000 strings in 8 bytes.
        let mut b = SectionBuf::new(Endianness::Big);
        b.u32(1000).u32(0);
        let mut c = SectionCursor::new(&b.bytes, Endianness::Big, 0x500, "CMDLINE");
        let e = parse_cmdline(&mut c).unwrap_err();
        assert_eq!(e.offset(), Some(0x504), "{e}");
        // A string length past the end.
        let mut b = SectionBuf::new(Endianness::Little);
        b.u32(u32::MAX);
        let mut c = SectionCursor::new(&b.bytes, Endianness::Little, 0, "HOSTNAME");
        assert!(parse_string(&mut c).is_err());
    }

    #[test]
    fn group_desc_and_auxtrace_index_layouts() {
        // GROUP_DESC: u32 nr; {string name; u32 leader_idx; u32 nr_members}.
        let mut b = SectionBuf::new(Endianness::Little);
        b.u32(1).string("{intel_pt//,cycles}").u32(0).u32(2);
        let mut c = SectionCursor::new(&b.bytes, Endianness::Little, 0, "GROUP_DESC");
        let g = parse_group_desc(&mut c).unwrap();
        assert_eq!(
            g,
            [GroupDesc {
                name: "{intel_pt//,cycles}".into(),
                leader_idx: 0,
                nr_members: 2
            }]
        );
        // AUXTRACE: u64 nr; {u64 file_offset; u64 sz}.
        let mut b = SectionBuf::new(Endianness::Big);
        b.u64(2).u64(0x1000).u64(48).u64(0x9000).u64(48);
        let mut c = SectionCursor::new(&b.bytes, Endianness::Big, 0, "AUXTRACE");
        let idx = parse_auxtrace_index(&mut c).unwrap();
        assert_eq!(
            idx.iter().map(|e| e.file_offset).collect::<Vec<_>>(),
            [0x1000, 0x9000]
        );
    }
}
