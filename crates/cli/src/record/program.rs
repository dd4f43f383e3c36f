//! `perfaux record -- ./prog`: the command line over perfaux-preload's [`TracedProgram`], which
//! does the tracing. Here: the arguments mapped to [`ProgramOptions`] (`-e` through
//! [`super::program_events`], `-S`, `-m`), the loop with the signals (SIGUSR2 snapshots with
//! `-S`; Ctrl-C sends the program SIGTERM once, and the file is written when it ends), the
//! messages on stderr, and the exit code (the program's).

use std::process::Command;
use std::time::Duration;

use perfaux_preload::{MatchKind, Notice, PatchSpec, ProgramError, ProgramOptions, TracedProgram};

use super::program_events::program_events;
use super::session::{is_stdout, rec_err};
use super::{
    DEFAULT_AUX_SIZE, DEFAULT_DATA_SIZE, RecordSummary, aux_sample_size, sampler_options, signals,
    snapshot_mode,
};
use crate::cli::{RecordArgs, parse_mmap_pages};
use crate::error::CliError;
use crate::events::{apply_sampler_options, resolve_events};

/// The "not possible" line for `-p PID` and `-a`, if either is given.
pub fn refuse_attach(a: &RecordArgs) -> Option<String> {
    let how = "perfaux traces a program through the hooks its compiler put in \
               (-finstrument-functions, -pg) and a runtime loaded when it starts (LD_PRELOAD), \
               with no kernel PMU";
    if let Some(pid) = &a.pid {
        return Some(format!(
            "record: -p {pid}: not possible: {how}, so a process that is already running has \
             no runtime to write its trace; start it under perfaux instead: \
             perfaux record -- ./prog ARGS"
        ));
    }
    a.all_cpus.then(|| {
        format!(
            "record: -a: not possible: {how}, so it cannot see other processes; trace each \
             program by starting it under perfaux: perfaux record -- ./prog ARGS"
        )
    })
}

/// What the arguments ask of the program's recording.
fn options(a: &RecordArgs) -> Result<ProgramOptions, CliError> {
    let overwrite = snapshot_mode(a)?.is_some();
    let texts = if a.events.is_empty() {
        vec!["swtrace//".to_string()]
    } else {
        a.events.clone()
    };
    let mut events = resolve_events(&texts, aux_sample_size(a)?).map_err(CliError::msg)?;
    apply_sampler_options(&mut events, &sampler_options(a)?).map_err(CliError::msg)?;
    let (events, table) = program_events(&events)?;
    let page = perfaux_core::page_size() as u64;
    // `-m DATA,AUX` sizes each thread's areas as it does the built-in workload's: the data
    // area holds the thread's uevents and records until the next pass, so a larger one loses
    // fewer in a burst.
    let (data_size, aux_size) = match &a.mmap_pages {
        Some(m) => parse_mmap_pages(m, page)?,
        None => (None, None),
    };
    Ok(ProgramOptions {
        events,
        table,
        aux_size: aux_size.unwrap_or(DEFAULT_AUX_SIZE),
        data_size: data_size.unwrap_or(DEFAULT_DATA_SIZE),
        overwrite,
        patch: patch_spec(a)?,
        libcalls: !a.no_libcall,
    })
}

/// The `-P` / `-U` rules, if any; without them, `-P .` for a program whose entries the
/// compiler prepared for patching (said in one line).
fn patch_spec(a: &RecordArgs) -> Result<Option<PatchSpec>, CliError> {
    if a.patch.is_empty() {
        let prepared = a
            .command
            .first()
            .and_then(|p| perfaux_preload::patching::executable(p))
            .and_then(|p| perfaux_preload::patching::prepared_entries(&p));
        return Ok(prepared.map(|(how, n)| {
            eprintln!(
                "perfaux record: tracing {} through its {n} patchable function entries ({how}); \
                 -P selects functions",
                a.command[0]
            );
            PatchSpec::parse(&[".".into()], &[], MatchKind::Regex).expect("'.' parses")
        }));
    }
    let kind = if a.match_kind == "glob" {
        MatchKind::Glob
    } else {
        MatchKind::Regex
    };
    PatchSpec::parse(&a.patch, &a.unpatch, kind)
        .map(Some)
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
    let mut p = TracedProgram::start(cmd, opts, a.output.clone()).map_err(program_err)?;
    if verbose {
        eprintln!("perfaux record: tracing {prog} (pid {})", p.pid());
    }
    let mut stop_sent = false;
    loop {
        let step = p.step(Duration::from_millis(1)).map_err(program_err)?;
        say(&step.notices, false);
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
    if let Some(line) = finished.end.signal_line(prog) {
        eprintln!("{line}");
    }
    let mut code = i32::from(finished.end.exit_code());
    if say(&finished.notices, true) {
        code = code.max(1);
    }
    Ok(code)
}
