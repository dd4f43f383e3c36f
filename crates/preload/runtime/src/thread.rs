//! A traced thread: its return stack and the per-call code of the hooks, over the events it
//! opens at its first hook ([`crate::traced`], in a slot of its own, [`crate::slot`]).
//!
//! The -pg / -mfentry hooks ([`crate::trampoline`]) call in here and hand in the return
//! trampoline's address, so that this module imports none of the modules that call it.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use perfaux_swtrace::{Lane, Probe, ProbeGuard};

use crate::traced::Traced;

use perfaux_preload_abi::STACK_DEPTH;

/// An open call on a thread's return stack.
struct Frame {
    /// The function's address (as the hook named it).
    addr: usize,
    guard: ProbeGuard,
    /// Where the function's return address lives (0: not known): tells live frames from
    /// frames a longjmp left.
    slot: usize,
    /// -pg / -mfentry: `slot`, hijacked to the return trampoline; 0 for
    /// -finstrument-functions.
    parent_loc: usize,
    /// The original return address.
    ret: usize,
    /// -finstrument-functions: the call site the entry hook named (the return address
    /// found at `slot`); 0 otherwise. An inlined function's hooks name its container's.
    site: usize,
}

/// States of [`Thread::state`].
const UNTRIED: u8 = 0;
const TRACING: u8 = 1;
const OFF: u8 = 2;

pub(crate) struct Thread {
    state: Cell<u8>,
    busy: Cell<bool>,
    /// Calls deeper than STACK_DEPTH not on the stack (their exits are skipped).
    overflow: Cell<usize>,
    stack: RefCell<Vec<Frame>>,
    traced: RefCell<Option<Traced>>,
    /// The thread's writer state, once it traces: the hooks enter and end calls through it
    /// (swtrace's thread-local reads done once here).
    lane: Cell<Option<Lane>>,
}

impl Drop for Thread {
    /// Thread exit: the open calls end (innermost first), then the event.
    fn drop(&mut self) {
        // From here the hooks reach `THREAD`, which refuses them.
        current::set(std::ptr::null());
        let stack = self.stack.get_mut();
        // Frames still hijacked keep their return addresses here: a thread that exits with
        // them open never returns through them (exit, pthread_exit).
        while let Some(f) = stack.pop() {
            drop(f.guard);
        }
        // The slot's head word is the recorder's from here (the slot goes to another thread).
        // SAFETY: null: nothing is stored anywhere.
        unsafe { perfaux_swtrace::writer::set_head_mirror(std::ptr::null()) };
        drop(self.traced.get_mut().take());
    }
}

thread_local! {
    pub(crate) static THREAD: Thread = const {
        Thread {
            state: Cell::new(UNTRIED),
            busy: Cell::new(false),
            overflow: Cell::new(0),
            stack: RefCell::new(Vec::new()),
            traced: RefCell::new(None),
            lane: Cell::new(None),
        }
    };
    /// Set at the thread's first hook (`start`). No destructor, so reading it registers
    /// nothing: the fork handler looks here before it touches THREAD, whose first use registers
    /// a destructor (glibc allocates then), which a fork from a signal handler must not do.
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

/// This thread's [`Thread`], reached from the hooks without the thread-local machinery:
/// a word of static TLS read in two instructions (initial-exec model: the runtime is
/// preloaded, so its TLS block is in the static area at a fixed offset from the thread
/// pointer), where `THREAD` costs a TLS-descriptor call and its destructor's state check at
/// every hook. Null until the thread's first hook, and from the start of `Thread`'s drop on:
/// then [`with`] takes `THREAD` itself, which registers the destructor, or refuses once it
/// ran, as before.
#[cfg(target_arch = "x86_64")]
mod current {
    use super::Thread;

    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl perfaux_runtime_current_thread",
        ".hidden perfaux_runtime_current_thread",
        ".type perfaux_runtime_current_thread,@object",
        ".size perfaux_runtime_current_thread,8",
        "perfaux_runtime_current_thread:",
        ".zero 8",
        ".popsection",
    );

    /// The word's value on this thread.
    #[inline(always)]
    pub(super) fn get() -> *const Thread {
        let p: *const Thread;
        // SAFETY: reads this thread's own word of static TLS (its offset from the GOT, the
        // word at that offset from fs): no other memory, no stack, no flags.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr [rip + perfaux_runtime_current_thread@GOTTPOFF]",
                "mov {p}, qword ptr fs:[{p}]",
                p = out(reg) p,
                options(nostack, readonly, preserves_flags, pure),
            );
        }
        p
    }

    /// Sets the word on this thread.
    pub(super) fn set(t: *const Thread) {
        // SAFETY: writes this thread's own word of static TLS, which nothing else reads
        // than this module's `get` on this thread.
        unsafe {
            std::arch::asm!(
                "mov {o}, qword ptr [rip + perfaux_runtime_current_thread@GOTTPOFF]",
                "mov qword ptr fs:[{o}], {t}",
                o = out(reg) _,
                t = in(reg) t,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// [`current`] elsewhere: a thread-local with no destructor (no state check to read it).
#[cfg(not(target_arch = "x86_64"))]
mod current {
    use super::Thread;
    use std::cell::Cell;

    thread_local! {
        static CURRENT: Cell<*const Thread> = const { Cell::new(std::ptr::null()) };
    }

    #[inline(always)]
    pub(super) fn get() -> *const Thread {
        CURRENT.with(Cell::get)
    }

    pub(super) fn set(t: *const Thread) {
        CURRENT.with(|c| c.set(t));
    }
}

/// `f` on this thread's [`Thread`]; `None` once its destructor ran (as `THREAD.try_with`).
/// `f` is called at one place, so that it stays inline in the hooks.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Thread) -> R) -> Option<R> {
    let mut p = current::get();
    if p.is_null() {
        p = first();
        if p.is_null() {
            return None;
        }
    }
    // SAFETY: set by `first` from THREAD's own reference on this thread, cleared at the
    // start of its drop: the thread's `Thread` is alive (a signal handler's hook between
    // std marking THREAD destroyed and that drop's start still finds it whole).
    Some(f(unsafe { &*p }))
}

/// [`with`]'s `Thread` through `THREAD` (the thread's first hook, or after its destructor
/// started: null then), kept for the next hooks while its destructor has not run.
#[cold]
#[inline(never)]
fn first() -> *const Thread {
    THREAD
        .try_with(|t| {
            let p: *const Thread = t;
            current::set(p);
            p
        })
        .unwrap_or(std::ptr::null())
}

impl Thread {
    /// A hook's start: false if this thread is inside a hook already (a signal handler that
    /// interrupted one); opens the thread's events on its first hook. Each hook's body follows
    /// inline (`#[inline(always)]` functions: a closure passed in was kept out of line, a
    /// call and six saved registers more on each entry and return).
    /// `None` if this thread is inside a hook already, else whether it traces (one test of
    /// the state when it does).
    #[inline(always)]
    fn begin_hook(&self) -> Option<bool> {
        if self.busy.replace(true) {
            return None;
        }
        let state = self.state.get();
        if state == TRACING {
            return Some(true);
        }
        if state == UNTRIED {
            self.start();
        }
        Some(self.state.get() == TRACING)
    }

    /// A call entered while this thread was inside a hook already: a signal handler that
    /// interrupted the hook made it, and the thread's writer may be mid-packet, so it is not
    /// traced; it is counted for the recorder to say (`calls_in_handlers`), unless the
    /// thread does not trace anyway.
    #[cold]
    #[inline(never)]
    fn missed_inside_hook(&self) {
        if self.state.get() != OFF
            && let Some(ctl) = crate::control()
        {
            ctl.header()
                .calls_in_handlers
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A call entered deeper than the return stack holds: not traced, counted for the recorder
    /// to say (`calls_past_depth`).
    #[cold]
    #[inline(never)]
    fn missed_past_depth(&self) {
        if let Some(ctl) = crate::control() {
            ctl.header()
                .calls_past_depth
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A hook's end: the section left. (The slot's head word needs no copy here: the writer
    /// stores its head there after every packet, `start_mirror`.)
    #[inline(always)]
    fn end_hook(&self) {
        self.busy.set(false);
    }

    /// The thread's first hook (in a forked child: its first after the fork): claims a slot and
    /// opens the events; the calls already open (a forked child's, made by its parent) are
    /// entered again in this trace, outermost first, since the thread returns through them.
    #[cold]
    #[inline(never)]
    fn start(&self) {
        STARTED.with(|s| s.set(true));
        let t = {
            let _no_cancel = crate::no_cancel::NoCancel::new();
            crate::control().and_then(|c| crate::traced::open(&c))
        };
        self.state.set(if t.is_some() { TRACING } else { OFF });
        *self.traced.borrow_mut() = t;
        let mut st = self.stack.borrow_mut();
        if self.state.get() != TRACING {
            // Untraced from here: an open call's return is not marked (its guard is inert).
            return;
        }
        st.reserve_exact(STACK_DEPTH);
        drop(st);
        self.start_mirror();
        // SAFETY: used by this thread's hooks only; cleared by the fork handler
        // (`forget_parents`) before the child's hooks run, and gone with THREAD, whose
        // destructor runs before the state's (swtrace's pthread key).
        self.lane.set(unsafe { Lane::current() });
        for f in self.stack.borrow_mut().iter_mut() {
            // The old guard is inert (`forked`): replacing it marks nothing.
            f.guard = f.guard.probe().enter();
        }
    }

    /// In a forked child, from the fork handler: the thread's slot, events and writer are its
    /// parent's (swtrace's writer state and the core's view of the thread were forgotten just
    /// before): they are forgotten without a write (their drops would disable events, which
    /// writes records into the parent's buffer), the open calls' guards made inert, and the
    /// thread untried, so that its next hook opens events of its own.
    fn forget_parents(&self) {
        if let Ok(mut st) = self.stack.try_borrow_mut() {
            for f in st.iter_mut() {
                f.guard.forget_call();
            }
        }
        self.lane.set(None);
        match self.traced.try_borrow_mut() {
            Ok(mut t) => {
                std::mem::forget(t.take());
                self.state.set(UNTRIED);
            }
            // Forked from a signal handler that interrupted this thread's start: untraced
            // (no write can reach the parent's trace: the writer and events are forgotten).
            Err(_) => self.state.set(OFF),
        }
    }

    /// Has the writer store its head into the slot's WRITER_HEAD word after every packet
    /// (once the event is enabled and the writer's state exists), which the recorder reads
    /// (after a SIGKILL too): where the hooks copied it after each call before (loads of two
    /// pointers, a test and a copy a hook).
    fn start_mirror(&self) {
        let slot = self.traced.borrow().as_ref().map(Traced::slot);
        if let (Some(ctl), Some(i)) = (crate::control(), slot) {
            // SAFETY: a word of the control mapping, which is never unmapped, stored into
            // atomically and by this thread's writer only (its slot's); the mirror is cleared
            // before the slot is released (`Thread`'s drop). A forked child's copy of the
            // writer state has its mirror cleared (`forget_after_fork`).
            unsafe { perfaux_swtrace::writer::set_head_mirror(&ctl.slot(i).writer_head) };
        }
    }

    /// -finstrument-functions entry into the function at `addr`, called from `site`, whose
    /// return address is at `slot` (0: not found). Frames a longjmp left end first: those
    /// whose slot is below it, and at its slot the outermost whose call was another's
    /// (another site, or this function again) and all above it. A frame with the same slot
    /// and site is the container of a function inlined into it (gcc calls the inlined
    /// function's hooks from its container, with the container's call site): it stays open.
    /// Not told apart: another function called from the same site after a longjmp out of
    /// the one before, which stays open under it until its caller returns.
    #[inline(always)]
    pub(crate) fn enter(&self, addr: usize, site: usize, slot: usize) {
        let _ = self.enter_as(addr, addr, site, slot);
    }

    /// A Rust probe's entry (swtrace's `forward`): the call of the function containing `ip`,
    /// ended by [`Thread::exit`] of `key` (the probe's address: a Rust probe's return knows
    /// its probe, not the function). Whether the call was taken (pushed, or counted past the
    /// stack's depth), so that its return is to come here: an entry not taken must not send
    /// its return, which would end an older open call of the same probe (recursion).
    pub(crate) fn enter_forwarded(&self, ip: usize, key: usize) -> bool {
        self.enter_as(ip, key, 0, 0)
    }

    /// Tags the innermost traced call (perfaux-tracing's span id, after the span's entry came
    /// through [`Thread::enter_forwarded`]); nothing past the depth bound, whose calls are
    /// counted, not traced.
    pub(crate) fn tag_innermost(&self, value: u64) {
        let Some(tracing) = self.begin_hook() else {
            return;
        };
        if tracing
            && self.overflow.get() == 0
            && let Some(f) = self.stack.borrow().last()
        {
            f.guard.tag(value);
        }
        self.end_hook();
    }

    /// Entry into the function at `addr`, ended by the exit of `key`.
    #[inline(always)]
    fn enter_as(&self, addr: usize, key: usize, site: usize, slot: usize) -> bool {
        let Some(tracing) = self.begin_hook() else {
            self.missed_inside_hook();
            return false;
        };
        let taken = tracing && self.enter_traced(addr, key, site, slot);
        self.end_hook();
        taken
    }

    /// [`Thread::enter_as`] inside the hook section of a tracing thread.
    #[inline(always)]
    fn enter_traced(&self, addr: usize, key: usize, site: usize, slot: usize) -> bool {
        let mut st = self.stack.borrow_mut();
        // Read once (the atomics between would make the compiler read it again).
        let overflow = self.overflow.get();
        if slot != 0 && overflow == 0 {
            while st.last().is_some_and(|f| f.slot != 0 && f.slot < slot) {
                drop(st.pop());
            }
            // The frames at this slot: containers of inlined functions stay open, unless one
            // of them is gone (another call site, or this function again): then it and
            // everything above it.
            let run = st.iter().rev().take_while(|f| f.slot == slot).count();
            let first = st.len() - run;
            if let Some(k) = st[first..]
                .iter()
                .position(|f| f.site != site || f.addr == addr)
            {
                while st.len() > first + k {
                    drop(st.pop());
                }
            }
        }
        let Some(p) = crate::intern::probe_for(addr) else {
            return false;
        };
        if st.len() >= STACK_DEPTH || overflow > 0 {
            self.overflow.set(overflow + 1);
            self.missed_past_depth();
            return true;
        }
        push_frame(&mut st, key, self.enter_probe(p), slot, 0, 0, site);
        true
    }

    /// -pg / -mfentry entry into the function at `addr` whose return address is at
    /// `parent_loc`: the call is entered and its return address replaced by the return
    /// trampoline's (`trampoline`). Frames at or below `parent_loc` on the stack are gone (a
    /// longjmp left them) and end first.
    ///
    /// # Safety
    /// `parent_loc` is the live return-address slot of the calling function's frame.
    #[inline(always)]
    pub(crate) unsafe fn enter_hijack(
        &self,
        addr: usize,
        parent_loc: *mut usize,
        trampoline: usize,
    ) {
        let Some(tracing) = self.begin_hook() else {
            self.missed_inside_hook();
            return;
        };
        if tracing {
            // SAFETY: the caller's contract.
            unsafe { self.enter_hijack_traced(addr, parent_loc, trampoline) };
        }
        self.end_hook();
    }

    /// [`Thread::enter_hijack`] inside the hook section of a tracing thread.
    ///
    /// # Safety
    /// As [`Thread::enter_hijack`].
    #[inline(always)]
    unsafe fn enter_hijack_traced(&self, addr: usize, parent_loc: *mut usize, trampoline: usize) {
        let mut st = self.stack.borrow_mut();
        let loc = parent_loc as usize;
        // SAFETY: the caller's contract: the slot is live and ours to rewrite until the
        // function returns through it.
        let mut ret = unsafe { parent_loc.read() };
        while let Some(f) = st.pop_if(|f| f.slot != 0 && f.slot <= loc) {
            // A tail call (jmp) from a hijacked function reuses its slot, which still
            // holds the trampoline: the real return address is that frame's.
            if f.parent_loc == loc && ret == trampoline {
                ret = f.ret;
            }
            drop(f);
        }
        if ret == trampoline {
            return;
        }
        let p = crate::intern::probe_for(addr);
        let Some(p) = p.filter(|_| st.len() < STACK_DEPTH) else {
            if p.is_some() {
                self.missed_past_depth();
            }
            // Untraced; the slot may have held the trampoline for a popped frame.
            // SAFETY: as above.
            unsafe { parent_loc.write(ret) };
            return;
        };
        push_frame(&mut st, addr, self.enter_probe(p), loc, loc, ret, 0);
        // SAFETY: as above.
        unsafe { parent_loc.write(trampoline) };
    }

    /// Before an exception unwinds the stack (crate::unwind): every open call's hijacked return
    /// address (where it holds `trampoline`) is put back, so the unwinder finds the real
    /// callers. The frames stay open, marked restored (`parent_loc` 0, `ret` kept).
    pub(crate) fn restore_for_unwind(&self, trampoline: usize) {
        // Whatever the state: a forked child not yet started, or a thread whose events failed,
        // still holds hijacked frames.
        if self.busy.replace(true) {
            return;
        }
        if let Ok(mut st) = self.stack.try_borrow_mut() {
            for f in st.iter_mut().filter(|f| f.parent_loc != 0) {
                let loc = f.parent_loc as *mut usize;
                // SAFETY: the frame is open, so its return-address slot is live on this
                // thread's stack; the hook wrote the trampoline there and nothing else writes
                // it while the call runs (checked before the write).
                if unsafe { loc.read() } == trampoline {
                    // SAFETY: as above.
                    unsafe { loc.write(f.ret) };
                }
                f.parent_loc = 0;
            }
        }
        self.busy.set(false);
    }

    /// In a catch clause (crate::unwind), `sp` inside `__cxa_begin_catch`: the calls whose
    /// return-address slot lies below `sp` were unwound and end here; the calls still open that
    /// [`Thread::restore_for_unwind`] restored are hijacked again (to `trampoline`).
    pub(crate) fn rehijack_after_catch(&self, sp: usize, trampoline: usize) {
        if self.busy.replace(true) {
            return;
        }
        if let Ok(mut st) = self.stack.try_borrow_mut() {
            while st.last().is_some_and(|f| f.slot != 0 && f.slot < sp) {
                drop(st.pop());
            }
            for f in st
                .iter_mut()
                .filter(|f| f.parent_loc == 0 && f.ret != 0 && f.slot != 0)
            {
                let loc = f.slot as *mut usize;
                // SAFETY: the frame is open and its slot at or above `sp`: a live word of this
                // thread's stack, which holds the call's return address (checked) until the
                // call returns.
                if unsafe { loc.read() } == f.ret {
                    // SAFETY: as above.
                    unsafe { loc.write(trampoline) };
                    f.parent_loc = f.slot;
                }
            }
        }
        self.busy.set(false);
    }

    /// The return trampoline's exit: `sp` is the stack pointer after the hijacked return
    /// (its slot was `sp - 8`). Ends that call (and frames a longjmp left below it) and returns
    /// the original return address; `None` if no frame has that slot.
    pub(crate) fn exit_hijacked(&self, sp: usize) -> Option<usize> {
        // No `begin_hook`: a hijacked return must find its address even inside a hook. Busy
        // before the stack is borrowed: a signal handler that comes between must see the
        // section taken (its calls skip the hooks), not enter one that borrows the stack too.
        let busy = self.busy.replace(true);
        let found = self.exit_hijacked_busy(sp, busy);
        self.busy.set(busy);
        found
    }

    /// [`Thread::exit_hijacked`] with the section taken (`busy`: it was already).
    fn exit_hijacked_busy(&self, sp: usize, busy: bool) -> Option<usize> {
        let mut st = self.stack.try_borrow_mut().ok()?;
        let loc = sp - 8;
        let pos = st.iter().rposition(|f| f.parent_loc == loc)?;
        if !busy && self.state.get() == UNTRIED {
            // A forked child returning through its parent's calls before any hook: its trace
            // starts here (`start` re-enters the frames where they are).
            drop(st);
            self.start();
            st = self.stack.try_borrow_mut().ok()?;
        }
        while st.len() > pos + 1 {
            drop(st.pop());
        }
        let ret = st.last_mut().map(|f| {
            self.end_call(&mut f.guard);
            f.ret
        });
        if let Some(len) = st.len().checked_sub(1) {
            // SAFETY: shrinking by the frame just ended, whose guard is inert: only its no-op
            // drop is skipped (popping it copied the whole frame out first).
            unsafe { st.set_len(len) };
        }
        ret
    }

    /// Enters `p` through the thread's lane (as `p.enter()`).
    #[inline(always)]
    fn enter_probe(&self, p: &'static Probe) -> ProbeGuard {
        match self.lane.get() {
            Some(lane) => lane.enter(p),
            None => p.enter(),
        }
    }

    /// Ends the call of `guard` through the thread's lane (as its drop), leaving it inert.
    #[inline(always)]
    fn end_call(&self, guard: &mut ProbeGuard) {
        match self.lane.get() {
            Some(lane) => lane.end(guard),
            None => guard.end_in_place(),
        }
    }

    /// Exit from the function at `addr` (or of a forwarded Rust probe's key): ends its newest
    /// open call and every call opened after it (frames a longjmp skipped).
    #[inline(always)]
    pub(crate) fn exit(&self, addr: usize) {
        let Some(tracing) = self.begin_hook() else {
            return;
        };
        if tracing {
            self.exit_traced(addr);
        }
        self.end_hook();
    }

    /// [`Thread::exit`] inside the hook section of a tracing thread.
    #[inline(always)]
    fn exit_traced(&self, addr: usize) {
        if self.overflow.get() > 0 {
            self.overflow.set(self.overflow.get() - 1);
            return;
        }
        let mut st = self.stack.borrow_mut();
        let ends = |f: &Frame| f.addr == addr && f.parent_loc == 0;
        // The innermost call, nearly always: ended with no search and no frame above it.
        if let Some((top, rest)) = st.split_last_mut()
            && ends(top)
        {
            self.end_call(&mut top.guard);
            let pos = rest.len();
            // SAFETY: shrinking by the frame just ended, left out undropped: that skips only
            // its guard's drop, a no-op for an inert guard.
            unsafe { st.set_len(pos) };
            return;
        }
        // Else a search (frames a longjmp skipped).
        if let Some(pos) = st.iter().rposition(ends) {
            // Innermost first; the call itself ends in place (popping it copied the frame out
            // first), its guard inert.
            while st.len() > pos + 1 {
                drop(st.pop());
            }
            self.end_call(&mut st[pos].guard);
            // SAFETY: shrinking: the frame left out is not dropped, which skips only its
            // guard's drop, a no-op for an inert guard (and a leak of nothing otherwise).
            unsafe { st.set_len(pos) };
        }
    }
}

/// Pushes a frame straight into the stack's spare memory, with no capacity check that could
/// call the allocator: `Vec::push` built the frame on the machine stack and copied it with
/// 16-byte loads over 8-byte stores that had not retired (store-forwarding stalls, a quarter
/// of the entry hook's time, with the guard that swtrace returned through memory). The stack
/// has room (its capacity is reserved when the thread starts tracing, and callers keep
/// it below STACK_DEPTH); if it had none the frame would be pushed the ordinary way.
#[inline(always)]
fn push_frame(
    st: &mut Vec<Frame>,
    addr: usize,
    guard: ProbeGuard,
    slot: usize,
    parent_loc: usize,
    ret: usize,
    site: usize,
) {
    let Some(dst) = st.spare_capacity_mut().first_mut() else {
        st.push(Frame {
            addr,
            guard,
            slot,
            parent_loc,
            ret,
            site,
        });
        return;
    };
    dst.write(Frame {
        addr,
        guard,
        slot,
        parent_loc,
        ret,
        site,
    });
    let len = st.len();
    // SAFETY: the element at `len` (the first spare one) was just written whole.
    unsafe { st.set_len(len + 1) };
}

/// Opens this thread's events if no hook did yet (for a uevent before the first traced call);
/// whether the thread is traced.
pub(crate) fn ensure_traced() -> bool {
    with(|t| {
        if t.begin_hook().is_some() {
            t.end_hook();
        }
        t.state.get() == TRACING
    })
    .unwrap_or(false)
}

/// Ends this thread's trace transaction (its event disabled: PERF_RECORD_AUX written and
/// aux_head published into the recorder's memory), leaving the open calls open: called from
/// the crash handler, so the trace ends in the function that crashed.
pub(crate) fn end_transaction_here() {
    let _ = THREAD.try_with(|t| {
        if let Ok(tr) = t.traced.try_borrow()
            && let Some(tr) = tr.as_ref()
        {
            tr.end_transaction();
        }
    });
}

/// The fork handler's part for the thread that forked (see [`Thread::forget_parents`]).
pub(crate) fn forked() {
    if STARTED.with(Cell::get) {
        let _ = THREAD.try_with(Thread::forget_parents);
    }
}
