//! `perfaux record -e ... -- ./prog`: the four features on a program's own functions, named
//! by `probe:FUNC` (crates/preload/tests/c/server.c: requests served between
//! handle_request() and send_reply(), work() inside and outside that window). The call
//! trace is judged against what the program says it did, the files by perf 6.1.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// `src` (under crates/preload/tests/c) compiled with `flags` (after the source: they may
/// name libraries) into `dir/name`.
fn build(dir: &Path, src: &str, flags: &[&str], name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../preload/tests/c")
        .join(src);
    let out = dir.join(name);
    let st = Command::new("gcc")
        .current_dir(dir)
        .args(["-O1", "-g", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc {flags:?} {src:?} failed");
    out
}

/// `perfaux record -o dir/data EVENTS -- prog ARGS`.
fn record_prog(dir: &Path, data: &str, events: &[&str], prog: &Path, args: &[&str]) -> Run {
    let mut c = Command::new(PERFAUX);
    c.current_dir(dir)
        .arg("record")
        .arg("-o")
        .arg(dir.join(data))
        .args(events)
        .arg("--")
        .arg(prog)
        .args(args);
    run(c)
}

/// `requests N work_inside I work_outside O`, as server.c prints it.
fn server_counts(stdout: &str) -> (usize, usize, usize) {
    let w: Vec<usize> = stdout
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert_eq!(w.len(), 3, "server printed {stdout:?}");
    (w[0], w[1], w[2])
}

/// The lines of `perfaux script --call-trace` (markers and calls).
fn call_trace(data: &Path) -> Vec<String> {
    let r = perfaux(&["script", "--call-trace", "-i", path_str(data)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout.lines().map(str::to_owned).collect()
}

/// The function (last field) of every call line, markers left out.
fn calls(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.contains("tr end") && !l.contains("tr strt"))
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect()
}

/// The samples of `event` in `perfaux script`'s output, each with the functions of the calls
/// decoded from its AUX data (the lines under it, up to the next record).
fn aux_sample_calls(script: &str, event: &str, aux: &str) -> Vec<Vec<String>> {
    let tag = format!(" {event}: ");
    let mut samples: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for l in script.lines() {
        if l.contains(&tag) {
            assert!(l.contains(&format!(" aux: {aux} bytes")), "{l}");
            samples.push(Vec::new());
            open = true;
        } else if !l.starts_with("    ") || l.contains(": PERF_RECORD_") || l.contains(" aux: ") {
            open = false;
        } else if open && let Some(s) = samples.last_mut() {
            s.push(l.split_whitespace().last().unwrap().to_owned());
        }
    }
    samples
}

/// perf 6.1 reads `file` without a warning (`report -D`, `script`), and its record counts
/// are perfaux's; returns `perf script`'s output (`None`, said, without perf).
fn perf_reads(file: &Path) -> Option<String> {
    if !perfaux_testutil::oracle("perf") {
        return None;
    }
    let home = tempdir();
    let f = path_str(file);
    let d = perf(&["report", "-D", "-i", f], home.path());
    assert_eq!(d.code, 0, "perf report -D failed: {}", d.stderr);
    assert_eq!(d.stderr.trim(), "", "perf report -D warned about {f}");
    let ours = perfaux(&["report", "-D", "-i", f]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    assert_eq!(stats_rows(&d.stdout), stats_rows(&ours.stdout));
    let s = perf(&["script", "-i", f], home.path());
    assert_eq!(s.code, 0, "perf script failed: {}", s.stderr);
    assert_eq!(s.stderr.trim(), "", "perf script warned about {f}");
    Some(s.stdout)
}

/// Lines of perf script's output that are samples of `event`.
fn perf_samples<'a>(script: &'a str, event: &str) -> Vec<&'a str> {
    let tag = format!(" {event}:");
    script.lines().filter(|l| l.contains(&tag)).collect()
}

/// start-paused, resume at handle_request, pause at send_reply, as for the built-in workload:
/// every window holds handle_request and the three work() calls of the request, and nothing
/// outside a window is traced (neither idle() and its work(), nor main, nor send_reply,
/// paused before its entry is traced). With each of the compilers' hooks.
fn pause_resume_windows(flags: &[&str], name: &str) {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", flags, name);
    let r = record_prog(
        d,
        "pr.data",
        &[
            "-e",
            "swtrace/aux-action=start-paused/",
            "-e",
            "probe:handle_request/aux-action=resume/",
            "-e",
            "probe:send_reply/aux-action=pause/",
        ],
        &prog,
        &["7"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (requests, inside, outside) = server_counts(&r.stdout);
    assert_eq!((requests, inside, outside), (7, 21, 8));
    let data = d.join("pr.data");
    let lines = call_trace(&data);
    let window = ["handle_request", "work", "work", "work"];
    let expected: Vec<String> = (0..requests)
        .flat_map(|_| window.iter().map(|s| s.to_string()))
        .collect();
    let got = calls(&lines);
    assert_eq!(got, expected, "{}", lines.join("\n"));
    assert_eq!(
        got.iter().filter(|f| *f == "work").count(),
        inside,
        "work() calls outside the windows were traced"
    );
    let marks = |m: &str| lines.iter().filter(|l| l.contains(m)).count();
    assert_eq!(marks("tr strt  (resumed)"), requests);
    assert_eq!(marks("tr end   (paused)"), requests);
    if let Some(script) = perf_reads(&data) {
        for ev in [
            "probe:handle_request/aux-action=resume/",
            "probe:send_reply/aux-action=pause/",
        ] {
            let s = perf_samples(&script, ev);
            assert_eq!(s.len(), requests, "{ev}:\n{script}");
            let func = ev.split([':', '/']).nth(1).unwrap();
            assert!(
                s.iter().all(|l| l.contains(&format!(" {func}+0x0 ("))),
                "{s:?}"
            );
        }
    }
}

#[test]
fn pause_resume_windows_hold_exactly_the_calls_of_each_request_finstrument_functions() {
    pause_resume_windows(&["-finstrument-functions"], "server");
}

/// -pg: gcc calls mcount with a misaligned stack in functions that push a register first
/// (handle_request), and calls work() misaligned; the hooks align it themselves.
#[test]
fn pause_resume_windows_hold_exactly_the_calls_of_each_request_pg() {
    pause_resume_windows(&["-pg"], "server-pg");
}

#[test]
fn pause_resume_windows_hold_exactly_the_calls_of_each_request_pg_mfentry() {
    pause_resume_windows(&["-pg", "-mfentry"], "server-fentry");
}

/// `--aux-sample`: one sample per handle_request() call, each carrying the trace up to the
/// call: the whole history of the small program (its 4096 bytes hold it), ending in the
/// caller's context, idle()'s work() before the call, without the call itself (the sample
/// is taken before its entry is traced).
#[test]
fn aux_samples_of_handle_request_carry_the_trace_up_to_the_call() {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", &["-finstrument-functions"], "server");
    let r = record_prog(
        d,
        "as.data",
        &[
            "-e",
            "{swtrace//,probe:handle_request}",
            "--aux-sample=4096",
        ],
        &prog,
        &["5"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (requests, ..) = server_counts(&r.stdout);
    let data = d.join("as.data");
    let script = perfaux(&["script", "-i", path_str(&data)]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    let samples = aux_sample_calls(&script.stdout, "probe:handle_request", "4096");
    assert_eq!(samples.len(), requests, "{}", script.stdout);
    let request = [
        "handle_request",
        "work",
        "work",
        "work",
        "send_reply",
        "idle",
        "work",
    ];
    for (k, got) in samples.iter().enumerate() {
        let mut expected = vec!["main", "idle", "work"];
        for _ in 0..k {
            expected.extend(request);
        }
        assert_eq!(got, &expected, "sample {}", k + 1);
    }
    let dump = perfaux(&["report", "-D", "-i", path_str(&data)]);
    let sizes = dump
        .stdout
        .lines()
        .filter(|l| l.starts_with(". ... AUX sample: size 4096 bytes"))
        .count();
    assert_eq!(sizes, requests);
    if let Some(perf_script) = perf_reads(&data) {
        assert_eq!(
            perf_samples(&perf_script, "probe:handle_request").len(),
            requests
        );
    }
}

/// Plain probe samples (IP, time, tid) name the function and its object, in the program and
/// in the libraries it links (libcallee.so) and dlopens (libplugin.so, loaded after the
/// recording began): libmain calls callee_square 5 times and plugin_square 7 times.
#[test]
fn probe_samples_name_functions_in_the_program_and_its_libraries() {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/lib.c");
    let lib = path_str(&lib);
    let gcc = |args: &[&str]| perfaux_testutil::gcc_instrumented(d, args);
    gcc(&["-fPIC", "-shared", "-o", "libcallee.so", lib]);
    gcc(&["-fPIC", "-shared", "-DPLUGIN", "-o", "libplugin.so", lib]);
    let prog = build(
        d,
        "libmain.c",
        &[
            "-finstrument-functions",
            "-L.",
            "-lcallee",
            "-Wl,-rpath,$ORIGIN",
            "-ldl",
        ],
        "libmain",
    );
    let r = record_prog(
        d,
        "lib.data",
        &[
            "-e",
            "swtrace//",
            "-e",
            "probe:callee_square",
            "-e",
            "probe:plugin_square",
        ],
        &prog,
        &[path_str(d)],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let data = d.join("lib.data");
    let ours = perfaux(&["script", "-i", path_str(&data)]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let count = |ev: &str| perf_samples(&ours.stdout, ev).len();
    assert_eq!(count("probe:callee_square"), 5, "{}", ours.stdout);
    assert_eq!(count("probe:plugin_square"), 7, "{}", ours.stdout);
    if let Some(script) = perf_reads(&data) {
        for (ev, func, object, n) in [
            ("probe:callee_square", "callee_square", "libcallee.so", 5),
            ("probe:plugin_square", "plugin_square", "libplugin.so", 7),
        ] {
            let s = perf_samples(&script, ev);
            assert_eq!(s.len(), n, "{ev}:\n{script}");
            for l in s {
                assert!(l.trim_start().starts_with("libmain "), "{l}");
                assert!(l.contains(&format!(" {func}+0x0 (")), "{l}");
                assert!(l.contains(&format!("/{object})")), "{l}");
            }
        }
    }
}

/// A `probe:FUNC` whose function is in neither the program nor a library it loaded: an error
/// naming it, and no file.
#[test]
fn an_unknown_probe_function_is_an_error_naming_it_and_the_trace_is_kept() {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", &["-finstrument-functions"], "server");
    let r = record_prog(
        d,
        "none.data",
        &["-e", "swtrace//", "-e", "probe:handle_reqest"],
        &prog,
        &["2"],
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("probe:handle_reqest: no function 'handle_reqest' in "),
        "{}",
        r.stderr
    );
    // What the program did is kept: the file is written, without the probe.
    assert!(
        r.stderr.contains("the recording is written to"),
        "{}",
        r.stderr
    );
    let ct = perfaux(&[
        "script",
        "--call-trace",
        "-i",
        path_str(&d.join("none.data")),
    ]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    assert!(ct.stdout.contains("handle_request"), "{}", ct.stdout);
}

/// Events a program's recording cannot take say why: no trace event to own the buffers, or
/// a second AUX area event.
#[test]
fn a_program_needs_one_swtrace_event_and_no_other_aux_event() {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", &["-finstrument-functions"], "server");
    let r = record_prog(d, "x.data", &["-e", "probe:work"], &prog, &["1"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("exactly one swtrace// event"),
        "{}",
        r.stderr
    );
    let r = record_prog(
        d,
        "x.data",
        &["-e", "swtrace//", "-e", "uevent_aux//"],
        &prog,
        &["1"],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("uevent_aux// is a second AUX"),
        "{}",
        r.stderr
    );
}

/// A task-clock sampler grouped behind the trace event, with `--aux-sample`: every sample
/// carries an AUX tail that decodes to calls of the program.
#[test]
fn task_clock_samples_carry_the_programs_trace() {
    require_oracle!("gcc");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", &["-finstrument-functions"], "server");
    // Enough requests for a few task-clock periods (250 us of CPU time each).
    let r = record_prog(
        d,
        "tc.data",
        &["-e", "{swtrace//,task-clock}", "--aux-sample=2048"],
        &prog,
        &["200000"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let data = d.join("tc.data");
    let script = perfaux(&["script", "-i", path_str(&data)]);
    assert_eq!(script.code, 0, "{}", script.stderr);
    let funcs = ["main", "handle_request", "work", "send_reply", "idle"];
    let samples = aux_sample_calls(&script.stdout, "task-clock", "2048");
    for (k, calls) in samples.iter().enumerate() {
        assert!(!calls.is_empty(), "task-clock sample {k}: no calls");
        for f in calls {
            assert!(funcs.contains(&f.as_str()), "task-clock sample {k}: {f}");
        }
    }
    assert!(!samples.is_empty(), "no task-clock samples");
    if let Some(perf_script) = perf_reads(&data) {
        assert_eq!(
            perf_samples(&perf_script, "task-clock").len(),
            samples.len()
        );
    }
}

/// `--aux-sample` on a probe sampler whose samples outrun the data area (issue 22 item 16):
/// the loss is said with its kind, its size and why, in numbers that add up to the closing
/// line's; the report names the sampled function's object as perf does (the program, not
/// `[swtrace]`).
#[test]
fn aux_sample_loss_is_said_and_objects_are_named_as_perf_names_them() {
    require_oracle!("gcc");
    require_oracle!("perf");
    let dir = tempdir();
    let d = dir.path();
    let prog = build(d, "server.c", &["-finstrument-functions"], "server");
    let r = record_prog(
        d,
        "loss.data",
        &[
            "-e",
            "{swtrace//,probe:work}",
            "--aux-sample=4096",
            "-m",
            "8",
        ],
        &prog,
        &["20000"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let closing = r
        .stderr
        .lines()
        .find(|l| l.contains("Captured and wrote"))
        .expect("closing line");
    let lost: u64 = closing
        .split(", ")
        .find_map(|w| w.strip_suffix(" lost"))
        .and_then(|n| n.parse().ok())
        .expect("N lost");
    assert!(
        lost > 0,
        "nothing lost with an 8-page data area: {}",
        r.stderr
    );
    let said: u64 = r
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("perfaux record: "))
        .filter_map(|l| {
            let (n, rest) = l.split_once(' ')?;
            (rest.contains(" lost (") || rest.contains(" cut short ("))
                .then(|| n.parse::<u64>().ok())?
        })
        .sum();
    assert_eq!(said, lost, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("records lost (PERF_RECORD_LOST): the data area (")
            && r.stderr
                .contains("up to 4096 bytes of trace (--aux-sample)"),
        "{}",
        r.stderr
    );
    let data = d.join("loss.data");
    let theirs = perf(
        &[
            "report",
            "--stdio",
            "--sort",
            "dso,sym",
            "-i",
            path_str(&data),
        ],
        d,
    );
    let ours = perfaux(&["report", "-i", path_str(&data)]);
    let dso_of_work = |text: &str| -> Option<String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.trim_end().ends_with("[.] work"))
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let i = w.iter().position(|&x| x == "[.]")?;
                Some(w[i - 1].to_owned())
            })
    };
    let perf_dso =
        dso_of_work(&theirs.stdout).unwrap_or_else(|| panic!("perf:\n{}", theirs.stdout));
    assert_eq!(perf_dso, "server", "{}", theirs.stdout);
    assert_eq!(dso_of_work(&ours.stdout), Some(perf_dso), "{}", ours.stdout);
}
