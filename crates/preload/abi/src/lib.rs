//! The control memfd the recorder shares with the traced program: its header, the per-thread
//! slot words, the table of probe addresses and the table of loaded objects.
//!
//! The recorder creates it (size sealed) and the runtime in the program maps it writable.
//! Everything the recorder reads back here was written by the program and is checked before it
//! is used: indices are bounded by the recorder's own counts, strings by their arrays, and a
//! dying program can leave any byte half-written, so every entry has a word stored last
//! (Release) that says it is complete.
//!
//! Layout, all words native-endian u64 unless said (offsets in bytes):
//! - header at 0: `MAGIC`, `VERSION`, `nslots`, `data_pages`, `aux_pages`, `pid`,
//!   `max_probe_id`, `overwrite`, the recorder's TSC calibration (`tsc_*`), the next event id,
//!   `closed`, `tsc_pending`, `no_slot`, `watched_pid_ns`, then `nslots`
//!   pairs of ring memfd words (data, AUX: descriptor and inode, [`fd_word`]) from
//!   `HEADER_FDS`;
//! - slots from `slots_offset()`: per slot `state`, `tid`, `event_id`, `pid`, `writer_head`,
//!   `open_error`, and for a forked child's threads `ppid`, `ptid`, `fork_time` (`slot::SIZE`
//!   bytes each);
//! - probes from `probes_offset()`: `MAX_PROBES` words, word `id - 1` holds the function
//!   address of swtrace probe `id` (0: not written);
//! - objects from `objects_offset()`: the count word (entries claimed), the recorder's taken
//!   word, the lost word, then a ring of `MAX_OBJECTS` entries of `OBJECT_SIZE` bytes:
//!   `done`, `base`, `start`, `len`, `pgoff`, `path_len`, `time`, `pid`, path bytes (see
//!   [`Control::claim_object`]);
//! - events from `events_offset()`: the count word, then `MAX_EVENTS` entries of
//!   `EVENT_SIZE` bytes (the recorder's `-e` events, see [`event`]), written by the recorder
//!   before the program starts;
//! - per-slot event ids from `slot_ids_offset()`: `MAX_EVENTS` words per slot, the sample id
//!   of each event the slot's thread opened, in event order;
//! - forked children from `children_offset()`: the count word, then a ring of `MAX_CHILDREN`
//!   entries of [`child::SIZE`] bytes (`pid`, `ppid`, `ptid`, `fork_time`, `seq`), which the
//!   runtime writes in each child it forks: an image a child execs finds its pid there
//!   ([`Control::push_child`], [`Control::find_child`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// "PFXPRELD".
pub const MAGIC: u64 = u64::from_le_bytes(*b"PFXPRELD");
/// Bumped on any layout change.
pub const VERSION: u64 = 11;
/// The environment variable naming the control memfd's descriptor in the program.
pub const ENV_CTL_FD: &str = "PERFAUX_PRELOAD_FD";
/// The environment variable naming the recorder's descriptor directory (`/proc/PID/fd`): a
/// descendant that closed the inherited descriptors (a shell's or Python's `close_fds`)
/// opens the recorder's memfds there, by the numbers they have in the recorder.
pub const ENV_FD_DIR: &str = "PERFAUX_PRELOAD_FD_DIR";

/// A ring memfd's word in the header: its descriptor number (the same in the recorder and
/// in the program, which inherits it) in bits 0-31, the low 32 bits of its inode in bits
/// 32-63, by which the program tells the recorder's memfd from a file that took its number.
pub fn fd_word(fd: i32, ino: u64) -> u64 {
    u64::from(fd as u32) | (ino & 0xffff_ffff) << 32
}

/// The (descriptor, low 32 bits of the inode) of a [`fd_word`].
pub fn fd_word_parts(w: u64) -> (i32, u32) {
    (w as u32 as i32, (w >> 32) as u32)
}

/// Offsets of the header words.
pub mod header {
    /// [`super::MAGIC`].
    pub const MAGIC: usize = 0;
    /// [`super::VERSION`].
    pub const VERSION: usize = 8;
    /// Thread slots.
    pub const NSLOTS: usize = 16;
    /// Data pages of each slot's data ring.
    pub const DATA_PAGES: usize = 24;
    /// AUX pages of each slot's AUX ring.
    pub const AUX_PAGES: usize = 32;
    /// The pid of the program the recorder spawned (its descendants find their own fork's
    /// words in the table of children, or are spawned ones: see the runtime's `init`).
    pub const PID: usize = 40;
    /// The highest swtrace probe id written into the probe table so far: an image the process
    /// exec'd starts its own ids above it (see the runtime's `init`), so ids stay unique in
    /// the one probe table of the recording.
    pub const MAX_PROBE_ID: usize = 48;
    /// Non-zero: the AUX areas run in overwrite mode (`-S`, the flight recorder): each thread
    /// maps its AUX area read-only, and the recorder takes snapshots.
    pub const OVERWRITE: usize = 56;
    /// The recorder's TSC calibration (perfaux-swtrace `clock::TscCalibration`), which the
    /// runtime adopts instead of spinning 10 ms of its own in every traced process: the first
    /// pair's ticks and ns, the span the rate was measured over, and the rate as
    /// `mult | shift << 32` (0: none, the runtime calibrates itself).
    pub const TSC_BASE_TICKS: usize = 64;
    /// See [`TSC_BASE_TICKS`].
    pub const TSC_BASE_NS: usize = 72;
    /// See [`TSC_BASE_TICKS`].
    pub const TSC_SPAN: usize = 80;
    /// See [`TSC_BASE_TICKS`].
    pub const TSC_RATE: usize = 88;
    /// The next event id of the recording (the recorder starts it at 1): the runtime of every
    /// traced process draws its events' ids here (perfaux-core `share_event_ids`), so a
    /// forked child's and an exec'd image's ids are not its parent's or its old image's.
    pub const NEXT_EVENT_ID: usize = 96;
    /// Non-zero once the recording has ended (the program the user started is gone): a thread
    /// or an image that starts later is not traced (a descendant may outlive the recording).
    pub const CLOSED: usize = 104;
    /// Non-zero while the recorder still measures the TSC calibration it hands over (the
    /// program starts meanwhile): a process waits for it at its first hook, not at its start.
    pub const TSC_PENDING: usize = 112;
    /// Threads that found every slot taken (as many threads traced at once as there are
    /// slots; a slot whose thread ended goes to the next): not traced, counted here for the
    /// recorder to say.
    pub const NO_SLOT: usize = 120;
    /// The pid namespace (its /proc/PID/ns/pid inode) whose processes the recorder watches
    /// for their end (0: none, no pidfds): a slot held by an ended process of it goes to the
    /// next thread within a pass, so a thread that finds no free slot waits for it.
    pub const WATCHED_PID_NS: usize = 128;
}
/// The first (data fd, AUX fd) pair.
pub const HEADER_FDS: usize = 136;
/// At most this many thread slots.
pub const MAX_SLOTS: usize = 256;

/// Slot states (`state` word).
pub mod slot {
    /// Nobody has it.
    pub const FREE: u64 = 0;
    /// A thread claimed it (CAS from FREE) and is opening its event.
    pub const CLAIMED: u64 = 1;
    /// The thread's event is open and enabled; `tid` and `event_id` are written.
    pub const TRACING: u64 = 2;
    /// The thread ended cleanly (its events were disabled, unmapped and closed: it writes
    /// the slot's memory no more). The recorder takes the slot's last bytes and makes it FREE
    /// for the next thread (the host's `recycle_slot`).
    pub const ENDED: u64 = 3;
    /// Word offsets within a slot.
    pub const STATE: usize = 0;
    /// Thread id.
    pub const TID: usize = 8;
    /// The trace event's id (its sample_id IDENTIFIER).
    pub const EVENT_ID: usize = 16;
    /// Process id.
    pub const PID: usize = 24;
    /// The thread's trace writer's head (an AUX stream position), mirrored after every traced
    /// entry and exit: the trace writer publishes the user page's aux_head only when a
    /// transaction ends, so this is how far a thread killed mid-transaction (SIGKILL, `_exit`
    /// from a signal handler, a thread still running at exit) wrote.
    pub const WRITER_HEAD: usize = 32;
    /// Why the thread's events could not be set up (0: they were): `step << 48 | (index +
    /// 1) << 32 | errno` of the first event and step ([`super::open_step`]) that failed.
    pub const OPEN_ERROR: usize = 40;
    /// A forked child's thread: the pid of the process that forked it (0 in the program the
    /// recorder spawned and the images it exec'd).
    pub const PPID: usize = 48;
    /// A forked child's thread: the tid of the parent's thread that called fork.
    pub const PTID: usize = 56;
    /// A forked child's thread: when the child began (CLOCK_MONOTONIC ns, the clock of the
    /// program's events): the time of its PERF_RECORD_FORK.
    pub const FORK_TIME: usize = 64;
    /// The thread's name when it opened its events (`PR_GET_NAME`: the kernel's comm, at most
    /// 15 bytes and a NUL; an exec'd image's is its file's name), 16 bytes over two words.
    pub const COMM: usize = 72;
    /// When the thread opened its events (CLOCK_MONOTONIC ns): the time of an exec'd image's
    /// PERF_RECORD_COMM.
    pub const OPEN_TIME: usize = 88;
    /// When the thread's process image began (CLOCK_MONOTONIC ns at the runtime's
    /// constructor; a forked child's is its parent's): an exec'd image's threads have a later
    /// one than the threads the exec ended, which the recorder frees.
    pub const IMAGE_TIME: usize = 96;
    /// The inode of the thread's pid namespace (0: not known): its pid is that namespace's.
    pub const PID_NS: usize = 104;
    /// Bytes per slot.
    pub const SIZE: usize = 128;
}

/// The steps of a thread's event setup, as [`slot::OPEN_ERROR`] names the one that failed.
pub mod open_step {
    /// perf_event_open.
    pub const OPEN: u64 = 0;
    /// Mapping the buffer's user page and data area.
    pub const MAP_DATA: u64 = 1;
    /// Mapping the AUX area (or setting its place).
    pub const MAP_AUX: u64 = 2;
    /// PERF_EVENT_IOC_SET_OUTPUT of a member into the trace event's buffer.
    pub const SET_OUTPUT: u64 = 3;
    /// PERF_EVENT_IOC_ENABLE.
    pub const ENABLE: u64 = 4;
}

/// The [`slot::OPEN_ERROR`] word for step `step` ([`open_step`]) of event `event` failing
/// with `errno`.
pub fn open_error_word(step: u64, event: usize, errno: i32) -> u64 {
    step << 48 | ((event as u64 + 1) & 0xffff) << 32 | u64::from(errno as u32)
}

/// Probe addresses kept (ids beyond are traced, and named by address in the table only if
/// the recorder can find them: not).
pub const MAX_PROBES: usize = 1 << 16;
/// Entries of the ring of loaded objects (the recorder takes them as they come: any number
/// in a recording, at most this many not yet taken).
pub const MAX_OBJECTS: usize = 512;
/// How long a process waits for room in a full ring of objects.
pub const OBJECT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
/// Longest object path kept.
pub const PATH_MAX: usize = 4096 - 64;
/// Bytes per object entry.
pub const OBJECT_SIZE: usize = 4096;

/// A loaded object's executable segment, as a process writes it ([`Control::write_object`]).
#[derive(Debug, Clone, Copy)]
pub struct ObjectEntry<'a> {
    /// The load bias (`dlpi_addr`).
    pub base: u64,
    /// Start of the segment (page aligned).
    pub start: u64,
    /// Its length.
    pub len: u64,
    /// Its file offset (page aligned).
    pub pgoff: u64,
    /// When it was found (CLOCK_MONOTONIC ns).
    pub time: u64,
    /// The process.
    pub pid: u64,
    /// The file (at most [`PATH_MAX`] bytes kept).
    pub path: &'a [u8],
}

/// Word offsets within an object entry.
pub mod object {
    /// The entry's number + 1 once it is complete (stored last, Release): tells it from the
    /// entry a ring's turn before in the same place.
    pub const DONE: usize = 0;
    /// The load bias (`dlpi_addr`): symbol value + base = run-time address.
    pub const BASE: usize = 8;
    /// Start of the executable segment (page aligned).
    pub const START: usize = 16;
    /// Its length.
    pub const LEN: usize = 24;
    /// Its file offset (page aligned).
    pub const PGOFF: usize = 32;
    /// Bytes of path.
    pub const PATH_LEN: usize = 40;
    /// When the runtime found the object (CLOCK_MONOTONIC ns, the clock of the program's
    /// events): the time of its MMAP2 record, before any sample in it.
    pub const TIME: usize = 48;
    /// The process that loaded it (a forked child's objects are its own; those loaded before
    /// the fork it inherits, as perf's FORK record says).
    pub const PID: usize = 56;
    /// The path bytes.
    pub const PATH: usize = 64;
}

/// Events per recording (the `-e` events and the uevent stream).
pub const MAX_EVENTS: usize = 16;
/// Bytes per event entry.
pub const EVENT_SIZE: usize = 1024;
/// Longest attr an event entry holds.
pub const ATTR_MAX: usize = 256;
/// Longest function name an event entry holds.
pub const FUNC_MAX: usize = EVENT_SIZE - event::FUNC;

/// Offsets within an event entry. The recorder writes them before the program runs; the
/// runtime writes only `FOUND`.
pub mod event {
    /// Index of the event's group leader (its own index for a leader).
    pub const LEADER: usize = 0;
    /// Bytes of attr.
    pub const ATTR_LEN: usize = 8;
    /// Bytes of function name: non-zero for `probe:FUNC`, whose `config` the runtime fills
    /// in (the probe PMU's value for the probes named FUNC).
    pub const FUNC_LEN: usize = 16;
    /// Set by the runtime once FUNC named a function in a loaded object.
    pub const FOUND: usize = 24;
    /// The attr (`perf_event_attr`, native endian, its own `size` long).
    pub const ATTR: usize = 32;
    /// The function name bytes.
    pub const FUNC: usize = ATTR + super::ATTR_MAX;
}

/// Forked children kept: the newest, in a ring (a child whose entry 1024 later forks wrote
/// over before it exec'd is taken for a spawned process: one FORK more, its old image's
/// slots not freed at the exec).
pub const MAX_CHILDREN: usize = 1024;

/// Offsets within a forked child's entry.
pub mod child {
    /// The child's pid.
    pub const PID: usize = 0;
    /// Its parent's pid.
    pub const PPID: usize = 8;
    /// The tid of the parent's thread that forked it.
    pub const PTID: usize = 16;
    /// When it began (CLOCK_MONOTONIC ns).
    pub const FORK_TIME: usize = 24;
    /// The inode of its pid namespace (0: not known).
    pub const PID_NS: usize = 32;
    /// The entry's number + 1 while it is whole, 0 while it is written (a sequence lock:
    /// the ring's next turn writes over the place).
    pub const SEQ: usize = 40;
    /// Bytes per entry.
    pub const SIZE: usize = 48;
}

/// A forked child's entry ([`Control::push_child`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildEntry {
    /// The child's pid.
    pub pid: u64,
    /// Its parent's pid.
    pub ppid: u64,
    /// The tid of the parent's thread that forked it.
    pub ptid: u64,
    /// When it began (CLOCK_MONOTONIC ns).
    pub fork_time: u64,
    /// The inode of its pid namespace (0: not known): `pid` is that namespace's.
    pub pid_ns: u64,
}

/// Where the slots start.
pub const fn slots_offset() -> usize {
    8192
}

// Every slot's fd pair lies in the header, before the slots.
const _: () = assert!(HEADER_FDS + MAX_SLOTS * 16 <= slots_offset());

/// Where the probe table starts.
pub const fn probes_offset() -> usize {
    slots_offset() + MAX_SLOTS * slot::SIZE
}

/// Where the object table starts (its count word).
pub const fn objects_offset() -> usize {
    probes_offset() + MAX_PROBES * 8
}

/// Where the event table starts (its count word).
pub const fn events_offset() -> usize {
    objects_offset() + 4096 + MAX_OBJECTS * OBJECT_SIZE
}

/// Where the per-slot event ids start.
pub const fn slot_ids_offset() -> usize {
    events_offset() + 4096 + MAX_EVENTS * EVENT_SIZE
}

/// Where the table of forked children starts (its count word).
pub const fn children_offset() -> usize {
    slot_ids_offset() + MAX_SLOTS * MAX_EVENTS * 8
}

/// The control memfd's size.
pub const fn total_len() -> usize {
    children_offset() + 4096 + MAX_CHILDREN * child::SIZE
}

/// A view of a mapped control area. Every access is atomic or a bounded byte copy: the other
/// process writes the same memory.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    base: *mut u8,
}

// SAFETY: every access through Control is atomic (words) or a volatile byte copy of a
// bounded range; the mapping outlives every Control (the owner keeps it for the process's
// life on the runtime side, for the session's on the recorder side).
unsafe impl Send for Control {}
// SAFETY: as for Send.
unsafe impl Sync for Control {}

impl Control {
    /// A view of `total_len()` mapped bytes at `base`.
    ///
    /// # Safety
    /// `base` is page aligned and maps at least [`total_len`] bytes for as long as the view
    /// and its copies are used.
    pub unsafe fn new(base: *mut u8) -> Control {
        Control { base }
    }

    /// The word at byte offset `off`.
    ///
    /// # Panics
    /// If `off` is not 8-aligned or the word is not inside the area (a bug in the caller:
    /// offsets come from this module's constants and bounded indices).
    pub fn word(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= total_len(),
            "control word {off}"
        );
        // SAFETY: in bounds and 8-aligned (checked), the mapping lives (Control::new's
        // contract), and every access to the word from either process is atomic.
        unsafe { &*(self.base.wrapping_add(off) as *const AtomicU64) }
    }

    /// The word `off` of slot `i`.
    pub fn slot_word(&self, i: usize, off: usize) -> &AtomicU64 {
        assert!(i < MAX_SLOTS);
        self.word(slots_offset() + i * slot::SIZE + off)
    }

    /// The probe table word of probe id `id` (`None` past the table).
    pub fn probe_word(&self, id: u32) -> Option<&AtomicU64> {
        let i = (id as usize).checked_sub(1)?;
        (i < MAX_PROBES).then(|| self.word(probes_offset() + i * 8))
    }

    /// The id word of event `k` in slot `i`.
    pub fn slot_event_id(&self, i: usize, k: usize) -> &AtomicU64 {
        assert!(i < MAX_SLOTS && k < MAX_EVENTS);
        self.word(slot_ids_offset() + (i * MAX_EVENTS + k) * 8)
    }

    /// The event count word.
    pub fn event_count(&self) -> &AtomicU64 {
        self.word(events_offset())
    }

    /// The byte offset of event entry `k`.
    pub fn event_offset(k: usize) -> usize {
        assert!(k < MAX_EVENTS);
        events_offset() + 4096 + k * EVENT_SIZE
    }

    /// The forked children's count word (entries claimed; may exceed [`MAX_CHILDREN`]).
    pub fn child_count(&self) -> &AtomicU64 {
        self.word(children_offset())
    }

    /// The word `off` of forked child entry `n` (the ring's place `n % MAX_CHILDREN`).
    fn child_word(&self, n: u64, off: usize) -> &AtomicU64 {
        let place = (n % MAX_CHILDREN as u64) as usize;
        self.word(children_offset() + 4096 + place * child::SIZE + off)
    }

    /// Writes a forked child's entry into the next place of the ring (over the entry a turn
    /// before).
    pub fn push_child(&self, c: &ChildEntry) {
        let n = self.child_count().fetch_add(1, Ordering::AcqRel);
        let seq = self.child_word(n, child::SEQ);
        seq.store(0, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (off, v) in [
            (child::PID, c.pid),
            (child::PPID, c.ppid),
            (child::PTID, c.ptid),
            (child::FORK_TIME, c.fork_time),
            (child::PID_NS, c.pid_ns),
        ] {
            self.child_word(n, off).store(v, Ordering::Relaxed);
        }
        seq.store(n + 1, Ordering::Release);
    }

    /// The newest whole entry of child `pid` of pid namespace `pid_ns` among the ring's (an
    /// entry being written, or written over while it was read, is passed over).
    pub fn find_child(&self, pid: u64, pid_ns: u64) -> Option<ChildEntry> {
        let count = self.child_count().load(Ordering::Acquire);
        (count.saturating_sub(MAX_CHILDREN as u64)..count)
            .rev()
            .find_map(|n| {
                let seq = self.child_word(n, child::SEQ);
                if seq.load(Ordering::Acquire) != n + 1 {
                    return None;
                }
                let w = |off| self.child_word(n, off).load(Ordering::Relaxed);
                let c = ChildEntry {
                    pid: w(child::PID),
                    ppid: w(child::PPID),
                    ptid: w(child::PTID),
                    fork_time: w(child::FORK_TIME),
                    pid_ns: w(child::PID_NS),
                };
                std::sync::atomic::fence(Ordering::Acquire);
                let whole = seq.load(Ordering::Relaxed) == n + 1;
                (whole && c.pid == pid && c.pid_ns == pid_ns).then_some(c)
            })
    }

    /// The object entries claimed so far (the program's word).
    pub fn object_count(&self) -> &AtomicU64 {
        self.word(objects_offset())
    }

    /// The object entries the recorder took so far (its word; the program only reads it).
    pub fn objects_taken(&self) -> &AtomicU64 {
        self.word(objects_offset() + 8)
    }

    /// Objects a process could not write: the ring stayed full (the recorder did not take
    /// entries for [`OBJECT_WAIT`]).
    pub fn objects_lost(&self) -> &AtomicU64 {
        self.word(objects_offset() + 16)
    }

    /// The byte offset of object entry `n` (the ring's place `n % MAX_OBJECTS`).
    pub fn object_offset(n: u64) -> usize {
        objects_offset() + 4096 + (n % MAX_OBJECTS as u64) as usize * OBJECT_SIZE
    }

    /// Claims the next object entry for the calling process to write (then its `DONE` word,
    /// [`object::DONE`], last), if the ring has room: the recorder took the entry a turn
    /// before it. Its number, or `None` while the ring is full.
    pub fn try_claim_object(&self) -> Option<u64> {
        let count = self.object_count();
        let mut n = count.load(Ordering::Acquire);
        loop {
            let taken = self.objects_taken().load(Ordering::Acquire);
            if n >= taken.saturating_add(MAX_OBJECTS as u64) {
                return None;
            }
            match count.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(n),
                Err(now) => n = now,
            }
        }
    }

    /// Writes object entry `n` (claimed with [`Control::claim_object`]), its `DONE` word last.
    pub fn write_object(&self, n: u64, o: &ObjectEntry<'_>) {
        let off = Control::object_offset(n);
        let w = |f: usize, v: u64| self.word(off + f).store(v, Ordering::Relaxed);
        let path = &o.path[..o.path.len().min(PATH_MAX)];
        w(object::BASE, o.base);
        w(object::START, o.start);
        w(object::LEN, o.len);
        w(object::PGOFF, o.pgoff);
        w(object::PATH_LEN, path.len() as u64);
        w(object::TIME, o.time);
        w(object::PID, o.pid);
        self.write_bytes(off + object::PATH, path);
        self.word(off + object::DONE)
            .store(n + 1, Ordering::Release);
    }

    /// [`Control::try_claim_object`], waiting up to [`OBJECT_WAIT`] for the recorder to take
    /// entries of a full ring (it does at each pass of its loop, a millisecond apart); `None`
    /// (counted in [`Control::objects_lost`]) if it does not. No wait once `may_wait` is
    /// false (the caller's process waited in vain before: the recorder is stuck or gone) or
    /// the recording has ended (nobody takes entries any more).
    pub fn claim_object(&self, may_wait: bool) -> Option<u64> {
        let start = std::time::Instant::now();
        loop {
            if let Some(n) = self.try_claim_object() {
                return Some(n);
            }
            let closed = self.word(header::CLOSED).load(Ordering::Acquire) != 0;
            if !may_wait || closed || start.elapsed() >= OBJECT_WAIT {
                self.objects_lost().fetch_add(1, Ordering::AcqRel);
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Copies `len` bytes at `off` out (clamped to the area).
    pub fn read_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        let end = off.saturating_add(len).min(total_len());
        (off..end)
            .map(|o| {
                // SAFETY: o < total_len(), inside the mapping; a volatile read because the other
                // process may write the byte.
                unsafe { std::ptr::read_volatile(self.base.wrapping_add(o)) }
            })
            .collect()
    }

    /// Copies `bytes` in at `off` (clamped to the area).
    pub fn write_bytes(&self, off: usize, bytes: &[u8]) {
        for (k, &b) in bytes.iter().enumerate() {
            let o = off + k;
            if o >= total_len() {
                break;
            }
            // SAFETY: o < total_len(), inside the mapping; volatile because the other process
            // may read it at any time.
            unsafe { std::ptr::write_volatile(self.base.wrapping_add(o), b) };
        }
    }
}
