//! Names for run-time addresses from the ELF symbol tables (`.symtab`, else `.dynsym`) of the
//! objects the runtime reported, demangled (Rust, then C++).

use std::collections::BTreeMap;

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::host::LoadedObject;

/// The function symbols of the loaded objects, by run-time address.
#[derive(Debug, Default)]
pub struct Symbolizer {
    /// start -> (end, name)
    funcs: BTreeMap<u64, (u64, String)>,
}

/// A symbol's name demangled as Rust or C++, or as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return s;
    }
    name.to_owned()
}

/// The bytes of the object file at `path` that naming reads, at their offsets in a buffer of
/// the file's length: of a 64-bit little-endian ELF file its headers and every section but the
/// code and data ones (`SHT_PROGBITS`: `.text`, `.rodata`, `.debug_*`, ...), except the PLT
/// and GOT, which name library calls ([`perfaux_patch::plt::plt_names`]); of any other file
/// all of it. The buffer is an anonymous mapping whose pages cost nothing until written, so a
/// large executable costs what its symbol tables are: reading the whole file (670 KB for a
/// -pg build of zstd, its code most of it) into fresh memory was 0.4 ms of a recording's end.
fn read_for_names(path: &std::path::Path) -> std::io::Result<memmap2::MmapMut> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let len = usize::try_from(f.metadata()?.len()).map_err(std::io::Error::other)?;
    let mut buf = memmap2::MmapMut::map_anon(len.max(1))?;
    let load = |buf: &mut memmap2::MmapMut, off: u64, size: u64| -> std::io::Result<()> {
        let range = usize::try_from(off)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, n)| Some(o..o.checked_add(n)?))
            .filter(|r| r.end <= len)
            .ok_or_else(|| std::io::Error::other("a range past the file's end"))?;
        f.read_exact_at(&mut buf[range.clone()], off)
    };
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    const EHDR: usize = 64;
    const SHDR: usize = 64;
    if len < EHDR {
        load(&mut buf, 0, len as u64)?;
        return Ok(buf);
    }
    load(&mut buf, 0, EHDR as u64)?;
    let elf64_le = buf[..4] == *b"\x7fELF" && buf[4] == 2 && buf[5] == 1;
    let (phoff, shoff) = (u64_at(&buf, 0x20), u64_at(&buf, 0x28));
    let (phentsize, phnum) = (u16_at(&buf, 0x36), u16_at(&buf, 0x38));
    let (shentsize, shnum) = (u16_at(&buf, 0x3a), u16_at(&buf, 0x3c));
    let shstrndx = usize::from(u16_at(&buf, 0x3e));
    let headers = elf64_le
        && usize::from(shentsize) == SHDR
        && shnum > 0
        && shstrndx < usize::from(shnum)
        && load(&mut buf, phoff, u64::from(phentsize) * u64::from(phnum)).is_ok()
        && load(&mut buf, shoff, (SHDR * usize::from(shnum)) as u64).is_ok();
    if !headers {
        // Not the form read in parts (or headers past the end, which parsing refuses anyway).
        load(&mut buf, 0, len as u64)?;
        return Ok(buf);
    }
    let shdr = |buf: &[u8], i: usize| {
        let at = shoff as usize + SHDR * i;
        // (name, type, offset, size)
        (
            u32_at(buf, at),
            u32_at(buf, at + 4),
            u64_at(buf, at + 24),
            u64_at(buf, at + 32),
        )
    };
    const SHT_PROGBITS: u32 = 1;
    const SHT_NOBITS: u32 = 8;
    let mut code_and_data = Vec::new();
    for i in 0..usize::from(shnum) {
        let (name, ty, off, size) = shdr(&buf, i);
        match ty {
            SHT_NOBITS => {}
            SHT_PROGBITS => code_and_data.push((name, off, size)),
            // A section past the file's end is left out, as parsing would find it.
            _ => {
                let _ = load(&mut buf, off, size);
            }
        }
    }
    // The section names (SHT_STRTAB, read above) say which code is the PLT's.
    let (_, _, names_off, names_size) = shdr(&buf, shstrndx);
    for (name, off, size) in code_and_data {
        let at = names_off.saturating_add(u64::from(name));
        let named = |want: &[u8]| {
            let end = at.saturating_add(want.len() as u64 + 1);
            end <= names_off.saturating_add(names_size)
                && end <= len as u64
                && buf[at as usize..end as usize - 1] == *want
                && buf[end as usize - 1] == 0
        };
        if [&b".plt"[..], b".plt.sec", b".plt.got", b".got", b".got.plt"]
            .iter()
            .any(|n| named(n))
        {
            let _ = load(&mut buf, off, size);
        }
    }
    Ok(buf)
}

impl Symbolizer {
    /// Names for `addrs` from the symbol tables of `objects` (an unreadable file names
    /// nothing). Only the objects whose executable mapping holds one of the addresses are read
    /// (the others too if an address is left without a name), and only the symbols that cover
    /// an address are demangled: the recording's end waits for this, and a C library's
    /// thousands of symbols named nothing a probe needs.
    pub fn for_addrs(objects: &[LoadedObject], addrs: &[u64]) -> Symbolizer {
        let wanted: std::collections::BTreeSet<u64> = addrs.iter().copied().collect();
        let holds = |o: &LoadedObject| {
            wanted
                .range(o.start..o.start.saturating_add(o.len))
                .next()
                .is_some()
        };
        let (first, rest): (Vec<&LoadedObject>, Vec<&LoadedObject>) =
            objects.iter().partition(|o| holds(o));
        let mut s = Symbolizer::default();
        let mut seen = std::collections::BTreeSet::new();
        s.read(&first, &wanted, &mut seen);
        if wanted.iter().any(|&a| s.name(a).is_none()) {
            s.read(&rest, &wanted, &mut seen);
        }
        s
    }

    fn read(
        &mut self,
        objects: &[&LoadedObject],
        wanted: &std::collections::BTreeSet<u64>,
        seen: &mut std::collections::BTreeSet<(std::path::PathBuf, u64)>,
    ) {
        for o in objects {
            if !seen.insert((o.path.clone(), o.base)) {
                continue;
            }
            let Ok(bytes) = read_for_names(&o.path) else {
                continue;
            };
            let Ok(file) = object::File::parse(&*bytes) else {
                continue;
            };
            let mut add = |sym: object::Symbol<'_, '_>| {
                if sym.kind() != SymbolKind::Text || sym.address() == 0 {
                    return;
                }
                let start = sym.address().wrapping_add(o.base);
                let end = start.saturating_add(sym.size().max(1));
                if self.funcs.contains_key(&start) || wanted.range(start..end).next().is_none() {
                    return;
                }
                let Ok(name) = sym.name() else { return };
                self.funcs.insert(start, (end, demangle(name)));
            };
            let mut any = false;
            for sym in file.symbols() {
                any = true;
                add(sym);
            }
            if !any {
                for sym in file.dynamic_symbols() {
                    add(sym);
                }
            }
            // PLT entries, under the functions they call (`-P`'s library calls are entered at
            // them), as uftrace names a library call. Only where an address lies in a PLT:
            // decoding its entries starts iced-x86's decoder, whose tables cost a recording's
            // end 0.2 ms.
            let in_plt = file.sections().any(|sec| {
                matches!(sec.name(), Ok(".plt" | ".plt.sec"))
                    && wanted
                        .range(sec.address().wrapping_add(o.base)..)
                        .next()
                        .is_some_and(|&a| {
                            a < sec
                                .address()
                                .wrapping_add(o.base)
                                .saturating_add(sec.size())
                        })
            });
            if !in_plt {
                continue;
            }
            for (entry, name) in perfaux_patch::plt::plt_names(&file) {
                let start = entry.wrapping_add(o.base);
                if !self.funcs.contains_key(&start)
                    && wanted.range(start..start + 16).next().is_some()
                {
                    self.funcs.insert(start, (start + 16, demangle(&name)));
                }
            }
        }
    }

    /// The function containing `addr`, if a symbol covers it.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (_, (end, name)) = self.funcs.range(..=addr).next_back()?;
        (addr < *end).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What naming reads of an object file names what the whole file names (every symbol,
    /// the dynamic ones and the PLT's entries), in this test's executable and the C library,
    /// without their code; a file that is not ELF is read whole.
    #[test]
    fn the_parts_read_name_what_the_whole_file_names() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("the C library in this process")
            .to_owned();
        for path in [std::env::current_exe().unwrap(), libc.into()] {
            let whole = std::fs::read(&path).unwrap();
            let parts = read_for_names(&path).unwrap();
            assert_eq!(parts.len(), whole.len());
            let names = |b: &[u8]| {
                let f = object::File::parse(b).unwrap();
                let of = |s: object::Symbol<'_, '_>| {
                    let name = s.name().unwrap_or("").to_owned();
                    (s.address(), s.size(), s.kind(), name)
                };
                let syms: Vec<_> = f.symbols().map(of).collect();
                let dynamic: Vec<_> = f.dynamic_symbols().map(of).collect();
                (syms, dynamic, perfaux_patch::plt::plt_names(&f))
            };
            let (want, got) = (names(&whole), names(&parts));
            assert!(want.0.len() + want.1.len() > 100, "{path:?}");
            assert_eq!(got, want, "{path:?}");
            let f = object::File::parse(&*whole).unwrap();
            let text = f.section_by_name(".text").unwrap();
            let (at, n) = text.file_range().unwrap();
            let code = &parts[at as usize..(at + n) as usize];
            assert!(code.iter().all(|&b| b == 0), "{path:?}: its code was read");
        }
        let d = tempfile::tempdir().unwrap();
        let other = d.path().join("not-elf");
        std::fs::write(&other, b"no ELF file, read whole").unwrap();
        assert_eq!(
            &*read_for_names(&other).unwrap(),
            b"no ELF file, read whole"
        );
    }
}
