//! The process-wide probe table: id assignment, lookup by name, and the hooks the core uses to
//! count probe entries (software events, samplers, `aux_action` triggers).
//!
//! Everything here runs on cold paths: a probe's first entry, and the core's control calls.
//! A `Mutex` guards the table; the hot path never takes it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, OnceLock};

use thiserror::Error;

use crate::probe::{HOOK_ON, HOOK_UNREGISTERED, Probe, ProbeEvent, ProbeId};
use crate::table::{ProbeInfo, ProbeTable};

/// The core's hook slow path: called on entry and exit of every hooked probe, on the thread
/// that runs it (possibly inside a signal handler that hit a probe).
pub type HookFn = fn(ProbeId, ProbeEvent);

/// Which probes a hook applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookTarget<'a> {
    /// The probe with this id.
    Id(ProbeId),
    /// Every probe with this name, including probes that have not run yet.
    Name(&'a str),
}

/// Errors of the hook and lookup calls.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HookError {
    /// No probe has this id.
    #[error("no probe with id {0}")]
    UnknownId(ProbeId),
    /// `set_hook(.., false)` without a matching `set_hook(.., true)`.
    #[error("hook on {0} turned off more often than on")]
    NotHooked(String),
    /// The hook handler is set once per process.
    #[error("the probe hook handler is already set")]
    HandlerAlreadySet,
}

#[derive(Default)]
struct Registry {
    /// Index `id - 1`.
    probes: Vec<&'static Probe>,
    /// Hook subscriptions per probe by id, index `id - 1`.
    id_subs: Vec<u32>,
    /// Hook subscriptions by name (also for probes that have not registered yet).
    name_subs: BTreeMap<String, u32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    probes: Vec::new(),
    id_subs: Vec::new(),
    name_subs: BTreeMap::new(),
});

static HOOK_HANDLER: OnceLock<HookFn> = OnceLock::new();

thread_local! {
    /// Set while this thread runs the hook handler: probes entered by the handler itself (or a
    /// signal handler interrupting it) do not call it again, like the kernel's swevent
    /// recursion context.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread holds (or is taking) the table lock: a probe's first entry in a
    /// signal handler that interrupted it must not wait for the lock.
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

/// The table lock, held; clears HOLDING only once the lock is released.
struct Locked(std::mem::ManuallyDrop<MutexGuard<'static, Registry>>);

impl Locked {
    fn new(guard: MutexGuard<'static, Registry>) -> Locked {
        Locked(std::mem::ManuallyDrop::new(guard))
    }
}

impl std::ops::Deref for Locked {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.0
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.0
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; the field is not used afterwards.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
        HOLDING.with(|h| h.set(false));
    }
}

fn lock() -> Locked {
    HOLDING.with(|h| h.set(true));
    // A panic while holding the lock leaves the table consistent (every update is a single
    // push or store), so a poisoned lock is still usable.
    Locked::new(REGISTRY.lock().unwrap_or_else(|e| e.into_inner()))
}

impl Registry {
    fn update_hook_word(&self, idx: usize) {
        let p = self.probes[idx];
        let subs = self.id_subs[idx] + self.name_subs.get(p.name()).copied().unwrap_or(0);
        let mut word = if subs > 0 { HOOK_ON } else { 0 };
        if crate::forward::resolve() {
            word |= crate::forward::HOOK_FORWARD;
        }
        if !p.entered.load(Relaxed) {
            word |= HOOK_UNREGISTERED;
        }
        p.hook.store(word, Relaxed);
    }
}

/// How long a probe's first entry waits for a lock another thread holds.
const REGISTER_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Takes the table lock for a probe's first entry without risking a deadlock: that entry may
/// come from a signal handler. If it interrupted this very thread with the lock held (or being
/// taken), it gives up at once; otherwise it spins, then yields for up to [`REGISTER_WAIT`]
/// (another thread holds the lock, and its holder may be waiting for something the
/// interrupted code holds, such as a malloc arena), then gives up. A probe that gives up stays
/// unregistered for this one entry, which goes untraced, and retries on the next.
fn lock_for_register() -> Option<Locked> {
    if HOLDING.with(|h| h.replace(true)) {
        return None;
    }
    let start = std::time::Instant::now();
    for attempt in 0u32.. {
        match REGISTRY.try_lock() {
            Ok(g) => return Some(Locked::new(g)),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(Locked::new(e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => {
                if attempt < 1000 {
                    std::hint::spin_loop();
                } else if start.elapsed() < REGISTER_WAIT {
                    std::thread::yield_now();
                } else {
                    break;
                }
            }
        }
    }
    HOLDING.with(|h| h.set(false));
    None
}

/// Gives `probe` its id (if another thread did not just do it) and applies pending hooks.
/// `first_entry` is the address of the entering code when called from the probe's first
/// entry (None from [`Probe::id`]): it is recorded, and the probe leaves the cold path.
/// `None` if the table stayed locked (see [`lock_for_register`]).
pub(crate) fn register(probe: &'static Probe, first_entry: Option<usize>) -> Option<ProbeId> {
    let mut reg = lock_for_register()?;
    if let Some(ip) = first_entry {
        if probe.addr.load(Relaxed) == 0 {
            probe.addr.store(ip, Relaxed);
        }
        probe.entered.store(true, Relaxed);
    }
    let mut id = probe.id.load(Relaxed);
    if id == 0 {
        reg.probes.push(probe);
        reg.id_subs.push(0);
        id = u32::try_from(reg.probes.len()).unwrap_or(u32::MAX);
        // The id is stored before the hook word loses HOOK_UNREGISTERED: a thread that sees
        // the cleared hook word under the lock's release finds the id.
        probe.id.store(id, Relaxed);
        by_id::set(id, probe);
        if probe.is_exact() && crate::forward::resolve() {
            crate::forward::name(probe);
        }
    }
    reg.update_hook_word(id as usize - 1);
    Some(ProbeId(id))
}

/// Whether this process's probes go to a preload runtime (`perfaux record -- ./prog`): then
/// its recording is the runtime's, and [`crate::forward::uevent`] reaches it. Looks the
/// runtime up on the first call, under the table's lock as a registration does.
pub fn probes_to_runtime() -> bool {
    if let Some(found) = crate::forward::found() {
        return found;
    }
    let _reg = lock();
    crate::forward::resolve()
}

/// Sets the core's hook handler (once per process).
pub fn set_hook_handler(handler: HookFn) -> Result<(), HookError> {
    HOOK_HANDLER
        .set(handler)
        .map_err(|_| HookError::HandlerAlreadySet)
}

/// Calls the hook handler for `probe`; false if it was not called (no handler, or this thread
/// is already inside it).
pub(crate) fn call_hook(probe: &'static Probe, event: ProbeEvent) -> bool {
    let Some(handler) = HOOK_HANDLER.get() else {
        return false;
    };
    if IN_HOOK.with(|h| h.replace(true)) {
        return false;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_HOOK.with(|h| h.set(false));
        }
    }
    let _reset = Reset;
    handler(ProbeId(probe.current_id()), event);
    true
}

/// Turns the hook of `target` on or off. Hooks count: two `on` need two `off`. A name that no
/// probe has yet is remembered and applied when such a probe first runs. Returns how many
/// registered probes the target matches now.
pub fn set_hook(target: HookTarget<'_>, on: bool) -> Result<usize, HookError> {
    let mut reg = lock();
    match target {
        HookTarget::Id(id) => {
            let idx = (id.0 as usize).wrapping_sub(1);
            let Some(subs) = reg.id_subs.get_mut(idx) else {
                return Err(HookError::UnknownId(id));
            };
            if on {
                *subs += 1;
            } else if *subs == 0 {
                return Err(HookError::NotHooked(format!("probe id {id}")));
            } else {
                *subs -= 1;
            }
            reg.update_hook_word(idx);
            Ok(1)
        }
        HookTarget::Name(name) => {
            let subs = reg.name_subs.entry(name.to_owned()).or_insert(0);
            if on {
                *subs += 1;
            } else if *subs == 0 {
                reg.name_subs.remove(name);
                return Err(HookError::NotHooked(format!("probe name {name:?}")));
            } else {
                *subs -= 1;
            }
            if reg.name_subs.get(name) == Some(&0) {
                reg.name_subs.remove(name);
            }
            let matching: Vec<usize> = (0..reg.probes.len())
                .filter(|&i| reg.probes[i].name() == name)
                .collect();
            for &i in &matching {
                reg.update_hook_word(i);
            }
            Ok(matching.len())
        }
    }
}

/// Ids of the registered probes named `name` (probes that never ran have no id yet).
pub fn lookup(name: &str) -> Vec<ProbeId> {
    let reg = lock();
    reg.probes
        .iter()
        .filter(|p| p.name() == name)
        .map(|p| ProbeId(p.current_id()))
        .collect()
}

/// The probe with id `id`.
///
/// Lock-free and async-signal-safe (hook handlers call it on every hooked entry, possibly
/// inside a signal handler that interrupted a thread holding the table's lock).
pub fn probe_by_id(id: ProbeId) -> Option<&'static Probe> {
    by_id::get(id.0)
}

impl Probe {
    /// The probe's id, registering the probe if it never ran (`None` only if the probe table
    /// stayed locked, see [`crate::registry`]).
    pub fn id(&'static self) -> Option<ProbeId> {
        match self.id.load(Relaxed) {
            0 => register(self, None),
            id => Some(ProbeId(id)),
        }
    }
}

/// Probes by id without the lock: chunk `k` holds ids `2^k .. 2^(k+1)`, allocated (under the
/// registration lock) when its first id is given and never freed, so readers need only two
/// acquire loads. A hand-written two-level table: no crate gives a lock-free, append-only,
/// signal-safe id -> &'static map.
mod by_id {
    use std::sync::atomic::AtomicPtr;
    use std::sync::atomic::Ordering::{Acquire, Release};

    use crate::probe::Probe;

    static CHUNKS: [AtomicPtr<AtomicPtr<Probe>>; 32] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; 32];

    fn place(id: u32) -> Option<(usize, usize)> {
        if id == 0 {
            return None;
        }
        let k = 31 - id.leading_zeros() as usize;
        Some((k, (id - (1u32 << k)) as usize))
    }

    pub(super) fn get(id: u32) -> Option<&'static Probe> {
        let (k, i) = place(id)?;
        let chunk = CHUNKS[k].load(Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk `k` is a leaked allocation of 2^k slots (see `set`), and
        // i < 2^k by construction of `place`.
        let slot = unsafe { &*chunk.wrapping_add(i) };
        let p = slot.load(Acquire);
        // SAFETY: slots hold null or pointers to `&'static Probe`s.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Records `probe` under `id`. Called with the registration lock held (one writer).
    pub(super) fn set(id: u32, probe: &'static Probe) {
        let Some((k, i)) = place(id) else { return };
        let mut chunk = CHUNKS[k].load(Acquire);
        if chunk.is_null() {
            let slots: Box<[AtomicPtr<Probe>]> = (0..1usize << k)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect();
            chunk = Box::leak(slots).as_mut_ptr();
            CHUNKS[k].store(chunk, Release);
        }
        // SAFETY: as in `get`.
        let slot = unsafe { &*chunk.wrapping_add(i) };
        slot.store(std::ptr::from_ref(probe).cast_mut(), Release);
    }
}

/// A snapshot of every registered probe: what the recorder stores beside the trace so that the
/// decoder's user can name ids.
pub fn probe_table() -> ProbeTable {
    let reg = lock();
    let mut table = ProbeTable::from_entries(reg.probes.iter().map(|p| ProbeInfo {
        id: p.current_id(),
        name: p.name().to_owned(),
        addr: p.addr() as u64,
        file: p.file().to_owned(),
        line: p.line(),
    }));
    drop(reg);
    for (ty, name) in UEVENT_TYPES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        table.name_uevent_type(*ty, name);
    }
    table
}

/// The process's uevent type names ([`name_uevent_type`]).
static UEVENT_TYPES: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());

/// Names uevent type `ty` of this process: [`probe_table`] carries the name into the
/// recording, where the views read it (a recording without it shows the type's number).
pub fn name_uevent_type(ty: u32, name: &str) {
    let before = UEVENT_TYPES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ty, name.to_owned());
    // Under `perfaux record` the recording is the runtime's: it takes the name too, once (its
    // room for names is shared by every process of the recording).
    if before.as_deref() != Some(name) && probes_to_runtime() {
        crate::forward::name_uevent_type(ty, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static WAITER: Probe = Probe::new("registry_test_waiter");

    /// A probe's first entry while another thread holds the table lock for a while (20 ms,
    /// within REGISTER_WAIT) waits for it and registers: the entry is not given up.
    #[test]
    fn first_entry_waits_for_a_lock_held_by_another_thread() {
        let held = lock();
        let t = std::thread::spawn(|| {
            let _g = WAITER.enter();
            WAITER.entered.load(Relaxed)
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(held);
        assert!(t.join().unwrap(), "the first entry registered");
        assert_ne!(WAITER.current_id(), 0);
    }

    /// A first entry on a thread that holds the lock (a signal handler that interrupted it
    /// there) gives up at once instead of waiting for itself.
    #[test]
    fn first_entry_on_the_holding_thread_gives_up_at_once() {
        let held = lock();
        let start = std::time::Instant::now();
        assert!(lock_for_register().is_none());
        assert!(start.elapsed() < REGISTER_WAIT);
        drop(held);
        assert!(!HOLDING.with(Cell::get));
        let again = lock_for_register();
        assert!(again.is_some(), "free again once released");
    }
}
