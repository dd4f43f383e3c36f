//! libipt's `ptxed --no-inst`: the addresses of the instructions a trace executed and the
//! events between them, from a raw trace and raw code images, line for line as ptxed prints
//! them, so its users and libipt's tests can compare with `diff -b`. With perf_event sideband,
//! each event also moves the sideband on, which may change the code decoded
//! ([`crate::ptxed_sideband`]).

use std::io::{self, Write};

use crate::args::{Input, clock_option, parse_c_number, parse_cpu};
use crate::errata::Errata;
use crate::events::{Event, Kind};
use crate::flow::{Block, Error, Flow, Status};
use crate::image::{Image, Section};
use crate::insn::{Class, ExecMode, Insn};
use crate::packet::cstate;
use crate::ptdump_sideband::PeventArgs;
use crate::ptxed_sideband::{Session, Sideband};

/// ptxed's options that this decoder implements.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub quiet: bool,
    pub event_ip: bool,
    /// `--stat`, and which statistics `--stat:insn`, `--stat:blocks` chose.
    pub stat: bool,
    pub stat_insn: bool,
    pub stat_blocks: bool,
    /// ptxed's default decoder is the block decoder; its statistics count blocks too.
    pub insn_decoder: bool,
    /// `--block:show-blocks`: a `[block]` line before each block.
    pub show_blocks: bool,
    pub flow: crate::flow::Config,
    pub resync_on_error: bool,
    /// `--event:iflags`.
    pub iflags: bool,
    /// `--event:time`: an event's TSC before it.
    pub event_time: bool,
    pub clock: crate::timing::ClockConfig,
    pub keep_tcal_on_ovf: bool,
    pub cpu: Option<crate::errata::Cpu>,
}

/// The trace and the code, as the command line gives them.
pub struct Setup {
    pub options: Options,
    pub image: Image,
    pub trace: Vec<u8>,
    /// perf_event sideband (`--pevent:*`, `--sb:*`): the processes' code over time.
    pub sideband: Sideband,
}

fn raw_section(arg: &str) -> Result<Section, String> {
    let (file, base) = arg
        .rsplit_once(':')
        .ok_or_else(|| format!("--raw {arg}: expected FILE[:FROM[-TO]]:BASE"))?;
    let base = parse_c_number(base).ok_or_else(|| format!("--raw {arg}: bad base address"))?;
    let input = Input::parse(file)?;
    Ok(Section {
        base,
        bytes: input.load()?,
        name: input.path,
    })
}

/// `--elf FILE[:BASE]`'s sections: a suffix that is not a number is part of the name.
fn elf_arg(v: &str) -> Result<Vec<Section>, String> {
    let (path, base) = match v.rsplit_once(':') {
        Some((p, b)) if parse_c_number(b).is_some() => (p, parse_c_number(b)),
        _ => (v, None),
    };
    crate::image::elf_sections(path, base)
}

/// ptxed's command line (without the program name).
pub fn parse_args(args: &[String]) -> Result<Setup, String> {
    let mut o = Options::default();
    let mut image = Image::default();
    let mut trace = None;
    let mut sideband = Sideband::default();
    let mut pevent = PeventArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a}: missing argument"));
        match a.as_str() {
            "--raw" => image.add(raw_section(value()?)?),
            "--elf" => {
                for s in elf_arg(value()?)? {
                    image.add(s);
                }
            }
            "--pevent:kcore" => {
                for s in elf_arg(value()?)? {
                    sideband.kernel.add(s);
                }
            }
            "--sb:switch" => sideband.switch = true,
            // ptdump's name for a primary file; ptxed wants to be told which it is.
            "--pevent" => return Err(format!("{a}: use --pevent:primary or --pevent:secondary")),
            "--pt" => trace = Some(Input::parse(value()?)?.load()?),
            "--cpu" => o.cpu = parse_cpu(value()?)?,
            "--no-inst" | "--check" => {}
            "--insn-decoder" => o.insn_decoder = true,
            "--block:show-blocks" => o.show_blocks = true,
            "--resync-on-error" => o.resync_on_error = true,
            "--event:iflags" => o.iflags = true,
            f if f.starts_with("--filter:addr") => {
                // --filter:addrN_cfg, --filter:addrN_a, --filter:addrN_b
                let rest = &f["--filter:addr".len()..];
                let (n, what) = rest
                    .split_once('_')
                    .ok_or_else(|| format!("{f}: not a filter option"))?;
                let n: usize = n
                    .parse()
                    .ok()
                    .filter(|&n| n < 4)
                    .ok_or_else(|| format!("{f}: the filters are addr0 to addr3"))?;
                let v = parse_c_number(value()?).ok_or_else(|| format!("{f}: bad number"))?;
                let slot = &mut o.flow.filters[n];
                match what {
                    "cfg" => slot.0 = v as u8,
                    "a" => slot.1 = v,
                    "b" => slot.2 = v,
                    _ => return Err(format!("{f}: not a filter option")),
                }
            }
            "--block:end-on-call" => o.flow.end_on_call = true,
            "--block:end-on-jump" => o.flow.end_on_jump = true,
            "--block-decoder" => o.insn_decoder = false,
            "--quiet" | "-q" => o.quiet = true,
            "--event:ip" => o.event_ip = true,
            "--stat" => o.stat = true,
            "--stat:insn" => {
                o.stat = true;
                o.stat_insn = true;
            }
            "--stat:blocks" => {
                o.stat = true;
                o.stat_blocks = true;
            }
            "--event:time" => o.event_time = true,
            "--event:tick" => o.flow.ticks = true,
            "--insn:keep-tcal-on-ovf" | "--block:keep-tcal-on-ovf" => o.keep_tcal_on_ovf = true,
            _ if clock_option(a, &mut it, &mut o.clock)? => {}
            _ if pevent.parse(a, &mut it, &mut sideband.options)? => {}
            _ => return Err(format!("{a}: not supported (yet)")),
        }
    }
    Ok(Setup {
        options: o,
        image,
        trace: trace.ok_or("no trace given (--pt FILE)")?,
        sideband,
    })
}

fn mode_name(m: Option<ExecMode>) -> &'static str {
    match m {
        Some(ExecMode::Bits16) => "16-bit",
        Some(ExecMode::Bits32) => "32-bit",
        Some(ExecMode::Bits64) => "64-bit",
        None => "<unknown>",
    }
}

/// The events ptxed prints as a bare name (and their IP with `--event:ip`).
fn plain_name(k: &Kind) -> Option<&'static str> {
    Some(match k {
        Kind::Disabled => "disabled",
        Kind::Overflow => "overflow",
        Kind::Iret => "iret",
        Kind::Smi => "smi",
        Kind::Rsm => "rsm",
        Kind::Init => "init",
        Kind::Vmentry => "vmentry",
        Kind::Shutdown => "shutdown",
        Kind::Uiret => "uiret",
        Kind::Syscall => "syscall",
        Kind::Tick => "tick",
        Kind::Exstop => "exstop",
        _ => return None,
    })
}

fn event_line(e: &Event, resumed: bool, o: &Options) -> String {
    let ip = |s: &mut String| {
        if o.event_ip
            && let Some(ip) = e.ip
        {
            s.push_str(&format!(", ip: {ip:016x}"));
        }
    };
    let mut s = String::new();
    if let Some(name) = plain_name(&e.kind) {
        s.push_str(name);
        ip(&mut s);
    }
    match e.kind {
        Kind::Enabled => {
            s.push_str(if resumed { "resumed" } else { "enabled" });
            if o.event_ip {
                s.push_str(&format!(", ip: {:016x}", e.ip.unwrap_or(0)));
            }
        }
        Kind::AsyncDisabled { at } => {
            s.push_str("disabled");
            if o.event_ip {
                s.push_str(&format!(", at: {at:016x}"));
                ip(&mut s);
            }
        }
        Kind::AsyncBranch { to } => {
            s.push_str("interrupt");
            if o.event_ip {
                s.push_str(&format!(", from: {:016x}", e.ip.unwrap_or(0)));
                if let Some(to) = to {
                    s.push_str(&format!(", to: {to:016x}"));
                }
            }
        }
        Kind::Paging { cr3, nr } | Kind::AsyncPaging { cr3, nr } => {
            s.push_str(&format!("paging, cr3: {cr3:016x}"));
            if nr {
                s.push_str(", nr");
            }
            if o.event_ip && matches!(e.kind, Kind::AsyncPaging { .. }) {
                s.push_str(&format!(", ip: {:016x}", e.ip.unwrap_or(0)));
            }
        }
        Kind::Vmcs { base } | Kind::AsyncVmcs { base } => {
            s.push_str(&format!("vmcs, base: {base:016x}"));
            if o.event_ip && matches!(e.kind, Kind::AsyncVmcs { .. }) {
                s.push_str(&format!(", ip: {:016x}", e.ip.unwrap_or(0)));
            }
        }
        Kind::ExecMode(m) => {
            s.push_str("exec mode: ");
            s.push_str(mode_name(m));
            ip(&mut s);
        }
        Kind::Tsx {
            speculative,
            aborted,
        } => {
            s.push_str(if aborted {
                "aborted"
            } else if speculative {
                "begin transaction"
            } else {
                "committed"
            });
            ip(&mut s);
        }
        Kind::Iflags { enabled } => {
            s.push_str(if enabled {
                "interrupts enabled"
            } else {
                "interrupts disabled"
            });
            ip(&mut s);
        }
        Kind::Interrupt { vector, cr2 } => {
            s.push_str(&format!("interrupt {vector}"));
            if let Some(cr2) = cr2 {
                s.push_str(&format!(", cr2: {cr2:016x}"));
            }
            ip(&mut s);
        }
        Kind::Sipi { vector } => s.push_str(&format!("sipi: {vector:x}")),
        Kind::Vmexit { vector, vmxr, vmxq } => {
            s.push_str("vmexit");
            if let Some(v) = vector {
                s.push_str(&format!(", intr: {v}"));
            }
            if let Some(r) = vmxr {
                s.push_str(&format!(", vmxr: {r:016x}"));
            }
            if let Some(q) = vmxq {
                s.push_str(&format!(", vmxq: {q:016x}"));
            }
            ip(&mut s);
        }
        Kind::Uintr { vector } => {
            s.push_str(&format!("uintr {vector}"));
            ip(&mut s);
        }
        Kind::Swintr { vector } => {
            s.push_str(&format!("swintr {vector}"));
            ip(&mut s);
        }
        Kind::Trig {
            trbv, mult, icnt, ..
        } => {
            s.push_str(&format!("trig {trbv:02x}"));
            if mult {
                s.push_str(", mult");
            }
            ip(&mut s);
            if let Some(n) = icnt.filter(|&n| n != 0) {
                s.push_str(&format!(", icnt: {n}"));
            }
        }
        Kind::Stop => s.push_str("stopped"),
        Kind::Mwait { hints, ext } => {
            s.push_str(&format!("mwait {hints:x} {ext:x}"));
            ip(&mut s);
        }
        Kind::Pwre {
            state,
            sub_state,
            hw,
        } => {
            s.push_str(&format!("pwre c{}.{}", cstate(state), cstate(sub_state)));
            if hw {
                s.push_str(" hw");
            }
        }
        Kind::Pwrx {
            last,
            deepest,
            interrupt,
            store,
            hw,
        } => {
            s.push_str("pwrx ");
            for (on, w) in [(interrupt, "int: "), (store, "st: "), (hw, "hw: ")] {
                if on {
                    s.push_str(w);
                }
            }
            s.push_str(&format!("c{} (c{})", cstate(last), cstate(deepest)));
        }
        Kind::Ptwrite { payload } => {
            s.push_str(&format!("ptwrite: {payload:x}"));
            ip(&mut s);
        }
        Kind::Cbr(r) => s.push_str(&format!("cbr: {r:x}")),
        Kind::Mnt(v) => s.push_str(&format!("mnt: {v:x}")),
        // The plain ones are written above; the flow's own never reach a caller.
        Kind::Disabled
        | Kind::Overflow
        | Kind::Iret
        | Kind::Smi
        | Kind::Rsm
        | Kind::Init
        | Kind::Vmentry
        | Kind::Shutdown
        | Kind::Uiret
        | Kind::Syscall
        | Kind::Tick
        | Kind::Exstop
        | Kind::Tnt { .. }
        | Kind::Tip
        | Kind::Ignore
        | Kind::Placeholder => {}
    }
    match e.tsc {
        Some(tsc) if o.event_time => format!("[{tsc:016x}  {s}]\n"),
        _ => format!("[{s}]\n"),
    }
}

/// Where an error is said to be: after the last instruction of the failing step (its
/// fall-through, or its target for a relative branch), as ptxed computes it.
fn after(insn: &Insn) -> u64 {
    match insn.class {
        Class::CondJump { target } | Class::Jump { target } | Class::Call { target } => target,
        _ => insn.ip.wrapping_add(u64::from(insn.len)),
    }
}

/// An event as ptxed takes it: printed, unless it only restates the decoder's status, then
/// given to the sideband, which may change the code the decoder reads.
fn report(
    e: &Event,
    resumed: bool,
    o: &Options,
    sideband: &mut Session<'_>,
    flow: &mut Flow<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    if !o.quiet && !e.status_update {
        out.write_all(event_line(e, resumed, o).as_bytes())?;
    }
    if let Some(image) = sideband.on_event(e, out)? {
        flow.set_image(image);
    }
    Ok(())
}

/// Decodes the whole trace, printing as ptxed does.
pub fn run(setup: &Setup, mut out: impl Write) -> io::Result<()> {
    let o = &setup.options;
    let mut flow = Flow::new(&setup.trace, &setup.image);
    let mut sideband = Session::new(&setup.sideband);
    flow.config = o.flow;
    flow.set_iflags(o.iflags);
    flow.set_clock(o.clock, o.keep_tcal_on_ovf);
    if let Some(cpu) = o.cpu {
        match Errata::of(cpu) {
            Some(e) => flow.set_errata(e),
            None => writeln!(out, "[0, 0: config error: unknown cpu]")?,
        }
    }
    sideband.start(&mut out)?;
    let mut block = Block::default();
    let (mut insns, mut blocks) = (0u64, 0u64);
    let mut last_sync_error: Option<usize> = None;
    // After an error with --resync-on-error, the status to go on with (no new sync).
    let mut resumed_st: Option<Status> = None;
    let mut last_resync_error: Option<(usize, u64)> = None;
    'outer: loop {
        let mut st: Status = if let Some(st) = resumed_st.take() {
            st
        } else {
            match flow.sync() {
                Ok(st) => st,
                Err(Error::Event(crate::events::Error::Eos)) => break,
                Err(e) => {
                    let off = flow.offset();
                    writeln!(out, "[{off:x}, 0: sync error: {}]", e.as_str())?;
                    if last_sync_error.is_some_and(|l| off <= l) {
                        break;
                    }
                    last_sync_error = Some(off);
                    continue;
                }
            }
        };
        // The IP an error from an event is said at: after the last step's instructions.
        let mut err_ip = 0u64;
        let err = loop {
            let mut failed = None;
            while st.pending {
                match flow.event() {
                    Ok((e, resumed, s)) => {
                        report(&e, resumed, o, &mut sideband, &mut flow, &mut out)?;
                        st = s;
                    }
                    Err(e) => {
                        failed = Some((e, err_ip));
                        break;
                    }
                }
            }
            if let Some(f) = failed {
                break f;
            }
            if st.eos {
                if !st.suppressed && !o.quiet {
                    writeln!(out, "[end of trace]")?;
                }
                break 'outer;
            }
            let start = flow.ip();
            let r = flow.next(&mut block);
            // A loop's passes taken at once are a block each, as libipt's are; quiet, they
            // are counted, not walked.
            if o.quiet {
                let (b, n) = block.counts();
                blocks += b;
                insns += n;
            } else {
                for part in block.blocks() {
                    blocks += 1;
                    if o.show_blocks && !o.insn_decoder {
                        writeln!(out, "[block]")?;
                    }
                    for i in part {
                        insns += 1;
                        if block.speculative {
                            write!(out, "? ")?;
                        }
                        writeln!(out, "{:016x}", i.ip)?;
                    }
                }
            }
            err_ip = block.last().map_or(start, after);
            match r {
                Ok(s) => st = s,
                Err(e) => {
                    let ip = match (e, block.last()) {
                        (Error::BadQuery, Some(i)) => i.ip,
                        (Error::BadQuery, None) => start,
                        (_, Some(i)) => after(i),
                        (_, None) => flow.ip(),
                    };
                    break (e, ip);
                }
            }
        };
        let (e, ip) = err;
        if e == Error::Event(crate::events::Error::Eos) {
            break;
        }
        writeln!(out, "[{:x}, {ip:x}: error: {}]", flow.offset(), e.as_str())?;
        // The same error where a resync left off would come again at every resync: go on
        // at the next PSB instead.
        let here = (flow.offset(), ip);
        if !o.resync_on_error || last_resync_error == Some(here) {
            last_resync_error = None;
            continue;
        }
        last_resync_error = Some(here);
        loop {
            match flow.resync() {
                Ok(crate::flow::Resync::Status(st)) => {
                    if st.suppressed && !o.quiet {
                        writeln!(out, "[disabled]")?;
                    }
                    resumed_st = Some(st);
                    break;
                }
                Ok(crate::flow::Resync::EventIgnored) => match flow.event() {
                    Ok((e, resumed, _)) => {
                        report(&e, resumed, o, &mut sideband, &mut flow, &mut out)?;
                    }
                    Err(e) => {
                        writeln!(
                            out,
                            "[{:x}, {ip:x}: resync error: {}]",
                            flow.offset(),
                            e.as_str()
                        )?;
                        break;
                    }
                },
                Err(e) => {
                    writeln!(
                        out,
                        "[{:x}, {ip:x}: resync error: {}]",
                        flow.offset(),
                        e.as_str()
                    )?;
                    break;
                }
            }
        }
    }
    if o.stat {
        let (show_insns, show_blocks) = if o.stat_insn || o.stat_blocks {
            (o.stat_insn, o.stat_blocks)
        } else {
            (true, !o.insn_decoder)
        };
        if show_insns {
            writeln!(out, "insn: {insns}.")?;
        }
        if show_blocks {
            writeln!(out, "blocks:\t{blocks}.")?;
        }
    }
    out.flush()
}
