//! The uevents a `uevent_aux` PMU logged, found for each PERF_RECORD_AUX:
//! the places of the trace section's uevent-log chunks, and their entries
//! read from the file when a record asks for them.

use std::collections::HashMap;

use perfaux_abi::consts::ext::UEVENT_MAX_SIZE;
use perfaux_perfdata::trace_reader::{ChunkEntry, SectionSource, TraceSection};
use perfaux_perfdata::trace_section::ChunkKind;

/// The most uevent-log chunks indexed (24 bytes each).
const MAX_UEVENT_LOGS: usize = 1 << 18;

/// Where one uevent-log chunk's bytes are.
#[derive(Clone, Copy)]
struct Place {
    aux_offset: u64,
    entry: ChunkEntry,
}

/// The uevent-log chunks of each AUX event, in file order.
#[derive(Default)]
pub(super) struct UeventLogs {
    by_event: HashMap<u64, Vec<Place>>,
}

impl UeventLogs {
    /// Walks the chunk headers once; returns the logs found and, if a
    /// chunk header was bad (or there were too many logs), what stopped
    /// the walk: the logs before it are kept.
    pub(super) fn index(t: &TraceSection<SectionSource>) -> (Self, Option<String>) {
        let mut logs = UeventLogs::default();
        let mut n = 0;
        for c in t.chunks() {
            let c = match c {
                Ok(c) => c,
                Err(e) => return (logs, Some(e.to_string())),
            };
            if c.header.kind != ChunkKind::UeventLog {
                continue;
            }
            if n == MAX_UEVENT_LOGS {
                let e = format!(
                    "perfaux trace section: more than {MAX_UEVENT_LOGS} uevent-log chunks \
                     (chunk {} at file offset {:#x}); the uevents of later ones are not shown",
                    c.index, c.header_offset
                );
                return (logs, Some(e));
            }
            n += 1;
            logs.by_event
                .entry(c.header.event_id)
                .or_default()
                .push(Place {
                    aux_offset: c.header.aux_offset,
                    entry: c,
                });
        }
        (logs, None)
    }

    /// The uevents logged into the AUX bytes `[offset, offset + size)` of
    /// event `id` (`{u32 type; u32 size; data; pad to 8}` each, see
    /// perfaux-core's pmus/uevent.rs); none when no chunk holds the range
    /// whole (an overwritten snapshot, for one). An entry that overruns the
    /// range, or is larger than a uevent can be, ends the list. A read error
    /// ends it too and is returned.
    pub(super) fn entries(
        &self,
        t: &TraceSection<SectionSource>,
        id: u64,
        offset: u64,
        size: u64,
    ) -> (Vec<(u32, Vec<u8>)>, Option<String>) {
        let mut v = Vec::new();
        let Some(p) = self.by_event.get(&id).and_then(|places| {
            places.iter().find(|p| {
                // File-controlled sizes: an end past u64 matches nothing.
                p.aux_offset <= offset
                    && p.aux_offset
                        .checked_add(p.entry.size)
                        .is_some_and(|e| offset.saturating_add(size) <= e)
            })
        }) else {
            return (v, None);
        };
        let c = &p.entry;
        let (mut at, end) = (offset - p.aux_offset, offset - p.aux_offset + size);
        let read = |at: u64, buf: &mut [u8]| -> Result<(), String> {
            match t.read_chunk(c, at, buf) {
                Ok(n) if n == buf.len() => Ok(()),
                Ok(n) => Err(format!(
                    "the uevent log at file offset {:#x} ends after {n} of {} bytes",
                    c.data_offset + at,
                    buf.len()
                )),
                Err(e) => Err(format!(
                    "reading the uevent log at file offset {:#x}: {e}",
                    c.data_offset + at
                )),
            }
        };
        while end - at >= 8 {
            let mut h = [0u8; 8];
            if let Err(e) = read(at, &mut h) {
                return (v, Some(e));
            }
            let ty = u32::from_le_bytes(h[..4].try_into().unwrap_or_default());
            let n = u32::from_le_bytes(h[4..].try_into().unwrap_or_default());
            if n > UEVENT_MAX_SIZE || u64::from(n) > end - at - 8 {
                break;
            }
            let mut data = vec![0u8; n as usize];
            if let Err(e) = read(at + 8, &mut data) {
                return (v, Some(e));
            }
            v.push((ty, data));
            at = (at + 8 + u64::from(n).next_multiple_of(8)).min(end);
        }
        (v, None)
    }
}
