//! The software trace packet format, byte by byte.
//!
//! This is the specification a second decoder can be written from. The tracer writes one
//! *stream* per traced thread into the AUX area of that thread's perf event; the stream is a
//! sequence of packets, each starting with a header byte that says what it is. There is no
//! alignment: packets follow each other byte after byte. Multi-byte fixed fields are
//! little-endian. `uleb` is unsigned LEB128: 7 value bits per byte, low group first, bit 7 set on
//! every byte but the last; a `uleb` holding a u64 takes at most 10 bytes, one holding a u32 at
//! most 5, and a decoder rejects longer encodings and values that overflow the field. Writers
//! always emit the shortest encoding.
//!
//! # Time
//!
//! Every packet but PAD and SYNC carries `delta`, a uleb of clock *ticks* since the previous
//! timestamped packet of the stream (SYNC carries a full timestamp and restarts the chain). The
//! ticks of the clock the writer used (x86_64 TSC, or CLOCK_MONOTONIC nanoseconds) convert to
//! CLOCK_MONOTONIC nanoseconds with the anchor of the last SYNC:
//! `ns = anchor_ns + ((ticks - anchor_ticks) * mult) >> shift`, computed in 128-bit arithmetic
//! (ticks before the anchor convert with the same formula, subtracting). The anchor is
//! re-measured by the writer every few milliseconds of ticks, so the conversion error does not
//! grow with the length of the trace.
//!
//! A writer never writes a negative delta: if the clock went back (a TSC that differs across
//! CPUs) it writes 0.
//!
//! ## Sparse timing (untimed ENTER/EXIT)
//!
//! Reading the clock is most of a traced call's cost, so a writer may leave some ENTER/EXIT
//! packets without a timestamp, as Intel PT leaves branches between its MTC/CYC timing
//! packets (`WriterConfig::timing`: entry-only, or one packet in N). It says so in the SYNC:
//! flag bit 1 ([`SYNC_FLAG_UNTIMED`]) set in a SYNC means that, from that SYNC to the next,
//!
//! - an ENTER or EXIT whose `delta` is 0 is **untimed**: the writer did not read its clock
//!   for it. It adds nothing to the time; its own time is unknown and lies between the time
//!   of the packet before it and the time of the next timed packet;
//! - every timed ENTER or EXIT carries `delta` >= 1 (the writer rounds a reading equal to or
//!   before the previous time up by one tick), so that 0 is never ambiguous;
//! - PAUSED, RESUMED, STOPPED, LOST and SYNC are always timed (their `delta` may be 0).
//!
//! The bytes of the packets do not change: an untimed ENTER/EXIT is the ordinary packet with
//! `delta` 0 (`0x01 0x00` for EXIT, `0x80|id 0x00` for a short ENTER: two bytes). Without the
//! flag, `delta` 0 is a real delta of 0 ticks (the full-timing streams, and those of writers
//! before the flag, which showed such packets at the time of the packet before).
//!
//! A decoder gives the untimed packets between two timed ones (or a timed one and a SYNC,
//! PAUSED, RESUMED, STOPPED or LOST) times spread evenly between the two: with `t0` the time
//! of the packet before the first untimed one, `t1` the time of the timed packet after the
//! last, and `k` untimed packets, the `i`-th (from 1) gets `t0 + (t1 - t0) * i / (k + 1)`,
//! and reports them as interpolated (`decode::Event::Enter`'s `interpolated`). Untimed packets
//! with no timed packet after them in the window (its end, a skip) keep `t0`, also flagged. A
//! decoder may bound how many untimed packets it holds back (this one: 4096), giving the ones
//! beyond `t0` too.
//!
//! # Packets
//!
//! | header | name | bytes after the header | meaning |
//! |---|---|---|---|
//! | `0x00` | PAD | none | filler, ignored |
//! | `0x01` | EXIT | `uleb delta` | the innermost open call returned |
//! | `0x02` | ENTER | `uleb id` (u32, >= 1), `uleb delta` | a call of probe `id` began |
//! | `0x80 \| id` (`0x81..=0xFF`) | ENTER (short) | `uleb delta` | a call of probe `id` (1..=127) began |
//! | `0x03` | PAUSED | `uleb delta` | tracing paused (like Intel PT's TIP.PGD): no packets until RESUMED |
//! | `0x04` | RESUMED | `uleb delta` | tracing resumed (like TIP.PGE); written right after a SYNC, so a decoder starting there sees it |
//! | `0x05` | STOPPED | `uleb delta` | the writer was removed: the stream ends here (a later SYNC may start a new one) |
//! | `0x06` | LOST | `u8 kind`, `uleb count` (u64), `uleb delta` | `count` probe events (entries + exits) were not written, see [`LostKind`]; a SYNC follows at once (or STOPPED, at the stream's end) |
//! | `0x07` | TAG | `uleb value` (u64) | a value the traced program tied to the innermost open call: perfaux-tracing's span id, the same at every entry of one span (an async task's polls); no time of its own |
//! | `0x0A` | SYNC | see below (8-byte magic included) | full state: time, thread, open calls |
//!
//! A TAG follows the ENTER of the call it tags, or the SYNC that a due SYNC put between them
//! (whose frames list that call): it belongs to the innermost call open where it stands; one
//! with no open call tags nothing. Writers before TAG never wrote `0x07`.
//!
//! Every other header byte (`0x08..=0x09`, `0x0B..=0x7F`, `0x80`) is invalid: a decoder treats it
//! as corruption and scans for the next SYNC.
//!
//! ENTER and EXIT are the hot packets: a traced call with a probe id below 128 whose entry and
//! exit are each under 16384 ticks apart costs `1 + 2` plus `1 + 2` bytes, 4 to 6 bytes in all.
//!
//! # SYNC
//!
//! A SYNC (like Intel PT's PSB+) lets a decoder start anywhere: it scans for the magic, checks
//! the checksum and the field constraints, and from there knows the time, the thread and the
//! open calls. Layout, offsets from the first byte:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `0A F5 53 57 54 53 59 4E` (`"\n\xF5SWTSYN"`) |
//! | 8 | 1 | version, 1 |
//! | 9 | 1 | flags: bit 0 = ticks are TSC cycles (else CLOCK_MONOTONIC ns); bit 1 = sparse timing, ENTER/EXIT with `delta` 0 are untimed until the next SYNC (see "Sparse timing"); other bits 0 |
//! | 10 | 1 | `n`, number of call frames listed below, 0..=16 ([`MAX_SYNC_FRAMES`]) |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 4 | tid of the traced thread (u32) |
//! | 16 | 4 | `depth`: number of open traced calls (u32) |
//! | 20 | 4 | `first`: call depth of the first listed frame; `first + n <= depth` |
//! | 24 | 8 | `ticks`: timestamp of this SYNC (u64) |
//! | 32 | 8 | `anchor_ticks` (u64) |
//! | 40 | 8 | `anchor_ns`: CLOCK_MONOTONIC ns at `anchor_ticks` (u64) |
//! | 48 | 4 | `mult` (u32) |
//! | 52 | 1 | `shift` (0..=63) |
//! | 53 | 3 | reserved, 0 |
//! | 56 | 4·n | probe ids of the open calls at depths `first .. first + n`, outermost first (u32 each, >= 1) |
//! | 56 + 4·n | 4 | checksum (u32) |
//!
//! The SYNC is `60 + 4·n` bytes. The frames at depths below `first` are open but not listed
//! (the writer lists the innermost frames it knows; a shadow stack deeper than its bound knows
//! only the outermost ones, see [`crate::shadow`]). The checksum runs over the `56 + 4·n` bytes
//! before it, taken as little-endian u32 words `w`: `h = 0x811C_9DC5`, then for each word
//! `h = ((h ^ w) * 0x9E37_79B1 mod 2^32).rotate_left(15)`.
//!
//! The writer emits a SYNC when it starts a stream, right before RESUMED, right after LOST, and
//! before the first ENTER/EXIT that would start at or beyond `sync_period` bytes (512 by default,
//! at least 128) after the end of the previous SYNC. A window of any stream therefore holds a
//! complete SYNC within its first `sync_period + 16 + 124 + 44` bytes (one ENTER/EXIT, the
//! largest SYNC, two LOST), and decodes from there.
//!
//! # Decoding
//!
//! Scan for the magic; take the first candidate whose checksum and constraints hold. From a
//! SYNC: `depth` calls are open, the listed ids are those at depths `first .. first + n`, the
//! others are unknown; the time is `ticks`. Then packet by packet: every `delta` adds to the
//! time; ENTER opens a call at depth = the number of open calls; EXIT closes the innermost one
//! (its depth is the number of calls still open after it; an EXIT with no open call returns from
//! a call opened before anything the decoder saw). A later SYNC states the truth again and
//! replaces the decoder's view (calls that returned while tracing was paused are closed by the
//! SYNC that precedes RESUMED; it names the calls open at the pause, and those opened while
//! paused only when the writer followed them, `WriterConfig::track_paused`). A packet that does
//! not parse (invalid header, uleb too long, bytes ending inside it) loses the sync: resume
//! scanning at its first byte + 1.
//!
//! # Probe ids
//!
//! Ids are not resolved in the stream: the recorder stores the process's probe table
//! ([`crate::ProbeTable`], with its own byte format) next to the trace, and the decoder's user
//! maps ids to names with it. Ids are process-wide, never reused, and start at 1.

use thiserror::Error;

/// PAD: one filler byte.
pub const PAD: u8 = 0x00;
/// EXIT: the innermost open call returned.
pub const EXIT: u8 = 0x01;
/// ENTER with the probe id as a uleb.
pub const ENTER: u8 = 0x02;
/// PAUSED: tracing paused (PERF_EF_PAUSE).
pub const PAUSED: u8 = 0x03;
/// RESUMED: tracing resumed (PERF_EF_RESUME).
pub const RESUMED: u8 = 0x04;
/// STOPPED: the writer was removed.
pub const STOPPED: u8 = 0x05;
/// LOST: probe events that were not written.
pub const LOST: u8 = 0x06;
/// TAG: a value tied to the innermost open call.
pub const TAG: u8 = 0x07;
/// SYNC: the first byte of the magic.
pub const SYNC: u8 = 0x0A;
/// Header bit of the short ENTER: `0x80 | id` for ids 1..=127.
pub const ENTER_SHORT: u8 = 0x80;

/// The 8 bytes a SYNC starts with.
pub const SYNC_MAGIC: [u8; 8] = [0x0A, 0xF5, 0x53, 0x57, 0x54, 0x53, 0x59, 0x4E];
/// Version byte of the SYNC layout described here.
pub const SYNC_VERSION: u8 = 1;
/// SYNC flag: the ticks are TSC cycles.
pub const SYNC_FLAG_TSC: u8 = 1;
/// SYNC flag: sparse timing; until the next SYNC an ENTER/EXIT with `delta` 0 is untimed (module
/// doc, "Sparse timing").
pub const SYNC_FLAG_UNTIMED: u8 = 2;
/// Most call frames a SYNC lists.
pub const MAX_SYNC_FRAMES: usize = 16;
/// Bytes of a SYNC before its frame list.
pub const SYNC_FIXED: usize = 56;
/// Largest SYNC in bytes.
pub const MAX_SYNC: usize = SYNC_FIXED + 4 * MAX_SYNC_FRAMES + 4;
/// Largest ENTER or EXIT in bytes (`0x02`, 5-byte id, 10-byte delta).
pub const MAX_EVENT: usize = 16;
/// Largest LOST in bytes.
pub const MAX_LOST: usize = 1 + 1 + 10 + 10;
/// Largest PAUSED, RESUMED or STOPPED in bytes.
pub const MAX_BOUNDARY: usize = 1 + 10;
/// Largest TAG in bytes.
pub const MAX_TAG: usize = 1 + 10;

/// Why probe events were not written (the `kind` byte of LOST).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LostKind {
    /// A signal handler hit a probe while its thread was in the middle of writing a packet
    /// (the trace's NMI case): the inner events are dropped and counted.
    Nested = 1,
    /// Full-trace mode ran out of space and the core gave no more (like PERF_AUX_FLAG_TRUNCATED).
    Full = 2,
    /// Not on the wire: the decoder's own note that a window had more open calls than it keeps
    /// ([`crate::decode::MAX_FRAMES`]); `count` outer calls' ids were forgotten (their returns
    /// decode with no id), their depth is still counted.
    Depth = 3,
}

impl LostKind {
    /// The kind for a LOST `kind` byte.
    pub fn from_byte(b: u8) -> Option<LostKind> {
        match b {
            1 => Some(LostKind::Nested),
            2 => Some(LostKind::Full),
            _ => None,
        }
    }
}

/// A SYNC packet's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sync {
    /// Flags byte ([`SYNC_FLAG_TSC`]).
    pub flags: u8,
    /// Thread id of the traced thread.
    pub tid: u32,
    /// Number of open traced calls.
    pub depth: u32,
    /// Call depth of `frames[0]`.
    pub first: u32,
    /// Probe ids of the open calls at depths `first..first + frames.len()`, outermost first.
    pub frames: Vec<u32>,
    /// Timestamp of the SYNC in ticks.
    pub ticks: u64,
    /// Conversion to CLOCK_MONOTONIC ns.
    pub conv: TimeConv,
}

/// Ticks to CLOCK_MONOTONIC nanoseconds: `anchor_ns + ((t - anchor_ticks) * mult) >> shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeConv {
    /// Ticks at the anchor.
    pub anchor_ticks: u64,
    /// CLOCK_MONOTONIC ns at the anchor.
    pub anchor_ns: u64,
    /// Multiplier.
    pub mult: u32,
    /// Shift, 0..=63.
    pub shift: u8,
}

impl TimeConv {
    /// The identity conversion (ticks are nanoseconds).
    pub const IDENTITY: TimeConv = TimeConv {
        anchor_ticks: 0,
        anchor_ns: 0,
        mult: 1,
        shift: 0,
    };

    /// Nanoseconds at `ticks`, saturating at the ends of u64.
    #[inline]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        // The decoder converts every event: the common case (ticks after the anchor, a
        // product that fits in 64 bits) without the 128-bit multiply and variable shift,
        // which were most of the conversion's time. Same result: nothing was cut off.
        if ticks >= self.anchor_ticks
            && self.shift < 64
            && let Some(p) = (ticks - self.anchor_ticks).checked_mul(u64::from(self.mult))
        {
            return self.anchor_ns.saturating_add(p >> self.shift);
        }
        self.ns_wide(ticks)
    }

    /// [`TimeConv::to_ns`] in 128 bits.
    #[inline(never)]
    fn ns_wide(&self, ticks: u64) -> u64 {
        let mult = u128::from(self.mult);
        if ticks >= self.anchor_ticks {
            let d = (u128::from(ticks - self.anchor_ticks) * mult) >> self.shift;
            u64::try_from(u128::from(self.anchor_ns) + d).unwrap_or(u64::MAX)
        } else {
            let d = (u128::from(self.anchor_ticks - ticks) * mult) >> self.shift;
            u64::try_from(u128::from(self.anchor_ns).saturating_sub(d)).unwrap_or(0)
        }
    }
}

/// One decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// PAD.
    Pad,
    /// ENTER (either form).
    Enter {
        /// Probe id.
        id: u32,
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// EXIT.
    Exit {
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// PAUSED.
    Paused {
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// RESUMED.
    Resumed {
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// STOPPED.
    Stopped {
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// LOST.
    Lost {
        /// Why.
        kind: LostKind,
        /// How many probe events.
        count: u64,
        /// Ticks since the previous timestamped packet.
        delta: u64,
    },
    /// TAG.
    Tag {
        /// The value.
        value: u64,
    },
    /// SYNC.
    Sync(Sync),
}

/// Why bytes did not parse as a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PacketError {
    /// The bytes end inside the packet.
    #[error("packet truncated: needs more bytes than the {available} left")]
    Truncated {
        /// Bytes that were available from the packet's start.
        available: usize,
    },
    /// The header byte is not a packet type.
    #[error("invalid packet header byte {0:#04x}")]
    BadHeader(u8),
    /// A uleb is longer than its field allows or overflows it.
    #[error("uleb field `{0}` is overlong or overflows")]
    BadUleb(&'static str),
    /// A LOST kind byte names no kind.
    #[error("invalid LOST kind {0}")]
    BadLostKind(u8),
    /// An ENTER names probe id 0.
    #[error("ENTER with probe id 0")]
    ZeroId,
    /// A SYNC breaks a constraint of its layout.
    #[error("invalid SYNC: {0}")]
    BadSync(&'static str),
}

/// Writes `v` as uleb at `buf[at..]`, returns the new offset. `buf` must have 10 bytes free.
#[inline(always)]
pub fn put_uleb(buf: &mut [u8], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    buf[at] = v as u8;
    at + 1
}

/// Reads a uleb of at most `max_bytes` bytes holding at most `max_bits` bits.
fn get_uleb(
    bytes: &[u8],
    at: usize,
    field: &'static str,
    max_bits: u32,
) -> Result<(u64, usize), PacketError> {
    let max_bytes = max_bits.div_ceil(7) as usize;
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let Some(&b) = bytes.get(at + i) else {
            return Err(PacketError::Truncated {
                available: bytes.len(),
            });
        };
        let low = u64::from(b & 0x7F);
        let shift = 7 * i as u32;
        // The last allowed byte may only carry the bits that are left in the field.
        if shift + 7 > max_bits && (low >> (max_bits - shift)) != 0 {
            return Err(PacketError::BadUleb(field));
        }
        v |= low << shift;
        if b & 0x80 == 0 {
            return Ok((v, at + i + 1));
        }
    }
    Err(PacketError::BadUleb(field))
}

/// Encodes ENTER for probe `id` (>= 1) into `buf` (at least [`MAX_EVENT`] bytes); returns its length.
#[inline(always)]
pub fn encode_enter(buf: &mut [u8], id: u32, delta: u64) -> usize {
    if id < 0x80 {
        buf[0] = ENTER_SHORT | id as u8;
        put_uleb(buf, 1, delta)
    } else {
        buf[0] = ENTER;
        let at = put_uleb(buf, 1, u64::from(id));
        put_uleb(buf, at, delta)
    }
}

/// Encodes EXIT into `buf` (at least 11 bytes); returns its length.
#[inline(always)]
pub fn encode_exit(buf: &mut [u8], delta: u64) -> usize {
    buf[0] = EXIT;
    put_uleb(buf, 1, delta)
}

/// Appends `x` as uleb to the packet held in register `v` (little-endian, `n` bytes so far).
#[inline(always)]
fn pack_uleb(v: &mut u128, n: &mut u32, mut x: u64) {
    while x >= 0x80 {
        *v |= u128::from((x as u8) | 0x80) << (8 * *n);
        x >>= 7;
        *n += 1;
    }
    *v |= u128::from(x as u8) << (8 * *n);
    *n += 1;
}

/// ENTER of probe `id` (or EXIT when `id` is 0) as little-endian bytes in a register, and its
/// length: the writer's general path stores it with one unaligned 16-byte store, with no trip
/// through memory. Same bytes as [`encode_enter`] / [`encode_exit`].
#[inline(always)]
pub fn pack_event(id: u32, delta: u64) -> (u128, usize) {
    let (mut v, mut n) = if id == 0 {
        (u128::from(EXIT), 1)
    } else if id < 0x80 {
        (u128::from(ENTER_SHORT | id as u8), 1)
    } else {
        let mut v = u128::from(ENTER);
        let mut n = 1;
        pack_uleb(&mut v, &mut n, u64::from(id));
        (v, n)
    };
    pack_uleb(&mut v, &mut n, delta);
    (v, n as usize)
}

/// Encodes TAG into `buf` (at least [`MAX_TAG`] bytes).
pub fn encode_tag(buf: &mut [u8], value: u64) -> usize {
    buf[0] = TAG;
    put_uleb(buf, 1, value)
}

/// Encodes PAUSED, RESUMED or STOPPED (`header`) into `buf` (at least [`MAX_BOUNDARY`]
/// bytes).
pub fn encode_boundary(buf: &mut [u8], header: u8, delta: u64) -> usize {
    debug_assert!(matches!(header, PAUSED | RESUMED | STOPPED));
    buf[0] = header;
    put_uleb(buf, 1, delta)
}

/// Encodes LOST into `buf` (at least [`MAX_LOST`] bytes).
pub fn encode_lost(buf: &mut [u8], kind: LostKind, count: u64, delta: u64) -> usize {
    buf[0] = LOST;
    buf[1] = kind as u8;
    let at = put_uleb(buf, 2, count);
    put_uleb(buf, at, delta)
}

/// The SYNC checksum over `words` (a multiple of 4 bytes), see the module doc.
pub fn sync_checksum(words: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for w in words.chunks_exact(4) {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        h = (h ^ w).wrapping_mul(0x9E37_79B1).rotate_left(15);
    }
    h
}

/// Fixed fields of a SYNC, for the encoder (the frames come separately so that the writer
/// need not allocate).
#[derive(Clone, Copy, Debug)]
pub struct SyncHeader {
    /// Flags byte.
    pub flags: u8,
    /// Thread id.
    pub tid: u32,
    /// Open traced calls.
    pub depth: u32,
    /// Depth of the first listed frame.
    pub first: u32,
    /// Timestamp.
    pub ticks: u64,
    /// Conversion.
    pub conv: TimeConv,
}

/// Encodes a SYNC listing `frames` (at most [`MAX_SYNC_FRAMES`]; extra ones are not listed)
/// into `buf` (at least [`MAX_SYNC`] bytes); returns its length.
pub fn encode_sync(buf: &mut [u8], h: &SyncHeader, frames: &[u32]) -> usize {
    let n = frames.len().min(MAX_SYNC_FRAMES);
    buf[..8].copy_from_slice(&SYNC_MAGIC);
    buf[8] = SYNC_VERSION;
    buf[9] = h.flags;
    buf[10] = n as u8;
    buf[11] = 0;
    buf[12..16].copy_from_slice(&h.tid.to_le_bytes());
    buf[16..20].copy_from_slice(&h.depth.to_le_bytes());
    buf[20..24].copy_from_slice(&h.first.to_le_bytes());
    buf[24..32].copy_from_slice(&h.ticks.to_le_bytes());
    buf[32..40].copy_from_slice(&h.conv.anchor_ticks.to_le_bytes());
    buf[40..48].copy_from_slice(&h.conv.anchor_ns.to_le_bytes());
    buf[48..52].copy_from_slice(&h.conv.mult.to_le_bytes());
    buf[52] = h.conv.shift;
    buf[53..56].fill(0);
    for (i, id) in frames[..n].iter().enumerate() {
        buf[SYNC_FIXED + 4 * i..SYNC_FIXED + 4 * i + 4].copy_from_slice(&id.to_le_bytes());
    }
    let end = SYNC_FIXED + 4 * n;
    let sum = sync_checksum(&buf[..end]);
    buf[end..end + 4].copy_from_slice(&sum.to_le_bytes());
    end + 4
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Parses and validates a SYNC at the start of `bytes`; returns it and its length.
pub fn parse_sync(bytes: &[u8]) -> Result<(Sync, usize), PacketError> {
    if bytes.len() < SYNC_FIXED {
        if !SYNC_MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
            return Err(PacketError::BadSync("magic"));
        }
        return Err(PacketError::Truncated {
            available: bytes.len(),
        });
    }
    if bytes[..8] != SYNC_MAGIC {
        return Err(PacketError::BadSync("magic"));
    }
    if bytes[8] != SYNC_VERSION {
        return Err(PacketError::BadSync("version is not 1"));
    }
    let flags = bytes[9];
    if flags & !(SYNC_FLAG_TSC | SYNC_FLAG_UNTIMED) != 0 {
        return Err(PacketError::BadSync("unknown flag bits"));
    }
    let n = usize::from(bytes[10]);
    if n > MAX_SYNC_FRAMES {
        return Err(PacketError::BadSync("more than 16 frames"));
    }
    if bytes[11] != 0 || bytes[53..56] != [0, 0, 0] {
        return Err(PacketError::BadSync("reserved bytes not zero"));
    }
    let len = SYNC_FIXED + 4 * n + 4;
    if bytes.len() < len {
        return Err(PacketError::Truncated {
            available: bytes.len(),
        });
    }
    let sum = le_u32(bytes, len - 4);
    if sum != sync_checksum(&bytes[..len - 4]) {
        return Err(PacketError::BadSync("checksum mismatch"));
    }
    let depth = le_u32(bytes, 16);
    let first = le_u32(bytes, 20);
    if u64::from(first) + n as u64 > u64::from(depth) {
        return Err(PacketError::BadSync("first + n exceeds depth"));
    }
    let shift = bytes[52];
    if shift > 63 {
        return Err(PacketError::BadSync("shift above 63"));
    }
    let frames: Vec<u32> = (0..n).map(|i| le_u32(bytes, SYNC_FIXED + 4 * i)).collect();
    if frames.contains(&0) {
        return Err(PacketError::BadSync("frame with probe id 0"));
    }
    let sync = Sync {
        flags,
        tid: le_u32(bytes, 12),
        depth,
        first,
        frames,
        ticks: le_u64(bytes, 24),
        conv: TimeConv {
            anchor_ticks: le_u64(bytes, 32),
            anchor_ns: le_u64(bytes, 40),
            mult: le_u32(bytes, 48),
            shift,
        },
    };
    Ok((sync, len))
}

/// Parses the packet at the start of `bytes`; returns it and its length.
pub fn parse_packet(bytes: &[u8]) -> Result<(Packet, usize), PacketError> {
    let Some(&h) = bytes.first() else {
        return Err(PacketError::Truncated { available: 0 });
    };
    let delta_at = |at: usize| get_uleb(bytes, at, "delta", 64);
    match h {
        PAD => Ok((Packet::Pad, 1)),
        EXIT => delta_at(1).map(|(delta, n)| (Packet::Exit { delta }, n)),
        PAUSED => delta_at(1).map(|(delta, n)| (Packet::Paused { delta }, n)),
        RESUMED => delta_at(1).map(|(delta, n)| (Packet::Resumed { delta }, n)),
        STOPPED => delta_at(1).map(|(delta, n)| (Packet::Stopped { delta }, n)),
        ENTER => {
            let (id, at) = get_uleb(bytes, 1, "id", 32)?;
            if id == 0 {
                return Err(PacketError::ZeroId);
            }
            let (delta, n) = delta_at(at)?;
            Ok((
                Packet::Enter {
                    id: id as u32,
                    delta,
                },
                n,
            ))
        }
        LOST => {
            let Some(&k) = bytes.get(1) else {
                return Err(PacketError::Truncated {
                    available: bytes.len(),
                });
            };
            let kind = LostKind::from_byte(k).ok_or(PacketError::BadLostKind(k))?;
            let (count, at) = get_uleb(bytes, 2, "count", 64)?;
            let (delta, n) = delta_at(at)?;
            Ok((Packet::Lost { kind, count, delta }, n))
        }
        TAG => get_uleb(bytes, 1, "value", 64).map(|(value, n)| (Packet::Tag { value }, n)),
        SYNC => parse_sync(bytes).map(|(s, n)| (Packet::Sync(s), n)),
        0x81..=0xFF => {
            let (delta, n) = delta_at(1)?;
            Ok((
                Packet::Enter {
                    id: u32::from(h & 0x7F),
                    delta,
                },
                n,
            ))
        }
        _ => Err(PacketError::BadHeader(h)),
    }
}

/// Encodes `packet` into a new vector (tests, tools and the second writer path; the hot path
/// uses the `encode_*` functions on stack buffers).
pub fn encode_packet(packet: &Packet) -> Vec<u8> {
    let mut buf = [0u8; MAX_SYNC];
    let n = match packet {
        Packet::Pad => {
            buf[0] = PAD;
            1
        }
        Packet::Enter { id, delta } => encode_enter(&mut buf, *id, *delta),
        Packet::Exit { delta } => encode_exit(&mut buf, *delta),
        Packet::Paused { delta } => encode_boundary(&mut buf, PAUSED, *delta),
        Packet::Resumed { delta } => encode_boundary(&mut buf, RESUMED, *delta),
        Packet::Stopped { delta } => encode_boundary(&mut buf, STOPPED, *delta),
        Packet::Lost { kind, count, delta } => encode_lost(&mut buf, *kind, *count, *delta),
        Packet::Tag { value } => encode_tag(&mut buf, *value),
        Packet::Sync(s) => encode_sync(
            &mut buf,
            &SyncHeader {
                flags: s.flags,
                tid: s.tid,
                depth: s.depth,
                first: s.first,
                ticks: s.ticks,
                conv: s.conv,
            },
            &s.frames,
        ),
    };
    buf[..n].to_vec()
}

#[cfg(test)]
mod tests;
