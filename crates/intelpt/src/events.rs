//! From packets to events: the binding of Intel PT's packets to each other (a FUP to the TIP
//! after it, a MODE.Exec to the next branch, the PSB+ header to its PSBEND, an OVF to the FUP
//! that says where tracing resumed), as libipt's event layer binds them, so that the flow
//! decoder above sees one stream of events, each with the IP it belongs to.
//!
//! A packet may release several queued events, one per request: its handler then stays on the
//! packet and runs again for the next request.

use std::collections::VecDeque;

use crate::decode::{Context, DecodeError, Dialect, decode};
use crate::errata::Errata;
use crate::insn::ExecMode;
use crate::last_ip::{LastIp, NoIp};
use crate::packet::{Packet, TipKind};
use crate::ptdump::sync_forward;
use crate::timing::{ClockConfig, Time, TimeCal};

/// An event's kind and its own fields. The IP every event may carry is [`Event::ip`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Branch outcomes, oldest in the highest bit of `bits`.
    Tnt {
        bits: u64,
        count: u8,
    },
    /// The target of an indirect branch.
    Tip,
    /// Tracing enabled (TIP.PGE, or a PSB+ FUP as a status update).
    Enabled,
    /// Tracing disabled at a branch (TIP.PGD), or by a PSB+ without a FUP (status update).
    Disabled,
    /// Tracing disabled asynchronously before the instruction at `at` (FUP + TIP.PGD).
    AsyncDisabled {
        at: u64,
    },
    /// An interrupt, exception or other asynchronous branch: from the instruction at
    /// [`Event::ip`] (not executed) to `to`.
    AsyncBranch {
        to: Option<u64>,
    },
    Paging {
        cr3: u64,
        nr: bool,
    },
    AsyncPaging {
        cr3: u64,
        nr: bool,
    },
    Vmcs {
        base: u64,
    },
    AsyncVmcs {
        base: u64,
    },
    Overflow,
    ExecMode(Option<ExecMode>),
    /// The interrupt flag changed (MODE.Exec's IF bit, with `--event:iflags`).
    Iflags {
        enabled: bool,
    },
    Tsx {
        speculative: bool,
        aborted: bool,
    },
    Stop,
    Mnt(u64),
    Cbr(u8),
    Exstop,
    Mwait {
        hints: u32,
        ext: u32,
    },
    /// Power entry: the C-state and sub-state (as the MWAIT hint's fields) and whether
    /// hardware chose it.
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// Power exit: the last and deepest C-states and the wake reason.
    Pwrx {
        last: u8,
        deepest: u8,
        interrupt: bool,
        store: bool,
        hw: bool,
    },
    Ptwrite {
        payload: u64,
    },
    /// Event trace (CFE, with EVD's data): an interrupt or exception, its vector and the
    /// page-fault address.
    Interrupt {
        vector: u8,
        cr2: Option<u64>,
    },
    Iret,
    Smi,
    Rsm,
    Sipi {
        vector: u8,
    },
    Init,
    Vmentry,
    /// A VM exit: the vector (of an exit on an interrupt) and the VMX exit reason and
    /// qualification.
    Vmexit {
        vector: Option<u8>,
        vmxr: Option<u64>,
        vmxq: Option<u64>,
    },
    Shutdown,
    Uintr {
        vector: u8,
    },
    Uiret,
    Swintr {
        vector: u8,
    },
    Syscall,
    /// A trigger (TRIG): its trigger bits, whether several fired, and how many instructions
    /// after the anchor it fired at (`None`: it has no instruction count).
    Trig {
        trbv: u8,
        mult: bool,
        icnt: Option<u16>,
        /// Whether its IP is known: a TRIG with an IP has its FUP's; a counted one is placed
        /// by the flow from its anchor.
        placed: bool,
    },
    /// A tick: the time moved on at a branch (made by the flow, with ptxed's
    /// `--event:tick`).
    Tick,
    /// Holds a FUP's or TIP's place for a MODE.Exec that changed nothing.
    Ignore,
    /// The PSB+ status event, decided at its PSBEND.
    Placeholder,
}

/// One event: its kind, the IP it binds to (`None`: suppressed, or none) and whether it is a
/// status update from a PSB+ header (applied, never reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    pub ip: Option<u64>,
    pub status_update: bool,
    /// The TSC estimate when the event happened, once the trace has given a TSC.
    pub tsc: Option<u64>,
}

impl Event {
    fn new(kind: Kind) -> Self {
        Event {
            kind,
            ip: None,
            status_update: false,
            tsc: None,
        }
    }
}

/// Why no event came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Decode(DecodeError),
    Eos,
    BadContext,
    NoIp,
    IpSuppressed,
    BadStatusUpdate,
    Internal,
}

impl Error {
    /// libipt's words.
    pub fn as_str(self) -> &'static str {
        match self {
            Error::Decode(e) => e.as_str(),
            Error::Eos => "reached end of trace stream",
            Error::BadContext => "unexpected packet context",
            Error::NoIp => "no ip",
            Error::IpSuppressed => "ip has been suppressed",
            Error::BadStatusUpdate => "bad status update",
            Error::Internal => "internal error",
        }
    }
}

/// What releases a queued event.
mod bind {
    pub const PSBEND: u8 = 1;
    pub const TIP: u8 = 2;
    /// The next FUP, which then also starts an asynchronous branch.
    pub const FUP: u8 = 4;
    /// The next FUP, which it consumes.
    pub const FUP_BOUND: u8 = 8;
    /// An MWAIT waiting for its EXSTOP.
    pub const EXSTOP: u8 = 16;
    /// A PWRE waiting for its PWRX.
    pub const PWRX: u8 = 32;
    /// An EVD's event waiting for its CFE.
    pub const CFE: u8 = 64;
}

/// The packet the layer stands on.
#[derive(Debug, Clone, Copy)]
enum Cur {
    Packet(Packet, usize),
    End,
    Invalid(DecodeError),
}

/// The event layer over one trace buffer.
#[derive(Clone)]
pub struct Events<'a> {
    buf: &'a [u8],
    pos: usize,
    cur: Cur,
    ctx: Context,
    last_ip: LastIp,
    enabled: bool,
    bound: bool,
    queue: VecDeque<(Event, u8)>,
    /// MODE.Exec's bits as last seen (cs.l, cs.d, if), once seen.
    mode_bits: Option<(bool, bool, bool)>,
    /// The PSB+ FUP's IP, for the header's events.
    psb_ip: Option<u64>,
    psb_enabled: bool,
    last_sync: Option<usize>,
    pub errata: Errata,
    /// Report changes of MODE.Exec's interrupt flag as events (ptxed's `--event:iflags`).
    pub iflags: bool,
    /// Time, as ptdump tracks it, to stamp events with.
    time: Time,
    tcal: TimeCal,
    in_header: bool,
    pub clock: ClockConfig,
    /// Keep the calibration over an OVF (ptxed's `--insn:keep-tcal-on-ovf`).
    pub keep_tcal_on_ovf: bool,
}

const QUEUE_MAX: usize = 16;

fn mode_of(csl: bool, csd: bool) -> Option<ExecMode> {
    match (csl, csd) {
        (true, false) => Some(ExecMode::Bits64),
        (false, true) => Some(ExecMode::Bits32),
        (false, false) => Some(ExecMode::Bits16),
        (true, true) => None,
    }
}

impl<'a> Events<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Events {
            buf,
            pos: 0,
            cur: Cur::End,
            ctx: Context::new(Dialect::Libipt),
            last_ip: LastIp::default(),
            enabled: false,
            bound: false,
            queue: VecDeque::new(),
            mode_bits: None,
            psb_ip: None,
            psb_enabled: false,
            last_sync: None,
            errata: Errata::default(),
            iflags: false,
            time: Time::default(),
            tcal: TimeCal::default(),
            in_header: false,
            clock: ClockConfig::default(),
            keep_tcal_on_ovf: false,
        }
    }

    /// The offset of the packet the layer stands on (the buffer's length at its end).
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn fetch(&mut self) {
        loop {
            if self.pos >= self.buf.len() {
                self.pos = self.buf.len();
                self.cur = Cur::End;
                return;
            }
            let rest = &self.buf[self.pos..];
            // SKD007: a two-byte CYC that swallowed an OVF's first byte.
            if self.errata.skd007
                && rest.len() >= 3
                && rest[0] & 7 == 7
                && rest[1] == 0x02
                && rest[2] == 0xf3
            {
                self.cur = Cur::Packet(Packet::Ovf, 3);
                return;
            }
            match decode(rest, &mut self.ctx) {
                // SKZ84: a TMA with its reserved bits set is an invalid 8-byte packet.
                Err(DecodeError::BadPacket)
                    if self.errata.skz84 && rest.starts_with(&[0x02, 0x73]) && rest.len() >= 8 =>
                {
                    self.pos += 8;
                }
                Ok((Packet::Pad, _)) => self.pos += 1,
                Ok((p, len)) => {
                    self.cur = Cur::Packet(p, len);
                    return;
                }
                Err(DecodeError::Eos) => {
                    self.cur = Cur::End;
                    return;
                }
                Err(e) => {
                    self.cur = Cur::Invalid(e);
                    return;
                }
            }
        }
    }

    fn advance(&mut self) {
        if let Cur::Packet(_, len) = self.cur {
            self.pos += len;
        }
        self.bound = false;
        self.fetch();
    }

    fn reset(&mut self) {
        self.last_ip = LastIp::default();
        self.enabled = false;
        self.bound = false;
        self.queue.clear();
        self.mode_bits = None;
    }

    /// Syncs onto the next PSB after the last sync point and reads its header; the header's
    /// events follow from [`Events::next_event`].
    pub fn sync_forward(&mut self) -> Result<(), Error> {
        let from = match self.last_sync {
            None => 0,
            Some(s) => {
                let p = if self.pos <= s { s + 16 } else { self.pos };
                p - p.min(15)
            }
        };
        let at = sync_forward(self.buf, from).ok_or(Error::Eos)?;
        self.last_sync = Some(at);
        self.pos = at;
        self.ctx = Context::new(Dialect::Libipt);
        self.reset();
        self.time = Time::default();
        self.tcal = TimeCal::default();
        self.fetch();
        self.psb()
    }

    /// Reads the header of the last PSB synced or passed again, from its start.
    pub fn resync_at_last_psb(&mut self) -> Result<(), Error> {
        let at = self.last_sync.ok_or(Error::Eos)?;
        self.pos = at;
        self.ctx = Context::new(Dialect::Libipt);
        // The mode bits stay: the header is checked against what the trace said before.
        let mode_bits = self.mode_bits;
        self.reset();
        self.mode_bits = mode_bits;
        self.fetch();
        self.psb()
    }

    /// A PSB and its header up to PSBEND (or OVF), queueing the header's status events.
    fn psb(&mut self) -> Result<(), Error> {
        if !self.queue.is_empty() {
            return Err(Error::BadContext);
        }
        self.last_sync = Some(self.pos);
        self.last_ip = LastIp::default();
        self.enabled = false;
        self.psb_ip = None;
        self.psb_enabled = false;
        self.queue
            .push_back((Event::new(Kind::Placeholder), bind::PSBEND));
        self.tcal.on_psb(self.errata.skl168);
        self.in_header = true;
        self.advance();
        loop {
            let Cur::Packet(p, _) = self.cur else {
                return match self.cur {
                    Cur::Invalid(e) => Err(Error::Decode(e)),
                    _ => Err(Error::Eos),
                };
            };
            let status = |kind| Event {
                kind,
                ip: None,
                status_update: true,
                tsc: None,
            };
            self.track_time(&p);
            match p {
                Packet::PsbEnd | Packet::Ovf => {
                    self.in_header = false;
                    return Ok(());
                }
                Packet::Tip {
                    kind: TipKind::Fup, ..
                } if self.errata.bdm70 && self.tip_pge_follows() => {
                    // BDM70: a PSB+ FUP before a TIP.PGE, while tracing was off.
                }
                Packet::Tip {
                    kind: TipKind::Fup,
                    ip,
                } => {
                    self.psb_enabled = ip.compression.0 != 0;
                    if self.psb_enabled {
                        self.last_ip.update(ip);
                        self.psb_ip = self.last_ip.query().ok();
                    }
                }
                Packet::ModeExec { csl, csd, iflag } => {
                    if let Some((l, d, i)) = self.mode_bits {
                        if (l, d) != (csl, csd) || (self.iflags && i != iflag) {
                            return Err(Error::BadStatusUpdate);
                        }
                    } else {
                        self.mode_bits = Some((csl, csd, iflag));
                    }
                    self.push(status(Kind::ExecMode(mode_of(csl, csd))), bind::PSBEND)?;
                    if self.iflags {
                        self.push(status(Kind::Iflags { enabled: iflag }), bind::PSBEND)?;
                    }
                }
                Packet::ModeTsx { intx, abort } => self.push(
                    status(Kind::Tsx {
                        speculative: intx,
                        aborted: abort,
                    }),
                    bind::PSBEND,
                )?,
                Packet::Pip { cr3, nr } => {
                    self.push(status(Kind::AsyncPaging { cr3, nr }), bind::PSBEND)?
                }
                Packet::Vmcs(base) => self.push(status(Kind::AsyncVmcs { base }), bind::PSBEND)?,
                Packet::Cbr(r) => self.push(status(Kind::Cbr(r as u8)), bind::PSBEND)?,
                Packet::Mnt(v) => self.push(Event::new(Kind::Mnt(v)), bind::PSBEND)?,
                Packet::Tsc(_) | Packet::Tma { .. } | Packet::Mtc(_) | Packet::Cyc(_) => {}
                _ => return Err(Error::BadContext),
            }
            self.advance();
        }
    }

    /// The time now, once a TSC came.
    fn now(&self) -> Option<u64> {
        self.time.have_tsc.then_some(self.time.tsc)
    }

    /// Moves time on by a timing packet, as ptdump's `--time` does (its errors only leave
    /// the estimate where it was).
    fn track_time(&mut self, p: &Packet) {
        match *p {
            Packet::Tsc(v) => {
                self.tcal.on_tsc(v, self.in_header);
                self.time.on_tsc(v);
            }
            Packet::Tma { ctc, fc, .. } => {
                let _ = self.time.on_tma(ctc, fc, &self.clock);
            }
            Packet::Mtc(m) => {
                let _ = self.tcal.on_mtc(m, &self.clock);
                let _ = self.time.on_mtc(m, &self.clock);
            }
            Packet::Cyc(c) => {
                let fcr = self.tcal.fcr().unwrap_or(0);
                self.tcal.on_cyc(c);
                let _ = self.time.on_cyc(c, fcr, &self.clock);
            }
            Packet::Cbr(r) => {
                let _ = self.tcal.on_cbr(r as u8, self.in_header, &self.clock);
            }
            _ => {}
        }
    }

    /// Whether the next packet after the current one, past the header's own packets, is a
    /// TIP.PGE.
    fn tip_pge_follows(&self) -> bool {
        let mut look = self.clone();
        look.advance();
        loop {
            match look.cur {
                Cur::Packet(p, _) => match p {
                    Packet::Tsc(_)
                    | Packet::Cbr(_)
                    | Packet::PsbEnd
                    | Packet::Pip { .. }
                    | Packet::ModeExec { .. }
                    | Packet::ModeTsx { .. }
                    | Packet::Vmcs(_)
                    | Packet::Tma { .. }
                    | Packet::Mtc(_)
                    | Packet::Cyc(_)
                    | Packet::Mnt(_) => look.advance(),
                    Packet::Tip {
                        kind: TipKind::TipPge,
                        ..
                    } => return true,
                    _ => return false,
                },
                _ => return false,
            }
        }
    }

    fn push(&mut self, ev: Event, binding: u8) -> Result<(), Error> {
        if self.queue.len() >= QUEUE_MAX {
            return Err(Error::Internal);
        }
        self.queue.push_back((ev, binding));
        Ok(())
    }

    fn dequeue(&mut self, set: u8) -> Option<Event> {
        let i = self.queue.iter().position(|(_, b)| b & set != 0)?;
        self.queue.remove(i).map(|(e, _)| e)
    }

    fn queued(&self, set: u8, f: impl Fn(&Kind) -> bool) -> Option<usize> {
        self.queue
            .iter()
            .position(|(e, b)| b & set != 0 && f(&e.kind))
    }

    fn ip(&self) -> Option<u64> {
        self.last_ip.query().ok()
    }

    /// The next event.
    pub fn next_event(&mut self) -> Result<Event, Error> {
        loop {
            let (p, _) = match self.cur {
                Cur::Packet(p, len) => (p, len),
                Cur::End => return Err(Error::Eos),
                Cur::Invalid(e) => return Err(Error::Decode(e)),
            };
            if let Some(mut ev) = self.handle(p)? {
                if ev.tsc.is_none() {
                    ev.tsc = self.now();
                }
                return Ok(ev);
            }
        }
    }

    /// Runs the current packet's handler: an event (the handler decides whether it stays on
    /// the packet), or `None` when the packet is done and the next is current.
    fn handle(&mut self, p: Packet) -> Result<Option<Event>, Error> {
        match p {
            Packet::Tnt(t) => {
                if !self.enabled {
                    return Err(Error::BadContext);
                }
                self.advance();
                Ok(Some(Event::new(Kind::Tnt {
                    bits: t.bits,
                    count: t.count,
                })))
            }
            Packet::Tip { kind, ip } => match kind {
                TipKind::Tip => self.tip(ip),
                TipKind::TipPge => self.tip_pge(ip),
                TipKind::TipPgd => self.tip_pgd(ip),
                TipKind::Fup => self.fup(ip),
            },
            Packet::ModeExec { csl, csd, iflag } => {
                let (mode_changed, if_changed) = match self.mode_bits {
                    None => (true, true),
                    Some((l, d, i)) => ((l, d) != (csl, csd), i != iflag),
                };
                let mut queued = false;
                if mode_changed {
                    let ev = Event::new(Kind::ExecMode(mode_of(csl, csd)));
                    self.push(ev, bind::TIP | bind::FUP_BOUND)?;
                    queued = true;
                }
                if self.iflags && if_changed {
                    let ev = Event::new(Kind::Iflags { enabled: iflag });
                    self.push(ev, bind::TIP | bind::FUP_BOUND)?;
                    queued = true;
                }
                if !queued {
                    // The next FUP or TIP is still this MODE.Exec's.
                    self.push(Event::new(Kind::Ignore), bind::TIP | bind::FUP_BOUND)?;
                }
                self.mode_bits = Some((csl, csd, iflag));
                self.advance();
                Ok(None)
            }
            Packet::ModeTsx { intx, abort } => {
                let ev = Event::new(Kind::Tsx {
                    speculative: intx,
                    aborted: abort,
                });
                self.advance();
                if self.enabled {
                    self.push(ev, if abort { bind::FUP } else { bind::FUP_BOUND })?;
                    Ok(None)
                } else {
                    Ok(Some(ev))
                }
            }
            Packet::Pip { cr3, nr } => {
                self.advance();
                if self
                    .queued(bind::TIP, |k| matches!(k, Kind::AsyncBranch { .. }))
                    .is_some()
                {
                    self.push(Event::new(Kind::AsyncPaging { cr3, nr }), bind::TIP)?;
                    Ok(None)
                } else {
                    Ok(Some(Event::new(Kind::Paging { cr3, nr })))
                }
            }
            Packet::Vmcs(base) => {
                self.advance();
                if let Some(i) = self.queued(bind::TIP, |k| matches!(k, Kind::AsyncPaging { .. })) {
                    // VMCS comes before PIP: the paging event moves behind it.
                    let paging = self.queue[i];
                    self.queue[i] = (Event::new(Kind::AsyncVmcs { base }), bind::TIP);
                    self.push(paging.0, paging.1)?;
                    Ok(None)
                } else if self
                    .queued(bind::TIP, |k| matches!(k, Kind::AsyncBranch { .. }))
                    .is_some()
                {
                    self.push(Event::new(Kind::AsyncVmcs { base }), bind::TIP)?;
                    Ok(None)
                } else {
                    Ok(Some(Event::new(Kind::Vmcs { base })))
                }
            }
            Packet::Mnt(v) => {
                self.advance();
                Ok(Some(Event::new(Kind::Mnt(v))))
            }
            Packet::Cbr(r) => {
                self.track_time(&p);
                self.advance();
                Ok(Some(Event::new(Kind::Cbr(r as u8))))
            }
            Packet::Stop => {
                self.advance();
                Ok(Some(Event::new(Kind::Stop)))
            }
            Packet::Psb => {
                self.psb()?;
                Ok(None)
            }
            Packet::PsbEnd => self.release_psbend(),
            Packet::Ovf => self.ovf(),
            Packet::Tsc(_) | Packet::Tma { .. } | Packet::Mtc(_) | Packet::Cyc(_) | Packet::Pad => {
                self.track_time(&p);
                self.advance();
                Ok(None)
            }
            Packet::Mwait { hints, ext } => {
                self.push(Event::new(Kind::Mwait { hints, ext }), bind::EXSTOP)?;
                self.advance();
                Ok(None)
            }
            Packet::Exstop { ip } => {
                if let Some(i) = self.queued(bind::EXSTOP, |k| matches!(k, Kind::Mwait { .. })) {
                    let (mwait, _) = self
                        .queue
                        .remove(i)
                        .unwrap_or((Event::new(Kind::Ignore), 0));
                    if ip {
                        self.push(mwait, bind::FUP_BOUND)?;
                    } else {
                        return Ok(Some(mwait));
                    }
                }
                self.advance();
                if ip {
                    self.push(Event::new(Kind::Exstop), bind::FUP_BOUND)?;
                    Ok(None)
                } else {
                    Ok(Some(Event::new(Kind::Exstop)))
                }
            }
            Packet::Pwre { payload } => {
                let f = crate::packet::Pwre::from_payload(payload);
                let mut ev = Event::new(Kind::Pwre {
                    state: f.state,
                    sub_state: f.sub_state,
                    hw: f.hw,
                });
                ev.tsc = self.now();
                self.push(ev, bind::PWRX)?;
                self.advance();
                Ok(None)
            }
            Packet::Pwrx { payload } => {
                if let Some(ev) = self.dequeue(bind::PWRX) {
                    return Ok(Some(ev));
                }
                let f = crate::packet::Pwrx::from_payload(payload);
                self.advance();
                Ok(Some(Event::new(Kind::Pwrx {
                    last: f.last,
                    deepest: f.deepest,
                    interrupt: f.interrupt,
                    store: f.store,
                    hw: f.hw,
                })))
            }
            Packet::Evd { typ, payload } => {
                self.evd(typ & 0x1f, payload)?;
                self.advance();
                Ok(None)
            }
            Packet::Cfe { typ, vector, ip } => {
                let r = self.cfe(typ & 0x1f, vector, ip)?;
                self.advance();
                Ok(r)
            }
            Packet::Trig {
                trbv,
                icnt,
                mult,
                ip,
            } => {
                if ip {
                    // A TRIG with an IP fires at the FUP's IP, so its count must be 0.
                    if icnt != Some(0) {
                        return Err(Error::Decode(DecodeError::BadPacket));
                    }
                    let ev = Event::new(Kind::Trig {
                        trbv,
                        mult,
                        icnt: Some(0),
                        placed: true,
                    });
                    self.push(ev, bind::FUP_BOUND)?;
                    self.advance();
                    return Ok(None);
                }
                if icnt.is_some_and(|n| n != 0) && !self.enabled {
                    return Err(Error::Decode(DecodeError::BadPacket));
                }
                let mut ev = Event::new(Kind::Trig {
                    trbv,
                    mult,
                    icnt,
                    placed: false,
                });
                // With a count, the flow places it (its IP is filled in then); without, no IP.
                ev.ip = icnt.map(|_| 0);
                self.advance();
                Ok(Some(ev))
            }
            Packet::Ptw(w) => {
                let ev = Event::new(Kind::Ptwrite { payload: w.payload });
                self.advance();
                if w.ip {
                    self.push(ev, bind::FUP_BOUND)?;
                    Ok(None)
                } else {
                    Ok(Some(ev))
                }
            }
            // Event-trace, power and PTWRITE packets: not yet bound (their tests are outside
            // what this decoder covers); a PEBS block packet is not libipt's.
            _ => Err(Error::BadContext),
        }
    }

    /// EVD: the data of the CFE after it (a page fault's address, a VM exit's reason and
    /// qualification).
    fn evd(&mut self, typ: u8, payload: u64) -> Result<(), Error> {
        let waiting = self.queued(bind::CFE, |_| true);
        match typ {
            0 => {
                if waiting.is_some() {
                    return Err(Error::BadContext);
                }
                let ev = Event::new(Kind::Interrupt {
                    vector: 0,
                    cr2: Some(payload),
                });
                self.push(ev, bind::CFE)
            }
            1 | 2 => {
                let i = match waiting {
                    Some(i) => i,
                    None => {
                        let ev = Event::new(Kind::Vmexit {
                            vector: None,
                            vmxr: None,
                            vmxq: None,
                        });
                        self.push(ev, bind::CFE)?;
                        self.queue.len() - 1
                    }
                };
                let Kind::Vmexit { vmxr, vmxq, .. } = &mut self.queue[i].0.kind else {
                    return Err(Error::BadContext);
                };
                let field = if typ == 1 { vmxq } else { vmxr };
                if field.is_some() {
                    return Err(Error::BadContext);
                }
                *field = Some(payload);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// CFE: a control-flow event, bound to the FUP after it (its IP) when it has one, else
    /// to the next FUP while tracing is on, else reported with no IP.
    fn cfe(&mut self, typ: u8, vector: u8, ip: bool) -> Result<Option<Event>, Error> {
        let waiting = self
            .queued(bind::CFE, |_| true)
            .and_then(|i| self.queue.remove(i))
            .map(|(e, _)| e);
        let ev = match typ {
            1 => match waiting {
                None => Event::new(Kind::Interrupt { vector, cr2: None }),
                Some(mut e) => match &mut e.kind {
                    Kind::Interrupt { vector: v, .. } => {
                        *v = vector;
                        e
                    }
                    _ => return Err(Error::BadContext),
                },
            },
            8 | 9 => {
                let vec = (typ == 9).then_some(vector);
                match waiting {
                    None => Event::new(Kind::Vmexit {
                        vector: vec,
                        vmxr: None,
                        vmxq: None,
                    }),
                    Some(mut e) => match &mut e.kind {
                        Kind::Vmexit { vector: v, .. } => {
                            *v = vec;
                            e
                        }
                        _ => return Err(Error::BadContext),
                    },
                }
            }
            _ if waiting.is_some() => return Err(Error::BadContext),
            2 => Event::new(Kind::Iret),
            3 => Event::new(Kind::Smi),
            4 => Event::new(Kind::Rsm),
            5 => Event::new(Kind::Sipi { vector }),
            6 => Event::new(Kind::Init),
            7 => Event::new(Kind::Vmentry),
            10 => Event::new(Kind::Shutdown),
            12 => Event::new(Kind::Uintr { vector }),
            13 => Event::new(Kind::Uiret),
            14 => Event::new(Kind::Swintr { vector }),
            15 => Event::new(Kind::Syscall),
            _ => {
                if ip {
                    self.push(Event::new(Kind::Ignore), bind::FUP_BOUND)?;
                }
                return Ok(None);
            }
        };
        match ev.kind {
            // Bound to the next instruction of their kind: only a CFE.IP gives them a FUP.
            Kind::Iret | Kind::Vmentry | Kind::Shutdown | Kind::Syscall | Kind::Uiret => {
                if ip {
                    self.push(ev, bind::FUP_BOUND)?;
                    return Ok(None);
                }
                Ok(Some(ev))
            }
            Kind::Rsm | Kind::Sipi { .. } => {
                if ip {
                    return Err(Error::Decode(DecodeError::BadPacket));
                }
                if self.enabled {
                    self.push(ev, bind::FUP)?;
                    return Ok(None);
                }
                Ok(Some(ev))
            }
            _ => {
                if ip {
                    self.push(ev, bind::FUP_BOUND)?;
                    Ok(None)
                } else if self.enabled {
                    self.push(ev, bind::FUP)?;
                    Ok(None)
                } else {
                    Ok(Some(ev))
                }
            }
        }
    }

    fn release_psbend(&mut self) -> Result<Option<Event>, Error> {
        match self.dequeue(bind::PSBEND) {
            None => {
                self.advance();
                Ok(None)
            }
            Some(mut ev) => {
                if ev.kind == Kind::Placeholder {
                    ev.kind = if self.psb_enabled {
                        self.enabled = true;
                        Kind::Enabled
                    } else {
                        Kind::Disabled
                    };
                    ev.status_update = true;
                }
                ev.ip = if self.psb_enabled { self.psb_ip } else { None };
                Ok(Some(ev))
            }
        }
    }

    fn tip(&mut self, ip: crate::packet::PacketIp) -> Result<Option<Event>, Error> {
        if !self.enabled {
            return Err(Error::BadContext);
        }
        if !self.bound {
            self.last_ip.update(ip);
            self.bound = true;
            let target = if ip.compression.0 == 0 {
                None
            } else {
                self.ip()
            };
            if let Some(i) = self.queued(bind::TIP, |k| matches!(k, Kind::AsyncBranch { .. })) {
                let (mut ev, _) = self
                    .queue
                    .remove(i)
                    .unwrap_or((Event::new(Kind::Ignore), 0));
                ev.kind = Kind::AsyncBranch { to: target };
                return Ok(Some(ev));
            }
            let mut ev = Event::new(Kind::Tip);
            ev.ip = target;
            return Ok(Some(ev));
        }
        self.bound_release()
    }

    /// The events a TIP-family packet releases after its own.
    fn bound_release(&mut self) -> Result<Option<Event>, Error> {
        loop {
            match self.dequeue(bind::TIP) {
                None => {
                    self.advance();
                    return Ok(None);
                }
                Some(mut ev) => match ev.kind {
                    Kind::ExecMode(_)
                    | Kind::Iflags { .. }
                    | Kind::AsyncPaging { .. }
                    | Kind::AsyncVmcs { .. } => {
                        ev.ip = self.ip();
                        return Ok(Some(ev));
                    }
                    Kind::Ignore => continue,
                    _ => return Err(Error::BadContext),
                },
            }
        }
    }

    fn tip_pge(&mut self, ip: crate::packet::PacketIp) -> Result<Option<Event>, Error> {
        if !self.bound {
            self.last_ip.update(ip);
            self.bound = true;
            self.enabled = true;
            let mut ev = Event::new(Kind::Enabled);
            ev.ip = if ip.compression.0 == 0 {
                None
            } else {
                self.ip()
            };
            return Ok(Some(ev));
        }
        self.bound_release()
    }

    fn tip_pgd(&mut self, ip: crate::packet::PacketIp) -> Result<Option<Event>, Error> {
        if !self.bound {
            self.last_ip.update(ip);
        }
        let target = if ip.compression.0 == 0 {
            None
        } else {
            self.ip()
        };
        loop {
            match self.dequeue(bind::TIP) {
                None => {
                    if self.bound {
                        self.advance();
                        return Ok(None);
                    }
                    self.enabled = false;
                    self.advance();
                    let mut ev = Event::new(Kind::Disabled);
                    ev.ip = target;
                    return Ok(Some(ev));
                }
                Some(mut ev) => match ev.kind {
                    Kind::AsyncBranch { .. } => {
                        let at = ev.ip.unwrap_or(0);
                        ev.kind = Kind::AsyncDisabled { at };
                        ev.ip = target;
                        self.enabled = false;
                        self.bound = true;
                        return Ok(Some(ev));
                    }
                    Kind::AsyncPaging { .. }
                    | Kind::AsyncVmcs { .. }
                    | Kind::ExecMode(_)
                    | Kind::Iflags { .. } => {
                        ev.ip = None;
                        return Ok(Some(ev));
                    }
                    Kind::Ignore => continue,
                    _ => return Err(Error::BadContext),
                },
            }
        }
    }

    fn fup(&mut self, ip: crate::packet::PacketIp) -> Result<Option<Event>, Error> {
        if !self.bound {
            self.last_ip.update(ip);
        }
        if self.queued(bind::FUP_BOUND, |_| true).is_some() {
            self.bound = true;
        }
        loop {
            match self.dequeue(bind::FUP | bind::FUP_BOUND) {
                None => {
                    if self.bound {
                        self.advance();
                        return Ok(None);
                    }
                    let from = match self.last_ip.query() {
                        Ok(ip) => ip,
                        Err(NoIp::None) => return Err(Error::NoIp),
                        Err(NoIp::Suppressed) => return Err(Error::IpSuppressed),
                    };
                    let mut ev = Event::new(Kind::AsyncBranch { to: None });
                    ev.ip = Some(from);
                    self.push(ev, bind::TIP)?;
                    self.advance();
                    return Ok(None);
                }
                Some(mut ev) => {
                    if ev.kind == Kind::Ignore {
                        continue;
                    }
                    ev.ip = match ev.kind {
                        Kind::Rsm | Kind::Sipi { .. } => None,
                        _ => self.ip(),
                    };
                    if ev.kind == Kind::Overflow {
                        self.enabled = true;
                    }
                    return Ok(Some(ev));
                }
            }
        }
    }

    fn ovf(&mut self) -> Result<Option<Event>, Error> {
        if let Some(mut ev) = self.dequeue(bind::PSBEND) {
            if ev.kind == Kind::Placeholder {
                if !self.psb_enabled {
                    return self.ovf();
                }
                ev.kind = Kind::Enabled;
                ev.status_update = true;
                self.enabled = true;
            }
            ev.ip = if self.psb_enabled { self.psb_ip } else { None };
            return Ok(Some(ev));
        }
        // Events still waiting for a FUP or a TIP: with tracing off they happened where no
        // IP is known; with tracing on, the overflow lost where they bound.
        if !self.enabled {
            while let Some((mut ev, _)) = self.queue.pop_front() {
                match ev.kind {
                    Kind::Tsx { .. }
                    | Kind::ExecMode(_)
                    | Kind::Iflags { .. }
                    | Kind::Exstop
                    | Kind::Mwait { .. }
                    | Kind::Ptwrite { .. }
                    | Kind::Interrupt { .. }
                    | Kind::Iret
                    | Kind::Smi
                    | Kind::Init
                    | Kind::Vmentry
                    | Kind::Vmexit { .. }
                    | Kind::Shutdown
                    | Kind::Uintr { .. }
                    | Kind::Uiret
                    | Kind::Swintr { .. }
                    | Kind::Syscall
                    | Kind::Trig { .. } => {
                        ev.ip = None;
                        return Ok(Some(ev));
                    }
                    Kind::Pwre { .. } | Kind::Rsm | Kind::Sipi { .. } => return Ok(Some(ev)),
                    _ => {}
                }
            }
        }
        self.tcal.on_ovf(self.keep_tcal_on_ovf);
        self.reset();
        // Where tracing resumed: a FUP before any packet that would need tracing on.
        let mut look = self.clone();
        look.advance();
        let scan: Result<bool, Error> = loop {
            match look.cur {
                Cur::End => break Ok(false),
                Cur::Invalid(_) => {
                    look.advance_invalid();
                    continue;
                }
                Cur::Packet(p, _) => match p {
                    Packet::Tip {
                        kind: TipKind::Fup, ..
                    } => break Ok(true),
                    Packet::Mnt(_)
                    | Packet::Cbr(_)
                    | Packet::Tsc(_)
                    | Packet::Tma { .. }
                    | Packet::Mtc(_)
                    | Packet::Cyc(_) => look.advance(),
                    Packet::PsbEnd
                    | Packet::Tnt(_)
                    | Packet::Tip {
                        kind: TipKind::Tip | TipKind::TipPgd,
                        ..
                    } => break Err(Error::BadContext),
                    _ => break Ok(false),
                },
            }
        };
        match scan {
            Ok(true) => {
                if self.errata.apl12
                    && let Some(after) = self.apl12(look.pos)
                {
                    // APL12: a FUP after the overflow while tracing was in fact off.
                    self.pos = after;
                    self.bound = false;
                    self.fetch();
                    return Ok(Some(Event::new(Kind::Overflow)));
                }
                // The overflow keeps its own time, not its FUP's.
                let mut ev = Event::new(Kind::Overflow);
                ev.tsc = self.now();
                self.push(ev, bind::FUP_BOUND)?;
                self.advance();
                Ok(None)
            }
            found => {
                if self.errata.skd010
                    && let Some(ev) = self.skd010()?
                {
                    return Ok(Some(ev));
                }
                if found == Err(Error::BadContext)
                    && self.errata.apl11
                    && let Some(after) = self.apl11()
                {
                    // APL11: tracing went off (a TIP.PGD) after the overflow without a FUP:
                    // resume after the TIP.PGD, disabled.
                    self.pos = after;
                    self.bound = false;
                    self.fetch();
                    return Ok(Some(Event::new(Kind::Overflow)));
                }
                found?;
                self.advance();
                Ok(Some(Event::new(Kind::Overflow)))
            }
        }
    }

    /// Whether the PSB+ at the current packet of `look` has a FUP.
    fn psb_has_fup(look: &Events<'_>) -> Option<u64> {
        let mut l = look.clone();
        l.last_ip = LastIp::default();
        l.advance();
        loop {
            match l.cur {
                Cur::Packet(Packet::PsbEnd, _) | Cur::Packet(Packet::Ovf, _) => return None,
                Cur::Packet(
                    Packet::Tip {
                        kind: TipKind::Fup,
                        ip,
                    },
                    _,
                ) => {
                    l.last_ip.update(ip);
                    return l.last_ip.query().ok();
                }
                Cur::Packet(..) => l.advance(),
                _ => return None,
            }
        }
    }

    /// SKD010: an overflow after which tracing resumed without a FUP. Finds where it
    /// resumed (a later FUP, TIP, TIP.PGD or PSB+ FUP) and moves there; `None`: not this
    /// erratum.
    fn skd010(&mut self) -> Result<Option<Event>, Error> {
        let mut look = self.clone();
        look.advance();
        let mut tsx: Option<Event> = None;
        loop {
            let Cur::Packet(p, len) = look.cur else {
                return Ok(None);
            };
            match p {
                Packet::Tip {
                    kind: TipKind::TipPgd,
                    ..
                } => {
                    self.pos = look.pos + len;
                    self.bound = false;
                    self.fetch();
                    return Ok(Some(Event::new(Kind::Overflow)));
                }
                Packet::Tip {
                    kind: kind @ (TipKind::Fup | TipKind::Tip),
                    ip,
                } => {
                    let mut last = LastIp::default();
                    last.update(ip);
                    let mut ev = Event::new(Kind::Overflow);
                    ev.ip = last.query().ok();
                    self.enabled = true;
                    self.last_ip = last;
                    self.bound = false;
                    match tsx {
                        // The FUP is read again for the transaction's event.
                        Some(t) if kind == TipKind::Fup => {
                            self.pos = look.pos;
                            self.push(t, bind::FUP_BOUND)?;
                        }
                        _ => self.pos = look.pos + len,
                    }
                    self.fetch();
                    return Ok(Some(ev));
                }
                Packet::Psb => {
                    let Some(ip) = Self::psb_has_fup(&look) else {
                        return Ok(None);
                    };
                    let mut ev = Event::new(Kind::Overflow);
                    ev.ip = Some(ip);
                    self.enabled = true;
                    self.pos = look.pos;
                    self.bound = false;
                    self.fetch();
                    return Ok(Some(ev));
                }
                Packet::ModeTsx { intx, abort } => {
                    if tsx.is_some() {
                        return Ok(None);
                    }
                    tsx = Some(Event::new(Kind::Tsx {
                        speculative: intx,
                        aborted: abort,
                    }));
                    look.advance();
                }
                Packet::PsbEnd => return Err(Error::BadContext),
                Packet::Pip { .. }
                | Packet::Vmcs(_)
                | Packet::ModeExec { .. }
                | Packet::Pad
                | Packet::Mnt(_)
                | Packet::Pwre { .. }
                | Packet::Pwrx { .. }
                | Packet::Evd { .. }
                | Packet::Trig { .. }
                | Packet::Tsc(_)
                | Packet::Tma { .. }
                | Packet::Mtc(_)
                | Packet::Cyc(_)
                | Packet::Cbr(_) => look.advance(),
                Packet::Exstop { ip: false }
                | Packet::Ptw(crate::packet::Ptw { ip: false, .. })
                | Packet::Cfe { ip: false, .. } => look.advance(),
                _ => return Ok(None),
            }
        }
    }

    /// APL12's scan after the FUP at `fup` that follows an OVF: the offset after that FUP if
    /// what comes next says tracing was off (a PSB+ without FUP, a TraceStop, a TIP.PGE).
    fn apl12(&self, fup: usize) -> Option<usize> {
        let mut look = self.clone();
        look.pos = fup;
        look.fetch();
        let Cur::Packet(_, fup_len) = look.cur else {
            return None;
        };
        look.advance();
        loop {
            let Cur::Packet(p, _) = look.cur else {
                return None;
            };
            match p {
                Packet::Tnt(_)
                | Packet::Tip {
                    kind: TipKind::Tip | TipKind::TipPgd,
                    ..
                } => return None,
                Packet::Psb => {
                    return Self::psb_has_fup(&look).is_none().then_some(fup + fup_len);
                }
                Packet::Stop
                | Packet::Tip {
                    kind: TipKind::TipPge,
                    ..
                } => return Some(fup + fup_len),
                Packet::PsbEnd | Packet::Ovf => return None,
                _ => look.advance(),
            }
        }
    }

    /// APL11's scan after an OVF: the offset after the TIP.PGD that ended tracing, if the
    /// packets up to it are only timing and maintenance.
    fn apl11(&self) -> Option<usize> {
        let mut look = self.clone();
        look.advance();
        loop {
            match look.cur {
                Cur::Packet(p, len) => match p {
                    Packet::Tip {
                        kind: TipKind::TipPgd,
                        ..
                    } => return Some(look.pos + len),
                    Packet::Mnt(_)
                    | Packet::Cbr(_)
                    | Packet::Tsc(_)
                    | Packet::Tma { .. }
                    | Packet::Mtc(_)
                    | Packet::Cyc(_)
                    | Packet::Cfe { .. }
                    | Packet::Evd { .. }
                    | Packet::Trig { .. } => look.advance(),
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    fn advance_invalid(&mut self) {
        self.pos += 1;
        self.fetch();
    }
}
