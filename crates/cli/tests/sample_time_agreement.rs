//! The trace clock under load, end to end, for samples: a probe event's sample
//! (PERF_SAMPLE_TIME, the perf clock, CLOCK_MONOTONIC) and the trace's ENTER of the call it
//! fired at (TSC, converted at SYNC packets) agree on the moment of the call, per thread,
//! under CPU load, in every run.
//!
//! The sampler of `probe:FUNC` runs at the function's entry, just before the ENTER packet is
//! written, on the same thread; `serve_request` calls `parse_request` first thing. So, with
//! both probed, each probed call's entry lies between its own sample and the next probe
//! sample of its thread in real time: for `serve_request` that is `parse_request`'s, about
//! 100 ns later. The bracket is causal (a thread pre-empted anywhere in it moves its end
//! too), so no amount of load puts an entry outside it; only a wrong clock does. Both clocks
//! print in ns here (`report -D` for samples, `script --call-trace` for entries), and
//! [`CLOCK_ERROR_NS`] allows the TSC conversion's error, as `time_agreement` allows the
//! uevents' rounding. Each run also checks that shifting the trace's times 5 us either way is
//! caught: most entries leave their brackets.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::PERFAUX;
use common::timing::{BusyLoops, call_entries, perfaux_on};

/// The probed functions: `serve_request` calls `parse_request` first.
const PROBED: [&str; 2] = ["serve_request", "parse_request"];

/// How far the trace's converted time may lie outside the causal bracket: the TSC to
/// CLOCK_MONOTONIC conversion's error (anchors and rate, swtrace's clock module; measured
/// under 4 busy loops: a constant offset per thread of up to about 270 ns), the bound
/// `time_agreement` applies to uevents.
const CLOCK_ERROR_NS: u64 = 1_000;

/// Trace clocks the check must catch: the trace's times shifted 5 us earlier and later.
const WRONG_CLOCKS: [i64; 2] = [-5_000, 5_000];

/// Per thread, the probe samples (function, time in ns) in time order, from `report -D` (its
/// `CPU TIME OFFSET [SIZE]: PERF_RECORD_SAMPLE(...): PID/TID: IP ...` lines) and the IP of
/// each probe event, which `script` prints with the event's name.
fn probe_samples(dump: &str, script: &str) -> HashMap<u32, Vec<(&'static str, u64)>> {
    let mut ips: HashMap<u64, &'static str> = HashMap::new();
    for l in script.lines() {
        let Some(func) = PROBED
            .into_iter()
            .find(|f| l.contains(&format!(" probe:{f}: ")))
        else {
            continue;
        };
        let after = l.split_once(&format!("probe:{func}: ")).unwrap().1;
        let ip = after.split_whitespace().next().unwrap();
        ips.insert(u64::from_str_radix(ip, 16).unwrap(), func);
    }
    assert_eq!(ips.len(), PROBED.len(), "no samples of some probe: {ips:?}");
    let mut m: HashMap<u32, Vec<(&'static str, u64)>> = HashMap::new();
    for l in dump.lines().filter(|l| l.contains(": PERF_RECORD_SAMPLE(")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let time: u64 = f[1].parse().unwrap_or_else(|_| panic!("time in {l:?}"));
        let at = f
            .iter()
            .position(|w| w.contains('/') && w.ends_with(':'))
            .unwrap_or_else(|| panic!("pid/tid in {l:?}"));
        let tid: u32 = f[at]
            .trim_end_matches(':')
            .split('/')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let ip = u64::from_str_radix(f[at + 1].trim_start_matches("0x"), 16).unwrap();
        let func = ips
            .get(&ip)
            .unwrap_or_else(|| panic!("unknown IP in {l:?}"));
        m.entry(tid).or_default().push((func, time));
    }
    for v in m.values_mut() {
        v.sort_by_key(|s| s.1);
    }
    m
}

/// One probed call: its thread, place among the thread's probed calls, function, sample
/// time, the next sample's time on the thread (None for the last) and ENTER time.
struct Call {
    tid: u32,
    n: usize,
    func: &'static str,
    sample: u64,
    next_sample: Option<u64>,
    entry: u64,
}

/// Pairs each thread's samples with its probed ENTERs, in order: the n-th sample fired at the
/// n-th probed call. Panics when the sequences disagree (a lost sample or call).
fn pair(
    samples: &HashMap<u32, Vec<(&'static str, u64)>>,
    entries: &HashMap<u32, Vec<(&str, u64)>>,
) -> Vec<Call> {
    let mut calls = Vec::new();
    for (&tid, ss) in samples {
        let es = entries
            .get(&tid)
            .unwrap_or_else(|| panic!("tid {tid}: samples but no trace"));
        let names = |v: &[(&str, u64)]| v.iter().map(|c| c.0.to_owned()).collect::<Vec<_>>();
        assert_eq!(
            names(ss),
            names(es),
            "tid {tid}: the probe samples and the trace's calls differ"
        );
        for (n, (&(func, sample), &(_, entry))) in ss.iter().zip(es).enumerate() {
            calls.push(Call {
                tid,
                n,
                func,
                sample,
                next_sample: ss.get(n + 1).map(|s| s.1),
                entry,
            });
        }
    }
    calls
}

/// How far (ns) the call's ENTER, its time moved by `shift`, lies outside
/// `[sample, next sample]` widened by [`CLOCK_ERROR_NS`] (0: inside).
fn outside(c: &Call, shift: i64) -> u64 {
    let entry = c.entry.saturating_add_signed(shift);
    let early = c.sample.saturating_sub(entry + CLOCK_ERROR_NS);
    let late = c
        .next_sample
        .map_or(0, |next| entry.saturating_sub(next + CLOCK_ERROR_NS));
    early.max(late)
}

#[test]
fn probe_samples_and_trace_entries_agree_under_load_in_every_run() {
    // Four busy loops on the machine's cores, the load under which the clock once went wrong.
    let load = BusyLoops::start(4);
    let dir = tempfile::tempdir().unwrap();
    let mut worst = 0u64;
    let mut failures = Vec::new();
    for run_no in 0..6 {
        let data = dir.path().join(format!("s{run_no}.data"));
        let rec = Command::new(PERFAUX)
            .args([
                "record",
                "--requests",
                "300",
                "-e",
                "{swtrace//,probe:serve_request,probe:parse_request}",
                "-o",
            ])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            rec.status.success(),
            "{}",
            String::from_utf8_lossy(&rec.stderr)
        );
        let samples = probe_samples(
            &perfaux_on(&["report", "-D"], &data),
            &perfaux_on(&["script"], &data),
        );
        let trace = perfaux_on(&["script", "--call-trace"], &data);
        let entries = call_entries(&trace, |f| PROBED.contains(&f));
        let calls = pair(&samples, &entries);
        assert!(
            calls.len() >= 3 * 300 * PROBED.len(),
            "run {run_no}: only {} probed calls",
            calls.len()
        );
        for c in &calls {
            let off = outside(c, 0);
            worst = worst.max(off);
            if off > 0 {
                failures.push(format!(
                    "run {run_no} tid {} call {} {}: entry {} outside [{}, {:?}] by {off} ns",
                    c.tid, c.n, c.func, c.entry, c.sample, c.next_sample
                ));
            }
        }
        // The check sees a wrong clock: most entries leave their brackets.
        for shift in WRONG_CLOCKS {
            let caught = calls.iter().filter(|c| outside(c, shift) > 0).count();
            assert!(
                caught * 2 > calls.len(),
                "run {run_no}: trace times shifted by {shift} ns put only {caught} of {} \
                 entries outside their brackets",
                calls.len()
            );
        }
    }
    drop(load);
    assert!(
        failures.is_empty(),
        "{} probed calls outside their samples' bracket, worst {worst} ns:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
}

/// The parser reads what `report -D` prints for a sample.
#[test]
fn sample_lines_parse() {
    let script = " w 7 [001]  1.000001:          1 probe:serve_request:     55978ace1875 serve_request\n \
                  w 7 [001]  1.000002:          1 probe:parse_request:     55978ace1896 parse_request\n";
    let dump = "1 3396932746628 0x610 [0x38]: PERF_RECORD_SAMPLE(IP, 0x2): 705/707: 0x55978ace1896 period: 1 addr: 0\n\
                1 3396932744551 0x5d8 [0x38]: PERF_RECORD_SAMPLE(IP, 0x2): 705/707: 0x55978ace1875 period: 1 addr: 0\n";
    let s = probe_samples(dump, script);
    assert_eq!(
        s[&707],
        vec![
            ("serve_request", 3_396_932_744_551),
            ("parse_request", 3_396_932_746_628)
        ]
    );
}
