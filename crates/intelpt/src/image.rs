//! The code a trace ran through: byte ranges at addresses (ptxed's `--raw FILE[:FROM-TO]:BASE`,
//! and later ELF segments and perf.data mappings). Lookups give the bytes from an address to
//! the end of its section, so an instruction is decoded from the image's own memory.

/// One contiguous piece of code.
#[derive(Debug, Clone)]
pub struct Section {
    pub base: u64,
    pub bytes: Vec<u8>,
    /// Where it came from, for messages.
    pub name: String,
}

/// Sections by address; a later section hides what it overlaps of earlier ones, as libipt's
/// image does when a mapping is replaced.
#[derive(Debug, Clone, Default)]
pub struct Image {
    sections: Vec<Section>,
}

impl Image {
    pub fn add(&mut self, s: Section) {
        self.sections.push(s);
    }

    /// The bytes at `addr` up to the end of its section (the newest section holding it).
    #[inline]
    pub fn bytes_at(&self, addr: u64) -> Option<&[u8]> {
        self.sections.iter().rev().find_map(|s| {
            let off = addr.checked_sub(s.base)?;
            let off = usize::try_from(off).ok()?;
            s.bytes.get(off..).filter(|b| !b.is_empty())
        })
    }

    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
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
