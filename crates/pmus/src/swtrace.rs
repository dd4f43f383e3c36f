//! The `swtrace` PMU: an AUX-area PMU that traces the real execution of one
//! thread through perfaux-swtrace, as Intel PT traces a CPU.
//!
//! - `setup_aux` accepts the AUX area in either mode;
//! - `start` (on the traced thread, see the `remote` module) opens an AUX
//!   transaction (`perf_aux_output_begin`) and installs the thread's writer
//!   over the AUX memory: overwrite mode wraps freely (the flight
//!   recorder), full-trace mode writes within the transaction (see "Full
//!   trace" below);
//! - `stop` uninstalls the writer and ends the transaction
//!   (`perf_aux_output_end`, PERF_RECORD_AUX with the event's sample_id);
//! - `stop(PERF_EF_PAUSE)` / `start(PERF_EF_RESUME)` pause and resume the
//!   writer (`PERF_PMU_CAP_AUX_PAUSE`); `aux_start_paused` installs it
//!   paused;
//! - `snapshot_aux` copies the newest bytes up to the writer's head (AUX
//!   sampling);
//! - PERF_RECORD_ITRACE_START is due until the first start
//!   (`PERF_PMU_CAP_ITRACE`).
//!
//! `attr.config` holds named fields, as PT's config holds `cyc`, `mtc` and
//! `mtc_period` (perf's PMU format terms):
//!
//! | bits | field | meaning |
//! |---|---|---|
//! | 0 | [`CONFIG_TRACK_PAUSED`] | `swtrace/track-paused/`: the writer follows calls while paused, so the SYNC at a resume names the calls opened meanwhile, at the price of a paused call (about 2.5 ns against 0.8 ns; `WriterConfig::track_paused`) |
//! | 1-2 | [`CONFIG_TIMING_MASK`] | `swtrace/timing=.../` (`WriterConfig::timing`): 0 full, 1 entry, 2 periodic; 3 is EINVAL |
//! | 32-63 | [`CONFIG_TIMING_EVERY_SHIFT`] | periodic's N (`timing=periodic:N`): at least 1 with periodic, 0 otherwise (EINVAL) |
//!
//! Other bits (3-31) are EINVAL. [`timing_config`] and [`config_timing`]
//! convert between the fields and `perfaux_swtrace::Timing`.
//!
//! An event traces one thread (a thread target; EINVAL otherwise), and a
//! thread has one writer: a second live swtrace event for the same thread
//! is EBUSY, as an exclusive PMU's second event is.
//!
//! # Full trace: one transaction per watermark
//!
//! As PT's driver does (arch/x86/events/intel/pt.c: the PMI at
//! `handle->wakeup`, then `perf_aux_output_end` and `perf_aux_output_begin`
//! in `intel_pt_interrupt`), a transaction ends once the writer crossed
//! the watermark: the writer's limit is the handle's space, cut just past
//! `handle->wakeup` (by the most one writer step needs, so that the step
//! that crosses it still fits and the slow path is only asked after the
//! crossing). The slow path (`on_full`) then ends the transaction with the
//! bytes written (PERF_RECORD_AUX, aux_head published, the watermark
//! wakeup) and begins the next one over the space the consumer gave back.
//!
//! When the transaction's own space is used up and the consumer has not
//! freed enough since, the trace from here on is lost: as PT does when its
//! buffer stops (`pt_handle_status`), the transaction is ended with
//! PERF_AUX_FLAG_TRUNCATED, which wakes the consumer and disables the event
//! (pending disable); the writer stops and counts what it drops. The
//! consumer sees the loss in the TRUNCATED record. Tracing resumes as soon
//! as the consumer has made room, as the kernel's drivers restart at their
//! next `perf_aux_output_begin`, with no re-enable: the stopped writer asks
//! the slow path again once in `writer::FULL_RETRY_EVERY` dropped events
//! (so a stopped thread's probes stay cheap), and when aux_tail has moved
//! far enough the pending disable is withdrawn (`perf_aux_output_restart`,
//! unless the control path applied it already), a new transaction begins at
//! the head the trace stopped at, and the stream goes on with a LOST packet
//! (the events dropped) and a SYNC from which a decoder re-anchors. The gap
//! lies between the TRUNCATED record's time and that SYNC's. A consumer
//! that re-enables the event after reading gets the same: `start` begins a
//! new transaction and tracing resumes with a SYNC. A
//! `perf_aux_output_begin` that still finds no space (a consumer whose
//! aux_tail went back) gets the kernel's pending disable and wakeup, and the
//! loss is reported by an empty TRUNCATED record at aux_head.
//!
//! # Stopping from another thread
//!
//! A `stop` that arrives as a remote call runs in a signal handler that
//! may have interrupted the thread inside a probe, between the probe's
//! look at the writer's mode and its packet. Removing the writer there
//! would pull the AUX memory from under that packet. So a remote stop
//! *parks* the writer instead (`writer::park`): it pauses it (safe at any
//! point: a paused writer writes nothing and touches no AUX memory), with
//! STOPPED in the stream, not the PAUSED of an aux_pause, ends the AUX
//! transaction at the writer's head, and keeps the buffer alive while the
//! parked writer exists. The next start on the thread re-arms the parked
//! writer (new transaction, a SYNC), or removes it, which is safe once it
//! is paused, and installs a fresh one. A stop on the thread itself
//! removes the writer at once.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use perfaux_abi::ByteSink;
use perfaux_abi::consts::PERF_AUX_FLAG_TRUNCATED;
use perfaux_abi::mmap_page::offsets;
use perfaux_ring::AuxHandle;
use perfaux_ring::protocol::circ_space;
use perfaux_swtrace::format;
use perfaux_swtrace::writer::{self, AuxMode, AuxRegion, Timing, WriterConfig, WriterError};

use perfaux_core::driver::{
    AuxArea, Buffer, Event, Pmu, PmuCaps, PmuPrivate, Result, Target, ef, einval, in_remote_call,
    perf_aux_output_begin, perf_aux_output_end, perf_aux_output_restart, perf_event_itrace_started,
    perf_output_aux_record, run_on,
};

/// The trace PMU.
pub struct SwtracePmu;

/// `attr.config` bit: follow calls while paused (`WriterConfig::track_paused`).
pub const CONFIG_TRACK_PAUSED: u64 = 1;

/// `attr.config` bits 1-2: the timing mode (`WriterConfig::timing`): 0
/// full, 1 entry, 2 periodic; see [`timing_config`].
pub const CONFIG_TIMING_MASK: u64 = 0b11 << CONFIG_TIMING_SHIFT;

/// The first bit of [`CONFIG_TIMING_MASK`].
pub const CONFIG_TIMING_SHIFT: u32 = 1;

/// `attr.config` bits 32-63: periodic timing's packets per timestamp.
pub const CONFIG_TIMING_EVERY_SHIFT: u32 = 32;

/// Every `attr.config` bit [`timing_config`] may set: a new `timing` clears
/// them first.
pub const CONFIG_TIMING_FIELDS: u64 =
    CONFIG_TIMING_MASK | (u32::MAX as u64) << CONFIG_TIMING_EVERY_SHIFT;

/// Every `attr.config` bit the trace PMU knows.
const CONFIG_KNOWN: u64 = CONFIG_TRACK_PAUSED | CONFIG_TIMING_FIELDS;

/// The `attr.config` bits that ask for `timing` (0 for [`Timing::Full`]).
pub fn timing_config(timing: Timing) -> u64 {
    let (mode, every) = match timing {
        Timing::Full => (0, 0),
        Timing::EntryOnly => (1, 0),
        Timing::Periodic { every } => (2, u64::from(every)),
    };
    mode << CONFIG_TIMING_SHIFT | every << CONFIG_TIMING_EVERY_SHIFT
}

/// The timing an `attr.config` asks for; EINVAL for a mode of 3, periodic
/// with N 0, or an N without periodic.
pub fn config_timing(config: u64) -> Result<Timing> {
    let every = config >> CONFIG_TIMING_EVERY_SHIFT;
    match ((config & CONFIG_TIMING_MASK) >> CONFIG_TIMING_SHIFT, every) {
        (0, 0) => Ok(Timing::Full),
        (1, 0) => Ok(Timing::EntryOnly),
        (2, 1..) => Ok(Timing::Periodic {
            every: every as u32,
        }),
        (2, 0) => Err(einval(
            "swtrace: periodic timing with 0 packets per timestamp (config bits 32-63)",
        )),
        (0 | 1, _) => Err(einval(
            "swtrace: config bits 32-63 (packets per timestamp) set without periodic timing",
        )),
        _ => Err(einval(
            "swtrace: timing mode 3 in config bits 1-2 (0 full, 1 entry, 2 periodic)",
        )),
    }
}

/// Per-event state.
pub(crate) struct TraceState {
    tid: i32,
    /// The open AUX transaction and the buffer it borrows from. Touched only
    /// on the traced thread (start, stop, the full slow path); `try_lock`
    /// keeps a signal handler from waiting on the code it interrupted.
    tx: Mutex<Option<Transaction>>,
    /// A writer is installed for this event.
    running: AtomicBool,
    /// Bytes the writer dropped (nested or full), from its last status.
    lost: AtomicU64,
    /// This event's writer is parked (paused, installed) on its thread.
    parked: AtomicBool,
    /// This event holds its thread's claim (`exclusive_event_installable`).
    claimed: AtomicBool,
    /// The last transaction ended TRUNCATED and the writer stopped: the slow
    /// path may restart it once the consumer made room.
    truncated: AtomicBool,
}

struct Transaction {
    // Field order: the handle borrows from the buffer, so it drops first.
    handle: AuxHandle<'static>,
    start_head: u64,
    _buffer: Arc<Buffer>,
}

thread_local! {
    /// The event whose writer runs on this thread (for the writer's
    /// full-trace slow path, which gets no context).
    static CURRENT: Cell<*const Event> = const { Cell::new(std::ptr::null()) };
}

/// Buffers under parked writers, by tid: their AUX memory must outlive
/// the writer that may still hold its address.
/// The map has an entry for every thread that has (had) a trace event, made
/// at `event_init`, so that parking (in a signal handler) only fills it and
/// never allocates.
type ParkedMap = std::collections::HashMap<i32, Option<Arc<Buffer>>>;

fn parked_buffers() -> &'static Mutex<ParkedMap> {
    static P: std::sync::OnceLock<Mutex<ParkedMap>> = std::sync::OnceLock::new();
    P.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

fn traced_tids() -> &'static Mutex<HashSet<i32>> {
    static T: std::sync::OnceLock<Mutex<HashSet<i32>>> = std::sync::OnceLock::new();
    T.get_or_init(|| Mutex::new(HashSet::new()))
}

impl TraceState {
    fn of(event: &Event) -> Option<&TraceState> {
        event.pmu_private::<TraceState>()
    }
}

impl Pmu for SwtracePmu {
    fn name(&self) -> &'static str {
        "swtrace"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::AUX | PmuCaps::ITRACE | PmuCaps::AUX_PAUSE | PmuCaps::EXCLUSIVE
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(perfaux_core::driver::enoent("not a swtrace event"));
        }
        let config = event.attr().config;
        if config & !CONFIG_KNOWN != 0 {
            return Err(einval(
                "swtrace: config has bits other than track-paused (0), timing (1-2) and its period (32-63)",
            ));
        }
        config_timing(config)?;
        let Target::Thread(tid) = event.target() else {
            return Err(einval("swtrace traces one thread: needs a thread target"));
        };
        if event.is_sampling() {
            return Err(einval("swtrace does not sample"));
        }
        // The writer's TSC rate is calibrated once per process (a 10 ms
        // measurement behind a OnceLock) and its thread-state key made
        // (writer::prepare): here, not in the signal handler that may
        // install the first writer on another thread.
        let _ = perfaux_swtrace::clock::tsc_rate();
        perfaux_swtrace::writer::prepare();
        parked_buffers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(tid)
            .or_insert(None);
        Ok(Box::new(TraceState {
            tid,
            tx: Mutex::new(None),
            running: AtomicBool::new(false),
            lost: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            truncated: AtomicBool::new(false),
        }))
    }

    /// A thread has one writer: one live trace event per thread, as an
    /// exclusive PMU has one event per context.
    fn exclusive_event_installable(&self, event: &Event) -> bool {
        let Some(st) = TraceState::of(event) else {
            return false;
        };
        let claimed = traced_tids()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(st.tid);
        st.claimed.store(claimed, Ordering::Relaxed);
        claimed
    }

    fn destroy(&self, event: &Event) {
        if let Some(st) = TraceState::of(event)
            && st.claimed.load(Ordering::Relaxed)
        {
            traced_tids()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&st.tid);
        }
    }

    fn add(&self, event: &Event, flags: u32) -> Result<()> {
        if flags & ef::START != 0 {
            self.start(event, 0);
        }
        Ok(())
    }

    fn del(&self, event: &Event, _flags: u32) {
        self.stop(event, ef::UPDATE);
    }

    fn start(&self, event: &Event, flags: u32) {
        let Some(st) = TraceState::of(event) else {
            return;
        };
        if flags & ef::RESUME != 0 {
            // Only on the traced thread: a resume from elsewhere would need
            // a remote call, which the overflow path cannot wait for.
            if perfaux_core::driver::gettid() == st.tid && st.running.load(Ordering::Acquire) {
                writer::resume();
            }
            return;
        }
        on_thread(st.tid, || start_here(event, st));
    }

    fn stop(&self, event: &Event, flags: u32) {
        let Some(st) = TraceState::of(event) else {
            return;
        };
        if flags & ef::PAUSE != 0 {
            if perfaux_core::driver::gettid() == st.tid && st.running.load(Ordering::Acquire) {
                writer::pause();
            }
            return;
        }
        on_thread(st.tid, || stop_here(event, st));
        if st.running.load(Ordering::Acquire) && perfaux_core::driver::gettid() != st.tid {
            abandon(st);
        }
    }

    fn setup_aux(&self, _event: &Event, aux: &AuxArea, _overwrite: bool) -> Result<PmuPrivate> {
        if (aux.aux_size() as usize) < writer::MIN_REGION {
            return Err(einval("swtrace: AUX area below the writer's minimum"));
        }
        Ok(Box::new(()))
    }

    fn has_snapshot_aux(&self) -> bool {
        true
    }

    /// Copies the `size` bytes before the writer's head. Called on the
    /// traced thread (AUX sampling requires the sampler to be active here),
    /// so the head is at a packet boundary even inside a signal handler.
    fn snapshot_aux(&self, event: &Event, out: &mut dyn ByteSink, size: usize) -> usize {
        let Some(st) = TraceState::of(event) else {
            return 0;
        };
        if perfaux_core::driver::gettid() != st.tid {
            return 0;
        }
        let Some(head) = writer::aux_head() else {
            return 0;
        };
        let Some(rb) = event.buffer() else { return 0 };
        let Some(aux) = rb.aux() else { return 0 };
        let size = (size as u64).min(aux.aux_size());
        let mut sink = DynSink(out);
        match aux
            .aux_buffer()
            .copy_aux(head.wrapping_sub(size), head, &mut sink)
        {
            Ok(n) => n as usize,
            Err(_) => 0,
        }
    }
}

struct DynSink<'a>(&'a mut dyn ByteSink);

impl ByteSink for DynSink<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.0.put(bytes);
    }
}

/// Runs `f` on the traced thread; retries while the writer is busy (the
/// signal landed in the middle of a packet).
fn on_thread(tid: i32, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        let mut done = false;
        let mut call = || done = f();
        if run_on(tid, &mut call).is_err() {
            return;
        }
        if done {
            return;
        }
        if tid == perfaux_core::driver::gettid() {
            return;
        }
        std::thread::yield_now();
    }
}

/// `pmu->start` on the traced thread. Returns false to be retried.
fn start_here(event: &Event, st: &TraceState) -> bool {
    if st.running.load(Ordering::Acquire) {
        return true;
    }
    let Ok(mut tx) = st.tx.try_lock() else {
        return false;
    };
    let Some(buffer) = event.buffer_arc() else {
        return true;
    };
    let Some(aux) = buffer.aux() else { return true };
    let overwrite = aux.overwrite();
    let Some(handle) = perf_aux_output_begin(event) else {
        return true;
    };
    // SAFETY: the handle borrows the AuxArea kept by `buffer`'s grave
    // until `buffer` is dropped; the Transaction holds `buffer` and drops
    // the handle first (field order).
    let handle: AuxHandle<'static> = unsafe { std::mem::transmute(handle) };
    let start_head = handle.head();
    if !overwrite && handle.size() < STEP_MAX {
        // Too little space to start the stream with a SYNC: the trace
        // from here is lost, as PT's `pt_buffer_reset_markers` reports
        // when it cannot fit its stop marker (TRUNCATED, pending disable).
        truncate(event, handle, 0);
        return true;
    }
    let limit = transaction_limit(&handle, STEP_MAX);
    let installed = writer::status().is_some();
    let ours = installed
        && st.parked.load(Ordering::Acquire)
        && parked_buffers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&st.tid)
            .is_some_and(|b| b.as_ref().is_some_and(|b| Arc::ptr_eq(b, &buffer)));
    if ours {
        // Re-arm the parked writer: same memory, new transaction.
        if !overwrite && writer::set_limit(limit).is_err() {
            perf_aux_output_end(event, handle, 0);
            return true;
        }
        if !event.aux_paused() {
            writer::resume();
        }
    } else {
        if installed {
            // A parked writer of a closed event: paused, so removing it
            // here cannot pull memory from under a packet.
            match writer::uninstall() {
                Ok(_) => {}
                Err(WriterError::Busy) => {
                    perf_aux_output_end(event, handle, 0);
                    return false;
                }
                Err(_) => {}
            }
        }
        let mode = if overwrite {
            AuxMode::Overwrite
        } else {
            AuxMode::FullTrace { limit }
        };
        // SAFETY: the AUX memory stays allocated while `buffer` lives (the
        // Transaction, or the parked map, holds it for as long as the
        // writer is installed), and only this writer writes it: the handle
        // holds the area's aux_nest.
        let region = match unsafe { AuxRegion::new(aux_base(aux), aux.aux_size() as usize) } {
            Ok(r) => r,
            Err(_) => return true,
        };
        // From the constructor, so fields the tracer adds keep their defaults.
        let mut config = WriterConfig::full_trace(region, Some(on_full));
        config.mode = mode;
        config.aux_head = start_head;
        config.start_paused = event.aux_paused();
        config.track_paused = event.attr().config & CONFIG_TRACK_PAUSED != 0;
        // event_init refused a config without a timing.
        config.timing = config_timing(event.attr().config).unwrap_or_default();
        // Before the install: its first SYNC may already ask the slow path.
        CURRENT.with(|c| c.set(event));
        match writer::install(config) {
            Ok(()) => {}
            Err(WriterError::Busy) => {
                perf_aux_output_end(event, handle, 0);
                return false;
            }
            Err(_) => {
                perf_aux_output_end(event, handle, 0);
                return true;
            }
        }
    }
    let unparked = parked_buffers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_mut(&st.tid)
        .and_then(Option::take);
    drop(unparked);
    st.parked.store(false, Ordering::Release);
    *tx = Some(Transaction {
        handle,
        start_head,
        _buffer: buffer,
    });
    CURRENT.with(|c| c.set(event));
    st.truncated.store(false, Ordering::Release);
    st.running.store(true, Ordering::Release);
    perf_event_itrace_started(event);
    true
}

/// `pmu->stop` on the traced thread. Returns false to be retried. As a
/// remote call (in a signal handler) the writer is parked, not removed.
fn stop_here(event: &Event, st: &TraceState) -> bool {
    if !st.running.load(Ordering::Acquire) {
        return true;
    }
    let Ok(mut tx) = st.tx.try_lock() else {
        return false;
    };
    let park = in_remote_call();
    let head = if park {
        // A stop, not an aux_pause: the stream says STOPPED.
        writer::park();
        let Some(status) = writer::status() else {
            st.running.store(false, Ordering::Release);
            return true;
        };
        st.lost
            .store(status.lost_nested + status.lost_full, Ordering::Relaxed);
        status.aux_head
    } else {
        let status = match writer::uninstall() {
            Ok(s) => s,
            Err(WriterError::Busy) => return false,
            Err(_) => {
                st.running.store(false, Ordering::Release);
                return true;
            }
        };
        CURRENT.with(|c| c.set(std::ptr::null()));
        st.lost
            .store(status.lost_nested + status.lost_full, Ordering::Relaxed);
        status.aux_head
    };
    st.running.store(false, Ordering::Release);
    if let Some(t) = tx.take() {
        let Transaction {
            mut handle,
            start_head,
            _buffer,
        } = t;
        let written = head.wrapping_sub(start_head);
        let overwrite = _buffer.aux().is_some_and(AuxArea::overwrite);
        if overwrite {
            handle.set_head(head);
        }
        let size = if overwrite {
            written.min(handle.buffer().aux_size())
        } else {
            written
        };
        perf_aux_output_end(event, handle, size);
        if park {
            if let Some(slot) = parked_buffers()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&st.tid)
            {
                // The slot is empty: a thread has one trace event, and a
                // start empties the slot before the next park.
                *slot = Some(_buffer);
            }
            st.parked.store(true, Ordering::Release);
        }
    }
    true
}

/// The traced thread did not take the remote stop (its signals are
/// blocked, or it stayed busy): its writer may still be writing. Keep the
/// AUX memory alive for it (as for a parked writer) and let the event go.
fn abandon(st: &TraceState) {
    let Ok(mut tx) = st.tx.lock() else { return };
    if let Some(t) = tx.take() {
        let Transaction {
            handle, _buffer, ..
        } = t;
        drop(handle);
        if let Some(slot) = parked_buffers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&st.tid)
        {
            *slot = Some(_buffer);
        }
    }
    st.running.store(false, Ordering::Release);
    st.parked.store(true, Ordering::Release);
}

/// The most one writer step asks the slow path for: LOST and SYNC before
/// an event, and a RESUMED boundary with them after a resume.
const STEP_MAX: u64 =
    (format::MAX_BOUNDARY + format::MAX_SYNC + 2 * format::MAX_LOST + format::MAX_EVENT) as u64;

/// The writer's limit for the transaction `handle` opened (full-trace
/// mode): its space, cut `STEP_MAX` past the watermark (`handle->wakeup`),
/// so that the writer asks for the next transaction only after it crossed
/// the watermark, as PT's PMI fires past the ToPA entry marked INT. Never
/// below the `needed` bytes of the writer's next step (the caller checked
/// that the space holds them).
fn transaction_limit(handle: &AuxHandle<'_>, needed: u64) -> u64 {
    let space_end = handle.head() + handle.size();
    let cut = handle
        .wakeup()
        .max(handle.head())
        .saturating_add(STEP_MAX)
        .max(handle.head().saturating_add(needed));
    space_end.min(cut)
}

/// Ends `handle` with PERF_AUX_FLAG_TRUNCATED after `size` bytes: the
/// record says the trace stops here, `perf_aux_output_end` wakes the
/// consumer and disables the event (pending disable).
fn truncate(event: &Event, mut handle: AuxHandle<'_>, size: u64) {
    // Refused only for OVERWRITE, which this is not.
    let _ = handle.flag(PERF_AUX_FLAG_TRUNCATED);
    perf_aux_output_end(event, handle, size);
}

/// Bytes a `perf_aux_output_begin` at `head` would get now: `CIRC_SPACE`
/// from the consumer's aux_tail, none when the tail is not within one area
/// behind the head (a consumer's bad tail is no space, as in the kernel).
fn space_at(aux: &AuxArea, head: u64) -> u64 {
    let tail = aux
        .memory()
        .user_word(offsets::AUX_TAIL)
        .load(Ordering::Acquire);
    let size = aux.aux_size();
    if head.wrapping_sub(tail) < size {
        circ_space(head, tail, size)
    } else {
        0
    }
}

/// The writer's full-trace slow path, PT's PMI: the writer crossed the
/// watermark or used up the transaction's space. Ends the transaction
/// (PERF_RECORD_AUX with the bytes written, aux_head, wakeup) and begins
/// the next. No space to go on: the transaction ends TRUNCATED, the event
/// is disabled (pending disable) and the writer stops (module doc, "Full
/// trace").
fn on_full(aux_head: u64, needed: u64) -> Option<u64> {
    let ev = CURRENT.with(Cell::get);
    if ev.is_null() {
        return None;
    }
    // SAFETY: CURRENT is set while this thread's writer is installed for
    // the event, and the event outlives its writer (stop runs before the
    // event is released).
    let event = unsafe { &*ev };
    let st = TraceState::of(event)?;
    let mut tx = st.tx.try_lock().ok()?;
    let Some(Transaction {
        handle,
        start_head,
        _buffer: buffer,
    }) = tx.take()
    else {
        return restart(event, st, &mut tx, aux_head, needed);
    };
    let written = aux_head.wrapping_sub(start_head);
    let space_end = handle.head() + handle.size();
    if aux_head.saturating_add(needed) > space_end
        && buffer
            .aux()
            .is_none_or(|aux| space_at(aux, aux_head) < needed)
    {
        truncate(event, handle, written);
        st.truncated.store(true, Ordering::Release);
        return None;
    }
    perf_aux_output_end(event, handle, written);
    let Some(handle) = perf_aux_output_begin(event) else {
        // The consumer took space back after all (its aux_tail moved
        // backwards); begin disabled the event and woke the consumer. Say
        // that the trace stops here.
        let rec = perfaux_ring::AuxRecord {
            aux_offset: aux_head,
            aux_size: 0,
            flags: PERF_AUX_FLAG_TRUNCATED,
        };
        perf_output_aux_record(event, &rec);
        st.truncated.store(true, Ordering::Release);
        return None;
    };
    if handle.size() < needed {
        truncate(event, handle, 0);
        st.truncated.store(true, Ordering::Release);
        return None;
    }
    Some(next_transaction(&mut tx, handle, buffer, needed))
}

/// The stopped writer asks again (no open transaction): after a TRUNCATED
/// end, once the consumer's aux_tail leaves room for the `needed` bytes at
/// the head the trace stopped at, the event is active again and a new
/// transaction begins there (module doc, "Full trace"). `None` while there
/// is no room, or when the event was disabled meanwhile.
fn restart(
    event: &Event,
    st: &TraceState,
    tx: &mut Option<Transaction>,
    aux_head: u64,
    needed: u64,
) -> Option<u64> {
    if !st.truncated.load(Ordering::Acquire) {
        return None;
    }
    let buffer = event.buffer_arc()?;
    let aux = buffer.aux()?;
    // Looked at first: a consumer that has not read yet costs one load.
    if aux.overwrite() || space_at(aux, aux_head) < needed {
        return None;
    }
    if !perf_aux_output_restart(event) {
        return None;
    }
    st.truncated.store(false, Ordering::Release);
    let Some(handle) = perf_aux_output_begin(event) else {
        st.truncated.store(true, Ordering::Release);
        return None;
    };
    if handle.head() != aux_head || handle.size() < needed {
        // Not the stream the writer stopped in, or the room went again.
        truncate(event, handle, 0);
        st.truncated.store(true, Ordering::Release);
        return None;
    }
    Some(next_transaction(tx, handle, buffer, needed))
}

/// Makes `handle` (of `buffer`'s AUX area) the open transaction of the
/// writer's slow path; the writer's limit in it for a step of `needed`
/// bytes.
fn next_transaction(
    tx: &mut Option<Transaction>,
    handle: AuxHandle<'_>,
    buffer: Arc<Buffer>,
    needed: u64,
) -> u64 {
    let limit = transaction_limit(&handle, needed);
    // SAFETY: as in start_here: the Transaction holds `buffer`, whose grave
    // keeps the AuxArea the handle borrows, and drops the handle first.
    let handle: AuxHandle<'static> = unsafe { std::mem::transmute(handle) };
    *tx = Some(Transaction {
        start_head: handle.head(),
        handle,
        _buffer: buffer,
    });
    limit
}

/// The AUX area's first byte (null if it has none: `AuxRegion::new`
/// refuses that).
fn aux_base(aux: &AuxArea) -> *mut u8 {
    aux.memory()
        .aux_base()
        .map_or(std::ptr::null_mut(), std::ptr::NonNull::as_ptr)
}
