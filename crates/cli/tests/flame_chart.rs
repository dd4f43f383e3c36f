//! `report --flame-chart` on a program of two threads running at once, each calling `slow()`
//! five times back to back (crates/preload/tests/c/lanes.c): one lane per thread, every bar on
//! the recording's one clock (its x from its time by one scale in every lane), and each call a
//! bar of its own.

mod calls;

use std::process::Command;

use calls::*;

/// A bar of the chart: its title's name, duration and start (ns), and its rect's x, y and width.
#[derive(Debug)]
struct Bar {
    name: String,
    dur: u64,
    at: u64,
    x: f64,
    y: f64,
    w: f64,
}

/// `SECONDS.NANOSECONDS` as nanoseconds.
fn ns(t: &str) -> u64 {
    let (s, n) = t.split_once('.').unwrap();
    s.parse::<u64>().unwrap() * 1_000_000_000 + n.parse::<u64>().unwrap()
}

fn attr(s: &str, name: &str) -> f64 {
    let at = s.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
    s[at..].split('"').next().unwrap().parse().unwrap()
}

/// The call bars (`<title>NAME (D ns, at T)</title><rect ...>`) and the lanes (`... from T`).
fn bars(svg: &str) -> (Vec<Bar>, Vec<Bar>) {
    let (mut calls, mut lanes) = (Vec::new(), Vec::new());
    for g in svg.split("<g><title>").skip(1) {
        let (title, rest) = g.split_once("</title>").unwrap();
        let (name, tail) = title.rsplit_once(" (").unwrap();
        let (dur, when) = tail.trim_end_matches(')').split_once(" ns, ").unwrap();
        let rect = &rest[..rest.find("/>").unwrap()];
        let bar = Bar {
            name: name.to_owned(),
            dur: dur.parse().unwrap(),
            at: ns(when.split_whitespace().last().unwrap()),
            x: attr(rect, "x"),
            y: attr(rect, "y"),
            w: attr(rect, "width"),
        };
        if when.starts_with("from ") {
            lanes.push(bar);
        } else {
            calls.push(bar);
        }
    }
    (calls, lanes)
}

#[test]
fn threads_share_one_clock_and_each_call_is_a_bar() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(dir.path(), "lanes.c", &["-finstrument-functions"], "lanes");
    let (out, data) = record(dir.path(), &prog, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = dir.path().join("chart.svg");
    let r = Command::new(PERFAUX)
        .args(["report", "-i"])
        .arg(&data)
        .arg("--flame-chart")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    let (calls, lanes) = bars(&text);
    assert_eq!(lanes.len(), 2, "one lane per thread: {lanes:?}");
    // One clock: x = x0 + (t - t0) * scale for every bar of every lane, lanes included.
    let t0 = lanes.iter().map(|l| l.at).min().unwrap();
    let x0 = lanes.iter().find(|l| l.at == t0).unwrap().x;
    let far = calls.iter().max_by_key(|b| b.at).unwrap();
    let scale = (far.x - x0) / (far.at - t0) as f64;
    assert!(scale > 0.0);
    for b in lanes.iter().chain(&calls) {
        let want = x0 + (b.at - t0) as f64 * scale;
        assert!((b.x - want).abs() < 0.05, "{b:?}: x {} against {want}", b.x);
        let w = b.dur as f64 * scale;
        assert!(
            (b.w - w).abs() < 0.05 || b.w == 0.1,
            "{b:?}: width against {w}"
        );
    }
    // The threads ran at once: their lanes overlap in x.
    let (a, b) = (&lanes[0], &lanes[1]);
    assert!(a.x < b.x + b.w && b.x < a.x + a.w, "{a:?} {b:?}");
    // Ten calls of slow, five in each lane's row under five(), none merged with the next.
    let slow: Vec<&Bar> = calls.iter().filter(|b| b.name == "slow").collect();
    assert_eq!(slow.len(), 10, "{slow:?}");
    for lane in &lanes {
        let mut mine: Vec<&&Bar> = slow
            .iter()
            .filter(|b| b.y > lane.y && b.y < lane.y + 4.0 * 16.0)
            .collect();
        assert_eq!(mine.len(), 5, "{lane:?}: {mine:?}");
        mine.sort_by(|p, q| p.x.total_cmp(&q.x));
        for pair in mine.windows(2) {
            // The SVG gives x and width to 0.01 (each off by up to 0.005): back-to-back bars
            // may meet 0.015 past each other, and their sum carries float error on top (a
            // loaded machine's longer recording had 1175.21 + 4.9 against 1180.1 fail at
            // 0.01 with no overlap).
            assert!(pair[0].x + pair[0].w <= pair[1].x + 0.02, "{pair:?}");
            assert!(pair[0].dur >= 300_000, "{pair:?}");
        }
    }
}
