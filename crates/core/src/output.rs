//! Writing records into an event's buffer: `perf_output_begin`/`end` around
//! the records the core emits itself (ITRACE_START, AUX, UEVENT, SAMPLE).
//!
//! The kernel's `perf_output_begin` counts a record it cannot place in
//! `rb->lost` and in `event->lost_samples`; perfaux-ring does the first and
//! writes the PERF_RECORD_LOST with the event's id and `sample_id` that the
//! core hands it, the core does the second.

use std::sync::atomic::Ordering;

use perfaux_abi::Endianness;
use perfaux_abi::records::{AuxRecord, EncodeRecord, ItraceStartRecord};
use perfaux_ring::{LostInfo, OutputHandle};

use crate::event::Event;
use crate::pmu::PmuCaps;
use crate::sample_id::SampleId;
use crate::wire::{BatchSink, StackSink};

/// What a record is written into: the ring's output handle, behind a
/// [`BatchSink`] that turns the record's small fields into one copy.
pub(crate) type RecordSink<'a, 'h> = BatchSink<'a, OutputHandle<'h>, 128>;

/// `perf_output_begin(handle, event, size)` + `write` + `perf_output_end`.
/// `write` gets the handle and the `sample_id` taken for this record.
/// Returns whether the record was written; a record that did not fit is
/// counted in the event's `lost`.
#[inline]
pub(crate) fn perf_output(
    event: &Event,
    size: usize,
    sample_id: &SampleId,
    write: impl FnOnce(&mut RecordSink<'_, '_>),
) -> bool {
    let Some(rb) = event.rb.load() else {
        return false;
    };
    let mut trailer = StackSink::<64>::new();
    sample_id.write(event, &mut trailer);
    let lost = LostInfo {
        id: event.id,
        sample_id: trailer.bytes(),
    };
    match rb.data.output_begin(size, &lost) {
        Ok(mut h) => {
            let mut b = BatchSink::new(&mut h);
            write(&mut b);
            b.flush();
            // perf_output_end is the handle's drop at the end of this arm,
            // in place: `h.end()` would first move the handle, reloading
            // what was just stored into it.
            true
        }
        Err(_) => {
            event.counter_inc(&event.counters.lost);
            false
        }
    }
}

/// The buffer's records dropped since its last PERF_RECORD_LOST, said in a
/// LOST record of their own as `event` leaves the buffer (its close): the
/// kernel keeps that count for the next record, which does not come once the
/// last writer is gone, and the loss would be in no file. Written only where
/// no other writer can be inside the ring: on the thread that owns a
/// per-thread buffer, or once that thread is gone; a full ring keeps the
/// count (nothing more is lost by trying).
pub(crate) fn perf_output_lost(event: &Event) {
    let Some(rb) = event.rb.load() else {
        return;
    };
    if rb.data.lost() == 0 {
        return;
    }
    if let Some(owner) = rb.owner_tid
        && owner != crate::thread::gettid()
        && crate::thread::thread_exists(owner)
    {
        return;
    }
    let id = SampleId::now(event);
    let mut trailer = StackSink::<64>::new();
    id.write(event, &mut trailer);
    let lost = LostInfo {
        id: event.id,
        sample_id: trailer.bytes(),
    };
    let _ = rb.data.output_lost(&lost);
}

/// `perf_log_itrace_start`: PERF_RECORD_ITRACE_START `{pid, tid}` for PMUs
/// with `PERF_PMU_CAP_ITRACE`, until the PMU reports it started tracing.
///
/// Written on the thread that owns the buffer when the buffer is
/// per-thread (the kernel writes it from `event_sched_in` on the CPU the
/// task runs on): that thread is the ring's only writer. If the thread is
/// gone it writes nothing any more, and the record is written here; if it
/// did not take the call (signals blocked), the record is not written
/// rather than written beside it.
pub(crate) fn perf_log_itrace_start(event: &Event) {
    if !event.pmu_caps().contains(PmuCaps::ITRACE)
        || event.hw.itrace_started.load(Ordering::Acquire)
    {
        return;
    }
    let tid = event.target.tid().unwrap_or_else(crate::thread::gettid);
    let owner = event.rb.load().and_then(|rb| rb.owner_tid);
    match owner {
        Some(owner) if owner != crate::thread::gettid() => {
            let mut call = || log_itrace_start(event, tid);
            if let Err(e) = crate::remote::run_on(owner, &mut call)
                && e.errno == perfaux_abi::errno::ESRCH
            {
                log_itrace_start(event, tid);
            }
        }
        _ => log_itrace_start(event, tid),
    }
}

fn log_itrace_start(event: &Event, tid: i32) {
    let mut id = SampleId::now(event);
    // The kernel logs it in `event_sched_in`, where `current` is the task
    // scheduled in: the traced thread, also when this runs on another one
    // (a per-CPU buffer, or the traced thread gone).
    if let Some(t) = id.0.tid.as_mut() {
        t.tid = tid as u32;
    }
    let rec = ItraceStartRecord {
        misc: 0,
        pid: crate::thread::getpid(),
        tid: tid as u32,
        sample_id: id.0,
    };
    write_record(event, &rec, &id);
}

/// `perf_event_itrace_started`: the PMU began tracing, ITRACE_START is no
/// longer due.
pub fn perf_event_itrace_started(event: &Event) {
    event.hw.itrace_started.store(true, Ordering::Release);
}

/// The PERF_RECORD_AUX that `perf_aux_output_end` emits, with the event's
/// `sample_id`.
pub fn perf_output_aux_record(event: &Event, rec: &perfaux_ring::AuxRecord) {
    let id = SampleId::now(event);
    let r = AuxRecord {
        misc: 0,
        aux_offset: rec.aux_offset,
        aux_size: rec.aux_size,
        flags: rec.flags,
        sample_id: id.0,
    };
    write_record(event, &r, &id);
}

/// Writes a non-SAMPLE record with perfaux-abi's encoder; the trailer
/// follows the event's `sample_id_all` and `sample_type`.
#[inline]
pub(crate) fn write_record(event: &Event, rec: &impl EncodeRecord, id: &SampleId) -> bool {
    let info = event.record_info();
    let size = rec.encoded_len(&info);
    if size > usize::from(u16::MAX) {
        return false;
    }
    perf_output(event, size, id, |h| {
        let _ = rec.write(&info, Endianness::NATIVE, h);
    })
}
