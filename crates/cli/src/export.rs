//! `perfaux export`: a recording in the formats viewers open (Perfetto,
//! Chrome trace-event JSON, the Firefox Profiler), by perfaux-view.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use perfaux_view::chrome::ChromeWriter;
use perfaux_view::firefox::FirefoxProfile;
use perfaux_view::perfetto::PerfettoWriter;
use perfaux_view::{Filter, walk};

use crate::error::CliError;
use crate::progress::{Counted, Progress, Watched, Written};
use crate::report::create;

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Perfetto's TracePacket protobuf (ui.perfetto.dev).
    Perfetto,
    /// Chrome trace-event JSON (chrome://tracing, Perfetto, speedscope).
    Chrome,
    /// The Firefox Profiler's processed profile (profiler.firefox.com).
    Firefox,
}

/// `perfaux export`'s options.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Input file name ('-': standard input).
    #[arg(short, long, default_value = "perf.data")]
    pub input: PathBuf,
    /// Output format.
    #[arg(short = 'F', long, value_enum)]
    pub format: Format,
    /// Output file name (default: trace.perfetto-trace, trace.json,
    /// profile.json).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Only these threads (comma-separated tids).
    #[arg(long, value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only threads with these names (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub comm: Vec<String>,
    /// Look for the recording's files under this directory (perf's --symfs).
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
}

/// Runs `perfaux export`, its progress (calls read, bytes written) shown through `progress`;
/// returns the file written and its size (an export of millions of calls is gigabytes: the
/// command says it).
pub fn export(args: &ExportArgs, progress: &mut Progress) -> Result<(PathBuf, u64), CliError> {
    let out = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(match args.format {
            Format::Perfetto => "trace.perfetto-trace",
            Format::Chrome => "trace.json",
            Format::Firefox => "profile.json",
        })
    });
    let filter = Filter {
        tids: args.tid.clone(),
        comms: args.comm.clone(),
    };
    let input = &args.input;
    let size = Written::default();
    let w = Counted::new(create(&out)?, size.clone());
    let written = write(args, input, filter, w, &out, progress, &size);
    progress.done();
    // What was written is no export of the recording (a filter that
    // matched nothing, a damaged input): no file is left to be taken for
    // one. Only a regular file: `-o /dev/null` stays.
    if written.is_err() && std::fs::symlink_metadata(&out).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::remove_file(&out);
    }
    written?;
    Ok((out, size.get()))
}

fn write(
    args: &ExportArgs,
    input: &Path,
    filter: Filter,
    w: Counted<std::io::BufWriter<std::fs::File>>,
    out: &Path,
    progress: &mut Progress,
    size: &Written,
) -> Result<(), CliError> {
    let werr = |e: std::io::Error| CliError::file(out, e);
    match args.format {
        Format::Perfetto => {
            let mut p = PerfettoWriter::new(w);
            walk_into(input, filter, args.symfs.as_deref(), &mut p, progress, size)?;
            p.finish().map_err(werr)?;
        }
        Format::Chrome => {
            let mut c = ChromeWriter::new(w).map_err(werr)?;
            walk_into(input, filter, args.symfs.as_deref(), &mut c, progress, size)?;
            c.finish().map_err(werr)?;
        }
        Format::Firefox => {
            let mut p = FirefoxProfile::new(&format!("perfaux: {}", input.display()));
            walk_into(input, filter, args.symfs.as_deref(), &mut p, progress, size)?;
            p.write(w).map_err(werr)?;
        }
    }
    Ok(())
}

/// Walks the recording into `sink`, its progress shown.
fn walk_into(
    input: &Path,
    filter: Filter,
    symfs: Option<&Path>,
    sink: &mut impl perfaux_view::Sink,
    progress: &mut Progress,
    size: &Written,
) -> Result<(), CliError> {
    let (sum, _) = crate::view_input::with_recording(input, filter, symfs, |rec| {
        let mut watched = Watched::new(sink, progress, Some(size.clone()));
        walk(rec, &mut watched).map_err(|e| CliError::file(input, e))
    })?;
    crate::view_input::say_notes("export", &sum);
    Ok(())
}
