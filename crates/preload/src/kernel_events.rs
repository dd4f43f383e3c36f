//! The running kernel's events of a traced program, in its recording: its context switches
//! (PERF_COUNT_SW_DUMMY with `context_switch`, as `perf record --switch-events ./prog` asks for
//! them) and the kernel's software events `-e` names (page-faults, context-switches, ...),
//! each opened once per CPU on the program (`perf_event_open(pid = the program, cpu)` with
//! `inherit` and `enable_on_exec`, on CLOCK_MONOTONIC, the recording's clock), each with a ring
//! of its own. The kernel refuses to map an inherited event of one task on all CPUs
//! (`perf_mmap`: `cpu == -1 && inherit` is EINVAL), hence one event per CPU, as perf opens
//! them: each ring takes the records of every thread of the program that ran on that CPU.
//!
//! The events exist before the program's first instruction, so that every thread and process
//! it makes inherits them: the child, between fork and exec, sends its pid through a pipe and
//! waits on another ([`SpawnGate`]); a thread of the recorder opens the events on that pid and
//! lets the child go. With `enable_on_exec` they count from the exec on.
//!
//! Each ring is a [`Ring`] of the recorder. Its records (PERF_RECORD_SWITCH, PERF_RECORD_SAMPLE;
//! PERF_RECORD_LOST when the kernel had no room) carry the kernel's event id, which can be any
//! number, one of the program's own events' too: it is replaced by the recording's
//! ([`kernel_id`]) as each record is taken. Nothing of the kernel's is trusted further than the
//! ring protocol checks and the record sizes the rewrite needs.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::{
    PERF_ATTR_SIZE_VER7, PERF_COUNT_SW_DUMMY, PERF_RECORD_EXIT, PERF_RECORD_FORK, PERF_RECORD_LOST,
    PERF_RECORD_SAMPLE, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_STACK_USER, PERF_TYPE_SOFTWARE,
};
use perfaux_perfdata::record_attrs::base_attr;
use perfaux_recorder::ring::{AuxFn, RecordFn, Ring};
use perfaux_recorder::{RecordError, Result};
use perfaux_ring::{PerfMmap, RingMemory, Wakeup};

/// The switch event's name in the file, as perf names a user-only dummy event.
pub const SWITCH_EVENT_NAME: &str = "dummy:u";

/// Data pages of each event's ring on each CPU: 128 KiB, 3,000 switch records, drained every
/// step (a millisecond); what does not fit is a PERF_RECORD_LOST the recording counts.
const DATA_PAGES: usize = 32;

/// Data pages of a ring whose samples copy user stack (`--call-graph dwarf`): 1 MiB, about a
/// hundred samples of perf's default 8 KiB dump, a tenth of a second at 999 Hz on one CPU.
const STACK_DATA_PAGES: usize = 256;

/// How long the recorder waits for the child's pid before it lets the program start without
/// the events (a child that died before it wrote is seen at once: the pipe closes).
const PID_WAIT: Duration = Duration::from_secs(10);

/// `PERF_EVENT_IOC_ENABLE` and `PERF_EVENT_IOC_DISABLE`: `_IO('$', 0)`, `_IO('$', 1)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
/// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// The sample id in the recording of the recording's event `index` (a kernel event) on CPU
/// `cpu`: far above the ids the program's events take (a counter from 1).
pub fn kernel_id(index: usize, cpu: u32) -> u64 {
    0x7fff_ff00_0000_0000 | ((index as u64 & 0xff_ffff) << 16) | u64::from(cpu & 0xffff)
}

/// The attr of the switch events, as the file says it (the file leaves out `use_clockid`:
/// every time in the recording is CLOCK_MONOTONIC's, which perfaux's attrs without it also
/// mean).
pub fn switch_attr() -> PerfEventAttr {
    let mut a = base_attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY);
    a.flags |= AttrFlags::CONTEXT_SWITCH;
    a
}

/// `a` made the recording's tracking event for the kernel's side: the kernel writes the
/// program's processes' executable mappings (MMAP2, for the exec'd image and each library the
/// loader maps, in every process, traced or not) and their names (COMM at each exec and
/// rename), as perf's first event asks for them. Where the runtime traces a process, its side
/// band writes the same maps and names too: a reader takes a map or name given twice as the
/// same. Without these, the samples of a process that calls no hook (a program run untraced
/// for its samples, a shell it starts) would have no object to be resolved in and no name.
/// `stacks`: a sampler copies user stacks, and the data mappings are asked for too (perf's
/// `mmap_data` under `--call-graph dwarf`): an unwinder reads an object's `.eh_frame_hdr`
/// from its read-only segment, which is not executable.
pub fn with_tracking(a: &mut PerfEventAttr, stacks: bool) {
    a.flags |= AttrFlags::MMAP | AttrFlags::MMAP2 | AttrFlags::COMM | AttrFlags::COMM_EXEC;
    if stacks {
        a.flags |= AttrFlags::MMAP_DATA;
    }
}

/// One kernel event of the recording: its name and attr as the file has them, and its index
/// among the file's events.
#[derive(Debug, Clone)]
pub struct KernelEvent {
    pub name: String,
    pub attr: PerfEventAttr,
    pub index: usize,
}

/// `filed` as the kernel is asked for it: on every thread and process of the program from its
/// exec on, on the recording's clock. The switch event also asks for the tasks' FORK and EXIT
/// records, for the FORK of each thread a process makes ([`kept`]): the side band knows a
/// thread only from its first traced call, after its first switch in.
/// `on_exec`: the events start at the program's exec (else they stay disabled until the
/// recorder enables them: a process already running). `inherit`: the threads and processes
/// the task makes get them too (all but `-t`).
fn open_attr(filed: &PerfEventAttr, on_exec: bool, inherit: bool) -> PerfEventAttr {
    let mut a = *filed;
    if a.flags.contains(AttrFlags::CONTEXT_SWITCH) {
        a.flags |= AttrFlags::TASK;
    }
    a.size = PERF_ATTR_SIZE_VER7;
    a.flags |= AttrFlags::DISABLED | AttrFlags::USE_CLOCKID;
    if inherit {
        a.flags |= AttrFlags::INHERIT;
    }
    if on_exec {
        a.flags |= AttrFlags::ENABLE_ON_EXEC;
    }
    a.flags.remove(AttrFlags::WATERMARK);
    a.set_wakeup_watermark(0);
    a.clockid = libc::CLOCK_MONOTONIC;
    a
}

/// The CPUs the kernel may run the program on: /sys/devices/system/cpu/online ("0-3,6"),
/// else as many as the process may use from 0.
fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        match (a.parse::<u32>(), b.parse::<u32>()) {
            // A kernel has at most a few thousand CPUs: a range past that is not the sysfs file.
            (Ok(a), Ok(b)) if a <= b && b < 1 << 16 => cpus.extend(a..=b),
            _ => return fallback_cpus(),
        }
    }
    if cpus.is_empty() {
        return fallback_cpus();
    }
    cpus
}

fn fallback_cpus() -> Vec<u32> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n as u32).collect()
}

/// One kernel event of the program on one CPU, opened and mapped.
pub struct KernelRing {
    pid: u32,
    cpu: u32,
    index: usize,
    /// Its samples start with IDENTIFIER (the file's sample_type has it).
    identifier_first: bool,
    fd: OwnedFd,
    /// The same event of other threads on this CPU, writing into this ring
    /// (PERF_EVENT_IOC_SET_OUTPUT): a process attached to, each of whose threads has its own.
    others: Vec<OwnedFd>,
    mmap: PerfMmap,
    /// A record being rewritten.
    buf: Vec<u8>,
}

/// The kernel's answer when an event could not be opened or mapped: what, on which CPU, why.
#[derive(Debug)]
pub struct KernelError {
    pub what: String,
    pub source: io::Error,
    /// The event counts in kernel mode too (not `exclude_kernel`).
    pub kernel_mode: bool,
    /// The event is a tracepoint whose samples carry its raw record (PERF_SAMPLE_RAW).
    pub raw_tracepoint: bool,
}

/// Whether `a` is a tracepoint sampled with its raw record, which the kernel gives a user at
/// perf_event_paranoid -1 only (`perf_trace_event_perm`).
fn is_raw_tracepoint(a: &PerfEventAttr) -> bool {
    a.type_ == perfaux_abi::consts::PERF_TYPE_TRACEPOINT
        && a.sample_type & perfaux_abi::consts::PERF_SAMPLE_RAW != 0
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)?;
        if matches!(self.source.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
            let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            if self.raw_tracepoint {
                write!(
                    f,
                    " (kernel.perf_event_paranoid is {level}: a tracepoint's raw samples are a \
                     user's at -1 only, or with CAP_PERFMON)"
                )?;
            } else if self.kernel_mode {
                write!(
                    f,
                    " (kernel.perf_event_paranoid is {level}: an event counted in kernel mode \
                     is a user's at 1 or lower, or with CAP_PERFMON)"
                )?;
            } else {
                write!(
                    f,
                    " (kernel.perf_event_paranoid is {level}: 2 or lower lets a user have the \
                     kernel's events of their own processes)"
                )?;
            }
        }
        Ok(())
    }
}

/// Opens and maps each of `events` for process `pid` on every CPU: the rings of the events
/// that opened, and for each that did not, its name and the kernel's answer (an event is
/// opened on every CPU or not at all).
pub fn open(pid: u32, events: &[KernelEvent]) -> (Vec<KernelRing>, Vec<(String, KernelError)>) {
    let mut rings = Vec::new();
    let mut refused = Vec::new();
    let cpus = online_cpus();
    for ev in events {
        match open_event(pid, ev, &cpus) {
            Ok(r) => rings.extend(r),
            Err(e) => refused.push((ev.name.clone(), e)),
        }
    }
    (rings, refused)
}

/// Opens and maps each of `events` for threads `tids` of running process `pid` on every CPU
/// (not at an exec: they start when the recorder enables them): per event and CPU one ring,
/// the first thread's that opens, into which the other threads' events write
/// (PERF_EVENT_IOC_SET_OUTPUT, as perf's per-CPU buffers). A thread that ended since it was
/// listed (ESRCH) is passed over; another refusal for one thread is said and the event is
/// recorded for the others; an event no thread could open is refused as [`open`] refuses.
pub fn open_on_tasks(
    pid: u32,
    tids: &[u32],
    events: &[KernelEvent],
    inherit: bool,
) -> (Vec<KernelRing>, Vec<(String, KernelError)>) {
    let mut rings = Vec::new();
    let mut refused = Vec::new();
    let cpus = online_cpus();
    for ev in events {
        // The rings' owner: the first listed thread still there.
        let mut owner = None;
        for (k, &tid) in tids.iter().enumerate() {
            match open_event_on(tid, ev, &cpus, false, inherit) {
                Ok(r) => {
                    owner = Some((k, r));
                    break;
                }
                Err(e) if e.source.raw_os_error() == Some(libc::ESRCH) => continue,
                Err(e) => {
                    refused.push((ev.name.clone(), e));
                    break;
                }
            }
        }
        let Some((k, mut ev_rings)) = owner else {
            continue;
        };
        for ring in &mut ev_rings {
            ring.pid = pid;
        }
        let attr =
            open_attr(&ev.attr, false, inherit).to_bytes(PERF_ATTR_SIZE_VER7, Endianness::NATIVE);
        let kernel_mode = !ev.attr.flags.contains(AttrFlags::EXCLUDE_KERNEL);
        let raw_tracepoint = is_raw_tracepoint(&ev.attr);
        for &tid in &tids[k + 1..] {
            match redirect_thread(&attr, tid, &ev_rings) {
                Ok(fds) => {
                    for (ring, fd) in ev_rings.iter_mut().zip(fds) {
                        ring.others.push(fd);
                    }
                }
                // A thread that ended since it was listed: nothing of it to record.
                Err((_, e)) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err((what, source)) => refused.push((
                    ev.name.clone(),
                    KernelError {
                        what: format!("{what} of '{}' for thread {tid}", ev.name),
                        source,
                        kernel_mode,
                        raw_tracepoint,
                    },
                )),
            }
        }
        rings.extend(ev_rings);
    }
    (rings, refused)
}

/// Thread `tid`'s event `attr` on each CPU of `rings`, each writing into that CPU's ring: the
/// descriptors, or which step failed and why (all or none are kept).
fn redirect_thread(
    attr: &[u8],
    tid: u32,
    rings: &[KernelRing],
) -> std::result::Result<Vec<OwnedFd>, (&'static str, io::Error)> {
    let mut fds = Vec::with_capacity(rings.len());
    for ring in rings {
        let fd = perf_event_open(attr, tid, ring.cpu).map_err(|e| ("perf_event_open", e))?;
        // SAFETY: an ioctl on our new descriptor naming another of ours, on the same CPU with
        // the same clock, as the kernel requires for SET_OUTPUT.
        let r = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                PERF_EVENT_IOC_SET_OUTPUT,
                ring.fd.as_raw_fd() as libc::c_ulong,
            )
        };
        if r != 0 {
            return Err((
                "redirecting into the CPU's ring",
                io::Error::last_os_error(),
            ));
        }
        fds.push(fd);
    }
    Ok(fds)
}

/// perf_event_open(2) of `attr` (VER7 bytes) for task `pid` on `cpu`, close-on-exec.
fn perf_event_open(attr: &[u8], pid: u32, cpu: u32) -> io::Result<OwnedFd> {
    // SAFETY: perf_event_open(2) reads `size` (VER7) bytes of the attr, which `attr` holds,
    // and returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    match i32::try_from(fd).ok().filter(|&fd| fd >= 0) {
        // SAFETY: a descriptor just returned to us alone.
        Some(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        None => Err(io::Error::last_os_error()),
    }
}

/// Opens and maps `ev` for process `pid` on each of `cpus`, from its exec on.
fn open_event(
    pid: u32,
    ev: &KernelEvent,
    cpus: &[u32],
) -> std::result::Result<Vec<KernelRing>, KernelError> {
    open_event_on(pid, ev, cpus, true, true)
}

/// Opens and maps `ev` for task `pid` on each of `cpus`; `on_exec` and `inherit` as
/// [`open_attr`].
fn open_event_on(
    pid: u32,
    ev: &KernelEvent,
    cpus: &[u32],
    on_exec: bool,
    inherit: bool,
) -> std::result::Result<Vec<KernelRing>, KernelError> {
    let attr =
        open_attr(&ev.attr, on_exec, inherit).to_bytes(PERF_ATTR_SIZE_VER7, Endianness::NATIVE);
    let kernel_mode = !ev.attr.flags.contains(AttrFlags::EXCLUDE_KERNEL);
    let raw_tracepoint = is_raw_tracepoint(&ev.attr);
    let pages = if ev.attr.sample_type & PERF_SAMPLE_STACK_USER != 0 {
        STACK_DATA_PAGES
    } else {
        DATA_PAGES
    };
    let mut rings = Vec::new();
    for &cpu in cpus {
        let fd = perf_event_open(&attr, pid, cpu).map_err(|source| KernelError {
            what: format!(
                "perf_event_open of '{}' for pid {pid} on CPU {cpu}",
                ev.name
            ),
            source,
            kernel_mode,
            raw_tracepoint,
        })?;
        let mem = RingMemory::kernel(fd.as_fd(), pages, true, None).map_err(|e| KernelError {
            what: format!("mapping the ring of '{}' on CPU {cpu}", ev.name),
            source: io::Error::other(e.to_string()),
            kernel_mode,
            raw_tracepoint,
        })?;
        rings.push(KernelRing {
            pid,
            cpu,
            index: ev.index,
            identifier_first: ev.attr.sample_type & PERF_SAMPLE_IDENTIFIER != 0,
            fd,
            others: Vec::new(),
            mmap: PerfMmap::new(Arc::new(mem)),
            buf: Vec::new(),
        });
    }
    Ok(rings)
}

impl KernelRing {
    /// Its event's index among the recording's events.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Its sample id in the recording.
    pub fn id(&self) -> u64 {
        kernel_id(self.index, self.cpu)
    }
}

/// Whether a record of the kernel's goes into the recording: not the FORK of a process nor an
/// EXIT, which the side band writes from the runtime's reports (the kernel's would be second
/// copies), but a new thread's FORK (`pid == ppid`, `tid != pid`), which names the thread from
/// its creation on (perf copies the creator's name at a FORK).
fn kept(rec: &[u8], type_: u32) -> bool {
    match type_ {
        PERF_RECORD_EXIT => false,
        PERF_RECORD_FORK => {
            let word = |i: usize| {
                rec.get(8 + 4 * i..12 + 4 * i)
                    .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
            };
            matches!((word(0), word(1), word(2)), (Some(pid), Some(ppid), Some(tid)) if pid == ppid && tid != pid)
        }
        _ => true,
    }
}

/// Replaces the kernel's event id in `rec` by `id`: a sample's IDENTIFIER, first in its body
/// (`identifier_first`), or the last field of another record's sample_id, which is IDENTIFIER
/// (perfaux's attrs all have it); a LOST record's own id too. Whether the record was long
/// enough to hold them.
fn rewrite_id(rec: &mut [u8], id: u64, type_: u32, identifier_first: bool) -> bool {
    let len = rec.len();
    // The header, and at least the identifier after it.
    if len < 16 {
        return false;
    }
    if type_ == PERF_RECORD_SAMPLE {
        // Without IDENTIFIER first the sample's event cannot be told: refused.
        if identifier_first {
            rec[8..16].copy_from_slice(&id.to_ne_bytes());
        }
        return identifier_first;
    }
    rec[len - 8..].copy_from_slice(&id.to_ne_bytes());
    if type_ == PERF_RECORD_LOST {
        // header, id, lost, then the sample_id.
        if len < 32 {
            return false;
        }
        rec[8..16].copy_from_slice(&id.to_ne_bytes());
    }
    true
}

impl Ring for KernelRing {
    fn tid(&self) -> i32 {
        self.pid as i32
    }

    fn read_records(&mut self, f: &mut RecordFn<'_>) -> Result<()> {
        let id = self.id();
        let ring_err = |source| RecordError::Ring {
            tid: self.pid as i32,
            what: "a ring of the kernel's events",
            source,
        };
        let records = self.mmap.read_records().map_err(ring_err)?;
        for rec in records {
            let rec = rec.map_err(ring_err)?;
            if !kept(rec.bytes, rec.header.type_) {
                continue;
            }
            self.buf.clear();
            self.buf.extend_from_slice(rec.bytes);
            if !rewrite_id(&mut self.buf, id, rec.header.type_, self.identifier_first) {
                return Err(RecordError::Record {
                    tid: self.pid as i32,
                    what: format!(
                        "a kernel record of type {} and {} bytes on CPU {}: too short for its \
                         sample_id",
                        rec.header.type_,
                        rec.bytes.len(),
                        self.cpu
                    ),
                });
            }
            f(&self.buf)?;
        }
        Ok(())
    }

    fn read_aux(&mut self, _f: &mut AuxFn<'_>) -> Result<()> {
        Ok(())
    }

    fn snapshot(&mut self, _f: &mut AuxFn<'_>) -> Result<()> {
        Ok(())
    }

    fn set_enabled(&self, on: bool) -> Result<()> {
        let req = if on {
            PERF_EVENT_IOC_ENABLE
        } else {
            PERF_EVENT_IOC_DISABLE
        };
        for fd in std::iter::once(&self.fd).chain(&self.others) {
            // SAFETY: an argument-less ioctl on our descriptor. Its answer does not matter:
            // the events start at the program's exec or the attach, and a failed stop only
            // lets more records in.
            unsafe { libc::ioctl(fd.as_raw_fd(), req, 0) };
        }
        Ok(())
    }

    fn wakeup(&self) -> Option<Arc<Wakeup>> {
        None
    }

    fn dropped_pause_resume(&self) -> u64 {
        0
    }
}

/// The pipes that hold a spawned child between fork and exec until the recorder opened its
/// events: the child writes its pid into one and reads the other.
pub struct SpawnGate {
    pid_r: OwnedFd,
    pid_w: OwnedFd,
    go_r: OwnedFd,
    go_w: OwnedFd,
}

impl SpawnGate {
    /// Two close-on-exec pipes (std's are).
    pub fn new() -> io::Result<SpawnGate> {
        let (pid_r, pid_w) = io::pipe()?;
        let (go_r, go_w) = io::pipe()?;
        Ok(SpawnGate {
            pid_r: pid_r.into(),
            pid_w: pid_w.into(),
            go_r: go_r.into(),
            go_w: go_w.into(),
        })
    }

    /// Holds `cmd`'s child before its exec: it sends its pid and waits for the recorder's
    /// go, or for the pipe's end (the recorder gave up or failed: the program starts all the
    /// same).
    pub fn hold(&self, cmd: &mut Command) {
        let fds: [RawFd; 4] = [
            self.pid_r.as_raw_fd(),
            self.pid_w.as_raw_fd(),
            self.go_r.as_raw_fd(),
            self.go_w.as_raw_fd(),
        ];
        let in_child = move || -> io::Result<()> {
            let [pid_r, pid_w, go_r, go_w] = fds;
            // The child's copies of the gate's descriptors, open until the spawn returns in
            // the parent; each is closed here once, and not used after.
            // SAFETY: see above.
            unsafe { libc::close(pid_r) };
            // SAFETY: see above.
            unsafe { libc::close(go_w) };
            let pid = rustix::process::getpid().as_raw_nonzero().get();
            // SAFETY: see above; the borrow ends before the close.
            let w = unsafe { BorrowedFd::borrow_raw(pid_w) };
            // A recorder that gave up waiting closed its end: the write's EPIPE is its
            // answer, not a SIGPIPE that kills the program (the disposition is put back to
            // the default std gave the child before this closure).
            // SAFETY: signal(2) with SIG_IGN/SIG_DFL, async-signal-safe, for this process.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
            let _ = rustix::io::write(w, &pid.to_ne_bytes());
            // SAFETY: as above.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            // SAFETY: see above.
            unsafe { libc::close(pid_w) };
            // SAFETY: see above; the borrow ends before the close.
            let r = unsafe { BorrowedFd::borrow_raw(go_r) };
            let mut b = [0u8; 1];
            while rustix::io::read(r, &mut b) == Err(rustix::io::Errno::INTR) {}
            // SAFETY: see above.
            unsafe { libc::close(go_r) };
            Ok(())
        };
        // SAFETY: runs in the forked child before exec; the closure makes only
        // async-signal-safe calls.
        unsafe { cmd.pre_exec(in_child) };
    }

    /// Opens the events once the child sent its pid, on a thread of its own (the spawn
    /// blocks until the child's exec, which waits for this), then lets the child go.
    /// `None` if no pid came (the spawn failed, or [`PID_WAIT`] passed). The returned
    /// [`ParentSide`] holds the descriptors the child must inherit: drop it once the spawn
    /// returned.
    pub fn open_on_spawn(
        self,
        events: Vec<KernelEvent>,
    ) -> (ParentSide, JoinHandle<Option<Opened>>) {
        let SpawnGate {
            pid_r,
            pid_w,
            go_r,
            go_w,
        } = self;
        let handle = std::thread::spawn(move || {
            let pid = read_pid(&pid_r);
            let opened = pid.map(|pid| open(pid, &events));
            // The go (the child's read returns also when this end closes, on any path); the
            // pid pipe stays open until then, so that a child late with its pid is not
            // killed by SIGPIPE for it.
            let _ = rustix::io::write(&go_w, &[1]);
            drop(pid_r);
            let (rings, refused) = opened?;
            Some(Opened {
                pid: pid?,
                rings,
                refused,
            })
        });
        (
            ParentSide {
                _pid_w: pid_w,
                _go_r: go_r,
            },
            handle,
        )
    }
}

/// The parent's copies of the child's ends of the gate, kept until the spawn forked.
pub struct ParentSide {
    _pid_w: OwnedFd,
    _go_r: OwnedFd,
}

/// What the recorder's thread opened for the child `pid`.
pub struct Opened {
    pub pid: u32,
    pub rings: Vec<KernelRing>,
    /// The events the kernel refused, by name, with its answer.
    pub refused: Vec<(String, KernelError)>,
}

/// The child's pid from the pipe, waiting at most [`PID_WAIT`]; `None` on the pipe's end.
fn read_pid(pid_r: &OwnedFd) -> Option<u32> {
    let mut fds = [rustix::event::PollFd::new(
        pid_r,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::time::Timespec {
        tv_sec: PID_WAIT.as_secs() as i64,
        tv_nsec: 0,
    };
    loop {
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => return None,
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
    let mut b = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match rustix::io::read(pid_r, &mut b[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    let pid = i32::from_ne_bytes(b);
    u32::try_from(pid).ok().filter(|&p| p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_rewritten_where_each_record_keeps_it() {
        let id = kernel_id(4, 3);
        let mut sw = vec![0u8; 40];
        sw[32..].copy_from_slice(&77u64.to_ne_bytes());
        assert!(rewrite_id(&mut sw, id, 14, true));
        assert_eq!(sw[32..], id.to_ne_bytes());
        let mut lost = vec![0u8; 56];
        lost[8..16].copy_from_slice(&77u64.to_ne_bytes());
        assert!(rewrite_id(&mut lost, id, PERF_RECORD_LOST, true));
        assert_eq!(lost[8..16], id.to_ne_bytes());
        assert_eq!(lost[48..], id.to_ne_bytes());
        // A sample: IDENTIFIER first, and nothing else touched.
        let mut sample = vec![9u8; 56];
        assert!(rewrite_id(&mut sample, id, PERF_RECORD_SAMPLE, true));
        assert_eq!(sample[8..16], id.to_ne_bytes());
        assert!(sample[16..].iter().all(|&b| b == 9));
        assert!(!rewrite_id(&mut [0u8; 8], 1, 14, true));
        assert!(!rewrite_id(&mut [0u8; 24], 1, PERF_RECORD_LOST, true));
    }

    #[test]
    fn a_new_threads_fork_is_kept_and_the_side_bands_records_are_not() {
        let fork = |pid: u32, ppid: u32, tid: u32| {
            let mut r = vec![0u8; 8];
            for w in [pid, ppid, tid, ppid] {
                r.extend_from_slice(&w.to_ne_bytes());
            }
            r.extend_from_slice(&[0u8; 8 + 32]);
            r
        };
        assert!(kept(&fork(100, 100, 101), PERF_RECORD_FORK));
        // A process's fork (the side band's), and a truncated record.
        assert!(!kept(&fork(102, 100, 102), PERF_RECORD_FORK));
        assert!(!kept(&fork(100, 100, 101)[..16], PERF_RECORD_FORK));
        assert!(!kept(&fork(100, 100, 101), PERF_RECORD_EXIT));
        assert!(kept(&[0u8; 40], 14));
    }

    #[test]
    fn the_kernel_ids_are_none_of_a_counters_and_each_events_own() {
        assert!(kernel_id(0, 0) > u64::from(u32::MAX));
        assert_ne!(kernel_id(0, 1), kernel_id(1, 0));
        assert_ne!(kernel_id(2, 1), kernel_id(2, 0));
    }
}
