//! `perfaux report` without -D: uftrace's report and graph for traces,
//! perf report's histogram for samples, flame graphs (perfaux-view).

use std::io::Write;
use std::path::Path;

use clap::Args;
use perfaux_view::report::{ReportOptions, write_report};
use perfaux_view::stats::Collector;
use perfaux_view::{Filter, walk};

use crate::error::CliError;

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
    let opts = ReportOptions {
        sort: args.sort.clone(),
        call_graph: args.call_graph,
    };
    opts.check().map_err(|e| CliError::msg(e.0))?;
    let mut c = Collector::default();
    let (sum, names) = crate::view_input::with_recording(input, args.filter(), |rec| {
        walk(rec, &mut c).map_err(|e| CliError::file(input, e))
    })?;
    c.finish();
    write_report(&c, &names, &sum, &opts, out).map_err(|e| CliError::msg(e.0))?;
    out.flush().map_err(CliError::output)
}
