//! `perfaux script --call-trace` of an Intel PT recording: the calls perfaux-view decodes
//! from its trace (crates/view's `intel_pt`), one line each as the software trace's call trace
//! prints them (perf's `--call-trace` columns: `comm tid [cpu] sec.nsec:`, four spaces a
//! level, the function), and with `--call-ret-trace`'s `return` lines when asked.
//!
//! The lines come a thread at a time, each thread's in time order: the decode holds one
//! thread's trace at a time, so merging threads by time would hold every line.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use perfaux_view::{Call, LostKind, Names, Sink, ViewEvent, walk};

use crate::error::CliError;

struct Lines<'o, W> {
    out: &'o mut W,
    comms: HashMap<u32, String>,
    returns: bool,
    calls: u64,
}

impl<W: Write> Lines<'_, W> {
    fn head(&mut self, tid: u32, time: u64) -> std::io::Result<()> {
        let comm = self.comms.get(&tid).map_or("perfaux", String::as_str);
        write!(
            self.out,
            "{comm:>16} {tid:>6} [000] {}.{:09}: ",
            time / 1_000_000_000,
            time % 1_000_000_000
        )
    }

    fn call(&mut self, names: &Names, c: Call, what: &str) -> std::io::Result<()> {
        self.head(c.tid, c.time)?;
        let indent = 4 * c.depth.min(MAX_INDENT) as usize;
        writeln!(self.out, "{:indent$}{}{what}", "", names.name(c.func))
    }
}

/// The deepest indentation printed (deeper calls print at this depth).
const MAX_INDENT: u32 = 256;

impl<W: Write> Sink for Lines<'_, W> {
    fn event(&mut self, _names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm.to_owned());
            }
            ViewEvent::Lost {
                tid,
                time,
                kind: LostKind::SkippedBytes,
                count,
            } => {
                self.head(tid, time)?;
                writeln!(self.out, "[{count} trace bytes skipped: the flow was lost]")?;
            }
            _ => {}
        }
        Ok(())
    }

    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.calls += 1;
        self.call(names, c, "")
    }

    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        if self.returns {
            let what = if closed {
                " return (not in the trace)"
            } else {
                " return"
            };
            self.call(names, c, what)?;
        }
        Ok(())
    }
}

/// Prints the call trace of `path` if it is an Intel PT recording; `false` if it is not.
pub(super) fn pt_call_trace(
    path: &Path,
    returns: bool,
    out: &mut impl Write,
) -> Result<bool, CliError> {
    let mut lines = Lines {
        out,
        comms: HashMap::new(),
        returns,
        calls: 0,
    };
    let sum = crate::view_input::with_recording(path, perfaux_view::Filter::default(), |rec| {
        walk(rec, &mut lines)
            .map(|(s, _)| s)
            .map_err(|e| CliError::file(path, e))
    })?;
    Ok(sum.intel_pt)
}
