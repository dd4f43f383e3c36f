//! A flight recorder bounded by time (`perfaux record -S --window 2s`): a snapshot keeps at
//! least the last N of each thread's trace, from the newest SYNC at or before the snapshot's
//! time less N (the segment that crosses the threshold is kept whole, as Go's flight recorder
//! keeps the generation that does and JFR the chunk). The AUX area's size stays the hard cap:
//! an area that holds less than N gives all it holds.
//!
//! SYNCs are the trace's own restart points (swtrace writes one at least every `sync_period`
//! bytes, 512 by default, and at every resume), each with its time and the conversion of its
//! ticks to CLOCK_MONOTONIC: a snapshot is cut only there, so what is kept decodes from its
//! first byte. The bytes are the traced thread's: a candidate counts only if it parses as a
//! SYNC with its checksum, and its time is taken as it says.

use perfaux_swtrace::format::{SYNC_MAGIC, parse_sync};

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

    /// A stream of SYNCs at `times` (ns, CLOCK_MONOTONIC ticks), each followed by 40 bytes of
    /// filler that holds a stray magic without a valid SYNC after it; and each SYNC's offset.
    fn stream(times: &[u64]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut at = Vec::new();
        for &t in times {
            let mut buf = vec![0u8; MAX_SYNC];
            let h = SyncHeader {
                flags: 0,
                tid: 7,
                depth: 0,
                first: 0,
                ticks: t,
                conv: TimeConv::IDENTITY,
            };
            let n = encode_sync(&mut buf, &h, &[]);
            at.push(out.len());
            out.extend_from_slice(&buf[..n]);
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
}
