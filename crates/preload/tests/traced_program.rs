//! [`TracedProgram`] as a library caller drives it: the command is the caller's (its
//! environment, directory and standard streams kept, the runtime put in front of its
//! `LD_PRELOAD`), the loop is the caller's, and what the recording has to say comes back as
//! values.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use perfaux_preload::{ProgramError, ProgramOptions, TracedProgram};

const AUX_SIZE: u64 = 1 << 20;

/// Steps `p` until its program ended; the notices of every step.
fn run(p: &mut TracedProgram) -> Vec<perfaux_preload::Notice> {
    let mut notices = Vec::new();
    loop {
        let s = p.step(Duration::from_millis(1)).unwrap();
        notices.extend(s.notices);
        if s.ended {
            return notices;
        }
    }
}

#[test]
fn the_command_keeps_the_callers_environment_directory_and_streams() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let said = dir.path().join("said");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"printf '%s\n' "$LD_PRELOAD" "$(pwd)" "$PERFAUX_TEST_WORD""#)
        .current_dir(&work)
        .env("PERFAUX_TEST_WORD", "kept")
        // Already loaded in every process: preloading it again changes nothing.
        .env("LD_PRELOAD", "libc.so.6")
        .stdout(Stdio::from(std::fs::File::create(&said).unwrap()));
    let output = dir.path().join("perf.data");
    let mut p =
        TracedProgram::start(cmd, ProgramOptions::trace(AUX_SIZE, false), output.clone()).unwrap();
    let pid = p.pid();
    assert!(run(&mut p).is_empty());
    // The shell calls no hook: nothing traced, and no file.
    match p.finish() {
        Err(ProgramError::NothingTraced { prog, end, .. }) => {
            assert_eq!(prog, "sh");
            assert_eq!(end, None);
        }
        other => panic!("{other:?}"),
    }
    assert!(!output.exists());
    let said = std::fs::read_to_string(&said).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 3, "{said}");
    // The carried runtime, as Runtime::find gives it (the copy kept in the cache directory,
    // or a memfd of this process), first.
    let runtime = perfaux_preload::runtime::Runtime::find().unwrap();
    let runtime = runtime.path.to_str().unwrap().to_owned();
    assert!(
        (lines[0].starts_with(&runtime)
            || lines[0].starts_with(&format!("/proc/{}/fd/", std::process::id())))
            && lines[0].ends_with(":libc.so.6"),
        "the runtime in front of the caller's LD_PRELOAD: {}",
        lines[0]
    );
    assert_eq!(Path::new(lines[1]), work.canonicalize().unwrap());
    assert_eq!(lines[2], "kept");
    assert!(pid > 0);
}

#[test]
fn a_program_built_with_hooks_is_recorded_and_its_end_said() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    build_calls(dir.path());
    let mut cmd = Command::new(dir.path().join("calls"));
    cmd.args(["2", "6", "none", "nojmp"]).stdout(Stdio::null());
    let output = dir.path().join("perf.data");
    let mut p =
        TracedProgram::start(cmd, ProgramOptions::trace(AUX_SIZE, false), output.clone()).unwrap();
    assert!(run(&mut p).is_empty());
    let f = p.finish().unwrap();
    assert!(f.notices.is_empty(), "{:?}", f.notices);
    assert_eq!(f.end.exit_code(), 0);
    assert_eq!(f.end.signal_line("calls"), None);
    assert!(f.summary.aux_bytes > 0, "{:?}", f.summary);
    assert!(f.summary.records > 0, "{:?}", f.summary);
    assert_eq!(f.summary.lost, 0);
    assert_eq!(
        std::fs::metadata(&output).unwrap().len(),
        f.summary.file_size
    );
}

#[test]
fn a_program_ended_by_a_signal_says_which() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    build_calls(dir.path());
    // It hangs in a traced function until the recording's SIGTERM ends it.
    let mut cmd = Command::new(dir.path().join("calls"));
    cmd.args(["1", "3", "hang"]).stdout(Stdio::null());
    let output = dir.path().join("perf.data");
    let mut p =
        TracedProgram::start(cmd, ProgramOptions::trace(AUX_SIZE, true), output.clone()).unwrap();
    // Until its trace is there (a snapshot takes the newest bytes of its threads).
    loop {
        let s = p.step(Duration::from_millis(1)).unwrap();
        assert!(!s.ended, "it ended before the signal");
        if p.snapshot().unwrap() {
            break;
        }
    }
    p.signal(libc::SIGTERM);
    let f = p.finish().unwrap();
    assert_eq!(f.end.exit_code(), 128 + libc::SIGTERM as u8);
    assert_eq!(
        f.end.signal_line("calls").unwrap(),
        "perfaux record: calls terminated by signal 15 (SIGTERM)"
    );
    // The snapshot taken while it ran (its thread's last one, at the end, is its ring's last
    // drain).
    assert!(f.summary.snapshots >= 1, "{:?}", f.summary);
    assert!(f.summary.aux_bytes > 0, "{:?}", f.summary);
    assert!(output.exists());
}

/// tests/c/calls.c, built with the compiler's hooks into `dir/calls`.
fn build_calls(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/calls.c");
    perfaux_testutil::gcc_instrumented(dir, &[src.to_str().unwrap(), "-o", "calls", "-pthread"]);
}
