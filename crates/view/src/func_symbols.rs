//! One ELF file's function symbols, as perf builds its table of a DSO
//! (tools/perf/util/symbol-elf.c `dso__load_sym`, symbol.c `symbols__fixup_duplicate` and
//! `symbols__fixup_end`): `.symtab` where the file or its debug file has one (it holds the
//! local functions `.dynsym` lacks), else `.dynsym`; each symbol with its size; aliases at one
//! address reduced to the one perf names; a symbol of size 0 reaching the next.
//!
//! Hand-written because the symbol maps of `object` and `addr2line` name an address by the
//! nearest symbol before it whatever that symbol's size, and read no debug file: in a
//! library whose `.symtab` is in a debug file (a distribution's libc), a local function took
//! the name of the exported one before it (`__strtof128_nan` for perf's `_itoa_word`).

use std::path::{Path, PathBuf};

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SectionIndex, SectionKind, SymbolKind,
};

/// Where debug files are looked for, as perf and gdb do.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// A debug file larger than this is not read (its symbols then come from the file itself).
const MAX_DEBUG_FILE: u64 = 1 << 30;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Sym {
    start: u64,
    /// One past the last byte.
    end: u64,
    name: String,
}

/// A file's function symbols by virtual address.
#[derive(Debug, Default)]
pub(crate) struct FuncSymbols {
    /// Sorted by start, one per start.
    syms: Vec<Sym>,
}

/// A candidate before aliases are reduced: perf's `choose_best_symbol` looks at these.
struct Candidate {
    start: u64,
    size: u64,
    weak: bool,
    global: bool,
    name: String,
}

impl FuncSymbols {
    /// The table of `file` (read from `path`): its own `.symtab`, else the `.symtab` of its
    /// debug file (by build id, then by `.gnu_debuglink`), else its `.dynsym`.
    pub(crate) fn load(path: &Path, file: &object::File<'_>) -> FuncSymbols {
        let plt = plt_entries(file);
        if file.section_by_name(".symtab").is_some() {
            return FuncSymbols::from_symbols(file, file.symbols(), plt);
        }
        for debug in debug_files(path, file) {
            let Ok(meta) = std::fs::metadata(&debug) else {
                continue;
            };
            if !meta.is_file() || meta.len() > MAX_DEBUG_FILE {
                continue;
            }
            let Ok(data) = std::fs::read(&debug) else {
                continue;
            };
            let Ok(dfile) = object::File::parse(&*data) else {
                continue;
            };
            if dfile.section_by_name(".symtab").is_some() {
                return FuncSymbols::from_symbols(&dfile, dfile.symbols(), plt);
            }
        }
        FuncSymbols::from_symbols(file, file.dynamic_symbols(), plt)
    }

    fn from_symbols<'d, 'f>(
        file: &'f object::File<'d>,
        symbols: impl Iterator<Item = object::Symbol<'d, 'f>>,
        plt: Vec<Candidate>,
    ) -> FuncSymbols {
        let mut candidates: Vec<Candidate> = symbols
            .filter(|s| is_function(file, s))
            .filter_map(|s| {
                Some(Candidate {
                    start: s.address(),
                    size: s.size(),
                    weak: s.is_weak(),
                    global: s.is_global() && !s.is_weak(),
                    name: s.name().ok()?.to_owned(),
                })
            })
            .collect();
        candidates.extend(plt);
        FuncSymbols::from_candidates(candidates)
    }

    fn from_candidates(mut c: Vec<Candidate>) -> FuncSymbols {
        c.sort_by_key(|s| s.start);
        let mut syms: Vec<Sym> = Vec::with_capacity(c.len());
        let mut best: Option<Candidate> = None;
        for s in c {
            match &best {
                Some(b) if b.start == s.start => {
                    if better(&s, b) {
                        best = Some(s);
                    }
                }
                _ => {
                    if let Some(b) = best.replace(s) {
                        syms.push(b.into_sym());
                    }
                }
            }
        }
        if let Some(b) = best {
            syms.push(b.into_sym());
        }
        // A symbol without a size reaches the next one; the last, the end of its page and
        // one more (perf's rule).
        for i in 0..syms.len() {
            if syms[i].end == syms[i].start {
                syms[i].end = match syms.get(i + 1) {
                    Some(next) => next.start,
                    None => (syms[i].start.next_multiple_of(4096)).saturating_add(4096),
                };
            }
        }
        FuncSymbols { syms }
    }

    /// The function whose bytes hold the virtual address `addr`: the nearest symbol at or
    /// before it, if `addr` is inside its size.
    pub(crate) fn find(&self, addr: u64) -> Option<&str> {
        let i = self
            .syms
            .partition_point(|s| s.start <= addr)
            .checked_sub(1)?;
        let s = &self.syms[i];
        (addr < s.end).then_some(s.name.as_str())
    }
}

impl Candidate {
    fn into_sym(self) -> Sym {
        Sym {
            start: self.start,
            end: self.start.saturating_add(self.size),
            name: self.name,
        }
    }
}

/// perf's `choose_best_symbol` between two symbols at one address: one with a size, then
/// not weak, then global, then fewer leading underscores, then the longer name; `b`, seen
/// first, on a tie.
fn better(a: &Candidate, b: &Candidate) -> bool {
    let underscores = |s: &Candidate| s.name.bytes().take_while(|&c| c == b'_').count();
    let key = |s: &Candidate| {
        (
            s.size > 0,
            !s.weak,
            s.global,
            std::cmp::Reverse(underscores(s)),
            s.name.len(),
        )
    };
    key(a) > key(b)
}

/// perf's `elf_sym__is_function` or `elf_sym__is_label`: a defined, named function (ifuncs
/// too), or a label of size 0 in executable code.
fn is_function(file: &object::File<'_>, s: &object::Symbol<'_, '_>) -> bool {
    if s.is_undefined() || s.name().map_or(true, str::is_empty) {
        return false;
    }
    match s.kind() {
        SymbolKind::Text => true,
        SymbolKind::Unknown => s.size() == 0 && s.section_index().is_some_and(|i| in_text(file, i)),
        _ => false,
    }
}

fn in_text(file: &object::File<'_>, i: SectionIndex) -> bool {
    file.section_by_index(i)
        .is_ok_and(|sec| sec.kind() == SectionKind::Text)
}

/// perf's `dso__synthesize_plt_symbols` (6.1) for a 64-bit ELF: the `.plt` entry after the
/// header for each `.rela.plt` relocation, in their order, each named by its symbol in
/// `.dynsym` and `@plt` (an ifunc's relocation has no symbol: `@plt` alone).
fn plt_entries(file: &object::File<'_>) -> Vec<Candidate> {
    const RELA64: usize = 24;
    let (Some(plt), Some(rela)) = (
        file.section_by_name(".plt"),
        file.section_by_name(".rela.plt"),
    ) else {
        return Vec::new();
    };
    let Ok(relocs) = rela.data() else {
        return Vec::new();
    };
    let n = relocs.len() / RELA64;
    if !file.is_64() || n == 0 || plt.size() % (n as u64 + 1) != 0 {
        return Vec::new();
    }
    let entry = plt.size() / (n as u64 + 1);
    let little = file.is_little_endian();
    let dynsyms = file.dynamic_symbol_table();
    relocs
        .chunks_exact(RELA64)
        .enumerate()
        .map(|(i, r)| {
            let info: [u8; 8] = r[8..16].try_into().unwrap_or_default();
            let info = if little {
                u64::from_le_bytes(info)
            } else {
                u64::from_be_bytes(info)
            };
            let name = dynsyms
                .as_ref()
                .and_then(|t| {
                    t.symbol_by_index(object::SymbolIndex((info >> 32) as usize))
                        .ok()
                })
                .and_then(|s| s.name().ok().map(str::to_owned))
                .unwrap_or_default();
            Candidate {
                start: plt.address() + (i as u64 + 1) * entry,
                size: entry,
                weak: false,
                global: true,
                name: format!("{name}@plt"),
            }
        })
        .collect()
}

/// The paths a debug file of `file` may have, in the order they are tried: by build id
/// (`/usr/lib/debug/.build-id/xx/rest.debug`), then by `.gnu_debuglink` beside the file, in
/// its `.debug` directory and under `/usr/lib/debug` (gdb's and perf's places).
fn debug_files(path: &Path, file: &object::File<'_>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(Some(id)) = file.build_id()
        && let Some((first, rest)) = id.split_first()
    {
        let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
        out.push(PathBuf::from(format!(
            "{DEBUG_ROOT}/.build-id/{first:02x}/{hex}.debug"
        )));
    }
    if let Ok(Some((link, _crc))) = file.gnu_debuglink()
        && let Ok(link) = std::str::from_utf8(link)
        && !link.contains('/')
    {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(dir) = real.parent() {
            out.push(dir.join(link));
            out.push(dir.join(".debug").join(link));
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            out.push(Path::new(DEBUG_ROOT).join(rel).join(link));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(start: u64, size: u64, bind: &str, name: &str) -> Candidate {
        Candidate {
            start,
            size,
            weak: bind == "weak",
            global: bind == "global",
            name: name.to_owned(),
        }
    }

    /// An address past a sized symbol's end is not that symbol's, however near; a symbol
    /// without a size reaches the next; aliases go to perf's choice.
    #[test]
    fn addresses_take_the_symbol_whose_bytes_hold_them() {
        let t = FuncSymbols::from_candidates(vec![
            cand(0x1000, 0x20, "global", "exported"),
            cand(0x1100, 0x40, "local", "_itoa_word"),
            cand(0x1200, 0, "local", "label"),
            cand(0x1300, 0x10, "weak", "snprintf"),
            cand(0x1300, 0x10, "global", "__snprintf"),
            cand(0x1300, 0x10, "global", "_IO_snprintf"),
            cand(0x1400, 0x10, "local", "a_local"),
            cand(0x1400, 0x10, "global", "b"),
        ]);
        assert_eq!(t.find(0x1000), Some("exported"));
        assert_eq!(t.find(0x101f), Some("exported"));
        assert_eq!(t.find(0x1020), None, "past exported's size");
        assert_eq!(t.find(0x1120), Some("_itoa_word"));
        assert_eq!(t.find(0x12ff), Some("label"));
        assert_eq!(t.find(0x1305), Some("_IO_snprintf"));
        assert_eq!(t.find(0x1400), Some("b"));
        assert_eq!(t.find(0xfff), None);
    }

    /// A C program with a local (static) function, linked and stripped of .symtab: the
    /// function's addresses take its name from .symtab before the strip, and no name from
    /// .dynsym after it (the exported function before it does not reach it).
    #[test]
    fn a_local_function_is_named_from_symtab_and_not_by_its_exported_neighbour() {
        if !perfaux_testutil::oracle("gcc") {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("lib.c");
        std::fs::write(
            &src,
            "int exported(int x) { return x * 3; }\n\
             __attribute__((noinline)) static int hidden(int x) { \
               int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n\
             int (*volatile use)(int) = hidden;\n",
        )
        .unwrap();
        let lib = d.path().join("liblocal.so");
        let st = std::process::Command::new("gcc")
            .args(["-O1", "-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success());
        let data = std::fs::read(&lib).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let hidden = file
            .symbols()
            .find(|s| s.name() == Ok("hidden"))
            .expect("hidden in .symtab");
        assert!(hidden.is_local());
        let t = FuncSymbols::load(&lib, &file);
        let mid = hidden.address() + hidden.size() / 2;
        assert_eq!(t.find(mid), Some("hidden"));
        assert_eq!(t.find(hidden.address()), Some("hidden"));

        let stripped = d.path().join("liblocal-stripped.so");
        let st = std::process::Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&stripped)
            .arg(&lib)
            .status()
            .unwrap();
        assert!(st.success());
        let data = std::fs::read(&stripped).unwrap();
        let file = object::File::parse(&*data).unwrap();
        assert!(file.section_by_name(".symtab").is_none());
        let t = FuncSymbols::load(&stripped, &file);
        assert_eq!(t.find(mid), None, "named by .dynsym's neighbour");
        let exported = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok("exported"))
            .unwrap();
        assert_eq!(t.find(exported.address()), Some("exported"));
    }
}
