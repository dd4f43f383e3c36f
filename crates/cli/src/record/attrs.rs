//! The attrs `record` opens for each event, and the attrs it writes into
//! perf.data for them (docs/PERF-COMPAT.md: exclude_kernel and
//! exclude_hv, sample_id_all and PERF_SAMPLE_IDENTIFIER in every
//! attr, at most 128 bytes, uevents as BPF output samples).

use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_pmus::{PROBE_TYPE, SWTRACE_TYPE, UEVENT_AUX_TYPE, UEVENT_TYPE};

use perfaux_perfdata::record_attrs::{base_attr, file_attr, uevent_stream_attr};
use perfaux_perfdata::uevent_sample::UEVENT_EVENT_NAME;

use crate::events::{Event, EventKind};
use crate::workload::{PROBES, UEVENT_TYPES};

pub use perfaux_perfdata::record_attrs::SAMPLE_ID_TYPE;

/// perf's default sampling period for a software clock event (4000 Hz of
/// CPU time in ns); lowered before this where the kernel's
/// perf_event_max_sample_rate is under 4000 Hz ([`crate::events::max_rate`]).
pub const DEFAULT_CLOCK_PERIOD: u64 = 1_000_000_000 / crate::events::max_rate::DEFAULT_CLOCK_FREQ;

/// An event's attr as opened, and as written to perf.data.
#[derive(Debug, Clone)]
pub struct EventAttrs {
    pub open: PerfEventAttr,
    pub file: PerfEventAttr,
    pub name: String,
    /// Whether this is the uevent stream: its PERF_RECORD_UEVENTs become
    /// BPF-output samples of `file`.
    pub uevent_stream: bool,
}

/// A uevent type by number or by the workload's name for it.
pub fn uevent_type(s: &str) -> Result<u32, String> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    UEVENT_TYPES
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = UEVENT_TYPES.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown uevent type '{s}' (a number, or one of: {})",
                names.join(", ")
            )
        })
}

/// The attrs for `ev` on the built-in workload (its probes named by [`PROBES`]).
pub fn attrs_for(ev: &Event) -> Result<EventAttrs, String> {
    attrs_with(ev, &|func| {
        if !PROBES.contains(&func) {
            return Err(format!(
                "event '{}': no instrumented function '{func}' in the workload (probes: {})",
                ev.text,
                PROBES.join(", ")
            ));
        }
        Ok(perfaux_pmus::probe::resolve_probe(func))
    })
}

/// The attrs for `ev`, a `probe:FUNC` event's `config` from `probe_config(FUNC)`.
pub fn attrs_with(
    ev: &Event,
    probe_config: &dyn Fn(&str) -> Result<u64, String>,
) -> Result<EventAttrs, String> {
    let mut uevent_stream = false;
    let mut name = ev.name.clone();
    let mut open = match &ev.kind {
        EventKind::SwTrace => base_attr(SWTRACE_TYPE, 0),
        EventKind::UeventAux => base_attr(UEVENT_AUX_TYPE, 0),
        EventKind::Uevent { type_: None } => {
            // The stream rides on a dummy event that accepts uevents.
            uevent_stream = true;
            name = UEVENT_EVENT_NAME.to_string();
            uevent_stream_attr()
        }
        EventKind::Uevent { type_: Some(t) } => {
            let mut a = base_attr(UEVENT_TYPE, u64::from(uevent_type(t)?));
            a.sample_type |= PERF_SAMPLE_RAW | PERF_SAMPLE_PERIOD;
            a.sample_period = 1;
            a
        }
        EventKind::Probe { func } => {
            let mut a = base_attr(PROBE_TYPE, probe_config(func)?);
            a.sample_type |= PERF_SAMPLE_PERIOD;
            a.sample_period = 1;
            a
        }
        EventKind::Tracepoint { id, .. } => {
            // perf's tracepoint: every hit a sample (-c 1) with its RAW record, the kernel's
            // (exclude_kernel would drop each hit of a kernel tracepoint), unless `:u`.
            let mut a = base_attr(PERF_TYPE_TRACEPOINT, *id);
            a.sample_type |= PERF_SAMPLE_RAW | PERF_SAMPLE_PERIOD;
            a.sample_period = 1;
            if !ev.user_only {
                a.flags.remove(AttrFlags::EXCLUDE_KERNEL);
            }
            a
        }
        EventKind::Software { config } => {
            let mut a = base_attr(PERF_TYPE_SOFTWARE, *config);
            if *config != PERF_COUNT_SW_DUMMY {
                a.sample_type |= PERF_SAMPLE_PERIOD;
                a.sample_period = match *config {
                    PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK => DEFAULT_CLOCK_PERIOD,
                    // A counter samples every event (perf's -c 1).
                    _ => 1,
                };
            }
            a
        }
    };
    if let Some(c) = ev.config {
        open.config = c;
    }
    if let Some(p) = ev.period {
        open.sample_period = p;
    }
    if let Some(f) = ev.freq {
        open.flags |= AttrFlags::FREQ;
        open.sample_period = f;
    }
    if ev.callchain {
        // The chain is the traced thread's shadow stack, taken by the sampler (probe and
        // task-clock drivers), exact: perf reads it as any PERF_SAMPLE_CALLCHAIN.
        open.sample_type |= PERF_SAMPLE_CALLCHAIN;
    }
    open.aux_action = ev.aux_action;
    if ev.aux_output {
        open.flags |= AttrFlags::AUX_OUTPUT;
    }
    if ev.aux_sample_size != 0 {
        open.aux_sample_size = ev.aux_sample_size;
        open.sample_type |= PERF_SAMPLE_AUX;
        if open.sample_period == 0 {
            // Only a sampling event carries AUX samples.
            open.sample_period = 1;
        }
    }
    let file = file_attr(&open, uevent_stream);
    Ok(EventAttrs {
        open,
        file,
        name,
        uevent_stream,
    })
}
