//! The decoder: any window of a stream (a full-trace chunk, an AUX sample, an overwrite
//! snapshot that starts mid-packet) to events.
//!
//! The decoder scans for the first valid SYNC (magic, checksum and field constraints, see
//! [`crate::format`]), reports the bytes before it as [`Event::Skipped`], and decodes packet by
//! packet from there. A packet that does not parse loses the sync: the bytes up to the next
//! valid SYNC are skipped and reported with the reason. It never panics and always makes
//! progress, whatever the bytes; its state is bounded whatever they say: at most [`MAX_FRAMES`]
//! open calls' ids and [`MAX_HELD`] untimed events held ([`Decoder::limit`] lowers both).
//!
//! Times are CLOCK_MONOTONIC nanoseconds. Depths count the open traced calls: an ENTER at depth
//! `d` is matched by the EXIT at depth `d`. Calls the window saw open at its first SYNC but whose
//! ids it does not know (the SYNC lists at most 16) exit with `id: None`.

use std::collections::VecDeque;
use std::io::{self, Read};

use crate::format::{self, LostKind, Packet, PacketError, SYNC_MAGIC};
use crate::stream_clock::StreamClock;
use crate::window::Windows;

mod each;
mod event;

pub use event::{Event, SkipReason};

/// Iterator of [`Event`]s over a window: bytes in memory ([`Decoder::with_offset`]) or read
/// from a `Read` in pieces of bounded size ([`Decoder::from_reader`]).
#[derive(Debug)]
pub struct Decoder<'a> {
    buf: Buf<'a>,
    /// Bytes held (`buf`'s length) and whether more may come, kept beside it so that the
    /// per-packet checks do not look into `buf`.
    end: usize,
    more: bool,
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
    /// Ids of the innermost open calls, at most `max_frames` ([`MAX_FRAMES`]).
    frames: Vec<Option<u32>>,
    max_frames: usize,
    /// Most untimed events held ([`MAX_HELD`]).
    max_held: usize,
    ticks: u64,
    clock: StreamClock,
    tid: u32,
}

/// The window's bytes: all of them, or the part of a stream read so far that is not decoded
/// yet (`start_offset` is the stream position of its first byte).
enum Buf<'a> {
    Slice(&'a [u8]),
    Stream(Box<Stream<'a>>),
}

struct Stream<'a> {
    src: Box<dyn Read + 'a>,
    /// `cap` bytes once the first read allocates them (zeroed once, then
    /// reused); the first `filled` hold the stream's bytes.
    data: Vec<u8>,
    filled: usize,
    cap: usize,
    eof: bool,
    error: Option<io::Error>,
}

impl std::fmt::Debug for Buf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Buf::Slice(b) => write!(f, "Slice({} bytes)", b.len()),
            Buf::Stream(s) => write!(f, "Stream({} bytes held, eof {})", s.filled, s.eof),
        }
    }
}

impl Buf<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Buf::Slice(b) => b,
            Buf::Stream(s) => &s.data[..s.filled],
        }
    }
}

/// Bytes the decoder wants held past a packet's first byte before it parses it: the largest
/// packet, so that a stream read in pieces decodes exactly as the whole window would.
const LOOKAHEAD: usize = format::MAX_SYNC;

/// The smallest piece [`Decoder::from_reader`] reads at a time.
pub const MIN_PIECE: usize = 4 * LOOKAHEAD;

/// Decodes a whole window that starts at stream position 0.
pub fn decode(bytes: &[u8]) -> Vec<Event> {
    Decoder::new(bytes).collect()
}

/// Decodes the chunks of one thread's stream, in stream order, as `(stream position, bytes)`
/// (e.g. the AUXTRACE payloads of one thread with their offsets). Chunks that continue each
/// other decode as one window ([`crate::window::Windows`]), so a packet or a SYNC split across
/// two chunks is not lost; a missing stretch is reported as [`SkipReason::Gap`] and decoding
/// resyncs after it; a chunk that starts before the previous one ended (a new recording, an
/// overwrite snapshot) starts a new window. The chunks are read in place, not joined.
pub fn decode_chunks<'a>(chunks: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<Event> {
    // An empty chunk says nothing about the stream: a gap after it is still a gap.
    let chunks: Vec<(u64, &[u8])> = chunks.into_iter().filter(|c| !c.1.is_empty()).collect();
    let mut out = Vec::new();
    let mut next = 0;
    let mut end: Option<u64> = None;
    for w in Windows::new(chunks.iter().map(|&c| Ok::<_, ()>(c))).flatten() {
        if let Some(end) = end
            && w.start() > end
        {
            out.push(Event::Skipped {
                offset: end,
                bytes: w.start() - end,
                reason: SkipReason::Gap,
            });
        }
        let parts = &chunks[next..next + w.chunks as usize];
        next += w.chunks as usize;
        if let [(at, bytes)] = parts {
            out.extend(Decoder::with_offset(bytes, *at));
        } else {
            let src = Parts { parts, at: 0 };
            let piece = CHAINED_PIECE.min(usize::try_from(w.len).unwrap_or(usize::MAX));
            out.extend(Decoder::from_reader(src, w.start(), piece));
        }
        end = Some(w.end());
    }
    out
}

/// What [`decode_chunks`] holds of a window of several chunks at a time.
const CHAINED_PIECE: usize = 64 * 1024;

/// The bytes of a window's chunks one after another, read in place.
struct Parts<'p, 'a> {
    parts: &'p [(u64, &'a [u8])],
    at: usize,
}

impl Read for Parts<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(((_, b), rest)) = self.parts.split_first() {
            if self.at < b.len() {
                let n = buf.len().min(b.len() - self.at);
                buf[..n].copy_from_slice(&b[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            self.parts = rest;
            self.at = 0;
        }
        Ok(0)
    }
}

impl<'a> Decoder<'a> {
    /// A decoder over `bytes`, whose first byte is stream position 0.
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder::with_offset(bytes, 0)
    }

    /// A decoder over `bytes`, whose first byte is stream position `offset` (e.g. the AUX
    /// record's offset), so that event offsets are stream positions.
    pub fn with_offset(bytes: &'a [u8], offset: u64) -> Decoder<'a> {
        Decoder::over(Buf::Slice(bytes), offset)
    }

    /// A decoder over the bytes `src` gives, whose first byte is stream position `offset`,
    /// holding at most `piece` bytes of them at a time (at least [`MIN_PIECE`]): a window of
    /// any size decodes in bounded memory, with the same events as [`Decoder::with_offset`]
    /// over the whole window. The buffer is allocated at the first read. A read error ends
    /// the window as its end would; [`Decoder::take_error`] tells.
    pub fn from_reader(src: impl Read + 'a, offset: u64, piece: usize) -> Decoder<'a> {
        let s = Stream {
            src: Box::new(src),
            data: Vec::new(),
            filled: 0,
            cap: piece.max(MIN_PIECE),
            eof: false,
            error: None,
        };
        Decoder::over(Buf::Stream(Box::new(s)), offset)
    }

    fn over(buf: Buf<'a>, offset: u64) -> Decoder<'a> {
        let (end, more) = match &buf {
            Buf::Slice(b) => (b.len(), false),
            Buf::Stream(_) => (0, true),
        };
        Decoder {
            buf,
            end,
            more,
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
            max_frames: MAX_FRAMES,
            max_held: MAX_HELD,
            ticks: 0,
            clock: StreamClock::new(),
            tid: 0,
        }
    }

    /// Lowers the decoder's bounds (a reader decoding many windows at once shares one budget
    /// among them): at most `frames` open calls' ids kept (at least [`MIN_FRAMES`], at most
    /// [`MAX_FRAMES`]) and `held` untimed events held (1 to [`MAX_HELD`]).
    pub fn limit(&mut self, frames: usize, held: usize) {
        self.max_frames = frames.clamp(MIN_FRAMES, MAX_FRAMES);
        self.max_held = held.clamp(1, MAX_HELD);
    }

    /// The error that ended a [`Decoder::from_reader`] window early, once.
    pub fn take_error(&mut self) -> Option<io::Error> {
        match &mut self.buf {
            Buf::Slice(_) => None,
            Buf::Stream(s) => s.error.take(),
        }
    }

    fn len(&self) -> usize {
        self.end
    }

    /// Drops the decoded bytes (before `pos`) and reads more; whether new bytes came.
    fn refill(&mut self) -> bool {
        let Buf::Stream(s) = &mut self.buf else {
            return false;
        };
        if s.eof {
            return false;
        }
        if self.pos > 0 {
            s.data.copy_within(self.pos..s.filled, 0);
            s.filled -= self.pos;
            self.start_offset = self.start_offset.wrapping_add(self.pos as u64);
            self.pos = 0;
        }
        if s.data.is_empty() {
            s.data = vec![0; s.cap];
        }
        let before = s.filled;
        while s.filled < s.cap {
            match s.src.read(&mut s.data[s.filled..]) {
                Ok(0) => {
                    s.eof = true;
                    break;
                }
                Ok(n) => s.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    s.error = Some(e);
                    s.eof = true;
                    break;
                }
            }
        }
        self.end = s.filled;
        self.more = !s.eof;
        s.filled > before
    }

    /// Makes sure a packet starting at `pos` is held whole when the stream has it.
    fn look_ahead(&mut self, pos: usize) {
        if self.more && self.end - pos < LOOKAHEAD {
            self.refill();
        }
    }

    /// The thread id of the last SYNC (0 before the first).
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Open calls as the decoder sees them.
    #[inline]
    pub fn depth(&self) -> u32 {
        u32::try_from(self.base + self.frames.len() as u64).unwrap_or(u32::MAX)
    }

    #[inline]
    fn offset(&self, pos: usize) -> u64 {
        self.start_offset.wrapping_add(pos as u64)
    }

    #[inline]
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
        let from = self.offset(self.pos);
        'scan: loop {
            let mut at = self.pos;
            while let Some(i) = self.buf.bytes()[at..]
                .iter()
                .position(|&b| b == SYNC_MAGIC[0])
            {
                let cand = at + i;
                if self.more && self.end - cand < LOOKAHEAD {
                    // The candidate may be cut by the piece's end: read on from it.
                    self.pos = cand;
                    self.refill();
                    continue 'scan;
                }
                match format::parse_sync(&self.buf.bytes()[cand..]) {
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
                        let skipped = self.offset(cand).wrapping_sub(from);
                        if skipped == 0 {
                            return sync_event;
                        }
                        self.queued = Some(sync_event);
                        return Event::Skipped {
                            offset: from,
                            bytes: skipped,
                            reason: self.skip_reason,
                        };
                    }
                    // A candidate cut by the window's end may be a false match claiming more
                    // frames than a real SYNC after it: keep scanning either way.
                    Err(_) => at = cand + 1,
                }
            }
            self.pos = self.len();
            if !self.refill() {
                break;
            }
        }
        Event::Skipped {
            offset: from,
            bytes: self.offset(self.pos).wrapping_sub(from),
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
pub const MAX_HELD: usize = 4096;

/// Most open calls whose ids a decoder keeps (32 times the writer's shadow stack, `SHADOW_DEPTH`,
/// far deeper than real programs recurse). A window with more open calls (a stream of ENTERs
/// grows the stack by one for every two bytes) forgets the outer half of the ids it keeps and
/// says so with an [`Event::Lost`] of [`LostKind::Depth`]; depths stay exact and the forgotten
/// calls' EXITs decode with `id: None`, as for calls open before the window's first SYNC.
pub const MAX_FRAMES: usize = 4096;

/// The least [`Decoder::limit`] lowers the kept frames to: the writer's shadow stack depth.
pub const MIN_FRAMES: usize = crate::shadow::SHADOW_CAP;

impl Decoder<'_> {
    /// The next event, times not yet interpolated, and whether it is an untimed ENTER/EXIT.
    fn next_raw(&mut self) -> Option<(Event, bool)> {
        if let Some(e) = self.queued.take() {
            return Some((e, false));
        }
        loop {
            if self.pos >= self.len() && !self.refill() {
                return None;
            }
            if !self.synced {
                return Some((self.resync(), false));
            }
            self.look_ahead(self.pos);
            let at = self.pos;
            let offset = self.offset(at);
            let (packet, len) = match parse_common(&self.buf.bytes()[at..]) {
                Some(p) => (p, 2),
                None => match format::parse_packet(&self.buf.bytes()[at..]) {
                    Ok(p) => p,
                    Err(PacketError::Truncated { .. }) => {
                        self.pos = self.len();
                        return Some((
                            Event::Skipped {
                                offset,
                                bytes: (self.len() - at) as u64,
                                reason: SkipReason::Truncated,
                            },
                            false,
                        ));
                    }
                    Err(e) => {
                        self.lose_sync(SkipReason::Corrupt(e));
                        continue;
                    }
                },
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
                    self.enter_event(offset, id, delta)
                }
                Packet::Exit { delta } => {
                    untimed = self.sparse && delta == 0;
                    self.exit_event(offset, delta)
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
                Packet::Tag { value } => {
                    // No open call: nothing to tag.
                    let Some(depth) = self.depth().checked_sub(1) else {
                        continue;
                    };
                    // Behind held untimed events it waits with them, in stream order.
                    untimed = !self.held.is_empty();
                    Event::Tag {
                        offset,
                        depth,
                        value,
                    }
                }
            };
            return Some((event, untimed));
        }
    }

    /// Releases the held untimed events, spread evenly between their common start time and
    /// `end` (the next timed event's time), or at their start time when there is no end.
    fn release_held(&mut self, end: Option<u64>) {
        // TAGs wait among them, in order, but are no step of the interval.
        let is_tag = |e: &Event| matches!(e, Event::Tag { .. });
        let k = self.held.iter().filter(|e| !is_tag(e)).count() as u128;
        let mut i = 0u128;
        for mut e in self.held.drain(..) {
            if let (Event::Enter { time, .. } | Event::Exit { time, .. }, Some(t1)) = (&mut e, end)
            {
                i += 1;
                if t1 > *time {
                    let t0 = u128::from(*time);
                    let step = (u128::from(t1) - t0) * i / (k + 1);
                    *time = (t0 + step) as u64;
                }
            }
            self.ready.push_back(e);
        }
    }
}

impl Decoder<'_> {
    /// ENTER of probe `id`, `delta` ticks after the last packet.
    #[inline(always)]
    fn enter_event(&mut self, offset: u64, id: u32, delta: u64) -> Event {
        let time = self.advance(delta);
        let depth = self.depth();
        // The cap is checked only when the stack is full (the check `push` makes anyway):
        // one compare on the hot path, not two.
        if self.frames.len() == self.frames.capacity() {
            self.grow_frames(offset, time);
        }
        self.frames.push(Some(id));
        Event::Enter {
            offset,
            id,
            depth,
            time,
            interpolated: self.sparse && delta == 0,
        }
    }

    /// The frame stack's allocation is full: it grows, up to `max_frames`; past that the outer
    /// half of the ids kept go (their calls join `base`, counted, not kept), and the next event
    /// is a note saying how many.
    #[cold]
    #[inline(never)]
    fn grow_frames(&mut self, offset: u64, time: u64) {
        if self.frames.len() < self.max_frames {
            let want = (self.frames.len() * 2).clamp(16, self.max_frames);
            self.frames.reserve_exact(want - self.frames.len());
            return;
        }
        let n = self.frames.len().div_ceil(2);
        self.frames.drain(..n);
        self.base += n as u64;
        // Nothing is queued here: the queued event goes out before any packet is parsed.
        self.queued = Some(Event::Lost {
            offset,
            kind: LostKind::Depth,
            count: n as u64,
            time,
        });
    }

    /// EXIT of the innermost open call, `delta` ticks after the last packet.
    #[inline(always)]
    fn exit_event(&mut self, offset: u64, delta: u64) -> Event {
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
            interpolated: self.sparse && delta == 0,
        }
    }

    /// The common case, inline in the caller's loop so that the event reaches it in
    /// registers (returned from an out-of-line `next` it came back through memory, read back
    /// wider than it was stored: a store-forwarding stall per event in every reader): a timed
    /// two-byte ENTER or EXIT, in sync, with nothing queued or held and no refill due. `None`
    /// leaves everything else, unchanged, to [`Decoder::next_queued`].
    #[inline(always)]
    fn next_common(&mut self) -> Option<Event> {
        if !self.common_due() {
            return None;
        }
        let at = self.pos;
        let packet = parse_common(self.buf.bytes().get(at..)?)?;
        let offset = self.offset(at);
        match packet {
            Packet::Enter { id, delta } if !(self.sparse && delta == 0) => {
                self.pos = at + 2;
                Some(self.enter_event(offset, id, delta))
            }
            Packet::Exit { delta } if !(self.sparse && delta == 0) => {
                self.pos = at + 2;
                Some(self.exit_event(offset, delta))
            }
            _ => None,
        }
    }

    /// Whether the next event may be [`Decoder::next_common`]'s: in sync, nothing queued or
    /// held, no refill due.
    #[inline(always)]
    fn common_due(&self) -> bool {
        self.ready.is_empty()
            && self.held.is_empty()
            && self.queued.is_none()
            && self.synced
            && !(self.more && self.end - self.pos < LOOKAHEAD)
    }

    /// Every event but [`Decoder::next_common`]'s: through the queues of held (untimed) and
    /// ready events.
    #[inline(never)]
    fn next_queued(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            match self.next_raw() {
                Some((e, true)) => {
                    self.held.push_back(e);
                    if self.held.len() >= self.max_held {
                        self.release_held(None);
                    }
                }
                Some((e, false)) => {
                    if self.held.is_empty() {
                        // Nothing ready or held: the event goes out as it is, not through the
                        // queue (a push and a pop of an event read back at once stalled on
                        // store forwarding, as parse_common's comment says).
                        return Some(e);
                    }
                    // Any timed event ends the interval, a SYNC too (its ticks are a fresh
                    // reading); a skip (no time) comes first when the SYNC follows damaged
                    // bytes, and releases them at their start time.
                    self.release_held(e.time());
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

impl Iterator for Decoder<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        match self.next_common() {
            Some(e) => Some(e),
            None => self.next_queued(),
        }
    }
}

/// The two packets that are nearly all of a trace, ENTER of a probe id below 128 and EXIT,
/// each with a delta below 128 ticks (two bytes: the writer's one-store fast path), parsed
/// here so the packet stays in registers; `None` for anything else, which
/// [`format::parse_packet`] parses. Through that function every packet came back in memory
/// and was read back with wider loads than were stored: a store-forwarding stall per packet,
/// which was more than half of decoding (the decode bench: 30.5 ms before, 12.4 ms after;
/// with the queue kept out of the common path too, `Iterator::next`, 6.5 ms).
#[inline(always)]
fn parse_common(bytes: &[u8]) -> Option<Packet> {
    match *bytes {
        [format::EXIT, d, ..] if d < 0x80 => Some(Packet::Exit {
            delta: u64::from(d),
        }),
        [h, d, ..] if h > format::ENTER_SHORT && d < 0x80 => Some(Packet::Enter {
            id: u32::from(h & 0x7F),
            delta: u64::from(d),
        }),
        _ => None,
    }
}
