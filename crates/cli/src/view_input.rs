//! The one place that feeds a recording to perfaux-view: it opens the
//! perf.data, reads perfaux's trace section and probe table, and says how
//! uevents travel. `report` (without -D) and `export` go through
//! [`with_recording`].

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use perfaux_perfdata::Feature;
use perfaux_swtrace::ProbeTable;
use perfaux_view::{ChunkKind, Filter, Recording, TraceChunk, UeventFormat};

use crate::error::CliError;
use crate::workload::UEVENT_TYPES;
use perfaux_perfdata::trace_section::{self as auxdata, AuxData, PERFAUX_FEATURE_BIT};
use perfaux_perfdata::uevent_sample::{UEVENT_EVENT_NAME, uevent_from_raw};

/// Opens `path` and hands `f` the recording, ready for [`perfaux_view::walk`].
pub fn with_recording<T>(
    path: &Path,
    filter: Filter,
    f: impl FnOnce(Recording<'_, BufReader<File>>) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let (reader, _) = crate::input::open_input(path)?;
    // The metadata is borrowed, not cloned: the trace section is the
    // largest thing in it.
    let meta = reader.metadata();
    if let Some(e) = &meta.feature_error {
        return Err(CliError::file(path, e));
    }
    let aux = match meta.features.raw(Feature(PERFAUX_FEATURE_BIT)) {
        Some(sec) => AuxData::parse(&sec.data, sec.offset).map_err(|e| CliError::file(path, e))?,
        None => AuxData::default(),
    };
    let probes = if aux.probe_table.is_empty() {
        ProbeTable::default()
    } else {
        ProbeTable::from_bytes(&aux.probe_table)
            .map_err(|e| CliError::file(path, format!("perfaux trace section: {e}")))?
    };
    let chunks = aux
        .chunks
        .iter()
        .map(|c| TraceChunk {
            event_id: c.event_id,
            tid: c.tid,
            aux_offset: c.aux_offset,
            kind: match c.kind {
                auxdata::ChunkKind::Trace => ChunkKind::Trace,
                auxdata::ChunkKind::Snapshot => ChunkKind::Snapshot,
                auxdata::ChunkKind::UeventLog => ChunkKind::UeventLog,
            },
            bytes: &c.bytes,
        })
        .collect();
    f(Recording {
        reader,
        probes: &probes,
        chunks,
        uevents: UeventFormat {
            event_name: UEVENT_EVENT_NAME,
            decode: uevent_from_raw,
            type_names: UEVENT_TYPES,
        },
        filter,
    })
}
