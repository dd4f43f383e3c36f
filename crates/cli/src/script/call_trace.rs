//! `perfaux script --call-trace`: the trace section's decode windows, each
//! read from the file in bounded pieces and decoded lazily, merged by time.
//!
//! Memory: per window, one pending line, the decoder's state and one piece
//! of its bytes; the pieces share [`MERGE_BUDGET`] (each between
//! perfaux-swtrace's `MIN_PIECE` and [`MAX_PIECE`]), at most
//! [`MAX_MERGED_WINDOWS`] windows are decoded at once (each from its first
//! line's time to its last), and at most [`MAX_WINDOWS`] make the trace,
//! whatever the file says. The
//! decoders' own state shares budgets too: untimed events held for their
//! times ([`HELD_BUDGET`]) and ids of open calls ([`FRAME_BUDGET`]), so that
//! neither grows with the number of windows times each decoder's bound.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;

use perfaux_perfdata::trace_reader::{SectionSource, TraceSection};
use perfaux_perfdata::trace_section::ChunkKind;
use perfaux_swtrace::decode::{Decoder, Event as TraceEvent, MIN_FRAMES, MIN_PIECE};
use perfaux_swtrace::window::SnapshotEnds;
use perfaux_swtrace::{CallTrace, CallTraceOptions, ProbeTable};

use super::Script;
use crate::error::CliError;

/// Bytes of trace the merge holds, shared by its windows.
pub(crate) const MERGE_BUDGET: usize = 8 << 20;
/// The most bytes of one window held at a time.
pub(crate) const MAX_PIECE: usize = 1 << 20;
/// The most windows decoded at once (those whose time spans overlap): each
/// holds its decoder and a pending line.
pub(crate) const MAX_MERGED_WINDOWS: usize = 16 * 1024;
/// The most windows a call trace is made of: each is kept, undecoded, as
/// its first chunk's entry and its first line's time (a hundred bytes or so)
/// until its time comes.
pub(crate) const MAX_WINDOWS: usize = 1 << 18;
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
    /// The window's pending line, with its newline: one buffer, reused.
    line: Vec<u8>,
    /// Time and leading columns (up to the time's colon) of the last line,
    /// for a `tr end` of a window that ends with no stop packet.
    last: Option<u64>,
    last_head: Vec<u8>,
    /// The window's end has been printed.
    ended: bool,
    /// uftrace replay's layout instead of perf's (`script --call-trace --replay`).
    replay: Option<Replay<'a>>,
    /// A snapshot overlapping its thread's one before it: the events of packets before
    /// this stream position were shown by that one (0: none).
    seen_end: u64,
}

/// What uftrace replay's layout needs of a window: its thread, the probe
/// names, and the enter times of its open calls for their returns'
/// durations.
pub(super) struct Replay<'a> {
    probes: &'a ProbeTable,
    tid: u32,
    /// (decoder depth, enter time) of the open calls, at most `MAX_FRAMES`
    /// (the outermost forgotten past it: their returns show no duration).
    open: Vec<(u32, u64)>,
}

impl<'a> Replay<'a> {
    pub(super) fn new(probes: &'a ProbeTable) -> Self {
        Replay {
            probes,
            tid: 0,
            open: Vec::new(),
        }
    }

    /// `DURATION [  TID] | ` then two spaces per level: uftrace replay's columns.
    fn head(&self, line: &mut Vec<u8>, duration: Option<u64>, depth: u32) {
        match duration {
            Some(ns) => push_duration(line, ns),
            None => line.extend_from_slice(b"           "),
        }
        let _ = write!(line, " [{:>6}] | ", self.tid);
        line.resize(line.len() + 2 * depth.min(1024) as usize, b' ');
    }

    fn name(&self, line: &mut Vec<u8>, id: Option<u32>) {
        match id.and_then(|id| self.probes.name(id).map(|n| (id, n))) {
            Some((_, n)) => line.extend_from_slice(n.as_bytes()),
            None => match id {
                Some(id) => {
                    let _ = write!(line, "[unknown probe {id}]");
                }
                None => line.extend_from_slice(b"[unknown]"),
            },
        }
    }
}

/// A duration as uftrace replay prints it: ` %3d.%03d unit` (11 bytes for
/// anything under 1000 s).
fn push_duration(line: &mut Vec<u8>, ns: u64) {
    let (div, unit) = match ns {
        0..1_000_000 => (1_000, "us"),
        1_000_000..1_000_000_000 => (1_000_000, "ms"),
        _ => (1_000_000_000, " s"),
    };
    let _ = write!(
        line,
        " {:>3}.{:03} {unit}",
        ns / div,
        (ns % div) * 1000 / div
    );
}

/// The header uftrace replay prints before its lines.
pub(super) const REPLAY_HEADER: &str = "# DURATION     TID     FUNCTION\n";

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
            line: Vec::new(),
            last: None,
            last_head: Vec::new(),
            ended: false,
            replay: None,
            seen_end: 0,
        }
    }

    /// Shows only the events of packets at or after `seen_end`: the window is a snapshot
    /// whose bytes before it were shown by its thread's snapshot before
    /// (perfaux-swtrace's `SnapshotEnds`). They are still decoded, for the depth and time
    /// of what follows; the thread a SYNC names is still taken in replay's layout.
    pub(super) fn after(mut self, seen_end: u64) -> Self {
        self.seen_end = seen_end;
        self
    }

    /// Lines in uftrace replay's layout.
    pub(super) fn replay(mut self, probes: &'a ProbeTable) -> Self {
        self.replay = Some(Replay::new(probes));
        self
    }

    /// The window's next line in uftrace replay's layout: a call that
    /// returns before any other event is one line (`name();` with its
    /// duration), others open (`name() {`) and close (`} /* name */`, the
    /// duration) their block; other events are comments.
    fn next_replay_line(&mut self) -> Option<u64> {
        while let Some(ev) = self.next_event() {
            let r = self.replay.as_mut()?;
            match ev {
                TraceEvent::Sync { tid, .. } => {
                    r.tid = tid;
                }
                TraceEvent::Enter {
                    id, depth, time, ..
                } => {
                    let leaf = match self.peek() {
                        Some(&TraceEvent::Exit {
                            depth: d, time: t, ..
                        }) if d == depth => Some(t),
                        _ => None,
                    };
                    let r = self.replay.as_mut()?;
                    match leaf {
                        Some(end) => {
                            self.peeked = None;
                            r.head(&mut self.line, Some(end.saturating_sub(time)), depth);
                            r.name(&mut self.line, Some(id));
                            self.line.extend_from_slice(b"();\n");
                        }
                        None => {
                            if r.open.len() >= perfaux_swtrace::decode::MAX_FRAMES {
                                r.open.remove(0);
                            }
                            r.open.push((depth, time));
                            r.head(&mut self.line, None, depth);
                            r.name(&mut self.line, Some(id));
                            self.line.extend_from_slice(b"() {\n");
                        }
                    }
                    return Some(time);
                }
                TraceEvent::Exit {
                    id, depth, time, ..
                } => {
                    while r.open.last().is_some_and(|&(d, _)| d > depth) {
                        r.open.pop();
                    }
                    let start = match r.open.last() {
                        Some(&(d, t)) if d == depth => {
                            r.open.pop();
                            Some(t)
                        }
                        _ => None,
                    };
                    r.head(&mut self.line, start.map(|t| time.saturating_sub(t)), depth);
                    self.line.extend_from_slice(b"} /* ");
                    r.name(&mut self.line, id);
                    self.line.extend_from_slice(b" */\n");
                    return Some(time);
                }
                ev => {
                    let Some(time) = ev.time() else { continue };
                    let mut text = Vec::new();
                    let Some(head) = self.ct.write_line(&ev, &mut text) else {
                        continue;
                    };
                    let r = self.replay.as_ref()?;
                    let depth = r.open.len() as u32;
                    r.head(&mut self.line, None, depth);
                    self.line.extend_from_slice(b"/* ");
                    self.line.extend_from_slice(&text[head..]);
                    self.line.extend_from_slice(b" */\n");
                    return Some(time);
                }
            }
        }
        None
    }

    #[inline]
    fn next_event(&mut self) -> Option<TraceEvent> {
        self.peeked.take().or_else(|| self.decoded())
    }

    fn peek(&mut self) -> Option<&TraceEvent> {
        if self.peeked.is_none() {
            self.peeked = self.decoded();
        }
        self.peeked.as_ref()
    }

    /// The decoder's next event not shown already ([`WindowLines::after`]).
    #[inline]
    fn decoded(&mut self) -> Option<TraceEvent> {
        loop {
            let ev = self.dec.next()?;
            if self.seen_end == 0 || ev.offset() >= self.seen_end {
                return Some(ev);
            }
            if let (TraceEvent::Sync { tid, .. }, Some(r)) = (&ev, self.replay.as_mut()) {
                r.tid = *tid;
            }
        }
    }

    /// The pending line ([`WindowLines::next_line`]'s), with its newline.
    pub(super) fn line(&self) -> &[u8] {
        &self.line
    }

    /// Makes the window's next line (in [`WindowLines::line`]) and returns
    /// its time.
    pub(super) fn next_line(&mut self) -> Option<u64> {
        self.line.clear();
        if self.replay.is_some() {
            return self.next_replay_line();
        }
        while let Some(ev) = self.next_event() {
            let Some(time) = ev.time() else {
                continue;
            };
            let Some(head) = self.ct.write_line(&ev, &mut self.line) else {
                continue;
            };
            if matches!(ev, TraceEvent::Paused { .. } | TraceEvent::Stopped { .. })
                && let Some(label) = self.end_label
                && self
                    .peek()
                    .is_none_or(|e| matches!(e, TraceEvent::Skipped { .. }))
                && let Some(at) = self.line.windows(2).rposition(|w| w == b" (")
            {
                self.line.truncate(at + 1);
                self.line.extend_from_slice(label.as_bytes());
                self.ended = true;
            }
            if self.end_label == Some("(truncated)") {
                self.last_head.clear();
                self.last_head.extend_from_slice(&self.line[..head]);
                self.last = Some(time);
            }
            self.line.push(b'\n');
            return Some(time);
        }
        // A window cut by a full area (TRUNCATED) ends with no stop packet:
        // its end is said all the same, at the last event's time.
        if self.end_label == Some("(truncated)")
            && !self.ended
            && let Some(time) = self.last.take()
        {
            self.ended = true;
            self.line.extend_from_slice(&self.last_head);
            self.line.extend_from_slice(b"tr end   (truncated)\n");
            return Some(time);
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
///
/// A window is decoded only from its first line's time to its last: a
/// recording of a hundred thousand threads made one after another holds as
/// many windows, of which a few overlap in time. So the windows' first times
/// are found first (a piece of each decoded, one at a time), and the merge
/// opens each window when the time comes and drops it at its end.
pub(super) fn call_trace_lines(
    s: &Script,
    trace: &TraceSection<SectionSource>,
    owner: &HashMap<u64, (u32, Option<u32>)>,
    truncated: &HashSet<(u64, u64)>,
    replay: bool,
    out: &mut impl Write,
) -> Result<Option<String>, CliError> {
    let mut windows = Vec::new();
    let mut damage = None;
    for w in trace.windows() {
        match w {
            Ok(w) if windows.len() == MAX_WINDOWS => {
                damage = Some(format!(
                    "perfaux trace section: more than {MAX_WINDOWS} decode windows \
                     (chunk {} at file offset {:#x} starts one more); the call trace shows the first {MAX_WINDOWS}",
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
    // Shares of the budgets for as many windows as may be open at once.
    let open_at_most = windows.len().clamp(1, MAX_MERGED_WINDOWS);
    let piece = (MERGE_BUDGET / open_at_most).clamp(MIN_PIECE, MAX_PIECE);
    let held = (HELD_BUDGET / open_at_most).max(MIN_HELD);
    let frames = (FRAME_BUDGET / open_at_most).max(MIN_FRAMES);
    let mut snapshot_ends = SnapshotEnds::default();
    let seen_ends: Vec<u64> = windows
        .iter()
        .map(|w| {
            if w.first.header.kind == ChunkKind::Snapshot {
                snapshot_ends.seen_end(w)
            } else {
                0
            }
        })
        .collect();
    let open = |i: usize, piece: usize| {
        let w = &windows[i];
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
        let w =
            WindowLines::new(dec, CallTrace::new(&s.probes, opts), end_label).after(seen_ends[i]);
        if replay { w.replay(&s.probes) } else { w }
    };
    // A window whose bytes could not all be read ended early: said after
    // the lines it gave (the first such, unless the headers were bad).
    let ended = |i: usize, st: &mut WindowLines<'_>, damage: &mut Option<String>| {
        if let Some(e) = st.dec.take_error() {
            let w = &windows[i];
            damage.get_or_insert_with(|| {
                format!(
                    "reading the trace window of chunk {} (file offset {:#x}): {e}",
                    w.first.index, w.first.data_offset
                )
            });
        }
    };
    // Each window's first line's time, in (time, window) order.
    let mut starts: Vec<(u64, usize)> = Vec::with_capacity(windows.len());
    for i in 0..windows.len() {
        let mut st = open(i, MIN_PIECE);
        match st.next_line() {
            Some(t) => starts.push((t, i)),
            None => ended(i, &mut st, &mut damage),
        }
    }
    starts.sort_unstable();
    if replay {
        out.write_all(REPLAY_HEADER.as_bytes())
            .map_err(CliError::output)?;
    }
    // A k-way merge by (time, window): the order a sort of every line by
    // time would give (ties in window order), one pending line per open
    // window. Each window formats its pending line into its own buffer:
    // nothing is allocated per line.
    let mut streams: HashMap<usize, WindowLines<'_>> = HashMap::new();
    let mut heap = BinaryHeap::new();
    let mut next = 0;
    loop {
        // The windows whose first line comes before every pending one.
        while let Some(&(t0, k)) = starts.get(next) {
            if heap.peek().is_some_and(|&Reverse(top)| top < (t0, k)) {
                break;
            }
            next += 1;
            if streams.len() == MAX_MERGED_WINDOWS {
                damage.get_or_insert_with(|| {
                    format!(
                        "perfaux trace section: more than {MAX_MERGED_WINDOWS} decode windows \
                         overlap in time (the window of chunk {} at file offset {:#x} is one \
                         more): the call trace leaves out those past them",
                        windows[k].first.index, windows[k].first.header_offset
                    )
                });
                continue;
            }
            let mut st = open(k, piece);
            match st.next_line() {
                Some(t) => {
                    heap.push(Reverse((t, k)));
                    streams.insert(k, st);
                }
                None => ended(k, &mut st, &mut damage),
            }
        }
        let Some(Reverse((_, i))) = heap.pop() else {
            break;
        };
        let Some(w) = streams.get_mut(&i) else {
            unreachable!("a window in the heap is open");
        };
        out.write_all(w.line()).map_err(CliError::output)?;
        // While this window's next line is not later than every other
        // window's pending one, nor than the next window's first, it goes
        // out at once (as the heap would pop it: ties go to the lower
        // window).
        let pending = heap.peek().map(|&Reverse(next)| next);
        let bound = match (pending, starts.get(next).copied()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut more = false;
        while let Some(t) = w.next_line() {
            if bound.is_none_or(|b| (t, i) < b) {
                out.write_all(w.line()).map_err(CliError::output)?;
            } else {
                heap.push(Reverse((t, i)));
                more = true;
                break;
            }
        }
        if !more && let Some(mut st) = streams.remove(&i) {
            ended(i, &mut st, &mut damage);
        }
    }
    Ok(damage)
}
