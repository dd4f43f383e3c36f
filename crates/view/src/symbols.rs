//! Sample addresses to functions, as perf report resolves them: the probe
//! table first (perfaux's own recordings), then the recording's MMAP/MMAP2
//! records to find the mapped file, whose ELF function symbols (perf's
//! table: [`crate::func_symbols`]) name the function, demangled (Rust v0/legacy with rustc-demangle, C++
//! with cpp_demangle).
//!
//! Files are opened once per path and kept; an address that no map or
//! symbol covers is named by its address in its DSO (perf's `0x...`), or
//! `[unknown]` outside every map.

use std::collections::{BTreeMap, HashMap};

use crate::event::{FuncId, Names};
use crate::func_symbols::FuncSymbols;
use crate::object_files::ObjectFiles;

/// One mapping of a file into a process.
#[derive(Clone, Copy, Debug)]
struct Map {
    end: u64,
    pgoff: u64,
    dso: usize,
    /// The order the records came in: of maps that overlap, the later is the one in place.
    seq: u64,
}

/// An ELF file's loadable segments and its function symbols.
struct Elf {
    /// (file offset, file size, virtual address) of each PT_LOAD.
    segments: Vec<(u64, u64, u64)>,
    symbols: FuncSymbols,
}

struct Dso {
    name: String,
    elf: Option<Elf>,
    /// Addresses already resolved, so each ELF lookup happens once.
    cache: HashMap<u64, FuncId>,
}

/// Resolves addresses of sampled processes.
#[derive(Default)]
pub struct Symbolizer {
    probes: HashMap<u64, String>,
    /// pid -> start -> map; kernel maps (pid -1) under `u32::MAX`.
    maps: HashMap<u32, BTreeMap<u64, Map>>,
    dsos: Vec<Dso>,
    dso_index: HashMap<String, usize>,
    /// The files the maps name, as the recording saw them.
    files: ObjectFiles,
    /// The maps made so far.
    map_seq: u64,
}

/// The DSO name of addresses that no map covers.
pub const UNKNOWN: &str = "[unknown]";

impl Symbolizer {
    /// A symbolizer that knows perfaux's probes by address.
    pub fn new(probes: &perfaux_swtrace::ProbeTable) -> Symbolizer {
        Symbolizer {
            probes: probes
                .iter()
                .filter(|p| p.addr != 0)
                .map(|p| (p.addr, p.name.clone()))
                .collect(),
            ..Symbolizer::default()
        }
    }

    /// A PERF_RECORD_MMAP/MMAP2 of `filename` at `[addr, addr + len)`.
    pub fn mmap(&mut self, pid: u32, addr: u64, len: u64, pgoff: u64, filename: &str) {
        let dso = match self.dso_index.get(filename) {
            Some(&d) => d,
            None => {
                self.dsos.push(Dso {
                    name: filename.to_owned(),
                    elf: None,
                    cache: HashMap::new(),
                });
                // Opened lazily: most maps of a process are never sampled.
                self.dso_index
                    .insert(filename.to_owned(), self.dsos.len() - 1);
                self.dsos.len() - 1
            }
        };
        self.map_seq += 1;
        self.maps.entry(pid).or_default().insert(
            addr,
            Map {
                end: addr.saturating_add(len),
                pgoff,
                dso,
                seq: self.map_seq,
            },
        );
    }

    /// The files the maps name: where they are read from, and what could not be used.
    pub fn files(&mut self) -> &mut ObjectFiles {
        &mut self.files
    }

    /// Process `pid`'s maps: (start, end, file offset, file name), in the order the
    /// recording made them (a later one over an earlier hides it).
    pub fn maps_of(&self, pid: u32) -> impl Iterator<Item = (u64, u64, u64, &str)> + '_ {
        let mut v: Vec<(u64, &Map)> = self
            .maps
            .get(&pid)
            .into_iter()
            .flat_map(|m| m.iter().map(|(&start, map)| (start, map)))
            .collect();
        v.sort_by_key(|(_, m)| m.seq);
        v.into_iter()
            .map(move |(start, map)| (start, map.end, map.pgoff, &*self.dsos[map.dso].name))
    }

    fn find_map(&self, pid: u32, addr: u64) -> Option<(u64, Map)> {
        [pid, u32::MAX].iter().find_map(|p| {
            let (&start, m) = self.maps.get(p)?.range(..=addr).next_back()?;
            (addr < m.end).then_some((start, *m))
        })
    }

    /// The function at `addr` in process `pid`.
    pub fn resolve(&mut self, pid: u32, addr: u64, names: &mut Names) -> FuncId {
        if let Some(n) = self.probes.get(&addr) {
            // The object is the file mapped there, as perf names it; `[swtrace]` only where
            // the recording has no map of it.
            let dso = self.find_map(pid, addr).map(|(_, m)| {
                let name = &self.dsos[m.dso].name;
                name.rsplit('/').next().unwrap_or(name)
            });
            return names.intern(n, dso.unwrap_or("[swtrace]"));
        }
        let Some((start, map)) = self.find_map(pid, addr) else {
            return names.intern(UNKNOWN, UNKNOWN);
        };
        let dso = &mut self.dsos[map.dso];
        if let Some(&f) = dso.cache.get(&addr) {
            return f;
        }
        if dso.elf.is_none() && !dso.name.starts_with('[') {
            dso.elf = open_elf(&mut self.files, &dso.name);
        }
        let file_off = addr - start + map.pgoff;
        let short = dso.name.rsplit('/').next().unwrap_or(&dso.name).to_owned();
        let sym = dso.elf.as_ref().and_then(|e| {
            let &(off, _, vaddr) = e
                .segments
                .iter()
                .find(|(o, sz, _)| (*o..o + sz).contains(&file_off))?;
            e.symbols.find(file_off - off + vaddr).map(demangle)
        });
        let f = match sym {
            Some(s) => names.intern(&s, &short),
            None => names.intern(&format!("{file_off:#x}"), &short),
        };
        dso.cache.insert(addr, f);
        f
    }
}

/// A map's file name as perf report shows it: perf names the kernel's map
/// "[kernel.kallsyms]_text" and shows "[kernel.kallsyms]".
pub fn map_name(raw: &perfaux_abi::raw::RawData<'_>) -> String {
    let f = String::from_utf8_lossy(&raw.until_nul().to_vec()).into_owned();
    match f.strip_suffix("_text") {
        Some(k) if k.starts_with('[') => k.to_owned(),
        _ => f,
    }
}

fn open_elf(files: &mut ObjectFiles, name: &str) -> Option<Elf> {
    use object::{Object, ObjectSegment};
    let data = files.read(name)?;
    let path = files.path(name);
    let file = object::File::parse(&*data).ok()?;
    let segments = file
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then_some((off, size, s.address()))
        })
        .collect();
    let symbols = FuncSymbols::load(&path, &file);
    Some(Elf { segments, symbols })
}

/// A symbol as people read it: Rust and C++ names demangled (Rust without
/// its hash, as perf prints it; C++ by `cpp_demangle`, else by the C++ runtime's
/// demangler), others unchanged.
pub fn demangle(sym: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(sym) {
        return format!("{d:#}");
    }
    if sym.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(sym)
            && let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default())
        {
            return d;
        }
        if let Some(d) = crate::cxa_demangle::demangle(sym) {
            return d;
        }
    }
    sym.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_and_cpp_names_are_demangled() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("main"), "main");
    }

    /// A C++ name with a template argument pack inside an expression (`sr`, `IJ...E`), which
    /// c++filt reads.
    #[test]
    fn a_cpp_name_with_an_argument_pack_is_demangled() {
        assert_eq!(
            demangle(
                "_ZSt4swapINSt6thread2idEENSt9enable_ifIXsrSt6__and_IJSt6__not_ISt15__is_tuple_\
                 likeIT_EESt21is_move_constructibleIS6_ESt18is_move_assignableIS6_EEE5valueEvE4\
                 typeERS6_SG_"
            ),
            "std::enable_if<std::__and_<std::__not_<std::__is_tuple_like<std::thread::id> >, \
             std::is_move_constructible<std::thread::id>, std::is_move_assignable<std::thread::\
             id> >::value, void>::type std::swap<std::thread::id>(std::thread::id&, \
             std::thread::id&)"
        );
    }

    #[test]
    fn addresses_resolve_through_the_maps_to_elf_symbols() {
        // This test binary is an ELF with symbols: map it as perf would see
        // it and resolve the address of one of its functions.
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        use object::{Object, ObjectSegment, ObjectSymbol};
        let file = object::File::parse(&*data).unwrap();
        // A function whose address no other symbol shares.
        let texts: Vec<_> = file
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 16)
            .collect();
        let sym = texts
            .iter()
            .find(|s| texts.iter().filter(|t| t.address() == s.address()).count() == 1)
            .expect("a function in the symbol table");
        let seg = file
            .segments()
            .find(|s| (s.address()..s.address() + s.size()).contains(&sym.address()))
            .unwrap();
        let (off, _) = seg.file_range();
        // Pretend the segment is mapped at 0x5555_0000_0000 + its offset.
        let base = 0x5555_0000_0000u64;
        let mut s = Symbolizer::default();
        let path = exe.to_str().unwrap();
        s.mmap(42, base + off, seg.size(), off, path);
        let mut names = Names::default();
        let f = s.resolve(42, base + off + (sym.address() - seg.address()), &mut names);
        assert_eq!(names.name(f), demangle(sym.name().unwrap()));
        let outside = s.resolve(42, 0x10, &mut names);
        assert_eq!(names.name(outside), UNKNOWN);
    }
}
