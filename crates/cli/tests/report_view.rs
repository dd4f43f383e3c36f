//! `perfaux report` (no -D) against `perfaux script --call-trace` on the
//! same recordings: the call counts per function, counted independently
//! from script's lines, must equal report's Calls column.

mod common;

use std::collections::BTreeMap;

use common::*;

/// Calls per function from `script --call-trace` lines, optionally of one tid.
fn script_counts(file: &str, tid: Option<&str>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for ((t, name), n) in script_counts_by_tid(file) {
        if tid.is_none_or(|want| want == t) {
            *m.entry(name).or_default() += n;
        }
    }
    m
}

/// Calls per function from report's table (`Total Self Calls Avg Min Max
/// Function`, each time two words).
fn report_counts(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut in_table = false;
    for l in out.lines() {
        if l.trim_start().starts_with("====") {
            in_table = true;
            continue;
        }
        if !in_table || l.trim().is_empty() {
            if in_table {
                break;
            }
            continue;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 12, "row: {l}");
        m.insert(w[11].to_string(), w[4].parse().unwrap());
    }
    m
}

fn check(file: &str) -> BTreeMap<String, u64> {
    let want = script_counts(file, None);
    assert!(!want.is_empty(), "script printed no calls");
    let r = perfaux(&["report", "-i", file, "--stdio"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(report_counts(&r.stdout), want, "{}", r.stdout);
    want
}

#[test]
fn call_counts_equal_script_call_trace_full_trace() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "full.data", &["--requests", "30"]);
    let want = check(path_str(&f));
    // 3 workers x 30 requests.
    assert_eq!(want.get("serve_request"), Some(&90));
}

#[test]
fn call_counts_equal_script_call_trace_paused_and_snapshot() {
    let dir = tempdir();
    let f = record_pause_resume(dir.path());
    check(path_str(&f));
    let r = perfaux(&["report", "-i", path_str(&f)]);
    let windows: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("windows: "))
        .expect("pause/resume section")
        .parse()
        .unwrap();
    assert!(windows >= 20, "{}", r.stdout);
    let (s, _) = record(dir.path(), "snap.data", &["--requests", "20", "-Se"]);
    check(path_str(&s));
    let r = perfaux(&["report", "-i", path_str(&s)]);
    assert!(r.stdout.contains("# snapshots: "), "{}", r.stdout);
}

#[test]
fn tid_filter_and_sort_keys() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "t.data", &["--requests", "10"]);
    let file = path_str(&f);
    let all = script_counts(file, None);
    // The tid of the first call line.
    let s = perfaux(&["script", "--call-trace", "-i", file]);
    let tid = s
        .stdout
        .lines()
        .find(|l| !l.contains("tr "))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();
    let want = script_counts(file, Some(&tid));
    let r = perfaux(&["report", "-i", file, "--tid", &tid, "--sort", "call"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got = report_counts(&r.stdout);
    assert_eq!(got, want);
    assert_ne!(got, all, "the filter kept other threads");
    // Sorted by calls, descending.
    let calls: Vec<u64> = r
        .stdout
        .lines()
        .skip_while(|l| !l.contains("===="))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().nth(4).unwrap().parse().unwrap())
        .collect();
    assert!(calls.windows(2).all(|w| w[0] >= w[1]), "{calls:?}");
    let bad = perfaux(&["report", "-i", file, "--sort", "nonsense"]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("unknown key 'nonsense'"),
        "{}",
        bad.stderr
    );
}

#[test]
fn call_graph_counts_sum_to_the_calls() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "g.data", &["--requests", "10"]);
    let file = path_str(&f);
    let want = script_counts(file, None);
    let r = perfaux(&["report", "-i", file, "--call-graph"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for l in r
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" : "))
    {
        let tail = l.split_once(" : ").unwrap().1;
        let tail = &tail[tail.find('(').unwrap() + 1..];
        let (n, name) = tail.split_once(") ").unwrap();
        *got.entry(name.to_string()).or_default() += n.parse::<u64>().unwrap();
    }
    assert_eq!(got, want, "{}", r.stdout);
}

#[test]
fn perf_cpu_clock_samples_resolve_to_symbols() {
    let dir = tempdir();
    let data = dir.path().join("perf.data");
    let (input, _) = record(dir.path(), "w.data", &["--requests", "100"]);
    if !perf_samples_report_dump(dir.path(), &data, &input, false) {
        return;
    }
    let r = perfaux(&["report", "-i", path_str(&data), "--sort", "dso,sym"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("of event 'cpu-clock'"), "{}", r.stdout);
    // perfaux's own functions, resolved from its ELF symbols (a name, not
    // an address) and demangled (no `_ZN`).
    assert!(
        r.stdout.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 4
                && w[1] == "perfaux"
                && w[2] == "[.]"
                && !w[3].starts_with("0x")
                && !w[3].starts_with("_ZN")
        }),
        "{}",
        r.stdout
    );
}

#[test]
fn flame_graph_and_chart_name_every_called_function() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "f.data", &["--requests", "10"]);
    let file = path_str(&f);
    let want = script_counts(file, None);
    let fg = dir.path().join("fg.svg");
    let fc = dir.path().join("fc.svg");
    let r = perfaux(&[
        "report",
        "-i",
        file,
        "--flame-graph",
        path_str(&fg),
        "--flame-chart",
        path_str(&fc),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The chart leaves out bars narrower than a tenth of a pixel (of 1180 for the recording's
    // time range): a function must be in it if its longest call is twice that wide.
    let (span, longest) = span_and_longest_calls(file);
    let drawn = |name: &str| longest[name] as f64 >= 0.2 * span as f64 / 1180.0;
    assert!(
        want.keys().any(|n| drawn(n)),
        "no call is wide enough to draw"
    );
    for svg in [&fg, &fc] {
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.starts_with("<?xml"), "{}", svg.display());
        assert!(
            text.contains(&format!("record -o {file}")),
            "title names the command"
        );
        for name in want.keys() {
            if svg == &fc && !drawn(name) {
                continue;
            }
            assert!(
                text.contains(&format!("<title>{name} (")),
                "{name} missing from {}",
                svg.display()
            );
        }
    }
    // The chart has one root per thread ("comm tid").
    let chart = std::fs::read_to_string(&fc).unwrap();
    assert!(chart.contains("<title>perfaux-worker"), "thread roots");
}

/// The recording's time range and each function's longest call, in ns, from `report`'s
/// header and its function table's Max column.
fn span_and_longest_calls(file: &str) -> (u64, BTreeMap<String, u64>) {
    let r = perfaux(&["report", "-i", file]);
    let ns = common::printed_ns;
    let range = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("# time range: "))
        .unwrap();
    let (_, dur) = range.rsplit_once('(').unwrap();
    let mut d = dur.trim_end_matches(')').split_whitespace();
    let span = ns(d.next().unwrap(), d.next().unwrap());
    let mut longest = BTreeMap::new();
    for l in r
        .stdout
        .lines()
        .skip_while(|l| !l.contains("====="))
        .skip(1)
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        // total, self, avg, min, max are a value and a unit each; calls one number.
        if f.len() < 12 || f[0].starts_with('#') {
            break;
        }
        longest.insert(f[11..].join(" "), ns(f[9], f[10]));
    }
    (span, longest)
}

/// Calls per (tid, function) from `script --call-trace` lines
/// (`comm tid [cpu] sec.nsec: <indent>name`), counted independently of
/// perfaux-view.
fn script_counts_by_tid(file: &str) -> BTreeMap<(String, String), u64> {
    let r = perfaux(&["script", "--call-trace", "-i", file]);
    let mut m = BTreeMap::new();
    for l in r.stdout.lines() {
        let Some((head, body)) = l.split_once(": ") else {
            continue;
        };
        let body = body.trim();
        if body.starts_with("tr ") {
            continue;
        }
        let tid = head.split_whitespace().nth(1).unwrap().to_string();
        *m.entry((tid, body.to_string())).or_default() += 1;
    }
    m
}

/// uevents per type name from `perfaux script` (`perfaux:uevent: NAME(N) ...`).
fn script_uevents(file: &str) -> BTreeMap<String, u64> {
    let r = perfaux(&["script", "-i", file]);
    let mut m = BTreeMap::new();
    for l in r.stdout.lines() {
        if let Some((_, rest)) = l.split_once("perfaux:uevent: ") {
            let name = rest.split('(').next().unwrap().to_string();
            *m.entry(name).or_default() += 1;
        }
    }
    m
}

#[test]
fn perfetto_export_decodes_with_the_official_protos_and_matches_the_call_trace() {
    if !perfetto_protos() {
        return;
    }
    let dir = tempdir();
    let (f, _) = record(dir.path(), "p.data", &["--requests", "20"]);
    let file = path_str(&f);
    let out = dir.path().join("t.perfetto-trace");
    let r = perfaux(&["export", "-F", "perfetto", "-i", file, "-o", path_str(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let py = perfetto_slices(&out);
    let mut slices = BTreeMap::new();
    let mut instants = BTreeMap::new();
    for l in py.lines() {
        let w: Vec<&str> = l.split(' ').collect();
        match w[0] {
            "slice" => {
                slices.insert((w[1].to_string(), w[2].to_string()), w[3].parse().unwrap());
            }
            "instant" => {
                // `instant NAME COUNT`, the name may hold spaces.
                let (name, n) = l["instant ".len()..].rsplit_once(' ').unwrap();
                instants.insert(name.to_string(), n.parse::<u64>().unwrap());
            }
            _ => {}
        }
    }
    assert_eq!(slices, script_counts_by_tid(file));
    // The instants: the uevents, and each trace's stop (the recording's end) as the call
    // trace shows it.
    let mut want = script_uevents(file);
    let trace = perfaux(&["script", "--call-trace", "-i", file]);
    let stops = trace.stdout.matches("tr end   (stopped)").count() as u64;
    if stops > 0 {
        want.insert("trace stopped".to_string(), stops);
    }
    assert_eq!(instants, want);
    // Payloads are text when printable; threads carry their names.
    assert!(py.contains("payload worker=0 req=0 result="), "{py}");
    assert!(py.contains(" perfaux-worker0\n"), "{py}");
}

#[test]
fn chrome_export_is_json_with_balanced_calls_matching_the_call_trace() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "c.data", &["--requests", "20"]);
    let file = path_str(&f);
    let out = dir.path().join("t.json");
    let r = perfaux(&["export", "-F", "chrome", "-i", file, "-o", path_str(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut got: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut open: BTreeMap<u64, Vec<(String, f64)>> = BTreeMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        let tid = e["tid"].as_u64().unwrap();
        let name = e["name"].as_str().unwrap().to_string();
        match e["ph"].as_str().unwrap() {
            "B" if tid < 1 << 32 => {
                *got.entry((tid.to_string(), name.clone())).or_default() += 1;
                open.entry(tid)
                    .or_default()
                    .push((name, e["ts"].as_f64().unwrap()));
            }
            "E" if tid < 1 << 32 => {
                let (n, ts) = open.get_mut(&tid).unwrap().pop().expect("E without B");
                assert_eq!(n, name);
                assert!(e["ts"].as_f64().unwrap() >= ts);
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "unbalanced B/E");
    assert_eq!(got, script_counts_by_tid(file));
}

#[test]
fn firefox_export_has_a_call_marker_per_call_and_uevent_markers() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "ff.data", &["--requests", "20"]);
    let file = path_str(&f);
    let out = dir.path().join("profile.json");
    let r = perfaux(&["export", "-F", "firefox", "-i", file, "-o", path_str(&out)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut calls: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut uevents: BTreeMap<String, u64> = BTreeMap::new();
    for t in v["threads"].as_array().unwrap() {
        let tid = match &t["tid"] {
            serde_json::Value::String(s) => s.clone(),
            n => n.to_string(),
        };
        let strings = t["stringArray"].as_array().unwrap();
        let m = &t["markers"];
        assert!(t["samples"]["length"].as_u64().unwrap() > 0, "no samples");
        for (i, data) in m["data"].as_array().unwrap().iter().enumerate() {
            let name = strings[m["name"][i].as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_string();
            match data["type"].as_str().unwrap() {
                "Call" => {
                    assert!(m["endTime"][i].as_f64() >= m["startTime"][i].as_f64());
                    *calls.entry((tid.clone(), name)).or_default() += 1;
                }
                _ if data["text"].is_number() && name.starts_with("request_")
                    || name == "slow_path" =>
                {
                    *uevents.entry(name).or_default() += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!(calls, script_counts_by_tid(file));
    assert_eq!(uevents, script_uevents(file));
}

/// The streaming Firefox writer's profile and fxprof-processed-profile's
/// (perfaux-view's `firefox::reference`, the exporter it replaced), fed by
/// one pass over `file`.
fn firefox_both(file: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    use perfaux_view::firefox::FirefoxProfile;
    use perfaux_view::firefox::reference::ReferenceProfile;
    let mut ours = FirefoxProfile::new("perfaux: test");
    let mut theirs = ReferenceProfile::new("perfaux: test");
    perfaux::view_input::with_recording(file, perfaux_view::Filter::default(), None, |rec| {
        let mut both = perfaux_view::Tee(vec![&mut ours, &mut theirs]);
        perfaux_view::walk(rec, &mut both).map_err(|e| perfaux::error::CliError::file(file, e))
    })
    .unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    ours.write(&mut a).unwrap();
    theirs.write(&mut b).unwrap();
    (a, b)
}

/// A thread's samples as (time in ns, stack) sorted by both: the crate
/// sorts a thread's out-of-order samples with an unstable sort, which
/// leaves samples of equal times in no given order; the writer keeps their
/// order of arrival. Each delta is ns / 1e6 printed shortest-exact, so the
/// nanoseconds come back exactly.
fn samples_by_time(samples: &serde_json::Value) -> Vec<(i64, i64)> {
    let mut t = 0i64;
    let mut v: Vec<(i64, i64)> = samples["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .zip(samples["stack"].as_array().unwrap())
        .map(|(d, s)| {
            t += (d.as_f64().unwrap() * 1e6).round() as i64;
            (t, s.as_i64().unwrap_or(-1))
        })
        .collect();
    v.sort();
    v
}

/// Checks the two profiles of `file`: the same bytes, or (only when a
/// thread's samples had equal times to sort) the same values but for the
/// order of those samples. Returns the profile.
fn firefox_same(file: &std::path::Path) -> serde_json::Value {
    let (a, b) = firefox_both(file);
    let mut va: serde_json::Value = serde_json::from_slice(&a).expect("the profile parses");
    if a == b {
        eprintln!("{}: the same {} bytes", file.display(), a.len());
        return va;
    }
    let mut vb: serde_json::Value = serde_json::from_slice(&b).unwrap();
    let threads = va["threads"].as_array().unwrap().len();
    assert_eq!(threads, vb["threads"].as_array().unwrap().len());
    for i in 0..threads {
        let (sa, sb) = (
            samples_by_time(&va["threads"][i]["samples"]),
            samples_by_time(&vb["threads"][i]["samples"]),
        );
        assert_eq!(sa, sb, "{}: thread {i}'s samples", file.display());
        for v in [&mut va, &mut vb] {
            let s = &mut v["threads"][i]["samples"];
            s["stack"] = serde_json::Value::Null;
            s["timeDeltas"] = serde_json::Value::Null;
        }
    }
    assert!(va == vb, "{}: the profiles differ", file.display());
    eprintln!(
        "{}: the same values, samples of equal times reordered",
        file.display()
    );
    va
}

/// How many markers of `profile` are named `name`.
fn markers_named(profile: &serde_json::Value, name: &str) -> usize {
    let mut n = 0;
    for t in profile["threads"].as_array().unwrap() {
        let strings = t["stringArray"].as_array().unwrap();
        for i in t["markers"]["name"].as_array().unwrap() {
            n += usize::from(strings[i.as_u64().unwrap() as usize] == name);
        }
    }
    n
}

#[test]
fn firefox_export_is_fxprof_processed_profiles_json_for_real_recordings() {
    let dir = tempdir();
    let d = dir.path();
    // Traced calls, uevents and task-clock samples on the same threads (the
    // samples come before the calls in the pass: the writer sorts them). A
    // task-clock sample is 250 us of a thread's CPU time at most once a tick:
    // a short run may give the workers none, so it is made again longer.
    let mut requests = 2_000;
    loop {
        let (f, _) = record(
            d,
            "tc.data",
            &[
                "--requests",
                &requests.to_string(),
                "-e",
                "swtrace//",
                "-e",
                "uevent",
                "-e",
                "task-clock",
            ],
        );
        let p = firefox_same(&f);
        let threads = p["threads"].as_array().unwrap();
        assert!(threads.len() >= 3, "worker threads");
        assert!(markers_named(&p, "request_start") > 0, "uevent markers");
        // Samples besides a traced thread's two a call: out of time order,
        // sorted.
        let sorted = threads.iter().any(|t| {
            let data = t["markers"]["data"].as_array().unwrap();
            let calls = data.iter().filter(|d| d["type"] == "Call").count() as u64;
            t["samples"]["length"].as_u64().unwrap() > 2 * calls && calls > 0
        });
        if sorted {
            break;
        }
        assert!(requests < 32_000, "no task-clock sample on a traced thread");
        requests *= 4;
    }
    let f = record_pause_resume(d);
    assert!(
        markers_named(&firefox_same(&f), "paused") >= 20,
        "pause markers"
    );
    let (f, _) = record(d, "snap.data", &["--requests", "20", "-Se"]);
    assert!(markers_named(&firefox_same(&f), "snapshot") > 0);
    // An AUX area of two pages loses trace: TRUNCATED markers (each worker
    // fills it faster than it is drained when its run is long enough).
    let (f, _) = record(d, "loss.data", &["--requests", "1000", "-m", ",8K"]);
    assert!(markers_named(&firefox_same(&f), "TRUNCATED") > 0);
    // perf's own cpu-clock samples with callchains (resolved stacks).
    let p = firefox_same(&perfaux_testutil::fixture("perf_data/sleep.data"));
    assert!(p["threads"][0]["samples"]["length"].as_u64().unwrap() > 0);
    perfaux_testutil::require_oracle!("perf");
    let data = d.join("perf.data");
    if !perf_samples_report_dump(d, &data, &f, true) {
        return;
    }
    let p = firefox_same(&data);
    let rows = |p: &serde_json::Value| -> u64 {
        p["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["stackTable"]["length"].as_u64().unwrap())
            .sum()
    };
    assert!(rows(&p) > 5, "perf -g's callchains make call paths");
}

/// `perf record -e cpu-clock -F 20000` (with `-g` if `callchains`) into `data` of
/// `perfaux report -D -i input`: perf's own samples of a known program. Whether it recorded
/// (if not, the test is skipped, said on stderr).
fn perf_samples_report_dump(
    dir: &std::path::Path,
    data: &std::path::Path,
    input: &std::path::Path,
    callchains: bool,
) -> bool {
    let mut args = vec!["record"];
    if callchains {
        args.push("-g");
    }
    args.extend([
        "-e",
        "cpu-clock",
        "-F",
        "20000",
        "-o",
        path_str(data),
        "--",
        PERFAUX,
        "report",
        "-D",
        "-i",
        path_str(input),
    ]);
    let rec = perf(&args, dir);
    if rec.code != 0 {
        perfaux_testutil::skip(&format!("perf record failed here: {}", rec.stderr));
    }
    rec.code == 0
}

/// The built-in workload recorded with tracing paused but inside serve_request ... send_response
/// (aux-action start-paused, resume, pause): `dir`/pause.data.
fn record_pause_resume(dir: &std::path::Path) -> std::path::PathBuf {
    record_windows(dir, "pause.data", "20").0
}

/// Renders `svg` in headless Chromium into a PNG; `None` when Chromium is absent.
pub fn render_in_chromium(svg: &std::path::Path, png: &std::path::Path) -> Option<Run> {
    let chromium = ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok()
    })?;
    let profile = tempdir();
    let mut c = std::process::Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1200,700",
    ])
    .arg(format!("--user-data-dir={}", path_str(profile.path())))
    .arg(format!("--screenshot={}", path_str(png)))
    .arg(format!("file://{}", path_str(svg)));
    Some(run(c))
}

#[test]
fn flame_graph_renders_in_headless_chromium() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "r.data", &["--requests", "10"]);
    let svg = dir.path().join("fg.svg");
    let r = perfaux(&[
        "report",
        "-i",
        path_str(&f),
        "--flame-graph",
        path_str(&svg),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let png = dir.path().join("fg.png");
    let Some(run) = render_in_chromium(&svg, &png) else {
        perfaux_testutil::skip("chromium not found (apt-get install chromium)");
        return;
    };
    assert_eq!(run.code, 0, "chromium: {}", run.stderr);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    // The picture is not blank: the frames are drawn in the flame palette
    // (red to yellow: red high, blue low), and cover a visible part of it.
    let flame = pixels
        .iter()
        .filter(|p| p[0] > 180 && p[2] < 100 && p[0] > p[2] + 100)
        .count();
    assert!(
        flame > pixels.len() / 50,
        "only {flame} of {} pixels in flame colours",
        pixels.len()
    );
    // The names drawn are the functions of the trace.
    let text = std::fs::read_to_string(&svg).unwrap();
    for name in ["serve_request", "compute", "fib"] {
        assert!(
            text.contains(&format!(">{name}</text>")),
            "{name} not drawn"
        );
    }
}

/// Long work shows how far it is (with -v: the calls read, an export's bytes written so
/// far), and an export says its file and size when it is written, the size the file has.
#[test]
fn long_work_shows_progress_and_an_export_says_its_size() {
    let dir = tempdir();
    // About 138 calls a request: past the 65,536 calls between two looks at the clock.
    let (f, _) = record(dir.path(), "p.data", &["--requests", "1000"]);
    let file = path_str(&f);
    let r = perfaux(&["-v", "report", "-i", file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .lines()
            .any(|l| l.starts_with("report: ") && l.contains(" M calls read, ")),
        "{}",
        r.stderr
    );
    let out = dir.path().join("p.json");
    let r = perfaux(&[
        "-v",
        "export",
        "-F",
        "chrome",
        "-i",
        file,
        "-o",
        path_str(&out),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.lines().any(|l| l.starts_with("export: ")
            && l.contains(" M calls read, ")
            && l.ends_with(" written")),
        "{}",
        r.stderr
    );
    let line = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("perfaux export: wrote {} (", out.display())))
        .unwrap_or_else(|| panic!("no size line in {}", r.stderr));
    let (n, unit) = line.trim_end_matches(')').split_once(' ').unwrap();
    let scale = match unit {
        "B" => 1.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        u => panic!("unit {u}"),
    };
    let said = n.parse::<f64>().unwrap() * scale;
    let real = std::fs::metadata(&out).unwrap().len() as f64;
    assert!(
        (said - real).abs() <= 0.06 * scale,
        "said {said}, the file {real}"
    );
}
