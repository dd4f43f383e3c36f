//! The events the recorder asked for (its `-e` list, in the control area's event table), read
//! once at init, and the functions `probe:FUNC` events name.
//!
//! A probe event names its function by ELF symbol name; only the program knows where its
//! objects are loaded, so each object is resolved here when it is first reported (at init,
//! and when a hook first runs code a `dlopen` brought in): every symbol of a requested name
//! gives a run-time range, and the event's `FOUND` word tells the recorder it exists. The
//! probe interned for an address in such a range is named FUNC ([`function_at`]), and every
//! probe event's `config` is the probe PMU's value for "the probes named FUNC": so a thread's
//! probe event matches the function in whatever object it lives, also in one loaded later.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use object::{Object, ObjectSymbol, SymbolKind};
use perfaux_abi::Endianness;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_preload_abi::{Control, MAX_EVENTS, copy_out};

/// One event every traced thread opens.
pub(crate) struct Requested {
    /// The attr as the thread opens it (a probe's `config` filled in).
    pub(crate) attr: PerfEventAttr,
    /// Index of its group leader (before it in the table, or itself).
    pub(crate) leader: usize,
    /// `probe:FUNC`: the function's symbol name.
    func: Option<&'static str>,
}

static EVENTS: OnceLock<Vec<Requested>> = OnceLock::new();

/// Run-time ranges of the requested functions: (start, end, name).
static RANGES: Mutex<Vec<(u64, u64, &'static str)>> = Mutex::new(Vec::new());

/// The events, once [`load`] ran (none before).
pub(crate) fn all() -> &'static [Requested] {
    EVENTS.get().map_or(&[], Vec::as_slice)
}

/// Reads the recorder's event table (called by init, on the only thread, before any probe is
/// made: a probe event's `config` then is the pending name that matches every probe named
/// FUNC). An entry that does not parse ends the table: the threads then open what came
/// before it, and the recorder, which wrote the table, sees the ids missing.
pub(crate) fn load(ctl: &Control) {
    let n = (ctl.event_count().load(Ordering::Acquire) as usize).min(MAX_EVENTS);
    let mut v = Vec::with_capacity(n);
    for k in 0..n {
        let e = ctl.event(k);
        let w = |w: &std::sync::atomic::AtomicU64| w.load(Ordering::Acquire) as usize;
        let bytes = copy_out(&e.attr, w(&e.attr_len));
        let Ok((mut attr, _)) = PerfEventAttr::parse(&bytes, Endianness::NATIVE) else {
            break;
        };
        let leader = w(&e.leader);
        if leader > k {
            break;
        }
        let func_len = w(&e.func_len);
        let func = (func_len > 0)
            .then(|| String::from_utf8(copy_out(&e.func, func_len)).ok())
            .flatten()
            .map(|f| &*Box::leak(f.into_boxed_str()));
        if let Some(f) = func {
            attr.config = perfaux_pmus::probe::resolve_probe(f);
        }
        v.push(Requested { attr, leader, func });
    }
    let _ = EVENTS.set(v);
}

/// The requested function the address `addr` lies in, if any: its start and name.
pub(crate) fn function_at(addr: usize) -> Option<(usize, &'static str)> {
    let addr = addr as u64;
    let r = RANGES.lock().unwrap_or_else(|e| e.into_inner());
    r.iter()
        .find(|(s, e, _)| (*s..*e).contains(&addr))
        .map(|&(s, _, n)| (s as usize, n))
}

/// Finds the requested functions in the object at `path` loaded with bias `base` (its symbol
/// tables, `.symtab` and `.dynsym`): their ranges are kept and their events marked found.
pub(crate) fn resolve_object(ctl: &Control, path: &[u8], base: u64) {
    use std::os::unix::ffi::OsStrExt;
    let events = all();
    if events.iter().all(|e| e.func.is_none()) {
        return;
    }
    let Ok(bytes) = std::fs::read(std::ffi::OsStr::from_bytes(path)) else {
        return;
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return;
    };
    let mut found = Vec::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.address() == 0 {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let Some(func) = events.iter().find_map(|e| e.func.filter(|f| *f == name)) else {
            continue;
        };
        let start = sym.address().wrapping_add(base);
        found.push((start, start.saturating_add(sym.size().max(1)), func));
    }
    if found.is_empty() {
        return;
    }
    for (k, e) in events.iter().enumerate() {
        if e.func
            .is_some_and(|f| found.iter().any(|(_, _, n)| *n == f))
        {
            ctl.event(k).found.store(1, Ordering::Release);
        }
    }
    let mut r = RANGES.lock().unwrap_or_else(|e| e.into_inner());
    for f in found {
        if !r.contains(&f) {
            r.push(f);
        }
    }
}
