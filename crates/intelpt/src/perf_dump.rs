//! The packet lines `perf report -D` prints for an intel_pt AUXTRACE payload (perf 6.1): a
//! line a packet, its bytes with the PAD bytes perf folds into it, and perf's description.
//!
//! perf's reading differs from libipt's at the edges (the [`Dialect::Perf`] decoder), and it
//! never resyncs: an undecodable or cut-off packet is one byte of "Bad packet!", and decoding
//! goes on at the next byte.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::decode::{Context, Dialect, decode};
use crate::packet::{Packet, TipKind};

/// perf's description of a packet.
pub fn describe(p: &Packet, out: &mut String) {
    let tnt = |out: &mut String, t: &crate::packet::Tnt| {
        out.push_str("TNT ");
        out.extend(t.taken().map(|b| if b { 'T' } else { 'N' }));
        let _ = write!(out, " ({})", t.count);
    };
    let _ = match *p {
        Packet::Pad => write!(out, "PAD"),
        Packet::Psb => write!(out, "PSB"),
        Packet::PsbEnd => write!(out, "PSBEND"),
        Packet::Stop => write!(out, "TraceSTOP"),
        Packet::Ovf => write!(out, "OVF"),
        Packet::Tnt(t) => {
            tnt(out, &t);
            Ok(())
        }
        Packet::Tip { kind, ip } => {
            let name = match kind {
                TipKind::Tip => "TIP ",
                TipKind::TipPge => "TIP.PGE ",
                TipKind::TipPgd => "TIP.PGD ",
                TipKind::Fup => "FUP ",
            };
            if ip.compression.0 == 0 {
                write!(out, "{name}no ip")
            } else {
                hex(out, name, ip.payload)
            }
        }
        Packet::ModeExec { csl, csd, iflag } => {
            let bits = match (csl, csd) {
                (true, _) => 64,
                (false, true) => 32,
                (false, false) => 16,
            };
            write!(out, "MODE.Exec IF:{} {bits}", u8::from(iflag))
        }
        Packet::ModeTsx { intx, abort } => write!(
            out,
            "MODE.TSX TXAbort:{} InTX:{}",
            u8::from(abort),
            u8::from(intx)
        ),
        Packet::Tsc(v) => hex(out, "TSC ", v),
        Packet::Mtc(v) => hex(out, "MTC ", u64::from(v)),
        Packet::Cyc(v) => hex(out, "CYC ", v),
        Packet::Pip { cr3, nr } => {
            hex(out, "PIP ", cr3 >> 5).and_then(|_| write!(out, " (NR={})", u8::from(nr)))
        }
        Packet::Cbr(v) => hex(out, "CBR ", u64::from(v)),
        Packet::Tma { ctc, fc, .. } => {
            hex(out, "TMA CTC ", u64::from(ctc)).and_then(|_| hex(out, " FC ", u64::from(fc)))
        }
        Packet::Vmcs(base) => hex(out, "VMCS ", base >> 12),
        Packet::Mnt(v) => hex(out, "MNT ", v),
        Packet::Ptw(w) => {
            hex(out, "PTWRITE ", w.payload).and_then(|_| write!(out, " IP:{}", u8::from(w.ip)))
        }
        Packet::Exstop { ip } => write!(out, "EXSTOP IP:{}", u8::from(ip)),
        Packet::Mwait { hints, ext } => {
            let v = u64::from(hints) | u64::from(ext) << 32;
            hex(out, "MWAIT ", v)
                .and_then(|_| hex(out, " Hints ", v & 0xff))
                .and_then(|_| hex(out, " Extensions ", (v >> 32) & 3))
        }
        Packet::Pwre { payload } => hex(out, "PWRE ", u64::from(payload)).and_then(|_| {
            write!(
                out,
                " HW:{} CState:{} Sub-CState:{}",
                payload >> 7 & 1,
                payload >> 12 & 0xf,
                payload >> 8 & 0xf
            )
        }),
        Packet::Pwrx { payload } => hex(out, "PWRX ", payload).and_then(|_| {
            write!(
                out,
                " Last CState:{} Deepest CState:{}",
                payload >> 4 & 0xf,
                payload & 0xf
            )
            .and_then(|_| hex(out, " Wake Reason ", payload >> 8 & 0xf))
        }),
        Packet::Bbp { sz8, typ } => write!(out, "BBP SZ {}-byte Type ", if sz8 { 8 } else { 4 })
            .and_then(|_| hex(out, "", u64::from(typ))),
        Packet::Bip { id, payload, .. } => {
            write!(out, "BIP ID {id:#04x} Value ").and_then(|_| hex(out, "", payload))
        }
        Packet::Bep { ip } => write!(out, "BEP IP:{}", u8::from(ip)),
        Packet::Cfe { typ, vector, ip } => {
            write!(out, "CFE IP:{} Type {typ:#04x} Vector ", u8::from(ip))
                .and_then(|_| hex(out, "", u64::from(vector)))
        }
        Packet::Evd { typ, payload } => {
            write!(out, "EVD Type {:#04x} Payload ", typ & 0x3f).and_then(|_| hex(out, "", payload))
        }
        // perf's dialect refuses TRIG; a caller with another dialect still gets a name.
        Packet::Trig { trbv, .. } => hex(out, "TRIG ", u64::from(trbv)),
    };
}

/// C's `0x%llx`: zero is `0x0`, as Rust's `{:#x}` also prints it.
fn hex(out: &mut String, prefix: &str, v: u64) -> std::fmt::Result {
    write!(out, "{prefix}{v:#x}")
}

/// Writes perf's dump of one AUXTRACE payload: its header line, then a line a packet.
pub fn dump(buf: &[u8], mut out: impl Write) -> io::Result<()> {
    writeln!(
        out,
        ". ... Intel Processor Trace data: size {} bytes",
        buf.len()
    )?;
    let mut ctx = Context::new(Dialect::Perf);
    let mut pos = 0;
    let mut line = String::with_capacity(128);
    while pos < buf.len() {
        let rest = &buf[pos..];
        line.clear();
        let len = match decode(rest, &mut ctx) {
            Ok((p, len)) => {
                // perf folds the zero bytes after a short packet into its line, up to 8.
                let mut shown = len;
                if len < 8 {
                    while shown < 8 && rest.get(shown) == Some(&0) {
                        shown += 1;
                    }
                }
                describe(&p, &mut line);
                shown
            }
            Err(_) => {
                line.push_str("Bad packet!");
                1
            }
        };
        let mut s = String::with_capacity(128);
        let _ = write!(s, ".  {pos:08x}: ");
        for b in &rest[..len] {
            let _ = write!(s, " {b:02x}");
        }
        for _ in len..16 {
            s.push_str("   ");
        }
        s.push(' ');
        s.push_str(&line);
        s.push('\n');
        out.write_all(s.as_bytes())?;
        pos += len;
    }
    out.flush()
}
