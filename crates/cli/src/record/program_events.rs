//! The `-e` events of `perfaux record -- ./prog`: what every traced thread of the program
//! opens (perfaux-preload's event table) and what the recorder files them as.
//!
//! Each thread opens the events in order as `perf record` does: the `swtrace//` event owns
//! the thread's buffer, an event grouped behind it (perf's aux-action and AUX sampling rules,
//! [`crate::events::resolve_events`]) is opened with it as group leader, and every event
//! writes into its buffer. A `probe:FUNC` names a function of the program by its ELF symbol
//! name: only the program knows where its objects are loaded, so the runtime finds FUNC in
//! each object it loads (also by `dlopen`) and fills in the probe's `config` (0 here).

use perfaux_perfdata::record_attrs::uevent_stream_attr;
use perfaux_perfdata::uevent_sample::UEVENT_EVENT_NAME;
use perfaux_preload::host::ProgramEvent;
use perfaux_recorder::EventSpec;

use super::attrs::attrs_with;
use crate::error::CliError;
use crate::events::resolve::{SWTRACE_PMU, UEVENT_AUX_PMU};
use crate::events::{Event, EventKind};

/// The recorder's specs and the program's event table for `events`, in the same order; the
/// uevent stream is added if no `-e uevent` asked for it (a program's `perfaux_uevent` calls
/// are always recorded, as without -e).
pub fn program_events(events: &[Event]) -> Result<(Vec<EventSpec>, Vec<ProgramEvent>), CliError> {
    let traces = events
        .iter()
        .filter(|e| e.kind == EventKind::SwTrace)
        .count();
    if traces != 1 {
        return Err(CliError::msg(format!(
            "record: a program is traced by exactly one {SWTRACE_PMU}// event, which owns each \
             thread's buffer ({traces} given): e.g. -e {SWTRACE_PMU}// -e probe:FUNC -- ./prog"
        )));
    }
    if let Some(e) = events.iter().find(|e| e.kind == EventKind::UeventAux) {
        return Err(CliError::msg(format!(
            "record: event '{}': {UEVENT_AUX_PMU}// is a second AUX area event; a program's \
             threads have one AUX area, {SWTRACE_PMU}//'s",
            e.text
        )));
    }
    let mut specs = Vec::with_capacity(events.len() + 1);
    let mut table = Vec::with_capacity(events.len() + 1);
    for (i, ev) in events.iter().enumerate() {
        // The runtime fills in a probe's config (the probe PMU's value for FUNC).
        let a = attrs_with(ev, &|_| Ok(0)).map_err(CliError::msg)?;
        let mut s = EventSpec::new(a.name, a.open, i);
        s.leader = ev.leader;
        s.uevent_stream = a.uevent_stream;
        specs.push(s);
        table.push(ProgramEvent {
            attr: a.open,
            leader: ev.leader,
            func: match &ev.kind {
                EventKind::Probe { func } => Some(func.clone()),
                _ => None,
            },
        });
    }
    if !specs.iter().any(|s| s.uevent_stream) {
        let i = specs.len();
        let mut s = EventSpec::new(UEVENT_EVENT_NAME, uevent_stream_attr(), i);
        s.uevent_stream = true;
        specs.push(s);
        table.push(ProgramEvent {
            attr: uevent_stream_attr(),
            leader: i,
            func: None,
        });
    }
    Ok((specs, table))
}
