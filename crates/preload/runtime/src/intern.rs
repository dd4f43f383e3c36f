//! Function address -> swtrace probe, interned once per address.
//!
//! A fixed open-addressing table in static memory (no lock, no allocation to look up): a slot's
//! key is claimed with a CAS, then its probe is made and published. A thread that finds the key
//! claimed but the probe not yet published waits for it: the claimer is another thread (a
//! thread's hooks never nest, so a signal handler cannot interrupt its own thread's claim), and
//! making a probe takes no lock this thread could hold. Making a probe allocates (its name,
//! the probe).
//! Hand-written because no crate offers a signal-tolerant, allocation-free-lookup map of
//! `usize -> &'static T`.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use perfaux_swtrace::Probe;

const BITS: u32 = 17;
const SIZE: usize = 1 << BITS;

/// A slot's key and probe side by side, in one cache line: the table is 2 MiB of zeroes that a
/// program's first calls fault in page by page, each new function's slot at a hashed place;
/// in two arrays, each function's first call faulted two pages (0.4 ms of a short recording
/// of zstd's 100 functions, on the AMD host).
#[repr(C, align(16))]
struct Slot {
    key: AtomicUsize,
    probe: AtomicPtr<Probe>,
}

static SLOTS: [Slot; SIZE] = [const {
    Slot {
        key: AtomicUsize::new(0),
        probe: AtomicPtr::new(std::ptr::null_mut()),
    }
}; SIZE];

fn hash(addr: usize) -> usize {
    (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> (usize::BITS - BITS)
}

/// The probe of the function at `addr` (`None` if the table is full or another thread is
/// making it right now). Inline for the common case, a function already made and first in
/// its probe sequence (two loads); the search and the making out of line. (No test of
/// `addr` against 0 here: a free slot's key is 0 but its probe is null, which leaves for the
/// search, which refuses 0.)
#[inline(always)]
pub(crate) fn probe_for(addr: usize) -> Option<&'static Probe> {
    let i = hash(addr);
    if SLOTS[i].key.load(Ordering::Acquire) == addr {
        let p = SLOTS[i].probe.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: published pointers come from Box::leak in `make` and are never freed.
            return Some(unsafe { &*p });
        }
    }
    probe_search(addr)
}

#[cold]
#[inline(never)]
fn probe_search(addr: usize) -> Option<&'static Probe> {
    if addr == 0 {
        return None;
    }
    let mut i = hash(addr);
    for _ in 0..SIZE {
        let k = SLOTS[i].key.load(Ordering::Acquire);
        if k == addr {
            return Some(published(i));
        }
        if k == 0 {
            match SLOTS[i]
                .key
                .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(make(i, addr)),
                Err(other) if other == addr => return Some(published(i)),
                Err(_) => {}
            }
        }
        i = (i + 1) & (SIZE - 1);
    }
    None
}

/// The probe of slot `i`, once its claimer published it.
fn published(i: usize) -> &'static Probe {
    loop {
        let p = SLOTS[i].probe.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: published pointers come from Box::leak in `make` and are never freed.
            return unsafe { &*p };
        }
        std::thread::yield_now();
    }
}

/// The probes the program named exactly: the key their entries come with -> the name.
static NAMED: std::sync::Mutex<Vec<(usize, &'static str)>> = std::sync::Mutex::new(Vec::new());
/// Whether any probe was named (the common case, none, looks no further).
static ANY_NAMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Names the probe whose entries come with address `key` (`perfaux_preload_probe_name`, from
/// the program's probe registration: an ordinary context, as making a probe is).
pub(crate) fn name_key(key: usize, name: &str) {
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let mut n = NAMED.lock().unwrap_or_else(|e| e.into_inner());
    if !n.iter().any(|&(k, _)| k == key) {
        n.push((key, name));
    }
    ANY_NAMED.store(true, Ordering::Release);
}

/// The name the program gave the probe keyed `addr`, if it named it.
fn named(addr: usize) -> Option<&'static str> {
    if !ANY_NAMED.load(Ordering::Acquire) {
        return None;
    }
    // Not a blocking lock: a signal handler's hook may make a probe on a thread interrupted
    // inside `name_key`; it then waits a little and gives up (the probe is named by address).
    for _ in 0..64 {
        match NAMED.try_lock() {
            Ok(n) => return n.iter().find(|&&(k, _)| k == addr).map(|&(_, name)| name),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                let n = p.into_inner();
                return n.iter().find(|&&(k, _)| k == addr).map(|&(_, name)| name);
            }
            Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    None
}

/// Skips the swtrace probe ids an earlier image of this process (before an exec) used: probes
/// with no address take them, so this image's functions get ids of their own.
pub(crate) fn skip_used_ids(ctl: &perfaux_preload_abi::Control) {
    let used = ctl.header().max_probe_id.load(Ordering::Acquire);
    if used == 0 || used > perfaux_preload_abi::MAX_PROBES as u64 {
        return;
    }
    loop {
        let p: &'static Probe = Box::leak(Box::new(Probe::new("(an id of the image before exec)")));
        match p.id() {
            Some(id) if u64::from(id.0) < used => continue,
            _ => return,
        }
    }
}

/// Makes and publishes the probe of slot `i`, and writes its address into the recorder's probe
/// table under its id (the recorder names the id from that address). The processes of one
/// recording (a forked child and its parent go on from the same swtrace ids) share that table:
/// an id belongs to the process that writes its word first, and a probe whose id another
/// process took for another function is left unentered and made again, with the next id.
fn make(i: usize, addr: usize) -> &'static Probe {
    let ctl = crate::control();
    let named = named(addr);
    if let (Some(ctl), None) = (&ctl, named) {
        // First: an object seen for the first time is searched for the probe events'
        // functions, whose probes are named FUNC so that those events match them.
        crate::objects::cover(ctl, addr);
    }
    // The probe is entered from the runtime's hooks: its address (a probe sample's IP) is
    // the function's, not the entering code's: its start for a probe event's function (-pg
    // hooks see an address inside it), as an uprobe at FUNC stands at its entry. A probe the
    // program named exactly has its name, and no function.
    let (ip, name) = match named {
        Some(name) => (0, name),
        None => crate::events::function_at(addr)
            .unwrap_or_else(|| (addr, Box::leak(format!("{addr:#x}").into_boxed_str()))),
    };
    // What the recorder reads in the probe's word: the function's address, or the name.
    // The names full: a word that names nothing (an offset past the names), so that the id
    // is taken (a forked child does not give it a function of its own) and read as unnamed.
    let word = match (named, &ctl) {
        (Some(name), Some(ctl)) => ctl.write_probe_name(name.as_bytes()).unwrap_or(
            perfaux_preload_abi::NAMED_PROBE | perfaux_preload_abi::PROBE_NAMES_SIZE as u64,
        ),
        _ => addr as u64,
    };
    let probe = loop {
        let probe: &'static Probe = Box::leak(Box::new(Probe::new(name)));
        probe.set_addr(ip);
        let (Some(id), Some(ctl)) = (probe.id(), ctl) else {
            break probe;
        };
        ctl.header()
            .max_probe_id
            .fetch_max(u64::from(id.0), Ordering::AcqRel);
        let Some(w) = ctl.probe_word(id.0) else {
            break probe;
        };
        match w.compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break probe,
            Err(other) if other == word => break probe,
            Err(_) => continue,
        }
    };
    SLOTS[i]
        .probe
        .store(std::ptr::from_ref(probe).cast_mut(), Ordering::Release);
    probe
}
