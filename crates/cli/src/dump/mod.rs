//! `perfaux report -D`: perf's raw dump of every record (tools/perf/util/
//! session.c `dump_event`, `evlist__print_tstamp`; event.c
//! `perf_event__fprintf_*`; builtin-report.c's stats table).
//!
//! For each record, as perf prints it:
//!
//! ```text
//! 0x6768@perf.data [0x40]: event: 11
//! .
//! . ... raw event: size 64 bytes
//! .  0000:  0b 00 00 00 00 00 40 00 00 00 00 00 00 00 00 00  ......@.........
//! ...
//!
//! 3 641256973321 0x6768 [0x40]: PERF_RECORD_AUX offset: 0 size: 0x3370 flags: 0 []
//! ```
//!
//! then the "Aggregated stats" table. Two differences from perf, both
//! deliberate: records come in file order (perf sorts kernel records by time
//! between FINISHED_ROUNDs; file order needs no buffering, so memory stays
//! bounded), and AUX data (AUXTRACE payloads, AUX samples, uevent payloads,
//! and the trace chunks of perfaux's own section) is shown as hex, where
//! perf runs a hardware decoder.

pub mod fmt;
pub mod names;
mod records;
pub mod stats;

use std::io::Write;
use std::path::Path;

use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_perfdata::{RawRecord, UserRecord};

use crate::error::CliError;
use crate::progress::Progress;
pub use stats::{Stats, parse_aggregated_stats};

/// One event of the file, as the dump needs it.
#[derive(Debug, Clone)]
pub(crate) struct EvInfo {
    pub attr: PerfEventAttr,
    pub info: RecordParseInfo,
    pub name: String,
}

/// perf's `evsel__name` for an event the file gives no name for.
pub(crate) fn default_event_name(attr: &PerfEventAttr) -> String {
    match (attr.type_, attr.config) {
        (PERF_TYPE_SOFTWARE, c) => match c {
            PERF_COUNT_SW_CPU_CLOCK => "cpu-clock".into(),
            PERF_COUNT_SW_TASK_CLOCK => "task-clock".into(),
            PERF_COUNT_SW_PAGE_FAULTS => "page-faults".into(),
            PERF_COUNT_SW_CONTEXT_SWITCHES => "context-switches".into(),
            PERF_COUNT_SW_CPU_MIGRATIONS => "cpu-migrations".into(),
            PERF_COUNT_SW_PAGE_FAULTS_MIN => "minor-faults".into(),
            PERF_COUNT_SW_PAGE_FAULTS_MAJ => "major-faults".into(),
            PERF_COUNT_SW_ALIGNMENT_FAULTS => "alignment-faults".into(),
            PERF_COUNT_SW_EMULATION_FAULTS => "emulation-faults".into(),
            PERF_COUNT_SW_CGROUP_SWITCHES => "cgroup-switches".into(),
            PERF_COUNT_SW_DUMMY => "dummy".into(),
            PERF_COUNT_SW_BPF_OUTPUT => "bpf-output".into(),
            _ => "unknown-software".into(),
        },
        (PERF_TYPE_HARDWARE, 0) => "cycles".into(),
        (PERF_TYPE_HARDWARE, 1) => "instructions".into(),
        (t, c) => format!("{t}:{c:#x}"),
    }
}

pub(crate) fn ev_info(attr: &PerfEventAttr, name: Option<&str>) -> EvInfo {
    EvInfo {
        attr: *attr,
        info: RecordParseInfo::new(attr),
        name: name.map_or_else(|| default_event_name(attr), str::to_string),
    }
}

/// The whole dump of the file at `path` into `out`; `shown_path` is the
/// name perf would print after '@' (the path as given). Returns the counts.
pub fn dump(
    path: &Path,
    shown_path: &str,
    out: &mut impl Write,
    progress: &mut Progress,
) -> Result<Stats, CliError> {
    let (mut reader, file_len) = crate::input::open_input(path)?;
    // The trace section is not in the metadata: it is read in place after
    // the records.
    let meta = reader.metadata().clone();
    let mut evs: Vec<EvInfo> = meta
        .attrs
        .iter()
        .map(|a| ev_info(&a.attr, a.name.as_deref()))
        .collect();
    let mut d = records::Dumper::new(shown_path, &evs);
    let mut stats = Stats::new(evs.len());
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    buf.extend_from_slice(
        b"# To display the perf.data header info, please use --header/--header-only options.\n#\n",
    );
    loop {
        let rec: RawRecord<'_> = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                out.write_all(&buf).map_err(CliError::output)?;
                return Err(CliError::file(path, e));
            }
        };
        if rec.header.type_ == PERF_RECORD_HEADER_ATTR
            && let Some(Ok(UserRecord::HeaderAttr(h))) = rec.user_record()
        {
            // Pipe mode: events arrive as records.
            evs.push(ev_info(&h.attr, None));
            d.set_events(&evs);
            stats.grow(evs.len());
        }
        stats.count(&rec);
        d.record(&mut buf, &rec);
        if buf.len() >= 1 << 16 {
            out.write_all(&buf).map_err(CliError::output)?;
            buf.clear();
            progress.update(rec.location.file_offset, file_len);
        }
    }
    // A file cut short keeps its records but loses its feature sections:
    // the records are dumped, then the damage is the error.
    if let Some(e) = &meta.feature_error {
        out.write_all(&buf).map_err(CliError::output)?;
        out.flush().map_err(CliError::output)?;
        return Err(CliError::file(path, e));
    }
    if let Some(section) = reader.trace_section() {
        out.write_all(&buf).map_err(CliError::output)?;
        buf.clear();
        let section = section.map_err(|e| CliError::file(path, e))?;
        if let Err(e) = records::dump_aux_section(&mut buf, &section, out) {
            // The chunks before the damage are shown, then the error.
            out.write_all(&buf).map_err(CliError::output)?;
            out.flush().map_err(CliError::output)?;
            return Err(match e {
                records::DumpError::Cli(e) => e,
                records::DumpError::Section(e) => CliError::file(path, e),
                records::DumpError::Read(at, e) => CliError::file(
                    path,
                    format!("reading the trace section at file offset {at:#x}: {e}"),
                ),
            });
        }
    }
    stats.write(&mut buf, &evs);
    out.write_all(&buf).map_err(CliError::output)?;
    out.flush().map_err(CliError::output)?;
    progress.done();
    Ok(stats)
}
