//! Where a thread's full trace has a hole, for the recording's summary.
//!
//! When a thread's AUX area fills before the recorder drains it, the trace PMU ends the
//! transaction with PERF_AUX_FLAG_TRUNCATED and the writer drops what follows, counting it; once
//! the recorder has made room the trace resumes where it stopped with a LOST packet (the count)
//! and a SYNC (perfaux-pmus' swtrace module doc, "Full trace"). The file holds all of that, but
//! only a decoder finds it; perf's own summary says no more than "AUX data lost N times". Here
//! the recorder pairs each TRUNCATED record (its time: where the trace stops) with the first
//! packets of that thread's trace at the record's end (the LOST packets and the SYNC after them:
//! how many events were dropped, and where the trace starts again), so that the summary can say
//! which thread has no trace over which time span. Nothing else in the stream is decoded, and
//! the bytes are not trusted: a packet that does not parse ends the look with the end unknown.

use std::collections::{HashMap, VecDeque};

use perfaux_swtrace::format::{self, LostKind, Packet, PacketError};

/// Gaps listed one by one at most; later ones are only counted
/// ([`TraceGaps::unlisted`]), so that a recording that truncates over and over stays bounded.
pub const MAX_LISTED_GAPS: usize = 64;

/// Bytes looked at after a TRUNCATED record's end: the LOST packets and the SYNC that restart
/// the stream.
const LOOK: usize = format::MAX_SYNC + 2 * format::MAX_LOST;

/// A span of a thread's time with no trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceGap {
    /// The traced thread.
    pub tid: i32,
    /// When the trace stopped (the TRUNCATED record's time, CLOCK_MONOTONIC ns).
    pub from_ns: u64,
    /// When it started again (the SYNC after the gap); `None`: not in the recording (the
    /// thread or the recording ended first, or the bytes after the gap did not parse).
    pub to_ns: Option<u64>,
    /// Probe events (entries and returns) the writer dropped meanwhile, as its LOST packets
    /// say; `None` when the trace did not start again.
    pub dropped_events: Option<u64>,
}

/// A gap whose end is not known yet.
#[derive(Debug)]
struct Open {
    from_ns: u64,
    /// Stream position of the next byte to take from a chunk.
    at: u64,
    /// The bytes before `at` of a packet that the last chunk cut (fewer than [`LOOK`]).
    held: Vec<u8>,
    dropped: u64,
}

/// The gaps of a recording: listed, counted, and open ones per thread (oldest first).
#[derive(Debug, Default)]
pub(crate) struct TraceGaps {
    open: HashMap<i32, VecDeque<Open>>,
    listed: Vec<TraceGap>,
    unlisted: u64,
}

/// Open gaps kept per thread: the area may fill again before the recorder reads the bytes
/// after the last gap (several TRUNCATED records in one drain); past this, the oldest is
/// given up (its end unknown).
const MAX_OPEN: usize = 16;

/// What the bytes after a gap's end say.
enum Look {
    /// The SYNC that restarts the stream: its time, and the events dropped before it.
    Resumed(u64, u64),
    /// The chunk ends inside the packets: look on in the next one.
    Cut,
    /// Not a restart, or not in the recording.
    Unknown,
}

impl TraceGaps {
    /// A TRUNCATED record of thread `tid` at `time_ns`, whose transaction ends at stream
    /// position `end`.
    pub(crate) fn truncated(&mut self, tid: i32, time_ns: u64, end: u64) {
        let q = self.open.entry(tid).or_default();
        let oldest = (q.len() >= MAX_OPEN).then(|| q.pop_front()).flatten();
        q.push_back(Open {
            from_ns: time_ns,
            at: end,
            held: Vec::new(),
            dropped: 0,
        });
        if let Some(o) = oldest {
            self.close(tid, o, None);
        }
    }

    /// Full-trace bytes of thread `tid` at stream position `offset`: the ends of the gaps they
    /// hold.
    pub(crate) fn trace_bytes(&mut self, tid: i32, offset: u64, data: &[u8]) {
        let Some(mut q) = self.open.remove(&tid) else {
            return;
        };
        let end = offset.saturating_add(data.len() as u64);
        let mut keep = VecDeque::new();
        while let Some(mut o) = q.pop_front() {
            if o.at >= end {
                // Bytes before this gap's end (read after its record).
                keep.push_back(o);
                continue;
            }
            match look(&mut o, offset, data) {
                Look::Resumed(to, dropped) => self.close(tid, o, Some((to, dropped))),
                Look::Cut => keep.push_back(o),
                Look::Unknown => self.close(tid, o, None),
            }
        }
        if !keep.is_empty() {
            self.open.insert(tid, keep);
        }
    }

    /// The recording ended: gaps still open have no end in it. The gaps listed, in time
    /// order, and how many more there were.
    pub(crate) fn finish(mut self) -> (Vec<TraceGap>, u64) {
        let open: Vec<(i32, VecDeque<Open>)> = self.open.drain().collect();
        for (tid, q) in open {
            for o in q {
                self.close(tid, o, None);
            }
        }
        self.listed.sort_by_key(|g| (g.from_ns, g.tid));
        (self.listed, self.unlisted)
    }

    fn close(&mut self, tid: i32, o: Open, end: Option<(u64, u64)>) {
        if self.listed.len() >= MAX_LISTED_GAPS {
            self.unlisted += 1;
            return;
        }
        self.listed.push(TraceGap {
            tid,
            from_ns: o.from_ns,
            to_ns: end.map(|e| e.0),
            dropped_events: end.map(|e| e.1),
        });
    }
}

/// Reads the packets at gap `o`'s end in the chunk of `data` at stream position `offset` (which
/// ends after `o.at`): LOST packets, then the SYNC of the restart.
fn look(o: &mut Open, offset: u64, data: &[u8]) -> Look {
    if o.at < offset {
        // The bytes after the gap are not in the recording.
        return Look::Unknown;
    }
    let from = (o.at - offset) as usize;
    let take = data.len().saturating_sub(from).min(LOOK - o.held.len());
    let mut bytes = std::mem::take(&mut o.held);
    bytes.extend_from_slice(&data[from..from + take]);
    let mut pos = 0;
    loop {
        match format::parse_packet(&bytes[pos..]) {
            Ok((Packet::Lost { kind, count, .. }, n)) => {
                if kind == LostKind::Full {
                    o.dropped = o.dropped.saturating_add(count);
                }
                pos += n;
            }
            Ok((Packet::Sync(s), _)) => return Look::Resumed(s.conv.to_ns(s.ticks), o.dropped),
            Err(PacketError::Truncated { .. })
                if from + take == data.len() && bytes.len() - pos < LOOK =>
            {
                o.held = bytes[pos..].to_vec();
                o.at = offset + data.len() as u64;
                return Look::Cut;
            }
            _ => return Look::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use perfaux_swtrace::format::{SyncHeader, TimeConv};

    use super::*;

    /// The bytes the writer writes where a stopped trace starts again: LOST (full, `dropped`)
    /// and a SYNC at `ns` (a 1:1 clock).
    fn restart(dropped: u64, ns: u64) -> Vec<u8> {
        let mut b = vec![0u8; format::MAX_LOST + format::MAX_SYNC];
        let n = format::encode_lost(&mut b, LostKind::Full, dropped, 0);
        let conv = TimeConv {
            anchor_ticks: 0,
            anchor_ns: 0,
            mult: 1,
            shift: 0,
        };
        let h = SyncHeader {
            flags: 0,
            tid: 7,
            depth: 0,
            first: 0,
            ticks: ns,
            conv,
        };
        let m = format::encode_sync(&mut b[n..], &h, &[]);
        b.truncate(n + m);
        b
    }

    fn gap(tid: i32, from_ns: u64, to: Option<(u64, u64)>) -> TraceGap {
        TraceGap {
            tid,
            from_ns,
            to_ns: to.map(|t| t.0),
            dropped_events: to.map(|t| t.1),
        }
    }

    #[test]
    fn a_gap_ends_at_the_sync_after_its_truncated_record() {
        let mut g = TraceGaps::default();
        g.trace_bytes(1, 0, &[0; 100]);
        g.truncated(1, 500, 100);
        // Bytes before the gap's end, read after the record: the gap stays open.
        g.trace_bytes(1, 40, &[0; 60]);
        let mut after = restart(300, 900);
        after.extend_from_slice(&[0xff; 10]);
        g.trace_bytes(1, 100, &after);
        assert_eq!(g.finish(), (vec![gap(1, 500, Some((900, 300)))], 0));
    }

    #[test]
    fn gaps_found_in_one_chunk_and_across_chunks() {
        let mut g = TraceGaps::default();
        // The area filled twice before the recorder read the bytes after the first gap.
        let first = restart(10, 2000);
        g.truncated(3, 1000, 64);
        g.truncated(3, 3000, 64 + 200);
        let mut chunk = vec![0u8; 200];
        chunk[..first.len()].copy_from_slice(&first);
        g.trace_bytes(3, 64, &chunk);
        // The second restart's packets split between two chunks.
        let second = restart(20, 4000);
        let (a, b) = second.split_at(5);
        g.trace_bytes(3, 264, a);
        g.trace_bytes(3, 269, b);
        assert_eq!(
            g.finish(),
            (
                vec![
                    gap(3, 1000, Some((2000, 10))),
                    gap(3, 3000, Some((4000, 20)))
                ],
                0
            )
        );
    }

    #[test]
    fn bytes_that_are_no_restart_or_missing_leave_the_end_unknown() {
        let mut g = TraceGaps::default();
        g.truncated(1, 10, 100);
        g.trace_bytes(1, 100, &[0xee; 300]);
        g.truncated(2, 20, 100);
        // The bytes after the gap's end never came: the next chunk starts later.
        g.trace_bytes(2, 150, &restart(1, 30));
        g.truncated(3, 40, 0);
        assert_eq!(
            g.finish(),
            (
                vec![gap(1, 10, None), gap(2, 20, None), gap(3, 40, None)],
                0
            )
        );
    }

    #[test]
    fn past_the_listed_gaps_the_rest_are_counted() {
        let mut g = TraceGaps::default();
        for i in 0..(MAX_LISTED_GAPS as u64 + 5) {
            g.truncated(1, i, i * 100);
        }
        let (listed, unlisted) = g.finish();
        assert_eq!(listed.len(), MAX_LISTED_GAPS);
        assert_eq!(unlisted, 5);
    }
}
