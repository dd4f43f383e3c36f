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
            // them), as uftrace names a library call.
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
