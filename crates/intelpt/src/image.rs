//! The code a trace ran through: byte ranges at addresses (ptxed's `--raw FILE[:FROM-TO]:BASE`,
//! ELF segments and the files perf_event sideband says were mapped). Lookups give the bytes
//! from an address to the end of its section, so an instruction is decoded from the image's
//! own memory.

use std::sync::Arc;

/// One contiguous piece of code.
#[derive(Debug, Clone)]
pub struct Section {
    pub base: u64,
    pub bytes: Vec<u8>,
    /// Where it came from, for messages.
    pub name: String,
}

/// The part of an image one section still covers: the bytes are shared, so copying an image
/// (a process forking, a new process starting from the kernel's) copies no code.
#[derive(Debug, Clone)]
struct Piece {
    base: u64,
    /// The last address covered (inclusive, so a piece may end at the top of the address
    /// space).
    last: u64,
    data: Arc<[u8]>,
    /// Where `base`'s byte is in `data`.
    offset: usize,
}

impl Piece {
    fn bytes_from(&self, addr: u64) -> &[u8] {
        let start = self.offset + (addr - self.base) as usize;
        let end = self.offset + (self.last - self.base) as usize + 1;
        &self.data[start..end]
    }
}

/// Sections by address. A section added over others hides what it overlaps of them, as
/// libipt's image does when a mapping is replaced: the older ones are cut back to the parts
/// it leaves visible, so every address belongs to at most one piece.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// Sorted by address, not overlapping.
    pieces: Vec<Piece>,
}

impl Image {
    pub fn add(&mut self, s: Section) {
        let len = s.bytes.len();
        self.map(s.base, Arc::from(s.bytes), 0, len);
    }

    /// Adds `len` bytes of `data` from `offset` at `base` (cut to what `data` holds and to
    /// the top of the address space); nothing for an empty range.
    pub fn map(&mut self, base: u64, data: Arc<[u8]>, offset: usize, len: usize) {
        let len = len.min(data.len().saturating_sub(offset));
        let Some(span) = (len as u64).checked_sub(1) else {
            return;
        };
        let last = base.saturating_add(span);
        let new = Piece {
            base,
            last,
            data,
            offset,
        };
        let first = self.pieces.partition_point(|p| p.last < base);
        let end = first + self.pieces[first..].partition_point(|p| p.base <= last);
        let mut replace = Vec::with_capacity(3);
        if let Some(p) = self
            .pieces
            .get(first)
            .filter(|p| p.base < base && first < end)
        {
            replace.push(Piece {
                last: base - 1,
                ..p.clone()
            });
        }
        replace.push(new);
        if end > first {
            let p = &self.pieces[end - 1];
            if p.last > last {
                replace.push(Piece {
                    base: last + 1,
                    offset: p.offset + (last + 1 - p.base) as usize,
                    ..p.clone()
                });
            }
        }
        self.pieces.splice(first..end, replace);
    }

    /// The bytes at `addr` up to the end of the section holding it.
    #[inline]
    pub fn bytes_at(&self, addr: u64) -> Option<&[u8]> {
        let i = self.pieces.partition_point(|p| p.last < addr);
        let p = self.pieces.get(i).filter(|p| p.base <= addr)?;
        Some(p.bytes_from(addr))
    }

    /// Fills `buf` from `addr` on through adjacent sections, as libipt reads an instruction
    /// that a section's end cuts short; how many bytes it could read.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            let Some(at) = addr.checked_add(n as u64) else {
                break;
            };
            let Some(b) = self.bytes_at(at) else {
                break;
            };
            let k = b.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&b[..k]);
            n += k;
        }
        n
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// How many pieces of sections the image holds: what it costs to keep or copy.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }
}

/// The loadable segments of an ELF file: each PT_LOAD's file bytes at its virtual address, or,
/// given `base`, at `base` plus its offset from the lowest one (where a loader put a
/// position-independent object), as ptxed's `--elf FILE[:BASE]` loads them.
pub fn elf_sections(path: &str, base: Option<u64>) -> Result<Vec<Section>, String> {
    use object::{Object, ObjectSegment};
    let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{path}: not an ELF file: {e}"))?;
    let segments: Vec<_> = file.segments().collect();
    let lowest = segments.iter().map(|s| s.address()).min().unwrap_or(0);
    let mut out = Vec::new();
    for seg in segments {
        let bytes = seg
            .data()
            .map_err(|e| format!("{path}: segment at {:#x}: {e}", seg.address()))?;
        if bytes.is_empty() {
            continue;
        }
        let at = match base {
            Some(b) => b.wrapping_add(seg.address() - lowest),
            None => seg.address(),
        };
        out.push(Section {
            base: at,
            bytes: bytes.to_vec(),
            name: path.to_owned(),
        });
    }
    if out.is_empty() {
        return Err(format!("{path}: no loadable segment"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(base: u64, bytes: &[u8], name: &str) -> Section {
        Section {
            base,
            bytes: bytes.to_vec(),
            name: name.into(),
        }
    }

    #[test]
    fn a_newer_section_cuts_the_older_ones_back() {
        let mut im = Image::default();
        im.add(section(0x10, &[1; 16], "a"));
        im.add(section(0x14, &[2; 4], "b"));
        assert_eq!(im.bytes_at(0x10), Some(&[1u8; 4][..]));
        assert_eq!(im.bytes_at(0x15), Some(&[2u8; 3][..]));
        assert_eq!(im.bytes_at(0x18), Some(&[1u8; 8][..]));
        assert_eq!(im.len(), 3);
        // Over the end of one piece and the start of the next.
        im.add(section(0x12, &[3; 8], "c"));
        assert_eq!(im.bytes_at(0x11), Some(&[1u8][..]));
        assert_eq!(im.bytes_at(0x19), Some(&[3u8][..]));
        assert_eq!(im.bytes_at(0x1a), Some(&[1u8; 6][..]));
        assert_eq!(im.bytes_at(0x20), None);
        assert_eq!(im.bytes_at(0xf), None);
        // Over everything.
        im.add(section(0, &[4; 0x40], "d"));
        assert_eq!(im.len(), 1);
        let mut buf = [0; 4];
        assert_eq!(im.read(0x3e, &mut buf), 2);
    }

    #[test]
    fn reads_go_on_into_adjacent_sections_only() {
        let mut im = Image::default();
        im.add(section(0, &[1, 2], "a"));
        im.add(section(2, &[3], "b"));
        im.add(section(4, &[5], "c"));
        let mut buf = [0; 8];
        assert_eq!(im.read(1, &mut buf), 2);
        assert_eq!(buf[..2], [2, 3]);
    }

    #[test]
    fn a_section_at_the_top_of_the_address_space_ends_there() {
        let mut im = Image::default();
        im.add(section(u64::MAX - 1, &[1, 2, 3], "top"));
        assert_eq!(im.bytes_at(u64::MAX), Some(&[2u8][..]));
        let mut buf = [0; 4];
        assert_eq!(im.read(u64::MAX - 1, &mut buf), 2);
    }
}
