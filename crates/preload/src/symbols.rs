//! Names for run-time addresses from the ELF symbol tables (`.symtab`, else `.dynsym`) of the
//! objects the runtime reported, demangled (Rust, then C++).

use std::collections::BTreeMap;

use object::{Object, ObjectSymbol, SymbolKind};

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

impl Symbolizer {
    /// Reads the symbol tables of `objects` (an unreadable file names nothing).
    pub fn new(objects: &[LoadedObject]) -> Symbolizer {
        let mut s = Symbolizer::default();
        let mut seen = std::collections::BTreeSet::new();
        for o in objects {
            if !seen.insert((o.path.clone(), o.base)) {
                continue;
            }
            let Ok(bytes) = std::fs::read(&o.path) else {
                continue;
            };
            let Ok(file) = object::File::parse(&*bytes) else {
                continue;
            };
            let mut add = |sym: object::Symbol<'_, '_>| {
                if sym.kind() != SymbolKind::Text || sym.address() == 0 {
                    return;
                }
                let Ok(name) = sym.name() else { return };
                let start = sym.address().wrapping_add(o.base);
                let end = start.saturating_add(sym.size().max(1));
                s.funcs
                    .entry(start)
                    .or_insert_with(|| (end, demangle(name)));
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
        }
        s
    }

    /// The function containing `addr`, if a symbol covers it.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let (_, (end, name)) = self.funcs.range(..=addr).next_back()?;
        (addr < *end).then_some(name.as_str())
    }
}
