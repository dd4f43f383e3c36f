//! A traced thread: its slot, its trace event over the slot's memory, and its return stack.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use perfaux_abi::attr::AttrFlags;
use perfaux_core::{EventFd, Mmap, Prot, Target, page_size, perf_event_open_attr};
use perfaux_preload_abi::{
    Control, HEADER_FDS, MAX_SLOTS, header, open_error_word, open_step, slot,
};
use perfaux_ring::RingMemory;
use perfaux_swtrace::{Lane, Probe, ProbeGuard};

/// Open calls kept per thread; deeper calls are counted and go untraced.
const STACK_DEPTH: usize = 8192;

/// The thread's events and mappings over its slot's memory.
struct Traced {
    /// `None` once dropped.
    events: Option<TracedEvents>,
    slot: usize,
    /// The process that opened them: a forked child that kept its parent's (a fork from a
    /// signal handler that interrupted the thread's start) neither closes them nor ends the
    /// parent's slot, which the parent's thread still writes.
    pid: i32,
}

/// Fields drop in order: the mappings (held for their life) before the events.
struct TracedEvents {
    _aux: Mmap,
    _data: Mmap,
    /// The other events (probes, samplers, the uevent stream), redirected into this buffer.
    members: Vec<EventFd>,
    fd: EventFd,
}

impl Drop for Traced {
    /// The events are disabled (the trace's last PERF_RECORD_AUX written, aux_head published),
    /// unmapped and closed; only then is the slot ENDED: the recorder takes its last bytes and
    /// gives the slot to the next thread, so nothing of this one may write its memory after.
    fn drop(&mut self) {
        // SAFETY: getpid has no preconditions.
        if self.pid != unsafe { libc::getpid() } {
            std::mem::forget(self.events.take());
            return;
        }
        if let Some(ev) = self.events.take() {
            wait_for_room_to_say_loss(&ev.fd);
            for m in &ev.members {
                let _ = m.disable(0);
            }
            let _ = ev.fd.disable(0);
            drop(ev);
        }
        if let Some(ctl) = crate::control() {
            ctl.slot_word(self.slot, slot::STATE)
                .store(slot::ENDED, Ordering::Release);
        }
    }
}

/// Room in the data area for the records a thread's end writes: its trace's last
/// PERF_RECORD_AUX and the PERF_RECORD_LOST of what it dropped (each with its `sample_id`).
const END_RECORDS_ROOM: u64 = 512;

/// A thread that dropped records (uevents into a full data area, refused with ENOSPC) has them
/// said in a PERF_RECORD_LOST at its events' close, which needs room in the data area: the
/// recorder, which drains every millisecond, is given up to [`SLOT_WAIT`] to make it (the
/// kernel writes no such record; its count would wait for a next record that never comes).
fn wait_for_room_to_say_loss(fd: &EventFd) {
    let Some(rb) = fd.event().buffer() else {
        return;
    };
    let data = rb.data();
    let start = std::time::Instant::now();
    while data.lost() != 0
        && data.data_space() < END_RECORDS_ROOM
        && start.elapsed() < SLOT_WAIT
        && !crate::control().is_none_or(|c| crate::recording_closed(&c))
    {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

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
    /// The writer's head word (swtrace's `aux_head_word`) and the slot's WRITER_HEAD word,
    /// both null until the thread traces: the mirror after every hook is these two pointers,
    /// not a thread-local lookup, a RefCell and a control-area index (a third of the hook
    /// path's cost when they were).
    head_src: Cell<*const AtomicU64>,
    head_dst: Cell<*const AtomicU64>,
    /// The thread's writer state, once it traces: the hooks enter and end calls through it
    /// (swtrace's thread-local reads done once here).
    lane: Cell<Option<Lane>>,
}

impl Drop for Thread {
    /// Thread exit: the open calls end (innermost first), then the event.
    fn drop(&mut self) {
        let stack = self.stack.get_mut();
        // Frames still hijacked keep their return addresses here: a thread that exits with
        // them open never returns through them (exit, pthread_exit).
        while let Some(f) = stack.pop() {
            drop(f.guard);
        }
        self.mirror_head();
        self.head_src.set(std::ptr::null());
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
            head_src: Cell::new(std::ptr::null()),
            head_dst: Cell::new(std::ptr::null()),
            lane: Cell::new(None),
        }
    };
    /// Set at the thread's first hook (`start`). No destructor, so reading it registers
    /// nothing: the fork handler looks here before it touches THREAD, whose first use registers
    /// a destructor (glibc allocates then), which a fork from a signal handler must not do.
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

impl Thread {
    /// A hook's start: false if this thread is inside a hook already (a signal handler that
    /// interrupted one); opens the thread's events on its first hook. Each hook's body follows
    /// inline (`#[inline(always)]` functions: a closure passed in was kept out of line, a
    /// call and six saved registers more on each entry and return).
    #[inline(always)]
    fn begin_hook(&self) -> bool {
        if self.busy.replace(true) {
            return false;
        }
        if self.state.get() == UNTRIED {
            self.start();
        }
        true
    }

    /// A hook's end: the head mirrored if the thread traced, the section left.
    #[inline(always)]
    fn end_hook(&self, tracing: bool) {
        if tracing {
            self.mirror_head();
        }
        self.busy.set(false);
    }

    /// The thread's first hook (in a forked child: its first after the fork): claims a slot and
    /// opens the events; the calls already open (a forked child's, made by its parent) are
    /// entered again in this trace, outermost first, since the thread returns through them.
    #[cold]
    #[inline(never)]
    fn start(&self) {
        STARTED.with(|s| s.set(true));
        let t = crate::control().and_then(|c| open(&c));
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
        self.head_src.set(std::ptr::null());
        self.head_dst.set(std::ptr::null());
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

    /// Mirrors the writer's head into the slot (after the packets it covers: Release).
    #[inline(always)]
    fn mirror_head(&self) {
        let (src, dst) = (self.head_src.get(), self.head_dst.get());
        if !src.is_null() {
            // SAFETY: set together in `start_mirror` while the thread traces: `src` is this
            // thread's writer head, which lives until the thread's exit (swtrace's
            // aux_head_word contract) and is cleared with `traced` before that; `dst` is a word
            // of the control mapping, which is never unmapped. Both are only read or stored
            // atomically. (The leaked state of a forked child's parent stays mapped too.)
            let head = unsafe { (*src).load(Ordering::Relaxed) };
            // SAFETY: as above.
            unsafe { (*dst).store(head, Ordering::Release) };
        }
    }

    /// Points the mirror at the writer's head and the slot's word (once the event is enabled
    /// and the writer's state exists).
    fn start_mirror(&self) {
        let src = perfaux_swtrace::writer::aux_head_word();
        let slot = self.traced.borrow().as_ref().map(|t| t.slot);
        if let (false, Some(ctl), Some(i)) = (src.is_null(), crate::control(), slot) {
            self.head_dst
                .set(ctl.slot_word(i, slot::WRITER_HEAD) as *const AtomicU64);
            self.head_src.set(src);
        }
    }

    /// -finstrument-functions entry into the function at `addr` whose return address is at
    /// `slot` (0: not found). Frames whose slot is at or below it are gone (a longjmp left
    /// them) and end first.
    #[inline(always)]
    pub(crate) fn enter(&self, addr: usize, slot: usize) {
        let _ = self.enter_as(addr, addr, slot);
    }

    /// A Rust probe's entry (swtrace's `forward`): the call of the function containing `ip`,
    /// ended by [`Thread::exit`] of `key` (the probe's address: a Rust probe's return knows
    /// its probe, not the function). Whether the call was taken (pushed, or counted past the
    /// stack's depth), so that its return is to come here: an entry not taken must not send
    /// its return, which would end an older open call of the same probe (recursion).
    pub(crate) fn enter_forwarded(&self, ip: usize, key: usize) -> bool {
        self.enter_as(ip, key, 0)
    }

    /// Entry into the function at `addr`, ended by the exit of `key`.
    #[inline(always)]
    fn enter_as(&self, addr: usize, key: usize, slot: usize) -> bool {
        if !self.begin_hook() {
            return false;
        }
        let tracing = self.state.get() == TRACING;
        let taken = tracing && self.enter_traced(addr, key, slot);
        self.end_hook(tracing);
        taken
    }

    /// [`Thread::enter_as`] inside the hook section of a tracing thread.
    #[inline(always)]
    fn enter_traced(&self, addr: usize, key: usize, slot: usize) -> bool {
        let mut st = self.stack.borrow_mut();
        if slot != 0 && self.overflow.get() == 0 {
            while st.last().is_some_and(|f| f.slot != 0 && f.slot <= slot) {
                drop(st.pop());
            }
        }
        let Some(p) = crate::intern::probe_for(addr) else {
            return false;
        };
        if st.len() >= STACK_DEPTH || self.overflow.get() > 0 {
            self.overflow.set(self.overflow.get() + 1);
            return true;
        }
        push_frame(&mut st, key, self.enter_probe(p), slot, 0, 0);
        true
    }

    /// -pg / -mfentry entry into the function at `addr` whose return address is at
    /// `parent_loc`: the call is entered and its return address replaced by the return
    /// trampoline's. Frames at or below `parent_loc` on the stack are gone (a longjmp left them)
    /// and end first.
    ///
    /// # Safety
    /// `parent_loc` is the live return-address slot of the calling function's frame.
    #[inline(always)]
    pub(crate) unsafe fn enter_hijack(&self, addr: usize, parent_loc: *mut usize) {
        if !self.begin_hook() {
            return;
        }
        let tracing = self.state.get() == TRACING;
        if tracing {
            // SAFETY: the caller's contract.
            unsafe { self.enter_hijack_traced(addr, parent_loc) };
        }
        self.end_hook(tracing);
    }

    /// [`Thread::enter_hijack`] inside the hook section of a tracing thread.
    ///
    /// # Safety
    /// As [`Thread::enter_hijack`].
    #[inline(always)]
    unsafe fn enter_hijack_traced(&self, addr: usize, parent_loc: *mut usize) {
        let mut st = self.stack.borrow_mut();
        let loc = parent_loc as usize;
        let trampoline = crate::trampoline::return_trampoline_addr();
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
            // Untraced; the slot may have held the trampoline for a popped frame.
            // SAFETY: as above.
            unsafe { parent_loc.write(ret) };
            return;
        };
        push_frame(&mut st, addr, self.enter_probe(p), loc, loc, ret);
        // SAFETY: as above.
        unsafe { parent_loc.write(crate::trampoline::return_trampoline_addr()) };
    }

    /// Before an exception unwinds the stack (crate::unwind): every open call's hijacked return
    /// address is put back, so the unwinder finds the real callers. The frames stay open,
    /// marked restored (`parent_loc` 0, `ret` kept).
    pub(crate) fn restore_for_unwind(&self) {
        // Whatever the state: a forked child not yet started, or a thread whose events failed,
        // still holds hijacked frames.
        if self.busy.replace(true) {
            return;
        }
        if let Ok(mut st) = self.stack.try_borrow_mut() {
            let trampoline = crate::trampoline::return_trampoline_addr();
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
    /// [`Thread::restore_for_unwind`] restored are hijacked again.
    pub(crate) fn rehijack_after_catch(&self, sp: usize) {
        if self.busy.replace(true) {
            return;
        }
        if let Ok(mut st) = self.stack.try_borrow_mut() {
            while st.last().is_some_and(|f| f.slot != 0 && f.slot < sp) {
                drop(st.pop());
            }
            let trampoline = crate::trampoline::return_trampoline_addr();
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
        self.mirror_head();
    }

    /// The return trampoline's exit: `sp` is the stack pointer after the hijacked return
    /// (its slot was `sp - 8`). Ends that call (and frames a longjmp left below it) and returns
    /// the original return address; `None` if no frame has that slot.
    pub(crate) fn exit_hijacked(&self, sp: usize) -> Option<usize> {
        // No `begin_hook`: a hijacked return must find its address even inside a hook.
        let mut st = self.stack.try_borrow_mut().ok()?;
        let loc = sp - 8;
        let pos = st.iter().rposition(|f| f.parent_loc == loc)?;
        let busy = self.busy.replace(true);
        if !busy && self.state.get() == UNTRIED {
            // A forked child returning through its parent's calls before any hook: its trace
            // starts here (`start` re-enters the frames where they are).
            drop(st);
            self.start();
            st = match self.stack.try_borrow_mut() {
                Ok(s) => s,
                Err(_) => {
                    self.busy.set(busy);
                    return None;
                }
            };
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
        if !busy {
            drop(st);
            self.mirror_head();
        }
        self.busy.set(busy);
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
        if !self.begin_hook() {
            return;
        }
        let tracing = self.state.get() == TRACING;
        if tracing {
            self.exit_traced(addr);
        }
        self.end_hook(tracing);
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
        // The innermost call, nearly always; else a search (frames a longjmp skipped).
        let top = st.len().checked_sub(1).filter(|&i| ends(&st[i]));
        if let Some(pos) = top.or_else(|| st.iter().rposition(ends)) {
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
) {
    let Some(dst) = st.spare_capacity_mut().first_mut() else {
        st.push(Frame {
            addr,
            guard,
            slot,
            parent_loc,
            ret,
        });
        return;
    };
    dst.write(Frame {
        addr,
        guard,
        slot,
        parent_loc,
        ret,
    });
    let len = st.len();
    // SAFETY: the element at `len` (the first spare one) was just written whole.
    unsafe { st.set_len(len + 1) };
}

/// Claims a slot and opens this thread's events, the trace event over the slot's memory.
fn open(ctl: &Control) -> Option<Traced> {
    if crate::recording_closed(ctl) {
        return None;
    }
    crate::start_process(ctl);
    let nslots = (ctl.word(header::NSLOTS).load(Ordering::Acquire) as usize).min(MAX_SLOTS);
    let Some(i) = claim_slot(ctl, nslots) else {
        ctl.word(header::NO_SLOT).fetch_add(1, Ordering::AcqRel);
        return None;
    };
    let t = open_slot(ctl, i);
    if t.is_none() {
        ctl.slot_word(i, slot::STATE)
            .store(slot::ENDED, Ordering::Release);
    }
    t
}

/// How long a thread waits for the recorder to free a slot whose thread ended.
const SLOT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Claims a FREE slot. If none is, but a slot's thread ended (the recorder frees it at its next
/// drain, a millisecond or so: a program that makes short threads one after another can end
/// them faster) or its process did (`_exit`, a crash: the recorder sees that through a pidfd,
/// [`held_by_gone_process`]), waits for it, up to [`SLOT_WAIT`]; not when every slot's thread
/// still runs.
fn claim_slot(ctl: &Control, nslots: usize) -> Option<usize> {
    let start = std::time::Instant::now();
    // Looked for at the first miss and every few milliseconds after (a few syscalls a slot):
    // another thread may take the slot freed meanwhile.
    let mut gone_held = false;
    let mut tries = 0u32;
    loop {
        let claimed = (0..nslots).find(|&i| {
            ctl.slot_word(i, slot::STATE)
                .compare_exchange(
                    slot::FREE,
                    slot::CLAIMED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        });
        if claimed.is_some() {
            return claimed;
        }
        let to_be_freed = (0..nslots).any(|i| {
            let w = |o| ctl.slot_word(i, o).load(Ordering::Acquire);
            w(slot::STATE) == slot::ENDED && w(slot::EVENT_ID) != 0 && w(slot::OPEN_ERROR) == 0
        });
        if !to_be_freed && tries.is_multiple_of(16) {
            gone_held = (0..nslots).any(|i| held_by_gone_process(ctl, i));
        }
        tries += 1;
        let to_be_freed = to_be_freed || gone_held;
        if !to_be_freed || start.elapsed() >= SLOT_WAIT || crate::recording_closed(ctl) {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Whether slot `i` is TRACING for a process that has exited (a zombie too: no thread of it is
/// left to end the slot), of this pid namespace, which the recorder watches too (it frees such
/// a slot within a pass).
fn held_by_gone_process(ctl: &Control, i: usize) -> bool {
    let w = |o| ctl.slot_word(i, o).load(Ordering::Acquire);
    let ns = crate::pid_ns();
    if w(slot::STATE) != slot::TRACING
        || ns == 0
        || w(slot::PID_NS) != ns
        || ctl.word(header::WATCHED_PID_NS).load(Ordering::Acquire) != ns
    {
        return false;
    }
    let Some(pid) = libc::pid_t::try_from(w(slot::PID)).ok().filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: `fd` was just opened and is owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call; no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLIN != 0
}

fn dup_fd(ctl: &Control, off: usize) -> Result<OwnedFd, i32> {
    crate::memfds::ring(ctl.word(off).load(Ordering::Acquire))
}

fn open_slot(ctl: &Control, i: usize) -> Option<Traced> {
    let tid = perfaux_core::thread::gettid();
    ctl.slot_word(i, slot::TID)
        .store(tid as u64, Ordering::Relaxed);
    let events = crate::events::all();
    let einval = || perfaux_core::Error::new(libc::EINVAL, "the recorder's event table");
    let owner = events
        .iter()
        .position(|e| e.attr.type_ == perfaux_pmus::SWTRACE_TYPE)
        .ok_or_else(einval);
    let owner = failed(ctl, i, 0, open_step::OPEN, owner)?;
    // The recorder's memory for the buffer (its descriptors: inherited, or through /proc).
    let ring = |off: usize, step: u64| {
        let mem = dup_fd(ctl, off)
            .map_err(|errno| perfaux_core::Error::new(errno, "the ring's memfd"))
            .and_then(|fd| {
                RingMemory::open_shared(fd)
                    .map_err(|_| perfaux_core::Error::new(libc::EINVAL, "the ring's memfd"))
            });
        failed(ctl, i, owner, step, mem).map(Arc::new)
    };
    let data_mem = ring(HEADER_FDS + i * 16, open_step::MAP_DATA)?;
    let aux_mem = ring(HEADER_FDS + i * 16 + 8, open_step::MAP_AUX)?;
    let data_pages = data_mem.layout().data_size / page_size();
    let aux_pages = aux_mem.layout().aux_size / page_size();
    // As perf record opens them (ThreadRing::open): each event in order, a member with its
    // leader's fd as group_fd; the trace event owns the buffer, the others write into it.
    let mut fds: Vec<EventFd> = Vec::with_capacity(events.len());
    for (k, e) in events.iter().enumerate() {
        let group_fd = if e.leader == k {
            -1
        } else {
            let leader = fds.get(e.leader).map(EventFd::as_raw).ok_or_else(einval);
            failed(ctl, i, k, open_step::OPEN, leader)?
        };
        let mut attr = e.attr;
        // Enabled once the buffer is mapped.
        attr.flags |= AttrFlags::DISABLED;
        let opened = perf_event_open_attr(&attr, Target::Thread(tid), -1, group_fd, 0);
        fds.push(failed(ctl, i, k, open_step::OPEN, opened)?);
    }
    let fd = fds.remove(owner);
    let data = fd.mmap_over(0, 1 + data_pages, Prot::READ_WRITE, data_mem);
    let data = failed(ctl, i, owner, open_step::MAP_DATA, data)?;
    let page = page_size() as u64;
    let aux_off = (1 + data_pages as u64) * page;
    let placed = data.set_aux_area(aux_off, aux_pages as u64 * page);
    failed(ctl, i, owner, open_step::MAP_AUX, placed)?;
    let prot = if ctl.word(header::OVERWRITE).load(Ordering::Acquire) != 0 {
        Prot::READ_ONLY
    } else {
        Prot::READ_WRITE
    };
    let aux = fd.mmap_over(aux_off / page, aux_pages, prot, aux_mem);
    let aux = failed(ctl, i, owner, open_step::MAP_AUX, aux)?;
    // The members, in event order without the owner.
    let members = (0..events.len()).filter(|&k| k != owner);
    for (m, k) in fds.iter().zip(members.clone()) {
        failed(ctl, i, k, open_step::SET_OUTPUT, m.set_output(fd.as_raw()))?;
    }
    // The kernel's word, not the fork handler's: a child made without fork handlers (`_Fork`,
    // a raw clone) that opens a slot is named as itself, which the recorder watches for its
    // end.
    // SAFETY: getpid has no preconditions.
    ctl.slot_word(i, slot::PID)
        .store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
    write_comm(ctl, i);
    crate::fork::write_slot(ctl, i);
    ctl.slot_word(i, slot::EVENT_ID)
        .store(fd.id(), Ordering::Relaxed);
    for k in 0..events.len() {
        let id = match k.cmp(&owner) {
            std::cmp::Ordering::Less => fds[k].id(),
            std::cmp::Ordering::Equal => fd.id(),
            std::cmp::Ordering::Greater => fds[k - 1].id(),
        };
        ctl.slot_event_id(i, k).store(id, Ordering::Relaxed);
    }
    ctl.slot_word(i, slot::STATE)
        .store(slot::TRACING, Ordering::Release);
    for (m, k) in fds.iter().zip(members) {
        failed(ctl, i, k, open_step::ENABLE, m.enable(0))?;
    }
    failed(ctl, i, owner, open_step::ENABLE, fd.enable(0))?;
    Some(Traced {
        events: Some(TracedEvents {
            _aux: aux,
            _data: data,
            members: fds,
            fd,
        }),
        slot: i,
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
    })
}

/// The thread's name and when it opened its events, for its PERF_RECORD_COMM.
fn write_comm(ctl: &Control, i: usize) {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into the buffer given.
    if unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0 {
        name[15] = 0;
        let (a, b) = name.split_at(8);
        for (off, w) in [(slot::COMM, a), (slot::COMM + 8, b)] {
            let w = u64::from_ne_bytes(w.try_into().unwrap_or_default());
            ctl.slot_word(i, off).store(w, Ordering::Relaxed);
        }
    }
    ctl.slot_word(i, slot::OPEN_TIME)
        .store(perfaux_swtrace::clock::monotonic_ns(), Ordering::Relaxed);
    ctl.slot_word(i, slot::IMAGE_TIME)
        .store(crate::image_time(), Ordering::Relaxed);
    ctl.slot_word(i, slot::PID_NS)
        .store(crate::pid_ns(), Ordering::Relaxed);
}

/// `r`'s value; or, if it failed, `None` after saying which event `k` and step failed in
/// slot `i`'s OPEN_ERROR word (the recorder names them and the errno at the end).
fn failed<T>(
    ctl: &Control,
    i: usize,
    k: usize,
    step: u64,
    r: perfaux_core::Result<T>,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(err) => {
            ctl.slot_word(i, slot::OPEN_ERROR)
                .store(open_error_word(step, k, err.errno), Ordering::Release);
            None
        }
    }
}

/// Opens this thread's events if no hook did yet (for a uevent before the first traced call);
/// whether the thread is traced.
pub(crate) fn ensure_traced() -> bool {
    THREAD
        .try_with(|t| {
            if t.begin_hook() {
                t.end_hook(t.state.get() == TRACING);
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
            && let Some(ev) = tr.as_ref().and_then(|tr| tr.events.as_ref())
        {
            let _ = ev.fd.disable(0);
        }
    });
}

/// The fork handler's part for the thread that forked (see [`Thread::forget_parents`]).
pub(crate) fn forked() {
    if STARTED.with(Cell::get) {
        let _ = THREAD.try_with(Thread::forget_parents);
    }
}
