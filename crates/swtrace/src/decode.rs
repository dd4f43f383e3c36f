//! The decoder: any window of a stream (a full-trace chunk, an AUX sample, an overwrite
//! snapshot that starts mid-packet) to events.
//!
//! The decoder scans for the first valid SYNC (magic, checksum and field constraints, see
//! [`crate::format`]), reports the bytes before it as [`Event::Skipped`], and decodes packet by
//! packet from there. A packet that does not parse loses the sync: the bytes up to the next
//! valid SYNC are skipped and reported with the reason. It never panics and always makes
//! progress, whatever the bytes; memory grows at most linearly with the input.
//!
//! Times are CLOCK_MONOTONIC nanoseconds. Depths count the open traced calls: an ENTER at depth
//! `d` is matched by the EXIT at depth `d`. Calls the window saw open at its first SYNC but whose
//! ids it does not know (the SYNC lists at most 16) exit with `id: None`.

use std::collections::VecDeque;

use crate::format::{self, LostKind, Packet, PacketError, SYNC_MAGIC};
use crate::stream_clock::StreamClock;

/// Why bytes were skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Stream positions missing between two chunks ([`decode_chunks`]): the data was lost
    /// (truncated AUX data) or never copied out.
    Gap,
    /// Before the first SYNC of the window.
    NoSync,
    /// A packet did not parse; decoding resumed at the next SYNC.
    Corrupt(PacketError),
    /// The window ends inside a packet.
    Truncated,
}

/// A decoded event. `offset` is the stream position of the packet's first byte (the window's
/// start position plus the index in the window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A SYNC: state is known from here.
    Sync {
        /// Stream position.
        offset: u64,
        /// Traced thread.
        tid: u32,
        /// Open traced calls.
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// A call began.
    Enter {
        /// Stream position.
        offset: u64,
        /// Probe id.
        id: u32,
        /// Open calls before this one.
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
        /// The writer did not time this packet (sparse timing): `time` is interpolated
        /// between the timed packets around it (format module doc, "Sparse timing").
        interpolated: bool,
    },
    /// A call returned.
    Exit {
        /// Stream position.
        offset: u64,
        /// Probe id, when the decoder knows which call this was.
        id: Option<u32>,
        /// Open calls besides this one (the depth of its ENTER).
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
        /// As for [`Event::Enter`].
        interpolated: bool,
    },
    /// Tracing paused.
    Paused {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// Tracing resumed.
    Resumed {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// The writer was removed.
    Stopped {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// Probe events were not written.
    Lost {
        /// Stream position.
        offset: u64,
        /// Why.
        kind: LostKind,
        /// How many.
        count: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// Bytes that were not decoded.
    Skipped {
        /// Stream position of the first skipped byte.
        offset: u64,
        /// How many.
        bytes: u64,
        /// Why.
        reason: SkipReason,
    },
}

impl Event {
    /// The event's CLOCK_MONOTONIC time (`None` for [`Event::Skipped`], which has none).
    pub fn time(&self) -> Option<u64> {
        match self {
            Event::Sync { time, .. }
            | Event::Enter { time, .. }
            | Event::Exit { time, .. }
            | Event::Paused { time, .. }
            | Event::Resumed { time, .. }
            | Event::Stopped { time, .. }
            | Event::Lost { time, .. } => Some(*time),
            Event::Skipped { .. } => None,
        }
    }
}

/// Iterator of [`Event`]s over a window.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
    start_offset: u64,
    synced: bool,
    skip_reason: SkipReason,
    queued: Option<Event>,
    /// Since the last SYNC: ENTER/EXIT with delta 0 are untimed (SYNC_FLAG_UNTIMED).
    sparse: bool,
    /// Untimed events held back until the next timed one gives the end of their interval
    /// (at most MAX_HELD), and events ready to return.
    held: VecDeque<Event>,
    ready: VecDeque<Event>,
    /// Open calls below `frames`, ids unknown.
    base: u64,
    frames: Vec<Option<u32>>,
    ticks: u64,
    clock: StreamClock,
    tid: u32,
}

/// Decodes a whole window that starts at stream position 0.
pub fn decode(bytes: &[u8]) -> Vec<Event> {
    Decoder::new(bytes).collect()
}

/// Decodes the chunks of one thread's stream, in stream order, as `(stream position, bytes)`
/// (e.g. the AUXTRACE payloads of one thread with their offsets). Chunks that continue each
/// other decode as one window, so a packet or a SYNC split across two chunks is not lost; a
/// missing stretch is reported as [`SkipReason::Gap`] and decoding resyncs after it; a chunk that
/// starts before the previous one ended (a new recording, an overwrite snapshot) starts a new
/// window.
pub fn decode_chunks<'a>(chunks: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<Event> {
    let mut out = Vec::new();
    let mut window: Vec<u8> = Vec::new();
    let mut start = 0u64;
    for (offset, bytes) in chunks {
        let end = start.wrapping_add(window.len() as u64);
        if window.is_empty() {
            start = offset;
        } else if offset != end {
            out.extend(Decoder::with_offset(&window, start));
            window.clear();
            if offset > end {
                out.push(Event::Skipped {
                    offset: end,
                    bytes: offset - end,
                    reason: SkipReason::Gap,
                });
            }
            start = offset;
        }
        window.extend_from_slice(bytes);
    }
    if !window.is_empty() {
        out.extend(Decoder::with_offset(&window, start));
    }
    out
}

impl<'a> Decoder<'a> {
    /// A decoder over `bytes`, whose first byte is stream position 0.
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder::with_offset(bytes, 0)
    }

    /// A decoder over `bytes`, whose first byte is stream position `offset` (e.g. the AUX
    /// record's offset), so that event offsets are stream positions.
    pub fn with_offset(bytes: &'a [u8], offset: u64) -> Decoder<'a> {
        Decoder {
            bytes,
            pos: 0,
            start_offset: offset,
            synced: false,
            skip_reason: SkipReason::NoSync,
            queued: None,
            sparse: false,
            held: VecDeque::new(),
            ready: VecDeque::new(),
            base: 0,
            frames: Vec::new(),
            ticks: 0,
            clock: StreamClock::new(),
            tid: 0,
        }
    }

    /// The thread id of the last SYNC (0 before the first).
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Open calls as the decoder sees them.
    pub fn depth(&self) -> u32 {
        u32::try_from(self.base + self.frames.len() as u64).unwrap_or(u32::MAX)
    }

    fn offset(&self, pos: usize) -> u64 {
        self.start_offset.wrapping_add(pos as u64)
    }

    fn advance(&mut self, delta: u64) -> u64 {
        self.ticks = self.ticks.saturating_add(delta);
        self.clock.ns(self.ticks)
    }

    fn apply_sync(&mut self, s: &format::Sync) {
        let depth = u64::from(s.depth);
        let first = u64::from(s.first);
        let listed_end = first + s.frames.len() as u64;
        let prev_total = self.base + self.frames.len() as u64;
        // Keep what the decoder already knows when it agrees with the SYNC (it may know frames
        // the SYNC does not list); otherwise the SYNC is the truth.
        let agrees = self.synced
            && prev_total == depth
            && self.base <= first
            && self.frames[(first - self.base) as usize..(listed_end - self.base) as usize]
                .iter()
                .zip(&s.frames)
                .all(|(a, b)| *a == Some(*b));
        if !agrees {
            if listed_end == depth {
                self.base = first;
                self.frames = s.frames.iter().map(|&id| Some(id)).collect();
            } else {
                // The writer's shadow stack overflowed: the listed frames are not the innermost,
                // and the ones above them are unknown.
                self.base = depth;
                self.frames.clear();
            }
        }
        // A SYNC in sequence keeps the thread's times continuous (stream_clock module doc).
        let continues = self.synced && self.tid == s.tid && s.ticks >= self.ticks;
        self.clock.sync(s.conv, s.ticks, continues);
        self.ticks = s.ticks;
        self.tid = s.tid;
        self.sparse = s.flags & format::SYNC_FLAG_UNTIMED != 0;
    }

    /// Scans for the next valid SYNC at or after `self.pos`.
    fn resync(&mut self) -> Event {
        let from = self.pos;
        let mut at = from;
        while let Some(i) = self.bytes[at..].iter().position(|&b| b == SYNC_MAGIC[0]) {
            let cand = at + i;
            match format::parse_sync(&self.bytes[cand..]) {
                Ok((sync, len)) => {
                    self.apply_sync(&sync);
                    self.synced = true;
                    let sync_event = Event::Sync {
                        offset: self.offset(cand),
                        tid: sync.tid,
                        depth: sync.depth,
                        time: self.clock.ns(self.ticks),
                    };
                    self.pos = cand + len;
                    if cand == from {
                        return sync_event;
                    }
                    self.queued = Some(sync_event);
                    return Event::Skipped {
                        offset: self.offset(from),
                        bytes: (cand - from) as u64,
                        reason: self.skip_reason,
                    };
                }
                // A candidate cut by the window's end may be a false match claiming more
                // frames than a real SYNC after it: keep scanning either way.
                Err(_) => at = cand + 1,
            }
        }
        self.pos = self.bytes.len();
        Event::Skipped {
            offset: self.offset(from),
            bytes: (self.bytes.len() - from) as u64,
            reason: self.skip_reason,
        }
    }

    fn lose_sync(&mut self, reason: SkipReason) {
        self.synced = false;
        self.skip_reason = reason;
    }
}

/// Most untimed events a decoder holds back waiting for the next timed one; beyond it they
/// keep the time before them (bounded memory whatever the stream says).
const MAX_HELD: usize = 4096;

impl Decoder<'_> {
    /// The next event, times not yet interpolated, and whether it is an untimed ENTER/EXIT.
    fn next_raw(&mut self) -> Option<(Event, bool)> {
        if let Some(e) = self.queued.take() {
            return Some((e, false));
        }
        loop {
            if self.pos >= self.bytes.len() {
                return None;
            }
            if !self.synced {
                return Some((self.resync(), false));
            }
            let at = self.pos;
            let offset = self.offset(at);
            let (packet, len) = match format::parse_packet(&self.bytes[at..]) {
                Ok(p) => p,
                Err(PacketError::Truncated { .. }) => {
                    self.pos = self.bytes.len();
                    return Some((
                        Event::Skipped {
                            offset,
                            bytes: (self.bytes.len() - at) as u64,
                            reason: SkipReason::Truncated,
                        },
                        false,
                    ));
                }
                Err(e) => {
                    self.lose_sync(SkipReason::Corrupt(e));
                    continue;
                }
            };
            self.pos = at + len;
            let mut untimed = false;
            let event = match packet {
                Packet::Pad => continue,
                Packet::Sync(s) => {
                    self.apply_sync(&s);
                    Event::Sync {
                        offset,
                        tid: s.tid,
                        depth: s.depth,
                        time: self.clock.ns(self.ticks),
                    }
                }
                Packet::Enter { id, delta } => {
                    untimed = self.sparse && delta == 0;
                    let time = self.advance(delta);
                    let depth = self.depth();
                    self.frames.push(Some(id));
                    Event::Enter {
                        offset,
                        id,
                        depth,
                        time,
                        interpolated: untimed,
                    }
                }
                Packet::Exit { delta } => {
                    untimed = self.sparse && delta == 0;
                    let time = self.advance(delta);
                    let id = match self.frames.pop() {
                        Some(id) => id,
                        None => {
                            self.base = self.base.saturating_sub(1);
                            None
                        }
                    };
                    Event::Exit {
                        offset,
                        id,
                        depth: self.depth(),
                        time,
                        interpolated: untimed,
                    }
                }
                Packet::Paused { delta } => Event::Paused {
                    offset,
                    time: self.advance(delta),
                },
                Packet::Resumed { delta } => Event::Resumed {
                    offset,
                    time: self.advance(delta),
                },
                Packet::Stopped { delta } => Event::Stopped {
                    offset,
                    time: self.advance(delta),
                },
                Packet::Lost { kind, count, delta } => Event::Lost {
                    offset,
                    kind,
                    count,
                    time: self.advance(delta),
                },
            };
            return Some((event, untimed));
        }
    }

    /// Releases the held untimed events, spread evenly between their common start time and
    /// `end` (the next timed event's time), or at their start time when there is no end.
    fn release_held(&mut self, end: Option<u64>) {
        let k = self.held.len() as u128;
        for (i, mut e) in self.held.drain(..).enumerate() {
            if let (Event::Enter { time, .. } | Event::Exit { time, .. }, Some(t1)) = (&mut e, end)
                && t1 > *time
            {
                let t0 = u128::from(*time);
                let step = (u128::from(t1) - t0) * (i as u128 + 1) / (k + 1);
                *time = (t0 + step) as u64;
            }
            self.ready.push_back(e);
        }
    }
}

impl Iterator for Decoder<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            match self.next_raw() {
                Some((e, true)) => {
                    self.held.push_back(e);
                    if self.held.len() >= MAX_HELD {
                        self.release_held(None);
                    }
                }
                Some((e, false)) => {
                    if !self.held.is_empty() {
                        // Any timed event ends the interval, a SYNC too (its ticks are a fresh
                        // reading); a skip (no time) comes first when the SYNC follows damaged
                        // bytes, and releases them at their start time.
                        self.release_held(e.time());
                    }
                    self.ready.push_back(e);
                }
                None => {
                    if self.held.is_empty() {
                        return None;
                    }
                    self.release_held(None);
                }
            }
        }
    }
}
