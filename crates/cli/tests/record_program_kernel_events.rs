//! The kernel's events of a traced program in its recording. Its context switches (`perfaux
//! record -- ./prog` records them as `perf record --switch-events` does): perf 6.1 prints them
//! from perfaux's file as perfaux prints them; they are on the trace's clock, so that each sleep
//! of the program (a switch out, then in 2 ms later) lies inside the traced call that slept,
//! in every thread and in every process the program forks and execs; a clock 1 ms off puts
//! them outside; `--no-switch-events` leaves them out; report, flame graph and exports show
//! the time off the CPU. The kernel's software events `-e` names (page-faults): the program's
//! own, sampled where they happened, as perf records them.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::timing::{perfaux_on, time_ns};
use common::{path_str, perfaux, tempdir};

/// A function that sleeps 2 ms (`wait_a_bit`) called 10 times by main and 5 by a thread,
/// with a short computation between.
const SLEEPER: &str = r#"
#include <pthread.h>
#include <time.h>
__attribute__((noinline)) void wait_a_bit(void) {
    struct timespec t = {0, 2000000};
    nanosleep(&t, 0);
}
__attribute__((noinline)) long spin(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += i * 3;
    return s;
}
static void *worker(void *a) {
    for (int i = 0; i < 5; i++) wait_a_bit();
    return a;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    for (int i = 0; i < 10; i++) { wait_a_bit(); spin(100000); }
    pthread_join(t, 0);
    return 0;
}
"#;

/// The sleeps per process: main's 10 and the worker's 5.
const SLEEPS: usize = 15;

fn build(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("sleeper.c"), SLEEPER).unwrap();
    perfaux_testutil::gcc_instrumented(dir, &["-pthread", "sleeper.c", "-o", "sleeper"]);
    dir.join("sleeper")
}

/// The sleeper built and recorded (record's `extra` options) in a directory of its own.
fn sleeper_recorded(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("perf.data");
    record(&data, extra, &[path_str(&prog)]);
    (d, data)
}

fn record(data: &Path, extra: &[&str], command: &[&str]) {
    let mut args = vec!["record", "-o", path_str(data)];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let r = perfaux(&args);
    assert!(r.ok(), "perfaux record: {}", r.stderr);
    assert!(
        !r.stderr
            .contains("context switches are not in the recording"),
        "{}",
        r.stderr
    );
}

/// The PERF_RECORD_SWITCH lines of a script output.
fn switch_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("PERF_RECORD_SWITCH"))
        .map(str::to_string)
        .collect()
}

/// (tid, time ns, out) of each switch line.
fn switches(lines: &[String]) -> Vec<(u32, u64, bool)> {
    lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let at = f
                .iter()
                .position(|w| w.starts_with("PERF_RECORD_SWITCH"))
                .unwrap();
            let tid = f[1].parse().unwrap_or_else(|_| panic!("tid in {l:?}"));
            let time = time_ns(f[at - 1]).unwrap_or_else(|| panic!("time in {l:?}"));
            (tid, time, f[at + 1] == "OUT")
        })
        .collect()
}

/// Each thread's sleeps: (out, in) pairs of its switches at least 1.5 ms apart (a sleep of 2
/// ms; a preemption is shorter).
fn sleeps(sw: &[(u32, u64, bool)]) -> HashMap<u32, Vec<(u64, u64)>> {
    let mut last_out: HashMap<u32, u64> = HashMap::new();
    let mut m: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for &(tid, t, out) in sw {
        if out {
            last_out.insert(tid, t);
        } else if let Some(o) = last_out.remove(&tid)
            && t - o >= 1_500_000
        {
            m.entry(tid).or_default().push((o, t));
        }
    }
    m
}

/// Each thread's `wait_a_bit` calls: (entry, return) in ns, from the call trace's entries
/// and uftrace replay's durations (the same calls in the same order per thread).
fn wait_calls(data: &Path) -> HashMap<u32, Vec<(u64, u64)>> {
    let calls = perfaux_on(&["script", "--call-trace"], data);
    let replay = perfaux_on(&["script", "--replay"], data);
    let mut entries: HashMap<u32, Vec<u64>> = HashMap::new();
    for l in calls
        .lines()
        .filter(|l| l.trim_end().ends_with("wait_a_bit"))
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        let tid: u32 = f[1].parse().unwrap();
        let t = time_ns(f[3]).unwrap_or_else(|| panic!("time in {l:?}"));
        entries.entry(tid).or_default().push(t);
    }
    let mut durations: HashMap<u32, Vec<u64>> = HashMap::new();
    for l in replay.lines().filter(|l| l.contains("wait_a_bit();")) {
        // "   2.076 ms [  1514] |   wait_a_bit();"
        let (dur, rest) = l.split_once('[').unwrap();
        let tid: u32 = rest.split(']').next().unwrap().trim().parse().unwrap();
        let mut d = dur.split_whitespace();
        let ns = common::printed_ns(d.next().unwrap(), d.next().unwrap());
        durations.entry(tid).or_default().push(ns);
    }
    let mut m = HashMap::new();
    for (tid, es) in entries {
        let ds = &durations[&tid];
        assert_eq!(es.len(), ds.len(), "thread {tid}: entries and returns");
        m.insert(tid, es.iter().zip(ds).map(|(&e, &d)| (e, e + d)).collect());
    }
    m
}

/// Switch lines print times in whole microseconds (cut, as perf prints them); a replay
/// duration is rounded to its last digit (1 us at milliseconds).
const SLACK_NS: u64 = 1_000;

/// The sleeps of `sleeps` shifted by `shift` ns that overlap a `wait_a_bit` call of their
/// thread without lying inside it, and the calls that hold no sleep. (A thread also sleeps
/// outside `wait_a_bit`: its first hook waits for the recorder's clock calibration, main
/// waits in `pthread_join`.)
fn misplaced(
    sleeps: &HashMap<u32, Vec<(u64, u64)>>,
    calls: &HashMap<u32, Vec<(u64, u64)>>,
    shift: i64,
) -> (usize, usize) {
    let mut outside = 0;
    let mut empty = 0;
    for (tid, cs) in calls {
        let ss: Vec<(u64, u64)> = sleeps
            .get(tid)
            .map(|v| {
                v.iter()
                    .map(|&(o, i)| {
                        (
                            o.saturating_add_signed(shift),
                            i.saturating_add_signed(shift),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let inside =
            |&(o, i): &(u64, u64), &(e, r): &(u64, u64)| o + SLACK_NS >= e && i <= r + SLACK_NS;
        // Overlapping by more than the times' rounding: a sleep that ends as the next call
        // begins, within a microsecond, belongs to the call before.
        let overlaps =
            |&(o, i): &(u64, u64), &(e, r): &(u64, u64)| o + SLACK_NS < r && i > e + SLACK_NS;
        outside += ss
            .iter()
            .filter(|s| cs.iter().any(|c| overlaps(s, c)) && !cs.iter().any(|c| inside(s, c)))
            .count();
        empty += cs
            .iter()
            .filter(|c| !ss.iter().any(|s| inside(s, c)))
            .count();
    }
    (outside, empty)
}

#[test]
fn perf_prints_the_recorded_switches_as_perfaux_script_does() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let (d, data) = sleeper_recorded(&[]);
    let perf =
        perfaux_testutil::perf_on_file(&["script", "--show-switch-events"], &data, false, d.path());
    assert!(perf.ok(), "perf script: {}", perf.stderr);
    let theirs = switch_lines(&perf.stdout);
    let ours = switch_lines(&perfaux_on(&["script", "--show-switch-events"], &data));
    assert_eq!(ours, theirs);
    // Every line names its thread, a new one from its creation on (the kernel's FORK of it:
    // the runtime reports a thread after its first switch in).
    assert!(
        ours.iter().all(|l| !l.trim_start().starts_with(':')),
        "{ours:#?}"
    );
    // Each sleep is a switch out and a switch in, in both threads.
    let s = sleeps(&switches(&ours));
    assert_eq!(s.len(), 2, "threads with sleeps: {s:?}");
    assert!(
        s.values().map(Vec::len).sum::<usize>() >= SLEEPS,
        "sleeps: {s:?}"
    );
    // Without --show-switch-events, neither prints them.
    assert!(switch_lines(&perfaux_on(&["script"], &data)).is_empty());
}

#[test]
fn every_sleep_lies_inside_the_traced_call_that_slept() {
    perfaux_testutil::require_oracle!("gcc");
    let (_d, data) = sleeper_recorded(&[]);
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    let sleeps = sleeps(&switches(&switch_lines(&out)));
    let calls = wait_calls(&data);
    assert_eq!(calls.values().map(Vec::len).sum::<usize>(), SLEEPS);
    assert_eq!(
        misplaced(&sleeps, &calls, 0),
        (0, 0),
        "{sleeps:?} {calls:?}"
    );
    // A clock 1 ms off either way is caught.
    for shift in [-1_000_000, 1_000_000] {
        let (outside, _) = misplaced(&sleeps, &calls, shift);
        assert!(outside >= SLEEPS / 2, "shift {shift}: {outside} outside");
    }
}

#[test]
fn the_switches_of_forked_and_execd_processes_are_recorded() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("perf.data");
    let p = path_str(&prog);
    // The shell forks two children, each execs the sleeper: both inherit the events.
    record(&data, &[], &["sh", "-c", &format!("{p}; {p}")]);
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    let sleeps = sleeps(&switches(&switch_lines(&out)));
    let calls = wait_calls(&data);
    assert_eq!(calls.len(), 4, "threads with calls: {calls:?}");
    assert_eq!(calls.values().map(Vec::len).sum::<usize>(), 2 * SLEEPS);
    assert_eq!(
        misplaced(&sleeps, &calls, 0),
        (0, 0),
        "{sleeps:?} {calls:?}"
    );
}

#[test]
fn no_switch_events_leaves_them_out() {
    perfaux_testutil::require_oracle!("gcc");
    let (_d, data) = sleeper_recorded(&["--no-switch-events"]);
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    assert!(switch_lines(&out).is_empty(), "{out}");
    assert_eq!(
        wait_calls(&data).values().map(Vec::len).sum::<usize>(),
        SLEEPS
    );
}

/// The report's "on and off the CPU" rows: function -> (total, on, off) in ns.
fn off_cpu_rows(report: &str) -> HashMap<String, (u64, u64, u64)> {
    let at = report
        .find("# on and off the CPU")
        .unwrap_or_else(|| panic!("no on/off-CPU section in:\n{report}"));
    let ns = common::printed_ns;
    report[at..]
        .lines()
        .skip(4)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[7].to_string(),
                (ns(f[0], f[1]), ns(f[2], f[3]), ns(f[4], f[5])),
            )
        })
        .collect()
}

/// Each thread's (out, in) pairs of switches, all of them.
fn all_pairs(sw: &[(u32, u64, bool)]) -> HashMap<u32, Vec<(u64, u64)>> {
    let mut sorted = sw.to_vec();
    sorted.sort_by_key(|&(tid, t, _)| (tid, t));
    let mut last_out: HashMap<u32, u64> = HashMap::new();
    let mut m: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for (tid, t, out) in sorted {
        if out {
            last_out.entry(tid).or_insert(t);
        } else if let Some(o) = last_out.remove(&tid) {
            m.entry(tid).or_default().push((o, t));
        }
    }
    m
}

#[test]
fn report_splits_each_functions_time_into_on_and_off_the_cpu() {
    perfaux_testutil::require_oracle!("gcc");
    let (_d, data) = sleeper_recorded(&[]);
    let report = perfaux_on(&["report"], &data);
    let rows = off_cpu_rows(&report);
    let (total, on, off) = rows["wait_a_bit"];
    // Each printed to its third decimal.
    assert!(total.abs_diff(on + off) <= 2_000, "{report}");
    // The off-CPU time of wait_a_bit is the switched-out time inside its calls, as the
    // switch lines give it (times cut to the microsecond: 2 us a pair).
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    let pairs = all_pairs(&switches(&switch_lines(&out)));
    let calls = wait_calls(&data);
    let mut expected = 0u64;
    let mut n = 0u64;
    for (tid, cs) in &calls {
        for &(o, i) in pairs.get(tid).into_iter().flatten() {
            if cs
                .iter()
                .any(|&(e, r)| o + SLACK_NS >= e && i <= r + SLACK_NS)
            {
                expected += i - o;
                n += 1;
            }
        }
    }
    assert!(n >= SLEEPS as u64, "{n} pairs inside the calls");
    assert!(
        off.abs_diff(expected) <= 2_000 * n + 1_000,
        "report: {off} ns off-CPU in wait_a_bit; the switches: {expected} ns\n{report}"
    );
    assert!(off >= SLEEPS as u64 * 1_900_000, "{report}");
    // spin computes: its time on the CPU is its computation, some 20 us a call here, what
    // ever a preemption adds off the CPU (a loaded host's tick can fall in one of them).
    let (total, on, off) = rows["spin"];
    assert!(total.abs_diff(on + off) <= 2_000, "{report}");
    assert!(on >= 10 * 5_000, "{report}");
}

#[test]
fn the_flame_graph_weighs_time_on_the_cpu_unless_wall_time_is_asked() {
    perfaux_testutil::require_oracle!("gcc");
    let (d, data) = sleeper_recorded(&[]);
    let all = |extra: &[&str]| -> (u64, String) {
        let svg = d.path().join("fg.svg");
        let mut args = vec!["report", "--flame-graph", path_str(&svg)];
        args.extend_from_slice(extra);
        perfaux_on(&args, &data);
        let text = std::fs::read_to_string(&svg).unwrap();
        let title = text
            .split("<title>")
            .find(|t| t.starts_with("all ("))
            .unwrap()
            .to_string();
        let n: String = title[5..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        (n.parse().unwrap(), title)
    };
    let (on_cpu, t_on) = all(&[]);
    let (wall, t_wall) = all(&["--wall-time"]);
    assert!(t_on.contains("ns on-CPU"), "{t_on}");
    assert!(!t_wall.contains("on-CPU"), "{t_wall}");
    // The program sleeps 15 x 2 ms and computes a few hundred microseconds.
    assert!(wall >= SLEEPS as u64 * 2_000_000, "{t_wall}");
    assert!(on_cpu * 10 < wall, "on-CPU {t_on}, wall {t_wall}");
    // The on-CPU graph is the report's on-CPU time of the outermost functions.
    let rows = off_cpu_rows(&perfaux_on(&["report"], &data));
    let on_report = rows["main"].1 + rows["worker"].1;
    assert!(
        on_cpu.abs_diff(on_report) <= 2_000,
        "flame graph {on_cpu} ns on-CPU, report {on_report}"
    );
}

/// Per thread, (count, total ns) of its intervals off the CPU as the switch lines give them
/// (every switch out, then in).
fn off_intervals(data: &Path) -> HashMap<u32, (u64, u64)> {
    let out = perfaux_on(&["script", "--show-switch-events"], data);
    all_pairs(&switches(&switch_lines(&out)))
        .into_iter()
        .map(|(tid, v)| (tid, (v.len() as u64, v.iter().map(|&(o, i)| i - o).sum())))
        .collect()
}

#[test]
fn the_exports_show_each_threads_time_off_the_cpu() {
    perfaux_testutil::require_oracle!("gcc");
    let (d, data) = sleeper_recorded(&[]);
    let want = off_intervals(&data);
    assert_eq!(want.len(), 2, "{want:?}");
    // The switch lines' times are cut to the microsecond: 2 us an interval.
    let close = |got: (u64, u64), want: (u64, u64)| {
        got.0 == want.0 && got.1.abs_diff(want.1) <= 2_000 * want.0
    };
    let export = |format: &str| {
        let out = d.path().join(format!("out.{format}"));
        let r = perfaux(&[
            "export",
            "-F",
            format,
            "-i",
            path_str(&data),
            "-o",
            path_str(&out),
        ]);
        assert!(r.ok(), "{}", r.stderr);
        out
    };
    // Chrome: an "off-CPU" span per interval on the thread's off-CPU track.
    let chrome: serde_json::Value =
        serde_json::from_slice(&std::fs::read(export("chrome")).unwrap()).unwrap();
    let mut got: HashMap<u32, (u64, u64)> = HashMap::new();
    for e in chrome["traceEvents"].as_array().unwrap() {
        if e["name"] == "off-CPU" && e["ph"] == "X" {
            let tid = (e["tid"].as_u64().unwrap() & 0xffff_ffff) as u32;
            let g = got.entry(tid).or_default();
            g.0 += 1;
            g.1 += (e["dur"].as_f64().unwrap() * 1e3).round() as u64;
        }
    }
    for (tid, w) in &want {
        assert!(
            close(got[tid], *w),
            "chrome, thread {tid}: {:?} for {w:?}",
            got[tid]
        );
    }
    // Firefox: an interval marker per interval.
    let ff: serde_json::Value =
        serde_json::from_slice(&std::fs::read(export("firefox")).unwrap()).unwrap();
    for t in ff["threads"].as_array().unwrap() {
        let strings = t["stringArray"].as_array().unwrap();
        let tid: u32 = t["tid"].to_string().trim_matches('"').parse().unwrap();
        let m = &t["markers"];
        let mut g = (0u64, 0u64);
        for (i, n) in m["name"].as_array().unwrap().iter().enumerate() {
            if strings[n.as_u64().unwrap() as usize] == "off-CPU" {
                g.0 += 1;
                let ms = m["endTime"][i].as_f64().unwrap() - m["startTime"][i].as_f64().unwrap();
                g.1 += (ms * 1e6).round() as u64;
            }
        }
        assert!(
            close(g, want[&tid]),
            "firefox, thread {tid}: {g:?} for {:?}",
            want[&tid]
        );
    }
    // Perfetto, read by the official protos: a slice per interval on the thread's off-CPU
    // track.
    if !common::perfetto_protos() {
        return;
    }
    let text = common::perfetto_slices(&export("perfetto"));
    for (tid, w) in &want {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("named_slice ")
                    && l.ends_with(&format!(" {tid}: off-CPU (switched out)"))
            })
            .unwrap_or_else(|| panic!("no off-CPU track of thread {tid} in:\n{text}"));
        let f: Vec<&str> = line.split(' ').collect();
        let g = (f[1].parse().unwrap(), f[2].parse().unwrap());
        assert!(close(g, *w), "perfetto, thread {tid}: {g:?} for {w:?}");
    }
}

/// As root, the recording made by an ordinary user (uid 65534, through `setpriv`) of their
/// own program: with `perf_event_paranoid` 2 or lower the kernel lets them have their own
/// switches; above it, `record` says it could not and why, and the trace is recorded all the
/// same. (Not root: every other test here already runs as an ordinary user.)
#[test]
fn an_ordinary_user_records_the_switches_of_their_own_program_or_is_told_why_not() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let Some(mut cmd) = common::perfaux_as_ordinary_user(d.path()) else {
        return;
    };
    let prog = build(d.path());
    let data = d.path().join("user.data");
    let out = cmd
        .args(["record", "-o", path_str(&data), "--", path_str(&prog)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    let lines = switch_lines(&perfaux_on(&["script", "--show-switch-events"], &data));
    if paranoid <= 2 {
        assert!(
            !stderr.contains("context switches are not in the recording"),
            "{stderr}"
        );
        let s = sleeps(&switches(&lines));
        assert!(
            s.values().map(Vec::len).sum::<usize>() >= SLEEPS,
            "sleeps {s:?}\n{stderr}"
        );
    } else {
        assert!(lines.is_empty());
        assert!(
            stderr.contains("context switches are not in the recording")
                && stderr.contains("perf_event_paranoid"),
            "{stderr}"
        );
    }
    assert_eq!(
        wait_calls(&data).values().map(Vec::len).sum::<usize>(),
        SLEEPS
    );
    // An event the kernel counts in kernel mode only (context-switches) is the user's only
    // with perf_event_paranoid 1 or lower: above, record fails saying why, with the trace
    // written all the same.
    let data = d.path().join("cs.data");
    let out = common::perfaux_as_ordinary_user(d.path())
        .unwrap()
        .args(["record", "-o", path_str(&data), "-e", "swtrace//", "-e"])
        .args(["context-switches", "--", path_str(&prog)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if paranoid >= 2 {
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("'context-switches'") && stderr.contains("perf_event_paranoid"),
            "{stderr}"
        );
    } else {
        assert!(out.status.success(), "{stderr}");
    }
    assert_eq!(
        wait_calls(&data).values().map(Vec::len).sum::<usize>(),
        SLEEPS
    );
}

/// A function that touches `PAGES` fresh pages, one write each: that many minor faults in it.
const TOUCHER: &str = r#"
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#define PAGES 4000
__attribute__((noinline)) void touch_pages(char *p, long page) {
    for (long i = 0; i < PAGES; i++) p[i * page] = 1;
}
int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(0, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    madvise(p, PAGES * page, MADV_NOHUGEPAGE);
    touch_pages(p, page);
    return 0;
}
"#;

const TOUCHED: usize = 4000;

/// The samples of `event` in `touch_pages` in perf script's output of `data`.
fn samples_in_touch_pages(data: &Path, event: &str, home: &Path) -> usize {
    let r = perfaux_testutil::perf_on_file(&["script", "-F", "event,ip,sym"], data, false, home);
    assert!(r.ok(), "perf script: {}", r.stderr);
    r.stdout
        .lines()
        .filter(|l| l.contains(&format!("{event}:")) && l.contains("touch_pages"))
        .count()
}

#[test]
fn a_kernel_software_event_samples_the_programs_own_faults_as_perf_does() {
    perfaux_testutil::require_oracle!("perf");
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    std::fs::write(d.path().join("toucher.c"), TOUCHER).unwrap();
    perfaux_testutil::gcc_instrumented(d.path(), &["toucher.c", "-o", "toucher"]);
    let prog = d.path().join("toucher");
    let data = d.path().join("perf.data");
    record(
        &data,
        &["-e", "swtrace//", "-e", "page-faults"],
        &[path_str(&prog)],
    );
    // perf reads the kernel's samples from perfaux's file: one a page, in touch_pages.
    let ours = samples_in_touch_pages(&data, "page-faults", d.path());
    assert_eq!(ours, TOUCHED);
    // perf recording the same program counts the same (-c 1: perfaux samples every event of
    // a counter, where perf's default is 4000 samples a second).
    let theirs_data = d.path().join("theirs.data");
    let r = perfaux_testutil::run(
        {
            let mut c = perfaux_testutil::perf_command(
                &[
                    "record",
                    "-q",
                    "-c",
                    "1",
                    "-e",
                    "page-faults",
                    "-o",
                    path_str(&theirs_data),
                ],
                d.path(),
            );
            c.arg(&prog);
            c
        },
        None,
    );
    assert!(r.ok(), "perf record: {}", r.stderr);
    assert_eq!(
        samples_in_touch_pages(&theirs_data, "page-faults", d.path()),
        ours
    );
    // perfaux's report puts touch_pages first among the faults' functions.
    let report = perfaux_on(&["report", "--sort", "sym"], &data);
    let at = report
        .find("of event 'page-faults'")
        .unwrap_or_else(|| panic!("{report}"));
    let first = report[at..]
        .lines()
        .find(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .unwrap();
    assert!(first.contains("touch_pages"), "{report}");
}

#[test]
fn a_flight_recording_takes_the_switches_only_when_asked() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    // With -S the file holds snapshots; switches would stream in beside them all the while.
    let data = d.path().join("s.data");
    record(&data, &["-S"], &[path_str(&prog)]);
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    assert!(switch_lines(&out).is_empty(), "{out}");
    let data = d.path().join("sw.data");
    record(&data, &["-S", "--switch-events"], &[path_str(&prog)]);
    let out = perfaux_on(&["script", "--show-switch-events"], &data);
    let s = sleeps(&switches(&switch_lines(&out)));
    assert!(s.values().map(Vec::len).sum::<usize>() >= SLEEPS, "{s:?}");
}

/// `-e context-switches`: the scheduler's event, counted in kernel mode (in user mode it is
/// never seen): a sample at each switch of the program's threads, at least one a sleep. A user
/// the kernel does not allow kernel-mode events is told why, and the trace is recorded.
#[test]
fn context_switches_are_sampled_in_the_kernel_or_refused_with_why() {
    perfaux_testutil::require_oracle!("gcc");
    let d = tempdir();
    let prog = build(d.path());
    let data = d.path().join("cs.data");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&data),
        "-e",
        "swtrace//",
        "-e",
        "context-switches",
        "--",
        path_str(&prog),
    ]);
    let script = perfaux_on(&["script"], &data);
    let samples = script
        .lines()
        .filter(|l| l.contains("context-switches:"))
        .count();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    if root || paranoid <= 1 {
        assert!(r.ok(), "{}", r.stderr);
        assert!(samples >= SLEEPS, "{samples} samples\n{script}");
    } else {
        assert!(!r.ok());
        assert!(
            r.stderr.contains("context-switches") && r.stderr.contains("perf_event_paranoid"),
            "{}",
            r.stderr
        );
        assert_eq!(samples, 0);
    }
    assert_eq!(
        wait_calls(&data).values().map(Vec::len).sum::<usize>(),
        SLEEPS
    );
}

/// uftrace's `linux:schedule` events (its `-E linux:schedule`: the kernel's context switches
/// of each traced thread), per thread, the switches out that are not preemptions and lie
/// inside a `wait_a_bit` call: from `uftrace dump`, its records in time order.
fn uftrace_sleeps_in_waits(dir: &Path, prog: &Path) -> Vec<usize> {
    let data = dir.join("uftrace.data");
    let st = std::process::Command::new("uftrace")
        .args(["record", "--no-pager", "-E", "linux:schedule", "-d"])
        .arg(&data)
        .arg(prog)
        .status()
        .expect("uftrace");
    assert!(st.success());
    let out = std::process::Command::new("uftrace")
        .args(["dump", "--no-pager", "-d"])
        .arg(&data)
        .output()
        .expect("uftrace dump");
    let text = String::from_utf8_lossy(&out.stdout);
    // "12158.344191425  24848: [entry] wait_a_bit(564511561179) depth: 1"
    let mut recs: Vec<(u64, u32, String)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let t = time_ns(f.next()?)?;
            let tid = f.next()?.trim_end_matches(':').parse().ok()?;
            Some((t, tid, f.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    recs.sort_by_key(|r| r.0);
    let mut inside: HashMap<u32, bool> = HashMap::new();
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for (_, tid, what) in recs {
        if what.starts_with("[entry] wait_a_bit(") {
            inside.insert(tid, true);
        } else if what.starts_with("[exit ] wait_a_bit(") {
            inside.insert(tid, false);
        } else if what.starts_with("[event] linux:sched-out(")
            && inside.get(&tid).copied().unwrap_or(false)
        {
            *counts.entry(tid).or_default() += 1;
        }
    }
    let mut v: Vec<usize> = counts.into_values().collect();
    v.sort_unstable();
    v
}

/// The switches each thread takes in its sleeps, as uftrace's `linux:schedule` sees them in
/// its own recording of the same program: one switch out (not a preemption) inside each
/// `wait_a_bit` call, 10 in main and 5 in the worker, in both.
#[test]
fn the_switches_in_each_sleep_are_uftraces_linux_schedule() {
    perfaux_testutil::require_oracle!("uftrace");
    perfaux_testutil::require_oracle!("gcc");
    let (d, data) = sleeper_recorded(&[]);
    let lines = switch_lines(&perfaux_on(&["script", "--show-switch-events"], &data));
    let calls = wait_calls(&data);
    // perfaux: per thread, the switches out (not preempted) inside its wait_a_bit calls.
    let mut ours: Vec<usize> = calls
        .iter()
        .map(|(tid, cs)| {
            lines
                .iter()
                .filter(|l| l.contains("SWITCH OUT ") && !l.contains("preempt"))
                .map(|l| switches(std::slice::from_ref(l))[0])
                .filter(|&(t, time, _)| {
                    t == *tid && cs.iter().any(|&(e, r)| e <= time && time <= r + SLACK_NS)
                })
                .count()
        })
        .collect();
    ours.sort_unstable();
    let theirs = uftrace_sleeps_in_waits(d.path(), &d.path().join("sleeper"));
    assert_eq!(theirs, [5, 10], "uftrace");
    assert_eq!(ours, theirs, "perfaux against uftrace's linux:schedule");
}
