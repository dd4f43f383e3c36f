//! perfaux-ring: the perf buffer (`struct perf_buffer`), over any memory.
//!
//! A perf buffer is a user page (`struct perf_event_mmap_page`), a data
//! area of `2^n` pages after it, and an AUX area of `2^m` pages at
//! `aux_offset`. This crate has both halves:
//!
//! - the **producer** ([`PerfBuffer`], [`OutputHandle`], [`AuxBuffer`],
//!   [`AuxHandle`]): what kernel/events/ring_buffer.c does —
//!   `perf_output_begin/end` with nesting, LOST records, watermarks,
//!   overwrite and `write_backward`, and `perf_aux_output_begin/end/skip`;
//! - the **consumer** ([`PerfMmap`], [`AuxMmap`]): what `perf record` does
//!   with the mapping (tools/lib/perf/mmap.c, tools/perf/util/auxtrace.c),
//!   never trusting the producer's memory;
//!
//! over a [`RingMemory`]: heap memory, a memfd shared by two processes, or
//! the mmap of a kernel perf event fd (consumer only).
//!
//! The ring does not know events: where the kernel's ring writes a record
//! of its own, it takes the event's id and `sample_id` from the caller
//! (`PERF_RECORD_LOST`, [`LostInfo`]) or hands the fields back for the
//! caller to write (`PERF_RECORD_AUX`, [`AuxRecord`]).
//!
//! # Writers
//!
//! [`PerfBuffer::new`] takes writers on any thread, and signal handlers
//! interrupting them (the kernel's NMIs); [`PerfBuffer::new_per_thread`]
//! (unsafe: one thread and its signal handlers only) is the kernel's
//! per-CPU case and uses its cheaper `local_t` operations. Both are
//! lock-free and allocate nothing, so both may be used from a signal
//! handler. The protocol and its memory-ordering argument are in
//! [`protocol`].
//!
//! # A typical use
//!
//! ```
//! use std::sync::Arc;
//! use perfaux_abi::ByteSink;
//! use perfaux_ring::{DataConfig, LostInfo, PerfBuffer, PerfMmap, RingLayout, RingMemory};
//!
//! let mem = Arc::new(RingMemory::heap(RingLayout::new(8, 0)?)?);
//! let rb = PerfBuffer::new(mem.clone(), DataConfig::default())?;
//! let mut md = PerfMmap::new(mem);
//! let record = perfaux_abi::PerfEventHeader::new(9, 0, 16).to_native_u64();
//! let mut h = rb.output_begin(16, &LostInfo { id: 1, sample_id: &[] }).expect("room");
//! h.put(&record.to_ne_bytes());
//! h.put(&42u64.to_ne_bytes());
//! h.end();
//! let records: Vec<_> = md.read_records()?.collect::<Result<_, _>>()?;
//! assert_eq!(records[0].body(), &42u64.to_ne_bytes());
//! # Ok::<(), perfaux_ring::RingError>(())
//! ```
//!
//! # Tests
//!
//! `cargo test -p perfaux-ring` runs the unit, property, two-process,
//! signal-handler, real-kernel (skipped with a printed reason where
//! `perf_event_open` is refused) and hand-stepped model tests. The loom
//! check of the memory orderings needs `--cfg loom`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p perfaux-ring --release --test loom
//! ```

#![warn(missing_docs)]

pub mod error;
pub mod layout;
pub mod protocol;
pub mod sync;

#[cfg(not(loom))]
pub mod aux;
#[cfg(not(loom))]
pub mod aux_consumer;
#[cfg(not(loom))]
pub mod consumer;
#[cfg(not(loom))]
pub mod memory;
#[cfg(not(loom))]
pub mod producer;
#[cfg(not(loom))]
pub mod wakeup;

pub use error::RingError;
pub use layout::RingLayout;

#[cfg(not(loom))]
pub use aux::{AuxBuffer, AuxConfig, AuxHandle, AuxRecord};
#[cfg(not(loom))]
pub use aux_consumer::{AuxMmap, AuxRead, AuxSnapshot};
#[cfg(not(loom))]
pub use consumer::{PerfMmap, Record, Records, Snapshot};
#[cfg(not(loom))]
pub use memory::{KernelAux, RingMemory};
#[cfg(not(loom))]
pub use producer::{DataConfig, LostInfo, OutputError, OutputHandle, PerfBuffer};
#[cfg(not(loom))]
pub use wakeup::Wakeup;
