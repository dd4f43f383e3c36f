//! libipt's `ptdump`, line for line: the same options, columns, diagnostics, sync and resync,
//! last-IP and time tracking, and perf_event sideband ([`crate::ptdump_sideband`]), so its
//! users and libipt's own tests can compare outputs with `diff -b`.

use std::fmt::Write as _;
use std::io::{self, Write};

pub use crate::args::{Input, parse_c_number};
use crate::args::{clock_option, parse_cpu};
use crate::decode::{Context, DecodeError, Dialect, PSB, decode};
use crate::errata::{Cpu, Errata};
use crate::last_ip::{LastIp, NoIp, sext48};
use crate::packet::{Packet, PacketIp, TipKind, cstate};
use crate::ptdump_sideband::{PeventArgs, Session, SidebandOptions};
use crate::timing::{ClockConfig, FCR_SHIFT, Time, TimeCal, TimeError};

/// ptdump's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub show_offset: bool,
    pub show_raw: bool,
    pub show_last_ip: bool,
    pub show_exec_mode: bool,
    pub show_time: bool,
    pub show_tcal: bool,
    pub time_delta: bool,
    pub quiet: bool,
    pub no_pad: bool,
    pub no_sync: bool,
    pub no_tcal: bool,
    pub no_wall_clock: bool,
    pub no_timing: bool,
    pub no_cyc: bool,
    pub keep_tcal_on_ovf: bool,
    pub cpu: Option<Cpu>,
    pub clock: ClockConfig,
    /// perf_event sideband files and how to show their records.
    pub sideband: SidebandOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            show_offset: true,
            show_raw: false,
            show_last_ip: false,
            show_exec_mode: false,
            show_time: false,
            show_tcal: false,
            time_delta: false,
            quiet: false,
            no_pad: false,
            no_sync: false,
            no_tcal: false,
            no_wall_clock: false,
            no_timing: false,
            no_cyc: false,
            keep_tcal_on_ovf: false,
            cpu: None,
            clock: ClockConfig::default(),
            sideband: SidebandOptions::default(),
        }
    }
}

/// ptdump's command line (without the program name): its options, then the trace file.
pub fn parse_args(args: &[String]) -> Result<(Options, Input), String> {
    let mut o = Options::default();
    let mut it = args.iter();
    let mut input = None;
    let mut pevent = PeventArgs::default();
    while let Some(a) = it.next() {
        if !a.starts_with('-') {
            if input.is_some() {
                return Err(format!("unexpected argument after the trace file: {a}"));
            }
            input = Some(Input::parse(a)?);
            continue;
        }
        match a.as_str() {
            "--no-sync" => o.no_sync = true,
            "--quiet" => {
                o.quiet = true;
                o.sideband.quiet();
            }
            "--no-pad" => o.no_pad = true,
            "--no-timing" => o.no_timing = true,
            "--no-cyc" => o.no_cyc = true,
            "--no-offset" => o.show_offset = false,
            "--raw" => o.show_raw = true,
            "--lastip" => o.show_last_ip = true,
            "--exec-mode" => o.show_exec_mode = true,
            "--time" => o.show_time = true,
            "--tcal" => o.show_tcal = true,
            "--time-delta" => o.time_delta = true,
            "--no-tcal" => o.no_tcal = true,
            "--no-wall-clock" => o.no_wall_clock = true,
            "--keep-tcal-on-ovf" => o.keep_tcal_on_ovf = true,
            "--cpu" => {
                o.cpu = parse_cpu(it.next().ok_or("--cpu: missing argument")?)?;
            }
            _ if clock_option(a, &mut it, &mut o.clock)? => {}
            _ => {
                if !pevent.parse(a, &mut it, &mut o.sideband)? {
                    return Err(format!("unknown option: {a}"));
                }
            }
        }
    }
    if o.show_time && o.show_tcal {
        return Err("specify either --time or --tcal".to_owned());
    }
    let input = input.ok_or("no processor trace file specified")?;
    Ok((o, input))
}

/// libipt's PSB search from `from`: 8-byte aligned windows of the PSB pattern, then back to
/// the start of the last whole PSB of the run they lie in, at or after `from`.
pub fn sync_forward(buf: &[u8], from: usize) -> Option<usize> {
    const A: [u8; 8] = [0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82];
    const B: [u8; 8] = [0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02];
    let mut q = from.checked_add(7)? & !7;
    while q.checked_add(8).is_some_and(|e| e <= buf.len()) {
        let w = &buf[q..q + 8];
        if w == A || w == B {
            let mut r = q + usize::from(buf[q] != 0x02);
            while r + 1 < buf.len() && buf[r] == 0x02 && buf[r + 1] == 0x82 {
                r += 2;
            }
            if let Some(r) = r.checked_sub(16)
                && r >= from
                && buf.get(r..r + 16) == Some(&PSB[..])
            {
                return Some(r);
            }
        }
        q += 8;
    }
    None
}

#[derive(Default)]
struct Tracking {
    last_ip: LastIp,
    tcal: TimeCal,
    time: Time,
    tsc_ref: u64,
    fcr_ref: u64,
    in_header: bool,
}

/// One output line's fields, cut to ptdump's field sizes.
#[derive(Default)]
struct Line {
    opcode: &'static str,
    payload: String,
    /// TNT and TRIG: a payload that may be longer and takes no tracking column.
    extended: bool,
    tracking: Option<(&'static str, String)>,
    skip: bool,
}

fn cut(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

struct Dumper<'o, W: Write> {
    o: &'o Options,
    out: W,
    errata: Errata,
    t: Tracking,
    track_time: bool,
    sideband: Session<'o>,
}

fn ip_payload(ip: PacketIp) -> String {
    let v = ip.payload;
    let c = ip.compression.0;
    match c {
        0 => "0: ????????????????".to_owned(),
        1 => format!("1: ????????????{:04x}", v & 0xffff),
        2 => format!("2: ????????{:08x}", v & 0xffff_ffff),
        3 => format!("3: {:016x}", sext48(v)),
        4 => format!("4: ????{:012x}", v & 0xffff_ffff_ffff),
        _ => format!("{c}: {v:016x}"),
    }
}

fn cfe_name(t: u8) -> &'static str {
    match t {
        1 => "intr",
        2 => "iret",
        3 => "smi",
        4 => "rsm",
        5 => "sipi",
        6 => "init",
        7 => "vmentry",
        8 => "vmexit",
        9 => "vmexit_intr",
        10 => "shutdown",
        12 => "uintr",
        13 => "uiret",
        14 => "swintr",
        15 => "syscall",
        _ => "unknown",
    }
}

impl<W: Write> Dumper<'_, W> {
    fn diag(&mut self, offset: usize, msg: &str, err: Option<&str>) -> io::Result<()> {
        match err {
            Some(e) => writeln!(self.out, "[{offset:x}: {msg}: {e}]"),
            None => writeln!(self.out, "[{offset:x}: {msg}]"),
        }
    }

    fn print(&mut self, offset: usize, raw: &[u8], line: &Line) -> io::Result<()> {
        if line.skip || self.o.quiet {
            return Ok(());
        }
        let mut s = String::with_capacity(96);
        let mut sep = "";
        if self.o.show_offset {
            let _ = write!(s, "{:<17}", format!("{offset:016x}"));
            sep = " ";
        }
        if self.o.show_raw {
            let mut r = String::with_capacity(32);
            for b in raw {
                let _ = write!(r, "{b:02x}");
            }
            let _ = write!(s, "{sep}{:<33}", cut(&r, 32));
            sep = " ";
        }
        let payload = if line.extended {
            cut(&line.payload, 47)
        } else {
            cut(&line.payload, 24)
        };
        if payload.is_empty() {
            let _ = write!(s, "{sep}{}", line.opcode);
        } else {
            let _ = write!(s, "{sep}{:<10}", line.opcode);
        }
        if line.extended {
            let _ = write!(s, " {payload}");
        } else if let Some((id, value)) = &line.tracking {
            let _ = write!(s, " {payload:<25} {id:<5}{}", cut(value, 16));
        } else if !payload.is_empty() {
            let _ = write!(s, " {payload}");
        }
        s.push('\n');
        self.out.write_all(s.as_bytes())
    }

    fn tsc_column(&mut self, offset: usize, line: &mut Line) -> io::Result<()> {
        if !self.o.show_time {
            return Ok(());
        }
        let tsc = match self.t.time.query() {
            Ok(t) => t,
            Err((t, TimeError::NoTime)) if self.o.no_wall_clock => t,
            Err((_, e)) => {
                self.diag(offset, "error printing time", Some(e.as_str()))?;
                line.tracking = Some(("tsc", "<unavailable>".to_owned()));
                return Ok(());
            }
        };
        let v = if self.o.time_delta {
            let r = std::mem::replace(&mut self.t.tsc_ref, tsc);
            if r <= tsc {
                format!("+{:x}", tsc - r)
            } else {
                format!("-{:x}", r - tsc)
            }
        } else {
            format!("{tsc:016x}")
        };
        line.tracking = Some(("tsc", v));
        Ok(())
    }

    fn fcr_column(&mut self, offset: usize, line: &mut Line) -> io::Result<()> {
        if !self.o.show_tcal {
            return Ok(());
        }
        let Some(fcr) = self.t.tcal.fcr() else {
            self.diag(
                offset,
                "error printing time",
                Some(TimeError::NoTime.as_str()),
            )?;
            line.tracking = Some(("fcr", "<unavailable>".to_owned()));
            return Ok(());
        };
        let scale = f64::from(1u32 << FCR_SHIFT);
        let v = if self.o.time_delta {
            let r = std::mem::replace(&mut self.t.fcr_ref, fcr);
            format!("{:+.3}", (i128::from(fcr) - i128::from(r)) as f64 / scale)
        } else {
            format!("{:.3}", fcr as f64 / scale)
        };
        line.tracking = Some(("fcr", v));
        Ok(())
    }

    fn time_err(&mut self, offset: usize, msg: &str, r: Result<(), TimeError>) -> io::Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.diag(offset, msg, Some(e.as_str())),
        }
    }

    /// Prints the sideband records the time has reached, before the timing packet's line
    /// (the time without a TSC yet is relative, and records are placed by it all the same).
    fn sideband_due(&mut self) -> io::Result<()> {
        self.sideband.dump_until(self.t.time.tsc, &mut self.out)
    }

    /// Tracks and describes one packet.
    fn packet(&mut self, offset: usize, p: &Packet) -> io::Result<Line> {
        let o = self.o;
        let cfg = o.clock;
        let mut l = Line::default();
        match *p {
            Packet::Pad => {
                l.opcode = "pad";
                l.skip = o.no_pad;
            }
            Packet::Psb => {
                l.opcode = "psb";
                self.t.in_header = true;
                if self.track_time {
                    self.t.tcal.on_psb(self.errata.skl168);
                }
            }
            Packet::PsbEnd => {
                l.opcode = "psbend";
                self.t.in_header = false;
            }
            Packet::Ovf => {
                l.opcode = "ovf";
                if self.track_time {
                    self.t.tcal.on_ovf(o.keep_tcal_on_ovf);
                }
            }
            Packet::Stop => l.opcode = "stop",
            Packet::Tnt(t) => {
                l.opcode = if t.long { "tnt.64" } else { "tnt.8" };
                l.payload = t.taken().map(|b| if b { '!' } else { '.' }).collect();
                l.extended = true;
            }
            Packet::Tip { kind, ip } => {
                l.opcode = match kind {
                    TipKind::Tip => "tip",
                    TipKind::TipPge => "tip.pge",
                    TipKind::TipPgd => "tip.pgd",
                    TipKind::Fup => "fup",
                };
                l.payload = ip_payload(ip);
                if o.show_last_ip {
                    self.t.last_ip.update(ip);
                    let v = match self.t.last_ip.query() {
                        Ok(ip) => format!("{ip:016x}"),
                        Err(NoIp::Suppressed) => "<suppressed>".to_owned(),
                        Err(NoIp::None) => {
                            self.diag(offset, "error tracking last-ip", Some("no ip"))?;
                            "<unavailable>".to_owned()
                        }
                    };
                    l.tracking = Some(("ip", v));
                }
            }
            Packet::ModeExec { csl, csd, iflag } => {
                l.opcode = "mode.exec";
                let items: Vec<&str> = [(csd, "cs.d"), (csl, "cs.l"), (iflag, "if")]
                    .iter()
                    .filter(|(on, _)| *on)
                    .map(|&(_, n)| n)
                    .collect();
                l.payload = items.join(", ");
                if o.show_exec_mode {
                    let em = match (csl, csd) {
                        (true, false) => "64-bit",
                        (false, true) => "32-bit",
                        (false, false) => "16-bit",
                        (true, true) => "unknown",
                    };
                    l.tracking = Some(("em", em.to_owned()));
                }
            }
            Packet::ModeTsx { intx, abort } => {
                l.opcode = "mode.tsx";
                l.payload = match (intx, abort) {
                    (true, true) => "intx, abrt",
                    (true, false) => "intx",
                    (false, true) => "abrt",
                    (false, false) => "",
                }
                .to_owned();
            }
            Packet::Pip { cr3, nr } => {
                l.opcode = "pip";
                l.payload = format!("{cr3:x}{}", if nr { ", nr" } else { "" });
                l.tracking = Some(("cr3", format!("{cr3:016x}")));
            }
            Packet::Vmcs(base) => {
                l.opcode = "vmcs";
                l.payload = format!("{base:x}");
                l.tracking = Some(("vmcs", format!("{base:016x}")));
            }
            Packet::Tsc(tsc) => {
                l.opcode = "tsc";
                l.payload = format!("{tsc:x}");
                l.skip = o.no_timing;
                if self.track_time {
                    if !o.no_tcal {
                        self.t.tcal.on_tsc(tsc, self.t.in_header);
                    }
                    self.t.time.on_tsc(tsc);
                    self.fcr_column(offset, &mut l)?;
                    self.tsc_column(offset, &mut l)?;
                    self.sideband_due()?;
                }
            }
            Packet::Cbr(v) => {
                let ratio = v as u8;
                l.opcode = "cbr";
                l.payload = format!("{ratio:x}");
                l.skip = o.no_timing;
                if self.track_time {
                    if !o.no_tcal {
                        let r = self.t.tcal.on_cbr(ratio, self.t.in_header, &cfg);
                        self.time_err(offset, "error calibrating time", r)?;
                    }
                    let r = if ratio == 0 {
                        Err(TimeError::BadPacket)
                    } else {
                        Ok(())
                    };
                    self.time_err(offset, "error updating time", r)?;
                    self.fcr_column(offset, &mut l)?;
                    self.sideband_due()?;
                }
            }
            Packet::Tma { ctc, fc, .. } => {
                l.opcode = "tma";
                l.payload = format!("{ctc:x}, {fc:x}");
                l.skip = o.no_timing;
                if self.track_time {
                    let r = self.t.time.on_tma(ctc, fc, &cfg);
                    self.time_err(offset, "error updating time", r)?;
                    self.tsc_column(offset, &mut l)?;
                    self.sideband_due()?;
                }
            }
            Packet::Mtc(m) => {
                l.opcode = "mtc";
                l.payload = format!("{m:x}");
                l.skip = o.no_timing;
                if self.track_time {
                    if !o.no_tcal {
                        let r = self.t.tcal.on_mtc(m, &cfg);
                        self.time_err(offset, "error calibrating time", r)?;
                    }
                    let r = self.t.time.on_mtc(m, &cfg);
                    self.time_err(offset, "error updating time", r)?;
                    self.fcr_column(offset, &mut l)?;
                    self.tsc_column(offset, &mut l)?;
                    self.sideband_due()?;
                }
            }
            Packet::Cyc(c) => {
                l.opcode = "cyc";
                l.payload = format!("{c:x}");
                l.skip = o.no_timing || o.no_cyc;
                if self.track_time && !o.no_cyc {
                    let mut fcr = 0;
                    if !o.no_tcal {
                        match self.t.tcal.fcr() {
                            Some(f) => fcr = f,
                            None => self.diag(
                                offset,
                                "calibration error",
                                Some(TimeError::NoTime.as_str()),
                            )?,
                        }
                        self.t.tcal.on_cyc(c);
                    }
                    match self.t.time.on_cyc(c, fcr, &cfg) {
                        Err(e) => self.diag(offset, "error updating time", Some(e.as_str()))?,
                        Ok(()) if fcr == 0 => {
                            self.diag(offset, "error updating time", Some("no calibration"))?
                        }
                        Ok(()) => {}
                    }
                    self.tsc_column(offset, &mut l)?;
                    self.sideband_due()?;
                }
            }
            Packet::Mnt(v) => {
                l.opcode = "mnt";
                l.payload = format!("{v:x}");
            }
            Packet::Exstop { ip } => {
                l.opcode = "exstop";
                l.payload = if ip { "ip" } else { "" }.to_owned();
            }
            Packet::Mwait { hints, ext } => {
                l.opcode = "mwait";
                l.payload = format!("{hints:08x}, {ext:08x}");
            }
            Packet::Pwre { payload } => {
                let f = crate::packet::Pwre::from_payload(payload);
                l.opcode = "pwre";
                l.payload = format!(
                    "c{}.{}{}",
                    cstate(f.state),
                    cstate(f.sub_state),
                    if f.hw { ", hw" } else { "" }
                );
            }
            Packet::Pwrx { payload } => {
                let f = crate::packet::Pwrx::from_payload(payload);
                let wr = match (f.interrupt, f.store, f.hw) {
                    (true, false, false) => "int",
                    (false, true, false) => " st",
                    (false, false, true) => " hw",
                    _ => "bad",
                };
                l.opcode = "pwrx";
                l.payload = format!("{wr}: c{}, c{}", cstate(f.last), cstate(f.deepest));
            }
            Packet::Ptw(w) => {
                l.opcode = "ptw";
                l.payload = format!(
                    "{:x}: {:x}{}",
                    w.size_code,
                    w.payload,
                    if w.ip { ", ip" } else { "" }
                );
            }
            Packet::Cfe { typ, vector, ip } => {
                l.opcode = "cfe";
                let t = typ & 0x1f;
                l.payload = match t {
                    1 | 9 | 12 | 14 => format!("{t}: {vector}"),
                    5 => format!("{t}: {vector:x}"),
                    _ => format!("{t}"),
                };
                if ip {
                    l.payload.push_str(", ip");
                }
                l.tracking = Some(("type", cfe_name(t).to_owned()));
            }
            Packet::Evd { typ, payload } => {
                l.opcode = "evd";
                let t = typ & 0x1f;
                l.payload = format!("{t}: {payload:x}");
                let name = match t {
                    0 => "cr2",
                    1 => "vmxq",
                    2 => "vmxr",
                    _ => "unknown",
                };
                l.tracking = Some(("type", name.to_owned()));
            }
            Packet::Trig {
                trbv,
                icnt,
                mult,
                ip,
            } => {
                l.opcode = "trig";
                l.extended = true;
                l.payload = format!("{trbv:02x}");
                if ip {
                    l.payload.push_str(", ip");
                }
                if mult {
                    l.payload.push_str(", mult");
                }
                if let Some(n) = icnt {
                    let _ = write!(l.payload, ", icnt: {n}");
                }
            }
            // libipt decodes no PEBS block packets: the dialect refused them already.
            Packet::Bbp { .. } | Packet::Bip { .. } | Packet::Bep { .. } => {
                l.opcode = "<invalid>";
            }
        }
        Ok(l)
    }

    fn run(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut pos = if self.o.no_sync {
            0
        } else {
            match sync_forward(buf, 0) {
                Some(p) => p,
                None => return Ok(()),
            }
        };
        let mut sync = pos;
        let mut ctx = Context::new(Dialect::Libipt);
        while pos < buf.len() {
            let rest = &buf[pos..];
            if let Some((len, advance)) = self.skd007(rest) {
                let l = self.packet(pos, &Packet::Ovf)?;
                self.print(pos, &rest[..len], &l)?;
                pos += advance;
                continue;
            }
            match decode(rest, &mut ctx) {
                Ok((p, len)) => {
                    if p == Packet::Psb {
                        sync = pos;
                    }
                    let l = self.packet(pos, &p)?;
                    self.print(pos, &rest[..len], &l)?;
                    pos += len;
                }
                Err(DecodeError::Eos) => break,
                Err(DecodeError::BadPacket)
                    if self.errata.skz84 && rest.starts_with(&[0x02, 0x73]) && rest.len() >= 8 =>
                {
                    let l = Line {
                        opcode: "<invalid>",
                        ..Line::default()
                    };
                    self.print(pos, &rest[..8], &l)?;
                    pos += 8;
                }
                Err(e) => {
                    self.diag(pos, "error decoding packet", Some(e.as_str()))?;
                    let mut from = if pos == sync { pos + 16 } else { pos };
                    from -= from.min(15);
                    match sync_forward(buf, from) {
                        Some(p) => {
                            self.t = Tracking::default();
                            ctx = Context::new(Dialect::Libipt);
                            pos = p;
                            sync = p;
                        }
                        None => break,
                    }
                }
            }
        }
        Ok(())
    }

    /// SKD007: a two-byte CYC whose second byte is an OVF's first, the OVF's second after it.
    fn skd007(&self, rest: &[u8]) -> Option<(usize, usize)> {
        (self.errata.skd007
            && rest.len() >= 3
            && rest[0] & 3 == 3
            && rest[0] & 4 != 0
            && rest[1] == 0x02
            && rest[2] == 0xf3)
            .then_some((2, 3))
    }
}

/// Dumps `buf` as ptdump does with options `o`.
pub fn dump(buf: &[u8], o: &Options, out: impl Write) -> io::Result<()> {
    let mut d = Dumper {
        o,
        out,
        errata: Errata::default(),
        t: Tracking::default(),
        // Sideband records are placed by the trace's time, shown or not.
        track_time: o.show_time || o.show_tcal || !o.sideband.files.is_empty(),
        sideband: Session::new(&o.sideband),
    };
    if let Some(cpu) = o.cpu {
        match Errata::of(cpu) {
            Some(e) => d.errata = e,
            None => d.diag(0, "failed to determine errata", Some("unknown cpu"))?,
        }
    }
    d.sideband.start(&mut d.out)?;
    d.run(buf)?;
    // What the trace's time never reached.
    d.sideband.dump_until(u64::MAX, &mut d.out)?;
    d.out.flush()
}
