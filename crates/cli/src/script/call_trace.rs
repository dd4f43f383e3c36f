//! `perfaux script --call-trace`: the trace section's decode windows, each
//! read from the file in bounded pieces and decoded lazily, merged by time.
//!
//! Memory: per window, one pending line, the decoder's state and one piece
//! of its bytes; the pieces share [`MERGE_BUDGET`] (each between
//! perfaux-swtrace's `MIN_PIECE` and [`MAX_PIECE`]), and at most
//! [`MAX_MERGED_WINDOWS`] windows are merged, whatever the file says. The
//! decoders' own state shares budgets too: untimed events held for their
//! times ([`HELD_BUDGET`]) and ids of open calls ([`FRAME_BUDGET`]), so that
//! neither grows with the number of windows times each decoder's bound.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;

use perfaux_perfdata::trace_reader::{SectionSource, TraceSection};
use perfaux_perfdata::trace_section::ChunkKind;
use perfaux_swtrace::decode::{Decoder, Event as TraceEvent, MIN_FRAMES, MIN_PIECE};
use perfaux_swtrace::{CallTrace, CallTraceOptions};

use super::Script;
use crate::error::CliError;

/// Bytes of trace the merge holds, shared by its windows.
pub(crate) const MERGE_BUDGET: usize = 8 << 20;
/// The most bytes of one window held at a time.
pub(crate) const MAX_PIECE: usize = 1 << 20;
/// The most windows merged: each holds its decoder and a pending line.
pub(crate) const MAX_MERGED_WINDOWS: usize = 16 * 1024;
/// Untimed events the merge's decoders hold at once, shared (each window at
/// least [`MIN_HELD`], at most perfaux-swtrace's `MAX_HELD`), each a decoded
/// event of a few tens of bytes. Past its share a window's untimed events keep the time
/// before them instead of being spread to the next timed one.
pub(crate) const HELD_BUDGET: usize = 1 << 18;
/// The least a window's share of [`HELD_BUDGET`] is.
const MIN_HELD: usize = 16;
/// Ids of open calls the merge's decoders keep, shared (each window at least
/// perfaux-swtrace's `MIN_FRAMES`, at most `MAX_FRAMES`): 8 bytes each, 16 MiB.
pub(crate) const FRAME_BUDGET: usize = 1 << 21;

/// One window of the trace being decoded: its decoder and call-trace state.
pub(super) struct WindowLines<'a> {
    dec: Decoder<'a>,
    /// The event after the one being formatted, read ahead.
    peeked: Option<TraceEvent>,
    ct: CallTrace<'a>,
    /// What the window's final pause or stop says instead of
    /// `(paused)`/`(stopped)`, when the window ends otherwise.
    end_label: Option<&'static str>,
    /// Time and leading columns (up to the time's colon) of the last line,
    /// for a `tr end` of a window that ends with no stop packet.
    last: Option<(u64, String)>,
    /// The window's end has been printed.
    ended: bool,
}

impl<'a> WindowLines<'a> {
    pub(super) fn new(
        dec: Decoder<'a>,
        ct: CallTrace<'a>,
        end_label: Option<&'static str>,
    ) -> Self {
        WindowLines {
            dec,
            peeked: None,
            ct,
            end_label,
            last: None,
            ended: false,
        }
    }

    fn next_event(&mut self) -> Option<TraceEvent> {
        self.peeked.take().or_else(|| self.dec.next())
    }

    fn peek(&mut self) -> Option<&TraceEvent> {
        if self.peeked.is_none() {
            self.peeked = self.dec.next();
        }
        self.peeked.as_ref()
    }

    /// The window's next line and its time.
    pub(super) fn next_line(&mut self) -> Option<(u64, String)> {
        while let Some(ev) = self.next_event() {
            let Some(time) = ev.time() else {
                continue;
            };
            if let Some(mut line) = self.ct.line(&ev) {
                let last = self
                    .peek()
                    .is_none_or(|e| matches!(e, TraceEvent::Skipped { .. }));
                if let Some(label) = self.end_label
                    && last
                    && matches!(ev, TraceEvent::Paused { .. } | TraceEvent::Stopped { .. })
                    && let Some(at) = line.rfind(" (")
                {
                    line.truncate(at + 1);
                    line.push_str(label);
                    self.ended = true;
                }
                if let Some(colon) = line.find(": ") {
                    self.last = Some((time, line[..colon + 2].to_string()));
                }
                line.push('\n');
                return Some((time, line));
            }
        }
        // A window cut by a full area (TRUNCATED) ends with no stop packet:
        // its end is said all the same, at the last event's time.
        if self.end_label == Some("(truncated)")
            && !self.ended
            && let Some((time, head)) = self.last.take()
        {
            self.ended = true;
            return Some((time, format!("{head}tr end   (truncated)\n")));
        }
        None
    }
}

/// Decodes every window of the trace section into call-trace lines, merged
/// by time. Chunks of one event that continue each other (full trace) are
/// decoded as one stream (perfaux-swtrace's `Windows`), so calls that span
/// a chunk boundary keep their depth. Returns what stopped the trace short
/// (a bad chunk header, a read error, too many windows), after every line
/// the windows before it give.
pub(super) fn call_trace_lines(
    s: &Script,
    trace: &TraceSection<SectionSource>,
    owner: &HashMap<u64, (u32, Option<u32>)>,
    truncated: &HashSet<(u64, u64)>,
    out: &mut impl Write,
) -> Result<Option<String>, CliError> {
    let mut windows = Vec::new();
    let mut damage = None;
    for w in trace.windows() {
        match w {
            Ok(w) if windows.len() == MAX_MERGED_WINDOWS => {
                damage = Some(format!(
                    "perfaux trace section: more than {MAX_MERGED_WINDOWS} decode windows \
                     (chunk {} at file offset {:#x} starts one more); the call trace shows the first {MAX_MERGED_WINDOWS}",
                    w.first.index, w.first.header_offset
                ));
                break;
            }
            Ok(w) => windows.push(w),
            Err(e) => {
                damage = Some(e.to_string());
                break;
            }
        }
    }
    let piece = (MERGE_BUDGET / windows.len().max(1)).clamp(MIN_PIECE, MAX_PIECE);
    let held = (HELD_BUDGET / windows.len().max(1)).max(MIN_HELD);
    let frames = (FRAME_BUDGET / windows.len().max(1)).max(MIN_FRAMES);
    let mut streams: Vec<WindowLines<'_>> = windows
        .iter()
        .map(|w| {
            let h = &w.first.header;
            let (tid, cpu) = owner.get(&h.event_id).copied().unwrap_or((h.tid, None));
            let opts = CallTraceOptions {
                comm: s.comm_of_event(h.event_id, i64::from(tid as i32)),
                cpu: cpu.unwrap_or(0),
                returns: false,
                markers: false,
            };
            // How the window's last stop reads: a snapshot's end and a stop
            // where the AUX area filled (PERF_AUX_FLAG_TRUNCATED) are not
            // an aux_pause.
            let end_label = if truncated.contains(&(h.event_id, w.end())) {
                Some("(truncated)")
            } else if h.kind == ChunkKind::Snapshot {
                Some("(snapshot end)")
            } else {
                None
            };
            // A window smaller than its share holds no more than itself.
            let piece = piece.min(usize::try_from(w.len).unwrap_or(usize::MAX));
            let mut dec = Decoder::from_reader(trace.window_bytes(w), w.start(), piece);
            dec.limit(frames, held);
            WindowLines::new(dec, CallTrace::new(&s.probes, opts), end_label)
        })
        .collect();
    // A k-way merge by (time, window): the order a sort of every line by
    // time would give (ties in window order), one pending line per window.
    let mut heap = BinaryHeap::new();
    for (i, w) in streams.iter_mut().enumerate() {
        if let Some((t, line)) = w.next_line() {
            heap.push(Reverse((t, i, line)));
        }
    }
    while let Some(Reverse((_, i, line))) = heap.pop() {
        out.write_all(line.as_bytes()).map_err(CliError::output)?;
        if let Some((t, line)) = streams[i].next_line() {
            heap.push(Reverse((t, i, line)));
        }
    }
    // A window whose bytes could not all be read ended early: said after
    // the lines it gave (the first such, unless the headers were bad).
    for (w, st) in windows.iter().zip(&mut streams) {
        if let Some(e) = st.dec.take_error() {
            damage.get_or_insert_with(|| {
                format!(
                    "reading the trace window of chunk {} (file offset {:#x}): {e}",
                    w.first.index, w.first.data_offset
                )
            });
        }
    }
    Ok(damage)
}
