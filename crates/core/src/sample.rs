//! `perf_prepare_sample` / `perf_output_sample` (the trailer they share
//! with every other record is [`crate::sample_id`]'s).
//!
//! Everything here runs on the overflow path, possibly in a signal handler:
//! no allocation, no lock. Field order is the kernel's (`perf_output_sample()`;
//! the body order of include/uapi/linux/perf_event.h).
//!
//! The `sample_id` trailer is perfaux-abi's. The SAMPLE body is written
//! here, field by field, rather than with perfaux-abi's `SampleRecord`:
//! that writer takes READ values, the callchain and the AUX data as byte
//! arrays, while here the AUX data streams from the AUX area straight into
//! the ring's reservation (`snapshot_aux`) and the group's counts are read
//! while writing; staging them would cost a 4 KiB copy per AUX sample in
//! the NMI path. `tests/sample_layout.rs` parses what this writes with
//! perfaux-abi's `SampleRecord` to keep the two in step.

use std::sync::atomic::Ordering;

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_abi::{ByteSink, PerfEventHeader};

use crate::event::{Event, EventState};
use crate::sample_id::SampleId;
use crate::wire::SinkExt;
use crate::{aux, thread};

/// What the PMU knows about one sample (`struct perf_sample_data`); the
/// core fills in the rest.
#[derive(Default)]
pub struct SampleData<'a> {
    /// PERF_SAMPLE_IP: the probe's (or interrupted code's) address.
    pub ip: u64,
    /// PERF_SAMPLE_ADDR.
    pub addr: u64,
    /// PERF_SAMPLE_RAW payload (padded by the core).
    pub raw: Option<&'a [u8]>,
    /// PERF_SAMPLE_CALLCHAIN: user return addresses, innermost first; the
    /// core puts PERF_CONTEXT_USER in front.
    pub callchain: &'a [u64],
    /// PERF_SAMPLE_PERIOD (set by the overflow path).
    pub period: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) time: u64,
    pub(crate) cpu: u32,
    pub(crate) aux_size: u64,
    pub(crate) read_nr: usize,
}

impl SampleData<'_> {
    /// The trailer matching a sample's own fields (for the LOST record in
    /// front of it).
    #[inline]
    pub(crate) fn sample_id(&self, event: &Event) -> SampleId {
        if !event.flag(AttrFlags::SAMPLE_ID_ALL) {
            return SampleId::default();
        }
        SampleId::with(event, self.pid, self.tid, self.time, self.cpu)
    }
}

/// `__perf_event_read_size`: bytes of a read_format block for `nr` counters.
pub(crate) fn read_size(read_format: u64, nr: usize) -> usize {
    let mut entry = 8;
    let mut size = 0;
    if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
        size += 8;
    }
    if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
        size += 8;
    }
    if read_format & PERF_FORMAT_ID != 0 {
        entry += 8;
    }
    if read_format & PERF_FORMAT_LOST != 0 {
        entry += 8;
    }
    let mut n = 1;
    if read_format & PERF_FORMAT_GROUP != 0 {
        n = nr;
        size += 8;
    }
    size + entry * n
}

/// `__perf_event_header_size`: the fixed-size fields of a sample.
fn fixed_sample_size(sample_type: u64) -> usize {
    let mut size = 0;
    for bit in [
        PERF_SAMPLE_IP,
        PERF_SAMPLE_TID,
        PERF_SAMPLE_TIME,
        PERF_SAMPLE_ADDR,
        PERF_SAMPLE_ID,
        PERF_SAMPLE_STREAM_ID,
        PERF_SAMPLE_CPU,
        PERF_SAMPLE_PERIOD,
        PERF_SAMPLE_IDENTIFIER,
    ] {
        if sample_type & bit != 0 {
            size += 8;
        }
    }
    size
}

/// `perf_event_validate_size` (v6.7+): the read_format size of the event,
/// of its group leader and of every sibling, with the group one member
/// larger, stays within 16 KiB, whatever sample_type says (the fixed
/// sample fields are small; the read values are what grows with a group).
pub(crate) fn validate_size(event: &Event, leader: Option<&Event>) -> bool {
    let fits = |ev: &Event, nr: usize| read_size(ev.attr.read_format, nr) <= 16 * 1024;
    match leader {
        // A new leader counts as a group of two, as the kernel sizes it.
        None => fits(event, 2),
        Some(l) => {
            let siblings = l.siblings();
            let nr = siblings.len() + 2;
            fits(event, nr) && fits(l, nr) && siblings.iter().all(|s| fits(s, nr))
        }
    }
}

/// `perf_prepare_sample` + `perf_prepare_header`: fills `data` and returns
/// the record's size, AUX included and clamped to `U16_MAX`.
pub(crate) fn perf_prepare_sample(event: &Event, data: &mut SampleData<'_>) -> usize {
    let st = event.attr.sample_type;
    let mut size = PerfEventHeader::SIZE + fixed_sample_size(st);
    // pid/tid, like the clock and the CPU below, only when the record
    // carries them (the sample_id trailer follows the same sample_type).
    if st & PERF_SAMPLE_TID != 0 {
        data.pid = thread::getpid();
        data.tid = thread::gettid() as u32;
    }
    if st & PERF_SAMPLE_TIME != 0 {
        data.time = event.clock.now();
    }
    if st & PERF_SAMPLE_CPU != 0 {
        data.cpu = thread::current_cpu().max(0) as u32;
    }
    if st & PERF_SAMPLE_READ != 0 {
        data.read_nr = if event.attr.read_format & PERF_FORMAT_GROUP != 0 {
            let leader = event.group_leader();
            leader.sibling_list.read(|l| l.map_or(0, |l| l.0.len())) + 1
        } else {
            1
        };
        size += read_size(event.attr.read_format, data.read_nr);
    }
    if st & PERF_SAMPLE_CALLCHAIN != 0 {
        let n = data
            .callchain
            .len()
            .min(usize::from(event.attr.sample_max_stack));
        data.callchain = &data.callchain[..n];
        size += 8 * (2 + n);
    }
    if st & PERF_SAMPLE_RAW != 0 {
        let len = data.raw.map_or(0, <[u8]>::len);
        size += (len + 4).next_multiple_of(8);
    }
    if st & PERF_SAMPLE_AUX != 0 {
        size += 8;
        let want =
            (usize::from(u16::MAX).saturating_sub(size)).min(event.attr.aux_sample_size as usize);
        let want = want / 8 * 8;
        data.aux_size = aux::perf_prepare_sample_aux(event, want) as u64;
        size += data.aux_size as usize;
    }
    size
}

/// `perf_output_sample`: the record, in the kernel's field order.
pub(crate) fn perf_output_sample(
    event: &Event,
    data: &SampleData<'_>,
    size: usize,
    h: &mut (impl ByteSink + ?Sized),
) {
    let st = event.attr.sample_type;
    h.put_header(PerfEventHeader::new(
        PERF_RECORD_SAMPLE,
        PERF_RECORD_MISC_USER,
        size as u16,
    ));
    if st & PERF_SAMPLE_IDENTIFIER != 0 {
        h.put_u64(event.id);
    }
    if st & PERF_SAMPLE_IP != 0 {
        h.put_u64(data.ip);
    }
    if st & PERF_SAMPLE_TID != 0 {
        h.put_u32(data.pid);
        h.put_u32(data.tid);
    }
    if st & PERF_SAMPLE_TIME != 0 {
        h.put_u64(data.time);
    }
    if st & PERF_SAMPLE_ADDR != 0 {
        h.put_u64(data.addr);
    }
    if st & PERF_SAMPLE_ID != 0 {
        h.put_u64(event.id);
    }
    if st & PERF_SAMPLE_STREAM_ID != 0 {
        h.put_u64(event.id);
    }
    if st & PERF_SAMPLE_CPU != 0 {
        h.put_u32(data.cpu);
        h.put_u32(0);
    }
    if st & PERF_SAMPLE_PERIOD != 0 {
        h.put_u64(data.period);
    }
    if st & PERF_SAMPLE_READ != 0 {
        perf_output_read(event, data.read_nr, h);
    }
    if st & PERF_SAMPLE_CALLCHAIN != 0 {
        h.put_u64(1 + data.callchain.len() as u64);
        h.put_u64(PERF_CONTEXT_USER);
        for &ip in data.callchain {
            h.put_u64(ip);
        }
    }
    if st & PERF_SAMPLE_RAW != 0 {
        let raw = data.raw.unwrap_or(&[]);
        let padded = (raw.len() + 4).next_multiple_of(8) - 4;
        h.put_u32(padded as u32);
        h.put(raw);
        h.put_zeros(padded - raw.len());
    }
    if st & PERF_SAMPLE_AUX != 0 {
        h.put_u64(data.aux_size);
        if data.aux_size != 0 {
            aux::perf_aux_sample_output(event, data.aux_size as usize, h);
        }
    }
}

/// One counter's `{ value; [id]; [lost] }`.
fn put_value(ev: &Event, rf: u64, h: &mut (impl ByteSink + ?Sized)) {
    h.put_u64(ev.count());
    if rf & PERF_FORMAT_ID != 0 {
        h.put_u64(ev.id);
    }
    if rf & PERF_FORMAT_LOST != 0 {
        h.put_u64(ev.counters.lost.load(Ordering::Relaxed));
    }
}

/// `perf_output_read` (`_one` or `_group`), for exactly `nr` counters as
/// prepared (a member that left meanwhile reads as zero).
pub(crate) fn perf_output_read(event: &Event, nr: usize, h: &mut (impl ByteSink + ?Sized)) {
    let rf = event.attr.read_format;
    let now = event.clock.now();
    let (enabled, running) = times(event, now);
    if rf & PERF_FORMAT_GROUP == 0 {
        h.put_u64(event.count());
        put_times(h, rf, enabled, running);
        if rf & PERF_FORMAT_ID != 0 {
            h.put_u64(event.id);
        }
        if rf & PERF_FORMAT_LOST != 0 {
            h.put_u64(event.counters.lost.load(Ordering::Relaxed));
        }
        return;
    }
    h.put_u64(nr as u64);
    put_times(h, rf, enabled, running);
    let leader = event.group_leader();
    put_value(&leader, rf, h);
    let mut written = 1;
    leader.sibling_list.read(|l| {
        for s in l.map(|l| l.0.as_slice()).unwrap_or(&[]) {
            if written == nr {
                break;
            }
            put_value(s, rf, h);
            written += 1;
        }
    });
    while written < nr {
        h.put_u64(0);
        if rf & PERF_FORMAT_ID != 0 {
            h.put_u64(0);
        }
        if rf & PERF_FORMAT_LOST != 0 {
            h.put_u64(0);
        }
        written += 1;
    }
}

/// Total time enabled and running up to `now`.
pub(crate) fn times(event: &Event, now: u64) -> (u64, u64) {
    let mut enabled = event.hw.time_enabled.load(Ordering::Relaxed);
    let mut running = event.hw.time_running.load(Ordering::Relaxed);
    if event.state() == EventState::Active {
        let d = now.saturating_sub(event.hw.tstamp.load(Ordering::Relaxed));
        enabled += d;
        running += d;
    }
    (enabled, running)
}

fn put_times(h: &mut (impl ByteSink + ?Sized), rf: u64, enabled: u64, running: u64) {
    if rf & PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
        h.put_u64(enabled);
    }
    if rf & PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
        h.put_u64(running);
    }
}
