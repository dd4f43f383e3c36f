//! `perfaux report` without -D: uftrace's report and graph for traces,
//! perf report's histogram for samples, flame graphs (perfaux-view).

use std::fs::File;
use std::io::BufWriter;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use perfaux_view::flame::write_flame_graph;
use perfaux_view::flame_chart::FlameChart;
use perfaux_view::report::{ReportOptions, write_report};
use perfaux_view::stats::Collector;
use perfaux_view::{Filter, walk};

use crate::error::CliError;
use crate::progress::{Progress, Watched};

/// `perfaux report`'s options beyond -i and -D.
#[derive(Debug, Args, Clone, Default)]
pub struct ViewArgs {
    /// Sort keys, comma-separated: uftrace's for traces (total, self, call,
    /// avg, min, max, func), perf's for samples (comm, pid, tid, dso, sym).
    #[arg(short = 's', long, value_delimiter = ',')]
    pub sort: Vec<String>,
    /// Only these threads (comma-separated tids).
    #[arg(long, value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only threads with these names (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub comm: Vec<String>,
    /// Text output on stdout (perfaux has no TUI: this is the default).
    #[arg(long)]
    pub stdio: bool,
    /// The call tree with counts and times (uftrace graph) instead of the
    /// function table.
    #[arg(short = 'g', long = "call-graph")]
    pub call_graph: bool,
    /// Also write a flame graph (interactive SVG) of the calls, or of the
    /// samples when there are no traced calls.
    #[arg(long = "flame-graph", value_name = "SVG")]
    pub flame_graph: Option<PathBuf>,
    /// The flame graph weighs each call's wall time, waiting included, instead of its time
    /// on the CPU (the default where the recording has the kernel's context switches).
    #[arg(long = "wall-time")]
    pub wall_time: bool,
    /// Also write a flame chart (the stacks over time, per thread) as SVG.
    #[arg(long = "flame-chart", value_name = "SVG")]
    pub flame_chart: Option<PathBuf>,
    /// Look for the recording's files under this directory (perf's --symfs): its
    /// `/usr/lib/x.so` is `DIR/usr/lib/x.so`.
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
}

impl ViewArgs {
    /// The thread filter.
    pub fn filter(&self) -> Filter {
        Filter {
            tids: self.tid.clone(),
            comms: self.comm.clone(),
        }
    }
}

/// Runs `perfaux report` (no -D) on `input` into `out`.
pub fn report(input: &Path, args: &ViewArgs, out: &mut impl Write) -> Result<(), CliError> {
    report_with(input, args, out, &mut Progress::quiet())
}

/// [`report`], its progress (the calls read) shown through `progress`.
pub fn report_with(
    input: &Path,
    args: &ViewArgs,
    out: &mut impl Write,
    progress: &mut Progress,
) -> Result<(), CliError> {
    let opts = ReportOptions {
        sort: args.sort.clone(),
        call_graph: args.call_graph,
    };
    opts.check().map_err(|e| CliError::msg(e.to_string()))?;
    let mut c = Collector::default();
    let mut chart = args.flame_chart.as_ref().map(|_| FlameChart::default());
    let symfs = args.symfs.as_deref();
    let (sum, names) = crate::view_input::with_recording(input, args.filter(), symfs, |rec| {
        // The sinks are called directly, not through `dyn`: a call per
        // traced call, inlined into the pass.
        match chart.as_mut() {
            Some(ch) => walk(rec, &mut Watched::new((&mut c, ch), progress, None)),
            None => walk(rec, &mut Watched::new(&mut c, progress, None)),
        }
        .map_err(|e| CliError::file(input, e))
    })?;
    crate::view_input::say_notes("report", &sum);
    c.finish();
    if let Some(p) = &args.flame_graph {
        write_flame_graph(&c, &names, &sum, args.wall_time, create(p)?)
            .map_err(|e| CliError::file(p, e))?;
    }
    if let (Some(p), Some(ch)) = (&args.flame_chart, chart) {
        ch.write(&names, &sum, create(p)?)
            .map_err(|e| CliError::file(p, e))?;
    }
    let mut watched = WatchedOutput { out, error: None };
    if let Err(e) = write_report(&c, &names, &sum, &opts, &mut watched) {
        // An I/O error is known by its kind (a closed pipe is the reader's
        // choice), not from the view's text.
        return Err(match watched.error.take() {
            Some(io) => CliError::output(io),
            None => CliError::msg(e.to_string()),
        });
    }
    out.flush().map_err(CliError::output)
}

/// The output, keeping the I/O error it failed with for [`CliError::output`].
struct WatchedOutput<'a, W: Write> {
    out: &'a mut W,
    error: Option<std::io::Error>,
}

impl<W: Write> Write for WatchedOutput<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).inspect_err(|e| {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().inspect_err(|e| {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        })
    }
}

/// An output file, buffered.
pub fn create(p: &Path) -> Result<BufWriter<File>, CliError> {
    Ok(BufWriter::new(
        File::create(p).map_err(|e| CliError::file(p, e))?,
    ))
}
