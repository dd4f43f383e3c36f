//! What the PMUs whose interrupt is a signal share (task-clock's timers and kernel clocks,
//! ktrigger's sigtrap): a table of events their handler finds by a key the signal carries,
//! and the interrupted instruction pointer.
//!
//! A key is a slot and the slot's generation (`generation << 16 | slot`, 32 bits): a signal
//! still pending after its event closed, whose slot went to another event, names an old
//! generation and finds nothing. The handler reads the slot's event under RCU: no lock, no
//! allocation, as a signal handler must.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use perfaux_core::driver::{Event, RcuCell};

struct Slot {
    ev: RcuCell<Event>,
    generation: AtomicU32,
    used: AtomicBool,
}

/// Events a signal handler finds by key.
pub(crate) struct EventSlots {
    slots: Box<[Slot]>,
}

impl EventSlots {
    /// A table of `n` slots (at most 65,536: a key holds 16 bits of slot).
    pub(crate) fn new(n: usize) -> EventSlots {
        EventSlots {
            slots: (0..n.min(1 << 16))
                .map(|_| Slot {
                    ev: RcuCell::default(),
                    generation: AtomicU32::new(0),
                    used: AtomicBool::new(false),
                })
                .collect(),
        }
    }

    /// Claims a free slot: `(slot, key)`, or `None` if all are in use.
    pub(crate) fn claim(&self) -> Option<(usize, usize)> {
        let slot = self.slots.iter().position(|s| {
            s.used
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })?;
        let s = &self.slots[slot];
        let generation = s.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1) & 0xffff;
        s.generation.store(generation, Ordering::Release);
        Some((slot, (generation as usize) << 16 | slot))
    }

    /// Publishes `ev` in `slot` (`None`: the handler finds nothing there).
    pub(crate) fn set(&self, slot: usize, ev: Option<std::sync::Arc<Event>>) {
        if let Some(s) = self.slots.get(slot) {
            s.ev.replace(ev);
        }
    }

    /// Gives `slot` back: its generation moves on, so its old key finds nothing.
    pub(crate) fn release(&self, slot: usize) {
        if let Some(s) = self.slots.get(slot) {
            s.ev.replace(None);
            s.generation.fetch_add(1, Ordering::AcqRel);
            s.used.store(false, Ordering::Release);
        }
    }

    /// Runs `f` on the event `key` names, if its slot still holds that generation's event.
    pub(crate) fn with(&self, key: usize, f: impl FnOnce(&Event)) {
        let (slot, generation) = (key & 0xffff, (key >> 16) as u32);
        if let Some(s) = self.slots.get(slot)
            && s.generation.load(Ordering::Acquire) == generation
        {
            s.ev.read(|ev| {
                if let Some(ev) = ev {
                    f(ev);
                }
            });
        }
    }
}

/// The instruction pointer a signal interrupted, from the handler's `ucontext`.
pub(crate) fn ip_of(uctx: *mut libc::c_void) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        if uctx.is_null() {
            return 0;
        }
        let uc = uctx.cast::<libc::ucontext_t>();
        // SAFETY: the kernel passes the interrupted context for SA_SIGINFO.
        unsafe { (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as u64 }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = uctx;
        0
    }
}
