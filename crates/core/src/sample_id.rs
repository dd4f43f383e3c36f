//! The `sample_id` trailer of every record the core writes
//! (`perf_event_header__init_id` / `perf_event__output_id_sample`).
//!
//! Its own module, below both the records' writer (`output`) and the
//! samples' (`sample`): each of them writes the trailer, and neither needs
//! the other for it.

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId as AbiSampleId};
use perfaux_abi::{ByteSink, Endianness};

use crate::event::Event;
use crate::thread;

/// The `sample_id` trailer of one record (`perf_event_header__init_id`),
/// as perfaux-abi's [`AbiSampleId`], which also writes it.
#[derive(Clone, Copy, Default)]
pub(crate) struct SampleId(pub(crate) AbiSampleId);

impl SampleId {
    /// The trailer for `event`, taken now on the calling thread. Only the
    /// fields the trailer carries are read (the clock and the CPU number
    /// cost a vDSO call each).
    ///
    /// Without `sample_id_all` no record carries a trailer ([`Self::write`]
    /// writes nothing), so nothing is read and the value is empty.
    #[inline]
    pub(crate) fn now(event: &Event) -> Self {
        if !event.flag(AttrFlags::SAMPLE_ID_ALL) {
            return Self::default();
        }
        let st = event.attr.sample_type;
        let time = if st & PERF_SAMPLE_TIME != 0 {
            event.clock.now()
        } else {
            0
        };
        let cpu = if st & PERF_SAMPLE_CPU != 0 {
            thread::current_cpu().max(0) as u32
        } else {
            0
        };
        Self::with(event, thread::getpid(), thread::gettid() as u32, time, cpu)
    }

    /// The trailer of a record taken with these fields.
    pub(crate) fn with(event: &Event, pid: u32, tid: u32, time: u64, cpu: u32) -> Self {
        Self(AbiSampleId {
            tid: Some(PidTid { pid, tid }),
            time: Some(time),
            id: Some(event.id),
            stream_id: Some(event.id),
            cpu: Some(CpuRes { cpu, res: 0 }),
            identifier: Some(event.id),
        })
    }

    /// `perf_event__output_id_sample`: writes the trailer if
    /// `sample_id_all` (IDENTIFIER last, at a fixed offset from the end).
    #[inline]
    pub(crate) fn write(&self, event: &Event, sink: &mut (impl ByteSink + ?Sized)) {
        if event.flag(AttrFlags::SAMPLE_ID_ALL) {
            self.0
                .write(event.attr.sample_type, Endianness::NATIVE, sink);
        }
    }
}
