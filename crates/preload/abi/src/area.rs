//! The control area's memory, as `#[repr(C)]` structs of atomics.
//!
//! Two processes map these bytes (the recorder and each traced process), so every byte of
//! the area lies inside an atomic, reserved room included: a `&ControlArea` stays sound
//! whatever the other process stores anywhere in it. Words are native-endian `u64`
//! ([`AtomicU64`]), strings and attrs byte arrays ([`AtomicU8`]), copied in and out a byte
//! at a time within their arrays.
//!
//! The sections follow each other in [`ControlArea`]'s order, each starting on a page
//! (checked below), as uftrace's mcount.h places its shared words for its recorder and
//! libmcount.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU8, AtomicU64};

use crate::{
    ATTR_MAX, EVENT_SIZE, FUNC_MAX, MAX_CHILDREN, MAX_EVENTS, MAX_OBJECTS, MAX_PROBES, MAX_SLOTS,
    MAX_UEVENT_NAMES, OBJECT_SIZE, PATH_MAX, PROBE_NAMES_SIZE,
};

/// The sections start on pages of this size (the smallest the kernel maps).
pub const PAGE: usize = 4096;
/// Words in a page.
const PAGE_WORDS: usize = PAGE / 8;
/// Bytes the header takes: a page of its words and reserved room, then the ring descriptors.
pub const HEADER_SIZE: usize = PAGE + MAX_SLOTS * size_of::<RingFds>();
/// The header's own words, before [`ControlHeader::ring_fds`].
const HEADER_WORDS: usize = 25;

/// A slot's ring memfds, each a [`crate::fd_word`].
#[repr(C)]
#[derive(Debug)]
pub struct RingFds {
    /// The data ring's memfd.
    pub data: AtomicU64,
    /// The AUX ring's memfd.
    pub aux: AtomicU64,
}

/// The header: what the recorder tells every traced process, and the counters they share.
#[repr(C)]
#[derive(Debug)]
pub struct ControlHeader {
    /// [`crate::MAGIC`], stored last by the recorder (in the program's process before exec).
    pub magic: AtomicU64,
    /// [`crate::VERSION`]: a runtime of another layout does not map the area.
    pub version: AtomicU64,
    /// Thread slots whose rings the recorder has made (it grows them while the program runs,
    /// [`ControlHeader::slots_wanted`]; stored Release after their [`ControlHeader::ring_fds`]
    /// words).
    pub nslots: AtomicU64,
    /// Data pages of each slot's data ring.
    pub data_pages: AtomicU64,
    /// AUX pages of each slot's AUX ring.
    pub aux_pages: AtomicU64,
    /// The pid of the program the recorder spawned (its descendants find their own fork's
    /// words in the table of children, or are spawned ones: see the runtime's `init`).
    pub pid: AtomicU64,
    /// The highest swtrace probe id written into the probe table so far: an image the process
    /// exec'd starts its own ids above it (see the runtime's `init`), so ids stay unique in
    /// the one probe table of the recording.
    pub max_probe_id: AtomicU64,
    /// Non-zero: the AUX areas run in overwrite mode (`-S`, the flight recorder): each thread
    /// maps its AUX area read-only, and the recorder takes snapshots.
    pub overwrite: AtomicU64,
    /// The recorder's TSC calibration (perfaux-swtrace `clock::TscCalibration`), which the
    /// runtime adopts instead of spinning 10 ms of its own in every traced process: the first
    /// pair's ticks and ns, the span the rate was measured over, and the rate as
    /// `mult | shift << 32` (0: none, the runtime calibrates itself).
    pub tsc_base_ticks: AtomicU64,
    /// See [`ControlHeader::tsc_base_ticks`].
    pub tsc_base_ns: AtomicU64,
    /// See [`ControlHeader::tsc_base_ticks`].
    pub tsc_span: AtomicU64,
    /// See [`ControlHeader::tsc_base_ticks`].
    pub tsc_rate: AtomicU64,
    /// The next event id of the recording (the recorder starts it at 1): the runtime of every
    /// traced process draws its events' ids here (perfaux-core `share_event_ids`), so a
    /// forked child's and an exec'd image's ids are not its parent's or its old image's.
    pub next_event_id: AtomicU64,
    /// Non-zero once the recording has ended (the program the user started is gone): a thread
    /// or an image that starts later is not traced (a descendant may outlive the recording).
    pub closed: AtomicU64,
    /// Non-zero while the recorder still measures the TSC calibration it hands over (the
    /// program starts meanwhile): a process waits for it at its first hook, not at its start.
    pub tsc_pending: AtomicU64,
    /// Threads that found every slot taken (as many threads traced at once as there are
    /// slots; a slot whose thread ended goes to the next): not traced, counted here for the
    /// recorder to say.
    pub no_slot: AtomicU64,
    /// The pid namespace (its /proc/PID/ns/pid inode) whose processes the recorder watches
    /// for their end (0: none, no pidfds): a slot held by an ended process of it goes to the
    /// next thread within a pass, so a thread that finds no free slot waits for it.
    pub watched_pid_ns: AtomicU64,
    /// Calls the program made inside signal handlers that interrupted the runtime's hooks (the
    /// thread's trace writer was mid-packet, so they are not traced): counted here, at their
    /// entries, for the recorder to say.
    pub calls_in_handlers: AtomicU64,
    /// Calls the program made deeper than a thread's return stack holds (the runtime's depth
    /// limit): not traced, nor their exits; counted here, at their entries, for the recorder
    /// to say.
    pub calls_past_depth: AtomicU64,
    /// `-P`: the functions whose entries the runtimes of the recording patched (each process
    /// image counts its own; a forked child adds nothing).
    pub functions_patched: AtomicU64,
    /// `-P`: the functions a pattern named whose entries could not be patched safely (left
    /// untouched, so untraced).
    pub functions_refused: AtomicU64,
    /// Threads waiting for a slot while every one of the `nslots` is held: the recorder makes
    /// the rings of this many more at its next pass (the program's word, counted up and down
    /// by each waiting thread).
    pub slots_wanted: AtomicU64,
    /// The most slots the recorder makes (`--max-threads`, or fewer once it could not make a
    /// ring: descriptors or memory ran out): a thread that finds them all held waits only for
    /// one whose thread ended.
    pub slots_max: AtomicU64,
    /// Threads that went untraced because their process could not open a slot's ring memfds
    /// (the program's count), and the errno of the last such failure.
    pub rings_unreachable: AtomicU64,
    /// See [`ControlHeader::rings_unreachable`].
    pub rings_errno: AtomicU64,
    pub(crate) reserved: [AtomicU64; PAGE_WORDS - HEADER_WORDS],
    /// Each slot's ring memfds (the first `nslots` written).
    pub ring_fds: [RingFds; MAX_SLOTS],
}

/// Words per slot.
pub const SLOT_WORDS: usize = 16;

/// A thread slot: one traced thread at a time (its state word says whose turn it is).
#[repr(C)]
#[derive(Debug)]
pub struct Slot {
    /// [`crate::slot`]'s states: FREE, CLAIMED (CAS from FREE), TRACING, ENDED.
    pub state: AtomicU64,
    /// Thread id.
    pub tid: AtomicU64,
    /// The trace event's id (its sample_id IDENTIFIER).
    pub event_id: AtomicU64,
    /// Process id.
    pub pid: AtomicU64,
    /// The thread's trace writer's head (an AUX stream position), mirrored after every traced
    /// entry and exit: the trace writer publishes the user page's aux_head only when a
    /// transaction ends, so this is how far a thread killed mid-transaction (SIGKILL, `_exit`
    /// from a signal handler, a thread still running at exit) wrote.
    pub writer_head: AtomicU64,
    /// Why the thread's events could not be set up (0: they were): `step << 48 | (index +
    /// 1) << 32 | errno` of the first event and step ([`crate::open_step`]) that failed.
    pub open_error: AtomicU64,
    /// A forked child's thread: the pid of the process that forked it (0 in the program the
    /// recorder spawned and the images it exec'd).
    pub ppid: AtomicU64,
    /// A forked child's thread: the tid of the parent's thread that called fork.
    pub ptid: AtomicU64,
    /// A forked child's thread: when the child began (CLOCK_MONOTONIC ns, the clock of the
    /// program's events): the time of its PERF_RECORD_FORK.
    pub fork_time: AtomicU64,
    /// The thread's name when it opened its events (`PR_GET_NAME`: the kernel's comm, at most
    /// 15 bytes and a NUL; an exec'd image's is its file's name), 16 bytes over two words.
    pub comm: [AtomicU64; 2],
    /// When the thread opened its events (CLOCK_MONOTONIC ns): the time of an exec'd image's
    /// PERF_RECORD_COMM.
    pub open_time: AtomicU64,
    /// When the thread's process image began (CLOCK_MONOTONIC ns at the runtime's
    /// constructor; a forked child's is its parent's): an exec'd image's threads have a later
    /// one than the threads the exec ended, which the recorder frees.
    pub image_time: AtomicU64,
    /// The inode of the thread's pid namespace (0: not known): its pid is that namespace's.
    pub pid_ns: AtomicU64,
    pub(crate) reserved: [AtomicU64; 2],
}

impl Slot {
    /// Every word of the slot, `state` first.
    #[inline]
    pub fn words(&self) -> &[AtomicU64; SLOT_WORDS] {
        // SAFETY: Slot is repr(C) of AtomicU64 fields and arrays only (the layout table's
        // test checks they tile it), SLOT_WORDS of them (asserted below), so it has the
        // size, alignment and validity of the array.
        unsafe { &*std::ptr::from_ref(self).cast::<[AtomicU64; SLOT_WORDS]>() }
    }
}

/// A loaded object's executable segment (the shared form of [`crate::ObjectEntry`]).
#[repr(C)]
#[derive(Debug)]
pub struct SharedObject {
    /// The entry's number + 1 once it is complete (stored last, Release): tells it from the
    /// entry a ring's turn before in the same place.
    pub done: AtomicU64,
    /// The load bias (`dlpi_addr`): symbol value + base = run-time address.
    pub base: AtomicU64,
    /// Start of the executable segment (page aligned).
    pub start: AtomicU64,
    /// Its length.
    pub len: AtomicU64,
    /// Its file offset (page aligned).
    pub pgoff: AtomicU64,
    /// Bytes of path.
    pub path_len: AtomicU64,
    /// When the runtime found the object (CLOCK_MONOTONIC ns, the clock of the program's
    /// events): the time of its MMAP2 record, before any sample in it.
    pub time: AtomicU64,
    /// The process that loaded it (a forked child's objects are its own; those loaded before
    /// the fork it inherits, as perf's FORK record says).
    pub pid: AtomicU64,
    /// The path bytes.
    pub path: [AtomicU8; PATH_MAX],
}

/// The ring of loaded objects: the processes claim entries (`count`), the recorder takes
/// them (`taken`).
#[repr(C)]
#[derive(Debug)]
pub struct ObjectRing {
    /// The entries claimed so far (the program's word).
    pub count: AtomicU64,
    /// The entries the recorder took so far (its word; the program only reads it).
    pub taken: AtomicU64,
    /// Objects a process could not write: the ring stayed full (the recorder did not take
    /// entries for [`crate::OBJECT_WAIT`]).
    pub lost: AtomicU64,
    pub(crate) reserved: [AtomicU64; PAGE_WORDS - 3],
    /// Entry `n` at place `n % MAX_OBJECTS`.
    pub entries: [SharedObject; MAX_OBJECTS],
}

/// One of the recorder's `-e` events. The recorder writes it before the program runs; the
/// runtime writes only `found`.
#[repr(C)]
#[derive(Debug)]
pub struct SharedEvent {
    /// Index of the event's group leader (its own index for a leader).
    pub leader: AtomicU64,
    /// Bytes of attr.
    pub attr_len: AtomicU64,
    /// Bytes of function name: non-zero for `probe:FUNC`, whose `config` the runtime fills
    /// in (the probe PMU's value for the probes named FUNC).
    pub func_len: AtomicU64,
    /// Set by the runtime once FUNC named a function in a loaded object.
    pub found: AtomicU64,
    /// The attr (`perf_event_attr`, native endian, its own `size` long).
    pub attr: [AtomicU8; ATTR_MAX],
    /// The function name bytes.
    pub func: [AtomicU8; FUNC_MAX],
}

/// The table of the recorder's events.
#[repr(C)]
#[derive(Debug)]
pub struct EventTable {
    /// Events written.
    pub count: AtomicU64,
    pub(crate) reserved: [AtomicU64; PAGE_WORDS - 1],
    /// The events, in the order each thread opens them.
    pub entries: [SharedEvent; MAX_EVENTS],
}

/// A forked child's entry in the ring of children (the shared form of
/// [`crate::ChildEntry`]).
#[repr(C)]
#[derive(Debug)]
pub struct SharedChild {
    /// The child's pid.
    pub pid: AtomicU64,
    /// Its parent's pid.
    pub ppid: AtomicU64,
    /// The tid of the parent's thread that forked it.
    pub ptid: AtomicU64,
    /// When it began (CLOCK_MONOTONIC ns).
    pub fork_time: AtomicU64,
    /// The inode of its pid namespace (0: not known).
    pub pid_ns: AtomicU64,
    /// The entry's number + 1 while it is whole, 0 while it is written (a sequence lock:
    /// the ring's next turn writes over the place).
    pub seq: AtomicU64,
}

/// The ring of forked children.
#[repr(C)]
#[derive(Debug)]
pub struct ChildRing {
    /// Entries claimed (may exceed [`MAX_CHILDREN`]).
    pub count: AtomicU64,
    pub(crate) reserved: [AtomicU64; PAGE_WORDS - 1],
    /// Entry `n` at place `n % MAX_CHILDREN`.
    pub entries: [SharedChild; MAX_CHILDREN],
}

/// The names of probes named exactly ([`crate::NAMED_PROBE`]): entries claimed by adding to
/// `used`, each a 2-byte little-endian length then the name's bytes, published by the probe
/// word that points at it.
#[repr(C)]
#[derive(Debug)]
pub struct ProbeNames {
    /// Bytes claimed (past [`PROBE_NAMES_SIZE`]: the claims that did not fit, unwritten).
    pub used: AtomicU64,
    pub(crate) reserved: [AtomicU64; PAGE_WORDS - 1],
    /// The entries.
    pub bytes: [AtomicU8; PROBE_NAMES_SIZE],
}

/// The whole control area, as the recorder's memfd holds it.
#[repr(C)]
#[derive(Debug)]
pub struct ControlArea {
    /// The header and each slot's ring memfds.
    pub header: ControlHeader,
    /// The thread slots.
    pub slots: [Slot; MAX_SLOTS],
    /// Word `id - 1` holds the function address of swtrace probe `id` (0: not written).
    pub probes: [AtomicU64; MAX_PROBES],
    /// The ring of loaded objects.
    pub objects: ObjectRing,
    /// The recorder's `-e` events.
    pub events: EventTable,
    /// Per slot, the sample id of each event its thread opened, in event order.
    pub slot_event_ids: [[AtomicU64; MAX_EVENTS]; MAX_SLOTS],
    /// The ring of forked children: an image a child execs finds its pid there.
    pub children: ChildRing,
    /// The names of probes named exactly.
    pub probe_names: ProbeNames,
    /// The names of uevent types: each word 0, or [`crate::NAMED_PROBE`] | the type << 32 |
    /// the name's offset in `probe_names`.
    pub uevent_names: [AtomicU64; MAX_UEVENT_NAMES],
}

// The sizes the limits promise, and each section on a page of its own.
const _: () = {
    assert!(size_of::<ControlHeader>() == HEADER_SIZE);
    assert!(offset_of!(ControlHeader, reserved) == HEADER_WORDS * 8);
    assert!(offset_of!(ControlHeader, ring_fds) == PAGE);
    assert!(size_of::<Slot>() == SLOT_WORDS * 8);
    assert!(size_of::<SharedObject>() == OBJECT_SIZE);
    assert!(size_of::<SharedEvent>() == EVENT_SIZE);
    assert!(size_of::<SharedChild>() == 48);
    assert!(offset_of!(ObjectRing, entries) == PAGE);
    assert!(offset_of!(EventTable, entries) == PAGE);
    assert!(offset_of!(ChildRing, entries) == PAGE);
    assert!(offset_of!(ControlArea, header) == 0);
    assert!(offset_of!(ControlArea, slots).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, probes).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, objects).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, events).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, slot_event_ids).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, children).is_multiple_of(PAGE));
    assert!(offset_of!(ControlArea, probe_names).is_multiple_of(PAGE));
    assert!(offset_of!(ProbeNames, bytes) == PAGE);
    assert!(offset_of!(ControlArea, uevent_names).is_multiple_of(PAGE));
    assert!(size_of::<ControlArea>().is_multiple_of(PAGE));
    assert!(align_of::<ControlArea>() == 8);
};
