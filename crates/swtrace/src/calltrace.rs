//! `perf script --call-trace` style output of decoded events.
//!
//! perf prints one line per call: `comm tid [cpu] sec.nsec: ` then the call depth as 4 spaces
//! per level (`+callindent`), then the symbol. Intel PT's PSB shows up as `psb offs: N`; the
//! trace boundaries as `tr end` / `tr strt`, like perf's flags for TIP.PGD and TIP.PGE. With
//! `returns` (perf's `--call-ret-trace`) returns get a line too, marked `return`. A call whose
//! time the writer did not measure (sparse timing, `WriterConfig::timing`) shows its
//! interpolated time as `~sec.nsec:`; the name stays the last field.

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

    /// `approx`: the time was interpolated (sparse timing), shown as `~sec.nsec:`.
    fn prefix(&self, time: u64, approx: bool) -> String {
        format!(
            "{:>16} {:>6} [{:03}] {}{}.{:09}: ",
            self.options.comm,
            self.tid,
            self.options.cpu,
            if approx { "~" } else { "" },
            time / 1_000_000_000,
            time % 1_000_000_000
        )
    }

    /// The line for `event`, or `None` when the options leave it out.
    pub fn line(&mut self, event: &Event) -> Option<String> {
        let indent = |depth: u32| " ".repeat(4 * depth.min(1024) as usize);
        let approx = matches!(
            event,
            Event::Enter {
                interpolated: true,
                ..
            } | Event::Exit {
                interpolated: true,
                ..
            }
        );
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
                // The depth note is said whatever the options: the returns it leaves
                // unnamed need it.
                if !self.options.markers && *kind != LostKind::Depth {
                    return None;
                }
                let text = match kind {
                    LostKind::Nested => {
                        format!("lost {count} probe events (signal handler hit a packet)")
                    }
                    LostKind::Full => format!("lost {count} probe events (AUX area full)"),
                    LostKind::Depth => format!(
                        "lost the ids of {count} outer open calls (more than {} open in one \
                         window; their returns show as [unknown])",
                        crate::decode::MAX_FRAMES
                    ),
                };
                (*time, text)
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
                    SkipReason::Gap => String::from("missing from the recording"),
                };
                (
                    self.last_time,
                    format!("skipped {bytes} bytes at offset {offset:#x} ({why})"),
                )
            }
        };
        self.last_time = time;
        Some(format!("{}{}", self.prefix(time, approx), body))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::ProbeInfo;

    fn table() -> ProbeTable {
        let info = |id: u32, name: &str| ProbeInfo {
            id,
            name: name.into(),
            addr: 0,
            file: String::new(),
            line: 0,
        };
        ProbeTable::from_entries([info(1, "main"), info(2, "parse")])
    }

    #[test]
    fn lines_follow_perf_script_call_trace() {
        // perf script --call-trace: "comm tid [cpu] sec.nsec: " + 4 spaces per depth + symbol
        // (perf's +callindent); PSB as "psb offs: N" (seed 003's output).
        let t = table();
        let mut ct = CallTrace::new(
            &t,
            CallTraceOptions {
                comm: "uname".into(),
                ..Default::default()
            },
        );
        let events = [
            Event::Sync {
                offset: 0,
                tid: 30805,
                depth: 0,
                time: 24_001_058_784_424,
            },
            Event::Enter {
                offset: 60,
                id: 1,
                depth: 0,
                time: 24_001_058_784_629,
                interpolated: false,
            },
            Event::Enter {
                offset: 62,
                id: 2,
                depth: 1,
                time: 24_001_058_784_629,
                interpolated: false,
            },
            Event::Exit {
                offset: 64,
                id: Some(2),
                depth: 1,
                time: 24_001_058_784_838,
                interpolated: false,
            },
            Event::Enter {
                offset: 66,
                id: 9,
                depth: 1,
                time: 24_001_058_785_046,
                interpolated: false,
            },
            Event::Paused {
                offset: 68,
                time: 24_001_058_785_639,
            },
        ];
        let text = ct.format(&events);
        let want = "           uname  30805 [000] 24001.058784424: psb offs: 0\n\
                    \x20          uname  30805 [000] 24001.058784629: main\n\
                    \x20          uname  30805 [000] 24001.058784629:     parse\n\
                    \x20          uname  30805 [000] 24001.058785046:     [unknown probe 9]\n\
                    \x20          uname  30805 [000] 24001.058785639: tr end   (paused)\n";
        assert_eq!(text, want);
        // --call-ret-trace style adds returns.
        let mut ct = CallTrace::new(
            &t,
            CallTraceOptions {
                returns: true,
                markers: false,
                ..Default::default()
            },
        );
        let text = ct.format(&events[..4]);
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(2).unwrap().ends_with(":     return parse"));
    }

    #[test]
    fn skipped_and_lost_lines_say_why() {
        let t = table();
        let mut ct = CallTrace::new(&t, CallTraceOptions::default());
        let s = ct
            .line(&Event::Skipped {
                offset: 16,
                bytes: 5,
                reason: SkipReason::NoSync,
            })
            .unwrap();
        assert!(
            s.ends_with("skipped 5 bytes at offset 0x10 (before the first sync)"),
            "{s}"
        );
        let l = ct
            .line(&Event::Lost {
                offset: 20,
                kind: LostKind::Full,
                count: 3,
                time: 5,
            })
            .unwrap();
        assert!(
            l.ends_with("0.000000005: lost 3 probe events (AUX area full)"),
            "{l}"
        );
    }

    #[test]
    fn interpolated_times_are_marked_and_the_name_stays_last() {
        let t = table();
        let mut ct = CallTrace::new(
            &t,
            CallTraceOptions {
                returns: true,
                ..Default::default()
            },
        );
        let timed = ct
            .line(&Event::Enter {
                offset: 0,
                id: 1,
                depth: 0,
                time: 1_000_000_005,
                interpolated: false,
            })
            .unwrap();
        let approx = ct
            .line(&Event::Exit {
                offset: 2,
                id: Some(1),
                depth: 0,
                time: 1_000_000_007,
                interpolated: true,
            })
            .unwrap();
        assert!(timed.contains("] 1.000000005: "), "{timed}");
        assert!(approx.contains("] ~1.000000007: return "), "{approx}");
        assert_eq!(
            approx.rsplit(' ').next(),
            timed.rsplit(' ').next(),
            "the probe's name is the last field of both"
        );
    }
}
