//! The functions of an ELF object, from its symbol tables (`.symtab`, else `.dynsym` in a
//! stripped object): each address once, with every name it has.

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

/// A function of an object: its link-time address and size, and its names (aliases share an
/// address), as written (mangled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub addr: u64,
    pub size: u64,
    pub names: Vec<String>,
    /// Its parts moved out of line (`NAME.cold`, gcc's hot/cold split): address and size.
    /// They jump back into the function, so their branches count as its own.
    pub cold: Vec<(u64, u64)>,
}

/// The toolchain's own start-up and tear-down code, never the program's functions (uftrace
/// leaves them out too).
const TOOLCHAIN: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
    "__libc_csu_init",
    "__libc_csu_fini",
];

/// The functions `data` (an ELF file) defines in its code sections, by address.
pub fn functions(data: &[u8]) -> Result<Vec<Function>, object::Error> {
    let file = object::File::parse(data)?;
    let mut found: Vec<(u64, u64, &str)> = Vec::new();
    let mut cold: Vec<(&str, u64, u64)> = Vec::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.size() == 0 || !sym.is_definition() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() {
            continue;
        }
        // `foo.cold`: the unlikely part of `foo`, entered by a jump from it, never called.
        if let Some(base) = name.split_once(".cold").map(|(b, _)| b) {
            cold.push((base, sym.address(), sym.size()));
            continue;
        }
        let in_code = sym
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .is_some_and(|s| {
                s.kind() == SectionKind::Text && !s.name().unwrap_or("").starts_with(".plt")
            });
        if in_code {
            found.push((sym.address(), sym.size(), name));
        }
    }
    found.sort_unstable();
    let mut out: Vec<Function> = Vec::new();
    for (addr, size, name) in found {
        match out.last_mut() {
            Some(f) if f.addr == addr => {
                f.size = f.size.max(size);
                if !f.names.iter().any(|n| n == name) {
                    f.names.push(name.to_string());
                }
            }
            _ => out.push(Function {
                addr,
                size,
                names: vec![name.to_string()],
                cold: Vec::new(),
            }),
        }
    }
    for (base, addr, size) in cold {
        if let Some(f) = out.iter_mut().find(|f| f.names.iter().any(|n| n == base))
            && !f.cold.contains(&(addr, size))
        {
            f.cold.push((addr, size));
        }
    }
    out.retain(|f| !f.names.iter().any(|n| TOOLCHAIN.contains(&n.as_str())));
    Ok(out)
}

/// The bytes of an ELF file's code sections by link-time address: a function's code before
/// the program runs (what the runtime reads in memory once it is loaded).
pub struct FileCode<'a> {
    sections: Vec<(u64, &'a [u8])>,
    /// Every section with bytes in the file (jump tables live in `.rodata`).
    data: Vec<(u64, &'a [u8])>,
}

impl<'a> FileCode<'a> {
    /// The code sections of `data` (an ELF file).
    pub fn new(data: &'a [u8]) -> Result<Self, object::Error> {
        let file = object::File::parse(data)?;
        let mut sections = Vec::new();
        let mut data = Vec::new();
        for s in file.sections() {
            let Ok(bytes) = s.data() else { continue };
            if s.address() == 0 || bytes.is_empty() {
                continue;
            }
            if s.kind() == SectionKind::Text {
                sections.push((s.address(), bytes));
            }
            data.push((s.address(), bytes));
        }
        Ok(FileCode { sections, data })
    }

    /// The 4 bytes at `addr` (little-endian), if one section holds them.
    pub fn word(&self, addr: u64) -> Option<u32> {
        self.data.iter().find_map(|&(start, bytes)| {
            let off = usize::try_from(addr.checked_sub(start)?).ok()?;
            let b = bytes.get(off..off.checked_add(4)?)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        })
    }

    /// The `size` bytes at `addr`, if one code section holds them all.
    pub fn code(&self, addr: u64, size: u64) -> Option<&'a [u8]> {
        self.sections.iter().find_map(|&(start, bytes)| {
            let off = usize::try_from(addr.checked_sub(start)?).ok()?;
            bytes.get(off..off.checked_add(usize::try_from(size).ok()?)?)
        })
    }
}

/// A name as a user writes it: Rust names without their hash, C++ names without parameters
/// (as uftrace's default, simple demangling shows them).
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name)
        && (name.starts_with("_R") || looks_rust_legacy(name))
    {
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
    {
        let opts = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Ok(d) = sym.demangle(&opts) {
            return d;
        }
    }
    name.to_string()
}

/// A legacy Rust mangling ends in `17h` and 16 hex digits then `E`.
fn looks_rust_legacy(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 20
        && name.starts_with("_ZN")
        && name.ends_with('E')
        && &b[b.len() - 20..b.len() - 17] == b"17h"
        && b[b.len() - 17..b.len() - 1]
            .iter()
            .all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_users_write_them() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN2ns3fooEi"), "ns::foo");
        assert_eq!(demangle("_ZN4calc4eval17h0123456789abcdefE"), "calc::eval");
        assert_eq!(demangle("_RNvCs1234_4calc4eval"), "calc::eval");
        assert_eq!(demangle("_Z"), "_Z");
    }

    // Kept a function of its own: inlined into the harness's closure (a build without
    // incremental compilation has fewer, larger codegen units), it has no symbol to find.
    #[test]
    #[inline(never)]
    fn this_test_binary_lists_its_own_functions_once_each() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let fs = functions(&exe).unwrap();
        assert!(fs.windows(2).all(|w| w[0].addr < w[1].addr));
        let me = fs
            .iter()
            .find(|f| {
                f.names.iter().any(|n| {
                    demangle(n).ends_with("this_test_binary_lists_its_own_functions_once_each")
                })
            })
            .expect("the test itself");
        assert!(me.size > 0);
        assert!(!fs.iter().any(|f| f.names.iter().any(|n| n == "_start")));
    }
}
