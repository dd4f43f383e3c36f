//! What the recorder reads back about the program's events: the `probe:FUNC` functions the
//! runtime found in no object, and the threads whose events could not be set up.
//!
//! Each thread opens the event table's events in order as `perf record` does: the `swtrace//`
//! event owns the thread's buffer, an event grouped behind it is opened with it as group
//! leader, and every event writes into its buffer. A `probe:FUNC` names a function of the
//! program by its ELF symbol name: only the program knows where its objects are loaded, so the
//! runtime finds FUNC in each object it loads (also by `dlopen`) and fills in the probe's
//! `config`; the recorder learns whether FUNC was found from the event's `FOUND` word.

use perfaux_recorder::EventSpec;

use crate::host::{ProgramEvent, ProgramSession};
use crate::shared::open_step;

/// The functions of the `probe:FUNC` events that are in no object the program loaded so far.
pub(crate) fn unfound(session: &ProgramSession, table: &[ProgramEvent]) -> Vec<String> {
    session
        .unfound_functions()
        .into_iter()
        .filter_map(|k| table.get(k)?.func.clone())
        .collect()
}

/// The first thread whose events could not be opened, as a line.
pub(crate) fn open_error(session: &ProgramSession, specs: &[EventSpec]) -> Option<String> {
    let e = session.open_errors().into_iter().next()?;
    let name = specs.get(e.event).map_or("?", |s| s.name.as_str());
    let err = std::io::Error::from_raw_os_error(e.errno);
    let what = match e.step {
        open_step::OPEN => format!("cannot open event '{name}'"),
        open_step::MAP_DATA => format!("cannot map the buffer of event '{name}'"),
        open_step::MAP_AUX => format!("cannot map the AUX area of event '{name}'"),
        open_step::SET_OUTPUT => {
            format!("cannot redirect event '{name}' into the trace event's buffer")
        }
        open_step::ENABLE => format!("cannot enable event '{name}'"),
        _ => format!("cannot set up event '{name}'"),
    };
    Some(format!("thread {}: {what}: {err}", e.tid))
}
