//! The instruction flow: the code a trace ran through, instruction by instruction, from the
//! events of [`crate::events`] and the code of an [`Image`]. Conditional branches take TNT
//! bits, indirect branches and far transfers take TIPs, a `ret` takes a TNT bit when the
//! return was compressed (and then goes where its call came from), and every event is placed
//! before or after the instruction it belongs to, as libipt's decoders place them, so the
//! output reads as ptxed's.

use std::collections::VecDeque;
use std::rc::Rc;

use crate::events::{self, Event, Events, Kind};
use crate::image::Image;
use crate::insn::{Class, ExecMode, Insn, decode_insn};

/// Why the flow stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Event(events::Error),
    /// No code at the address.
    Nomap,
    /// The bytes at the address are no instruction.
    BadInsn,
    /// The trace does not say what the code needs (a TIP where a TNT came, ...).
    BadQuery,
    RetstackEmpty,
    BadRetcomp,
    NoEnable,
    BadPacket,
    /// A walk without trace that does not end (a loop of direct jumps).
    TooLong,
}

impl Error {
    /// libipt's words.
    pub fn as_str(self) -> &'static str {
        match self {
            Error::Event(e) => e.as_str(),
            Error::Nomap => "no memory mapped at this address",
            Error::BadInsn => "unknown instruction",
            Error::BadQuery => "trace stream does not match query",
            Error::RetstackEmpty => "compressed return without call",
            Error::BadRetcomp => "bad compressed return",
            Error::NoEnable => "expected tracing enabled event",
            Error::BadPacket => "unknown packet",
            Error::TooLong => "internal error",
        }
    }
}

/// What a resync gives: a status to go on with, or an event that must be reported before
/// resyncing again (a PTWRITE without IP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resync {
    Status(Status),
    EventIgnored,
}

/// What the caller must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// An event is due: fetch it with [`Flow::event`] before going on.
    pub pending: bool,
    /// Tracing is off.
    pub suppressed: bool,
    /// The trace ended.
    pub eos: bool,
}

/// The return stack of compressed returns: 64 entries, the oldest dropped when full.
#[derive(Debug, Clone, Default)]
struct RetStack(VecDeque<u64>);

impl RetStack {
    fn push(&mut self, ip: u64) {
        if self.0.len() == 64 {
            self.0.pop_front();
        }
        self.0.push_back(ip);
    }
}

/// An instruction an event may still bind to (a MOV CR3 for a PIP, a branch for a TIP.PGD).
#[derive(Debug, Clone, Copy)]
struct Postponed {
    insn: Insn,
    paging: bool,
    vmcs: bool,
    ptwrite: bool,
    /// The event-trace events of an instruction's kind already bound to it ([`kind_bit`]).
    kinds: u8,
}

/// The bit of an event that binds to the next instruction of its kind (an IRET, a VMLAUNCH,
/// an INT, a SYSCALL) when it has no IP.
fn kind_bit(k: &Kind) -> Option<u8> {
    match k {
        Kind::Iret => Some(1),
        Kind::Vmentry => Some(2),
        Kind::Uiret => Some(4),
        Kind::Swintr { .. } => Some(8),
        Kind::Syscall => Some(16),
        _ => None,
    }
}

/// The most decoded instructions kept: a trace's hot code is decoded once (a loop's second
/// pass is a lookup), and memory stays bounded whatever the code.
const CACHE_MAX: usize = 1 << 20;

/// The longest x86 instruction.
const MAX_INSN: usize = 15;

/// The most instructions a walk without trace takes before it is called endless.
const WALK_MAX: usize = 1 << 20;

/// How blocks end, beyond libipt's defaults (ptxed's `--block:end-on-call`,
/// `--block:end-on-jump`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    pub end_on_call: bool,
    pub end_on_jump: bool,
    /// Report a tick where the time moved on at a branch (ptxed's `--event:tick`).
    pub ticks: bool,
    /// The address filters the trace was recorded with (IA32_RTIT_CTL.ADDRn_CFG and the
    /// ranges): 1 a FilterEn range, 2 a TraceStop range; SKL014 needs them.
    pub filters: [(u8, u64, u64); 4],
    /// Hand out a pass of a run at a time: no loop's passes taken at once, no runs chained
    /// (what tests compare the flow with).
    #[doc(hidden)]
    pub pass_at_a_time: bool,
    /// The chain cache's slots, log2 (0: the default, 4096 slots): tests make it small so
    /// that chains evict each other.
    #[doc(hidden)]
    pub chain_slots_log2: u8,
}

impl Config {
    /// Whether the filters trace code at `ip`.
    fn traced(&self, ip: u64) -> bool {
        let inside = |&&(_, a, b): &&(u8, u64, u64)| (a..=b).contains(&ip);
        if self.filters.iter().filter(|f| f.0 == 2).any(|f| inside(&f)) {
            return false;
        }
        let mut en = self.filters.iter().filter(|f| f.0 == 1).peekable();
        en.peek().is_none() || en.any(|f| inside(&f))
    }
}

pub struct Flow<'a> {
    pub config: Config,
    ev: Events<'a>,
    /// A copy (sharing the code's bytes): sideband replaces it as processes map code and
    /// switch.
    image: Image,
    enabled: bool,
    ip: u64,
    mode: Option<ExecMode>,
    speculative: bool,
    ret: RetStack,
    e: Option<Event>,
    status: Option<events::Error>,
    p: Option<Postponed>,
    /// Instructions since the last event that gave the flow's position: what a TRIG's
    /// instruction count counts from (`None`: no such event since a disable).
    icnt: Option<u64>,
    /// Whether the last block ended with a branch (BDM64's condition), and with which.
    last_was_branch: bool,
    last_class: Option<Class>,
    /// The time of the last event consumed: a tick is due where the time has moved on.
    last_tsc: Option<u64>,
    /// Instructions walked since the last event was consumed: a walk without trace is
    /// bounded by [`WALK_MAX`] whatever ends its blocks.
    walked: usize,
    /// Decoded instructions by address and mode, for the current image.
    cache: std::cell::RefCell<rustc_hash::FxHashMap<(u64, ExecMode), Insn>>,
    /// The runs walked from an address and mode ([`Run`]), by their index in `runs`: a
    /// loop's pass is a lookup and a copy, not an instruction at a time.
    run_at: rustc_hash::FxHashMap<(u64, ExecMode), u32>,
    runs: Vec<Run>,
    /// The instructions `runs` hold, with one for each too long ([`RUNS_INSNS_MAX`]).
    runs_insns: usize,
    /// The last run walked (its address, mode and index): a loop walks the same again.
    last_run: Option<(u64, ExecMode, u32)>,
    /// Chains of runs ([`Chain`]) by their first run and the TNT bits that lead through
    /// them, direct-mapped (empty until first used): a path the trace took before is one
    /// lookup for up to [`CHAIN_BITS`] runs, and memory stays bounded by the slots whatever
    /// the trace.
    chains: Vec<ChainSlot>,
    /// The runs of a chain being recorded and their passes.
    chain_scratch: Vec<(u32, u32)>,
}

/// The runs a TNT's bits lead through from a run, each ending in a conditional branch
/// (no call, nothing else taken from the trace): what [`Flow::follow_runs`] walks a run at
/// a time, recorded the second time the same bits lead from the same run, then handed out
/// whole. It depends only on the code (the runs it holds and their branches), so it stays
/// as long as the runs do.
#[derive(Debug)]
struct Chain {
    /// The runs and their passes in a row.
    parts: Box<[(Rc<[Insn]>, u32)]>,
    /// The passes (blocks) and instructions in all.
    blocks: u64,
    insns: u64,
    /// Its last instruction.
    last: Insn,
    /// Its last run: where it starts and its index (what [`Flow::last_run`] becomes).
    at: u64,
    run: u32,
    /// Where the flow goes after it.
    ip: u64,
    /// The configuration's block ends its runs were made under.
    ends: (bool, bool),
}

/// A slot of the chain cache: a key (`EMPTY_KEY` for none) and its chain, or none when
/// the key was seen once (recorded the next time it is seen: a path the trace never takes
/// again costs no recording).
#[derive(Clone, Default)]
struct ChainSlot {
    key: u64,
    chain: Option<Rc<Chain>>,
}

/// A key no chain has: its first run would be [`NO_RUN`].
const EMPTY_KEY: u64 = u64::MAX;

/// The chain cache's slots by default, log2: 4096 chains of at most [`CHAIN_BITS`] runs.
const CHAIN_SLOTS_LOG2: u8 = 12;

/// The most TNT bits (runs) a chain is recorded for: enough bits that a long TNT's 47 take
/// few lookups, few enough that a loop's paths repeat. Chains of half as many are kept too,
/// for paths that repeat only a byte at a time (random outcomes).
const CHAIN_BITS: u8 = 16;

/// The instructions [`Flow::next`] walks from one address without trace: up to the first
/// that needs trace, or that ends a block by the configuration. The same every time from
/// there (the image and the configuration it was made under stay; a new image clears them).
struct Run {
    /// Shared with the blocks that hand them out: a block refers to its run, it does not
    /// copy it.
    insns: Rc<[Insn]>,
    /// Whether it holds a call (the return stack takes its return address).
    calls: bool,
    /// The configuration's `end_on_call` and `end_on_jump` it was made under.
    ends: (bool, bool),
    /// Where the flow went after it (an address, in the same mode, and the run from there):
    /// a conditional branch's two ways, or the last two of an indirect branch's.
    next: [(u64, u32); 2],
    /// Its last instruction, at hand (a dummy when it has none).
    last: Insn,
}

impl Run {
    /// The run the flow went to from this one at `ip`, if known.
    fn successor(&self, ip: u64) -> Option<u32> {
        match self.next {
            [(at, n), _] | [_, (at, n)] if at == ip && n != NO_RUN => Some(n),
            _ => None,
        }
    }
}

/// No run: a [`Run::next`] not known yet.
const NO_RUN: u32 = u32::MAX;

/// The longest run kept (a longer one is walked an instruction at a time, and remembered as
/// too long: an empty run).
const RUN_MAX: usize = 4096;

/// The most instructions the runs hold together (then they are made again): memory bounded
/// whatever the code and the trace (runs from every address of a long stretch overlap).
const RUNS_INSNS_MAX: usize = 1 << 20;

/// The instructions one call of [`Flow::next`] walked: those walked one at a time, or kept
/// runs of them (not copied) as the TNT's bits lead from one to the next while nothing else
/// is due, each once or, for a loop whose bits lead back to its run's start, several times
/// over: a block each time, as libipt's block decoder hands them out one at a time.
#[derive(Debug, Default, Clone)]
pub struct Block {
    /// The instructions walked one at a time (empty when `runs` is not).
    insns: Vec<Insn>,
    /// Or kept runs and chains of them, in order.
    runs: Vec<Piece>,
    /// The runs `runs` holds (a loop's few runs are held once each, not a refcount each
    /// pass).
    distinct: Vec<Rc<[Insn]>>,
    pub speculative: bool,
}

/// A part of a [`Block`] of runs.
#[derive(Debug, Clone)]
enum Piece {
    /// A run (an index into `distinct`) walked its count of times in a row.
    Run(u32, u32),
    /// A chain of runs, shared with the cache it came from.
    Chain(Rc<Chain>),
}

impl Block {
    /// The blocks this one stands for, each its instructions in order: one, or the passes
    /// of runs.
    pub fn blocks(&self) -> impl Iterator<Item = &[Insn]> {
        let single = self.runs.is_empty().then_some(&self.insns[..]);
        let passes = self.runs.iter().flat_map(|p| {
            let (run, chain) = match p {
                Piece::Run(r, n) => (Some((&self.distinct[*r as usize][..], *n)), None),
                Piece::Chain(c) => (None, Some(c.parts.iter().map(|(r, n)| (&r[..], *n)))),
            };
            run.into_iter().chain(chain.into_iter().flatten())
        });
        single
            .into_iter()
            .chain(passes.flat_map(|(insns, n)| std::iter::repeat_n(insns, n as usize)))
    }

    /// How many blocks [`Block::blocks`] gives and their instructions in all, without
    /// walking a chain's passes.
    pub fn counts(&self) -> (u64, u64) {
        if self.runs.is_empty() {
            return (1, self.insns.len() as u64);
        }
        self.runs.iter().fold((0, 0), |(b, i), p| match p {
            Piece::Run(r, n) => (
                b + u64::from(*n),
                i + self.distinct[*r as usize].len() as u64 * u64::from(*n),
            ),
            Piece::Chain(c) => (b + c.blocks, i + c.insns),
        })
    }

    /// All the instructions, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Insn> {
        self.blocks().flatten()
    }

    /// How many instructions.
    pub fn len(&self) -> u64 {
        self.counts().1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last instruction.
    pub fn last(&self) -> Option<&Insn> {
        match self.runs.last() {
            Some(Piece::Run(run, _)) => self.distinct[*run as usize].last(),
            Some(Piece::Chain(c)) => Some(&c.last),
            None => self.insns.last(),
        }
    }

    fn clear(&mut self) {
        self.insns.clear();
        self.runs.clear();
        self.distinct.clear();
    }

    fn push(&mut self, insn: Insn) {
        debug_assert!(self.runs.is_empty(), "a block of runs takes no more");
        self.insns.push(insn);
    }

    /// Adds `passes` passes of `run`.
    fn push_run(&mut self, run: &Rc<[Insn]>, passes: u32) {
        debug_assert!(
            self.insns.is_empty(),
            "a block of instructions takes no runs"
        );
        let d = self.distinct.len();
        // One of the last two runs held (a loop of one or two runs), or a new one.
        let index = if d > 0 && Rc::ptr_eq(&self.distinct[d - 1], run) {
            d - 1
        } else if d > 1 && Rc::ptr_eq(&self.distinct[d - 2], run) {
            d - 2
        } else {
            self.distinct.push(Rc::clone(run));
            d
        } as u32;
        match self.runs.last_mut() {
            Some(Piece::Run(last, n)) if *last == index => *n += passes,
            _ => self.runs.push(Piece::Run(index, passes)),
        }
    }

    /// Adds a chain's passes.
    fn push_chain(&mut self, chain: &Rc<Chain>) {
        debug_assert!(
            self.insns.is_empty(),
            "a block of instructions takes no runs"
        );
        self.runs.push(Piece::Chain(Rc::clone(chain)));
    }
}

impl<'a> Flow<'a> {
    pub fn new(buf: &'a [u8], image: &Image) -> Self {
        Flow {
            config: Config::default(),
            ev: Events::new(buf),
            image: image.clone(),
            enabled: false,
            ip: 0,
            mode: None,
            speculative: false,
            ret: RetStack::default(),
            e: None,
            status: None,
            p: None,
            icnt: None,
            last_was_branch: false,
            last_class: None,
            last_tsc: None,
            walked: 0,
            cache: Default::default(),
            run_at: Default::default(),
            runs: Vec::new(),
            runs_insns: 0,
            last_run: None,
            chains: Vec::new(),
            chain_scratch: Vec::new(),
        }
    }

    /// Times events with the trace's clock configuration.
    pub fn set_clock(&mut self, clock: crate::timing::ClockConfig, keep_tcal_on_ovf: bool) {
        self.ev.clock = clock;
        self.ev.keep_tcal_on_ovf = keep_tcal_on_ovf;
    }

    /// Decodes from now on from `image`, as ptxed does when sideband switches processes or
    /// maps code into the current one.
    pub fn set_image(&mut self, image: Image) {
        self.image = image;
        self.cache.get_mut().clear();
        self.forget_runs();
    }

    /// Reports changes of the interrupt flag as events.
    pub fn set_iflags(&mut self, on: bool) {
        self.ev.iflags = on;
    }

    /// Decodes with the workarounds for `errata`.
    pub fn set_errata(&mut self, errata: crate::errata::Errata) {
        self.ev.errata = errata;
    }

    /// The trace offset the decoder stands on.
    /// The last TSC the trace gave (with the packet the decode last took), if any.
    pub fn last_tsc(&self) -> Option<u64> {
        self.last_tsc
    }

    pub fn offset(&self) -> usize {
        self.ev.offset()
    }

    pub fn ip(&self) -> u64 {
        self.ip
    }

    /// Moves past the current event: what it says of the flow's position anchors a TRIG's
    /// count.
    fn consume(&mut self) {
        if let Some(e) = self.e {
            self.anchor(&e);
            self.last_tsc = e.tsc;
        }
        self.walked = 0;
        self.fetch_e();
    }

    fn anchor(&mut self, e: &Event) {
        match e.kind {
            Kind::Paging { .. }
            | Kind::Sipi { .. }
            | Kind::Cbr(_)
            | Kind::Mnt(_)
            | Kind::Stop
            | Kind::Vmcs { .. }
            | Kind::Mwait { .. }
            | Kind::Pwre { .. }
            | Kind::Pwrx { .. }
            | Kind::Ignore
            | Kind::Placeholder => {}
            Kind::Enabled | Kind::AsyncBranch { .. } | Kind::Tip | Kind::Tnt { .. } => {
                self.icnt = Some(0)
            }
            Kind::Disabled | Kind::AsyncDisabled { .. } => self.icnt = None,
            Kind::Overflow => self.icnt = e.ip.map(|_| 0),
            _ => {
                if e.ip.is_some() {
                    self.icnt = Some(0);
                }
            }
        }
    }

    fn fetch_e(&mut self) {
        match self.ev.next_event() {
            Ok(e) => self.e = Some(e),
            Err(err) => {
                self.e = None;
                self.status = Some(err);
            }
        }
    }

    fn flags(&self, pending: bool) -> Status {
        Status {
            pending,
            suppressed: !self.enabled,
            eos: self.status == Some(events::Error::Eos),
        }
    }

    /// Syncs onto the next PSB and reads its header.
    pub fn sync(&mut self) -> Result<Status, Error> {
        self.reset();
        self.ev.sync_forward().map_err(Error::Event)?;
        self.after_psb()
    }

    fn reset(&mut self) {
        self.enabled = false;
        self.ip = 0;
        self.mode = None;
        self.speculative = false;
        self.ret = RetStack::default();
        self.e = None;
        self.status = None;
        self.p = None;
        self.icnt = None;
        self.walked = 0;
    }

    /// After an error, goes on at the next event that says where the flow is, as ptxed's
    /// `--resync-on-error` does, instead of at the next PSB.
    pub fn resync(&mut self) -> Result<Resync, Error> {
        self.p = None;
        loop {
            if let Some(s) = self.status {
                return Err(Error::Event(s));
            }
            let Some(e) = self.e else {
                return Err(Error::Event(events::Error::Internal));
            };
            if e.status_update {
                // The header again from its PSB, its status applied now: a header that
                // contradicts the flow is the resync's own error.
                self.reset();
                self.ev.resync_at_last_psb().map_err(Error::Event)?;
                let mut st = self.after_psb()?;
                while st.pending && self.e.is_some_and(|e| e.status_update) {
                    st = self.event()?.2;
                }
                return Ok(Resync::Status(st));
            }
            let pending = |f: &Self| Ok(Resync::Status(f.flags(true)));
            match e.kind {
                Kind::Enabled => {
                    self.enabled = false;
                    return pending(self);
                }
                Kind::Disabled => {
                    self.enabled = false;
                    self.ip = 0;
                    self.consume();
                    return self.trailing(false).map(Resync::Status);
                }
                Kind::AsyncDisabled { at } => {
                    self.ip = at;
                    return pending(self);
                }
                Kind::AsyncBranch { .. } | Kind::AsyncPaging { .. } | Kind::AsyncVmcs { .. }
                    if e.ip.is_some() =>
                {
                    self.ip = e.ip.unwrap_or(0);
                    return pending(self);
                }
                Kind::Overflow => return pending(self),
                Kind::ExecMode(_)
                | Kind::Tsx { .. }
                | Kind::Iflags { .. }
                | Kind::Interrupt { .. } => {
                    match e.ip {
                        None => self.enabled = false,
                        Some(ip) => {
                            self.enabled = true;
                            self.ip = ip;
                        }
                    }
                    return pending(self);
                }
                Kind::Exstop
                | Kind::Mwait { .. }
                | Kind::Iret
                | Kind::Smi
                | Kind::Rsm
                | Kind::Init
                | Kind::Vmexit { .. }
                | Kind::Shutdown
                | Kind::Uintr { .. }
                | Kind::Swintr { .. }
                | Kind::Syscall
                    if e.ip.is_some() =>
                {
                    self.ip = e.ip.unwrap_or(0);
                    return pending(self);
                }
                Kind::Vmentry | Kind::Uiret if e.ip.is_some() => {
                    self.ip = e.ip.unwrap_or(0);
                    return Ok(Resync::Status(self.flags(false)));
                }
                Kind::Ptwrite { .. } => match e.ip {
                    None => return Ok(Resync::EventIgnored),
                    Some(ip) => {
                        self.ip = ip;
                        return Ok(Resync::Status(self.flags(false)));
                    }
                },
                Kind::Tip => {
                    self.ip = e.ip.unwrap_or(0);
                    self.consume();
                    return self.trailing(false).map(Resync::Status);
                }
                _ => {}
            }
            // An event that says nothing of where the flow is: skip it.
            self.consume();
        }
    }

    /// After a PSB's header: the flow enabled where it says, and its first event.
    fn after_psb(&mut self) -> Result<Status, Error> {
        let mut look = self.ev.clone();
        while let Ok(e) = look.next_event() {
            if !e.status_update {
                break;
            }
            if e.kind == Kind::Enabled {
                self.enabled = true;
                self.ip = e.ip.unwrap_or(0);
                break;
            }
        }
        self.fetch_e();
        self.trailing(false)
    }

    fn decode_at(&self, ip: u64) -> Result<Insn, Error> {
        let mode = self.mode.unwrap_or_default();
        if let Some(i) = self.cache.borrow().get(&(ip, mode)) {
            return Ok(*i);
        }
        let bytes = self.image.bytes_at(ip).ok_or(Error::Nomap)?;
        let insn = match decode_insn(bytes, ip, mode) {
            Some(i) => i,
            // Cut short by its section's end: the rest may be in the next section.
            None if bytes.len() < MAX_INSN => {
                let mut buf = [0; MAX_INSN];
                let n = self.image.read(ip, &mut buf);
                decode_insn(&buf[..n], ip, mode).ok_or(Error::BadInsn)?
            }
            None => return Err(Error::BadInsn),
        };
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert((ip, mode), insn);
        Ok(insn)
    }

    /// Where an instruction leads without trace, if it needs none.
    fn next_ip(insn: &Insn) -> Option<u64> {
        match insn.class {
            Class::Other | Class::Ptwrite => Some(insn.ip.wrapping_add(u64::from(insn.len))),
            Class::Jump { target } | Class::Call { target } => Some(target),
            _ => None,
        }
    }

    fn push_call(&mut self, insn: &Insn) {
        let ret = insn.ip.wrapping_add(u64::from(insn.len));
        match insn.class {
            Class::Call { target } if target == ret => {}
            Class::Call { .. } | Class::IndirectCall => self.ret.push(ret),
            _ => {}
        }
    }

    /// Hands out the run from the current IP ([`Run`]) in `block` (once, or a loop's passes:
    /// [`Flow::loop_passes`]), as the loop of `step`s in
    /// [`Flow::next`] would, and moves past its last instruction (taking trace if it needs
    /// some). `false`: nothing walked, the loop is to walk it (a run not made: the code is not
    /// there or does not decode, which the loop reports where it fails; a run too long or one
    /// past the walk's bound).
    fn walk_run(&mut self, block: &mut Block) -> Result<bool, Error> {
        let mode = self.mode.unwrap_or_default();
        let ends = (self.config.end_on_call, self.config.end_on_jump);
        let prev = self.last_run;
        // Whether the last run is known to lead here (nothing to record).
        let mut known = true;
        let found = match prev {
            Some((ip, m, i)) if ip == self.ip && m == mode => Some(i),
            // Where the last run led before: a table lookup, not a hash.
            Some((_, m, i)) if m == mode => match self.runs[i as usize].next {
                [(ip, n), _] | [_, (ip, n)] if ip == self.ip && n != NO_RUN => Some(n),
                _ => {
                    known = false;
                    self.run_at.get(&(self.ip, mode)).copied()
                }
            },
            _ => self.run_at.get(&(self.ip, mode)).copied(),
        };
        let index = match found {
            Some(i) if self.runs[i as usize].ends == ends => i as usize,
            _ => {
                known = false;
                match self.make_run(self.ip, mode) {
                    Some(i) => i,
                    None => return Ok(false),
                }
            }
        };
        // The last run leads here (unless the runs were made again since).
        if !known
            && let Some((_, m, i)) = prev
            && m == mode
            && self.last_run == prev
        {
            let next = &mut self.runs[i as usize].next;
            let slot = usize::from(next[0].1 != NO_RUN && next[0].0 != self.ip);
            next[slot] = (self.ip, index as u32);
        }
        self.last_run = Some((self.ip, mode, index as u32));
        let run = &self.runs[index];
        let n = run.insns.len();
        // Too long to keep, or past the walk's bound: the loop walks it (and says where).
        if n == 0 || self.walked + n > WALK_MAX {
            return Ok(false);
        }
        let calls = run.calls;
        let last = run.last;
        if calls {
            let insns = Rc::clone(&run.insns);
            for insn in insns.iter() {
                self.push_call(insn);
            }
        }
        let passes = if calls { 1 } else { self.loop_passes(&last, n) };
        block.push_run(&self.runs[index].insns, passes);
        let walked = n * passes as usize;
        self.walked += walked;
        if let Some(c) = &mut self.icnt {
            *c += walked as u64;
        }
        // Where the loop would stand: on the last instruction (an error there is said there).
        self.ip = last.ip;
        match Self::next_ip(&last) {
            Some(ip) => self.ip = ip,
            None => self.resolve(&last)?,
        }
        Ok(true)
    }

    /// How many passes of a run of `n` instructions from the current IP, ending in `last`,
    /// the current TNT takes at once: while its bits lead back to the run's start, and
    /// bits stay for after each pass, each pass is what [`Flow::next`] would walk again
    /// (the same run, nothing due between: [`Flow::trailing`]'s first case). Takes the bits
    /// of all the passes but the last (whose bit the caller takes, as for one pass): at
    /// least 1.
    fn loop_passes(&mut self, last: &Insn, n: usize) -> u32 {
        let Class::CondJump { target } = last.class else {
            return 1;
        };
        if self.config.ticks
            || self.config.pass_at_a_time
            || self.p.is_some()
            || self.status.is_some()
        {
            return 1;
        }
        let start = self.ip;
        let fall = last.ip.wrapping_add(u64::from(last.len));
        // The outcome that leads back, if one does (either, a branch to its fall-through).
        let back = match (target == start, fall == start) {
            (true, true) => None,
            (true, false) => Some(true),
            (false, true) => Some(false),
            (false, false) => return 1,
        };
        let Some(Event {
            kind: Kind::Tnt { bits, count },
            ..
        }) = &mut self.e
        else {
            return 1;
        };
        let c = u32::from(*count);
        if c < 2 {
            return 1;
        }
        // The bits left, the oldest first, in the top bits.
        let top = *bits << (64 - c);
        let same = match back {
            None => c,
            Some(true) => top.leading_ones(),
            Some(false) => top.leading_zeros(),
        };
        // The walk's bound, as a pass at a time checks it (the first pass is within it).
        let room = ((WALK_MAX - self.walked) / n).max(1);
        let passes = (same + 1).min(c).min(room as u32);
        *count -= (passes - 1) as u8;
        passes
    }

    /// Follows the runs the TNT's bits lead to, as [`Flow::walk_run`] would walk them a pass
    /// at a time, while each is known to follow the last ([`Run::next`]), ends in a
    /// conditional branch and needs nothing else (no call, within the walk's bound); not a
    /// run's passes again (`walk_run` takes them at once) unless a chain holds them. Up to
    /// [`CHAIN_BITS`] bits at a time, else a byte's: a [`Chain`] of runs the same bits led
    /// through from the same run before is handed out whole, and one seen once is recorded
    /// as it is walked. Whether it followed any.
    fn follow_runs(&mut self, block: &mut Block) -> bool {
        let Some((mut at, mode, mut i)) = self.last_run else {
            return false;
        };
        if Some(mode) != self.mode.or(Some(ExecMode::default())) {
            return false;
        }
        let ends = (self.config.end_on_call, self.config.end_on_jump);
        let (bits, mut count) = match self.e {
            Some(Event {
                kind: Kind::Tnt { bits, count },
                ..
            }) => (bits, count),
            _ => return false,
        };
        if self.chains.is_empty() {
            let log2 = match self.config.chain_slots_log2 {
                0 => CHAIN_SLOTS_LOG2,
                n => n.min(24),
            };
            self.chains.resize(
                1 << log2,
                ChainSlot {
                    key: EMPTY_KEY,
                    chain: None,
                },
            );
        }
        let shift = 64 - self.chains.len().trailing_zeros();
        let mut any = false;
        'chunks: while count > 0 {
            // A loop's passes are walk_run's to take at once, unless a chain has them.
            let looped = self.ip == at;
            // A run's own start is its successor ([`Run::next`] keeps only others).
            let Some(mut j) = (if looped {
                Some(i)
            } else {
                self.runs[i as usize].successor(self.ip)
            }) else {
                break;
            };
            // The longest chain first, then a byte's: paths that seldom repeat whole still
            // repeat a byte at a time. A key seen once before is recorded this time (its
            // slot and bits).
            let long = count.min(CHAIN_BITS);
            let mut record = [None; 2];
            for (n, k) in [long, count.min(CHAIN_BITS / 2)].into_iter().enumerate() {
                if n == 1 && k == long {
                    break;
                }
                let path = bits >> (count - k) & ((1 << k) - 1);
                let key = u64::from(j) << 32 | u64::from(k) << 24 | path;
                let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
                let s = &mut self.chains[slot];
                if s.key != key {
                    *s = ChainSlot { key, chain: None };
                } else if let Some(c) = &s.chain {
                    let insns = c.insns as usize;
                    // A longer path to record comes first.
                    if record[0].is_none() && c.ends == ends && self.walked + insns <= WALK_MAX {
                        block.push_chain(c);
                        count -= k;
                        self.walked += insns;
                        if let Some(ic) = &mut self.icnt {
                            *ic += insns as u64;
                        }
                        (at, i, self.ip) = (c.at, c.run, c.ip);
                        any = true;
                        continue 'chunks;
                    }
                } else {
                    record[n] = Some((slot, key, k));
                }
            }
            let recording = record.iter().any(Option::is_some);
            if looped && !recording {
                break;
            }
            // A run at a time; recorded as a chain when it was seen before and all its
            // bits lead through runs that take nothing else.
            self.chain_scratch.clear();
            let mut steps = 0;
            loop {
                let run = &self.runs[j as usize];
                let n = run.insns.len();
                if run.ends != ends || run.calls || n == 0 || self.walked + n > WALK_MAX {
                    break 'chunks;
                }
                let last = run.last;
                let Class::CondJump { target } = last.class else {
                    break 'chunks;
                };
                count -= 1;
                let taken = bits >> count & 1 == 1;
                block.push_run(&run.insns, 1);
                self.walked += n;
                if let Some(c) = &mut self.icnt {
                    *c += n as u64;
                }
                (at, i) = (self.ip, j);
                self.ip = if taken {
                    target
                } else {
                    last.ip.wrapping_add(u64::from(last.len))
                };
                any = true;
                steps += 1;
                if recording {
                    match self.chain_scratch.last_mut() {
                        Some((r, passes)) if *r == j => *passes += 1,
                        _ => self.chain_scratch.push((j, 1)),
                    }
                    for &(slot, key, k) in record.iter().flatten() {
                        // The slot still the key's (the other key may have taken it).
                        if k == steps && self.chains[slot].key == key {
                            let chain = self.make_chain(at, i, ends);
                            self.chains[slot].chain = Some(chain);
                        }
                    }
                }
                // A loop's passes are walk_run's to take at once, unless recorded here.
                if steps == long || (!recording && self.ip == at) {
                    break;
                }
                if self.ip != at {
                    match self.runs[j as usize].successor(self.ip) {
                        Some(next) => j = next,
                        None => break 'chunks,
                    }
                }
            }
        }
        if let Some(Event {
            kind: Kind::Tnt { count: c, .. },
            ..
        }) = &mut self.e
        {
            *c = count;
        }
        if any {
            self.last_run = Some((at, mode, i));
        }
        any
    }

    /// The chain of the runs recorded in `chain_scratch`, the last of them `i` (from `at`),
    /// the flow now past it.
    fn make_chain(&self, at: u64, i: u32, ends: (bool, bool)) -> Rc<Chain> {
        let (mut blocks, mut insns) = (0, 0);
        let parts = self
            .chain_scratch
            .iter()
            .map(|&(r, passes)| {
                let run = &self.runs[r as usize].insns;
                blocks += u64::from(passes);
                insns += run.len() as u64 * u64::from(passes);
                (Rc::clone(run), passes)
            })
            .collect();
        Rc::new(Chain {
            parts,
            blocks,
            insns,
            last: self.runs[i as usize].last,
            at,
            run: i,
            ip: self.ip,
            ends,
        })
    }

    /// Makes the run from `ip` in `mode` and keeps it (one longer than [`RUN_MAX`] kept as
    /// too long: no instructions); its index, or `None` if it cannot be made whole
    /// (undecodable code on the way, which the loop reports where it is).
    fn make_run(&mut self, ip: u64, mode: ExecMode) -> Option<usize> {
        let mut insns = Vec::new();
        let mut at = ip;
        loop {
            if insns.len() >= RUN_MAX {
                insns.clear();
                break;
            }
            let insn = self.decode_at(at).ok()?;
            insns.push(insn);
            match Self::next_ip(&insn) {
                Some(next) if !self.ends_block(&insn) => at = next,
                _ => break,
            }
        }
        if self.runs_insns + insns.len() + 1 > RUNS_INSNS_MAX {
            self.forget_runs();
        }
        self.runs_insns += insns.len() + 1;
        let calls = insns
            .iter()
            .any(|i| matches!(i.class, Class::Call { .. } | Class::IndirectCall));
        self.runs.push(Run {
            last: insns.last().copied().unwrap_or(Insn {
                ip: 0,
                len: 0,
                class: Class::Other,
            }),
            insns: insns.into(),
            calls,
            ends: (self.config.end_on_call, self.config.end_on_jump),
            next: [(0, NO_RUN); 2],
        });
        let index = self.runs.len() - 1;
        self.run_at.insert((ip, mode), index as u32);
        Some(index)
    }

    fn forget_runs(&mut self) {
        self.run_at.clear();
        self.runs.clear();
        self.runs_insns = 0;
        self.last_run = None;
        // Chains name runs by index: they go with them (the capacity stays).
        self.chains.clear();
    }

    /// Decodes the instruction at the current IP into the block.
    fn step(&mut self, block: &mut Block) -> Result<Insn, Error> {
        if self.walked >= WALK_MAX {
            return Err(Error::TooLong);
        }
        self.walked += 1;
        let insn = self.decode_at(self.ip)?;
        block.push(insn);
        self.push_call(&insn);
        if let Some(n) = &mut self.icnt {
            *n += 1;
        }
        Ok(insn)
    }

    /// The next instructions, up to the next branch that needs trace or the next event.
    pub fn next(&mut self, block: &mut Block) -> Result<Status, Error> {
        block.clear();
        block.speculative = self.speculative;
        if let Some(s) = self.status {
            if s != events::Error::Eos {
                return Err(Error::Event(s));
            }
            if !self.enabled {
                return Err(Error::Event(s));
            }
            return Ok(self.flags(false));
        }
        let Some(e) = self.e else {
            return Err(Error::Event(events::Error::Internal));
        };
        match e.kind {
            Kind::Tnt { .. } | Kind::Tip => {
                if !self.enabled {
                    return Err(Error::NoEnable);
                }
                if self.walk_run(block)? {
                    // On to the next run while the TNT has bits for it and nothing else is
                    // due ([`Flow::trailing`]'s first case): what the next call would walk,
                    // a block of its own in the caller's hands.
                    while !self.config.pass_at_a_time
                        && self.nothing_due()
                        && (self.follow_runs(block) || self.walk_run(block)?)
                    {}
                } else {
                    loop {
                        let insn = self.step(block)?;
                        match Self::next_ip(&insn) {
                            Some(ip) => {
                                self.ip = ip;
                                if self.ends_block(&insn) {
                                    break;
                                }
                            }
                            None => {
                                self.resolve(&insn)?;
                                break;
                            }
                        }
                    }
                }
                self.last_class = block.last().map(|i| i.class);
                self.last_was_branch = self
                    .last_class
                    .is_some_and(|c| !matches!(c, Class::Other | Class::Ptwrite));
                self.trailing(true)
            }
            _ => self.proceed_to_event(e, block),
        }
    }

    /// Moves past an instruction that needs trace, taking it from the current event.
    fn resolve(&mut self, insn: &Insn) -> Result<(), Error> {
        let fall = insn.ip.wrapping_add(u64::from(insn.len));
        match insn.class {
            Class::CondJump { target } => {
                let taken = self.take_bit()?;
                self.ip = if taken { target } else { fall };
                Ok(())
            }
            Class::Return => {
                if matches!(
                    self.e,
                    Some(Event {
                        kind: Kind::Tnt { .. },
                        ..
                    })
                ) {
                    if !self.take_bit()? {
                        return Err(Error::BadRetcomp);
                    }
                    self.ip = self.ret.0.pop_back().ok_or(Error::RetstackEmpty)?;
                    Ok(())
                } else {
                    self.indirect(insn.ip)
                }
            }
            _ => self.indirect(insn.ip),
        }
    }

    fn take_bit(&mut self) -> Result<bool, Error> {
        match &mut self.e {
            Some(Event {
                kind: Kind::Tnt { bits, count },
                ..
            }) if *count > 0 => {
                *count -= 1;
                Ok(*bits >> *count & 1 == 1)
            }
            _ => Err(Error::BadQuery),
        }
    }

    fn indirect(&mut self, at: u64) -> Result<(), Error> {
        match self.e {
            Some(
                e @ Event {
                    kind: Kind::Tip,
                    ip,
                    ..
                },
            ) => {
                self.ip = ip.ok_or(Error::BadPacket)?;
                if self.config.ticks && e.tsc.is_some() && e.tsc != self.last_tsc {
                    // The time moved on at this branch: a tick, reported after it.
                    self.e = Some(Event {
                        kind: Kind::Tick,
                        ip: Some(at),
                        ..e
                    });
                } else {
                    self.consume();
                }
                Ok(())
            }
            Some(Event {
                kind: Kind::Tnt { .. },
                ..
            }) => {
                // A TIP after a TNT whose bits are not all taken yet: the TIP is this
                // branch's, the TNT stays for the branches after it.
                let mut look = self.ev.clone();
                match look.next_event() {
                    Ok(Event {
                        kind: Kind::Tip,
                        ip,
                        ..
                    }) => {
                        self.ip = ip.ok_or(Error::BadPacket)?;
                        self.ev = look;
                        self.icnt = Some(0);
                        Ok(())
                    }
                    _ => Err(Error::BadQuery),
                }
            }
            _ => Err(Error::BadQuery),
        }
    }

    /// Moves past the postponed instruction, if any.
    fn proceed_p(&mut self) -> Result<(), Error> {
        if let Some(p) = self.p.take()
            && self.enabled
        {
            match Self::next_ip(&p.insn) {
                Some(ip) => self.ip = ip,
                None => self.resolve(&p.insn)?,
            }
        }
        Ok(())
    }

    /// The case of [`Flow::trailing`] a block ends in most: a TNT with bits left for the
    /// next, nothing else pending.
    fn nothing_due(&self) -> bool {
        self.status.is_none()
            && self.p.is_none()
            && !self.config.ticks
            && matches!(self.e, Some(Event { kind: Kind::Tnt { count, .. }, .. }) if count > 0)
    }

    /// Whether the current event is due at the current position (after a block, an event
    /// or a sync).
    fn trailing(&mut self, after_block: bool) -> Result<Status, Error> {
        // Most blocks end in a branch whose TNT has bits left for the next: nothing is due
        // (what the loop below says of it, without copying the event out).
        if self.nothing_due() {
            return Ok(self.flags(false));
        }
        loop {
            if self.status.is_some() {
                self.proceed_p()?;
                let eos = self.status == Some(events::Error::Eos);
                return Ok(self.flags(!eos));
            }
            let Some(e) = self.e else {
                return Ok(self.flags(false));
            };
            let due = match e.kind {
                Kind::Tnt { count, .. } => {
                    if self.config.ticks && after_block && e.tsc.is_some() && e.tsc != self.last_tsc
                    {
                        // The branch that took its first bit moved the time on: a tick.
                        matches!(
                            self.last_class,
                            Some(Class::CondJump { .. } | Class::Return)
                        )
                    } else if count > 0 {
                        false
                    } else {
                        self.consume();
                        continue;
                    }
                }
                Kind::Tick => {
                    self.proceed_p()?;
                    true
                }
                Kind::Tip | Kind::Ignore | Kind::Placeholder => false,
                Kind::Enabled
                | Kind::Overflow
                | Kind::Stop
                | Kind::Cbr(_)
                | Kind::Mnt(_)
                | Kind::Pwre { .. }
                | Kind::Pwrx { .. } => {
                    self.proceed_p()?;
                    true
                }
                Kind::Exstop
                | Kind::Mwait { .. }
                | Kind::Interrupt { .. }
                | Kind::Smi
                | Kind::Init
                | Kind::Vmexit { .. }
                | Kind::Shutdown
                | Kind::Uintr { .. } => {
                    self.proceed_p()?;
                    !self.enabled || e.ip.is_none() || e.ip == Some(self.ip)
                }
                Kind::Rsm | Kind::Sipi { .. } => {
                    self.proceed_p()?;
                    true
                }
                Kind::Trig { .. } => {
                    self.proceed_p()?;
                    if !self.enabled || e.ip.is_none() {
                        true
                    } else {
                        let n = self.trig_anchor()?;
                        if n != 0 {
                            false
                        } else if self.e.and_then(|e| e.ip) != Some(self.ip) {
                            return Err(Error::BadPacket);
                        } else {
                            true
                        }
                    }
                }
                Kind::Iret | Kind::Vmentry | Kind::Uiret | Kind::Swintr { .. } | Kind::Syscall => {
                    let bit = kind_bit(&e.kind).unwrap_or(0);
                    if !self.enabled {
                        true
                    } else {
                        match self.p {
                            Some(mut p)
                                if p.kinds & bit == 0
                                    && e.ip.is_none()
                                    && self.insn_is(&p.insn, bit) =>
                            {
                                p.kinds |= bit;
                                self.p = Some(p);
                                true
                            }
                            _ => false,
                        }
                    }
                }
                Kind::Ptwrite { .. } => {
                    if !self.enabled {
                        true
                    } else {
                        match self.p {
                            Some(mut p)
                                if !p.ptwrite
                                    && e.ip.is_none()
                                    && p.insn.class == Class::Ptwrite =>
                            {
                                p.ptwrite = true;
                                self.p = Some(p);
                                true
                            }
                            _ => false,
                        }
                    }
                }
                Kind::Disabled => {
                    if e.status_update {
                        true
                    } else {
                        match self.p {
                            None => false,
                            Some(p) => return self.disabled_at_p(e, p),
                        }
                    }
                }
                Kind::AsyncDisabled { at } => {
                    self.proceed_p()?;
                    if self.ip == at && self.skd022(e) {
                        continue;
                    }
                    self.ip == at
                }
                Kind::AsyncBranch { .. } => {
                    self.proceed_p()?;
                    Some(self.ip) == e.ip
                }
                Kind::Paging { .. } | Kind::Vmcs { .. } => {
                    if !self.enabled {
                        true
                    } else {
                        let paging = matches!(e.kind, Kind::Paging { .. });
                        match self.p {
                            Some(mut p)
                                if (paging && !p.paging && self.binds_pip(&p.insn))
                                    || (!paging && !p.vmcs && self.binds_vmcs(&p.insn)) =>
                            {
                                if paging {
                                    p.paging = true;
                                } else {
                                    p.vmcs = true;
                                }
                                self.p = Some(p);
                                true
                            }
                            _ => false,
                        }
                    }
                }
                Kind::Tsx { aborted: true, .. }
                    if after_block && self.last_was_branch && self.bdm64(e.ip) =>
                {
                    // BDM64: the branch before a TSX abort went to a wrong target; the abort
                    // is where the flow is.
                    self.ip = e.ip.unwrap_or(self.ip);
                    true
                }
                Kind::AsyncPaging { .. } | Kind::AsyncVmcs { .. } | Kind::Tsx { .. } => {
                    self.proceed_p()?;
                    e.ip.is_none() || e.ip == Some(self.ip)
                }
                Kind::ExecMode(_) | Kind::Iflags { .. } => {
                    self.proceed_p()?;
                    !self.enabled || e.ip.is_none() || e.ip == Some(self.ip)
                }
            };
            if !due {
                self.proceed_p()?;
            }
            return Ok(self.flags(due));
        }
    }

    /// A synchronous disable with an instruction postponed for it.
    fn disabled_at_p(&mut self, e: Event, p: Postponed) -> Result<Status, Error> {
        if e.ip.is_none() && self.is_mov_cr3(&p.insn) {
            return Ok(self.flags(true));
        }
        match Self::next_ip(&p.insn) {
            None => {
                self.ip = Self::resume_ip(&p.insn);
                Ok(self.flags(true))
            }
            Some(ip) => {
                self.p = None;
                self.ip = ip;
                Ok(self.flags(e.ip == Some(ip)))
            }
        }
    }

    /// BDM64: whether a TSX abort at `at` cannot be reached from the flow's IP by 256
    /// instructions that need no trace (so the branch before it went astray), with the
    /// erratum on.
    fn bdm64(&self, at: Option<u64>) -> bool {
        let Some(at) = at else {
            return false;
        };
        if !self.ev.errata.bdm64 {
            return false;
        }
        let mut ip = self.ip;
        for _ in 0..256 {
            if ip == at {
                return false;
            }
            match self.decode_at(ip).ok().as_ref().and_then(Self::next_ip) {
                Some(next) => ip = next,
                None => return true,
            }
        }
        ip != at
    }

    /// Places a counted TRIG the first time the flow meets it: its count, given from the
    /// anchor, becomes a count from here (the IP 0 the event layer gave it marks this). The
    /// count left.
    fn trig_anchor(&mut self) -> Result<u64, Error> {
        let since = self.icnt;
        let ip = self.ip;
        let Some(Event {
            kind: Kind::Trig { icnt, placed, .. },
            ip: eip,
            ..
        }) = &mut self.e
        else {
            return Ok(0);
        };
        let n = u64::from(icnt.unwrap_or(0));
        if !*placed && icnt.is_some() {
            *placed = true;
            let since = since.ok_or(Error::BadPacket)?;
            let left = n.checked_sub(since).ok_or(Error::BadPacket)?;
            *icnt = Some(left as u16);
            *eip = Some(ip);
            return Ok(left);
        }
        Ok(n)
    }

    /// Whether `insn` is of the kind an event-trace event binds to ([`kind_bit`]).
    fn insn_is(&self, insn: &Insn, bit: u8) -> bool {
        use iced_x86::Mnemonic as M;
        let m = self.mnemonic_at(insn.ip);
        match bit {
            1 => matches!(
                m,
                M::Iret | M::Iretd | M::Iretq | M::Sysret | M::Sysexit | M::Erets | M::Eretu
            ),
            2 => matches!(m, M::Vmlaunch | M::Vmresume),
            4 => m == M::Uiret,
            8 => matches!(m, M::Int | M::Int1 | M::Int3 | M::Into),
            16 => matches!(m, M::Syscall | M::Sysenter),
            _ => false,
        }
    }

    /// The full decoding of the instruction at `ip`, for the few questions the classes do
    /// not answer (MOV CR3, VMLAUNCH, the event-trace kinds): the mnemonic, or `INVALID`.
    fn full_insn(&self, ip: u64) -> iced_x86::Instruction {
        use iced_x86::{Decoder, DecoderOptions};
        let mut buf = [0; MAX_INSN];
        let n = self.image.read(ip, &mut buf);
        let mode = self.mode.unwrap_or_default();
        Decoder::with_ip(mode.bitness(), &buf[..n], ip, DecoderOptions::NONE).decode()
    }

    fn mnemonic_at(&self, ip: u64) -> iced_x86::Mnemonic {
        self.full_insn(ip).mnemonic()
    }

    fn is_mov_cr3(&self, insn: &Insn) -> bool {
        use iced_x86::{Mnemonic, OpKind, Register};
        let i = self.full_insn(insn.ip);
        i.mnemonic() == Mnemonic::Mov
            && i.op0_kind() == OpKind::Register
            && i.op0_register() == Register::CR3
    }

    fn binds_pip(&self, insn: &Insn) -> bool {
        matches!(
            insn.class,
            Class::FarCall | Class::FarReturn | Class::FarJump
        ) || self.is_mov_cr3(insn)
    }

    fn binds_vmcs(&self, insn: &Insn) -> bool {
        matches!(
            insn.class,
            Class::FarCall | Class::FarReturn | Class::FarJump
        )
    }

    /// Where tracing resumes after a disable bound to `insn`: after a call (the callee
    /// returns there), else unknown.
    fn resume_ip(insn: &Insn) -> u64 {
        match insn.class {
            Class::Call { .. } | Class::IndirectCall | Class::FarCall => {
                insn.ip.wrapping_add(u64::from(insn.len))
            }
            _ => 0,
        }
    }

    /// Whether a block ends after this instruction by the configuration.
    fn ends_block(&self, insn: &Insn) -> bool {
        match insn.class {
            Class::Call { .. } => self.config.end_on_call,
            Class::Jump { .. } => self.config.end_on_jump,
            _ => false,
        }
    }

    /// Walks without trace to `to`; an instruction that needs trace on the way is an error.
    /// `false`: the block ended before, by the configuration.
    fn walk_to(&mut self, to: u64, block: &mut Block) -> Result<bool, Error> {
        while self.ip != to {
            let insn = self.step(block)?;
            self.ip = Self::next_ip(&insn).ok_or(Error::BadQuery)?;
            if self.ends_block(&insn) && self.ip != to {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A block that ends where the current (non-branch) event binds.
    fn proceed_to_event(&mut self, e: Event, block: &mut Block) -> Result<Status, Error> {
        match e.kind {
            Kind::Disabled if !e.status_update => {
                // Walk to the disable's IP, or to the instruction it binds to: one that
                // needs trace, or a MOV CR3 when the IP is suppressed.
                loop {
                    if e.ip == Some(self.ip) {
                        break;
                    }
                    let insn = self.step(block)?;
                    // SKL014: a disable without IP may belong to a direct branch that left
                    // the filtered range.
                    let skl014 = e.ip.is_none()
                        && self.ev.errata.skl014
                        && self.config.filters.iter().any(|f| f.0 != 0)
                        && matches!(insn.class, Class::Jump { target } | Class::Call { target }
                            if !self.config.traced(target));
                    let needs = Self::next_ip(&insn).is_none() || skl014;
                    if needs || (e.ip.is_none() && self.is_mov_cr3(&insn)) {
                        if needs {
                            self.ip = Self::resume_ip(&insn);
                        }
                        break;
                    }
                    self.ip = Self::next_ip(&insn).unwrap_or(0);
                    if self.ends_block(&insn) && e.ip != Some(self.ip) {
                        return self.trailing(true);
                    }
                }
            }
            Kind::AsyncDisabled { at } => {
                if !self.walk_to(at, block)? {
                    return self.trailing(true);
                }
                if self.skd022(e)
                    && let Some(e) = self.e
                {
                    return self.proceed_to_event(e, block);
                }
            }
            Kind::AsyncBranch { .. } => {
                return self.walk_to_event(e.ip.unwrap_or(self.ip), block);
            }
            Kind::Paging { .. } | Kind::Vmcs { .. } if self.enabled => {
                let paging = matches!(e.kind, Kind::Paging { .. });
                loop {
                    let insn = self.step(block)?;
                    let binds = if paging {
                        self.binds_pip(&insn)
                    } else {
                        self.binds_vmcs(&insn)
                    };
                    if binds {
                        self.p = Some(Postponed {
                            insn,
                            paging,
                            vmcs: !paging,
                            ptwrite: false,
                            kinds: 0,
                        });
                        break;
                    }
                    self.ip = Self::next_ip(&insn).ok_or(Error::BadQuery)?;
                }
            }
            Kind::Exstop | Kind::Mwait { .. } if self.enabled => {
                if let Some(ip) = e.ip {
                    return self.walk_to_event(ip, block);
                }
            }
            Kind::Ptwrite { .. } if self.enabled => {
                // The PTWRITE instruction itself is printed, then its event.
                let insn = match e.ip {
                    Some(ip) => {
                        if !self.walk_to(ip, block)? {
                            return self.trailing(true);
                        }
                        self.step(block)?
                    }
                    None => loop {
                        let insn = self.step(block)?;
                        if insn.class == Class::Ptwrite {
                            break insn;
                        }
                        self.ip = Self::next_ip(&insn).ok_or(Error::BadQuery)?;
                    },
                };
                self.p = Some(Postponed {
                    insn,
                    paging: false,
                    vmcs: false,
                    ptwrite: true,
                    kinds: 0,
                });
            }
            Kind::Iret | Kind::Vmentry | Kind::Uiret | Kind::Swintr { .. } | Kind::Syscall
                if self.enabled =>
            {
                let bit = kind_bit(&e.kind).unwrap_or(0);
                let after = matches!(e.kind, Kind::Swintr { .. } | Kind::Syscall);
                let insn = match e.ip {
                    // An INT or SYSCALL at the IP was not executed (the FUP's asynchronous
                    // branch comes from it): the event follows the instruction before it.
                    Some(ip) if after => {
                        if !self.walk_to(ip, block)? {
                            return self.trailing(true);
                        }
                        block.insns.last().copied()
                    }
                    Some(ip) => {
                        if !self.walk_to(ip, block)? {
                            return self.trailing(true);
                        }
                        Some(self.step(block)?)
                    }
                    None => Some(loop {
                        let insn = self.step(block)?;
                        if self.insn_is(&insn, bit) {
                            break insn;
                        }
                        self.ip = Self::next_ip(&insn).ok_or(Error::BadQuery)?;
                    }),
                };
                self.p = insn.map(|insn| Postponed {
                    insn,
                    paging: false,
                    vmcs: false,
                    ptwrite: false,
                    kinds: bit,
                });
                if after && e.ip.is_some() {
                    // Nothing postponed to move past: the flow stands at the IP.
                    self.p = None;
                }
            }
            Kind::Interrupt { .. }
            | Kind::Smi
            | Kind::Init
            | Kind::Vmexit { .. }
            | Kind::Shutdown
            | Kind::Uintr { .. } => {
                if let Some(ip) = e.ip {
                    return self.walk_to_event(ip, block);
                }
            }
            Kind::Trig { .. } if e.ip.is_some() => {
                let mut n = self.trig_anchor()?;
                if self.enabled {
                    let at = self.e.and_then(|e| e.ip).unwrap_or(self.ip);
                    if !self.walk_to(at, block)? {
                        return self.trailing(true);
                    }
                    // The trigger fired `n` instructions further on.
                    while n > 0 {
                        let insn = self.step(block)?;
                        self.ip = Self::next_ip(&insn).ok_or(Error::BadQuery)?;
                        n -= 1;
                        if let Some(Event {
                            kind: Kind::Trig { icnt, .. },
                            ip,
                            ..
                        }) = &mut self.e
                        {
                            *icnt = Some(n as u16);
                            *ip = Some(self.ip);
                        }
                    }
                }
            }
            Kind::AsyncPaging { .. }
            | Kind::AsyncVmcs { .. }
            | Kind::ExecMode(_)
            | Kind::Iflags { .. }
            | Kind::Tsx { .. } => {
                if let Some(ip) = e.ip {
                    return self.walk_to_event(ip, block);
                }
            }
            _ => {}
        }
        Ok(self.flags(true))
    }

    /// SKD022: an asynchronous disable reported at a VMLAUNCH or VMRESUME is the
    /// instruction's own (synchronous) disable. Turns the current event into it.
    fn skd022(&mut self, e: Event) -> bool {
        use iced_x86::Mnemonic;
        let Kind::AsyncDisabled { at } = e.kind else {
            return false;
        };
        if !self.ev.errata.skd022 {
            return false;
        }
        if !matches!(
            self.mnemonic_at(at),
            Mnemonic::Vmlaunch | Mnemonic::Vmresume
        ) {
            return false;
        }
        self.e = Some(Event {
            kind: Kind::Disabled,
            ..e
        });
        true
    }

    /// Walks to an event's IP: the event is then due, unless the block ended before it.
    fn walk_to_event(&mut self, ip: u64, block: &mut Block) -> Result<Status, Error> {
        if self.walk_to(ip, block)? {
            Ok(self.flags(true))
        } else {
            self.trailing(true)
        }
    }

    /// The due event: applied to the flow and handed out, with whether an enable resumed
    /// where tracing stopped.
    pub fn event(&mut self) -> Result<(Event, bool, Status), Error> {
        if let Some(s) = self.status {
            return Err(Error::Event(s));
        }
        let e = self.e.ok_or(Error::Event(events::Error::Internal))?;
        let mut resumed = false;
        let ip_ok = |ip: u64| e.ip.is_none_or(|x| x == ip);
        match e.kind {
            Kind::Enabled => {
                resumed = e.ip == Some(self.ip);
                if e.status_update {
                    if !self.enabled {
                        return Err(Error::Event(events::Error::BadStatusUpdate));
                    }
                } else {
                    let ip = e.ip.ok_or(Error::Event(events::Error::NoIp))?;
                    if self.enabled {
                        return Err(Error::Event(events::Error::BadContext));
                    }
                    self.ip = ip;
                    self.enabled = true;
                }
            }
            Kind::Disabled => {
                if e.status_update {
                    if self.enabled {
                        return Err(Error::Event(events::Error::BadStatusUpdate));
                    }
                } else {
                    if !self.enabled {
                        return Err(Error::Event(events::Error::BadContext));
                    }
                    self.enabled = false;
                }
            }
            Kind::AsyncDisabled { at } => {
                if self.ip != at {
                    return Err(Error::BadQuery);
                }
                if !self.enabled {
                    return Err(Error::Event(events::Error::BadContext));
                }
                self.enabled = false;
            }
            Kind::AsyncBranch { to } => {
                if e.ip != Some(self.ip) {
                    return Err(Error::BadQuery);
                }
                if !self.enabled {
                    return Err(Error::Event(events::Error::BadContext));
                }
                self.ip = to.unwrap_or(0);
            }
            Kind::AsyncPaging { .. } | Kind::AsyncVmcs { .. } if !ip_ok(self.ip) => {
                return Err(Error::BadQuery);
            }
            Kind::Overflow => {
                match e.ip {
                    None => {
                        self.enabled = false;
                        self.ip = 0;
                    }
                    Some(ip) => {
                        self.enabled = true;
                        self.ip = ip;
                    }
                }
                self.speculative = false;
            }
            Kind::ExecMode(m) => {
                if self.enabled && !ip_ok(self.ip) {
                    return Err(Error::BadQuery);
                }
                if e.status_update
                    && self.enabled
                    && self.mode.is_some()
                    && m.is_some()
                    && self.mode != m
                {
                    return Err(Error::Event(events::Error::BadStatusUpdate));
                }
                self.mode = m;
            }
            Kind::Tsx { speculative, .. } => {
                if !ip_ok(self.ip) {
                    return Err(Error::BadQuery);
                }
                self.speculative = speculative;
            }
            Kind::Stop if self.enabled => {
                return Err(Error::Event(events::Error::BadContext));
            }
            Kind::Exstop
            | Kind::Mwait { .. }
            | Kind::Iflags { .. }
            | Kind::Interrupt { .. }
            | Kind::Smi
            | Kind::Init
            | Kind::Vmexit { .. }
            | Kind::Shutdown
            | Kind::Uintr { .. }
            | Kind::Swintr { .. }
            | Kind::Syscall
            | Kind::Trig { .. }
                if self.enabled && !ip_ok(self.ip) =>
            {
                return Err(Error::BadQuery);
            }
            Kind::Tnt { count, .. } => {
                if !self.config.ticks || e.tsc.is_none() || e.tsc == self.last_tsc {
                    return Err(Error::BadQuery);
                }
                let tick = Event {
                    kind: Kind::Tick,
                    ip: Some(self.ip),
                    ..e
                };
                self.last_tsc = e.tsc;
                if count == 0 {
                    self.consume();
                }
                let st = self.trailing(false)?;
                return Ok((tick, false, st));
            }
            Kind::Tip => return Err(Error::BadQuery),
            _ => {}
        }
        self.consume();
        let st = self.trailing(false)?;
        Ok((e, resumed, st))
    }
}
