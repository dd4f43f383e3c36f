//! Opening the perf.data to read: a path, or `-` for standard input as
//! perf takes it (`perf report -D -i - < FILE`). Standard input redirected
//! from a file is seekable and read like the file (either mode); a real
//! pipe carries a pipe-mode stream, read as one.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::Path;

use perfaux_perfdata::{PerfDataReader, ReaderOptions};

use crate::error::CliError;

/// The reader for `path`, and the input's length when it is known (for
/// progress).
pub fn open_input(path: &Path) -> Result<(PerfDataReader<BufReader<File>>, u64), CliError> {
    if path.as_os_str() == "-" {
        let mut f = File::open("/dev/stdin").map_err(|e| CliError::file(path, e))?;
        if f.stream_position().is_ok() {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let r = PerfDataReader::new(BufReader::with_capacity(64 * 1024, f))
                .map_err(|e| CliError::file(Path::new("<stdin>"), e))?;
            return Ok((r, len));
        }
        let r = PerfDataReader::from_stream(BufReader::with_capacity(64 * 1024, f), ReaderOptions::default())
            .map_err(|e| match e {
                perfaux_perfdata::Error::Unsupported { .. } => CliError::msg(
                    "<stdin>: a file-mode perf.data cannot be read from a pipe: use -i FILE or redirect it (-i - < FILE)",
                ),
                e => CliError::file(Path::new("<stdin>"), e),
            })?;
        return Ok((r, 0));
    }
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let r = PerfDataReader::open(path).map_err(|e| CliError::file(path, e))?;
    Ok((r, len))
}

/// perfaux's trace section of the file at `path`, located (its chunks are read in place, not
/// here), and the probe table stored in it (empty without a section or a table).
pub fn trace_and_probes(
    reader: &PerfDataReader<BufReader<File>>,
    path: &Path,
) -> Result<
    (
        Option<
            perfaux_perfdata::trace_reader::TraceSection<
                perfaux_perfdata::trace_reader::SectionSource,
            >,
        >,
        perfaux_swtrace::ProbeTable,
    ),
    CliError,
> {
    let trace = reader
        .trace_section()
        .transpose()
        .map_err(|e| CliError::file(path, e))?;
    let probes = match &trace {
        Some(t) if !t.probe_table().is_empty() => {
            perfaux_swtrace::ProbeTable::from_bytes(t.probe_table())
                .map_err(|e| CliError::file(path, format!("perfaux trace section: {e}")))?
        }
        _ => perfaux_swtrace::ProbeTable::default(),
    };
    Ok((trace, probes))
}
