//! `perf script --call-trace` style output of decoded events.
//!
//! perf prints one line per call: `comm tid [cpu] sec.nsec: ` then the call depth as 4 spaces
//! per level (`+callindent`), then the symbol. Intel PT's PSB shows up as `psb offs: N`; the
//! trace boundaries as `tr end` / `tr strt`, like perf's flags for TIP.PGD and TIP.PGE. With
//! `returns` (perf's `--call-ret-trace`) returns get a line too, marked `return`.

use std::fmt::Write as _;

use crate::decode::{Event, SkipReason};
use crate::format::LostKind;
use crate::table::ProbeTable;

/// What goes around each line.
#[derive(Clone, Debug)]
pub struct CallTraceOptions {
    /// The command name column.
    pub comm: String,
    /// The cpu column (`[000]`).
    pub cpu: u32,
    /// Print returns as well as calls.
    pub returns: bool,
    /// Print SYNC, skip and lost lines.
    pub markers: bool,
}

impl Default for CallTraceOptions {
    fn default() -> CallTraceOptions {
        CallTraceOptions {
            comm: String::from("perfaux"),
            cpu: 0,
            returns: false,
            markers: true,
        }
    }
}

/// Formats events as call-trace lines.
#[derive(Clone, Debug)]
pub struct CallTrace<'t> {
    table: &'t ProbeTable,
    options: CallTraceOptions,
    tid: u32,
    last_time: u64,
}

fn probe_name(table: &ProbeTable, id: u32) -> String {
    match table.name(id) {
        Some(n) => n.to_owned(),
        None => format!("[unknown probe {id}]"),
    }
}

impl<'t> CallTrace<'t> {
    /// A formatter naming ids with `table`.
    pub fn new(table: &'t ProbeTable, options: CallTraceOptions) -> CallTrace<'t> {
        CallTrace {
            table,
            options,
            tid: 0,
            last_time: 0,
        }
    }

    fn prefix(&self, time: u64) -> String {
        format!(
            "{:>16} {:>6} [{:03}] {}.{:09}: ",
            self.options.comm,
            self.tid,
            self.options.cpu,
            time / 1_000_000_000,
            time % 1_000_000_000
        )
    }

    /// The line for `event`, or `None` when the options leave it out.
    pub fn line(&mut self, event: &Event) -> Option<String> {
        let indent = |depth: u32| " ".repeat(4 * depth.min(1024) as usize);
        let (time, body) = match event {
            Event::Sync {
                offset, tid, time, ..
            } => {
                self.tid = *tid;
                if !self.options.markers {
                    self.last_time = *time;
                    return None;
                }
                let offs = if *offset == 0 {
                    String::from("0")
                } else {
                    format!("{offset:#x}")
                };
                (*time, format!("psb offs: {offs}"))
            }
            Event::Enter {
                id, depth, time, ..
            } => (
                *time,
                format!("{}{}", indent(*depth), probe_name(self.table, *id)),
            ),
            Event::Exit {
                id, depth, time, ..
            } => {
                if !self.options.returns {
                    self.last_time = *time;
                    return None;
                }
                let name = id.map_or_else(
                    || String::from("[unknown]"),
                    |id| probe_name(self.table, id),
                );
                (*time, format!("{}return {name}", indent(*depth)))
            }
            Event::Paused { time, .. } => (*time, String::from("tr end   (paused)")),
            Event::Resumed { time, .. } => (*time, String::from("tr strt  (resumed)")),
            Event::Stopped { time, .. } => (*time, String::from("tr end   (stopped)")),
            Event::Lost {
                kind, count, time, ..
            } => {
                if !self.options.markers {
                    return None;
                }
                let why = match kind {
                    LostKind::Nested => "signal handler hit a packet",
                    LostKind::Full => "AUX area full",
                };
                (*time, format!("lost {count} probe events ({why})"))
            }
            Event::Skipped {
                offset,
                bytes,
                reason,
            } => {
                if !self.options.markers {
                    return None;
                }
                let why = match reason {
                    SkipReason::NoSync => String::from("before the first sync"),
                    SkipReason::Corrupt(e) => format!("corrupt: {e}"),
                    SkipReason::Truncated => String::from("window ends inside a packet"),
                };
                (
                    self.last_time,
                    format!("skipped {bytes} bytes at offset {offset:#x} ({why})"),
                )
            }
        };
        self.last_time = time;
        Some(format!("{}{}", self.prefix(time), body))
    }

    /// All lines for `events`, each ending in a newline.
    pub fn format(&mut self, events: &[Event]) -> String {
        let mut out = String::new();
        for e in events {
            if let Some(l) = self.line(e) {
                let _ = writeln!(out, "{l}");
            }
        }
        out
    }
}
