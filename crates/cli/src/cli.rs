//! The command line: perf's subcommands and option letters (perf-record.txt,
//! perf-report.txt, perf-script.txt), parsed with clap's derive API.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// perfaux: the Linux perf AUX area in user space.
///
/// Records a built-in, instrumented multi-threaded workload with a software
/// trace PMU (the AUX area, like intel_pt//) and userspace events, writes a
/// perf.data that Linux perf reads, and dumps or scripts it.
#[derive(Debug, Parser)]
#[command(name = "perfaux", version, propagate_version = true)]
pub struct Cli {
    /// Be verbose: progress on stderr even when it is not a terminal.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the built-in workload and record it into perf.data (like perf record).
    Record(Box<RecordArgs>),
    /// Read perf.data and display it: -D dumps every record (like perf report -D).
    Report(ReportArgs),
    /// Read perf.data and print one line per event in time order (like perf script).
    Script(ScriptArgs),
    /// Write perf.data in a viewer's format: Perfetto, Chrome JSON, Firefox Profiler.
    Export(crate::export::ExportArgs),
    /// Intel PT traces: dump a raw stream's packets (as libipt's ptdump does).
    #[command(name = "intel-pt", subcommand)]
    IntelPt(IntelPtCommand),
}

/// `perfaux intel-pt ...`.
#[derive(Debug, Subcommand)]
pub enum IntelPtCommand {
    /// Print every packet of a raw Intel PT stream, one line each, as libipt's ptdump does
    /// (its options, its columns, its sync and diagnostics): `perfaux intel-pt dump [OPTIONS]
    /// FILE[:FROM[-TO]]`.
    #[command(after_help = "\
ptdump's options:
  --no-sync                 don't sync to the first PSB, assume one at the start
  --quiet                   print nothing but diagnostics
  --no-pad                  don't show PAD packets
  --no-timing               don't show timing packets (tsc, cbr, tma, mtc, cyc)
  --no-cyc                  don't show CYC packets and ignore them when tracking time
  --no-offset               don't show the offset as the first column
  --raw                     show the packets' bytes
  --lastip                  show the last IP on packets with IP payloads
  --exec-mode               show the execution mode on mode.exec packets
  --time                    show the estimated TSC on timing packets
  --tcal                    show the time calibration
  --time-delta              show time and calibration as differences
  --no-tcal                 don't calibrate (CYC packets then give errors)
  --no-wall-clock           print relative time where no TSC has come yet
  --keep-tcal-on-ovf        keep the calibration over an overflow
  --cpu none|F/M[/S]        decode with the errata of family F, model M, stepping S
  --mtc-freq N              IA32_RTIT_CTL.MTCFreq
  --nom-freq N              MSR_PLATFORM_INFO[15:8], the nominal core:bus ratio
  --cpuid-0x15.eax N        CPUID leaf 0x15's EAX
  --cpuid-0x15.ebx N        CPUID leaf 0x15's EBX
  --pevent[:primary|:secondary] FILE[:FROM[-TO]]
                            perf_event sideband records to print among the packets,
                            by time (turns time tracking on)
  --pevent:sample-type N, --pevent:time-zero N, --pevent:time-shift N,
  --pevent:time-mult N, --pevent:tsc-offset N, --pevent:sample-config ID:TYPE
                            how the next sideband file was written (perf's attr and
                            the TIME_CONV of its recording)
  --sb:compact|--sb:verbose one line a record, or every field
  --sb:filename, --sb:offset, --sb:time
                            prefix each record with its file, offset or time
  FILE[:FROM[-TO]]          the stream, or the bytes FROM to TO of it (offsets are
                            printed from FROM)")]
    Dump {
        /// ptdump's options, then the trace file.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            num_args = 1..,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Print the instructions a raw Intel PT stream executed, one address a line, and the
    /// events between them, as libipt's `ptxed --no-inst` does: `perfaux intel-pt decode --raw
    /// CODE[:FROM[-TO]]:BASE ... --pt TRACE`.
    #[command(after_help = "\
ptxed's options (the ones implemented so far):
  --pt FILE[:FROM[-TO]]          the trace
  --raw FILE[:FROM[-TO]]:BASE    code: the bytes of FILE (or FROM to TO of them) at BASE;
                                 give as many as the trace runs through
  --elf FILE[:BASE]              code: an ELF file's loadable segments at their addresses,
                                 or from BASE on
  --cpu none|F/M[/S]             decode with the errata of that cpu (an unknown one is said)
  --filter:addrN_cfg|_a|_b N     the address filters the trace was recorded with (N 0-3)
  --event:ip                     show the IPs of events
  --event:iflags                 report changes of the interrupt flag
  --resync-on-error              after an error, go on at the next event, not the next PSB
  --quiet                        print only errors (and statistics)
  --stat, --stat:insn, --stat:blocks
                                 count instructions and blocks
  --block:show-blocks, --block:end-on-call, --block:end-on-jump
                                 the block decoder's blocks
  --no-inst, --check, --insn-decoder, --block-decoder
                                 accepted: the output is the addresses, as ptxed's with --no-inst
  --event:tick, --event:time       ticks where time moved on at a branch; each event's TSC
  --mtc-freq N, --nom-freq N, --cpuid-0x15.eax N, --cpuid-0x15.ebx N, --insn:keep-tcal-on-ovf
                                 the clocks, for the TSC estimates (as intel-pt dump's)
  --pevent:primary FILE[:FROM[-TO]], --pevent:secondary FILE[:FROM[-TO]]
                                 perf_event sideband: records applied (and printed) once the
                                 trace's time passes them; a primary file's (the trace's cpu's)
                                 context switches change the code decoded
  --pevent:sample-type N, --pevent:time-zero N, --pevent:time-shift N,
  --pevent:time-mult N, --pevent:tsc-offset N, --pevent:sample-config ID:TYPE
                                 how the next sideband file was written
  --pevent:kernel-start ADDR     where the kernel's addresses begin (context switches take
                                 effect in the kernel)
  --pevent:sysroot PREFIX        put before the names of mapped files (as it is: a directory
                                 ends in /)
  --pevent:kcore FILE[:BASE]     the kernel's code, in every process
  --pevent:vdso-x64|-x32|-ia32 FILE
                                 the file a [vdso] mapping stands for, by the process's ABI
  --sb:compact|--sb:verbose, --sb:filename, --sb:offset, --sb:time
                                 print the records (as intel-pt dump's)
  --sb:switch                    say [context: pid-N] where the decoder takes up a process
  --sb:warn                      say lost records, lost trace and unusable mappings")]
    Decode {
        /// ptxed's options.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            num_args = 1..,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
}

#[derive(Debug, Args)]
#[command(after_help = "\
Events (-e), with perf's syntax:
  swtrace//                 the software trace PMU: an AUX area event tracing every
                            call and return of the workload's instrumented functions
  uevent_aux//              an AUX event logging uevents (no pause/resume, no AUX sampling)
  uevent, uevent:TYPE       userspace events (all, or the count of one type)
  probe:FUNC                count the calls of an instrumented function: serve_request,
                            parse_request, lookup_cache, rebuild_cache, compute, fib,
                            mat_mul, send_response
  uevent:TYPE types         request_start (1), request_done (2), slow_path (3)
  task-clock, cpu-clock     thread CPU time: a sample every 250 us of it, at most one
                            per scheduler tick (its period is the CPU time it stands for)
  page-faults, minor-faults, major-faults, context-switches, cpu-migrations,
  alignment-faults, emulation-faults, bpf-output
                            software counters (each sample one event; for a program
                            (-- PROG) the running kernel's, on every thread and process
                            of it, each event alone), dummy: nothing
  {a,b}                     a group (a is the leader); a,b a list
  pmu/term=value,.../mods   terms: period= freq= config= name= aux-sample-size=
                            aux-action=start-paused|pause|resume aux-output
                            track-paused (swtrace//: follow calls while paused, so a
                            resumed trace shows the calls it resumed inside)
                            timing=full|entry|periodic:N (swtrace//: which calls read
                            the clock: all, entries only, or one packet in N; the
                            others are interpolated, shown as ~sec.nsec)
Default: -e swtrace// -e uevent (the trace PMU on each workload thread and the
uevent stream).

Examples:
  perfaux record -o perf.data
  perfaux record -S -e swtrace// -e uevent        (snapshot on SIGUSR2)
  perfaux record -e swtrace/aux-action=start-paused/ \\
                 -e probe:serve_request/aux-action=resume/ \\
                 -e probe:send_response/aux-action=pause/
  perfaux script --call-trace
  perfaux record --aux-sample=1K -e '{swtrace//,uevent:request_done}'
  perfaux report -D -i perf.data")]
pub struct RecordArgs {
    /// Output file name (`-`: a pipe-mode perf.data on stdout). An
    /// existing file is kept as `<output>.old`.
    #[arg(short, long, default_value = "perf.data")]
    pub output: PathBuf,
    /// Event selector (perf's syntax; repeatable).
    #[arg(short, long = "event", value_name = "EVENTS")]
    pub events: Vec<String>,
    /// AUX area tracing snapshot mode: the AUX area is mapped read-only
    /// (overwrite) and a snapshot is taken on SIGUSR2. Of a program
    /// (`-- PROG`), also of each thread as it ends, with `-S` and `-Se`
    /// alike; of the built-in workload, at its end only with `-Se`.
    #[arg(
        short = 'S',
        long = "snapshot",
        value_name = "e",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub snapshot: Option<String>,
    /// With -S, for a program that records its `tracing` events with perfaux-tracing's
    /// layer: a snapshot when it records an event this severe or more (error, warn, info,
    /// debug, trace), at most one a second.
    #[arg(long = "snapshot-on", value_name = "LEVEL")]
    pub snapshot_on: Option<String>,
    /// With -S and perfaux-tracing's layer: a snapshot when a span has been entered for this
    /// long in all (e.g. 50ms, 2s).
    #[arg(long = "snapshot-on-slow", value_name = "DURATION")]
    pub snapshot_on_slow: Option<String>,
    /// With -S and perfaux-tracing's layer: a snapshot when a thread of the program panics.
    #[arg(long = "snapshot-on-panic")]
    pub snapshot_on_panic: bool,
    /// Sample AUX area: samples of events grouped behind the AUX event carry
    /// SIZE bytes of trace (default 4096; K/M suffixes).
    #[arg(
        long = "aux-sample",
        value_name = "SIZE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "4096"
    )]
    pub aux_sample: Option<String>,
    /// With -S: each snapshot keeps the last DURATION of each thread's trace (2s, 500ms),
    /// from its first call or return in it, the calls open there kept; the AUX area's size
    /// (-m) stays the cap. Without it a snapshot holds all the area holds.
    #[arg(long = "window", value_name = "DURATION")]
    pub window: Option<String>,
    /// Number of mmap data pages and AUX area pages: DATA,AUX (pages, or
    /// sizes with B/K/M/G; either may be empty, e.g. -m ,1M).
    #[arg(short = 'm', long = "mmap-pages", value_name = "DATA,AUX")]
    pub mmap_pages: Option<String>,
    /// Samples carry the call chain (PERF_SAMPLE_CALLCHAIN). A clock sampler standing alone
    /// (task-clock, cpu-clock, and the cpu-clock -F, -c or -g add to `record -- ./prog`
    /// without -e) is the running kernel's, whose chain walks the frame pointers as perf's
    /// -g; the program's own samplers (probe:FUNC, a clock in the trace's group) take the
    /// traced thread's shadow stack, exact.
    #[arg(short = 'g')]
    pub call_graph_g: bool,
    /// As -g, in perf's modes: fp, lbr, or dwarf[,SIZE], with which the kernel's samplers copy
    /// the user registers and SIZE bytes of stack (8192 by default) for report to unwind with
    /// the objects' CFI, for programs built without frame pointers.
    #[arg(long = "call-graph", value_name = "MODE", value_parser = parse_call_graph)]
    pub call_graph: Option<String>,
    /// The clock samplers' frequency in Hz (task-clock, cpu-clock), for those without
    /// freq= or period= of their own; without it 4000 Hz. Neither goes above the kernel's
    /// perf_event_max_sample_rate: as perf does, -F is throttled to it and the default
    /// lowered to it, with a warning.
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "FREQ",
        conflicts_with = "count"
    )]
    pub freq: Option<u64>,
    /// Leave the kernel's context switches of the program's threads out of the recording
    /// (recorded by default, as `perf record --switch-events` records them, where the kernel
    /// allows: they tell a call's running time from its waiting).
    #[arg(long = "no-switch-events", conflicts_with = "switch_events")]
    pub no_switch_events: bool,
    /// Record the program's context switches with -S too (they are written as they come, not
    /// in snapshots: the file grows with them, so -S leaves them out unless asked).
    #[arg(long = "switch-events")]
    pub switch_events: bool,
    /// Every sampler's period (a probe's: every Nth call), for those without freq= or
    /// period= of their own.
    #[arg(short = 'c', long = "count", value_name = "PERIOD")]
    pub count: Option<u64>,
    /// Workload size: how many requests each worker thread serves.
    #[arg(long, default_value_t = 200)]
    pub requests: u32,
    /// Record the running kernel's events of process PID, already running (samples with
    /// call chains, counts, context switches; without -e, cpu-clock samples), until it ends
    /// or Ctrl-C; the process goes on. Its calls are not traced: that needs the program
    /// started under perfaux (`record -- ./prog`).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with = "tid")]
    pub pid: Option<String>,
    /// As -p, for these threads only (comma-separated, of one process).
    #[arg(short = 't', long = "tid", value_name = "TID")]
    pub tid: Option<String>,
    /// System-wide collection from all CPUs (not possible: see -p).
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Trace a program built without instrumentation: patch the entries of the functions
    /// FUNC names when it starts (uftrace's -P: a regular expression searched in each
    /// demangled name, or the exact name if it has no special character; FUNC@LIB names a
    /// library's functions, else the executable's; `-P .` patches them all; repeatable).
    #[arg(short = 'P', long = "patch", value_name = "FUNC")]
    pub patch: Vec<String>,
    /// Leave the functions FUNC names unpatched (as -P's syntax; repeatable).
    #[arg(short = 'U', long = "unpatch", value_name = "FUNC", requires = "patch")]
    pub unpatch: Vec<String>,
    /// With -P: leave the program's calls into shared libraries untraced (by default they
    /// are traced through its PLT, under the library functions' names, as uftrace does).
    #[arg(long = "no-libcall")]
    pub no_libcall: bool,
    /// The most threads of the program traced at once (each with rings of -m's sizes, made as
    /// threads need them): later ones wait a little for a slot whose thread ended, or are
    /// counted and said.
    #[arg(long = "max-threads", value_name = "N", default_value_t = perfaux_preload::program::MAX_THREADS as u64,
          value_parser = clap::value_parser!(u64).range(1..=perfaux_preload::program::MAX_THREADS as u64))]
    pub max_threads: u64,
    /// How -P and -U read FUNC: regex (the default) or glob (the whole name).
    #[arg(long = "match", value_name = "TYPE", value_parser = ["regex", "glob"], default_value = "regex")]
    pub match_kind: String,
    /// A program to trace: built with -finstrument-functions (or -pg, -pg -mfentry), or
    /// any program with -P, started with perfaux's runtime preloaded.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Input file name ('-': standard input).
    #[arg(short, long, default_value = "perf.data")]
    pub input: PathBuf,
    /// Dump raw trace in ASCII: every record, its bytes and its fields.
    #[arg(short = 'D', long = "dump-raw-trace")]
    pub dump_raw_trace: bool,
    #[command(flatten)]
    pub view: crate::report::ViewArgs,
}

#[derive(Debug, Args)]
pub struct ScriptArgs {
    /// Input file name ('-': standard input).
    #[arg(short, long, default_value = "perf.data")]
    pub input: PathBuf,
    /// Decode the software trace into a call trace (like perf script --call-trace).
    #[arg(long = "call-trace")]
    pub call_trace: bool,
    /// The call trace in uftrace replay's layout: entries and returns, each return with its
    /// duration, indented by depth (`DURATION [TID] | func() {` ... `} /* func */`; a call
    /// with nothing inside on one line, `func();`). Implies --call-trace.
    #[arg(long = "replay")]
    pub replay: bool,
    /// Print the context switches (PERF_RECORD_SWITCH), as perf script's option does.
    #[arg(long = "show-switch-events")]
    pub show_switch_events: bool,
    /// Look for the recording's files under this directory (perf's --symfs): the code an
    /// Intel PT trace is decoded over.
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
}

/// `--call-graph`'s mode, as perf takes it.
fn parse_call_graph(s: &str) -> Result<String, String> {
    if crate::events::call_graph_mode(s) {
        crate::events::dwarf_stack_size(s)?;
        Ok(s.to_owned())
    } else {
        Err("takes fp, dwarf[,SIZE] or lbr".into())
    }
}

/// A size as perf's -m and --aux-sample take it: a number with an optional
/// B/K/M/G suffix (perf's `parse_tag_value` with the size tags).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('B') => (&t[..t.len() - 1], 1),
        Some('K') => (&t[..t.len() - 1], 1 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (a number with an optional B/K/M/G suffix)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// `-m DATA,AUX` as byte sizes: a bare number is pages (perf's
/// `__evlist__parse_mmap_pages`), a suffixed one is bytes rounded up to pages.
pub fn parse_mmap_pages(s: &str, page_size: u64) -> Result<(Option<u64>, Option<u64>), String> {
    let (d, a) = match s.split_once(',') {
        Some((d, a)) => (d, Some(a)),
        None => (s, None),
    };
    let one = |x: &str| -> Result<Option<u64>, String> {
        if x.is_empty() {
            return Ok(None);
        }
        let pages = if x.bytes().all(|c| c.is_ascii_digit()) {
            x.parse::<u64>()
                .map_err(|_| format!("-m: '{x}' is not a page count"))?
        } else {
            parse_size(x)
                .map_err(|e| format!("-m: {e}"))?
                .div_ceil(page_size)
        };
        // perf: the data area must be a power of two pages.
        if pages == 0 || !pages.is_power_of_two() {
            return Err(format!(
                "-m: '{x}' must be a power of two pages (got {pages} pages)"
            ));
        }
        Ok(Some(pages * page_size))
    };
    Ok((one(d)?, a.map(one).transpose()?.flatten()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn perf_option_forms_parse() {
        let c = Cli::try_parse_from([
            "perfaux",
            "record",
            "-Se",
            "-o",
            "x.data",
            "-e",
            "swtrace//",
        ])
        .unwrap();
        let Command::Record(r) = c.cmd else {
            panic!("not record")
        };
        assert_eq!(r.snapshot.as_deref(), Some("e"));
        assert_eq!(r.output, PathBuf::from("x.data"));
        let c = Cli::try_parse_from(["perfaux", "record", "-S", "--aux-sample"]).unwrap();
        let Command::Record(r) = c.cmd else {
            panic!("not record")
        };
        assert_eq!(
            (r.snapshot.as_deref(), r.aux_sample.as_deref()),
            (Some(""), Some("4096"))
        );
        let c = Cli::try_parse_from(["perfaux", "record", "--", "ls", "-l"]).unwrap();
        let Command::Record(r) = c.cmd else {
            panic!("not record")
        };
        assert_eq!(r.command, ["ls", "-l"]);
        let c = Cli::try_parse_from(["perfaux", "report", "-D", "-i", "f"]).unwrap();
        assert!(matches!(
            c.cmd,
            Command::Report(ReportArgs {
                dump_raw_trace: true,
                ..
            })
        ));
    }

    #[test]
    fn sizes_and_mmap_pages() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("8K"), Ok(8192));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(
            parse_mmap_pages("16,1M", 4096),
            Ok((Some(16 * 4096), Some(1 << 20)))
        );
        assert_eq!(parse_mmap_pages(",64K", 4096), Ok((None, Some(64 << 10))));
        assert!(parse_mmap_pages("3", 4096).is_err());
    }
}
