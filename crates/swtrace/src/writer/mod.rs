//! The per-thread writer: the producer half of the trace, and its contract with the core.
//!
//! # Contract with the core (the trace PMU)
//!
//! Everything here acts on the **calling thread**, like a PMU's `start`/`stop` running on the
//! CPU of its event. The core:
//!
//! - [`install`]s a writer over the AUX area of the calling thread's event (`pmu::start`): an
//!   [`AuxRegion`] (raw pointer + power-of-two size, built with an `unsafe` constructor whose
//!   safety contract the core upholds), a start position (`aux_head`), and a mode:
//!   [`AuxMode::Overwrite`] (wrap freely: the flight recorder) or [`AuxMode::FullTrace`] (never
//!   write at or beyond `limit`; when the next packet does not fit, call the writer's
//!   [`OnFull`] slow path, which may publish the data (perf_aux_output_end) and grant new space
//!   (perf_aux_output_begin) by returning a new limit, or return `None`: the writer then stops
//!   and counts what it drops until [`set_limit`] gives space again, and the trace says so with a
//!   LOST packet);
//! - [`pause`]s and [`resume`]s it (`pmu::stop(PERF_EF_PAUSE)` / `pmu::start(PERF_EF_RESUME)`):
//!   paused = nothing written; PAUSED and RESUMED packets mark the boundaries. A paused thread
//!   is not observed at all unless [`WriterConfig::track_paused`] or a shadow stack user asks
//!   for the calls opened meanwhile (see [`pause`]);
//! - reads [`aux_head`], the position after the last complete packet, to copy into the user
//!   page's aux_head at perf_aux_output_end. The head is stored after the packet's bytes, so it
//!   is always at a packet boundary, also when read from a signal handler that interrupted the
//!   writer in the middle of a packet;
//! - [`uninstall`]s it (`pmu::stop`/`del`), which writes STOPPED and returns the final head.
//!
//! Positions (`aux_head`, limits) are 64-bit stream offsets that only grow, like the kernel's
//! aux_head; byte `p` of the stream lives at `base[p & (size - 1)]`.
//!
//! # Signal safety (the trace's NMI)
//!
//! A signal handler runs like the kernel's NMI: between any two instructions of its thread,
//! never concurrently with it, and to completion before the thread goes on. It may enter probes
//! and make control calls ([`install`], [`uninstall`], [`pause`], [`resume`], [`set_limit`]).
//! The protocol is one per-thread `busy` byte:
//!
//! - **Every probe event and every control call runs inside a busy section, and reads the
//!   writer's state (mode, base, mask, limit, head, epoch, paused, installed) only after taking
//!   it.** `begin` loads `busy`, and if it is 0 stores 1, then a compiler fence keeps every
//!   state access below the store.
//! - A handler that runs *before* the store of 1 (also between the load and the store) runs to
//!   completion first: whatever it changed (even a removed writer, or another region installed)
//!   is what the interrupted code then reads. Nothing read before `begin` is used after it, so
//!   there is no stale base, limit or mode. (The earlier protocol read the mode before `begin`:
//!   a handler's `uninstall` in between made the probe write through the cleared base.)
//! - A handler that runs *after* the store finds `busy` set: its probe events write nothing and
//!   are counted lost ([`crate::format::LostKind::Nested`]; their returns too), reported by a
//!   LOST packet before the next SYNC or, at the end, before STOPPED; [`pause`], [`resume`],
//!   [`set_limit`], [`enable_shadow_stack`] and [`disable_shadow_stack`] are recorded in
//!   `pending` and applied (and only then validated) by `end`, once the interrupted event is
//!   complete; [`install`] and [`uninstall`] fail with [`WriterError::Busy`] (the core
//!   retries). So nothing the section read can change until `end` stores 0.
//! - `end` stores 0 behind a compiler fence, then applies pending requests, each in its own
//!   section. A handler after the store of 0 is again the first case.
//!
//! Hence an ENTER or EXIT and its shadow stack update are one section (no SYNC ever shows one
//! without the other), a call opened while paused (and followed: `track_paused` or a shadow
//! stack user) is on the stack before any SYNC a resume writes or after it (never half), and a
//! guard's depth and epoch come from the same shadow stack. Every store to the slot is made
//! inside a section too, so a handler's pause or resume cannot interleave with a decision to
//! publish or clear it. The handler may also read: [`aux_head`] (the head is stored after the
//! packet's bytes, so it is at a packet boundary), [`status`] and [`callchain`] (the shadow
//! stack stores the new depth before the frame, so a reader sees a consistent prefix) are
//! async-signal-safe; so are [`install`] and [`enable_shadow_stack`] on a thread's first use,
//! which makes its state without allocating (`lifetime`'s module doc). The on_full slow path
//! runs inside the section: probes it enters are lost and control calls it makes are deferred.
//!
//! All fields are atomics accessed with relaxed loads and stores (plain moves on x86_64: no
//! read-modify-write on the hot path) with compiler fences, which is what makes the signal
//! handler's view well defined. The crate's tests raise a real signal at each point of this
//! argument (`writer/signal_tests.rs`, through test-only points) and churn the writer from a
//! 20 µs timer signal (`tests/signals.rs`).
//!
//! # Hot path
//!
//! With no writer and no hook: the slot load (the one thread-local access of an entry), the
//! hook-word load, a branch, and a test of the guard's flag bits on return. Paused: the same,
//! since pausing clears the slot; with `track_paused` (or a shadow stack user) the busy section
//! (a load and two stores of `busy`, a load of `pending`), one comparison of the mode, and the
//! shadow stack push/pop, all inline. Tracing: read the clock (unless [`Timing`] says
//! to reuse the last reading), compare the head with
//! `fast_end` (the next SYNC position and the limit in one), and when the delta is below 128
//! ticks and the probe id below 128 (the common case) store the two-byte packet with one
//! 2-byte store; anything else (a due SYNC, full-trace space, long ids or deltas, a packet
//! that straddles the end of the region) takes an out-of-line general path, which builds the
//! packet in a register ([`crate::format::pack_event`]) and stores it with one unaligned 16-byte
//! store when it does not straddle the end. Only the packet's own bytes are meaningful: up to
//! 15 bytes after the head are scratch (in full-trace mode they are within the granted space;
//! in overwrite mode they are the oldest bytes, which a snapshot reader resyncs past anyway).
//! Every field these paths touch is in the first cache line of the thread's state.

//!
//! # Rooms
//!
//! - `config`: what [`install`] takes ([`WriterConfig`], [`AuxRegion`], [`AuxMode`],
//!   [`OnFull`]) and gives back ([`WriterStatus`], [`WriterError`]);
//! - `thread`: the per-thread state (`ThreadTrace`), its busy section and its slot;
//! - `lifetime`: where that state lives, made and freed async-signal-safely;
//! - `emit`: the hot path, a probe's entry and return and the ENTER/EXIT packet;
//! - `packets`: the cold packets (SYNC, LOST, PAUSED/RESUMED/STOPPED) and full-trace space;
//! - `control`: the core's calls ([`install`], [`pause`], [`resume`], [`set_limit`],
//!   [`uninstall`], [`callchain`], ...) and the requests a signal handler defers.

mod config;
mod control;
mod emit;
mod lifetime;
mod packets;
#[cfg(test)]
mod test_points;
mod thread;

pub use crate::shadow::{Callchain, Frame};
pub use config::{
    AuxMode, AuxRegion, DEFAULT_SYNC_PERIOD, MIN_REGION, OnFull, Timing, WriterConfig, WriterError,
    WriterStatus,
};
pub use control::{
    SHADOW_DEPTH, aux_head, aux_head_word, callchain, disable_shadow_stack, enable_shadow_stack,
    install, park, pause, resume, set_head_mirror, set_limit, status, uninstall,
};
pub use lifetime::{forget_after_fork, prepare, set_exit_hook};
pub(crate) use lifetime::{slot, thread_trace_ptr};
pub use packets::FULL_RETRY_EVERY;
#[cfg(test)]
pub(crate) use test_points::{Point, arm_point, at_point};
pub(crate) use thread::ThreadTrace;

#[cfg(test)]
mod signal_tests;

#[cfg(test)]
mod tests;
