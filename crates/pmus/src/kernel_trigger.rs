//! The `ktrigger` PMU: an event of the running kernel (a tracepoint, `page-faults`, ...) as a
//! trigger in a traced thread's group, so that the seed's aux-action (pause, resume) and AUX
//! sampling happen at the kernel's events: `-e syscalls:sys_enter_read/aux-action=resume/`.
//!
//! The kernel cannot reach a trace written in user space; what it can do is signal the thread
//! that triggered the event, synchronously: an event opened with `sigtrap` (Linux 5.13) sends
//! that thread SIGTRAP (`si_code` TRAP_PERF, the event's `sig_data` in `si_perf_data`) on its
//! way back to user space, before it runs another instruction of its own, and never interrupts
//! a system call (it is queued as task work, not as a signal, until then). Each ktrigger event
//! opens such a kernel event on its thread (`remove_on_exec`, which sigtrap requires); the
//! SIGTRAP handler finds the ktrigger event from `sig_data` and counts a hit on it, whose
//! overflow runs the core's path (aux-action, AUX sample, sample output) on that thread, as a
//! probe's hit does.
//!
//! - `config`: the kernel event's `config` (a tracepoint's id, a software event's number);
//! - `config1`: the kernel event's `type` (PERF_TYPE_TRACEPOINT, PERF_TYPE_SOFTWARE);
//! - `config2` bit 0: count in kernel mode too (a kernel tracepoint fires there; without it,
//!   `exclude_kernel`);
//! - `sample_period`: the kernel's period (every Nth hit signals).
//!
//! The program's own SIGTRAP is left alone: a SIGTRAP that is not one of these (another
//! si_code, or a `sig_data` without [`SIG_DATA_MAGIC`]) goes to the program's action: the one
//! installed before, or one the program sets later, which a wrapper of its `sigaction` and
//! `signal` (perfaux's runtime has them) hands to [`set_program_action`] instead of the
//! kernel; if that is the default, the process ends as it would have.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::PERF_ATTR_SIZE_VER7;
use perfaux_abi::errno;
use perfaux_core::driver::{
    Error, Event, EventState, Pmu, PmuCaps, PmuPrivate, Result, SampleData, Target, einval, enoent,
    perf_swevent_event,
};

use super::signal_events::{EventSlots, ip_of};

/// The high half of every `sig_data` this PMU asks for: a SIGTRAP whose data lacks it is not
/// ours.
pub const SIG_DATA_MAGIC: u64 = 0x7061_7578 << 32;
/// `config2` bit: the kernel event counts in kernel mode too.
pub const CONFIG2_KERNEL_MODE: u64 = 1;

/// Triggers a process may have at once.
const NSLOTS: usize = 4096;
/// `TRAP_PERF`, the `si_code` of a sigtrap event's SIGTRAP.
const TRAP_PERF: i32 = 6;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;

fn slots() -> &'static EventSlots {
    static S: OnceLock<EventSlots> = OnceLock::new();
    S.get_or_init(|| EventSlots::new(NSLOTS))
}

/// The action a SIGTRAP not ours goes to: the one SIGTRAP had when this PMU's handler was
/// installed, or the one the program gave later through a wrapper of `sigaction`/`signal`
/// ([`set_program_action`]): its handler (SIG_DFL 0, SIG_IGN 1, else a function) and flags,
/// one record behind one pointer, so that the handler never reads one action's handler with
/// another's flags. A record replaced is leaked: one per call of the program's to set its
/// SIGTRAP action, a handful in a program's life.
#[derive(Clone, Copy)]
struct Chained {
    handler: usize,
    flags: i32,
}

static DEFAULT_ACTION: Chained = Chained {
    handler: libc::SIG_DFL,
    flags: 0,
};
static CHAINED: AtomicPtr<Chained> =
    AtomicPtr::new(&DEFAULT_ACTION as *const Chained as *mut Chained);
/// This PMU's handler is SIGTRAP's.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The program's action now.
fn chained_action() -> Chained {
    // SAFETY: CHAINED always points at DEFAULT_ACTION or at a record leaked by
    // `set_chained`, never freed, never written after it was published.
    unsafe { *CHAINED.load(Ordering::Acquire) }
}

fn set_chained(c: Chained) {
    CHAINED.store(Box::into_raw(Box::new(c)), Ordering::Release);
}

/// Whether this PMU's handler holds SIGTRAP: a wrapper of the program's `sigaction` then
/// passes the program's SIGTRAP action to [`set_program_action`] instead of the kernel.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Whether a SIGTRAP not ours would go to the program's own handler (else: the default).
pub fn chained() -> bool {
    !matches!(chained_action().handler, libc::SIG_DFL | libc::SIG_IGN)
}

/// The program's SIGTRAP action, as its `sigaction(SIGTRAP, new, old)` would set it while
/// this PMU's handler holds the signal: `new` (if given) becomes the action a SIGTRAP not ours
/// goes to, `old` (if given) gets the one before. The handler stays this PMU's.
pub fn set_program_action(new: Option<&libc::sigaction>, old: Option<&mut libc::sigaction>) {
    if let Some(o) = old {
        let c = chained_action();
        // SAFETY: all-zero is a valid sigaction (an empty mask).
        *o = unsafe { std::mem::zeroed() };
        o.sa_sigaction = c.handler;
        o.sa_flags = c.flags;
    }
    if let Some(n) = new {
        set_chained(Chained {
            handler: n.sa_sigaction,
            flags: n.sa_flags,
        });
    }
}

/// SIGTRAP's action set to the default, by the system call itself (not through `signal`,
/// which a wrapper of the program's calls may hold): no restorer is needed for SIG_DFL.
fn reset_to_default(sig: i32) {
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    let ksa = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction(2) reads the kernel's struct given (sigsetsize 8) and writes nothing.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &ksa as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        )
    };
    INSTALLED.store(false, Ordering::Release);
}

/// The PMU.
pub struct KernelTriggerPmu;

/// Per-event state: the kernel's event on the thread, and the slot the handler finds this
/// event in.
struct Trigger {
    fd: OwnedFd,
    slot: usize,
}

/// The kernel's side of a trigger on thread `tid`: `attr` with sigtrap and `sig_data`.
fn kernel_attr(attr: &PerfEventAttr, key: u64) -> PerfEventAttr {
    let mut flags = AttrFlags::DISABLED
        | AttrFlags::SIGTRAP
        | AttrFlags::REMOVE_ON_EXEC
        | AttrFlags::EXCLUDE_HV;
    if attr.config2 & CONFIG2_KERNEL_MODE == 0 {
        flags |= AttrFlags::EXCLUDE_KERNEL;
    }
    PerfEventAttr {
        type_: attr.config1 as u32,
        size: PERF_ATTR_SIZE_VER7,
        config: attr.config,
        sample_period: attr.sample_period.max(1),
        flags,
        sig_data: SIG_DATA_MAGIC | key,
        ..PerfEventAttr::default()
    }
}

fn install_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: all-zero is a valid sigaction; a query (no new action).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::sigaction(libc::SIGTRAP, std::ptr::null(), &mut old) };
        set_program_action(Some(&old), None);
        // SAFETY: all-zero is a valid sigaction.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler as *const () as usize;
        // SA_NODEFER: a trigger in the handler of another (a handler's write) is taken too.
        // Not SA_ONSTACK: the overflow path (a sample, an AUX copy) runs on the thread's own
        // stack, as task-clock's handler does; a thread's alternate stack (Rust's, 8 KiB) is
        // for its overflows, and may be too small for it.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_NODEFER;
        // SAFETY: sigemptyset writes the mask it is given.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handler is async-signal-safe (no lock, no allocation).
        if unsafe { libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()) } == 0 {
            INSTALLED.store(true, Ordering::Release);
        }
    });
}

/// `si_perf_data` and `si_perf_type` of a TRAP_PERF siginfo (x86-64 and aarch64 layout: after
/// `si_addr`, the union whose `_perf` member is `{ unsigned long data; u32 type; u32 flags }`).
#[repr(C)]
struct PerfInfo {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    addr: usize,
    data: u64,
    type_: u32,
    flags: u32,
}

extern "C" fn handler(sig: i32, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let saved = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler; it is 128 bytes,
    // larger than PerfInfo.
    let p = unsafe { &*info.cast::<PerfInfo>() };
    if p.code == TRAP_PERF && p.data & !0xffff_ffff == SIG_DATA_MAGIC {
        let key = (p.data & 0xffff_ffff) as usize;
        hit(key, ip_of(uctx));
        perfaux_core::driver::set_errno(saved);
        return;
    }
    perfaux_core::driver::set_errno(saved);
    chain(sig, info, uctx);
}

/// A SIGTRAP not ours, to the program's action ([`CHAINED`]).
fn chain(sig: i32, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    let Chained { handler, flags } = chained_action();
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    match handler {
        // A trap the kernel raised (int3, a breakpoint: a positive si_code) is forced on the
        // task: an ignored one takes the default action, as without us. One sent by a process
        // (raise, kill) is ignored.
        libc::SIG_IGN if code <= 0 => {}
        libc::SIG_IGN | libc::SIG_DFL => {
            // The default ends the process (with a core): as it would have without us.
            reset_to_default(sig);
            // SAFETY: raise(3) is async-signal-safe.
            unsafe { libc::raise(sig) };
        }
        f => {
            // A one-shot handler (SA_RESETHAND: the runtime's crash handler) finds the default
            // back, as the kernel resets it on entry: the program's action, not this PMU's
            // handler, which the triggers still need.
            if flags & libc::SA_RESETHAND as libc::c_int != 0 {
                // No allocation in a signal handler: the static default record.
                CHAINED.store(
                    &DEFAULT_ACTION as *const Chained as *mut Chained,
                    Ordering::Release,
                );
            }
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the program installed this three-argument handler for SIGTRAP.
                let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(f) };
                f(sig, info, uctx);
            } else {
                // SAFETY: the program installed this one-argument handler for SIGTRAP.
                let f: extern "C" fn(i32) = unsafe { std::mem::transmute(f) };
                f(sig);
            }
        }
    }
}

/// One hit of the trigger `key` names, on this thread.
fn hit(key: usize, ip: u64) {
    slots().with(key, |ev| {
        let mine = matches!(ev.target(), Target::Thread(t) if t == perfaux_core::gettid());
        if !mine || ev.state() != EventState::Active {
            return;
        }
        let mut data = SampleData::default();
        data.ip = ip;
        perf_swevent_event(ev, 1, &mut data);
    });
}

impl Pmu for KernelTriggerPmu {
    fn name(&self) -> &'static str {
        "ktrigger"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        // The core offers an event of an unknown type to every PMU, as the kernel does: not
        // ours is ENOENT, so that the lookup goes on.
        if event.attr().type_ != event.pmu_type() {
            return Err(enoent("not a ktrigger event"));
        }
        let Target::Thread(tid) = event.target() else {
            return Err(einval(
                "ktrigger: a kernel event signals the thread it fires on: needs a thread target",
            ));
        };
        let (slot, key) = slots()
            .claim()
            .ok_or_else(|| Error::new(errno::ENOSPC, "ktrigger: all trigger slots in use"))?;
        install_handler();
        let attr =
            kernel_attr(event.attr(), key as u64).to_bytes(PERF_ATTR_SIZE_VER7, Endianness::NATIVE);
        // SAFETY: perf_event_open(2) reads VER7 bytes of the attr written above and returns a
        // new descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                tid,
                -1,
                -1,
                libc::c_ulong::from(1u8 << 3), // PERF_FLAG_FD_CLOEXEC
            )
        };
        let Some(fd) = i32::try_from(fd).ok().filter(|&fd| fd >= 0) else {
            slots().release(slot);
            let os = std::io::Error::last_os_error();
            return Err(Error::with_cause(
                os.raw_os_error().unwrap_or(errno::EINVAL),
                "ktrigger: the kernel's event with sigtrap (Linux 5.13 or later) could not be \
                 opened",
                os,
            ));
        };
        // SAFETY: a descriptor just returned to us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Box::new(Trigger { fd, slot }))
    }

    fn start(&self, event: &Event, _flags: u32) {
        let Some(t) = event.pmu_private::<Trigger>() else {
            return;
        };
        slots().set(t.slot, Some(event.arc()));
        // SAFETY: an argument-less ioctl on our perf descriptor.
        unsafe { libc::ioctl(t.fd.as_raw_fd(), IOC_ENABLE, 0) };
    }

    fn stop(&self, event: &Event, _flags: u32) {
        let Some(t) = event.pmu_private::<Trigger>() else {
            return;
        };
        // SAFETY: an argument-less ioctl on our perf descriptor.
        unsafe { libc::ioctl(t.fd.as_raw_fd(), IOC_DISABLE, 0) };
        slots().set(t.slot, None);
    }

    fn destroy(&self, event: &Event) {
        let Some(t) = event.pmu_private::<Trigger>() else {
            return;
        };
        slots().release(t.slot);
    }
}
