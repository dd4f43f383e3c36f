//! Decode windows: the runs of chunks of one AUX stream that continue each other, found in
//! one pass over the chunks without holding them.
//!
//! A recording hands out a thread's trace in chunks (one per PERF_RECORD_AUX, one per
//! snapshot). Chunks of one event that continue each other (full trace: each starts where the
//! one before ended) decode as one stream, so a call or a SYNC that spans a chunk boundary is
//! not lost; a chunk that does not continue the window (another event, a gap, a snapshot)
//! starts a new one. `perfaux script --call-trace`, the views and [`crate::decode_chunks`] all
//! group chunks with [`Windows`].

/// What the grouping needs to know of a chunk.
pub trait WindowChunk {
    /// The AUX event the chunk came from.
    fn event_id(&self) -> u64;
    /// The thread the event observed.
    fn tid(&self) -> u32;
    /// Stream position of the chunk's first byte.
    fn aux_offset(&self) -> u64;
    /// Number of bytes.
    fn size(&self) -> u64;
    /// Whether the chunk is full-trace data that a window may continue through (a snapshot
    /// is a window of its own).
    fn continues(&self) -> bool;
    /// Whether the chunk holds trace packets at all (a uevent log does not: it is passed
    /// over, and the chunks around it may still continue each other).
    fn is_trace(&self) -> bool;
}

/// A run of chunks that decode as one stream: its first chunk, how many trace chunks it
/// spans, and its length. Its bytes are those chunks' bytes one after another (the chunks
/// that are not trace in between left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window<C> {
    /// The first chunk.
    pub first: C,
    /// Trace chunks in the window, the first included.
    pub chunks: u64,
    /// Bytes in the window.
    pub len: u64,
}

impl<C: WindowChunk> Window<C> {
    /// Stream position of the window's first byte.
    pub fn start(&self) -> u64 {
        self.first.aux_offset()
    }

    /// Stream position just past the window's last byte.
    pub fn end(&self) -> u64 {
        self.first.aux_offset().wrapping_add(self.len)
    }

    fn takes(&self, c: &C) -> bool {
        self.first.continues()
            && c.continues()
            && c.event_id() == self.first.event_id()
            && c.tid() == self.first.tid()
            && c.aux_offset() == self.end()
    }
}

/// The windows of a stream of chunks, in the order of their first chunks. Items are
/// `Result`s so that a chunk reader's error passes through: the window before it comes
/// first, then the error, then the end.
pub struct Windows<I, C, E> {
    chunks: I,
    open: Option<Window<C>>,
    error: Option<E>,
    done: bool,
}

impl<I, C, E> Windows<I, C, E>
where
    I: Iterator<Item = Result<C, E>>,
    C: WindowChunk,
{
    /// Groups `chunks` (in recording order).
    pub fn new(chunks: impl IntoIterator<IntoIter = I>) -> Self {
        Windows {
            chunks: chunks.into_iter(),
            open: None,
            error: None,
            done: false,
        }
    }
}

impl<I, C, E> Iterator for Windows<I, C, E>
where
    I: Iterator<Item = Result<C, E>>,
    C: WindowChunk,
{
    type Item = Result<Window<C>, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return self.error.take().map(Err);
        }
        loop {
            let c = match self.chunks.next() {
                None => {
                    self.done = true;
                    return self.open.take().map(Ok);
                }
                Some(Err(e)) => {
                    self.done = true;
                    // The window before the damage is whole as far as it goes: it comes
                    // first, then the error.
                    return match self.open.take() {
                        Some(w) => {
                            self.error = Some(e);
                            Some(Ok(w))
                        }
                        None => Some(Err(e)),
                    };
                }
                Some(Ok(c)) => c,
            };
            if !c.is_trace() {
                continue;
            }
            match &mut self.open {
                Some(w) if w.takes(&c) => {
                    w.chunks += 1;
                    w.len = w.len.wrapping_add(c.size());
                }
                _ => {
                    let len = c.size();
                    let done = self.open.replace(Window {
                        first: c,
                        chunks: 1,
                        len,
                    });
                    if let Some(w) = done {
                        return Some(Ok(w));
                    }
                }
            }
        }
    }
}

/// Where consecutive snapshots of one AUX stream (an event's, on a thread) overlap.
///
/// An overwrite area snapshotted twice gives two windows whose bytes overlap where the later
/// one begins before the earlier one's end: the same packets at the same stream positions.
/// A reader decodes the later window whole (its first SYNC gives the depth and time of what
/// follows) and shows only the events of packets at or after the earlier one's end, so each
/// call is shown once. Holds one position per stream, whatever the windows say.
#[derive(Debug, Default)]
pub struct SnapshotEnds {
    ends: std::collections::HashMap<(u64, u32), u64>,
}

impl SnapshotEnds {
    /// Takes snapshot window `w` (in recording order); returns the stream position before
    /// which its events were already shown by the stream's snapshot before it, or 0 where
    /// the two do not overlap.
    pub fn seen_end<C: WindowChunk>(&mut self, w: &Window<C>) -> u64 {
        let stream = (w.first.event_id(), w.first.tid());
        match self.ends.insert(stream, w.end()) {
            Some(end) if w.start() < end => end,
            _ => 0,
        }
    }
}

/// A chunk of one thread's stream held in memory: `(stream position, bytes)`, as
/// [`crate::decode_chunks`] takes them.
impl WindowChunk for (u64, &[u8]) {
    fn event_id(&self) -> u64 {
        0
    }
    fn tid(&self) -> u32 {
        0
    }
    fn aux_offset(&self) -> u64 {
        self.0
    }
    fn size(&self) -> u64 {
        self.1.len() as u64
    }
    fn continues(&self) -> bool {
        true
    }
    fn is_trace(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct C {
        id: u64,
        off: u64,
        len: u64,
        snapshot: bool,
        log: bool,
    }

    impl WindowChunk for C {
        fn event_id(&self) -> u64 {
            self.id
        }
        fn tid(&self) -> u32 {
            1
        }
        fn aux_offset(&self) -> u64 {
            self.off
        }
        fn size(&self) -> u64 {
            self.len
        }
        fn continues(&self) -> bool {
            !self.snapshot
        }
        fn is_trace(&self) -> bool {
            !self.log
        }
    }

    fn c(id: u64, off: u64, len: u64) -> C {
        C {
            id,
            off,
            len,
            snapshot: false,
            log: false,
        }
    }

    fn spans(chunks: &[C]) -> Vec<(u64, u64, u64, u64)> {
        Windows::new(chunks.iter().map(|&c| Ok::<_, ()>(c)))
            .map(|w| w.unwrap())
            .map(|w| (w.first.id, w.start(), w.chunks, w.len))
            .collect()
    }

    #[test]
    fn continuing_chunks_of_one_event_join_and_anything_else_splits() {
        let mut snap = c(1, 30, 5);
        snap.snapshot = true;
        let mut log = c(1, 0, 100);
        log.log = true;
        let chunks = [
            c(1, 0, 10),
            log,
            c(1, 10, 10),
            c(2, 0, 4),
            c(1, 20, 5),
            c(1, 30, 5),
            snap,
            c(1, 35, 1),
        ];
        assert_eq!(
            spans(&chunks),
            vec![
                (1, 0, 2, 20),
                (2, 0, 1, 4),
                (1, 20, 1, 5),
                (1, 30, 1, 5),
                (1, 30, 1, 5),
                (1, 35, 1, 1),
            ]
        );
    }

    #[test]
    fn a_snapshot_overlapping_the_one_before_it_says_where_that_one_ended() {
        let snap = |id, off, len| Window {
            first: C {
                id,
                off,
                len,
                snapshot: true,
                log: false,
            },
            chunks: 1,
            len,
        };
        let mut ends = SnapshotEnds::default();
        assert_eq!(
            ends.seen_end(&snap(1, 0, 100)),
            0,
            "the first has none before it"
        );
        assert_eq!(ends.seen_end(&snap(1, 60, 100)), 100, "overlaps [60, 100)");
        assert_eq!(
            ends.seen_end(&snap(2, 100, 50)),
            0,
            "another event's stream"
        );
        assert_eq!(
            ends.seen_end(&snap(1, 160, 40)),
            0,
            "starts at the end: no overlap"
        );
        assert_eq!(ends.seen_end(&snap(1, 170, 40)), 200, "overlaps [170, 200)");
        assert_eq!(
            ends.seen_end(&snap(2, 120, 10)),
            150,
            "event 2 kept its own end"
        );
    }

    #[test]
    fn an_error_comes_after_the_window_before_it() {
        let items = vec![Ok(c(1, 0, 4)), Ok(c(1, 4, 4)), Err("bad"), Ok(c(1, 8, 4))];
        let got: Vec<_> = Windows::new(items).collect();
        assert_eq!(
            got,
            vec![
                Ok(Window {
                    first: c(1, 0, 4),
                    chunks: 2,
                    len: 8
                }),
                Err("bad")
            ]
        );
    }
}
