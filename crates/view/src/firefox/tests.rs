//! The streaming writer against fxprof-processed-profile (the
//! [`reference`](super::reference) exporter) on the same events, with the
//! spool's blocks, budget and sort runs made small (`cfg(test)`) so that
//! every path of theirs is taken.

use super::FirefoxProfile;
use super::reference::ReferenceProfile;
use crate::event::{Call, FuncId, LostKind, Names, Sink, ViewEvent};

/// Runs `feed` into both exporters; returns (streaming, crate) JSON.
fn both(names: &Names, feed: impl Fn(&mut dyn Sink)) -> (Vec<u8>, Vec<u8>) {
    both_with(names, |_| {}, feed)
}

fn both_with(
    names: &Names,
    set: impl FnOnce(&mut FirefoxProfile),
    feed: impl Fn(&mut dyn Sink),
) -> (Vec<u8>, Vec<u8>) {
    let _ = names;
    let mut ours = FirefoxProfile::new("perfaux: test \"data\"");
    set(&mut ours);
    feed(&mut ours);
    let mut a = Vec::new();
    ours.write(&mut a).unwrap();
    let mut theirs = ReferenceProfile::new("perfaux: test \"data\"");
    feed(&mut theirs);
    let mut b = Vec::new();
    theirs.write(&mut b).unwrap();
    (a, b)
}

fn call(pid: u32, tid: u32, time: u64, func: FuncId, depth: u32) -> Call {
    Call {
        pid,
        tid,
        time,
        func,
        depth,
    }
}

fn assert_same(a: &[u8], b: &[u8]) {
    if a != b {
        let va: serde_json::Value = serde_json::from_slice(a).expect("ours parses");
        let vb: serde_json::Value = serde_json::from_slice(b).unwrap();
        assert_eq!(va, vb, "the profiles differ as values");
        panic!(
            "same values, different bytes:\n{}\n{}",
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b)
        );
    }
}

#[test]
fn every_kind_of_event_is_written_as_the_crate_writes_it() {
    let mut names = Names::default();
    let main = names.intern("main", "prog");
    let work = names.intern("work", "prog");
    let fib = names.intern("fib", "prog");
    // The same name in another object: one frame, as the crate interns by name.
    let work2 = names.intern("work", "libother.so");
    let leaf = names.intern("leaf \u{e9}\"q\"", "prog");
    let (a, b) = both(&names, |s| {
        let n = &names;
        let ev = |s: &mut dyn Sink, e: ViewEvent<'_>| s.event(n, &e).unwrap();
        ev(
            s,
            ViewEvent::Comm {
                pid: 100,
                tid: 100,
                comm: "prog",
            },
        );
        // A thread named after its first event, one before.
        ev(
            s,
            ViewEvent::Comm {
                pid: 100,
                tid: 102,
                comm: "worker-b",
            },
        );
        s.enter(n, call(100, 100, 1_000, main, 0)).unwrap();
        s.enter(n, call(100, 101, 1_500, work, 0)).unwrap();
        s.enter(n, call(100, 100, 2_000, work, 1)).unwrap();
        for d in 0..40u64 {
            s.enter(n, call(100, 100, 2_100 + d, fib, 2 + d as u32))
                .unwrap();
        }
        for d in 0..40u64 {
            s.exit(n, call(100, 100, 3_000 + d, fib, 41 - d as u32), false)
                .unwrap();
        }
        ev(
            s,
            ViewEvent::Comm {
                pid: 100,
                tid: 101,
                comm: "worker-a",
            },
        );
        s.exit(n, call(100, 100, 4_000, work, 1), false).unwrap();
        s.enter(n, call(100, 100, 4_100, work2, 1)).unwrap();
        s.exit(n, call(100, 100, 4_200, work2, 1), true).unwrap();
        // An exit with no open call: nothing but the thread.
        s.exit(n, call(200, 201, 4_300, leaf, 0), false).unwrap();
        s.exit(n, call(100, 101, 5_000, work, 0), false).unwrap();
        s.exit(n, call(100, 100, 9_000, main, 0), false).unwrap();
        for (i, payload) in [&b"request_7"[..], b"\x01\x02\xff", b"request_7", b""]
            .iter()
            .enumerate()
        {
            ev(
                s,
                ViewEvent::Uevent {
                    pid: 100,
                    tid: 102,
                    time: 1_200 + i as u64,
                    ty: 3 + i as u32,
                    type_name: (i % 2 == 0).then_some("request_begin"),
                    payload,
                },
            );
        }
        for (time, pause, dropped) in [
            (5_000, true, false),
            (5_100, true, true),
            (6_000, false, false),
            (6_100, false, true),
            (6_200, false, false),
        ] {
            ev(
                s,
                ViewEvent::PauseResume {
                    tid: 101,
                    time,
                    pause,
                    dropped,
                },
            );
        }
        ev(
            s,
            ViewEvent::Stopped {
                tid: 101,
                time: 9_500,
            },
        );
        ev(
            s,
            ViewEvent::Snapshot {
                tid: 300,
                begin: 10,
                end: 20,
                bytes: 4096,
                begins: true,
            },
        );
        for (i, kind) in [
            LostKind::AuxTruncated,
            LostKind::Records,
            LostKind::Samples,
            LostKind::ProbeEvents,
            LostKind::SkippedBytes,
        ]
        .into_iter()
        .enumerate()
        {
            ev(
                s,
                ViewEvent::Lost {
                    tid: 100,
                    time: 7_000 + i as u64,
                    kind,
                    count: 3,
                },
            );
        }
        // Samples with callchains (leaf first), one with none, one out of
        // order on a thread of their own.
        for (time, stack) in [
            (8_000u64, &[leaf, work, main][..]),
            (8_100, &[fib, fib, work, main][..]),
            (7_900, &[][..]),
            (8_200, &[leaf, work2, main][..]),
        ] {
            ev(
                s,
                ViewEvent::Sample {
                    pid: 400,
                    tid: 401,
                    time,
                    event: "cpu-clock",
                    period: 1,
                    stack,
                },
            );
        }
    });
    assert_same(&a, &b);
}

#[test]
fn out_of_order_samples_are_sorted_on_disk_as_the_crate_sorts_them() {
    let mut names = Names::default();
    let f: Vec<FuncId> = (0..5)
        .map(|i| names.intern(&format!("f{i}"), "p"))
        .collect();
    // Distinct times (the crate's sort leaves equal ones unordered) in a
    // scrambled order: 2,000 samples, 20 sort runs, merged in 3 levels.
    let n = 2_000u64;
    let (a, b) = both(&names, |s| {
        for i in 0..n {
            let t = (i * 7919) % n * 10 + 5;
            let stack = [f[(i % 5) as usize], f[((i / 5) % 5) as usize]];
            let e = ViewEvent::Sample {
                pid: 1,
                tid: 2,
                time: t,
                event: "cpu-clock",
                period: 1,
                stack: &stack[..(i % 3) as usize],
            };
            s.event(&names, &e).unwrap();
        }
    });
    assert_same(&a, &b);
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    let deltas = v["threads"][0]["samples"]["timeDeltas"].as_array().unwrap();
    assert_eq!(deltas.len(), n as usize);
    assert!(deltas.iter().all(|d| d.as_f64().unwrap() > 0.0));
}

#[test]
fn samples_of_equal_times_keep_their_order_through_the_disk_sort() {
    let mut names = Names::default();
    let f: Vec<FuncId> = (0..5)
        .map(|i| names.intern(&format!("f{i}"), "p"))
        .collect();
    // Times falling in groups of 10 equal ones, over 10 sort runs: sample i
    // has the stack of f[i % 5] (stack row i % 5: the first five make them).
    let n = 1_000u64;
    let time = |i: u64| (n - i) / 10 * 1000;
    let mut ours = FirefoxProfile::new("p");
    for i in 0..n {
        let stack = [f[(i % 5) as usize]];
        let e = ViewEvent::Sample {
            pid: 1,
            tid: 1,
            time: time(i),
            event: "cpu-clock",
            period: 1,
            stack: &stack,
        };
        ours.event(&names, &e).unwrap();
    }
    let mut out = Vec::new();
    ours.write(&mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let got: Vec<u64> = v["threads"][0]["samples"]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let mut order: Vec<u64> = (0..n).collect();
    order.sort_by_key(|&i| time(i));
    let want: Vec<u64> = order.iter().map(|i| i % 5).collect();
    assert_eq!(got, want);
}

#[test]
fn call_paths_past_the_bound_go_on_in_one_frame_under_the_known_prefix() {
    let mut names = Names::default();
    let f: Vec<FuncId> = (0..8)
        .map(|i| names.intern(&format!("f{i}"), "p"))
        .collect();
    let mut ours = FirefoxProfile::new("p");
    ours.shared.max_stacks = 10;
    // Ever-new paths: each call nests a different function sequence.
    let mut t = 0;
    for round in 0..50usize {
        for d in 0..6usize {
            t += 1;
            let c = call(1, 1, t, f[(round / (d + 1) + d) % 8], d as u32);
            ours.enter(&names, c).unwrap();
        }
        for d in (0..6usize).rev() {
            t += 1;
            ours.exit(&names, call(1, 1, t, f[0], d as u32)).unwrap();
        }
    }
    let mut out = Vec::new();
    ours.write(&mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let th = &v["threads"][0];
    let stacks = th["stackTable"]["length"].as_u64().unwrap();
    assert!(stacks <= 20, "{stacks} stack rows for a bound of 10");
    let strings = th["stringArray"].as_array().unwrap();
    let past = strings
        .iter()
        .position(|s| s == super::tables::PAST_MAX_STACKS)
        .expect("the past-the-bound frame is named");
    let frame_names = th["funcTable"]["name"].as_array().unwrap();
    let past_frame = frame_names.iter().position(|n| n == past).unwrap();
    let frames = th["stackTable"]["frame"].as_array().unwrap();
    assert!(frames.iter().any(|fr| fr == past_frame));
    // Every sample's stack is a row of the table, every call a marker.
    let samples = th["samples"]["stack"].as_array().unwrap();
    assert_eq!(samples.len(), 600);
    assert!(
        samples
            .iter()
            .all(|s| s.is_null() || s.as_u64().unwrap() < stacks)
    );
    assert_eq!(th["markers"]["length"], 300);
}

#[test]
fn strings_past_the_bound_are_written_again_and_markers_name_the_right_one() {
    let names = Names::default();
    let mut ours = FirefoxProfile::new("p");
    ours.shared.max_string_bytes = 64 * 12;
    let payloads: Vec<String> = (0..40).map(|i| format!("payload {}", i % 25)).collect();
    for (i, p) in payloads.iter().enumerate() {
        let e = ViewEvent::Uevent {
            pid: 1,
            tid: 1,
            time: i as u64,
            ty: 1,
            type_name: None,
            payload: p.as_bytes(),
        };
        ours.event(&names, &e).unwrap();
    }
    let mut out = Vec::new();
    ours.write(&mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let th = &v["threads"][0];
    let strings = th["stringArray"].as_array().unwrap();
    let texts: Vec<&str> = th["markers"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            strings[d["text"].as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(texts, payloads);
    // Strings were found again (a string each for the name and the text of
    // every marker would be 80), and forgotten: the name is written again.
    assert!(strings.len() < 60, "{} strings", strings.len());
    let label = strings.iter().filter(|s| *s == "uevent 1").count();
    assert!(label > 1, "the marker name written {label} times");
}

#[test]
fn a_profile_with_no_events_is_the_crates() {
    let names = Names::default();
    let (a, b) = both(&names, |_| {});
    assert_same(&a, &b);
}
