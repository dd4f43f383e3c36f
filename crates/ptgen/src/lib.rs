//! Intel PT perf.data recordings of real executions, for tests: a test tool, not a product.
//!
//! perfaux reads what `perf record -e intel_pt//` writes, but the machines it is tested on
//! have no Intel PT hardware. This crate makes such recordings without it: [`record`] runs
//! a program under ptrace, single-stepping every user-space instruction (the ground truth
//! of the flow: each instruction's address and the next one's), encodes that flow as the
//! Intel PT packets the hardware would write under
//! `perf record --per-thread -e intel_pt/tsc=1,noretcomp=1/u -- PROG`, and writes a
//! perf.data around them that Linux perf 6.1 reads and decodes against the program's
//! binaries on disk. A test can then compare what a decoder (perf's, perfaux's) makes of
//! the trace with [`Recorded`], what really ran.
//!
//! What the packet stream holds (Intel SDM vol. 3, "Intel Processor Trace"):
//! - at the start (the trace is enabled at the exec, in the kernel, where the user-only
//!   filter keeps packets off): PSB, TSC, PSBEND; then, when the program's first user
//!   instruction runs, TSC, MODE.Exec (64-bit), TIP.PGE(entry);
//! - a TNT bit per conditional branch (jcc, loop*, jrcxz), in short TNT packets (up to 6
//!   bits) or long TNT packets (7 to 47), flushed before any other packet;
//! - a TIP per indirect jump or call and per `ret` (no return compression: `noretcomp=1`),
//!   its IP compressed against the last IP;
//! - nothing for direct jumps and calls;
//! - per `syscall`: TIP.PGD with the IP suppressed (the target is in the kernel, which is
//!   filtered out), then on the return TSC, MODE.Exec, TIP.PGE(the next instruction); the
//!   `syscall` that ends the program (exit_group) ends the trace with its TIP.PGD; with
//!   [`Options::kernel`] (the kernel traced too), a TIP into the kernel and branches there
//!   ([`KERNEL_EXCURSION`]), and on the return TSC and a TIP back (the sysret), no PGD/PGE;
//! - a PSB+ (PSB, MODE.Exec, FUP(next IP), TSC, PSBEND) once 4 KiB of packets have been
//!   written since the last one.
//!
//! What it does not do: no CYC, MTC, TMA, CBR, PIP or PTWRITE packets (the config says
//! `mtc=0`); no return compression; no signals (a signal delivered to the program is an
//! error); single-threaded programs only (clone, fork, vfork and exec by the program are
//! errors); no code outside files on disk: if the program executes code in a mapping
//! without a file (the vdso, JIT code), [`record`] fails naming the address, since no
//! decoder could read that code back. Test programs must avoid vdso calls
//! (`clock_gettime`, `gettimeofday`, `time`, `getcpu`).
//!
//! Layouts ([`Options`]): per thread (the default), per CPU, and in snapshot mode
//! ([`SnapshotPlan`]: the trace as the copies `perf record -S` makes of an AUX area in
//! overwrite mode, some sharing bytes with the one before, some not), and with AUX sampling
//! ([`AuxSamplePlan`]: no AUXTRACE records, the trace's last bytes in the samples of an
//! `instructions` event in the intel_pt event's group, as `perf record --aux-sample`), and
//! with the trace paused and resumed ([`PausePlan`]: Linux 6.13's aux-action, samples of a
//! resume and a pause event in the intel_pt event's group; while paused no packets, at a
//! pause FUP and TIP.PGD, at a resume PSB+ and TSC, MODE.Exec, TIP.PGE; [`Recorded::traced`]
//! says which instructions the trace holds). perf 6.1 decodes such a trace (`tr end async`
//! at a pause, `tr strt` at a resume) but warns "Reserved bits are set unexpectedly" on
//! stderr: `aux_action` is its `__reserved_3`.
//!
//! Time: a virtual TSC that advances by [`TICKS_PER_INSN`] per instruction and
//! [`TICKS_PER_SYSCALL`] per system call; TIME_CONV and the AUXTRACE_INFO convert it to
//! perf time (ns = [`TIME_ZERO`] + tsc / 2), and every record (COMM, MMAP2, ITRACE_START,
//! AUX, EXIT) carries the perf time of the TSC where it happened, so that perf's ordering
//! of sideband and trace is the execution's.

mod file;
mod packets;
mod tracee;

pub use file::elf_build_id;
pub use tracee::Mapping;

use packets::Encoder;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use tracee::{Stop, Tracee};

/// The virtual TSC's value at the exec.
pub const TSC_BASE: u64 = 1 << 32;
/// TSC ticks per instruction stepped.
pub const TICKS_PER_INSN: u64 = 2;
/// TSC ticks a system call takes.
pub const TICKS_PER_SYSCALL: u64 = 2000;
/// TIME_CONV: perf time = TIME_ZERO + (tsc * TIME_MULT) >> TIME_SHIFT, i.e. tsc / 2.
pub const TIME_SHIFT: u16 = 10;
/// See [`TIME_SHIFT`].
pub const TIME_MULT: u32 = 512;
/// See [`TIME_SHIFT`]: 1000 s.
pub const TIME_ZERO: u64 = 1_000_000_000_000;
/// Trace bytes between PSBs (the hardware's psb_period=1: 4 KiB).
pub const PSB_PERIOD: usize = 4096;

/// Perf time of TSC value `tsc` (perf's `tsc_to_perf_time`).
pub fn tsc_to_perf_time(tsc: u64) -> u64 {
    let quot = tsc >> TIME_SHIFT;
    let rem = tsc & ((1 << TIME_SHIFT) - 1);
    TIME_ZERO + quot * u64::from(TIME_MULT) + ((rem * u64::from(TIME_MULT)) >> TIME_SHIFT)
}

/// What kind of taken branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BranchKind {
    /// A taken conditional branch (jcc, loop*, jrcxz).
    Conditional,
    /// A direct near jump.
    Jump,
    /// A direct near call.
    Call,
    /// An indirect near jump.
    IndirectJump,
    /// An indirect near call.
    IndirectCall,
    /// A near return.
    Return,
}

/// One taken branch of the execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Branch {
    /// The branch instruction's address.
    pub from: u64,
    /// Where it went.
    pub to: u64,
    /// What it was.
    pub kind: BranchKind,
}

/// What [`record`] saw and wrote.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The program's pid (= its only thread's tid).
    pub pid: u32,
    /// Its tid.
    pub tid: u32,
    /// Its exit status (128 + the signal if a signal ended it).
    pub exit_code: i32,
    /// What it wrote to stdout.
    pub stdout: Vec<u8>,
    /// User-space instructions executed (a `rep` string instruction counts once).
    pub instructions: u64,
    /// The address of every instruction executed, in order (`instructions` of them).
    pub ips: Vec<u64>,
    /// Every taken branch, in order (system calls are not branches here).
    pub branches: Vec<Branch>,
    /// Near `call` instructions executed, direct and indirect.
    pub calls: u64,
    /// Near `ret` instructions executed.
    pub returns: u64,
    /// Conditional branches executed, taken or not.
    pub conditionals: u64,
    /// `syscall` instructions executed (the last one, exit_group's, included).
    pub syscalls: u64,
    /// The executable mappings announced with MMAP2, in order.
    pub mappings: Vec<Mapping>,
    /// Bytes of Intel PT packets.
    pub trace_bytes: usize,
    /// PSB packets written.
    pub psbs: u64,
    /// TIP packets written (TIP.PGE/PGD not counted).
    pub tips: u64,
    /// TNT packets written.
    pub tnt_packets: u64,
    /// The TSC at the first and the last instruction.
    pub tsc_range: (u64, u64),
    /// The snapshots written, in order (snapshot mode only).
    pub snapshots: Vec<Snapshot>,
    /// The AUX samples written, in order, as [`Snapshot`]s: the bytes each carries
    /// (AUX sampling only).
    pub aux_samples: Vec<Snapshot>,
    /// For each of `branches`, the index in `ips` of its branch instruction.
    pub branch_insns: Vec<u64>,
    /// The samples of the aux-action events written, in order ([`PausePlan`] only).
    pub pause_samples: Vec<PauseSample>,
    /// The stretches of the run the trace holds, as ranges of instruction indices (into
    /// `ips`): all of it (`0..instructions`) but with a [`PausePlan`], where it is those
    /// outside the paused windows.
    pub traced: Vec<std::ops::Range<u64>>,
}

/// A sample of an aux-action event [`record_with`] wrote ([`Options::pauses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseSample {
    /// After how many instructions it was taken (the instructions with a lower index in
    /// [`Recorded::ips`] ran before it).
    pub at_insns: u64,
    /// The TSC of the sample (its time is [`tsc_to_perf_time`] of it).
    pub tsc: u64,
    /// A sample of the pause event (true) or of the resume event.
    pub pause: bool,
    /// The trace already was in the state asked for: the kernel dropped the request, the
    /// trace is unchanged.
    pub dropped: bool,
}

/// An instruction's effect on the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Other,
    /// A string instruction with a rep prefix: it may stay at its address for a step.
    Rep,
    Conditional,
    Jump,
    Call,
    IndirectJump,
    IndirectCall,
    Return,
    Syscall,
}

fn classify(bytes: &[u8], ip: u64) -> Result<(u8, Flow), String> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let i = d.decode();
    if i.is_invalid() {
        return Err(format!(
            "cannot decode the instruction at {ip:#x} ({bytes:02x?})"
        ));
    }
    let flow = match (i.mnemonic(), i.flow_control()) {
        (Mnemonic::Syscall, _) => Flow::Syscall,
        (_, FlowControl::Next) if i.has_rep_prefix() || i.has_repne_prefix() => Flow::Rep,
        (_, FlowControl::Next) => Flow::Other,
        (_, FlowControl::ConditionalBranch) => Flow::Conditional,
        (_, FlowControl::UnconditionalBranch) if !i.is_jmp_far() => Flow::Jump,
        (_, FlowControl::IndirectBranch) if !i.is_jmp_far_indirect() => Flow::IndirectJump,
        (_, FlowControl::Call) if !i.is_call_far() => Flow::Call,
        (_, FlowControl::IndirectCall) if !i.is_call_far_indirect() => Flow::IndirectCall,
        (Mnemonic::Ret, FlowControl::Return) => Flow::Return,
        _ => {
            return Err(format!(
                "unsupported instruction at {ip:#x}: {:?} (ptgen encodes near branches and syscall only)",
                i.mnemonic()
            ));
        }
    };
    Ok((i.len() as u8, flow))
}

// x86-64 system call numbers ptgen must refuse or watch.
const SYS_CLONE: u64 = 56;
const SYS_FORK: u64 = 57;
const SYS_VFORK: u64 = 58;
const SYS_EXECVE: u64 = 59;
const SYS_EXECVEAT: u64 = 322;
const SYS_CLONE3: u64 = 435;

/// How [`record_with`] lays out the recording.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Write the recording as `perf record -e intel_pt/tsc=1,noretcomp=1/u -- PROG` (no
    /// `--per-thread`) would with the program on CPU 0: a CPU-wide buffer (AUXTRACE idx 0,
    /// tid -1, cpu 0; priv[INTEL_PT_PER_CPU_MMAPS] = 1), PERF_SAMPLE_CPU in every record,
    /// the tracking event with `context_switch`, and, stamped before the trace starts, the
    /// PERF_RECORD_SWITCH_CPU_WIDE out of the idle task into the program and the program's
    /// PERF_RECORD_ITRACE_START: who the CPU's trace belongs to.
    pub cpu_wide: bool,
    /// Snapshot mode (`perf record -S`): the trace not as one AUXTRACE record but as the
    /// snapshots of an AUX area in overwrite mode that [`SnapshotPlan`] says.
    pub snapshot: Option<SnapshotPlan>,
    /// AUX sampling (`perf record --aux-sample=SIZE -e
    /// '{intel_pt//u,instructions/period=N/u}'`): no AUXTRACE records, but a sample of the
    /// `instructions` event every [`AuxSamplePlan::every_insns`] instructions, each
    /// carrying (PERF_SAMPLE_AUX) the last [`AuxSamplePlan::size`] bytes of the trace.
    pub aux_sample: Option<AuxSamplePlan>,
    /// Pause and resume the trace (`perf record -e
    /// intel_pt/aux-action=start-paused/u -e task-clock/aux-action=resume/u -e
    /// task-clock/aux-action=pause/u`, Linux 6.13): see [`PausePlan`].
    pub pauses: Option<PausePlan>,
    /// The kernel traced too (`intel_pt/.../` without `u`, no `--kcore`): at each system
    /// call the trace follows the CPU into the kernel (a TIP to [`KERNEL_ENTRY`], a few
    /// branches there: [`KERNEL_EXCURSION`]) and back (a TIP to the next user instruction),
    /// where a user-only trace has TIP.PGD and TIP.PGE. The kernel's code is in no file of
    /// the recording, so a decoder cannot follow it: what it makes of the user code between
    /// is the test.
    pub kernel: bool,
}

/// Where the system calls of a [`Options::kernel`] trace enter the kernel: an address in
/// the vmalloc area, where no map of the recording's (or of perf's own kernel maps) has
/// code.
pub const KERNEL_ENTRY: u64 = 0xffff_c900_0010_0000;

/// A branch a [`Options::kernel`] trace takes in the kernel ([`KERNEL_EXCURSION`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelBranch {
    /// A conditional branch, taken or not: a TNT bit.
    Conditional(bool),
    /// An indirect branch to [`KERNEL_ENTRY`] + the offset: a TIP.
    Indirect(u64),
    /// An interrupt in the kernel at [`KERNEL_ENTRY`] + the first offset into its handler
    /// at [`KERNEL_ENTRY`] + the second: FUP and TIP.
    Interrupt(u64, u64),
}

/// The branches a [`Options::kernel`] trace takes in the kernel at each system call, in
/// order.
pub const KERNEL_EXCURSION: &[KernelBranch] = &[
    KernelBranch::Conditional(true),
    KernelBranch::Conditional(false),
    KernelBranch::Indirect(0x100),
    KernelBranch::Conditional(true),
    KernelBranch::Interrupt(0x140, 0x2000),
    KernelBranch::Conditional(false),
    KernelBranch::Indirect(0x180),
    KernelBranch::Conditional(true),
];

/// What an aux-action event's sample asks of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAction {
    /// A sample of the `aux-action=pause` event.
    Pause,
    /// A sample of the `aux-action=resume` event.
    Resume,
}

/// When the aux-action events of [`Options::pauses`] overflow (Linux 6.13's
/// `aux_action`).
///
/// The intel_pt event (`aux_action = start_paused` if [`PausePlan::start_paused`]) leads a
/// group with two `task-clock` events, one with `aux_action = resume`, one with
/// `aux_action = pause`. At each point of the plan one of them overflows: a sample of it
/// (its time the TSC there), and the kernel's `perf_event_aux_pause()`: if the trace is in
/// the other state, Intel PT's `pt_event_stop(PERF_EF_PAUSE)` clears TraceEn (the trace
/// has, for the interrupt that took the program into the kernel, FUP(the next IP) and
/// TIP.PGD) or `pt_event_start(PERF_EF_RESUME)` sets it (a PSB+ with the TSC, PSBEND, in
/// the kernel; then, back in user space, TSC, MODE.Exec, TIP.PGE(the next IP)); if it is
/// already in that state, the request is dropped and the trace unchanged. While paused no
/// packets are written (the program still runs, single-stepped: [`Recorded::ips`] has all).
/// A trace that starts paused has no packets until the first resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PausePlan {
    /// The intel_pt event starts paused (`aux-action=start-paused`).
    pub start_paused: bool,
    /// After how many instructions an event overflows, and which, ascending.
    pub at_insns: Vec<(u64, PauseAction)>,
}

/// What `perf record --aux-sample` takes: see [`Options::aux_sample`].
///
/// The sampling event is `instructions:u` in the intel_pt event's group, with a fixed
/// period; its overflow (a PMI) is not modelled in the trace (the hardware would stop and
/// restart the trace around the kernel's copy: a FUP and TIP.PGD/TIP.PGE there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuxSamplePlan {
    /// The bytes of trace each sample carries (the attr's `aux_sample_size`): the kernel
    /// pads them with zeros to a multiple of 8.
    pub size: usize,
    /// The sampling event's period: a sample every so many instructions.
    pub every_insns: u64,
}

/// When `perf record -S` takes its snapshots of the AUX area, and how large the area is.
///
/// The AUX area is a ring of `aux_size` bytes the processor keeps writing, overwriting the
/// oldest bytes. At each point (after `at_insns[i]` instructions, and at the exit) perf
/// copies it out into an AUXTRACE record, as tools/perf/util/auxtrace.c's
/// `__auxtrace_mmap__read` does in snapshot mode: once the ring has wrapped, its last
/// `aux_size` bytes (the record's `offset` the ring's head, `head` mod `aux_size`); before
/// that, the bytes written since the previous snapshot (`offset` their start), nothing if
/// none. A snapshot taken less than `aux_size` bytes after the one before shares bytes with
/// it; one taken more than `aux_size` bytes later does not (the trace between is lost).
/// The trace is not disturbed by a snapshot (the hardware's stop and restart around perf's
/// copy, in the kernel, where the user-only trace has no packets, is not modelled).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotPlan {
    /// The AUX area's size (perf's `-m ,SIZE`; a power of 2, at least 4 KiB).
    pub aux_size: usize,
    /// After how many instructions each snapshot is taken, ascending (one more is taken at
    /// the exit, as `perf record --snapshot=e` does).
    pub at_insns: Vec<u64>,
}

/// A snapshot [`record_with`] wrote (snapshot mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// The bytes of the packet stream it holds: `from..to`.
    pub from: usize,
    /// See `from`.
    pub to: usize,
    /// The TSC when it was taken (its AUXTRACE record's `reference`).
    pub tsc: u64,
}

/// Records `program` with `args` into the perf.data `out` (see the crate's doc), per thread.
pub fn record(program: &Path, args: &[&str], out: &Path) -> Result<Recorded, String> {
    record_with(program, args, out, &Options::default())
}

/// [`record`], laid out as `opts` says.
pub fn record_with(
    program: &Path,
    args: &[&str],
    out: &Path,
    opts: &Options,
) -> Result<Recorded, String> {
    let mut t = Tracee::spawn(program, args)?;
    let pid = t.pid as u32;
    let comm = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut side = file::Sideband::new(pid, &comm, opts.cpu_wide);
    side.snapshot = opts.snapshot.is_some();
    side.aux_sample = opts.aux_sample;
    side.pauses = opts.pauses.as_ref().map(|p| p.start_paused);
    side.kernel = opts.kernel;
    if opts.kernel && opts.pauses.is_some() {
        return Err("ptgen's kernel trace has no pause plan".into());
    }
    if opts.pauses.is_some() && (opts.snapshot.is_some() || opts.aux_sample.is_some()) {
        return Err(
            "ptgen's pause plan is for a full trace: no snapshot mode or AUX sampling with it"
                .into(),
        );
    }
    // The trace on (TraceEn set): not if the intel_pt event starts paused.
    let mut tracing = !opts.pauses.as_ref().is_some_and(|p| p.start_paused);
    // The next point of the pause plan.
    let mut next_pause = 0usize;
    let mut enc = Encoder::default();
    let mut tsc = TSC_BASE;
    if opts.cpu_wide {
        // The program scheduled in on the CPU, then its trace enabled: the kernel writes
        // the switch records and the ITRACE_START before the first packet.
        side.switch_to_program(TSC_BASE - 3);
        side.itrace_start(TSC_BASE - 1);
    }
    // Enabled at the exec, in the kernel: no packets but the PSB+ until the return to user
    // (none at all if it starts paused).
    if tracing {
        enc.psb();
        enc.tsc(tsc);
        enc.psbend();
    }
    tsc += 1;
    if !opts.cpu_wide {
        side.itrace_start(tsc);
    }
    tsc += 1;
    side.comm(tsc);
    let mut announced: HashSet<Mapping> = HashSet::new();
    let mut mappings = Vec::new();
    let mut exec_maps = Vec::new();
    announce_maps(
        t.pid,
        &mut tsc,
        &mut side,
        &mut announced,
        &mut mappings,
        &mut exec_maps,
    )?;
    tsc += TICKS_PER_SYSCALL / 2;
    let mut regs = t.regs()?;
    let first_tsc = tsc;
    if tracing {
        enc.tsc(tsc);
        enc.mode_exec_64();
        enc.tip_pge(regs.rip);
    }

    let mut cache: HashMap<u64, (u8, Flow)> = HashMap::new();
    let mut rec = Recorded {
        pid,
        tid: pid,
        exit_code: 0,
        stdout: Vec::new(),
        instructions: 0,
        ips: Vec::new(),
        branches: Vec::new(),
        calls: 0,
        returns: 0,
        conditionals: 0,
        syscalls: 0,
        mappings: Vec::new(),
        trace_bytes: 0,
        psbs: 0,
        tips: 0,
        tnt_packets: 0,
        tsc_range: (first_tsc, first_tsc),
        snapshots: Vec::new(),
        aux_samples: Vec::new(),
        branch_insns: Vec::new(),
        pause_samples: Vec::new(),
        traced: Vec::new(),
    };
    // Where the stretch of trace being written began (instruction index), if tracing.
    let mut traced_from = tracing.then_some(0u64);
    if opts.snapshot.is_some() && opts.aux_sample.is_some() {
        return Err("snapshot mode and AUX sampling are perf record's -S and --aux-sample: one or the other".into());
    }
    // Snapshot mode: the next point of the plan, and the ring's state.
    let mut ring = opts.snapshot.as_ref().map(Ring::new);
    let exit_code = loop {
        let ip = regs.rip;
        let (len, flow) = match cache.get(&ip) {
            Some(&c) => c,
            None => {
                check_traceable(ip, &exec_maps, t.pid)?;
                let mut b = [0u8; 16];
                let n = t.read(ip, &mut b);
                let c = classify(&b[..n], ip)?;
                cache.insert(ip, c);
                c
            }
        };
        let next = ip + u64::from(len);
        if flow == Flow::Syscall {
            let nr = regs.rax;
            if matches!(nr, SYS_CLONE | SYS_FORK | SYS_VFORK | SYS_CLONE3) {
                return Err(format!(
                    "the program makes system call {nr} (clone/fork) at {ip:#x}: ptgen traces single-threaded programs without children only"
                ));
            }
            if matches!(nr, SYS_EXECVE | SYS_EXECVEAT) {
                return Err(format!(
                    "the program calls exec at {ip:#x}: ptgen does not follow exec"
                ));
            }
            rec.syscalls += 1;
            rec.instructions += 1;
            rec.ips.push(ip);
            rec.tsc_range.1 = tsc;
            // The far branch into the kernel: its target is filtered out, so PGD without IP;
            // or, the kernel traced, its way there.
            if tracing {
                if opts.kernel {
                    enc.tip(KERNEL_ENTRY);
                    for b in KERNEL_EXCURSION {
                        match *b {
                            KernelBranch::Conditional(taken) => enc.tnt(taken),
                            KernelBranch::Indirect(to) => enc.tip(KERNEL_ENTRY + to),
                            KernelBranch::Interrupt(at, to) => {
                                enc.fup(KERNEL_ENTRY + at);
                                enc.tip(KERNEL_ENTRY + to);
                            }
                        }
                    }
                } else {
                    enc.tip_pgd_noip();
                }
            }
            match t.step()? {
                Stop::Exited(code) => {
                    tsc += TICKS_PER_SYSCALL / 2;
                    // The event disabled as the task exits, in the kernel.
                    if tracing && opts.kernel {
                        enc.tip_pgd_noip();
                    }
                    break code;
                }
                Stop::Stepped(r) => regs = r,
            }
            tsc += TICKS_PER_SYSCALL / 2;
            if announce_maps(
                t.pid,
                &mut tsc,
                &mut side,
                &mut announced,
                &mut mappings,
                &mut exec_maps,
            )? {
                // New code may sit where old code was.
                cache.clear();
            }
            tsc += TICKS_PER_SYSCALL / 2;
            // Back in user space (at `next`, or elsewhere after rt_sigreturn): tracing resumes.
            if tracing && opts.kernel {
                // sysret: a far branch to user space, its target in a TIP.
                enc.tsc(tsc);
                enc.tip(regs.rip);
            } else if tracing {
                enc.tsc(tsc);
                enc.mode_exec_64();
                enc.tip_pge(regs.rip);
            }
            continue;
        }
        let r = match t.step()? {
            Stop::Stepped(r) => r,
            Stop::Exited(code) => {
                return Err(format!(
                    "the program ended ({code}) while executing {ip:#x}, not in a system call"
                ));
            }
        };
        regs = r;
        let to = regs.rip;
        tsc += TICKS_PER_INSN;
        if flow == Flow::Rep && to == ip {
            // One more iteration of the string instruction.
            continue;
        }
        rec.instructions += 1;
        rec.ips.push(ip);
        rec.tsc_range.1 = tsc;
        let kind = match flow {
            Flow::Other | Flow::Rep => {
                if to != next {
                    return Err(format!(
                        "the flow went from {ip:#x} to {to:#x} without a branch (a signal?)"
                    ));
                }
                None
            }
            Flow::Conditional => {
                rec.conditionals += 1;
                if tracing {
                    enc.tnt(to != next);
                }
                (to != next).then_some(BranchKind::Conditional)
            }
            Flow::Jump => Some(BranchKind::Jump),
            Flow::Call => {
                rec.calls += 1;
                Some(BranchKind::Call)
            }
            Flow::IndirectJump => {
                if tracing {
                    enc.tip(to);
                }
                Some(BranchKind::IndirectJump)
            }
            Flow::IndirectCall => {
                rec.calls += 1;
                if tracing {
                    enc.tip(to);
                }
                Some(BranchKind::IndirectCall)
            }
            Flow::Return => {
                rec.returns += 1;
                if tracing {
                    enc.tip(to);
                }
                Some(BranchKind::Return)
            }
            Flow::Syscall => unreachable!("handled above"),
        };
        if let Some(kind) = kind {
            rec.branches.push(Branch { from: ip, to, kind });
            rec.branch_insns.push(rec.instructions - 1);
        }
        if let Some(r) = ring.as_mut() {
            r.maybe_take(rec.instructions, &enc.buf, tsc, &mut rec.snapshots);
        }
        if let Some(p) = opts.aux_sample
            && rec.instructions.is_multiple_of(p.every_insns.max(1))
        {
            // The counter overflows here: the sample's IP the next instruction's, its AUX
            // data the last bytes the trace holds.
            // The kernel copies `size` bytes ending at the head of the AUX area (whose
            // pages start zeroed: zeros, PAD packets, before the first bytes written).
            let from = enc.buf.len().saturating_sub(p.size);
            let mut aux = vec![0u8; p.size.saturating_sub(enc.buf.len())];
            aux.extend_from_slice(&enc.buf[from..]);
            side.aux_sample(tsc, to, &aux);
            rec.aux_samples.push(Snapshot {
                from,
                to: enc.buf.len(),
                tsc,
            });
        }
        if let Some(plan) = &opts.pauses {
            while let Some(&(at, action)) = plan.at_insns.get(next_pause)
                && at <= rec.instructions
            {
                next_pause += 1;
                let pause = action == PauseAction::Pause;
                // The event's overflow, in the kernel: its sample, then the AUX event paused
                // or resumed unless it already is.
                tsc += 1;
                side.pause_sample(tsc, to, pause);
                let dropped = tracing != pause;
                rec.pause_samples.push(PauseSample {
                    at_insns: rec.instructions,
                    tsc,
                    pause,
                    dropped,
                });
                if dropped {
                    continue;
                }
                if pause {
                    // The interrupt left user space at `to` (FUP, TIP.PGD: the kernel is
                    // filtered out); TraceEn is cleared there, with no packet.
                    enc.fup(to);
                    enc.tip_pgd_noip();
                    tracing = false;
                    if let Some(from) = traced_from.take() {
                        rec.traced.push(from..rec.instructions);
                    }
                } else {
                    // TraceEn set in the kernel: a PSB+ (PacketEn off: no FUP or MODE in
                    // it); back in user space at `to`, the trace turns on there.
                    tsc += 1;
                    enc.psb();
                    enc.tsc(tsc);
                    enc.psbend();
                    tsc += 1;
                    enc.tsc(tsc);
                    enc.mode_exec_64();
                    enc.tip_pge(to);
                    tracing = true;
                    traced_from = Some(rec.instructions);
                }
            }
        }
        if tracing && enc.since_psb() >= PSB_PERIOD {
            enc.psb();
            enc.mode_exec_64();
            enc.fup(to);
            enc.tsc(tsc);
            enc.psbend();
        }
    };
    rec.exit_code = exit_code;
    if let Some(from) = traced_from {
        rec.traced.push(from..rec.instructions);
    }
    rec.stdout = t.take_stdout();
    rec.trace_bytes = enc.buf.len();
    rec.psbs = enc.psbs;
    rec.tips = enc.tips;
    rec.tnt_packets = enc.tnt_packets;
    rec.mappings = mappings;
    tsc += 1;
    let buffers = match ring.as_mut() {
        Some(r) => {
            r.take(&enc.buf, tsc, &mut rec.snapshots);
            tsc += 1;
            r.buffers(&enc.buf)
        }
        // Sampling: perf record reads no AUX area data but the samples'.
        None if opts.aux_sample.is_some() => Vec::new(),
        None => vec![file::AuxBuffer::whole(&enc.buf, tsc)],
    };
    file::write(out, &side, &buffers, tsc)?;
    Ok(rec)
}

/// The AUX area in overwrite mode, and the snapshots perf takes of it.
struct Ring {
    plan: SnapshotPlan,
    next: usize,
    /// Whether the ring has wrapped (perf's `intel_pt_find_snapshot` then copies all of it).
    wrapped: bool,
    /// The stream's length at the last snapshot (perf's `mm->prev`).
    prev: usize,
    /// What each snapshot's AUXTRACE and AUX records say.
    taken: Vec<file::AuxBuffer<'static>>,
}

impl Ring {
    fn new(plan: &SnapshotPlan) -> Self {
        assert!(
            plan.aux_size >= 4096 && plan.aux_size.is_power_of_two(),
            "perf's AUX area in snapshot mode: a power of 2 of at least 4 KiB"
        );
        Self {
            plan: plan.clone(),
            next: 0,
            wrapped: false,
            prev: 0,
            taken: Vec::new(),
        }
    }

    fn maybe_take(&mut self, insns: u64, buf: &[u8], tsc: u64, out: &mut Vec<Snapshot>) {
        if self
            .plan
            .at_insns
            .get(self.next)
            .is_some_and(|&at| at <= insns)
        {
            while self
                .plan
                .at_insns
                .get(self.next)
                .is_some_and(|&at| at <= insns)
            {
                self.next += 1;
            }
            self.take(buf, tsc, out);
        }
    }

    /// A snapshot now (`__auxtrace_mmap__read` with `snapshot`).
    fn take(&mut self, buf: &[u8], tsc: u64, out: &mut Vec<Snapshot>) {
        let len = self.plan.aux_size;
        let head = buf.len();
        self.wrapped |= head >= len;
        let (from, offset) = if self.wrapped {
            (head - len, (head % len) as u64)
        } else if head == self.prev {
            return;
        } else {
            (self.prev, self.prev as u64)
        };
        // The kernel's PERF_RECORD_AUX as the event stops for the copy: overwrite mode, the
        // ring's head and the bytes written since the last one.
        self.taken.push(file::AuxBuffer {
            range: from..head,
            data: &[],
            offset,
            reference: tsc,
            aux_offset: (head % len) as u64,
            aux_size: ((head - self.prev).min(len)) as u64,
            aux_flags: perfaux_abi::consts::PERF_AUX_FLAG_OVERWRITE,
        });
        out.push(Snapshot {
            from,
            to: head,
            tsc,
        });
        self.prev = head;
    }

    fn buffers<'a>(&self, buf: &'a [u8]) -> Vec<file::AuxBuffer<'a>> {
        self.taken
            .iter()
            .map(|t| file::AuxBuffer {
                data: &buf[t.range.clone()],
                range: t.range.clone(),
                ..*t
            })
            .collect()
    }
}

/// Fails unless `ip` is in an executable mapping of a file on disk.
fn check_traceable(ip: u64, exec_maps: &[Mapping], pid: i32) -> Result<(), String> {
    if exec_maps
        .iter()
        .any(|m| m.start <= ip && ip < m.end && m.is_file())
    {
        return Ok(());
    }
    let all = tracee::read_maps(pid)?;
    let what = all
        .iter()
        .find(|m| m.start <= ip && ip < m.end)
        .map(|m| {
            if m.name.is_empty() {
                format!("anonymous memory ({})", m.perms)
            } else {
                format!("{} ({})", m.name, m.perms)
            }
        })
        .unwrap_or_else(|| "no mapping".into());
    Err(format!(
        "the program executes {ip:#x} in {what}: ptgen traces only code of files on disk \
         (no decoder could read this code back); avoid vdso calls such as clock_gettime"
    ))
}

/// Reads the maps and announces each executable mapping not yet announced with an MMAP2,
/// one TSC tick apart. Returns whether the executable mappings changed.
fn announce_maps(
    pid: i32,
    tsc: &mut u64,
    side: &mut file::Sideband,
    announced: &mut HashSet<Mapping>,
    order: &mut Vec<Mapping>,
    exec_maps: &mut Vec<Mapping>,
) -> Result<bool, String> {
    let now: Vec<Mapping> = tracee::read_maps(pid)?
        .into_iter()
        .filter(|m| m.is_exec() && (m.is_file() || m.name == "[vdso]"))
        .collect();
    let changed = now != *exec_maps;
    for m in &now {
        if announced.insert(m.clone()) {
            *tsc += 1;
            side.mmap2(*tsc, m);
            order.push(m.clone());
        }
    }
    *exec_maps = now;
    Ok(changed)
}
