//! `perfaux record -p PID` / `-t TID,...`: the command line over perfaux-preload's
//! [`AttachedProcess`]: the running kernel's events of a process already running (samples with
//! their call chains, counts, context switches), until it ends or Ctrl-C; it goes on running.
//! Its calls cannot be traced (no runtime was loaded when it started): the events that trace
//! (swtrace//, probe:, uevent) are refused with what to run instead.

use std::time::Duration;

use perfaux_preload::attach::{AttachOptions, AttachedProcess, process_of};
use perfaux_preload::{Notice, ProgramError};

use super::program::DEFAULT_SAMPLER;
use super::program_events::{is_kernel_event, kernel_specs};
use super::session::rec_err;
use super::{RecordSummary, apply_sampling, signals, snapshot_mode};
use crate::cli::RecordArgs;
use crate::error::CliError;
use crate::events::resolve_events;

/// The process and, with `-t`, its threads to record.
fn targets(a: &RecordArgs) -> Result<(u32, Option<Vec<u32>>), CliError> {
    let num = |flag: &str, t: &str| -> Result<u32, CliError> {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| CliError::msg(format!("record: {flag} {t}: not a process id")))
    };
    if let Some(pid) = &a.pid {
        return Ok((num("-p", pid)?, None));
    }
    let list = a.tid.as_deref().unwrap_or_default();
    let tids = list
        .split(',')
        .map(|t| num("-t", t))
        .collect::<Result<Vec<u32>, _>>()?;
    let mut pid = None;
    for &t in &tids {
        let p = process_of(t)
            .map_err(|e| CliError::msg(format!("record: -t {t}: no such thread ({e})")))?;
        if pid.is_some_and(|q| q != p) {
            return Err(CliError::msg(format!(
                "record: -t {list}: the threads are of more than one process; record each \
                 process on its own"
            )));
        }
        pid = Some(p);
    }
    let pid = pid.ok_or_else(|| CliError::msg("record: -t: no thread given"))?;
    Ok((pid, Some(tids)))
}

/// What the arguments ask of the running process's recording.
fn options(a: &RecordArgs, pid: u32) -> Result<AttachOptions, CliError> {
    if snapshot_mode(a)?.is_some() {
        return Err(CliError::msg(
            "record: -S with -p/-t: a snapshot is of the call trace, which a running process \
             does not write (start it under perfaux: perfaux record -S -- ./prog)",
        ));
    }
    let texts = if a.events.is_empty() {
        vec![DEFAULT_SAMPLER.to_string()]
    } else {
        a.events.clone()
    };
    let mut events = resolve_events(&texts, None).map_err(CliError::msg)?;
    apply_sampling(&mut events, a)?;
    if let Some(i) = (0..events.len()).find(|&i| !is_kernel_event(&events, i)) {
        return Err(CliError::msg(format!(
            "record: -p {pid}: event '{}' needs the call trace, which a process already \
             running cannot give: perfaux's runtime is loaded when a program starts (perfaux \
             record -e ... -- ./prog); -p records the kernel's events of a running process \
             (task-clock, cpu-clock, page-faults, context-switches, ...)",
            events[i].text
        )));
    }
    Ok(AttachOptions {
        events: kernel_specs(&events)?,
        switch_events: !a.no_switch_events,
        tids: None,
        tracing_data: super::program_events::tracing_data(&events)?,
    })
}

fn attach_err(e: ProgramError) -> CliError {
    match e {
        ProgramError::Recorder(e) => rec_err(e),
        e => CliError::msg(format!("record: {}", e.chain())),
    }
}

/// Records the process `-p` or `-t` names until it ends or Ctrl-C; the exit code: 1 if an
/// event asked for could not be recorded (the file is written without it).
pub fn record_attached(a: &RecordArgs, verbose: bool) -> Result<i32, CliError> {
    let (pid, tids) = targets(a)?;
    let mut opts = options(a, pid)?;
    opts.tids = tids;
    let mut p = AttachedProcess::start(pid, opts, a.output.clone()).map_err(attach_err)?;
    eprintln!(
        "perfaux record: recording the kernel's events of process {pid} ({} threads, and those \
         it makes); Ctrl-C ends the recording, the process goes on. Its calls are not traced: \
         that needs it started under perfaux (perfaux record -- ./prog)",
        p.threads()
    );
    let mut failed = false;
    loop {
        let step = p
            .step(Duration::from_millis(if verbose { 1 } else { 10 }))
            .map_err(attach_err)?;
        for n in &step.notices {
            let (kind, error) = if n.is_error() {
                ("error", true)
            } else {
                ("warning", false)
            };
            eprintln!("perfaux record: {kind}: {n}");
            failed |= error;
        }
        if step.ended || signals::stop_requested().is_some() {
            break;
        }
    }
    let summary = RecordSummary {
        recorded: p.finish().map_err(attach_err)?,
    };
    eprint!("{}", summary.lines(&a.output));
    if let Some(n) = Notice::disk_filled(&a.output, &summary.recorded) {
        eprintln!("perfaux: error: {n}");
        failed = true;
    }
    Ok(i32::from(failed))
}
