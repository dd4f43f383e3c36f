//! The recorder's side: the shared memory, the spawned program, draining its rings, and what
//! the runtime reported (threads, probe addresses, loaded objects), all read without trusting
//! the program.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use memmap2::MmapRaw;
use perfaux_abi::Endianness;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_ring::RingMemory;

use crate::shared::{
    self, ATTR_MAX, Control, FUNC_MAX, MAX_EVENTS, MAX_PROBES, MAX_SLOTS, NAMED_PROBE, copy_in,
    copy_out, slot,
};
use crate::thread_rings::{SlotMemfds, SlotRings, os_err};

/// How to trace the program.
#[derive(Debug, Clone)]
pub struct Options {
    /// The runtime shared object to preload.
    pub runtime: PathBuf,
    /// Threads that can be traced at once before the program starts (one slot each, their
    /// rings inherited); more are made as the program needs them, up to `max_slots`.
    pub slots: usize,
    /// Slots whose memfds the program inherits (at least `slots`; at most `max_slots`): the
    /// rings of those past `slots` are made in them as the program needs them, so its
    /// threads open them by the descriptors they hold, as a process that changed its user
    /// can (the recorder's /proc/PID/fd, for slots past these, it cannot).
    pub inherited: usize,
    /// The most threads traced at once (at most [`MAX_SLOTS`]).
    pub max_slots: usize,
    /// Data pages per thread (a power of two).
    pub data_pages: usize,
    /// AUX pages per thread (a power of two).
    pub aux_pages: usize,
    /// Overwrite mode (`-S`): the AUX areas keep the newest trace; see
    /// [`ProgramSession::snapshot`].
    pub overwrite: bool,
    /// The events every traced thread opens, in order (at most [`shared::MAX_EVENTS`]); the
    /// one of the trace PMU owns the thread's buffer.
    pub events: Vec<ProgramEvent>,
}

/// An event the program's threads open, as the recorder asks for it.
#[derive(Debug, Clone)]
pub struct ProgramEvent {
    /// Its attr (a `probe:FUNC` event's `config` is the runtime's to fill in).
    pub attr: PerfEventAttr,
    /// Index of its group leader (its own index for a leader).
    pub leader: usize,
    /// `probe:FUNC`: the ELF symbol name of the function the probe stands at.
    pub func: Option<String>,
}

/// A thread's ring whose memory the program wrote over ([`ProgramSession::damaged_rings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingDamage {
    /// The thread.
    pub tid: i32,
    /// Its slot (never given to another thread after).
    pub slot: usize,
    /// What the check of the ring's memory found.
    pub what: String,
    /// Bytes of the thread's trace taken before the damage (kept in the recording).
    pub trace_bytes_kept: u64,
}

/// What the slots' rings cost ([`ProgramSession::ring_memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingMemoryUse {
    /// Slots made (each a data ring and an AUX ring).
    pub slots: usize,
    /// The most slots held at once at a pass of the recorder.
    pub peak_held: usize,
    /// Bytes one slot's two rings span.
    pub slot_size: u64,
    /// Bytes the rings hold (the pages the threads wrote).
    pub resident: u64,
}

/// A thread the runtime reported, as read back (checked) from its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedThread {
    /// Slot index.
    pub slot: usize,
    /// Process id (the spawned program's, or a child's it forked).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// A forked child's thread: the parent's pid, the forking thread's tid and when the child
    /// began (CLOCK_MONOTONIC ns); `None` in the spawned program.
    pub fork: Option<(u32, u32, u64)>,
    /// Its trace event's id (the owner of its buffer).
    pub event_id: u64,
    /// The ids of its events, one per [`Options::events`] entry, in order.
    pub ids: Vec<u64>,
    /// Whether the thread ended cleanly (its thread exit ran).
    pub ended: bool,
    /// The thread's name as it reported it (`None`: not written, empty or not a name).
    pub comm: Option<String>,
    /// When it opened its events (CLOCK_MONOTONIC ns; 0: not written).
    pub open_time: u64,
    /// When its process image began (CLOCK_MONOTONIC ns; a forked child's is its parent's;
    /// 0: not written): a thread of the same process with a later one runs in an image the
    /// process exec'd since, which ended this thread.
    pub image_time: u64,
    /// The inode of its pid namespace (0: not known): `pid` is that namespace's.
    pub pid_ns: u64,
    /// How many threads had the slot before it ([`ProgramSession::recycle_slot`]): a slot
    /// and generation name one thread.
    pub generation: u64,
}

/// A slot's COMM words as a name: the bytes before the first NUL (the program's words: at
/// most 16, any bytes; none, or no NUL in them, is no name).
fn comm_of(words: [u64; 2]) -> Option<String> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&words[0].to_ne_bytes());
    b[8..].copy_from_slice(&words[1].to_ne_bytes());
    let len = b.iter().position(|&c| c == 0)?;
    (len > 0).then(|| String::from_utf8_lossy(&b[..len]).into_owned())
}

/// A thread whose events could not be set up (the program's words, as it wrote them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenError {
    /// The thread.
    pub tid: u32,
    /// The index of the event (in [`Options::events`]) whose step failed.
    pub event: usize,
    /// The step ([`shared::open_step`]; other values are not one).
    pub step: u64,
    /// Its errno.
    pub errno: i32,
}

/// A loaded object's executable segment, as the runtime reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedObject {
    /// Load bias: symbol value + base = run-time address.
    pub base: u64,
    /// Start of the executable mapping.
    pub start: u64,
    /// Its length.
    pub len: u64,
    /// Its file offset.
    pub pgoff: u64,
    /// When the runtime found it (CLOCK_MONOTONIC ns; 0: not said).
    pub time: u64,
    /// The process that loaded it (0: not said).
    pub pid: u32,
    /// The file.
    pub path: PathBuf,
}

/// What a drain pass hands out.
#[derive(Debug)]
pub enum Drained<'a> {
    /// A record of slot `slot`'s data area.
    Record {
        /// Slot index.
        slot: usize,
        /// The whole record, header first.
        bytes: &'a [u8],
    },
    /// The newest bytes of slot `slot`'s overwrite AUX area, from AUX position `offset`.
    Snapshot {
        /// Slot index.
        slot: usize,
        /// AUX position of `bytes[0]`.
        offset: u64,
        /// The writer went round the area: `bytes[0]` is not the start of the trace.
        wrapped: bool,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// Trace bytes of slot `slot`'s AUX area, from AUX position `offset`.
    Aux {
        /// Slot index.
        slot: usize,
        /// AUX position of `bytes[0]`.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// The most loaded objects a recording takes (the recorder's memory stays bounded whatever
/// the program writes into the ring).
pub const MAX_TAKEN_OBJECTS: usize = 1 << 20;
/// How long an incomplete object entry may hold up the ring while later ones are claimed.
pub const STUCK_OBJECT: Duration = Duration::from_secs(1);

/// One traced program: the memory it writes into, and the program.
pub struct ProgramSession {
    ctl_map: MmapRaw,
    ctl_fd: OwnedFd,
    slots: Vec<SlotRings>,
    /// The memfds of the slots after `slots` that the program inherited, in slot order: the
    /// next slots' rings are made in them ([`Self::grow`]).
    unmade: std::collections::VecDeque<SlotMemfds>,
    /// Each slot's ring pages, and the most slots made ([`Options::max_slots`], or fewer once
    /// a ring could not be made: `grow_error` says why).
    data_pages: usize,
    aux_pages: usize,
    max_slots: usize,
    grow_error: Option<String>,
    /// The rings the program wrote over (one a slot at most: such a slot is never freed).
    damaged: Vec<RingDamage>,
    /// The program wrote over the control area's magic or version: its words are noise, so
    /// no slot is made for what they ask.
    control_damaged: bool,
    /// The probe addresses taken so far (word `id - 1`; 0: none yet), and the first id without
    /// one ([`Self::take_probes`]).
    probe_addrs: Vec<u64>,
    /// Probe id -> the name the program gave it (a word with `NAMED_PROBE`), read when the
    /// word was taken.
    probe_names: std::collections::HashMap<u32, String>,
    probes_filled: usize,
    /// The most slots held at once (claimed, tracing or ended and not yet freed) at a pass.
    peak_held: usize,
    /// The recorder's RLIMIT_NOFILE before it was raised for the slots' descriptors: the
    /// program gets it back.
    nofile: Option<libc::rlimit>,
    /// Per slot: threads that had it before the current one.
    generations: Vec<u64>,
    /// The loaded objects taken from the ring so far, and how many (this process's count,
    /// never the program's word).
    objects: Vec<LoadedObject>,
    objects_taken: u64,
    /// Since when the ring's next entry is waited for (see [`Self::take_objects`]).
    object_stuck_since: Option<Instant>,
    /// Per slot: the AUX position where the current thread's trace starts (its ring goes on
    /// from where the last thread's ended): snapshots of its area reach no further back.
    aux_start: Vec<u64>,
    child: Option<Child>,
    overwrite: bool,
    events: usize,
}

impl ProgramSession {
    /// Creates the control memfd and the rings of every slot.
    pub fn new(opts: &Options) -> std::io::Result<ProgramSession> {
        use rustix::fs::{MemfdFlags, SealFlags};
        let max_slots = opts.max_slots.clamp(1, MAX_SLOTS);
        let nslots = opts.slots.clamp(1, max_slots);
        let nofile = crate::thread_rings::raise_nofile();
        let ctl_fd = rustix::fs::memfd_create(
            "perfaux-preload",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|e| os_err("memfd_create", e))?;
        rustix::fs::ftruncate(&ctl_fd, shared::total_len() as u64)
            .map_err(|e| os_err("ftruncate", e))?;
        rustix::fs::fcntl_add_seals(
            &ctl_fd,
            SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
        )
        .map_err(|e| os_err("sealing the control memfd", e))?;
        let ctl_map = memmap2::MmapOptions::new()
            .len(shared::total_len())
            .map_raw(&ctl_fd)?;
        let slots = (0..nslots)
            .map(|_| SlotRings::new(opts.data_pages, opts.aux_pages))
            .collect::<std::io::Result<Vec<_>>>()?;
        let unmade = (nslots..opts.inherited.min(max_slots))
            .map(|_| SlotRings::memfds())
            .collect::<std::io::Result<_>>()?;
        let s = ProgramSession {
            ctl_map,
            ctl_fd,
            data_pages: opts.data_pages,
            aux_pages: opts.aux_pages,
            max_slots,
            grow_error: None,
            damaged: Vec::new(),
            control_damaged: false,
            probe_addrs: Vec::new(),
            probe_names: std::collections::HashMap::new(),
            probes_filled: 0,
            peak_held: 0,
            nofile,
            generations: vec![0; slots.len()],
            objects: Vec::new(),
            objects_taken: 0,
            object_stuck_since: None,
            aux_start: vec![0; slots.len()],
            slots,
            unmade,
            child: None,
            overwrite: opts.overwrite,
            events: opts.events.len(),
        };
        s.write_events(&opts.events)?;
        let ctl = s.control();
        let h = ctl.header();
        h.version.store(shared::VERSION, Ordering::Relaxed);
        h.nslots.store(nslots as u64, Ordering::Relaxed);
        h.slots_max.store(max_slots as u64, Ordering::Relaxed);
        h.data_pages
            .store(opts.data_pages as u64, Ordering::Relaxed);
        h.aux_pages.store(opts.aux_pages as u64, Ordering::Relaxed);
        h.overwrite
            .store(u64::from(opts.overwrite), Ordering::Relaxed);
        h.next_event_id.store(1, Ordering::Relaxed);
        for (r, fds) in s.slots.iter().zip(&h.ring_fds) {
            fds.data.store(s.fd_word_of(&r.mems.0), Ordering::Relaxed);
            fds.aux.store(s.fd_word_of(&r.mems.1), Ordering::Relaxed);
        }
        Ok(s)
    }

    /// Makes the rings of more slots if the program's threads hold nearly all of them or wait
    /// for one ([`crate::thread_rings::grown_to`]), publishing each slot's memfds before the
    /// new count. A ring that cannot be made (descriptors or memory ran out) ends the growth
    /// for the recording: the threads that find every slot held then go untraced, counted and
    /// said with the reason ([`Self::slot_limit`]).
    pub fn grow(&mut self) {
        let ctl = self.control();
        let h = ctl.header();
        if h.magic.load(Ordering::Acquire) != shared::MAGIC
            || h.version.load(Ordering::Acquire) != shared::VERSION
        {
            // Stored once before the program ran (the magic in its process, before the
            // exec) and never again by anyone: the program wrote over the area, and its other
            // words are noise too.
            self.control_damaged = true;
            return;
        }
        let n = self.slots.len();
        let held = (0..n)
            .filter(|&i| ctl.slot(i).state.load(Ordering::Acquire) != slot::FREE)
            .count();
        self.peak_held = self.peak_held.max(held);
        // The program's word: bounded before use.
        let wanted = (h.slots_wanted.load(Ordering::Acquire) as usize).min(MAX_SLOTS);
        let to = crate::thread_rings::grown_to(n, held, wanted, self.max_slots);
        if to <= n {
            return;
        }
        for i in n..to {
            let r = match self.unmade.pop_front() {
                Some(fds) => SlotRings::in_memfds(fds, self.data_pages, self.aux_pages),
                None => SlotRings::new(self.data_pages, self.aux_pages),
            };
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    self.grow_error = Some(e.to_string());
                    self.max_slots = i;
                    h.slots_max.store(i as u64, Ordering::Release);
                    break;
                }
            };
            let fds = &h.ring_fds[i];
            fds.data
                .store(self.fd_word_of(&r.mems.0), Ordering::Relaxed);
            fds.aux.store(self.fd_word_of(&r.mems.1), Ordering::Relaxed);
            self.slots.push(r);
            self.generations.push(0);
            self.aux_start.push(0);
        }
        h.nslots.store(self.slots.len() as u64, Ordering::Release);
    }

    /// The slots' memory: how many slots there are, the most held at once at a pass, the bytes
    /// a slot's rings span, and the bytes all of them hold now (the pages written).
    pub fn ring_memory(&self) -> RingMemoryUse {
        RingMemoryUse {
            slots: self.slots.len(),
            peak_held: self.peak_held,
            slot_size: self.slots.first().map_or(0, SlotRings::size),
            resident: self.slots.iter().map(SlotRings::resident).sum(),
        }
    }

    /// Says that the program wrote over slot `damage.slot`'s ring (its reader retired). The
    /// bytes kept are at least what this process consumed of the thread's AUX stream (its own
    /// count: the drain that found the damage may have taken some first).
    pub(crate) fn ring_damaged(&mut self, mut damage: RingDamage) {
        let i = damage.slot;
        if let (Some(r), Some(&start)) = (self.slots.get(i), self.aux_start.get(i)) {
            let consumed = r.aux.tail().saturating_sub(start);
            damage.trace_bytes_kept = damage.trace_bytes_kept.max(consumed);
        }
        self.damaged.push(damage);
    }

    /// The rings the program wrote over, in the order they were found.
    pub fn damaged_rings(&self) -> &[RingDamage] {
        &self.damaged
    }

    /// Whether the program wrote over the control area's magic or version (seen at a pass).
    pub fn control_damaged(&self) -> bool {
        self.control_damaged
    }

    /// The most slots the recording could have, and why fewer than asked if so.
    pub fn slot_limit(&self) -> (usize, Option<&str>) {
        (self.max_slots, self.grow_error.as_deref())
    }

    /// Says that the recorder watches the processes of pid namespace `ns` for their end (see
    /// [`shared::ControlHeader::watched_pid_ns`]; 0: it watches none).
    pub fn set_watched_pid_ns(&self, ns: u64) {
        self.control()
            .header()
            .watched_pid_ns
            .store(ns, Ordering::Release);
    }

    /// Says that a TSC calibration is on its way ([`ProgramSession::set_tsc_calibration`], or
    /// [`ProgramSession::tsc_calibration_failed`]): the program may start before it.
    pub fn tsc_calibration_pending(&self) {
        self.control()
            .header()
            .tsc_pending
            .store(1, Ordering::Release);
    }

    /// No calibration comes: each traced process measures its own.
    pub fn tsc_calibration_failed(&self) {
        self.control()
            .header()
            .tsc_pending
            .store(0, Ordering::Release);
    }

    /// Hands the recorder's TSC calibration to the traced processes (and ends a pending one):
    /// the runtime of every traced process adopts it instead of spinning 10 ms to calibrate
    /// its own.
    pub fn set_tsc_calibration(&self, c: perfaux_swtrace::clock::TscCalibration) {
        let ctl = self.control();
        let h = ctl.header();
        h.tsc_base_ticks.store(c.base_ticks, Ordering::Relaxed);
        h.tsc_base_ns.store(c.base_ns, Ordering::Relaxed);
        h.tsc_span.store(c.span, Ordering::Relaxed);
        h.tsc_rate.store(
            u64::from(c.rate.mult) | u64::from(c.rate.shift) << 32,
            Ordering::Release,
        );
        h.tsc_pending.store(0, Ordering::Release);
    }

    /// Writes the event table the runtime opens each thread's events from.
    fn write_events(&self, events: &[ProgramEvent]) -> std::io::Result<()> {
        if events.len() > MAX_EVENTS {
            return Err(std::io::Error::other(format!(
                "{} events: a program's threads open at most {MAX_EVENTS}",
                events.len()
            )));
        }
        let ctl = self.control();
        for (k, ev) in events.iter().enumerate() {
            let e = ctl.event(k);
            let attr = ev.attr.to_bytes(ev.attr.size, Endianness::NATIVE);
            let func = ev.func.as_deref().unwrap_or("").as_bytes();
            if attr.len() > ATTR_MAX || func.len() > FUNC_MAX || ev.leader >= events.len() {
                return Err(std::io::Error::other(format!(
                    "event {k}: an attr of {} bytes (at most {ATTR_MAX}), a function name of {} \
                     (at most {FUNC_MAX}) or leader {} out of range",
                    attr.len(),
                    func.len(),
                    ev.leader
                )));
            }
            e.leader.store(ev.leader as u64, Ordering::Relaxed);
            e.attr_len.store(attr.len() as u64, Ordering::Relaxed);
            e.func_len.store(func.len() as u64, Ordering::Relaxed);
            copy_in(&e.attr, &attr);
            copy_in(&e.func, func);
        }
        ctl.event_count()
            .store(events.len() as u64, Ordering::Release);
        Ok(())
    }

    /// The `probe:FUNC` events (by index) whose function the runtime found in no object the
    /// program loaded so far.
    pub fn unfound_functions(&self) -> Vec<usize> {
        let ctl = self.control();
        (0..self.events)
            .filter(|&k| {
                let e = ctl.event(k);
                e.func_len.load(Ordering::Acquire) != 0 && e.found.load(Ordering::Acquire) == 0
            })
            .collect()
    }

    /// Threads whose events could not be set up: which event and step failed, and why.
    pub fn open_errors(&self) -> Vec<OpenError> {
        let ctl = self.control();
        (0..self.slots.len())
            .filter_map(|i| {
                let e = ctl.slot(i).open_error.load(Ordering::Acquire);
                let event = ((e >> 32) & 0xffff).checked_sub(1)? as usize;
                let tid = ctl.slot(i).tid.load(Ordering::Acquire);
                Some(OpenError {
                    tid: tid as u32,
                    event,
                    step: e >> 48,
                    errno: e as u32 as i32,
                })
            })
            .collect()
    }

    fn fd_of(&self, m: &RingMemory) -> i32 {
        m.shared_fd().map_or(-1, |f| f.as_raw_fd())
    }

    /// The memfd's header word: its number and inode ([`shared::fd_word`]).
    fn fd_word_of(&self, m: &RingMemory) -> u64 {
        let ino = m
            .shared_fd()
            .and_then(|f| rustix::fs::fstat(f).ok())
            .map_or(0, |st| st.st_ino);
        shared::fd_word(self.fd_of(m), ino)
    }

    fn control(&self) -> Control {
        // SAFETY: ctl_map maps total_len() bytes, page aligned, and lives as long as self;
        // the Controls made here do not outlive self.
        unsafe { Control::new(self.ctl_map.as_mut_ptr()) }
    }

    /// Starts `cmd` with the runtime preloaded and the memory inherited; the command keeps
    /// its caller's environment, directory and standard streams (the runtime goes in front of
    /// the `LD_PRELOAD` it has or inherits). The control area's pid word is set in the child
    /// before it runs the program (the runtime traces that process, the images it execs and
    /// the children it forks, not what they exec).
    pub fn spawn(&mut self, mut cmd: Command, runtime: &std::path::Path) -> std::io::Result<u32> {
        let mut fds: Vec<i32> = vec![self.ctl_fd.as_raw_fd()];
        for r in &self.slots {
            fds.push(self.fd_of(&r.mems.0));
            fds.push(self.fd_of(&r.mems.1));
        }
        for (d, a) in &self.unmade {
            fds.push(d.as_raw_fd());
            fds.push(a.as_raw_fd());
        }
        let nofile = self.nofile;
        let ctl = self.control();
        let mut preload = OsString::from(runtime);
        let own = cmd
            .get_envs()
            .find(|(k, _)| *k == "LD_PRELOAD")
            .map(|(_, v)| v.map(OsString::from));
        if let Some(old) = own.unwrap_or_else(|| std::env::var_os("LD_PRELOAD")) {
            preload.push(":");
            preload.push(old);
        }
        cmd.env("LD_PRELOAD", preload)
            .env(shared::ENV_CTL_FD, self.ctl_fd.as_raw_fd().to_string())
            .env(
                shared::ENV_FD_DIR,
                format!("/proc/{}/fd", std::process::id()),
            );
        let in_child = move || -> std::io::Result<()> {
            for &fd in &fds {
                // SAFETY: the descriptors are this session's, open until the spawn returns.
                let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            }
            if let Some(r) = &nofile {
                crate::thread_rings::restore_nofile(r)?;
            }
            let pid = rustix::process::getpid().as_raw_nonzero().get() as u64;
            ctl.header().pid.store(pid, Ordering::Release);
            ctl.header().magic.store(shared::MAGIC, Ordering::Release);
            Ok(())
        };
        // SAFETY: the closure runs in the forked child before exec and makes only
        // async-signal-safe calls (fcntl, setrlimit, getpid, atomic stores into the shared
        // mapping).
        unsafe { cmd.pre_exec(in_child) };
        let child = cmd.spawn()?;
        let pid = child.id();
        self.child = Some(child);
        Ok(pid)
    }

    /// The program's status if it has ended (reaped here); `None` while it runs.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match &mut self.child {
            Some(c) => c.try_wait(),
            None => Ok(None),
        }
    }

    /// Says in the control area that the recording has ended: threads and images of the
    /// program's descendants that start later are not traced.
    pub fn close(&self) {
        self.control().header().closed.store(1, Ordering::Release);
    }

    /// Kills the program and reaps it (a start that failed after the spawn leaves nothing
    /// running untraced).
    pub fn kill_and_reap(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` to the program (if it still runs).
    pub fn kill(&mut self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    /// Whether the AUX areas run in overwrite mode (`-S`).
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// Slots there are.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Threads of the program that went untraced because their process could not open a
    /// slot's ring memfds, and the errno of the last failure. The program's words; only said.
    pub fn rings_unreachable(&self) -> (u64, i32) {
        let ctl = self.control();
        let h = ctl.header();
        (
            h.rings_unreachable.load(Ordering::Acquire),
            h.rings_errno.load(Ordering::Acquire) as u32 as i32,
        )
    }

    /// Threads of the program that found every slot taken and went untraced.
    pub fn threads_without_slot(&self) -> u64 {
        self.control().header().no_slot.load(Ordering::Acquire)
    }

    /// Calls the program made inside signal handlers that interrupted the runtime's hooks
    /// (untraced: the thread's writer may have been mid-packet). The program's count; only
    /// said, never relied on.
    pub fn calls_in_handlers(&self) -> u64 {
        self.control()
            .header()
            .calls_in_handlers
            .load(Ordering::Acquire)
    }

    /// Calls the program made deeper than a thread's return stack holds
    /// ([`shared::STACK_DEPTH`] open calls): untraced, their exits too. The program's count;
    /// only said, never relied on.
    pub fn calls_past_depth(&self) -> u64 {
        self.control()
            .header()
            .calls_past_depth
            .load(Ordering::Acquire)
    }

    /// `-P`: the functions the program's runtimes patched, and those they refused. The
    /// program's counts; only said, never relied on.
    pub fn functions_patched(&self) -> (u64, u64) {
        let ctl = self.control();
        let h = ctl.header();
        (
            h.functions_patched.load(Ordering::Acquire),
            h.functions_refused.load(Ordering::Acquire),
        )
    }

    /// Objects the program's processes loaded that found the ring of objects full for
    /// [`shared::OBJECT_WAIT`] (their MMAP2 records and symbols are missing: their functions
    /// are named by address). The program's count; only said, never relied on.
    pub fn objects_lost(&self) -> u64 {
        self.control().objects_lost().load(Ordering::Acquire)
    }

    /// Whether a thread of the program claimed slot `i`.
    pub fn slot_claimed(&self, i: usize) -> bool {
        i < self.slots.len() && self.control().slot(i).state.load(Ordering::Acquire) != slot::FREE
    }

    /// Drains every claimed slot's data area and AUX area into `sink`. Returns how many
    /// records and AUX pieces it handed out. A ring the program corrupted is an error naming
    /// the slot; the other slots are still drained first.
    pub fn drain(
        &mut self,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        self.each_slot(|s, i| {
            let n = s.drain_slot_records(i, sink)?;
            Ok(n + s.drain_slot_aux(i, sink)?)
        })
    }

    /// Runs `f` on every claimed slot; every slot is visited, the first error is returned.
    fn each_slot(
        &mut self,
        mut f: impl FnMut(&mut Self, usize) -> std::io::Result<u64>,
    ) -> std::io::Result<u64> {
        let mut n = 0;
        let mut first_err = None;
        for i in 0..self.slots.len() {
            if !self.slot_claimed(i) {
                continue;
            }
            match f(self, i) {
                Ok(k) => n += k,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Hands every whole record of slot `i`'s data area to `sink`, then frees them.
    pub fn drain_slot_records(
        &mut self,
        i: usize,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        let Some(r) = self.slots.get_mut(i) else {
            return Ok(0);
        };
        let mut k = 0;
        let recs = r
            .data
            .read_records()
            .map_err(|e| os_err(&format!("slot {i}: data area"), e))?;
        for rec in recs {
            let rec = rec.map_err(|e| os_err(&format!("slot {i}: data area"), e))?;
            let bytes = rec.bytes.to_vec();
            sink(Drained::Record {
                slot: i,
                bytes: &bytes,
            })?;
            k += 1;
        }
        Ok(k)
    }

    /// Full-trace mode: hands slot `i`'s new AUX bytes to `sink`, then frees them (nothing in
    /// overwrite mode, which [`Self::snapshot_slot`] reads).
    pub fn drain_slot_aux(
        &mut self,
        i: usize,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        if self.overwrite {
            return Ok(0);
        }
        let Some(r) = self.slots.get_mut(i) else {
            return Ok(0);
        };
        let got = r
            .aux
            .read()
            .map_err(|e| os_err(&format!("slot {i}: AUX area"), e))?;
        if got.data.is_empty() {
            return Ok(0);
        }
        sink(Drained::Aux {
            slot: i,
            offset: got.offset,
            bytes: got.data,
        })?;
        Ok(1)
    }

    /// After the program ended: hands out, per slot, the trace bytes its thread wrote after the
    /// last aux_head it published (see [`shared::Slot::writer_head`]), from the consumer's aux_tail to the
    /// mirrored writer head. The head is the dead program's word: used only if it lies within
    /// one AUX area past aux_tail; the bytes are then read from this process's own mapping.
    /// Returns how many pieces it handed out.
    pub fn drain_unpublished(
        &mut self,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        self.each_slot(|s, i| s.drain_unpublished_slot(i, sink))
    }

    /// [`Self::drain_unpublished`] for slot `i`.
    pub fn drain_unpublished_slot(
        &mut self,
        i: usize,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        if self.overwrite || !self.slot_claimed(i) {
            return Ok(0);
        }
        let head = self.control().slot(i).writer_head.load(Ordering::Acquire);
        let r = &mut self.slots[i];
        let tail = r.aux.tail();
        if head <= tail || head - tail > r.aux.aux_size() {
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity((head - tail) as usize);
        r.aux
            .copy(tail, head, &mut bytes)
            .map_err(|e| os_err(&format!("slot {i}: AUX area"), e))?;
        sink(Drained::Aux {
            slot: i,
            offset: tail,
            bytes: &bytes,
        })?;
        Ok(1)
    }

    /// Overwrite mode: hands out the newest AUX-area bytes of every claimed slot (up to one
    /// area's worth, ending at the writer head its thread mirrors after every call), without
    /// stopping the thread: bytes the writer may have overwritten while they were copied (it
    /// moved on by the time the head is read again) are cut from the front. The head is the
    /// program's word: it only says where the window ends; the copy is one area long at most
    /// and comes from this process's mapping.
    pub fn snapshot(
        &mut self,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        self.each_slot(|s, i| s.snapshot_slot(i, sink))
    }

    /// [`Self::snapshot`] for slot `i`.
    pub fn snapshot_slot(
        &mut self,
        i: usize,
        sink: &mut dyn FnMut(Drained<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        if !self.slot_claimed(i) {
            return Ok(0);
        }
        let ctl = self.control();
        let r = &mut self.slots[i];
        let head_word = &ctl.slot(i).writer_head;
        let mut head = head_word.load(Ordering::Acquire);
        if ctl.slot(i).state.load(Ordering::Acquire) == slot::ENDED {
            // The thread's end wrote past its last mirrored head (its writer's LOST and
            // STOPPED packets) and published it.
            head = head.max(r.aux.aux_head());
        }
        let size = r.aux.aux_size();
        // Not before the thread's own first byte (a recycled slot's area holds its last
        // thread's trace below it).
        let start = self.aux_start[i];
        let mut from = head.saturating_sub(size).max(start);
        if head <= from {
            return Ok(0);
        }
        let mut bytes = Vec::with_capacity((head - from) as usize);
        r.aux
            .copy(from, head, &mut bytes)
            .map_err(|e| os_err(&format!("slot {i}: AUX snapshot"), e))?;
        let moved = head_word.load(Ordering::Acquire).saturating_sub(head);
        let cut = moved.min(bytes.len() as u64);
        if cut > 0 {
            bytes.drain(..cut as usize);
            from += cut;
        }
        sink(Drained::Snapshot {
            slot: i,
            offset: from,
            wrapped: head - start > size,
            bytes: &bytes,
        })?;
        Ok(1)
    }

    /// Marks slot `i` ENDED for a thread that is gone without saying so: its process image
    /// exec'd (which ends every thread of the old image; the recorder saw the new image's
    /// thread, the same task, in another slot) or its process ended (its pidfd said so), so
    /// nothing writes the slot any more. Its last
    /// bytes are taken before ([`Self::drain_unpublished_slot`]); then
    /// [`Self::recycle_slot`] frees it. Only a TRACING slot is marked.
    pub fn end_gone_slot(&mut self, i: usize) {
        if i < self.slots.len() {
            let _ = self.control().slot(i).state.compare_exchange(
                slot::TRACING,
                slot::ENDED,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    /// Gives slot `i`, whose thread ended cleanly (ENDED: its events closed and unmapped) and
    /// whose ring was drained since (in overwrite mode: its last snapshot taken), to the next
    /// thread that needs one: its words are cleared and it is FREE again. Its rings go on
    /// from where this thread's ended (each thread's event starts at the user page's heads),
    /// so the recorder's consumers keep their places. Whether the slot was ENDED and is free
    /// now.
    pub fn recycle_slot(&mut self, i: usize) -> bool {
        if i >= self.slots.len() {
            return false;
        }
        let ctl = self.control();
        let state = &ctl.slot(i).state;
        // A thread whose events failed keeps its slot: its error is said at the end.
        if state.load(Ordering::Acquire) != slot::ENDED
            || ctl.slot(i).open_error.load(Ordering::Acquire) != 0
        {
            return false;
        }
        // The next thread's writer starts at the aux_head its page holds (published when the
        // last one ended; a thread gone with its image left it where it last published, and
        // its bytes above were taken): its snapshots reach no further back. (The program's
        // word: it only bounds reads of this process's own mapping.)
        self.aux_start[i] = self.slots[i].aux.aux_head();
        let (data, aux) = &self.slots[i].mems;
        data.restore_layout_fields();
        aux.restore_layout_fields();
        // Every word but the state.
        for w in &ctl.slot(i).words()[1..] {
            w.store(0, Ordering::Relaxed);
        }
        for k in 0..self.events {
            ctl.slot_event_id(i, k).store(0, Ordering::Relaxed);
        }
        self.generations[i] += 1;
        state.store(slot::FREE, Ordering::Release);
        true
    }

    /// The threads that claimed a slot and opened their event.
    pub fn threads(&self) -> Vec<TracedThread> {
        let ctl = self.control();
        (0..self.slots.len())
            .filter_map(|i| {
                let s = ctl.slot(i);
                let w = |w: &std::sync::atomic::AtomicU64| w.load(Ordering::Acquire);
                let state = w(&s.state);
                if state != slot::TRACING && state != slot::ENDED {
                    return None;
                }
                let (tid, pid) = (
                    u32::try_from(w(&s.tid)).ok()?,
                    u32::try_from(w(&s.pid)).ok()?,
                );
                // A thread whose events failed to open wrote its tid but no event id.
                if tid == 0 || w(&s.event_id) == 0 {
                    return None;
                }
                // The program's words: a pid or tid out of range says no fork (the thread's
                // trace is kept; perf then knows its process by its COMM alone).
                let fork = match (u32::try_from(w(&s.ppid)), u32::try_from(w(&s.ptid))) {
                    (Ok(ppid), Ok(ptid)) if ppid != 0 => Some((ppid, ptid, w(&s.fork_time))),
                    _ => None,
                };
                Some(TracedThread {
                    slot: i,
                    pid,
                    tid,
                    fork,
                    event_id: w(&s.event_id),
                    ids: (0..self.events)
                        .map(|k| ctl.slot_event_id(i, k).load(Ordering::Acquire))
                        .collect(),
                    ended: state == slot::ENDED,
                    comm: comm_of([w(&s.comm[0]), w(&s.comm[1])]),
                    open_time: w(&s.open_time),
                    image_time: w(&s.image_time),
                    pid_ns: w(&s.pid_ns),
                    generation: self.generations[i],
                })
            })
            .collect()
    }

    /// Probe id -> function address, for the ids the runtime wrote (0 for a probe the
    /// program named: [`Self::probe_name`]).
    pub fn probes(&self) -> Vec<(u32, u64)> {
        (1..)
            .zip(&self.probe_addrs)
            .filter(|&(_, &a)| a != 0)
            .map(|(id, &a)| (id, if a & NAMED_PROBE != 0 { 0 } else { a }))
            .collect()
    }

    /// Probe ids the program's processes used so far ([`Self::take_probes`]): at least as
    /// many as the probe table will list.
    pub fn probe_ids(&self) -> usize {
        self.probe_addrs.len()
    }

    /// The uevent type names the program's processes gave (the last of a type wins); none
    /// once the area's magic or version was seen written over.
    pub fn uevent_type_names(&self) -> Vec<(u32, Vec<u8>)> {
        if self.control_damaged {
            return Vec::new();
        }
        self.control().uevent_type_names()
    }

    /// The name the program gave probe `id` (a `tracing` span's), if it named it.
    pub fn probe_name(&self, id: u32) -> Option<&str> {
        self.probe_names.get(&id).map(String::as_str)
    }

    /// Copies the probe addresses the program's processes wrote since the last call (each id's
    /// word is written once, when its function is first entered), so that a program that
    /// later writes over the control area leaves the names of the functions it called before
    /// whole. Nothing once the area's magic or version was seen written over.
    pub fn take_probes(&mut self) {
        if self.control_damaged {
            return;
        }
        let ctl = self.control();
        // The program's word: bounded by the table.
        let max = (ctl.header().max_probe_id.load(Ordering::Acquire) as usize).min(MAX_PROBES);
        if self.probe_addrs.len() < max {
            self.probe_addrs.resize(max, 0);
        }
        // From the first id still without an address (ids an exec'd image skipped stay so: a
        // pass looks at the ones above them again, a table's worth at most).
        for id in self.probes_filled..max {
            if self.probe_addrs[id] == 0
                && let Some(w) = ctl.probe_word(id as u32 + 1)
            {
                let word = w.load(Ordering::Acquire);
                self.probe_addrs[id] = word;
                // A name is read now, as the word is: the program may write over the area later.
                if let Some(name) = ctl.probe_name(word) {
                    self.probe_names
                        .insert(id as u32 + 1, String::from_utf8_lossy(&name).into_owned());
                }
            }
        }
        while self
            .probe_addrs
            .get(self.probes_filled)
            .is_some_and(|&a| a != 0)
        {
            self.probes_filled += 1;
        }
    }

    /// Takes the object entries the program's processes completed since the last call, in
    /// order, up to the first one still being written, and gives their places back to the
    /// ring; at most a ring's worth a call, and [`MAX_TAKEN_OBJECTS`] in all (whatever the
    /// program writes there). An entry still incomplete [`STUCK_OBJECT`] after it was first
    /// waited for, with later ones claimed, is passed over: its process died between claiming
    /// and finishing it (an `exit` or `execve` of another of its threads, a SIGKILL), and the
    /// ring must not stop there.
    pub fn take_objects(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        let ctl = self.control();
        for _ in 0..shared::MAX_OBJECTS {
            let n = self.objects_taken;
            if self.objects.len() >= MAX_TAKEN_OBJECTS {
                break;
            }
            let e = ctl.object(n);
            let w = |w: &std::sync::atomic::AtomicU64| w.load(Ordering::Acquire);
            if w(&e.done) != n + 1 {
                let later = ctl.object_count().load(Ordering::Acquire) > n + 1;
                let since = *self.object_stuck_since.get_or_insert_with(Instant::now);
                if !later || since.elapsed() < STUCK_OBJECT {
                    break;
                }
                self.object_stuck_since = None;
                self.objects_taken = n + 1;
                ctl.objects_taken().store(n + 1, Ordering::Release);
                continue;
            }
            self.object_stuck_since = None;
            let path = copy_out(&e.path, w(&e.path_len) as usize);
            self.objects.push(LoadedObject {
                base: w(&e.base),
                start: w(&e.start),
                len: w(&e.len),
                pgoff: w(&e.pgoff),
                time: w(&e.time),
                pid: u32::try_from(w(&e.pid)).unwrap_or(0),
                path: PathBuf::from(std::ffi::OsStr::from_bytes(&path)),
            });
            self.objects_taken = n + 1;
            // Read whole before the place is given back (Release: the next writer's Acquire).
            ctl.objects_taken().store(n + 1, Ordering::Release);
        }
    }

    /// The objects taken so far ([`Self::take_objects`]), in the order they were reported.
    pub fn objects(&self) -> &[LoadedObject] {
        &self.objects
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::ObjectEntry;

    /// A session of `slots` slots, one page a ring, no program.
    fn session(slots: usize) -> ProgramSession {
        growing_session(slots, slots)
    }

    /// A session of `slots` slots that grows up to `max`.
    fn growing_session(slots: usize, max: usize) -> ProgramSession {
        ProgramSession::new(&Options {
            runtime: PathBuf::from("/nonexistent"),
            slots,
            inherited: slots,
            max_slots: max,
            data_pages: 1,
            aux_pages: 1,
            overwrite: false,
            events: Vec::new(),
        })
        .unwrap()
    }

    /// The slots grow while the threads hold nearly all of them or wait for one: each new
    /// slot's memfds are named in the header (a sealed memfd of a ring's size, by its number
    /// and inode) before the count that publishes them; never past the most, and nothing
    /// changes while enough are free.
    #[test]
    fn slots_grow_as_threads_hold_them_up_to_the_most() {
        let mut s = growing_session(20, 60);
        let ctl = s.control();
        let h = ctl.header();
        // As the program's process stores it before its exec.
        h.magic.store(shared::MAGIC, Ordering::Release);
        assert_eq!(h.slots_max.load(Ordering::Acquire), 60);
        s.grow();
        assert_eq!(
            h.nslots.load(Ordering::Acquire),
            20,
            "none held: 20 free is enough"
        );
        for i in 0..20 {
            ctl.slot(i).state.store(slot::TRACING, Ordering::Release);
        }
        h.slots_wanted.store(10, Ordering::Release);
        s.grow();
        let n = h.nslots.load(Ordering::Acquire) as usize;
        assert!(n >= 20 + 10, "{n}");
        assert!(n < 60, "{n}");
        assert_eq!(s.slot_count(), n);
        for i in 0..n {
            let words = &h.ring_fds[i];
            for w in [&words.data, &words.aux] {
                let (fd, ino) = shared::fd_word_parts(w.load(Ordering::Acquire));
                // SAFETY: the session owns the descriptor for the test's length.
                let f = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                let st = rustix::fs::fstat(f).unwrap();
                assert_eq!(st.st_ino as u32, ino, "slot {i}");
                assert!(
                    rustix::fs::fcntl_get_seals(f)
                        .unwrap()
                        .contains(rustix::fs::SealFlags::GROW)
                );
            }
        }
        assert_eq!(h.ring_fds[n].data.load(Ordering::Acquire), 0);
        for i in 0..n {
            ctl.slot(i).state.store(slot::TRACING, Ordering::Release);
        }
        h.slots_wanted.store(1000, Ordering::Release);
        s.grow();
        assert_eq!(h.nslots.load(Ordering::Acquire), 60);
        assert_eq!(s.slot_limit(), (60, None));
        let mem = s.ring_memory();
        assert_eq!((mem.slots, mem.peak_held), (60, n));
        assert_eq!(mem.slot_size, 4 * 4096);
        for i in n..60 {
            ctl.slot(i).state.store(slot::CLAIMED, Ordering::Release);
        }
        s.grow();
        assert_eq!(s.ring_memory().peak_held, 60);
        assert_eq!(s.slot_count(), 60, "never past the most");
    }

    /// The slots past those made at the start get their rings in the memfds the program
    /// inherited (the descriptors it holds, by number and inode), and past those in new ones;
    /// none is made before a thread needs it.
    #[test]
    fn slots_grow_first_into_the_memfds_the_program_inherited() {
        let mut s = ProgramSession::new(&Options {
            runtime: PathBuf::from("/nonexistent"),
            slots: 2,
            inherited: 4,
            max_slots: 60,
            data_pages: 1,
            aux_pages: 1,
            overwrite: false,
            events: Vec::new(),
        })
        .unwrap();
        let inherited: Vec<(i32, u32)> = s
            .unmade
            .iter()
            .flat_map(|(d, a)| [d, a])
            .map(|f| (f.as_raw_fd(), rustix::fs::fstat(f).unwrap().st_ino as u32))
            .collect();
        assert_eq!(inherited.len(), 4);
        let ctl = s.control();
        let h = ctl.header();
        h.magic.store(shared::MAGIC, Ordering::Release);
        assert_eq!(h.nslots.load(Ordering::Acquire), 2);
        assert_eq!(h.ring_fds[2].data.load(Ordering::Acquire), 0);
        // One thread traced: the other slot is the next thread's, and nothing is made.
        ctl.slot(0).state.store(slot::TRACING, Ordering::Release);
        s.grow();
        assert_eq!(s.slot_count(), 2);
        for i in 0..4 {
            ctl.slot(i).state.store(slot::TRACING, Ordering::Release);
            s.grow();
        }
        let n = s.slot_count();
        assert!(n > 4, "{n}");
        let word = |i: usize| {
            [&h.ring_fds[i].data, &h.ring_fds[i].aux]
                .map(|w| shared::fd_word_parts(w.load(Ordering::Acquire)))
        };
        let grown: Vec<(i32, u32)> = (2..4).flat_map(word).collect();
        assert_eq!(grown, inherited, "slots 2 and 3 in the inherited memfds");
        for (fd, _) in (4..n).flat_map(word) {
            assert!(
                !inherited.iter().any(|&(f, _)| f == fd),
                "slot past 3: fd {fd}"
            );
        }
        assert!(s.unmade.is_empty());
    }

    /// The runtime's OPEN_ERROR word (shared::open_error_word) reads back as the thread, event,
    /// step and errno it was written for; a slot whose word is 0 is no error.
    #[test]
    fn open_error_words_read_back_as_written() {
        let s = session(3);
        let ctl = s.control();
        for (i, tid, step, event, errno) in [
            (0, 41, shared::open_step::OPEN, 0, libc::EINVAL),
            (2, 43, shared::open_step::ENABLE, 2, libc::ENOMEM),
        ] {
            ctl.slot(i).tid.store(tid, Ordering::Relaxed);
            ctl.slot(i).open_error.store(
                shared::open_error_word(step, event, errno),
                Ordering::Release,
            );
        }
        ctl.slot(1).tid.store(42, Ordering::Relaxed);
        let got = s.open_errors();
        assert_eq!(
            got,
            vec![
                OpenError {
                    tid: 41,
                    event: 0,
                    step: shared::open_step::OPEN,
                    errno: libc::EINVAL
                },
                OpenError {
                    tid: 43,
                    event: 2,
                    step: shared::open_step::ENABLE,
                    errno: libc::ENOMEM
                },
            ]
        );
    }

    /// The ring of loaded objects: a process claims and writes entries while the recorder
    /// takes them, past the ring's size many times; a full ring refuses claims until the
    /// recorder takes; an entry claimed but not yet complete stops the taking there, and the
    /// ones after it are taken once it is.
    #[test]
    fn objects_come_through_the_ring_in_order_past_its_size() {
        let mut s = session(1);
        let ctl = s.control();
        let entry = |k: u64, path: &'static [u8]| ObjectEntry {
            base: k << 20,
            start: (k << 20) + 4096,
            len: 8192,
            pgoff: 4096,
            time: k,
            pid: 100 + k,
            path,
        };
        let total = 3 * shared::MAX_OBJECTS as u64 + 5;
        let mut written = 0;
        while written < total {
            // Fill the ring, then let the recorder take.
            while let Some(n) = ctl.try_claim_object() {
                assert_eq!(n, written);
                ctl.write_object(n, &entry(n, b"/lib/x.so"));
                written += 1;
                if written == total {
                    break;
                }
            }
            if written < total {
                assert_eq!(
                    ctl.object_count().load(Ordering::Relaxed)
                        - ctl.objects_taken().load(Ordering::Relaxed),
                    shared::MAX_OBJECTS as u64,
                    "a full ring refuses"
                );
            }
            s.take_objects();
        }
        assert_eq!(s.objects().len() as u64, total);
        for (k, o) in s.objects().iter().enumerate() {
            let k = k as u64;
            assert_eq!((o.base, o.time, o.pid), (k << 20, k, (100 + k) as u32));
            assert_eq!(o.path, PathBuf::from("/lib/x.so"));
        }
        // Claimed but not complete: nothing after it is taken until it is.
        let a = ctl.try_claim_object().unwrap();
        let b = ctl.try_claim_object().unwrap();
        ctl.write_object(b, &entry(b, b"/b"));
        s.take_objects();
        assert_eq!(s.objects().len() as u64, total);
        ctl.write_object(a, &entry(a, b"/a"));
        s.take_objects();
        let last: Vec<_> = s.objects()[total as usize..]
            .iter()
            .map(|o| o.path.clone())
            .collect();
        assert_eq!(last, [PathBuf::from("/a"), PathBuf::from("/b")]);
    }

    /// A full ring: a claim that may not wait, or made after the recording ended, fails at
    /// once and is counted; an entry a dead process claimed and never finished holds the ring
    /// up only for [`STUCK_OBJECT`], then the ones after it are taken.
    #[test]
    fn a_stuck_or_full_ring_costs_a_claim_no_wait_and_is_counted() {
        let mut s = session(1);
        let ctl = s.control();
        let entry = ObjectEntry {
            base: 0,
            start: 4096,
            len: 4096,
            pgoff: 0,
            time: 1,
            pid: 7,
            path: b"/x",
        };
        let dead = ctl.try_claim_object().unwrap();
        while let Some(n) = ctl.try_claim_object() {
            ctl.write_object(n, &entry);
        }
        assert_eq!(ctl.claim_object(false), None);
        ctl.header().closed.store(1, Ordering::Release);
        assert_eq!(ctl.claim_object(true), None);
        ctl.header().closed.store(0, Ordering::Release);
        assert_eq!(s.objects_lost(), 2);
        s.take_objects();
        assert!(s.objects().is_empty(), "held up by entry {dead}");
        std::thread::sleep(STUCK_OBJECT);
        s.take_objects();
        assert_eq!(s.objects().len(), shared::MAX_OBJECTS - 1);
        assert!(ctl.try_claim_object().is_some());
    }

    /// The ring of forked children: the newest entry of a pid is found, past the ring's size;
    /// an entry written over a turn later is not; one being written is passed over.
    #[test]
    fn children_are_found_by_pid_in_the_ring_newest_first() {
        let s = session(1);
        let ctl = s.control();
        let child = |pid: u64, k: u64| shared::ChildEntry {
            pid,
            ppid: 1,
            ptid: 2,
            fork_time: k,
            pid_ns: 77,
        };
        let n = 3 * shared::MAX_CHILDREN as u64 + 7;
        for k in 0..n {
            // pids 1000..1099 come round again and again.
            ctl.push_child(&child(1000 + k % 100, k));
        }
        let newest = |pid: u64| (0..n).rev().find(|k| 1000 + k % 100 == pid).unwrap();
        for pid in [1000, 1042, 1099] {
            assert_eq!(ctl.find_child(pid, 77), Some(child(pid, newest(pid))));
        }
        assert_eq!(ctl.find_child(999, 77), None);
        // The same pid in another pid namespace is another process.
        assert_eq!(ctl.find_child(1042, 78), None);
        // A pid seen only a turn before: written over.
        ctl.push_child(&child(5, n));
        for k in 0..shared::MAX_CHILDREN as u64 {
            ctl.push_child(&child(6, n + 1 + k));
        }
        assert_eq!(ctl.find_child(5, 77), None);
        // The newest entry's place being written (its seq 0): the one before it is found.
        let last = ctl.child_count().load(Ordering::Relaxed) - 1;
        ctl.push_child(&child(6, 0));
        let torn = ctl.child_count().load(Ordering::Relaxed) - 1;
        assert_eq!(torn, last + 1);
        ctl.child(torn).seq.store(0, Ordering::Relaxed);
        assert_eq!(
            ctl.find_child(6, 77).map(|c| c.fork_time),
            Some(n + shared::MAX_CHILDREN as u64)
        );
    }
}
