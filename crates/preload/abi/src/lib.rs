//! The contract between `perfaux record -- ./prog` and the runtime it preloads: the control
//! memfd the recorder shares with the traced program (as uftrace's mcount.h is between its
//! recorder and libmcount).
//!
//! The recorder creates it (size sealed) and the runtime in the program maps it writable.
//! Everything the recorder reads back here was written by the program and is checked before it
//! is used: indices are bounded by the recorder's own counts, strings by their arrays, and a
//! dying program can leave any byte half-written, so every entry has a word stored last
//! (Release) that says it is complete.
//!
//! The layout is [`ControlArea`] ([`area`]): the header with each slot's ring memfds, the
//! thread slots, the probe table, the ring of loaded objects, the recorder's event table, the
//! per-slot event ids and the ring of forked children. [`VERSION`] is a hash of its
//! [`layout`] table, computed at compile time: a recorder and a runtime built from different
//! layouts refuse each other. [`Control`] is the view both sides read and write it through.
//!
//! A crate of its own, written by hand, because the two sides are separate binaries (the
//! recorder, and the runtime cdylib preloaded into the program) that must agree on every byte
//! and neither may link the other.

pub mod area;
mod control;
pub mod layout;

pub use area::{
    ChildRing, ControlArea, ControlHeader, EventTable, ObjectRing, RingFds, SharedChild,
    SharedEvent, SharedObject, Slot,
};
pub use control::{Control, copy_in, copy_out};

/// "PFXPRELD".
pub const MAGIC: u64 = u64::from_le_bytes(*b"PFXPRELD");
/// The layout's hash ([`layout::layout_hash`] of [`layout::STRUCTS`] and [`layout::FIELDS`]):
/// any change of a field's place, size or name, or a struct's size, changes it.
pub const VERSION: u64 = layout::layout_hash(&layout::STRUCTS, &layout::FIELDS);
/// Open calls a traced thread's return stack keeps: deeper calls go untraced and are counted
/// in [`ControlHeader::calls_past_depth`].
pub const STACK_DEPTH: usize = 8192;

/// The environment variable naming the control memfd's descriptor in the program.
pub const ENV_CTL_FD: &str = "PERFAUX_PRELOAD_FD";
/// The environment variable naming the recorder's descriptor directory (`/proc/PID/fd`): a
/// descendant that closed the inherited descriptors (a shell's or Python's `close_fds`)
/// opens the recorder's memfds there, by the numbers they have in the recorder.
pub const ENV_FD_DIR: &str = "PERFAUX_PRELOAD_FD_DIR";
/// The environment variable that carries `-P` / `-U` rules to the runtime (perfaux-patch's
/// `PatchSpec::encode`); absent: nothing is patched.
pub const ENV_PATCH: &str = "PERFAUX_PATCH";
/// The environment variable naming the descriptor of the recorder's plan of the executable
/// (a sealed memfd of perfaux-patch's `Verdicts`), which spares the runtime the scan of every
/// function; absent or not such a memfd: the runtime plans itself.
pub const ENV_PATCH_PLAN_FD: &str = "PERFAUX_PATCH_PLAN_FD";
/// The environment variable that limits the executable's patching to the recorder's plan
/// (set to `1`: the entries its compiler chose, XRay's sleds): without a plan the runtime can
/// use, it patches none of the executable rather than every function `-P .` names.
pub const ENV_PATCH_PLAN_ONLY: &str = "PERFAUX_PATCH_PLAN_ONLY";
/// The environment variable that turns on library calls with `-P` (set to `1`, beside
/// `LD_BIND_NOW=1`): the executable's PLT calls are entered under the library functions' names.
pub const ENV_LIBCALL: &str = "PERFAUX_LIBCALL";

/// The control memfd's size.
pub const fn total_len() -> usize {
    size_of::<ControlArea>()
}

/// A ring memfd's word in the header ([`RingFds`]): its descriptor number (the same in the
/// recorder and in the program, which inherits it) in bits 0-31, the low 32 bits of its inode
/// in bits 32-63, by which the program tells the recorder's memfd from a file that took its
/// number.
pub fn fd_word(fd: i32, ino: u64) -> u64 {
    u64::from(fd as u32) | (ino & 0xffff_ffff) << 32
}

/// The (descriptor, low 32 bits of the inode) of a [`fd_word`].
pub fn fd_word_parts(w: u64) -> (i32, u32) {
    (w as u32 as i32, (w >> 32) as u32)
}

/// At most this many thread slots: threads traced at once. The recorder makes the rings of the
/// first few before the program starts and more as the program's threads take them
/// ([`ControlHeader::nslots`] grows); the area keeps room for every slot's words (a memfd's
/// pages cost nothing until they are written).
pub const MAX_SLOTS: usize = 8192;

/// How long a thread that finds every slot held waits for the recorder to make more (it does
/// at its next pass, a millisecond or so; longer on a loaded machine, or while it writes a
/// large drain) before it goes untraced.
pub const SLOT_GROW_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Slot states ([`Slot::state`]).
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
}

/// The steps of a thread's event setup, as [`Slot::open_error`] names the one that failed.
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

/// The [`Slot::open_error`] word for step `step` ([`open_step`]) of event `event` failing
/// with `errno`.
pub fn open_error_word(step: u64, event: usize, errno: i32) -> u64 {
    step << 48 | ((event as u64 + 1) & 0xffff) << 32 | u64::from(errno as u32)
}

/// Probe addresses kept (ids beyond are traced, and named by address in the table only if
/// the recorder can find them: not).
pub const MAX_PROBES: usize = 1 << 16;
/// What `perfaux record` and a program that uses perfaux-tracing's layer agree on: the layer's
/// uevent types, and the environment through which `record -S --snapshot-on...` asks the
/// layer for its triggers (the layer sends a [`tracing::SNAPSHOT`] uevent, the recorder takes
/// the snapshot).
pub mod tracing {
    /// A `tracing` event: payload `level=... target=... message=... k=v...`.
    pub const EVENT: u32 = 0x7401;
    /// A span's fields, once, at its first entry: payload `span=NAME k=v...`.
    pub const SPAN_FIELDS: u32 = 0x7402;
    /// A trigger fired; a snapshot follows: payload `reason=...`.
    pub const SNAPSHOT: u32 = 0x7403;
    /// `error`, `warn`, `info`, `debug` or `trace`: a trigger on events that severe or more.
    pub const ENV_SNAPSHOT_ON: &str = "PERFAUX_TRACING_SNAPSHOT_ON";
    /// Nanoseconds: a trigger on a span busy that long in all.
    pub const ENV_SNAPSHOT_ON_SLOW_NS: &str = "PERFAUX_TRACING_SNAPSHOT_ON_SLOW_NS";
    /// `1`: a trigger on a panic.
    pub const ENV_SNAPSHOT_ON_PANIC: &str = "PERFAUX_TRACING_SNAPSHOT_ON_PANIC";
}

/// A probe word with this bit holds, below it, the offset in [`area::ProbeNames`] of the
/// probe's own name: a probe named exactly (a `tracing` span), not by the function it sits in.
/// Function addresses never have it (user space is the lower half).
pub const NAMED_PROBE: u64 = 1 << 63;
/// Bytes of probe names the area holds, all processes of a recording together.
pub const PROBE_NAMES_SIZE: usize = 256 << 10;
/// Longest probe name kept (a longer one is cut).
pub const PROBE_NAME_MAX: usize = 1024;
/// uevent types a recording's processes can name (`perfaux_swtrace::name_uevent_type`).
pub const MAX_UEVENT_NAMES: usize = 512;

/// Entries of the ring of loaded objects (the recorder takes them as they come: any number
/// in a recording, at most this many not yet taken).
pub const MAX_OBJECTS: usize = 512;
/// How long a process waits for room in a full ring of objects.
pub const OBJECT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
/// Bytes per object entry ([`SharedObject`]).
pub const OBJECT_SIZE: usize = 4096;
/// Longest object path kept: the entry after its eight words.
pub const PATH_MAX: usize = OBJECT_SIZE - 8 * 8;

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

/// Events per recording (the `-e` events and the uevent stream).
pub const MAX_EVENTS: usize = 16;
/// Bytes per event entry ([`SharedEvent`]).
pub const EVENT_SIZE: usize = 1024;
/// Longest attr an event entry holds.
pub const ATTR_MAX: usize = 256;
/// Longest function name an event entry holds: the entry after its four words and the attr.
pub const FUNC_MAX: usize = EVENT_SIZE - 4 * 8 - ATTR_MAX;

/// Forked children kept: the newest, in a ring (a child whose entry 1024 later forks wrote
/// over before it exec'd is taken for a spawned process: one FORK more, its old image's
/// slots not freed at the exec).
pub const MAX_CHILDREN: usize = 1024;

/// A forked child's entry ([`Control::push_child`]; [`SharedChild`] in the area).
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
