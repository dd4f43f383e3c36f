//! perfaux's software trace: Intel PT's job done by instrumented Rust code.
//!
//! Instrumented functions enter [`Probe`]s; while the thread's trace PMU (in `perfaux-core`)
//! has a writer installed, each entry and return writes a compact packet into the AUX area of
//! the thread's perf event. The crate has three parts:
//!
//! - [`format`](mod@format): the packet format, specified byte by byte (ENTER/EXIT, SYNC with the shadow
//!   stack, PAUSED/RESUMED/STOPPED boundaries, LOST);
//! - the runtime, in layers that import only downwards: [`probe`](mod@probe) (the statics and
//!   the [`probe!`], [`trace_fn!`] and [`traced!`] macros) and [`shadow`] (the per-thread shadow
//!   stack, [`writer::Frame`], [`writer::Callchain`]) at the bottom; above them [`registry`]
//!   (ids, the probe table, hooks for counting events and `aux_action` triggers; the registry
//!   sits above the probe as tracing-core's registry above its callsites) and [`writer`] (the
//!   per-thread writer the core installs over an AUX region, with its contract); on top
//!   [`guard`] ([`Probe::enter`] and the [`ProbeGuard`] whose drop marks the return), which
//!   ties a probe to its thread's writer and to the registry;
//! - the reader: [`decode`](mod@decode) (any window to events, resyncing at SYNC packets; in
//!   memory or read in bounded pieces; `stream_clock` keeps a thread's times continuous where a
//!   SYNC re-anchors the clock), [`window`] (chunks that continue each other grouped into decode
//!   windows, in one pass), [`table`] (the probe table stored beside the trace) and
//!   [`calltrace`] (`perf script --call-trace` lines).
//!
//! # Who calls what
//!
//! - Instrumented code: `let _g = probe!("name");`, `trace_fn!()`, `traced! { fn ... }`, or a
//!   `static P: Probe = Probe::new("name")` entered with `P.enter()`.
//! - the trace PMU (perfaux-pmus' swtrace driver), on the traced thread: [`writer::install`] (`pmu::start`),
//!   [`writer::pause`] / [`writer::resume`] (`PERF_EF_PAUSE` / `PERF_EF_RESUME`),
//!   [`writer::aux_head`] (perf_aux_output_end, snapshot_aux; signal-safe),
//!   [`writer::uninstall`] (`pmu::stop`), [`writer::set_limit`] and the [`OnFull`] slow path
//!   (full-trace mode), [`writer::status`] (lost counts for PERF_RECORD_AUX flags).
//! - perfaux-core's probe PMU (counting/sampling events, aux_action triggers): [`lookup`],
//!   [`set_hook`] (by id or by name, also before the probe first runs), [`set_hook_handler`],
//!   [`probe_by_id`], [`writer::callchain`] with [`writer::enable_shadow_stack`].
//! - The recorder: [`probe_table`]`().to_bytes()` stored beside the trace.
//! - The reader (`perfaux script --call-trace`): [`ProbeTable::from_bytes`],
//!   [`decode_chunks`] (or [`decode()`] / [`Decoder::with_offset`] for one window), and
//!   [`CallTrace`].
//!
//! ```
//! use perfaux_swtrace::{decode, writer, CallTrace, CallTraceOptions, WriterConfig, AuxRegion};
//!
//! fn leaf() { let _g = perfaux_swtrace::probe!("doc_leaf"); }
//! fn root() { let _g = perfaux_swtrace::probe!("doc_root"); leaf(); }
//!
//! let mut aux = vec![0u8; 4096];
//! // SAFETY: `aux` outlives the writer (uninstalled below) and nothing else writes it.
//! let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
//! writer::install(WriterConfig::full_trace(region, None)).unwrap();
//! root();
//! let end = writer::uninstall().unwrap().aux_head as usize;
//! let events = decode::decode(&aux[..end]);
//! let table = perfaux_swtrace::probe_table();
//! let text = CallTrace::new(&table, CallTraceOptions::default()).format(&events);
//! assert!(text.contains("    doc_leaf"));
//! ```

#![warn(missing_docs)]

pub mod calltrace;
pub mod clock;
pub mod decode;
pub mod format;
pub mod forward;
pub mod guard;
pub mod lane;
pub mod probe;
pub mod registry;
pub mod shadow;
mod stream_clock;
pub mod table;
pub mod window;
pub mod writer;

pub use calltrace::{CallTrace, CallTraceOptions};
pub use clock::ClockSource;
pub use decode::{Decoder, Event, SkipReason, decode, decode_chunks};
pub use guard::ProbeGuard;
pub use lane::Lane;
pub use probe::{Probe, ProbeEvent, ProbeId};
pub use registry::{
    HookError, HookFn, HookTarget, lookup, name_uevent_type, probe_by_id, probe_table,
    probes_to_runtime, set_hook, set_hook_handler,
};
pub use table::{ProbeInfo, ProbeTable, TableError};
pub use window::{Window, WindowChunk, Windows};
pub use writer::{AuxMode, AuxRegion, OnFull, Timing, WriterConfig, WriterError, WriterStatus};

/// The unit tests' allocator: the system's, counting each thread's allocations, so that a
/// test can show a path allocates nothing (writer/signal_tests.rs).
#[cfg(test)]
pub(crate) mod test_alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    fn count() {
        let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
    }

    // SAFETY: every call forwards to the system allocator with the caller's arguments; the
    // count is a thread-local without destructor, which allocates nothing.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Allocations made by the calling thread so far.
    pub(crate) fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }
}
