//! The AUX paths of kernel/events/core.c: AUX sampling
//! (`perf_prepare_sample_aux`, `perf_aux_sample_output`,
//! `perf_pmu_snapshot_aux`), pause and resume (`perf_event_aux_pause`), and
//! the end of an AUX transaction (`perf_aux_output_end`'s record).
//!
//! Both guards of the kernel live in the AUX event's buffer:
//! `aux_in_sampling` (a sample taken while a snapshot of the same buffer
//! runs, e.g. from a signal handler that interrupted it, carries no AUX
//! data) and `aux_in_pause_resume` (a pause or resume that arrives while
//! another is running is dropped). perfaux takes them with a
//! compare-and-swap, since here the racing "NMI" may also be another
//! thread, and, beyond the kernel, counts every dropped pause and resume on
//! the AUX event ([`Event::counters`]), so that a recording sums its own.

use std::sync::atomic::{Ordering, compiler_fence};

use perfaux_abi::ByteSink;
use perfaux_ring::AuxHandle;

use crate::event::Event;
use crate::pmu::ef;
use crate::thread;

/// `perf_prepare_sample_aux`: how many AUX bytes the sample of `event`
/// will carry (`size` already clamped to the record limit and rounded down
/// to 8). 0 if the sampler is not ACTIVE for this thread on this CPU, has no
/// AUX area, or a snapshot of its buffer is in progress.
pub(crate) fn perf_prepare_sample_aux(event: &Event, size: usize) -> usize {
    event.aux_event.read(|sampler| {
        let Some(sampler) = sampler else { return 0 };
        let n = prepare(sampler, size);
        if n == 0 {
            event.counter_inc(&event.counters.aux_samples_empty);
        }
        n
    })
}

fn prepare(sampler: &Event, size: usize) -> usize {
    let cpu = if sampler.cpu() == -1 {
        -1
    } else {
        thread::current_cpu()
    };
    if !sampler.active_here(thread::gettid(), cpu) {
        return 0;
    }
    let Some(rb) = sampler.rb.load() else {
        return 0;
    };
    if rb.aux_in_sampling.load(Ordering::Acquire) {
        return 0;
    }
    let Some(aux) = rb.aux() else {
        return 0;
    };
    (size.min(aux.aux_size() as usize)).next_multiple_of(8)
}

/// `perf_aux_sample_output`: `aux_size` bytes of the sampler's newest trace
/// (from `pmu->snapshot_aux`), zero-padded to `aux_size`, under the
/// `aux_in_sampling` guard. Writes exactly `aux_size` bytes.
pub(crate) fn perf_aux_sample_output(
    event: &Event,
    aux_size: usize,
    h: &mut (impl ByteSink + ?Sized),
) {
    let mut limited = LimitSink {
        inner: h,
        left: aux_size,
    };
    event.aux_event.read(|sampler| {
        let Some(sampler) = sampler else { return };
        let Some(rb) = sampler.rb.load() else { return };
        if !enter_aux_in_sampling(rb) {
            return;
        }
        sampler.pmu.snapshot_aux(sampler, &mut limited, aux_size);
        rb.aux_in_sampling.store(false, Ordering::Release);
    });
    // What the PMU did not give is zero-filled, so the record is exactly
    // the size prepared.
    if limited.left != 0 {
        let left = limited.left;
        limited.inner.put_zeros(left);
    }
}

/// Takes `rb->aux_in_sampling`; false if a snapshot of `rb` is running.
///
/// On the thread that owns a per-thread buffer this is the kernel's
/// `READ_ONCE` + `WRITE_ONCE` + `barrier()`: the only other taker is a
/// signal handler, which runs to completion between two instructions of
/// this thread, so a handler that lands between the load and the store
/// leaves the flag as it found it, and one that lands after the store sees
/// it set. Elsewhere (a per-CPU buffer: several threads) a compare-and-swap.
#[inline]
fn enter_aux_in_sampling(rb: &crate::buffer::Buffer) -> bool {
    let flag = &rb.aux_in_sampling;
    if rb.owner_tid == Some(thread::gettid()) {
        if flag.load(Ordering::Relaxed) {
            return false;
        }
        flag.store(true, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        true
    } else {
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// Keeps a PMU's snapshot within the bytes the record reserved, and counts
/// what is left.
struct LimitSink<'a, S: ByteSink + ?Sized> {
    inner: &'a mut S,
    left: usize,
}

impl<S: ByteSink + ?Sized> ByteSink for LimitSink<'_, S> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.left);
        self.inner.put(&bytes[..n]);
        self.left -= n;
    }
}

/// `perf_event_aux_pause(aux_event, pause)`: pause or resume the AUX event
/// unless another pause/resume of its buffer is running (then the request
/// is dropped and counted). Nothing happens without a buffer, as in the
/// kernel (`ring_buffer_get` fails).
pub(crate) fn perf_event_aux_pause(aux_event: &Event, pause: bool) {
    let Some(rb) = aux_event.rb.load() else {
        return;
    };
    if rb
        .aux_in_pause_resume
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        let dropped = if pause {
            &aux_event.counters.dropped_pause
        } else {
            &aux_event.counters.dropped_resume
        };
        dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    __perf_event_aux_pause(aux_event, pause);
    rb.aux_in_pause_resume.store(false, Ordering::Release);
}

/// `__perf_event_aux_pause`: call the PMU only on a state change.
fn __perf_event_aux_pause(event: &Event, pause: bool) {
    if pause {
        if !event.hw.aux_paused.swap(true, Ordering::AcqRel) {
            event.pmu.stop(event, ef::PAUSE);
        }
    } else if event.hw.aux_paused.swap(false, Ordering::AcqRel) {
        event.pmu.start(event, ef::RESUME);
    }
}

/// For PMUs: `perf_aux_output_begin` on the event's buffer, or `None` (no
/// buffer, no AUX area, another writer). Full-trace mode without space
/// disables the event (pending disable) and returns `None`, as the kernel
/// does.
///
/// The handle borrows the buffer; the caller keeps `event` (and so its
/// buffer) alive while it holds the handle.
pub fn perf_aux_output_begin(event: &Event) -> Option<AuxHandle<'_>> {
    let rb = event.rb.load()?;
    let aux = rb.aux()?;
    match aux.aux_buffer().output_begin() {
        Ok(h) => Some(h),
        Err(perfaux_ring::aux::AuxBeginError::Full) => {
            crate::event::perf_event_disable_inatomic(event);
            None
        }
        Err(perfaux_ring::aux::AuxBeginError::Nested) => None,
    }
}

/// For PMUs whose last transaction ended TRUNCATED (which disabled the event,
/// pending disable): the consumer has made room since, so the event is active
/// again and the PMU may begin a new transaction, as the kernel's drivers
/// restart tracing at their next `perf_aux_output_begin` once there is space.
/// Only a disable the control path has not applied yet is withdrawn: true if
/// it was; false if the event was disabled meanwhile (an ioctl, its close),
/// and then it stays off until enabled.
pub fn perf_aux_output_restart(event: &Event) -> bool {
    if event.state() != crate::event::EventState::Off {
        return false;
    }
    if event
        .hw
        .pending_disable
        .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    event.set_state(crate::event::EventState::Active);
    true
}

/// For PMUs: `perf_aux_output_end(handle, size)`: publishes `aux_head`,
/// writes the PERF_RECORD_AUX (with the event's `sample_id`) when there is
/// something to report, and disables the event when TRUNCATED.
pub fn perf_aux_output_end(event: &Event, handle: AuxHandle<'_>, size: u64) {
    let end = handle.end(size);
    if let Some(rb) = event.rb.load()
        && let Some(aux) = rb.aux()
    {
        rb.mirror_aux_head(aux.aux_buffer().aux_head());
    }
    if let Some(rec) = end.record {
        crate::output::perf_output_aux_record(event, &rec);
    }
    if end.disable {
        crate::event::perf_event_disable_inatomic(event);
    }
}
