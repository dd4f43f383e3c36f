//! The trace clock under load, end to end: the trace's times (TSC, converted at SYNC packets)
//! and the uevents' times (the perf clock, CLOCK_MONOTONIC) agree on the same moment, under
//! CPU load, in every run. The built-in workload emits `request_start` before it calls
//! `serve_request` and `request_done` after it returns, on the same thread: whatever the
//! scheduler does, the call's entry lies between the two uevents in real time, so a trace clock
//! off by more than the gap between them puts the entry outside its bracket. Under 4 busy
//! loops no entry is outside; each run also checks that a wrong clock is caught: the trace's
//! times shifted 5 us earlier (the gap before the entry is about 1 us here) or 250 us later
//! (the smallest shift seen when the clock was wrong under load) put most entries outside.
//! `sample_time_agreement` does the same for samples.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::PERFAUX;
use common::timing::{BusyLoops, call_entries, perfaux_on, time_ns};

/// `script` prints uevent times in microseconds: allow its rounding.
const ROUNDING_NS: u64 = 1_000;

/// Per thread, per request: (request_start, request_done) uevent times.
fn uevent_brackets(script: &str) -> HashMap<(u32, u32), (u64, u64)> {
    let mut m: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
    for l in script.lines().filter(|l| l.contains("perfaux:uevent:")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let tid: u32 = f[1].parse().unwrap();
        let t = time_ns(f[3]).unwrap_or_else(|| panic!("time in {l:?}"));
        let Some(req) = l
            .split("req=")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|r| r.parse::<u32>().ok())
        else {
            continue;
        };
        let e = m.entry((tid, req)).or_insert((0, u64::MAX));
        if l.contains("request_start(") {
            e.0 = t;
        } else if l.contains("request_done(") {
            e.1 = t;
        }
    }
    m
}

/// The trace's clock shifted by these ns, which the check must catch in every run: 5 us
/// earlier, and the smallest shift seen when the clock was wrong under load, 250 us later.
const WRONG_CLOCKS: [i64; 2] = [-5_000, 250_000];

/// Per thread, per request, how far (ns) the `serve_request` entry, its time moved by `shift`,
/// lies outside its uevents' bracket (0: inside), for the requests with both uevents.
fn outside(
    entries: &HashMap<u32, Vec<(&str, u64)>>,
    brackets: &HashMap<(u32, u32), (u64, u64)>,
    shift: i64,
) -> Vec<(u32, u32, u64)> {
    let mut v = Vec::new();
    for (&tid, times) in entries {
        for (req, &(_, entry)) in times.iter().enumerate() {
            let Some(&(start, done)) = brackets.get(&(tid, req as u32)) else {
                continue;
            };
            let entry = entry.saturating_add_signed(shift);
            let early = start.saturating_sub(entry + ROUNDING_NS);
            let late = entry.saturating_sub(done.saturating_add(ROUNDING_NS));
            v.push((tid, req as u32, early.max(late)));
        }
    }
    v
}

#[test]
fn trace_and_uevent_times_agree_under_load_in_every_run() {
    // Four busy loops on the machine's cores, the load under which the clock once went wrong.
    let load = BusyLoops::start(4);
    let dir = tempfile::tempdir().unwrap();
    let mut worst = 0u64;
    let mut failures = Vec::new();
    for run_no in 0..6 {
        let data = dir.path().join(format!("t{run_no}.data"));
        let rec = Command::new(PERFAUX)
            .args(["record", "--requests", "300", "-o"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            rec.status.success(),
            "{}",
            String::from_utf8_lossy(&rec.stderr)
        );
        let brackets = uevent_brackets(&perfaux_on(&["script"], &data));
        let calls = perfaux_on(&["script", "--call-trace"], &data);
        let entries = call_entries(&calls, |f| f == "serve_request");
        assert!(!entries.is_empty(), "run {run_no}: no serve_request calls");
        let checked = outside(&entries, &brackets, 0);
        assert!(
            checked.len() > 100,
            "run {run_no}: only {} calls matched their uevents",
            checked.len()
        );
        for (tid, req, off) in checked {
            worst = worst.max(off);
            if off > 0 {
                failures.push(format!(
                    "run {run_no} tid {tid} req {req}: entry outside its bracket by {off} ns"
                ));
            }
        }
        // The check sees a wrong clock: most entries fall outside their brackets.
        for shift in WRONG_CLOCKS {
            let shifted = outside(&entries, &brackets, shift);
            let caught = shifted.iter().filter(|c| c.2 > 0).count();
            assert!(
                caught * 2 > shifted.len(),
                "run {run_no}: trace times shifted by {shift} ns put only {caught} of {} entries \
                 outside their brackets",
                shifted.len()
            );
        }
    }
    drop(load);
    assert!(
        failures.is_empty(),
        "{} calls outside their uevents' bracket, worst {worst} ns:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
}
