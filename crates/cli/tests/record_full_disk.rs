//! A disk that fills while `perfaux record -- ./prog` runs: the recording keeps everything
//! written before, as a whole file that perfaux and perf 6.1 read, and says it is cut (exit
//! status 1, how much trace was not written). The recorder holds 4 MiB beside the output from
//! the start (`FULL_DISK_RESERVE`) and gives it back for the recording's end when the disk
//! fills; the trace goes back to its last whole chunk.

mod calls;

use std::path::Path;
use std::process::Command;

use calls::*;

/// A tmpfs of `size` at `dir`, unmounted when dropped; `None` (said) where mounting is refused.
struct Tmpfs<'a>(&'a Path);

impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path, size: &str) -> Option<Tmpfs<'a>> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "perfaux-full"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            perfaux_testutil::skip("cannot mount a small tmpfs (needs root)");
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn a_disk_that_fills_keeps_the_recording_so_far() {
    if !perfaux_testutil::oracle("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_full");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    // fib(27): about 1.3 million calls, 6 MB of trace, past what 8 MiB less the reserve holds.
    let out = Command::new(PERFAUX)
        .current_dir(dir.path())
        .args(["record", "-o"])
        .arg(mnt.join("perf.data"))
        .arg("--")
        .arg(&prog)
        .args(["0", "27", "nojmp"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("filled"), "{stderr}");
    assert!(
        stderr.contains(&*mnt.join("perf.data").to_string_lossy()),
        "{stderr}"
    );
    let mut names: Vec<_> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["perf.data"], "the recording and nothing else");

    let data = mnt.join("perf.data");
    let calls = call_trace(&data);
    // The program's calls from its start on, cut where the disk filled.
    assert_eq!(
        calls.first().map(String::as_str),
        Some("main"),
        "{:?}",
        &calls[..3]
    );
    assert!(calls.len() > 100_000, "{} calls kept", calls.len());
    assert!(
        calls.len() < 1_000_000,
        "{} calls: nothing was cut?",
        calls.len()
    );
    if perfaux_testutil::oracle("perf") {
        let home = tempfile::tempdir().unwrap();
        let r = perfaux_testutil::perf_on_file(
            &["script", "--show-task-events"],
            &data,
            false,
            home.path(),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("PERF_RECORD_COMM"), "{}", r.stdout);
    }
}
