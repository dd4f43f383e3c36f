//! A flight recorder bounded by time (`perfaux record -S --window 2s`): a snapshot keeps the
//! last N of each thread's trace, from its first packet at or after the snapshot's time less
//! N, with the thread's state there (open calls, time) stated by a SYNC made for the cut. The
//! AUX area's size stays the hard cap: an area that holds less than N gives all it holds.
//!
//! SYNCs are the trace's own restart points (swtrace writes one at least every `sync_period`
//! bytes, 512 by default, and at every resume), each with its time and the conversion of its
//! ticks to CLOCK_MONOTONIC. The cut starts at the newest SYNC at or before the threshold and
//! follows the packets from there: their deltas give each one's time, their ENTERs and EXITs
//! the open calls. At the first packet at or past the threshold the bytes before it are
//! dropped and a SYNC saying that state takes their place, so what is kept decodes from its
//! first byte as the whole would from there. (The design's alternative, SYNCs written at least
//! every N/8 of time, keeps up to N/8 more and costs the writer a clock compare per packet;
//! Go's flight recorder and JFR keep the whole generation or chunk that crosses.) Where the
//! segment cannot be followed (a packet that does not parse, frames the SYNC does not list,
//! no room before the cut for the new SYNC), the segment is kept whole from its SYNC, as
//! before. The bytes are the traced thread's: a candidate counts only if it parses as a SYNC
//! with its checksum, and its time is taken as it says.

use perfaux_swtrace::format::{
    MAX_SYNC, MAX_SYNC_FRAMES, Packet, SYNC_MAGIC, SyncHeader, encode_sync, parse_packet,
    parse_sync,
};

/// Most open calls the cut follows (deeper, it keeps the segment whole).
const MAX_FOLLOWED: usize = 4096;

/// Cuts `trace` (a snapshot's bytes, oldest first) for the window that starts at `cutoff_ns`:
/// returns the offset of what is kept, whose first bytes may be rewritten to the SYNC made for
/// the cut (module doc). 0 when everything is newer than the cutoff or no SYNC parses.
pub fn window_cut(trace: &mut [u8], cutoff_ns: u64) -> usize {
    let start = window_start(trace, cutoff_ns);
    match follow_to_cutoff(&trace[start..], cutoff_ns) {
        Some((at, sync, len)) if at >= len => {
            let at = start + at;
            trace[at - len..at].copy_from_slice(&sync[..len]);
            at - len
        }
        _ => start,
    }
}

/// From the SYNC that `segment` starts with, the first packet at or past `cutoff_ns` (or the
/// segment's end): its offset in `segment`, and the SYNC stating the state before it (bytes,
/// length). `None` when the segment cannot be followed.
fn follow_to_cutoff(segment: &[u8], cutoff_ns: u64) -> Option<(usize, [u8; MAX_SYNC], usize)> {
    let (sync, mut at) = parse_sync(segment).ok()?;
    if sync.conv.to_ns(sync.ticks) > cutoff_ns
        || sync.first as usize + sync.frames.len() != sync.depth as usize
    {
        return None;
    }
    let mut ticks = sync.ticks;
    // The outer calls whose ids are not known (below the SYNC's list), then the known ones.
    let mut unknown = sync.first;
    let mut open = sync.frames.clone();
    while at < segment.len() {
        let (packet, len) = parse_packet(&segment[at..]).ok()?;
        let delta = match packet {
            Packet::Enter { delta, .. }
            | Packet::Exit { delta }
            | Packet::Paused { delta }
            | Packet::Resumed { delta }
            | Packet::Stopped { delta }
            | Packet::Lost { delta, .. } => delta,
            // The next SYNC is past the cutoff (`window_start` took the newest before it).
            Packet::Sync(_) => return None,
            Packet::Pad | Packet::Tag { .. } => 0,
        };
        let t = ticks.checked_add(delta)?;
        if delta > 0 && sync.conv.to_ns(t) >= cutoff_ns {
            break;
        }
        ticks = t;
        match packet {
            Packet::Enter { id, .. } => {
                if open.len() >= MAX_FOLLOWED {
                    return None;
                }
                open.push(id);
            }
            // A return of a call the SYNC did not name.
            Packet::Exit { .. } if open.pop().is_none() => {
                unknown = unknown.checked_sub(1)?;
            }
            _ => {}
        }
        at += len;
    }
    // The first packet at or past the cutoff, or the segment's end (nothing in it is that new:
    // what is kept is the state, no packet).
    let n = open.len().min(MAX_SYNC_FRAMES);
    // The SYNC's fields are the thread's bytes: a depth near u32::MAX cannot grow.
    let depth = unknown.checked_add(u32::try_from(open.len()).ok()?)?;
    let header = SyncHeader {
        flags: sync.flags,
        tid: sync.tid,
        depth,
        first: depth - n as u32,
        ticks,
        conv: sync.conv,
    };
    let mut buf = [0u8; MAX_SYNC];
    let len = encode_sync(&mut buf, &header, &open[open.len() - n..]);
    Some((at.min(segment.len()), buf, len))
}

/// The offset in `trace` (a snapshot's bytes, oldest first) of the newest SYNC whose time is at
/// or before `cutoff_ns`; 0 when none is (everything is newer than the cutoff, or no SYNC
/// parses: the whole snapshot is kept).
pub fn window_start(trace: &[u8], cutoff_ns: u64) -> usize {
    let mut start = 0;
    let mut at = 0;
    while let Some(i) = find_magic(&trace[at..]) {
        let pos = at + i;
        if let Ok((sync, _)) = parse_sync(&trace[pos..]) {
            if sync.conv.to_ns(sync.ticks) > cutoff_ns {
                break;
            }
            start = pos;
        }
        at = pos + 1;
    }
    start
}

/// The first offset of the SYNC magic in `b`.
fn find_magic(b: &[u8]) -> Option<usize> {
    let first = SYNC_MAGIC[0];
    let mut at = 0;
    while let Some(i) = b[at..].iter().position(|&c| c == first) {
        let pos = at + i;
        if b[pos..].starts_with(&SYNC_MAGIC) {
            return Some(pos);
        }
        at = pos + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfaux_swtrace::format::{MAX_SYNC, SyncHeader, TimeConv, encode_sync};

    /// A SYNC of thread 7 at `ticks` (identity conversion), `depth` calls open, `frames` the
    /// innermost of them.
    fn sync(ticks: u64, depth: u32, frames: &[u32]) -> Vec<u8> {
        let mut buf = vec![0u8; MAX_SYNC];
        let h = SyncHeader {
            flags: 0,
            tid: 7,
            depth,
            first: depth - frames.len() as u32,
            ticks,
            conv: TimeConv::IDENTITY,
        };
        let n = encode_sync(&mut buf, &h, frames);
        buf.truncate(n);
        buf
    }

    /// A stream of SYNCs at `times` (ns, CLOCK_MONOTONIC ticks), each followed by 40 bytes of
    /// filler that holds a stray magic without a valid SYNC after it; and each SYNC's offset.
    fn stream(times: &[u64]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut at = Vec::new();
        for &t in times {
            at.push(out.len());
            out.extend_from_slice(&sync(t, 0, &[]));
            out.extend_from_slice(&SYNC_MAGIC);
            out.extend_from_slice(&[0x55; 32]);
        }
        (out, at)
    }

    #[test]
    fn the_cut_is_the_newest_sync_at_or_before_the_cutoff() {
        let (s, at) = stream(&[100, 200, 300, 400]);
        assert_eq!(window_start(&s, 250), at[1]);
        assert_eq!(window_start(&s, 300), at[2]);
        assert_eq!(window_start(&s, 1_000), at[3]);
        // Everything newer than the cutoff, or no SYNC at all: all is kept.
        assert_eq!(window_start(&s, 50), 0);
        assert_eq!(window_start(&[0x0A; 300], 1_000), 0);
        // A snapshot that starts mid-packet: the first whole SYNC counts.
        assert_eq!(window_start(&s[5..], 250), at[1] - 5);
    }

    /// A segment with calls open from before its SYNC (one unknown below the listed ones),
    /// nested calls and a tag, timed every 10 ticks (ns).
    fn calls() -> Vec<u8> {
        use perfaux_swtrace::format::{encode_enter, encode_exit, encode_tag};
        let mut out = sync(100, 2, &[5]);
        let mut put = |f: &dyn Fn(&mut [u8]) -> usize| {
            let mut b = [0u8; 32];
            let n = f(&mut b);
            out.extend_from_slice(&b[..n]);
        };
        put(&|b| encode_enter(b, 6, 10));
        put(&|b| encode_tag(b, 1 << 40));
        put(&|b| encode_enter(b, 7, 10));
        put(&|b| encode_exit(b, 10));
        put(&|b| encode_exit(b, 10));
        put(&|b| encode_enter(b, 8, 10));
        put(&|b| encode_exit(b, 10));
        put(&|b| encode_exit(b, 10));
        put(&|b| encode_exit(b, 10));
        put(&|b| encode_enter(b, 9, 10));
        out
    }

    /// Calls, returns and tags as (kind, id, depth, time), offsets left out.
    fn calls_of(bytes: &[u8]) -> Vec<(char, u64, u32, u64)> {
        use perfaux_swtrace::Event;
        perfaux_swtrace::decode(bytes)
            .into_iter()
            .filter_map(|e| match e {
                Event::Enter {
                    id, depth, time, ..
                } => Some(('>', u64::from(id), depth, time)),
                Event::Exit {
                    id, depth, time, ..
                } => Some(('<', id.map_or(0, u64::from), depth, time)),
                Event::Tag { depth, value, .. } => Some(('#', value, depth, 0)),
                _ => None,
            })
            .collect()
    }

    /// At every cutoff, what is kept decodes as the whole does from the first packet at or
    /// past the cutoff: the same calls, depths, ids (of calls open at the cut too) and times.
    #[test]
    fn the_cut_decodes_as_the_whole_from_its_first_packet_on() {
        let whole = calls();
        let all = calls_of(&whole);
        for cutoff in 90..=200u64 {
            let mut cut = whole.clone();
            let at = window_cut(&mut cut, cutoff);
            let kept = calls_of(&cut[at..]);
            // The whole's events from the first timed one at or past the cutoff (a tag goes
            // with the call before it).
            let from = all
                .iter()
                .position(|e| e.0 != '#' && e.3 >= cutoff)
                .unwrap_or(all.len());
            let want = if cutoff <= 100 {
                &all[..]
            } else {
                &all[from..]
            };
            assert_eq!(kept, want, "cutoff {cutoff}");
            let first_time = perfaux_swtrace::decode(&cut[at..])
                .first()
                .and_then(|e| e.time())
                .unwrap();
            assert!(
                first_time <= cutoff.max(100),
                "cutoff {cutoff}: {first_time}"
            );
        }
    }

    /// Bytes that cannot be followed keep the segment whole from its SYNC.
    #[test]
    fn a_segment_that_does_not_parse_is_kept_whole() {
        let mut bad = calls();
        let n = bad.len();
        bad[n - 2] = 0x7F;
        let start = window_cut(&mut bad, 195);
        assert_eq!(start, 0);
        assert_eq!(bad, {
            let mut b = calls();
            b[n - 2] = 0x7F;
            b
        });
    }

    /// A SYNC whose depth is the largest a u32 holds, followed by an ENTER: the cut cannot
    /// state a deeper one, so the segment is kept whole (no overflow, no panic).
    #[test]
    fn a_depth_that_cannot_grow_keeps_the_segment_whole() {
        use perfaux_swtrace::format::encode_enter;
        let mut t = sync(100, u32::MAX, &[]);
        let mut b = [0u8; 16];
        for _ in 0..3 {
            let k = encode_enter(&mut b, 5, 10);
            t.extend_from_slice(&b[..k]);
        }
        let whole = t.clone();
        assert_eq!(window_cut(&mut t, 125), 0);
        assert_eq!(t, whole);
    }
}
