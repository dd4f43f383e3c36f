//! The probe's hot path and its guard: [`Probe::enter`] (one slot load, one hook-word load, a
//! branch) and [`ProbeGuard`], whose drop marks the return. The top of the runtime: it finds
//! the thread's writer (`writer`) and, on a probe's first entry or a hooked one, the registry.

use std::marker::PhantomData;
use std::sync::atomic::Ordering::Relaxed;

use crate::forward::{self, HOOK_FORWARD};
use crate::probe::{
    GUARD_FORWARDED, GUARD_HOOKED, GUARD_LOST, GUARD_OBSERVED, HOOK_ON, HOOK_UNREGISTERED,
    OpenCall, Probe, ProbeEvent,
};
use crate::registry;
use crate::writer::{self, ThreadTrace};

impl Probe {
    /// Enters the probe: the returned guard marks the return when dropped (also on early
    /// return and unwinding). Keep the guard in a named binding (`let _g = ...`), not `_`.
    #[inline(always)]
    #[must_use = "the probe's call ends when the guard drops: bind it with `let _g = ...`"]
    pub fn enter(&'static self) -> ProbeGuard {
        let tt = writer::slot();
        #[cfg(test)]
        writer::at_point(writer::Point::ProbeSlotRead);
        let hook = self.hook.load(Relaxed);
        if hook != 0 {
            return ProbeGuard::new(self, self.enter_cold(hook, current_ip()));
        }
        if tt.is_null() {
            return ProbeGuard::new(self, OpenCall::default());
        }
        // SAFETY: a non-null slot points to this thread's live ThreadTrace (writer::slot's
        // contract: the slot is cleared before the ThreadTrace is freed).
        ProbeGuard::new(self, unsafe { &*tt }.enter(self, 0))
    }

    #[cold]
    #[inline(never)]
    fn enter_cold(&'static self, hook: u32, ip: usize) -> OpenCall {
        let mut hook = hook;
        if hook & HOOK_UNREGISTERED != 0 {
            if registry::register(self, Some(ip)).is_none() {
                // Without an id there is nothing to write: this one entry goes unobserved.
                return OpenCall::default();
            }
            hook = self.hook.load(Relaxed);
        }
        // Under `perfaux record -- ./prog`: the runtime traces the call (crate::forward).
        // An exactly named probe is keyed at the runtime by itself, not by the code it sits in.
        let at = if self.is_exact() {
            self as *const Probe as usize
        } else {
            ip
        };
        if hook & HOOK_FORWARD != 0 && forward::enter(self as *const Probe as usize, at) {
            return OpenCall {
                flags: GUARD_HOOKED | GUARD_FORWARDED,
                ..OpenCall::default()
            };
        }
        let mut flags = 0;
        if hook & HOOK_ON != 0 && registry::call_hook(self, ProbeEvent::Enter) {
            flags |= GUARD_HOOKED;
        }
        // The hook may have installed, paused or removed this thread's writer: reload.
        let tt = writer::slot();
        if tt.is_null() {
            return OpenCall {
                flags,
                ..OpenCall::default()
            };
        }
        // SAFETY: as in `enter`.
        unsafe { &*tt }.enter(self, flags)
    }
}

/// The open call of a probe; dropping it marks the return. Not `Send`: a call returns on the
/// thread it was made on.
#[derive(Debug)]
pub struct ProbeGuard {
    probe: &'static Probe,
    pub(crate) depth: u32,
    pub(crate) epoch: u32,
    pub(crate) flags: u8,
    _not_send: PhantomData<*const ()>,
}

impl ProbeGuard {
    #[inline(always)]
    pub(crate) fn new(probe: &'static Probe, call: OpenCall) -> ProbeGuard {
        // Flat fields, not an OpenCall inside: the guard is built from registers, as when the
        // writer built it (an embedded OpenCall measured four extra moves on the entry).
        ProbeGuard {
            probe,
            depth: call.depth,
            epoch: call.epoch,
            flags: call.flags,
            _not_send: PhantomData,
        }
    }
}

impl ProbeGuard {
    /// The probe this guard entered.
    pub fn probe(&self) -> &'static Probe {
        self.probe
    }

    /// Ties `value` to this call in the trace (a TAG packet after its ENTER): perfaux-tracing
    /// gives each entry of a `tracing` span the span's id, so that an async task's polls,
    /// each a call of their own, read as one span. Call it right after the entry, before
    /// any other probe of the thread is entered. Nothing when the entry was not written.
    pub fn tag(&self, value: u64) {
        if self.flags & GUARD_FORWARDED != 0 {
            forward::tag(value);
        } else if self.flags & GUARD_OBSERVED != 0 {
            let tt = writer::slot();
            if !tt.is_null() {
                // SAFETY: as in `Probe::enter`.
                unsafe { &*tt }.tag(value);
            }
        }
    }

    /// Forgets the open call: dropping the guard then marks no return and calls no hook. For a
    /// call whose entry belongs to another trace: a forked child returns through the calls its
    /// parent opened, whose entries are in the parent's trace (after
    /// [`crate::writer::forget_after_fork`]).
    pub fn forget_call(&mut self) {
        self.flags = 0;
    }
}

impl Drop for ProbeGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.flags != 0 {
            self.drop_observed();
        }
    }
}

impl ProbeGuard {
    /// Marks the return now, as the drop would; the guard is left inert (its drop then does
    /// nothing), for code that keeps guards in place on a stack of its own.
    #[inline(always)]
    pub fn end_in_place(&mut self) {
        self.drop_now();
    }

    /// What the drop does, now; the guard is left inert.
    #[inline(always)]
    pub(crate) fn drop_now(&mut self) {
        if self.flags != 0 {
            self.drop_observed();
            self.flags = 0;
        }
    }

    #[inline(always)]
    fn drop_observed(&mut self) {
        if self.flags & (GUARD_OBSERVED | GUARD_LOST) != 0 {
            // Not the slot: a pause may have cleared it since the entry, and this call's frame
            // must still come off the shadow stack.
            let tt = writer::thread_trace_ptr();
            if !tt.is_null() {
                // SAFETY: TRACE holds null or this thread's live ThreadTrace (its release
                // clears TRACE before freeing it).
                let t: &ThreadTrace = unsafe { &*tt };
                t.exit(OpenCall {
                    depth: self.depth,
                    epoch: self.epoch,
                    flags: self.flags,
                });
            }
        }
        if self.flags & GUARD_HOOKED != 0 {
            // A forwarded call (crate::forward) is a hooked one whose hook is the runtime's.
            if self.flags & GUARD_FORWARDED != 0 {
                forward::exit(self.probe as *const Probe as usize);
            } else {
                registry::call_hook(self.probe, ProbeEvent::Exit);
            }
        }
    }
}

/// An address inside the function this is inlined into.
#[inline(always)]
fn current_ip() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let ip: usize;
        // SAFETY: `lea` of the instruction pointer reads no memory and changes nothing but
        // the output register.
        unsafe {
            core::arch::asm!("lea {}, [rip]", out(reg) ip, options(nomem, nostack, preserves_flags));
        }
        ip
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}
