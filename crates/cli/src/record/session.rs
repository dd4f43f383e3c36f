//! One recording of the built-in workload through perfaux-recorder's
//! [`Recorder`]: the workload's threads, its synthesized records, the
//! drain loop with its signals, and the summary.

use std::path::Path;
use std::time::Duration;

use perfaux_recorder::synth::{synth_comm, synth_mmaps};
use perfaux_recorder::{EventSpec, Output, RecordError, Recorder, RecorderOptions};

use super::attrs::attrs_for;
use super::signals;
use super::{RecordConfig, RecordSummary};
use crate::error::CliError;
use crate::progress::Progress;
use crate::workload::Workload;

/// The uevent sink of the workload: seed 002's prctl, perfaux's function.
fn emit_uevent(type_: u32, data: &[u8]) {
    // A payload over 4096 bytes is E2BIG; the workload's are short.
    let _ = perfaux_core::perf_uevent(type_, data, 0);
}

/// A recorder error as one line with its causes.
pub fn rec_err(e: RecordError) -> CliError {
    CliError::msg(e.chain())
}

/// Whether `path` means standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Runs the recording `cfg` describes; prints nothing but progress.
pub fn record(cfg: &RecordConfig, progress: &mut Progress) -> Result<RecordSummary, CliError> {
    let mut specs = Vec::with_capacity(cfg.events.len());
    for (i, ev) in cfg.events.iter().enumerate() {
        let a = attrs_for(ev)?;
        let mut s = EventSpec::new(a.name, a.open, i);
        s.leader = ev.leader;
        s.uevent_stream = a.uevent_stream;
        specs.push(s);
    }
    let opts = RecorderOptions {
        data_size: cfg.data_size,
        aux_size: cfg.aux_size,
        overwrite: cfg.snapshot.is_some(),
    };
    let output = if is_stdout(&cfg.output) {
        Output::Pipe(Box::new(std::io::stdout()))
    } else {
        Output::File(cfg.output.clone())
    };
    let workload = Workload::spawn(cfg.requests, emit_uevent)
        .map_err(|e| CliError::msg(format!("cannot start the workload: {e}")))?;
    let mut r = Recorder::new(specs, opts, workload.tids(), output).map_err(rec_err)?;
    r.set_window(cfg.window);
    let pid = std::process::id();
    synth_comm(&mut r, pid, pid, "perfaux").map_err(rec_err)?;
    synth_mmaps(&mut r, pid).map_err(rec_err)?;
    for (w, &tid) in workload.tids().iter().enumerate() {
        synth_comm(&mut r, pid, tid as u32, &format!("perfaux-worker{w}")).map_err(rec_err)?;
    }
    r.finish_round().map_err(rec_err)?;
    r.enable().map_err(rec_err)?;
    if cfg.verbose {
        eprintln!(
            "perfaux record: recording started ({} threads, {} events each)",
            workload.tids().len(),
            cfg.events.len()
        );
    }
    workload.start();
    let mut stopped = false;
    loop {
        let done = workload.is_finished();
        r.drain().map_err(rec_err)?;
        // SIGUSR2 without -S is ignored, as perf does.
        if signals::take_snapshot_request() && cfg.snapshot.is_some() {
            r.snapshot().map_err(rec_err)?;
        }
        let s = r.summary();
        progress.note(&format!(
            "{} records, {} bytes of AUX",
            s.records, s.aux_bytes
        ));
        if signals::stop_requested().is_some() {
            stopped = true;
            break;
        }
        if done {
            break;
        }
        // Woken when a ring passes its watermark; the timeout bounds how
        // late a signal is seen.
        r.wait(Duration::from_millis(10));
    }
    // The workers are done (or interrupted) but alive: last snapshot, then
    // finish stops the events and drains them a last time.
    if cfg.snapshot == Some(true) || (cfg.snapshot.is_some() && signals::take_snapshot_request()) {
        r.snapshot().map_err(rec_err)?;
    }
    r.disable().map_err(rec_err)?;
    let s = r.finish().map_err(rec_err)?;
    if !stopped {
        workload.join().map_err(CliError::msg)?;
    }
    // Interrupted: the workers are let go, unrecorded, and end with the process.
    Ok(RecordSummary { recorded: s })
}
