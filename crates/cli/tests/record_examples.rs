//! perfaux-recorder's examples, built and run: the embedded flight
//! recorder writes a perf.data that perf 6.1's `perf script` and
//! `perfaux script --call-trace` both read, its wrapped snapshot flagged
//! PERF_AUX_FLAG_OVERWRITE; the reader example reads it back.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// Builds perfaux-recorder's examples; returns their directory.
fn examples() -> PathBuf {
    examples_of("perfaux-recorder")
}

/// Builds `package`'s examples; returns their directory.
fn examples_of(package: &str) -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", package, "--examples"])
        .status()
        .expect("cargo");
    assert!(st.success(), "building {package}'s examples");
    // target/<profile>/deps/<test> -> target/<profile>/examples
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples")
}

#[test]
fn the_flight_recorder_example_writes_a_file_perf_and_perfaux_read() {
    let ex = examples();
    let dir = tempdir();
    let out = dir.path().join("flight.data");
    let o = Command::new(ex.join("flight_recorder"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ct = perfaux(&["script", "--call-trace", "-i", path_str(&out)]);
    assert_eq!(ct.code, 0, "{}", ct.stderr);
    let fibs = ct
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" fib"))
        .count();
    assert!(
        fibs > 100,
        "the snapshot holds the last calls of fib: {}",
        ct.stdout
    );
    let r = Command::new(ex.join("read_perf_data"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8_lossy(&r.stdout);
    // 2000 calls of fib(8) overfill 64 KiB: the snapshot wrapped and says so (flag 0x2; the
    // chunk that begins a snapshot also carries SNAPSHOT_BEGIN).
    let flags = text
        .lines()
        .filter(|l| l.contains("snapshot chunk:"))
        .filter_map(|l| l.split("flags 0x").nth(1))
        .filter_map(|f| u64::from_str_radix(f.trim(), 16).ok())
        .collect::<Vec<_>>();
    assert!(
        !flags.is_empty() && flags.iter().all(|f| f & 0x2 != 0),
        "{text}"
    );
    perfaux_testutil::require_oracle!("perf");
    let home = tempdir();
    for args in [&["script", "-i"][..], &["report", "-D", "-i"]] {
        let mut a = args.to_vec();
        a.push(path_str(&out));
        let p = perf(&a, home.path());
        assert_eq!(p.code, 0, "perf {args:?}: {}", p.stderr);
        assert_eq!(p.stderr.trim(), "", "perf {args:?} warned");
    }
}

/// A Rust service with `tracing` spans and events and perfaux-tracing's layer, recorded by
/// `perfaux record`: every span is a call named `target::name` (the names the program gave,
/// through the control area, not the layer's code address), every event a uevent, the counts
/// those the program made (3 workers x 1000 requests, every 97th slow), and the program's own
/// recording declines to start.
#[test]
fn a_tracing_service_recorded_by_perfaux_record_has_its_spans_by_name() {
    let ex = examples_of("perfaux-tracing");
    let dir = tempdir();
    let out = dir.path().join("svc.data");
    let own = dir.path().join("own.data");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&out),
        "--",
        path_str(&ex.join("service")),
        path_str(&own),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("runs under `perfaux record`"),
        "{}",
        r.stderr
    );
    assert!(!own.exists(), "the service's own recording declined");
    let rep = perfaux(&["report", "-i", path_str(&out)]);
    assert_eq!(rep.code, 0, "{}", rep.stderr);
    let calls = |f: &str| {
        rep.stdout
            .lines()
            .find(|l| l.split_whitespace().last() == Some(f))
            .and_then(|l| l.split_whitespace().nth(4))
            .map(str::to_owned)
    };
    assert_eq!(
        calls("service::request").as_deref(),
        Some("3000"),
        "{}",
        rep.stdout
    );
    assert_eq!(
        calls("service::lookup").as_deref(),
        Some("3000"),
        "{}",
        rep.stdout
    );
    assert_eq!(
        calls("service::slow_path").as_deref(),
        Some("33"),
        "{}",
        rep.stdout
    );
    // The uevent types by the names the program gave them.
    let script = perfaux(&["script", "-i", path_str(&out)]);
    let events = script
        .stdout
        .lines()
        .filter(|l| l.contains("tracing_event(29697) \"level="))
        .count();
    assert_eq!(events, 3033, "3000 done, 33 slow");
    let spans = script
        .stdout
        .lines()
        .filter(|l| l.contains("tracing_span(29698) \"span=request "))
        .count();
    assert_eq!(spans, 3000);
}

/// `record -S --snapshot-on warn` with a program that uses perfaux-tracing: its layer sends a
/// `tracing_snapshot` uevent at its first warning (then at most one a second: the service's
/// 33 warnings come within a fraction of one), and the recording takes one snapshot more than
/// the same recording without the option (whose snapshots are the threads' ends). Without -S
/// the option is refused.
#[test]
fn record_s_snapshot_on_a_level_takes_a_snapshot_when_the_program_warns() {
    let ex = examples_of("perfaux-tracing");
    let service = ex.join("service");
    let dir = tempdir();
    let own = dir.path().join("own.data");
    let snapshots = |extra: &[&str], name: &str| {
        let out = dir.path().join(name);
        let mut args = vec!["record", "-S"];
        args.extend_from_slice(extra);
        args.extend([
            "-o",
            path_str(&out),
            "--",
            path_str(&service),
            path_str(&own),
        ]);
        let r = perfaux(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let n: u64 = r
            .stderr
            .split(" snapshots")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no snapshot count: {}", r.stderr));
        let script = perfaux(&["script", "-i", path_str(&out)]);
        let said: Vec<String> = script
            .stdout
            .lines()
            .filter(|l| l.contains("tracing_snapshot("))
            .map(|l| l.rsplit('"').nth(1).unwrap_or("").to_string())
            .collect();
        (n, said)
    };
    let (plain, none) = snapshots(&[], "plain.data");
    assert!(none.is_empty(), "{none:?}");
    let (warned, said) = snapshots(&["--snapshot-on", "warn"], "warn.data");
    assert_eq!(said, ["reason=level level=WARN"]);
    assert_eq!(
        warned,
        plain + 1,
        "one snapshot more than the threads' ends"
    );
    let r = perfaux(&[
        "record",
        "--snapshot-on",
        "warn",
        "-o",
        path_str(&dir.path().join("x.data")),
        "--",
        path_str(&service),
        path_str(&own),
    ]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("they need -S"), "{}", r.stderr);
}

/// Async tasks on three tokio workers, each `instrument`ed with a span (perfaux-tracing's
/// async_tasks example), recorded in-process and by `perfaux record`: each poll is a call
/// tagged with its span's id, and the exports link the polls of each task, and only those,
/// as one flow: Perfetto's (decoded with the official protos) and Chrome's flow events (one
/// start, a step per later poll). Each `tracing` event carries its fields as arguments.
#[test]
fn each_async_tasks_polls_are_one_flow_and_each_event_has_its_fields_in_the_exports() {
    let ex = examples_of("perfaux-tracing");
    let prog = ex.join("async_tasks");
    let dir = tempdir();
    let own = dir.path().join("own.data");
    let o = Command::new(&prog).arg(&own).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout);
    let counts: Vec<usize> = printed
        .lines()
        .find_map(|l| l.strip_prefix("tasks "))
        .map(|l| {
            l.split(' ')
                .filter_map(|w| w.parse().ok())
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| panic!("no counts printed: {printed}"));
    let (tasks, polls) = (counts[0], counts[1]);
    let recorded = dir.path().join("recorded.data");
    let unused = dir.path().join("unused.data");
    let r = perfaux(&[
        "record",
        "-o",
        path_str(&recorded),
        "--",
        path_str(&prog),
        path_str(&unused),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for file in [&own, &recorded] {
        let json = dir.path().join("t.json");
        let c = perfaux(&[
            "export",
            "-F",
            "chrome",
            "-i",
            path_str(file),
            "-o",
            path_str(&json),
        ]);
        assert_eq!(c.code, 0, "{}", c.stderr);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let events = v
            .as_array()
            .or_else(|| v["traceEvents"].as_array())
            .unwrap();
        let mut per_flow: std::collections::BTreeMap<u64, (usize, usize)> = Default::default();
        for e in events.iter().filter(|e| e["cat"] == "span") {
            let n = per_flow.entry(e["id"].as_u64().unwrap()).or_default();
            match e["ph"].as_str() {
                Some("s") => n.0 += 1,
                Some("t") => n.1 += 1,
                other => panic!("flow phase {other:?}"),
            }
        }
        // Each event's fields as arguments: `stepped`, with its task and step.
        let stepped: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["args"]["fields"]["message"] == "stepped")
            .collect();
        assert_eq!(stepped.len(), tasks * (polls - 2), "{}", file.display());
        assert!(
            stepped.iter().all(|e| e["args"]["fields"]["task"]
                .as_str()
                .is_some_and(|t| t.parse::<usize>().is_ok_and(|t| t < tasks))),
            "{stepped:?}"
        );
        // The span flows of the tasks: a start and `polls - 1` steps each.
        let task_flows: Vec<_> = per_flow.values().filter(|&&(_, t)| t > 0).collect();
        assert_eq!(task_flows.len(), tasks, "{}: {per_flow:?}", file.display());
        assert!(
            task_flows.iter().all(|&&n| n == (1, polls - 1)),
            "{}: {per_flow:?}",
            file.display()
        );

        if !perfetto_protos() {
            return;
        }
        let pf = dir.path().join("t.perfetto-trace");
        let p = perfaux(&[
            "export",
            "-F",
            "perfetto",
            "-i",
            path_str(file),
            "-o",
            path_str(&pf),
        ]);
        assert_eq!(p.code, 0, "{}", p.stderr);
        let py = perfetto_slices(&pf);
        // Each event's fields as arguments, read by the official protos.
        let stepped = py
            .lines()
            .filter(|l| {
                l.starts_with("fields tracing_event\t") && l.contains("\tmessage=stepped\t")
            })
            .count();
        assert_eq!(stepped, tasks * (polls - 2), "{}: {py}", file.display());
        // `flow ID NAME SLICES THREADS`: each task's span, once per poll.
        let flows: Vec<(String, usize)> = py
            .lines()
            .filter_map(|l| l.strip_prefix("flow "))
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                (w[1].to_string(), w[2].parse().unwrap())
            })
            .filter(|(_, slices)| *slices > 1)
            .collect();
        assert_eq!(flows.len(), tasks, "{}: {py}", file.display());
        assert!(
            flows
                .iter()
                .all(|(name, n)| name == "async_tasks::task" && *n == polls),
            "{}: {flows:?}",
            file.display()
        );
    }
}
