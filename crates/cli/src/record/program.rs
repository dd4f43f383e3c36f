//! `perfaux record -- ./prog`: the command line over perfaux-preload's [`TracedProgram`], which
//! does the tracing. Here: the arguments mapped to [`ProgramOptions`] (`-e` through
//! [`super::program_events`], `-S`, `-m`), the loop with the signals (SIGUSR2 snapshots with
//! `-S`; Ctrl-C sends the program SIGTERM once, and the file is written when it ends), the
//! messages on stderr, and the exit code (the program's).

use std::process::Command;
use std::time::Duration;

use perfaux_preload::host::RingMemoryUse;
use perfaux_preload::{MatchKind, Notice, PatchSpec, ProgramError, ProgramOptions, TracedProgram};

use super::program_events::program_events;
use super::session::{is_stdout, rec_err};
use super::{
    DEFAULT_AUX_SIZE, DEFAULT_DATA_SIZE, RecordSummary, apply_sampling, aux_sample_size, signals,
    snapshot_mode,
};
use crate::cli::{RecordArgs, parse_mmap_pages};
use crate::error::CliError;
use crate::events::resolve_events;
use crate::progress::{Progress, human_bytes};

/// The "not possible" line for `-a`, and for `-p`/`-t` with a command, if given.
pub fn refuse_attach(a: &RecordArgs) -> Option<String> {
    if (a.pid.is_some() || a.tid.is_some()) && !a.command.is_empty() {
        return Some(
            "record: -p/-t record a process that is already running, and `-- COMMAND` starts \
             one: give one of them"
                .into(),
        );
    }
    a.all_cpus.then(|| {
        "record: -a: not possible: perfaux traces a program through the hooks its compiler put \
         in and a runtime loaded when it starts, so it cannot see other processes; trace each \
         program by starting it under perfaux (perfaux record -- ./prog ARGS), or record the \
         kernel's events of a running one with -p PID"
            .to_string()
    })
}

/// `--snapshot-on`, `--snapshot-on-slow`, `--snapshot-on-panic`: the program's
/// perfaux-tracing layer is told through its environment, and sends a `tracing_snapshot`
/// uevent when one fires, on which the recording snapshots. Whether any was asked.
fn tracing_triggers(a: &RecordArgs, cmd: &mut Command) -> Result<bool, CliError> {
    use perfaux_preload::shared::tracing::*;
    let asked = a.snapshot_on.is_some() || a.snapshot_on_slow.is_some() || a.snapshot_on_panic;
    if !asked {
        return Ok(false);
    }
    if snapshot_mode(a)?.is_none() {
        return Err(CliError::msg(
            "record: --snapshot-on, --snapshot-on-slow and --snapshot-on-panic take snapshots: \
             they need -S",
        ));
    }
    if let Some(level) = &a.snapshot_on {
        let known = ["error", "warn", "info", "debug", "trace"];
        if !known.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(CliError::msg(format!(
                "record: --snapshot-on {level}: a level is one of {}",
                known.join(", ")
            )));
        }
        cmd.env(ENV_SNAPSHOT_ON, level);
    }
    if let Some(d) = &a.snapshot_on_slow {
        cmd.env(
            ENV_SNAPSHOT_ON_SLOW_NS,
            super::parse_duration_ns("--snapshot-on-slow", d)?.to_string(),
        );
    }
    if a.snapshot_on_panic {
        cmd.env(ENV_SNAPSHOT_ON_PANIC, "1");
    }
    Ok(true)
}

/// The sampler `-F`, `-c`, `-g` or `--call-graph` add when no `-e` names one.
pub const DEFAULT_SAMPLER: &str = "cpu-clock";

/// What the arguments ask of the program's recording.
fn options(a: &RecordArgs) -> Result<ProgramOptions, CliError> {
    let overwrite = snapshot_mode(a)?.is_some();
    let texts = if a.events.is_empty() {
        let mut texts = vec!["swtrace//".to_string()];
        if super::sampler_options(a)?.any() {
            // perf's `record -F 999 -g ./prog` samples its default event; without a PMU (a
            // VM) perf falls back to cpu-clock, the kernel's, as here.
            texts.push(DEFAULT_SAMPLER.to_string());
        }
        texts
    } else {
        a.events.clone()
    };
    let mut events = resolve_events(&texts, aux_sample_size(a)?).map_err(CliError::msg)?;
    apply_sampling(&mut events, a)?;
    let program = program_events(&events)?;
    let tracing_data = super::program_events::tracing_data(&events)?;
    let page = perfaux_core::page_size() as u64;
    // `-m DATA,AUX` sizes each thread's areas as it does the built-in workload's: the data
    // area holds the thread's uevents and records until the next pass, so a larger one loses
    // fewer in a burst.
    let (data_size, aux_size) = match &a.mmap_pages {
        Some(m) => parse_mmap_pages(m, page)?,
        None => (None, None),
    };
    let (patch, prepared_only) = patch_spec(a)?;
    Ok(ProgramOptions {
        events: program.specs,
        table: program.table,
        kernel_events: program.kernel,
        tracing_data,
        aux_size: aux_size.unwrap_or(DEFAULT_AUX_SIZE),
        data_size: data_size.unwrap_or(DEFAULT_DATA_SIZE),
        overwrite,
        patch,
        prepared_only,
        libcalls: !a.no_libcall,
        max_threads: a.max_threads as usize,
        // A flight recorder's file holds snapshots, but the switches stream in as they come:
        // with -S they are recorded only when asked for.
        switch_events: a.switch_events || (!a.no_switch_events && !overwrite),
        window: super::window(a)?,
    })
}

/// The `-P` / `-U` rules, if any; without them, `-P .` for a program whose entries the
/// compiler prepared for patching (only those it prepared, where it chose some functions:
/// XRay's; the second value). Without them, the way the program is traced is said in one
/// line (its compiler hooks, or its prepared entries); a program with neither is said at its
/// end, with what `-P` would trace.
fn patch_spec(a: &RecordArgs) -> Result<(Option<PatchSpec>, bool), CliError> {
    use perfaux_preload::patching::{TraceWay, XRAY, executable, trace_way};
    if a.patch.is_empty() {
        let prog = &a.command[0];
        return Ok(match executable(prog).and_then(|p| trace_way(&p)) {
            Some(TraceWay::Hooks(how)) => {
                eprintln!("perfaux record: tracing {prog} through its compiler hooks ({how})");
                (None, false)
            }
            Some(TraceWay::Prepared(how, n)) => {
                eprintln!(
                    "perfaux record: tracing {prog} through its {n} patchable function entries \
                     ({how}); -P selects functions"
                );
                let every = PatchSpec::parse(&[".".into()], &[], MatchKind::Regex);
                (Some(every.expect("'.' parses")), how == XRAY)
            }
            None => (None, false),
        });
    }
    let kind = if a.match_kind == "glob" {
        MatchKind::Glob
    } else {
        MatchKind::Regex
    };
    PatchSpec::parse(&a.patch, &a.unpatch, kind)
        .map(|s| (Some(s), false))
        .map_err(|e| CliError::msg(format!("record: -P/-U: {e}")))
}

/// With -v and -P: what the runtime will patch in the executable, and each refused function
/// with its reason (the same plans the runtime makes, from the file).
fn say_patch_plan(prog: &str, spec: &PatchSpec) {
    let Some(path) = perfaux_preload::patching::executable(prog) else {
        return;
    };
    match perfaux_preload::patching::plan_executable(&path, spec) {
        Ok(plan) => {
            eprintln!(
                "perfaux record: -P: {} function(s) of {} to patch, {} refused",
                plan.plans.len(),
                path.display(),
                plan.refused.len()
            );
            for (name, why) in &plan.refused {
                eprintln!("perfaux record: -P: {name}: not patched: {why}");
            }
        }
        Err(e) => eprintln!("perfaux record: -P: {e}"),
    }
}

/// A tracing error as the command line says it: a recorder's error as itself (it names its
/// file or thread), the others after `record:`.
fn program_err(e: ProgramError) -> CliError {
    match e {
        ProgramError::Recorder(e) => rec_err(e),
        e => CliError::msg(format!("record: {}", e.chain())),
    }
}

/// Prints `notices` of one kind (errors or warnings); whether it printed any.
fn say(notices: &[Notice], errors: bool) -> bool {
    let mut any = false;
    for n in notices.iter().filter(|n| n.is_error() == errors) {
        any = true;
        if errors {
            eprintln!("perfaux: error: {n}");
        } else {
            eprintln!("perfaux record: warning: {n}");
        }
    }
    any
}

/// Records `a.command` and says how it went; returns the exit code to leave with: the
/// program's (128 + a signal that ended it), at least 1 if the recording failed though
/// written (a full disk).
pub fn record_program(a: &RecordArgs, verbose: bool) -> Result<i32, CliError> {
    if is_stdout(&a.output) {
        return Err(CliError::msg(
            "record: -o - cannot carry a program's trace (perf 6.1 reads no trace in a pipe-mode \
             perf.data, docs/PERF-COMPAT.md): record to a file with -o FILE",
        ));
    }
    let opts = options(a)?;
    let prog = &a.command[0];
    if verbose && let Some(spec) = &opts.patch {
        say_patch_plan(prog, spec);
    }
    let mut cmd = Command::new(prog);
    cmd.args(&a.command[1..]);
    let triggers = tracing_triggers(a, &mut cmd)?;
    let mut p = TracedProgram::start(cmd, opts, a.output.clone()).map_err(program_err)?;
    if triggers {
        p.snapshot_on_uevent(Some(perfaux_preload::shared::tracing::SNAPSHOT));
    }
    if verbose {
        eprintln!("perfaux record: tracing {prog} (pid {})", p.pid());
    }
    let mut stop_sent = false;
    // The program's output shares the terminal: progress only where it does not (or with -v).
    let mut progress = Progress::new("record", verbose, true);
    let started = std::time::Instant::now();
    // An error said while recording (an event the kernel refused) fails the run at its end,
    // with the file written.
    let mut failed = false;
    loop {
        let step = p.step(Duration::from_millis(1)).map_err(program_err)?;
        if !step.notices.is_empty() {
            progress.done();
        }
        say(&step.notices, false);
        failed |= say(&step.notices, true);
        if progress.due() {
            let (threads, records, aux) = p.progress();
            progress.note(&format!(
                "{:.0} s, {threads} threads traced, {records} records, {} of trace",
                started.elapsed().as_secs_f64(),
                human_bytes(aux)
            ));
        }
        if step.ended {
            break;
        }
        // SIGUSR2 without -S is ignored, as perf does (`snapshot` takes nothing then).
        if signals::take_snapshot_request() {
            p.snapshot().map_err(program_err)?;
        }
        if !stop_sent && signals::stop_requested().is_some() {
            // perf's way: the recording ends with the program, which gets SIGTERM; what it
            // wrote until it dies is kept (a second Ctrl-C aborts, signals.rs).
            p.signal(libc::SIGTERM);
            stop_sent = true;
        }
    }
    progress.done();
    let finished = match p.finish() {
        Ok(f) => f,
        Err(ProgramError::Incomplete {
            what,
            output,
            notices,
        }) => {
            // Written, without what was asked for: said after what the recording had to tell
            // (that the disk filled first).
            say(&notices, false);
            say(&notices, true);
            return Err(program_err(ProgramError::Incomplete {
                what,
                output,
                notices,
            }));
        }
        Err(e) => return Err(program_err(e)),
    };
    say(&finished.notices, false);
    let summary = RecordSummary {
        recorded: finished.summary,
    };
    eprint!("{}", summary.lines(&a.output));
    eprintln!("{}", threads_line(finished.threads, &finished.rings));
    if let Some(line) = finished.end.signal_line(prog) {
        eprintln!("{line}");
    }
    let mut code = i32::from(finished.end.exit_code());
    if say(&finished.notices, true) || failed {
        code = code.max(1);
    }
    Ok(code)
}

/// The threads traced and what their rings cost: the most holding a ring at once (those that
/// ended and whose ring the recorder had not yet taken back count), the rings made, and the
/// memory the threads wrote into them.
fn threads_line(threads: usize, r: &RingMemoryUse) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    format!(
        "[ perfaux record: {threads} threads traced, at most {} at once; {} thread rings made, \
         of {:.2} MiB each, {:.1} MiB of memory in use ]",
        r.peak_held,
        r.slots,
        mib(r.slot_size),
        mib(r.resident)
    )
}
