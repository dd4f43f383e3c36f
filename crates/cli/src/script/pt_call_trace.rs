//! `perfaux script --call-trace` of an Intel PT recording: the calls perfaux-view decodes
//! from its trace (crates/view's `intel_pt`), one line each as the software trace's call trace
//! prints them (perf's `--call-trace` columns but the CPU, which a thread's calls do not
//! carry here: `comm tid sec.nsec:`, four spaces a level, the function).
//!
//! Each thread's lines are in time order. A `--per-thread` recording's come a thread at a
//! time (merging them by time would hold every line); a CPU-wide recording's are merged by
//! time, as its buffers are decoded side by side.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use perfaux_swtrace::calltrace::push_time;
use perfaux_view::{Call, LostKind, Names, Sink, ViewEvent, walk};

use crate::error::CliError;

struct Lines<'o, W> {
    out: &'o mut W,
    comms: HashMap<u32, String>,
    /// `comm tid ` of each thread, made once (a line's columns are written as bytes:
    /// through `write!` its padding went a character at a time, most of the command's time).
    heads: HashMap<u32, Vec<u8>>,
    line: Vec<u8>,
}

impl<W: Write> Lines<'_, W> {
    fn head(&mut self, tid: u32, time: u64) {
        let comms = &self.comms;
        let head = self.heads.entry(tid).or_insert_with(|| {
            let comm = comms.get(&tid).map_or("perfaux", String::as_str);
            format!("{comm:>16} {tid:>6} ").into_bytes()
        });
        self.line.clear();
        self.line.extend_from_slice(head);
        push_time(&mut self.line, time);
        self.line.extend_from_slice(b": ");
    }

    fn call(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.head(c.tid, c.time);
        let indent = 4 * c.depth.min(MAX_INDENT) as usize;
        self.line.resize(self.line.len() + indent, b' ');
        self.line.extend_from_slice(names.name(c.func).as_bytes());
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }
}

/// The deepest indentation printed (deeper calls print at this depth).
const MAX_INDENT: u32 = 256;

impl<W: Write> Sink for Lines<'_, W> {
    fn event(&mut self, _names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm.to_owned());
                self.heads.remove(&tid);
            }
            ViewEvent::Lost {
                tid,
                time,
                kind: LostKind::SkippedBytes,
                count,
            } => {
                self.head(tid, time);
                let l = format!("[{count} trace bytes skipped: the flow was lost]\n");
                self.line.extend_from_slice(l.as_bytes());
                self.out.write_all(&self.line)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.call(names, c)
    }

    fn exit(&mut self, _: &Names, _: Call, _: bool) -> std::io::Result<()> {
        Ok(())
    }
}

/// Prints the call trace of `path` if it is an Intel PT recording; `false` if it is not.
pub(super) fn pt_call_trace(
    path: &Path,
    symfs: Option<&Path>,
    out: &mut impl Write,
) -> Result<bool, CliError> {
    let mut lines = Lines {
        out,
        comms: HashMap::new(),
        heads: HashMap::new(),
        line: Vec::new(),
    };
    let filter = perfaux_view::Filter::default();
    let sum = crate::view_input::with_recording(path, filter, symfs, |rec| {
        walk(rec, &mut lines)
            .map(|(s, _)| s)
            .map_err(|e| CliError::file(path, e))
    })?;
    crate::view_input::say_notes("script", &sum);
    Ok(sum.intel_pt)
}
