//! Bytes to packets. Input is untrusted: every byte string gives packets or an error at a
//! position, never a panic, and the decoder holds no memory beyond its few words of state.
//!
//! Written by hand: no maintained Rust crate decodes every packet (iptr-decoder has no event
//! trace or PEBS packets and a callback interface that costs a call per packet), and the
//! format is a first-byte table.

use crate::packet::{IpCompression, Packet, PacketIp, Ptw, TipKind, Tnt};

/// The 16 bytes of a PSB.
pub const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

/// Why the bytes at a position are not a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The opcode is no packet's.
    BadOpcode,
    /// The opcode is known but its payload is not valid (a reserved IP compression, a long
    /// TNT without its stop bit, a broken PSB).
    BadPacket,
    /// The packet runs past the end of the buffer.
    Eos,
}

impl DecodeError {
    /// The words libipt's `pt_errstr` uses for the error, so dumps read as ptdump's.
    pub fn as_str(self) -> &'static str {
        match self {
            DecodeError::BadOpcode => "unknown opcode",
            DecodeError::BadPacket => "unknown packet",
            DecodeError::Eos => "reached end of trace stream",
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose reading of the packets to follow where decoders differ. The SDM's packets are the same
/// for all; the differences are at the edges: packets one tool does not know, reserved bits,
/// and the longest CYC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dialect {
    /// Every packet of the SDM (TRIG, and the PEBS block packets BBP, BIP, BEP), reserved bits
    /// ignored, a long TNT without outcomes refused.
    #[default]
    Sdm,
    /// libipt 2.x (ptdump, ptxed): no BBP/BIP/BEP (unknown opcodes), TMA and CYC checked as it
    /// checks them.
    Libipt,
    /// perf's intel-pt-pkt-decoder (perf 6.1): no TRIG, MODE with both size bits set or both
    /// TSX bits set refused, a long TNT may have no outcomes.
    Perf,
}

/// The little state a packet's meaning depends on: a BIP's size comes from the BBP that
/// opened its block, and only inside a block is a BIP's opcode not a TNT's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context {
    dialect: Dialect,
    block: Option<bool>,
}

impl Context {
    pub fn new(dialect: Dialect) -> Self {
        Context {
            dialect,
            block: None,
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Whether a PEBS block (BBP ... BEP) is open, and its item size (true: 8 bytes).
    pub fn block(&self) -> Option<bool> {
        self.block
    }

    /// A block stays open over the packets that may sit between its items (timing, a FUP,
    /// power events) and ends at any that changes the flow or the mode, as perf reads it.
    #[inline(always)]
    fn after(&mut self, p: &Packet) {
        if self.block.is_none() && !matches!(p, Packet::Bbp { .. }) {
            return;
        }
        match *p {
            Packet::Bbp { sz8, .. } => self.block = Some(sz8),
            Packet::Pad
            | Packet::Tsc(_)
            | Packet::Tma { .. }
            | Packet::Mtc(_)
            | Packet::Cyc(_)
            | Packet::Cbr(_)
            | Packet::Mnt(_)
            | Packet::Exstop { .. }
            | Packet::Pwre { .. }
            | Packet::Pwrx { .. }
            | Packet::Bip { .. }
            | Packet::Tip {
                kind: TipKind::Fup, ..
            } => {}
            _ => self.block = None,
        }
    }
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |v, &x| v << 8 | u64::from(x))
}

/// `n` (at most 8) payload bytes after a header of `h` bytes at the start of `buf`. Away
/// from the buffer's end one unaligned 8-byte load and a mask, not a loop of `n` steps.
#[inline(always)]
fn payload(buf: &[u8], h: usize, n: usize) -> Result<u64, DecodeError> {
    if let Some(w) = buf.get(h..h + 8) {
        let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        return Ok(if n >= 8 {
            v
        } else {
            v & ((1u64 << (8 * n)) - 1)
        });
    }
    buf.get(h..h + n).map(le).ok_or(DecodeError::Eos)
}

/// Decodes the packet at the start of `buf`: the packet and its length.
#[inline(always)]
pub fn decode(buf: &[u8], ctx: &mut Context) -> Result<(Packet, usize), DecodeError> {
    let r = decode_stateless(buf, ctx.block, ctx.dialect);
    if let Ok((p, _)) = &r {
        ctx.after(p);
    }
    r
}

#[inline(always)]
fn decode_stateless(
    buf: &[u8],
    block: Option<bool>,
    dialect: Dialect,
) -> Result<(Packet, usize), DecodeError> {
    let Some(&b0) = buf.first() else {
        return Err(DecodeError::Eos);
    };
    if b0 & 1 == 0 {
        if b0 == 0 {
            return Ok((Packet::Pad, 1));
        }
        if b0 == 0x02 {
            return decode_ext(buf, dialect);
        }
        if let Some(sz8) = block
            && b0 & 7 == 4
        {
            let n = if sz8 { 8 } else { 4 };
            let payload = payload(buf, 1, n)?;
            return Ok((
                Packet::Bip {
                    id: b0 >> 3,
                    payload,
                    sz8,
                },
                1 + n,
            ));
        }
        return Ok((Packet::Tnt(short_tnt(b0)), 1));
    }
    if b0 & 2 != 0 {
        return decode_cyc(buf, dialect);
    }
    if let Some(kind) = tip_kind(b0) {
        let compression = IpCompression(b0 >> 5);
        let n = compression.payload_len().ok_or(DecodeError::BadPacket)?;
        let payload = payload(buf, 1, n)?;
        return Ok((
            Packet::Tip {
                kind,
                ip: PacketIp {
                    compression,
                    payload,
                },
            },
            1 + n,
        ));
    }
    match b0 {
        0x19 => Ok((Packet::Tsc(payload(buf, 1, 7)?), 8)),
        0x59 => Ok((Packet::Mtc(payload(buf, 1, 1)? as u8), 2)),
        0x99 => {
            let m = payload(buf, 1, 1)? as u8;
            if dialect == Dialect::Perf && m & 3 == 3 && m >> 5 < 2 {
                return Err(DecodeError::BadPacket);
            }
            match m >> 5 {
                0 => Ok((
                    Packet::ModeExec {
                        csl: m & 1 != 0,
                        csd: m & 2 != 0,
                        iflag: m & 4 != 0,
                    },
                    2,
                )),
                1 => Ok((
                    Packet::ModeTsx {
                        intx: m & 1 != 0,
                        abort: m & 2 != 0,
                    },
                    2,
                )),
                _ => Err(DecodeError::BadPacket),
            }
        }
        0xd9 if dialect != Dialect::Perf => {
            let flags = payload(buf, 1, 1)? as u8;
            let trbv = payload(buf, 2, 1)? as u8;
            let (icnt, len) = if flags & 0x40 != 0 {
                (Some(payload(buf, 3, 2)? as u16), 5)
            } else {
                (None, 3)
            };
            Ok((
                Packet::Trig {
                    trbv,
                    icnt,
                    mult: flags & 0x20 != 0,
                    ip: flags & 0x80 != 0,
                },
                len,
            ))
        }
        _ => Err(DecodeError::BadOpcode),
    }
}

/// A short TNT's outcomes: a stop bit above up to six of them, above bit 0 (`b0` is even and
/// neither 0 nor 2, the PAD's and the extended opcodes).
#[inline(always)]
fn short_tnt(b0: u8) -> Tnt {
    let count = 6 - b0.leading_zeros() as u8;
    Tnt {
        bits: u64::from(b0 >> 1) & ((1 << count) - 1),
        count,
        long: false,
    }
}

/// The TIP-family packet an opcode byte starts, if any.
#[inline(always)]
fn tip_kind(b0: u8) -> Option<TipKind> {
    match b0 & 0x1f {
        0x0d => Some(TipKind::Tip),
        0x11 => Some(TipKind::TipPge),
        0x01 => Some(TipKind::TipPgd),
        0x1d => Some(TipKind::Fup),
        _ => None,
    }
}

/// CYC: bits 7:3 of the first byte, then 7 bits a byte while bit 0 says more follow. Its
/// length is bounded by the count's 64 bits: a ninth continuation byte (bits 61 and up) is
/// refused by libipt and read by perf; anything longer is a bad packet, not an unbounded read.
#[inline]
fn decode_cyc(buf: &[u8], dialect: Dialect) -> Result<(Packet, usize), DecodeError> {
    let b0 = buf[0];
    let mut value = u64::from(b0 >> 3);
    if b0 & 4 == 0 {
        return Ok((Packet::Cyc(value), 1));
    }
    let last_shift = if dialect == Dialect::Libipt { 54 } else { 61 };
    let mut shift = 5;
    for (i, &b) in buf.iter().enumerate().skip(1) {
        if shift > last_shift {
            return Err(DecodeError::BadPacket);
        }
        value |= u64::from(b >> 1) << shift;
        shift += 7;
        if b & 1 == 0 {
            return Ok((Packet::Cyc(value), i + 1));
        }
    }
    Err(DecodeError::Eos)
}

#[inline(never)]
fn decode_ext(buf: &[u8], dialect: Dialect) -> Result<(Packet, usize), DecodeError> {
    let Some(&b1) = buf.get(1) else {
        return Err(DecodeError::Eos);
    };
    let p = match b1 {
        0x82 => {
            let psb = buf.get(..16).ok_or(DecodeError::Eos)?;
            if psb != PSB {
                return Err(DecodeError::BadPacket);
            }
            return Ok((Packet::Psb, 16));
        }
        0x23 => (Packet::PsbEnd, 2),
        0xf3 => (Packet::Ovf, 2),
        0x83 => (Packet::Stop, 2),
        0xa3 => {
            let v = payload(buf, 2, 6)?;
            if v <= 1 && dialect != Dialect::Perf {
                return Err(DecodeError::BadPacket);
            }
            // The stop bit is the highest set bit; perf reads a payload without one as no
            // outcomes.
            let count = 63u8.saturating_sub(v.leading_zeros() as u8);
            let bits = v & ((1 << count) - 1);
            (
                Packet::Tnt(Tnt {
                    bits,
                    count,
                    long: true,
                }),
                8,
            )
        }
        0x43 => {
            let v = payload(buf, 2, 6)?;
            (
                Packet::Pip {
                    cr3: (v >> 1) << 5,
                    nr: v & 1 != 0,
                },
                8,
            )
        }
        0x03 => (Packet::Cbr(payload(buf, 2, 2)? as u16), 4),
        0x73 => {
            let v = payload(buf, 2, 5)?;
            let reserved = (v >> 16) as u8 != 0 || (v >> 33) != 0;
            if reserved && dialect == Dialect::Libipt {
                return Err(DecodeError::BadPacket);
            }
            (
                Packet::Tma {
                    ctc: v as u16,
                    fc: (v >> 24) as u16 & 0x1ff,
                    reserved,
                },
                7,
            )
        }
        0xc8 => (Packet::Vmcs(payload(buf, 2, 5)? << 12), 7),
        0xc3 => {
            if payload(buf, 2, 1)? != 0x88 {
                return Err(DecodeError::BadOpcode);
            }
            (Packet::Mnt(payload(buf, 3, 8)?), 11)
        }
        0x62 | 0xe2 => (Packet::Exstop { ip: b1 & 0x80 != 0 }, 2),
        0xc2 => {
            let v = payload(buf, 2, 8)?;
            (
                Packet::Mwait {
                    hints: v as u32,
                    ext: (v >> 32) as u32,
                },
                10,
            )
        }
        0x22 => (
            Packet::Pwre {
                payload: payload(buf, 2, 2)? as u16,
            },
            4,
        ),
        0xa2 => (
            Packet::Pwrx {
                payload: payload(buf, 2, 5)?,
            },
            7,
        ),
        0x63 | 0x33 | 0xb3 if dialect == Dialect::Libipt => return Err(DecodeError::BadOpcode),
        0x63 => {
            let v = payload(buf, 2, 1)? as u8;
            (
                Packet::Bbp {
                    sz8: v & 0x80 == 0,
                    typ: v & 0x1f,
                },
                3,
            )
        }
        0x33 | 0xb3 => (Packet::Bep { ip: b1 & 0x80 != 0 }, 2),
        0x13 => {
            let v = payload(buf, 2, 2)?;
            (
                Packet::Cfe {
                    typ: v as u8 & 0x1f,
                    ip: v & 0x80 != 0,
                    vector: (v >> 8) as u8,
                },
                4,
            )
        }
        0x53 => (
            Packet::Evd {
                typ: payload(buf, 2, 1)? as u8,
                payload: payload(buf, 3, 8)?,
            },
            11,
        ),
        _ if b1 & 0x1f == 0x12 => {
            let size_code = (b1 >> 5) & 3;
            let n = match size_code {
                0 => 4,
                1 => 8,
                _ => return Err(DecodeError::BadPacket),
            };
            (
                Packet::Ptw(Ptw {
                    size_code,
                    payload: payload(buf, 2, n)?,
                    ip: b1 & 0x80 != 0,
                }),
                2 + n,
            )
        }
        _ => return Err(DecodeError::BadOpcode),
    };
    Ok(p)
}

/// The offset of the first PSB at or after `from`, if any.
pub fn next_psb(buf: &[u8], from: usize) -> Option<usize> {
    let hay = buf.get(from..)?;
    // A PSB is eight 02 82 pairs; look for the pair's first byte, then compare.
    let mut i = 0;
    while i + PSB.len() <= hay.len() {
        match hay[i..hay.len() - PSB.len() + 1]
            .iter()
            .position(|&b| b == 0x02)
        {
            None => return None,
            Some(j) => {
                i += j;
                if hay[i..i + PSB.len()] == PSB {
                    return Some(from + i);
                }
                i += 1;
            }
        }
    }
    None
}

/// A packet at its offset in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub offset: usize,
    pub len: usize,
    pub packet: Packet,
}

/// The packets of a buffer, from an offset, stopping at the first error (which it returns,
/// with its offset); a caller resyncs with [`next_psb`].
pub struct Packets<'a> {
    buf: &'a [u8],
    pos: usize,
    ctx: Context,
}

impl<'a> Packets<'a> {
    pub fn new(buf: &'a [u8], pos: usize, dialect: Dialect) -> Self {
        Packets {
            buf,
            pos,
            ctx: Context::new(dialect),
        }
    }

    /// The offset of the next packet.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Moves to `pos` with a fresh context (a PSB starts one).
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
        self.ctx = Context::new(self.ctx.dialect);
    }

    /// Gives every packet to `f`, in order, up to the end of the buffer (`Ok`) or the first
    /// error (its offset; the position stays there). The fast way through a trace: the
    /// position lives in a register for the whole loop, and a packet's fields that `f` does
    /// not read are never computed.
    #[inline(always)]
    pub fn for_each_packet(
        &mut self,
        mut f: impl FnMut(Located),
    ) -> Result<(), (usize, DecodeError)> {
        let buf = self.buf;
        let mut pos = self.pos;
        let mut ctx = self.ctx;
        let r = loop {
            let Some(&b0) = buf.get(pos) else {
                break Ok(());
            };
            // Most of a trace is one-byte packets (PAD, short TNT), and outside a PEBS block
            // (where a TNT's opcode may be a BIP's) they change no context.
            if b0 & 1 == 0 && b0 != 0x02 && ctx.block.is_none() {
                let packet = if b0 == 0 {
                    Packet::Pad
                } else {
                    Packet::Tnt(short_tnt(b0))
                };
                f(Located {
                    offset: pos,
                    len: 1,
                    packet,
                });
                pos += 1;
                continue;
            }
            // The next most common: TIP-family packets away from the buffer's end, in one
            // 8-byte load. A FUP keeps a PEBS block open; the others close it.
            if let Some(kind) = tip_kind(b0)
                && let Some(n) = IpCompression(b0 >> 5).payload_len()
                && let Some(w) = buf.get(pos + 1..pos + 9)
            {
                let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                let payload = if n >= 8 {
                    v
                } else {
                    v & ((1u64 << (8 * n)) - 1)
                };
                if kind != TipKind::Fup {
                    ctx.block = None;
                }
                f(Located {
                    offset: pos,
                    len: 1 + n,
                    packet: Packet::Tip {
                        kind,
                        ip: PacketIp {
                            compression: IpCompression(b0 >> 5),
                            payload,
                        },
                    },
                });
                pos += 1 + n;
                continue;
            }
            match decode(&buf[pos..], &mut ctx) {
                Ok((packet, len)) => {
                    f(Located {
                        offset: pos,
                        len,
                        packet,
                    });
                    pos += len;
                }
                Err(e) => break Err((pos, e)),
            }
        };
        self.pos = pos;
        self.ctx = ctx;
        r
    }
}

impl Iterator for Packets<'_> {
    type Item = Result<Located, (usize, DecodeError)>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.pos..).filter(|r| !r.is_empty())?;
        let offset = self.pos;
        // Most of a trace is one-byte packets (PAD, short TNT): no call, no context change
        // outside a PEBS block (where a TNT's opcode may be a BIP's).
        let b0 = rest[0];
        if b0 & 1 == 0 && b0 != 0x02 && self.ctx.block.is_none() {
            self.pos += 1;
            let packet = if b0 == 0 {
                Packet::Pad
            } else {
                Packet::Tnt(short_tnt(b0))
            };
            return Some(Ok(Located {
                offset,
                len: 1,
                packet,
            }));
        }
        Some(match decode(rest, &mut self.ctx) {
            Ok((packet, len)) => {
                self.pos += len;
                Ok(Located {
                    offset,
                    len,
                    packet,
                })
            }
            Err(e) => {
                // The caller decides where to go on; left here, the iterator would give the
                // same error again, so it ends.
                self.pos = self.buf.len();
                Err((offset, e))
            }
        })
    }
}
