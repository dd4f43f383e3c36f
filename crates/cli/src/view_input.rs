//! The one place that feeds a recording to perfaux-view: it opens the
//! perf.data, reads perfaux's trace section and probe table, and says how
//! uevents travel. `report` (without -D) and `export` go through
//! [`with_recording`].

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use perfaux_view::{Filter, Recording, Summary, UeventFormat};

use crate::error::CliError;
use perfaux_perfdata::uevent_sample::{UEVENT_EVENT_NAME, uevent_in_raw};

/// Opens `path` and hands `f` the recording, ready for [`perfaux_view::walk`].
pub fn with_recording<T>(
    path: &Path,
    filter: Filter,
    symfs: Option<&Path>,
    f: impl FnOnce(Recording<'_, BufReader<File>>) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let (reader, _) = crate::input::open_input(path)?;
    if let Some(e) = &reader.metadata().feature_error {
        return Err(CliError::file(path, e));
    }
    let (trace, probes) = crate::input::trace_and_probes(&reader, path)?;
    // The uevent types' names are the recording's own (none: the views
    // show the numbers).
    let type_names: Vec<(&str, u32)> = probes.uevent_types().map(|(t, n)| (n, t)).collect();
    f(Recording {
        reader,
        probes: &probes,
        trace: trace.as_ref(),
        uevents: UeventFormat {
            event_name: UEVENT_EVENT_NAME,
            decode: uevent_in_raw,
            type_names: &type_names,
        },
        filter,
        symfs: symfs.map(Path::to_path_buf),
    })
}

/// Says on stderr what the pass could not use (a file whose build id is not the
/// recording's, ...): the output stands, with those gaps.
pub fn say_notes(command: &str, sum: &Summary) {
    for n in &sum.notes {
        eprintln!("perfaux {command}: warning: {n}");
    }
}
