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
///
/// A call's line is written by hand into the caller's buffer
/// ([`CallTrace::write_line`]): the columns before the time are kept for
/// the thread, the names looked up once per probe, the numbers written
/// digit by digit. (Through `format!` a line cost as much as uftrace's
/// replay of one.)
#[derive(Clone, Debug)]
pub struct CallTrace<'t> {
    table: &'t ProbeTable,
    options: CallTraceOptions,
    tid: u32,
    last_time: u64,
    /// `comm tid [cpu] ` of the current thread.
    head: Vec<u8>,
    /// The tid `head` was made for (`None`: not made yet).
    head_tid: Option<u32>,
    /// Names of probe ids below [`NAME_CACHE`], looked up on first use.
    names: Vec<Option<&'t str>>,
}

/// Probe ids whose names [`CallTrace`] keeps at hand (larger ids are looked
/// up in the table each time): the cache stays small whatever a file says.
const NAME_CACHE: u32 = 1 << 16;

/// The most indentation levels a line shows (4 spaces each).
const MAX_INDENT: u32 = 1024;

/// `v` in decimal, appended.
#[inline]
fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// `sec.nsec` of a time in ns, nine digits after the point.
#[inline]
pub fn push_time(out: &mut Vec<u8>, time: u64) {
    push_u64(out, time / 1_000_000_000);
    let mut ns = time % 1_000_000_000;
    let mut digits = [b'.', 0, 0, 0, 0, 0, 0, 0, 0, 0];
    for d in digits[1..].iter_mut().rev() {
        *d = b'0' + (ns % 10) as u8;
        ns /= 10;
    }
    out.extend_from_slice(&digits);
}

/// `fmt::Write` into a byte buffer, for the rare lines that `write!` formats.
struct HeadWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for HeadWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
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
            head: Vec::new(),
            head_tid: None,
            names: Vec::new(),
        }
    }

    /// The line's columns up to its body, appended: `comm tid [cpu]
    /// sec.nsec: `, the time as `~sec.nsec` when `approx` (interpolated,
    /// sparse timing).
    #[inline]
    fn push_prefix(&mut self, out: &mut Vec<u8>, time: u64, approx: bool) {
        if self.head_tid != Some(self.tid) {
            self.head.clear();
            let _ = write!(
                HeadWriter(&mut self.head),
                "{:>16} {:>6} [{:03}] ",
                self.options.comm,
                self.tid,
                self.options.cpu
            );
            self.head_tid = Some(self.tid);
        }
        out.extend_from_slice(&self.head);
        if approx {
            out.push(b'~');
        }
        push_time(out, time);
        out.extend_from_slice(b": ");
    }

    /// The name of probe `id`, or `[unknown probe N]`, appended.
    #[inline]
    fn push_name(&mut self, out: &mut Vec<u8>, id: u32) {
        let name = if id < NAME_CACHE {
            let i = id as usize;
            if i >= self.names.len() {
                self.names.resize(i + 1, None);
            }
            if self.names[i].is_none() {
                self.names[i] = self.table.name(id);
            }
            self.names[i]
        } else {
            self.table.name(id)
        };
        match name {
            Some(n) => out.extend_from_slice(n.as_bytes()),
            None => {
                let _ = write!(HeadWriter(out), "[unknown probe {id}]");
            }
        }
    }

    /// The line for `event`, or `None` when the options leave it out.
    pub fn line(&mut self, event: &Event) -> Option<String> {
        let mut out = Vec::new();
        self.write_line(event, &mut out)?;
        // Every piece of the line is a `str`'s bytes or ASCII.
        Some(
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }

    /// Appends the line for `event` (without its newline) to `out` and
    /// returns the length of its columns before the body (up to the
    /// time's `: `), or `None` (nothing appended) when the options leave
    /// it out. The bytes are those of [`CallTrace::line`].
    #[inline]
    pub fn write_line(&mut self, event: &Event, out: &mut Vec<u8>) -> Option<usize> {
        let start = out.len();
        match *event {
            Event::Enter {
                id,
                depth,
                time,
                interpolated,
                ..
            } => {
                self.last_time = time;
                self.push_prefix(out, time, interpolated);
                let head = out.len() - start;
                out.resize(out.len() + 4 * depth.min(MAX_INDENT) as usize, b' ');
                self.push_name(out, id);
                Some(head)
            }
            Event::Exit {
                id,
                depth,
                time,
                interpolated,
                ..
            } => {
                self.last_time = time;
                if !self.options.returns {
                    return None;
                }
                self.push_prefix(out, time, interpolated);
                let head = out.len() - start;
                out.resize(out.len() + 4 * depth.min(MAX_INDENT) as usize, b' ');
                out.extend_from_slice(b"return ");
                match id {
                    Some(id) => self.push_name(out, id),
                    None => out.extend_from_slice(b"[unknown]"),
                }
                Some(head)
            }
            _ => {
                let (time, body) = self.other_line(event)?;
                self.push_prefix(out, time, false);
                let head = out.len() - start;
                out.extend_from_slice(body.as_bytes());
                Some(head)
            }
        }
    }

    /// The time and body of a line that is no call's enter or return.
    fn other_line(&mut self, event: &Event) -> Option<(u64, String)> {
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
            Event::Enter { .. } | Event::Exit { .. } => return None,
            Event::Paused { time, .. } => (*time, String::from("tr end   (paused)")),
            Event::Resumed { time, .. } => (*time, String::from("tr strt  (resumed)")),
            Event::Stopped { time, .. } => (*time, String::from("tr end   (stopped)")),
            Event::Lost {
                kind, count, time, ..
            } => {
                // The depth note is said whatever the options (the returns it leaves
                // unnamed need it), and so is a full AUX area's gap: the trace resumes after
                // it, so without the line the calls before and after would read as one run.
                if !self.options.markers && !matches!(kind, LostKind::Depth | LostKind::Full) {
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
            // A span's id, with the markers: which polls are one async span.
            Event::Tag { depth, value, .. } => {
                if !self.options.markers {
                    return None;
                }
                (
                    self.last_time,
                    format!("tag {value} (the call at depth {depth})"),
                )
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
        Some((time, body))
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
