//! A flight recording's snapshots outlive the process that records itself: each is written as
//! it is taken, so the file at the recording's path holds them, whole, after a SIGKILL or an
//! abort that gave the recording no chance to finish. Each test runs the service as a child
//! (this test binary again, told by the environment which service to be) and reads what it
//! left, with perfaux's readers and perf 6.1.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use perfaux_tracing::{EVENT, Recording, RecordingOptions, SNAPSHOT};
use tracing::{error, info_span};
use tracing_subscriber::prelude::*;

/// The child's service, and the file it records into.
const CHILD: &str = "PERFAUX_TRACING_KILLED_CHILD";
const OUT: &str = "PERFAUX_TRACING_KILLED_OUT";

fn flight_recording(out: &Path, opts: impl FnOnce(&mut RecordingOptions)) -> Recording {
    let mut o = RecordingOptions {
        flight_recorder: true,
        snapshot_interval: Duration::ZERO,
        ..RecordingOptions::default()
    };
    opts(&mut o);
    let rec = Recording::start(out, o).unwrap();
    tracing_subscriber::registry()
        .with(perfaux_tracing::layer())
        .init();
    rec
}

/// Requests 0..=40; an error in 20 and in 40 (a snapshot each), then SIGKILL while request
/// 41 runs.
fn killed_service(out: &Path) {
    let _rec = flight_recording(out, |o| o.snapshot_on_level = Some(tracing::Level::ERROR));
    for req in 0..100u32 {
        let _s = info_span!("request", req).entered();
        if req == 20 || req == 40 {
            error!(req, "failed");
        }
        if req == 41 {
            // SAFETY: raise has no preconditions; SIGKILL ends the process here.
            unsafe { libc::raise(libc::SIGKILL) };
        }
    }
    unreachable!("SIGKILL");
}

/// A panic in request 7, in a process that aborts on a panic (as `panic = "abort"` does:
/// the hook, then abort).
fn aborting_service(out: &Path) {
    std::panic::set_hook(Box::new(|_| std::process::abort()));
    let _rec = flight_recording(out, |o| o.snapshot_on_panic = true);
    for req in 0..10u32 {
        let _s = info_span!("handler", req).entered();
        if req == 7 {
            panic!("bad request {req}");
        }
    }
    unreachable!("the panic aborts");
}

/// In the child: the service the parent asked for. Returns false in the parent.
fn child() -> bool {
    let Some(which) = std::env::var_os(CHILD) else {
        return false;
    };
    let out = PathBuf::from(std::env::var_os(OUT).unwrap());
    match which.to_str() {
        Some("killed") => killed_service(&out),
        Some("aborting") => aborting_service(&out),
        other => panic!("no such child service: {other:?}"),
    }
    true
}

/// Runs this test binary's `test` as the child `which`, which must die of `signal`; the
/// directory and the file it recorded into.
fn run_child(test: &str, which: &str, signal: i32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{which}.data"));
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, which)
        .env(OUT, &out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.signal(),
        Some(signal),
        "the child's end: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    (dir, out)
}

/// perf 6.1 reads the file, without a warning, and prints each uevent our reader found.
fn perf_reads_every_uevent(file: &Path, dir: &Path, seen: &common::Recorded) {
    let script = common::perf_script(file, dir);
    let samples = script.matches(" perfaux:uevent: ").count();
    assert_eq!(samples, seen.uevents.len(), "perf script:\n{script}");
}

#[test]
fn snapshots_taken_before_a_sigkill_are_in_the_file() {
    if child() {
        return;
    }
    let (dir, file) = run_child(
        "snapshots_taken_before_a_sigkill_are_in_the_file",
        "killed",
        libc::SIGKILL,
    );
    assert_eq!(common::snapshots(&file), 2);
    let seen = common::read(&file);
    assert_eq!(
        seen.payloads(SNAPSHOT),
        ["reason=level level=ERROR", "reason=level level=ERROR"]
    );
    // The two snapshots: requests 0..=20 entered, then the area again at 40 (0..=40: the
    // default area holds all of them).
    assert_eq!(seen.enters.get("killed::request"), Some(&(21 + 41)));
    let errors: Vec<_> = seen.payloads(EVENT);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[1].contains("req=40"), "{}", errors[1]);
    perfaux_testutil::require_oracle!("perf");
    perf_reads_every_uevent(&file, dir.path(), &seen);
}

#[test]
fn a_panic_that_aborts_leaves_its_snapshot_whose_last_event_is_the_panic() {
    if child() {
        return;
    }
    let (dir, file) = run_child(
        "a_panic_that_aborts_leaves_its_snapshot_whose_last_event_is_the_panic",
        "aborting",
        libc::SIGABRT,
    );
    assert_eq!(common::snapshots(&file), 1);
    let seen = common::read(&file);
    let (ty, reason) = seen.uevents.last().expect("uevents");
    assert_eq!((*ty, reason.as_str()), (SNAPSHOT, "reason=panic"));
    let (ty, last) = &seen.uevents[seen.uevents.len() - 2];
    assert_eq!(*ty, EVENT);
    assert!(
        last.starts_with("level=ERROR target=panic message=\"bad request 7\" location=\""),
        "{last}"
    );
    assert_eq!(seen.enters.get("killed::handler"), Some(&8));
    perfaux_testutil::require_oracle!("perf");
    perf_reads_every_uevent(&file, dir.path(), &seen);
}
