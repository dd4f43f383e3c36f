//! `perfaux record`: runs the built-in workload under perfaux's perf core
//! and writes a perf.data that perf 6.1 reads, as `perf record` does
//! (tools/perf/builtin-record.c): open the events per thread, map one buffer
//! per thread (other events redirected into it with SET_OUTPUT), enable,
//! drain the data and AUX areas while the workload runs (FINISHED_ROUND
//! after each pass), snapshot on SIGUSR2 in `-S` mode, and write the file.
//!
//! The recorder is perfaux-recorder's `Recorder`; the recording format is
//! perfaux-perfdata's (`trace_section`, `uevent_sample`, `record_attrs`);
//! [`attrs`] maps `-e` events to attrs, [`signals`] holds the signals.

pub mod attach;
pub mod attrs;
pub mod program;
mod program_events;
mod ring_sizes;
mod session;
pub mod signals;

use std::path::PathBuf;

use crate::cli::{RecordArgs, parse_mmap_pages, parse_size};
use crate::error::CliError;
use crate::events::{Event, SamplerOptions, apply_sampler_options, resolve_events};

pub use session::record;

/// perf's default AUX size for a privileged Intel PT recording is 4 MiB
/// (128 KiB unprivileged); the software trace of the built-in workload
/// runs at a few MB/s per thread, so perfaux maps 4 MiB per thread,
/// drained when a quarter is full: no loss with four busy loops beside it.
pub const DEFAULT_AUX_SIZE: u64 = 4 << 20;
/// Data area per thread (perf's default is 512 KiB per CPU). The
/// workload's uevent samples come at about 10 MB/s; 4 MiB gives the
/// drain loop, woken at a quarter of it, about 300 ms of slack when
/// the machine is loaded (`--requests 20000` beside 4 busy loops lost
/// records with 1 MiB).
pub const DEFAULT_DATA_SIZE: u64 = 4 << 20;

/// What to record, from the command line.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    pub output: PathBuf,
    pub events: Vec<Event>,
    /// `-S`: `Some(at_exit)`.
    pub snapshot: Option<bool>,
    /// `--window`: each snapshot keeps at least this much of each thread's trace.
    pub window: Option<std::time::Duration>,
    pub data_size: u64,
    pub aux_size: u64,
    pub requests: u32,
    /// Print "recording started" etc. on stderr.
    pub verbose: bool,
}

/// The events recorded when no -e is given: the trace PMU on each workload
/// thread and the uevent stream (like `perf record -e intel_pt//`); with
/// --aux-sample, the `request_done` uevents sample the trace.
pub fn default_events(aux_sample: bool) -> Vec<String> {
    if aux_sample {
        vec!["{swtrace//,uevent:request_done}".into(), "uevent".into()]
    } else {
        vec!["swtrace//".into(), "uevent".into()]
    }
}

/// `-g`/`--call-graph`, `-F` and `-c`.
pub fn sampler_options(a: &RecordArgs) -> Result<SamplerOptions, CliError> {
    for (flag, v) in [("-F", a.freq), ("-c", a.count)] {
        if v == Some(0) {
            return Err(CliError::msg(format!("{flag}: must be at least 1")));
        }
    }
    let dwarf_stack = match &a.call_graph {
        Some(mode) => crate::events::dwarf_stack_size(mode).map_err(CliError::msg)?,
        None => None,
    };
    Ok(SamplerOptions {
        dwarf_stack,
        callchain: a.call_graph_g || a.call_graph.is_some(),
        freq: a.freq,
        period: a.count,
    })
}

/// Record's sampler options applied to `events`, and perf's rules against the running
/// kernel's perf_event_max_sample_rate ([`crate::events::max_rate`]), their warnings said on
/// stderr.
pub fn apply_sampling(events: &mut [Event], a: &RecordArgs) -> Result<(), CliError> {
    use crate::events::max_rate::{fit_clock_defaults, throttle_user_freq};
    let max_rate = perfaux_core::max_sample_rate();
    let mut o = sampler_options(a)?;
    let throttled = throttle_user_freq(&mut o, max_rate);
    apply_sampler_options(events, &o).map_err(CliError::msg)?;
    let lowered = fit_clock_defaults(events, max_rate).map_err(CliError::msg)?;
    for w in throttled.into_iter().chain(lowered) {
        eprintln!("perfaux record: warning: {w}");
    }
    Ok(())
}

/// `--aux-sample`'s size, if given.
pub fn aux_sample_size(a: &RecordArgs) -> Result<Option<u32>, CliError> {
    let Some(s) = &a.aux_sample else {
        return Ok(None);
    };
    let n = parse_size(s).map_err(|e| CliError::msg(format!("--aux-sample: {e}")))?;
    // The sample is a record with a u16 size (struct perf_event_header); perf caps it at 60 KiB.
    if n == 0 || n > 60 << 10 {
        return Err(CliError::msg(format!(
            "--aux-sample: size {n} is outside 1..=61440 bytes"
        )));
    }
    Ok(Some(n as u32))
}

/// `50ms`, `2s`, `100us`, `1500ns` (a number alone is milliseconds) in nanoseconds; `flag`
/// names the option in the error.
pub fn parse_duration_ns(flag: &str, text: &str) -> Result<u64, CliError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "ns" => 1,
        "us" => 1_000,
        "" | "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => 0,
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(ns) if ns > 0 => Ok(ns),
        _ => Err(CliError::msg(format!(
            "record: {flag} {text}: a duration is a positive number with ns, us, ms or s (e.g. \
             50ms)"
        ))),
    }
}

/// `--window`: how much of each thread's newest trace a snapshot keeps at least; needs -S.
pub fn window(a: &RecordArgs) -> Result<Option<std::time::Duration>, CliError> {
    let Some(w) = &a.window else {
        return Ok(None);
    };
    if snapshot_mode(a)?.is_none() {
        return Err(CliError::msg(
            "record: --window bounds the snapshots of a flight recording: it needs -S",
        ));
    }
    Ok(Some(std::time::Duration::from_nanos(parse_duration_ns(
        "--window", w,
    )?)))
}

/// `-S`/`--snapshot`: `None` without it, `Some(at_exit)` with it (`-Se`: also at the end).
pub fn snapshot_mode(a: &RecordArgs) -> Result<Option<bool>, CliError> {
    match a.snapshot.as_deref() {
        None => Ok(None),
        Some("") => Ok(Some(false)),
        Some("e") => Ok(Some(true)),
        Some(other) => Err(CliError::msg(format!(
            "-S/--snapshot: unknown option '{other}' (only 'e', snapshot at exit)"
        ))),
    }
}

impl RecordConfig {
    pub fn from_args(a: &RecordArgs, verbose: bool) -> Result<Self, CliError> {
        if !a.command.is_empty() {
            return Err(CliError::msg(format!(
                "record: '{}' is a program: record it with program::record_program (the built-in \
                 workload's configuration takes no command)",
                a.command.join(" ")
            )));
        }
        if a.snapshot_on.is_some() || a.snapshot_on_slow.is_some() || a.snapshot_on_panic {
            return Err(CliError::msg(
                "record: --snapshot-on, --snapshot-on-slow and --snapshot-on-panic are for a \
                 program that uses perfaux-tracing (record -S ... -- PROG)",
            ));
        }
        let snapshot = snapshot_mode(a)?;
        let aux_sample = aux_sample_size(a)?;
        let texts = if a.events.is_empty() {
            default_events(aux_sample.is_some())
        } else {
            a.events.clone()
        };
        let mut events = resolve_events(&texts, aux_sample)?;
        apply_sampling(&mut events, a)?;
        if let Some(e) = events
            .iter()
            .find(|e| matches!(e.kind, crate::events::EventKind::Tracepoint { .. }))
        {
            return Err(CliError::msg(format!(
                "record: event '{}' is a tracepoint of the running kernel: perfaux records \
                 those for a program it starts (record -e ... -- ./prog) or a process that \
                 runs (record -p PID -e ...); the built-in workload runs perfaux's own perf \
                 core, which has none",
                e.text
            )));
        }
        let page = perfaux_core::page_size() as u64;
        let (data, aux) = match &a.mmap_pages {
            Some(m) => parse_mmap_pages(m, page)?,
            None => (None, None),
        };
        if a.requests == 0 {
            return Err(CliError::msg("--requests must be at least 1"));
        }
        let (mut data_size, mut aux_size) = (
            data.unwrap_or(DEFAULT_DATA_SIZE),
            aux.unwrap_or(DEFAULT_AUX_SIZE),
        );
        if data.is_none() || aux.is_none() {
            let limits = perfaux_core::MlockLimits::current(page);
            if let Some((d, x)) = ring_sizes::sizes_within_mlock(
                crate::workload::WORKERS as u64,
                page,
                (data.is_none(), aux.is_none()),
                (data_size, aux_size),
                &limits,
            ) {
                eprintln!(
                    "perfaux record: the rings are sized {} KiB of data and {} KiB of trace a \
                     thread, to fit the memory a user without CAP_IPC_LOCK may lock for perf \
                     (kernel.perf_event_mlock_kb a CPU, then RLIMIT_MEMLOCK); -m sets them",
                    d / 1024,
                    x / 1024
                );
                (data_size, aux_size) = (d, x);
            }
        }
        Ok(RecordConfig {
            output: a.output.clone(),
            events,
            snapshot,
            window: window(a)?,
            data_size,
            aux_size,
            requests: a.requests,
            verbose,
        })
    }
}

/// What `record` did, for perf's closing lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// The recorder's counts (dropped pause/resume included: each AUX
    /// event's own).
    pub recorded: perfaux_recorder::RecordSummary,
}

impl RecordSummary {
    /// The error to end with if the disk filled during the recording (the file is written,
    /// whole, with everything before).
    pub fn disk_full_line(&self, output: &std::path::Path) -> Option<String> {
        perfaux_preload::Notice::disk_filled(output, &self.recorded).map(|n| n.to_string())
    }

    /// What was lost and why, one line a kind (none without loss): the closing line's
    /// "N lost" alone says neither.
    pub fn loss_lines(&self) -> String {
        let r = &self.recorded;
        let mut out = String::new();
        if r.lost_records > 0 {
            out.push_str(&format!(
                "perfaux record: {} records lost (PERF_RECORD_LOST): the data area ({} KiB \
                 a thread, -m) was full when they came",
                r.lost_records,
                r.data_size / 1024
            ));
            if r.aux_sample_size > 0 {
                out.push_str(&format!(
                    "; each sample carries up to {} bytes of trace (--aux-sample): a larger \
                     -m or a smaller --aux-sample keeps more",
                    r.aux_sample_size
                ));
            } else {
                out.push_str("; a larger -m keeps more");
            }
            out.push('\n');
        }
        if r.lost_samples > 0 {
            out.push_str(&format!(
                "perfaux record: {} samples lost (PERF_RECORD_LOST_SAMPLES): the perf core \
                 could not write them\n",
                r.lost_samples
            ));
        }
        if r.aux_truncated > 0 {
            out.push_str(&format!(
                "perfaux record: {} trace transactions cut short (PERF_AUX_FLAG_TRUNCATED): \
                 the AUX area was full (-m ,N enlarges it)\n",
                r.aux_truncated
            ));
        }
        out
    }

    /// perf's two closing lines, then what was lost and why, then one line for each span of a
    /// thread's time with no trace (its AUX area filled before the recorder drained it).
    pub fn lines(&self, output: &std::path::Path) -> String {
        let mut s = self.closing_lines(output);
        s.push_str(&self.loss_lines());
        for g in &self.recorded.trace_gaps {
            s.push_str(&gap_line(g));
        }
        if self.recorded.unlisted_trace_gaps > 0 {
            s.push_str(&format!(
                "[ perfaux record: and {} more spans of a thread with no trace ]\n",
                self.recorded.unlisted_trace_gaps
            ));
        }
        s
    }

    fn closing_lines(&self, output: &std::path::Path) -> String {
        format!(
            "[ perfaux record: Woken up {} times to write data ]\n\
             [ perfaux record: Captured and wrote {:.3} MB {} ({} records, {} bytes of AUX, {} lost, {} snapshots, {} dropped pause/resume) ]\n",
            self.recorded.wakeups,
            self.recorded.file_size as f64 / (1024.0 * 1024.0),
            output.display(),
            self.recorded.records,
            self.recorded.aux_bytes,
            self.recorded.lost,
            self.recorded.snapshots,
            self.recorded.dropped_pause_resume
        )
    }
}

/// Seconds with microseconds, as perf script prints times.
fn seconds(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

/// `thread T: no trace from t0 to t1 (N trace events dropped)`: where a thread's AUX area was
/// full (the TRUNCATED record) until the trace resumed.
fn gap_line(g: &perfaux_recorder::TraceGap) -> String {
    match (g.to_ns, g.dropped_events) {
        (Some(to), Some(n)) => format!(
            "[ perfaux record: thread {}: no trace from {} to {} ({} trace events dropped: its \
             AUX area was full) ]\n",
            g.tid,
            seconds(g.from_ns),
            seconds(to),
            n
        ),
        _ => format!(
            "[ perfaux record: thread {}: no trace from {} to the end of its recording (its AUX \
             area was full) ]\n",
            g.tid,
            seconds(g.from_ns)
        ),
    }
}
