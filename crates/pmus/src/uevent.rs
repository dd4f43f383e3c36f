//! Two PMUs fed by uevents.
//!
//! - `uevent`: a counting event over the uevents of one type (`config` =
//!   the uevent type) from the threads it observes; its samples carry the
//!   payload as PERF_SAMPLE_RAW. A sampler and `aux_action` trigger like any
//!   other.
//! - `uevent_aux`: an AUX-area PMU that logs each observed uevent into its
//!   AUX area as `{u32 type; u32 size; u8 data[size]; pad to 8}`, one AUX
//!   transaction (and PERF_RECORD_AUX) per uevent. It has neither
//!   `PERF_PMU_CAP_AUX_PAUSE` nor `snapshot_aux`, which is what makes the
//!   pause/resume (EOPNOTSUPP/EINVAL) and AUX sampling (EINVAL) refusals
//!   reachable with a real AUX PMU.

use std::sync::atomic::{AtomicBool, Ordering};

use perfaux_abi::ByteSink;

use perfaux_core::driver::{
    AuxArea, Event, EventState, Pmu, PmuCaps, PmuPrivate, Result, SampleData, einval, enoent,
    perf_aux_output_begin, perf_aux_output_end, perf_swevent_event,
};

/// The uevent counting PMU.
pub struct UeventPmu;

impl Pmu for UeventPmu {
    fn name(&self) -> &'static str {
        "uevent"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(enoent("not a uevent event"));
        }
        if event.attr().config > u64::from(u32::MAX) {
            return Err(enoent("uevent: config is no uevent type"));
        }
        Ok(Box::new(()))
    }

    fn start(&self, _event: &Event, _flags: u32) {}

    fn stop(&self, _event: &Event, _flags: u32) {}

    fn uevent(&self, event: &Event, type_: u32, data: &[u8]) {
        if u64::from(type_) != event.attr().config || event.state() != EventState::Active {
            return;
        }
        let mut sd = SampleData::default();
        sd.raw = Some(data);
        perf_swevent_event(event, 1, &mut sd);
    }
}

/// The AUX PMU without pause and snapshot.
pub struct UeventAuxPmu;

struct AuxState {
    running: AtomicBool,
}

impl Pmu for UeventAuxPmu {
    fn name(&self) -> &'static str {
        "uevent_aux"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::NO_NMI | PmuCaps::AUX | PmuCaps::AUX_UEVENT_LOG
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(enoent("not a uevent_aux event"));
        }
        if event.attr().config != 0 {
            return Err(einval("uevent_aux: config must be 0"));
        }
        Ok(Box::new(AuxState {
            running: AtomicBool::new(false),
        }))
    }

    fn start(&self, event: &Event, _flags: u32) {
        if let Some(s) = event.pmu_private::<AuxState>() {
            s.running.store(true, Ordering::Release);
        }
    }

    fn stop(&self, event: &Event, _flags: u32) {
        if let Some(s) = event.pmu_private::<AuxState>() {
            s.running.store(false, Ordering::Release);
        }
    }

    fn setup_aux(&self, _event: &Event, _aux: &AuxArea, _overwrite: bool) -> Result<PmuPrivate> {
        Ok(Box::new(()))
    }

    fn uevent(&self, event: &Event, type_: u32, data: &[u8]) {
        let running = event
            .pmu_private::<AuxState>()
            .is_some_and(|s| s.running.load(Ordering::Acquire));
        if !running || event.state() != EventState::Active {
            return;
        }
        let Some(mut h) = perf_aux_output_begin(event) else {
            return;
        };
        let len = 8 + data.len().next_multiple_of(8);
        let overwrite = h.size() == 0;
        if !overwrite && (len as u64) > h.size() {
            // Full-trace mode and no room: the record is truncated away.
            let _ = h.flag(perfaux_abi::consts::PERF_AUX_FLAG_TRUNCATED);
            perf_aux_output_end(event, h, 0);
            return;
        }
        if len as u64 > h.buffer().aux_size() {
            perf_aux_output_end(event, h, 0);
            return;
        }
        let mut rec = AuxRecordSink { h: &h, at: 0 };
        rec.put(&type_.to_ne_bytes());
        rec.put(&(data.len() as u32).to_ne_bytes());
        rec.put(data);
        rec.put_zeros(len - 8 - data.len());
        if overwrite {
            let head = h.head() + len as u64;
            h.set_head(head);
        }
        perf_aux_output_end(event, h, len as u64);
    }
}

/// Writes consecutive bytes through an AUX handle.
struct AuxRecordSink<'a, 'b> {
    h: &'a perfaux_ring::AuxHandle<'b>,
    at: u64,
}

impl ByteSink for AuxRecordSink<'_, '_> {
    fn put(&mut self, bytes: &[u8]) {
        if self.h.write_at(self.at, bytes).is_ok() {
            self.at += bytes.len() as u64;
        }
    }
}
