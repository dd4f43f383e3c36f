//! The file header (`struct perf_file_header`) and the pipe header
//! (`struct perf_pipe_file_header`).
//!
//! ```text
//! file: char magic[8]; u64 size = 104; u64 attr_size;
//!       {u64 offset, size} attrs, data, event_types; u64 adds_features[4]
//! pipe: char magic[8]; u64 size = 16
//! ```
//! The magic says the byte order: "PERFILE2" read as a little-endian u64 is
//! `0x32454c4946524550`; a file written big-endian reads as the byte-swapped
//! "2ELIFREP". The first format, "PERFFILE", says nothing about byte order:
//! perf tells it from the header size, and so does this reader. Its header
//! may stop before `adds_features` (72 bytes).

use crate::error::{Error, Result};
use crate::feature::FeatureSet;
use perfaux_abi::Endianness;

/// "PERFILE2".
pub const PERF_MAGIC2: [u8; 8] = *b"PERFILE2";
/// "PERFFILE", the version 1 magic.
pub const PERF_MAGIC1: [u8; 8] = *b"PERFFILE";
/// `sizeof(struct perf_file_header)`.
pub const FILE_HEADER_SIZE: u64 = 104;
/// The version 1 header without `adds_features`.
pub const FILE_HEADER_SIZE_V1_SHORT: u64 = 72;
/// `sizeof(struct perf_pipe_file_header)`.
pub const PIPE_HEADER_SIZE: u64 = 16;

/// `struct perf_file_section`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileSection {
    /// File offset of the section.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

impl FileSection {
    /// Bytes of a `struct perf_file_section` in the file.
    pub const SIZE: usize = 16;

    /// The offset just past the section; `None` if it overflows.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }

    pub(crate) fn parse(b: &[u8], e: Endianness) -> Self {
        let mut o = [0u8; 8];
        let mut s = [0u8; 8];
        o.copy_from_slice(&b[0..8]);
        s.copy_from_slice(&b[8..16]);
        Self {
            offset: e.u64(o),
            size: e.u64(s),
        }
    }

    pub(crate) fn to_bytes(self, e: Endianness) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&e.u64_bytes(self.offset));
        b[8..].copy_from_slice(&e.u64_bytes(self.size));
        b
    }
}

/// Which magic the file starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Magic {
    /// "PERFFILE" (perf before 2012).
    V1,
    /// "PERFILE2" in either byte order.
    V2,
}

/// What the first 16 bytes say: file or pipe, version, byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    /// `PERFILE2` (or the old `PERFFILE`).
    pub magic: Magic,
    /// Byte order, from the magic as read.
    pub endian: Endianness,
    /// The header's `size` field: 104 (or 72) for a file, 16 for a pipe.
    pub size: u64,
}

impl Preamble {
    /// Whether this is a pipe-mode stream (a 16-byte header).
    pub fn is_pipe(&self) -> bool {
        self.size == PIPE_HEADER_SIZE
    }

    /// Decodes magic and size (the first 16 bytes of every perf.data).
    pub fn parse(b: &[u8; 16]) -> Result<Self> {
        let mut m = [0u8; 8];
        m.copy_from_slice(&b[..8]);
        let mut s = [0u8; 8];
        s.copy_from_slice(&b[8..16]);
        let mut swapped = PERF_MAGIC2;
        swapped.reverse();
        let (magic, endian) = if m == PERF_MAGIC2 {
            (Magic::V2, Endianness::Little)
        } else if m == swapped {
            (Magic::V2, Endianness::Big)
        } else if m == PERF_MAGIC1 {
            // No byte order in the magic: the header size is 104, 72 or 16
            // in exactly one of the two orders.
            let known = |v: u64| {
                matches!(
                    v,
                    FILE_HEADER_SIZE | FILE_HEADER_SIZE_V1_SHORT | PIPE_HEADER_SIZE
                )
            };
            if known(u64::from_le_bytes(s)) {
                (Magic::V1, Endianness::Little)
            } else if known(u64::from_be_bytes(s)) {
                (Magic::V1, Endianness::Big)
            } else {
                return Err(Error::corrupt(
                    8,
                    format!(
                        "PERFFILE header size {:#x} is not 104, 72 or 16 in either byte order",
                        u64::from_le_bytes(s)
                    ),
                ));
            }
        } else {
            let what = if m == *b"SIMPLEPE" {
                "simpleperf's own container magic; only perf.data-format files are read".to_string()
            } else {
                format!(
                    "bad magic {:?}, expected \"PERFILE2\" (either byte order) or \"PERFFILE\"",
                    String::from_utf8_lossy(&m)
                )
            };
            return Err(Error::corrupt(0, what));
        };
        let size = endian.u64(s);
        match size {
            PIPE_HEADER_SIZE | FILE_HEADER_SIZE => {}
            FILE_HEADER_SIZE_V1_SHORT if magic == Magic::V1 => {}
            other => {
                return Err(Error::corrupt(
                    8,
                    format!("header size {other}, expected 104 (file) or 16 (pipe)"),
                ));
            }
        }
        Ok(Self {
            magic,
            endian,
            size,
        })
    }
}

/// `struct perf_file_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// `PERFILE2` (or the old `PERFFILE`).
    pub magic: Magic,
    /// Byte order, from the magic as read.
    pub endian: Endianness,
    /// The header's size (104).
    pub size: u64,
    /// Bytes per attrs entry: the attr and its ids section (16 bytes).
    pub attr_size: u64,
    /// The attrs section: `attr_size`-byte entries of attr and ids section.
    pub attrs: FileSection,
    /// The data section: the record stream.
    pub data: FileSection,
    /// The obsolete event_types section.
    pub event_types: FileSection,
    /// `adds_features`: which feature sections follow the data.
    pub features: FeatureSet,
}

impl FileHeader {
    /// Decodes the rest of the header after the preamble; `rest` is bytes
    /// 16.. of the file (88 bytes, or 56 for a short version 1 header).
    pub fn parse(p: Preamble, rest: &[u8]) -> Result<Self> {
        let need = (p.size - 16) as usize;
        if rest.len() < need {
            return Err(Error::truncated(
                16 + rest.len() as u64,
                format!("file header of {} bytes", p.size),
            ));
        }
        let e = p.endian;
        let mut a = [0u8; 8];
        a.copy_from_slice(&rest[..8]);
        let attr_size = e.u64(a);
        let attrs = FileSection::parse(&rest[8..24], e);
        let data = FileSection::parse(&rest[24..40], e);
        let event_types = FileSection::parse(&rest[40..56], e);
        let features = if p.size == FILE_HEADER_SIZE {
            let mut f = [0u8; 32];
            f.copy_from_slice(&rest[56..88]);
            FeatureSet::parse(&f, e)
        } else {
            FeatureSet::default()
        };
        Ok(Self {
            magic: p.magic,
            endian: e,
            size: p.size,
            attr_size,
            attrs,
            data,
            event_types,
            features,
        })
    }

    /// Encodes the header (always "PERFILE2", 104 bytes).
    pub fn to_bytes(&self) -> [u8; FILE_HEADER_SIZE as usize] {
        let e = self.endian;
        let mut b = [0u8; FILE_HEADER_SIZE as usize];
        let mut magic = PERF_MAGIC2;
        if e == Endianness::Big {
            magic.reverse();
        }
        b[..8].copy_from_slice(&magic);
        b[8..16].copy_from_slice(&e.u64_bytes(FILE_HEADER_SIZE));
        b[16..24].copy_from_slice(&e.u64_bytes(self.attr_size));
        b[24..40].copy_from_slice(&self.attrs.to_bytes(e));
        b[40..56].copy_from_slice(&self.data.to_bytes(e));
        b[56..72].copy_from_slice(&self.event_types.to_bytes(e));
        b[72..104].copy_from_slice(&self.features.to_bytes(e));
        b
    }
}

/// The 16-byte pipe header in `endian`.
pub fn pipe_header_bytes(endian: Endianness) -> [u8; 16] {
    let mut magic = PERF_MAGIC2;
    if endian == Endianness::Big {
        magic.reverse();
    }
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&magic);
    b[8..].copy_from_slice(&endian.u64_bytes(PIPE_HEADER_SIZE));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preamble(magic: &[u8; 8], size: [u8; 8]) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(magic);
        b[8..].copy_from_slice(&size);
        b
    }

    #[test]
    fn magic_says_byte_order_and_size_says_file_or_pipe() {
        let le = Preamble::parse(&preamble(b"PERFILE2", 104u64.to_le_bytes())).unwrap();
        assert_eq!(
            (le.magic, le.endian, le.is_pipe()),
            (Magic::V2, Endianness::Little, false)
        );
        let be = Preamble::parse(&preamble(b"2ELIFREP", 16u64.to_be_bytes())).unwrap();
        assert_eq!(
            (be.magic, be.endian, be.is_pipe()),
            (Magic::V2, Endianness::Big, true)
        );
        // "PERFFILE": the order is the one in which the size makes sense.
        let v1 = Preamble::parse(&preamble(b"PERFFILE", 104u64.to_be_bytes())).unwrap();
        assert_eq!((v1.magic, v1.endian), (Magic::V1, Endianness::Big));
        let short = Preamble::parse(&preamble(b"PERFFILE", 72u64.to_le_bytes())).unwrap();
        assert_eq!(short.size, FILE_HEADER_SIZE_V1_SHORT);
        // The short header exists only for version 1.
        assert!(Preamble::parse(&preamble(b"PERFILE2", 72u64.to_le_bytes())).is_err());
    }

    #[test]
    fn bad_magic_and_sizes_are_errors_naming_the_offset() {
        let e = Preamble::parse(&preamble(b"NOTPERF!", [0; 8])).unwrap_err();
        assert_eq!(e.offset(), Some(0));
        let e = Preamble::parse(&preamble(b"SIMPLEPE", [0; 8])).unwrap_err();
        assert!(e.to_string().contains("simpleperf"), "{e}");
        let e = Preamble::parse(&preamble(b"PERFILE2", 100u64.to_le_bytes())).unwrap_err();
        assert_eq!(e.offset(), Some(8));
        let e = Preamble::parse(&preamble(b"PERFFILE", 7u64.to_le_bytes())).unwrap_err();
        assert_eq!(e.offset(), Some(8));
    }

    #[test]
    fn file_header_round_trips_in_both_orders() {
        for endian in [Endianness::Little, Endianness::Big] {
            let mut features = FeatureSet::default();
            features.insert(crate::Feature::HOSTNAME);
            features.insert(crate::Feature(200));
            let h = FileHeader {
                magic: Magic::V2,
                endian,
                size: FILE_HEADER_SIZE,
                attr_size: 144,
                attrs: FileSection {
                    offset: 120,
                    size: 288,
                },
                data: FileSection {
                    offset: 408,
                    size: 1000,
                },
                event_types: FileSection::default(),
                features,
            };
            let b = h.to_bytes();
            let p = Preamble::parse(b[..16].try_into().unwrap()).unwrap();
            assert_eq!(FileHeader::parse(p, &b[16..]).unwrap(), h);
        }
    }
}
