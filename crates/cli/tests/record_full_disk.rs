//! A disk that fills while `perfaux record -- ./prog` runs: the recording keeps everything
//! written before, as a whole file that perfaux and perf 6.1 read, the previous output as
//! `.old`, and says it is cut (exit status 1, how much trace was not written). The recorder holds
//! room beside the output from the start, as much as the recording's end needs (perfaux-recorder
//! `END_ROOM` and what the records and the probe table add), and gives it back for the end when
//! the disk fills; the trace goes back to its last whole chunk.

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
    // The same run on a disk with room: every call.
    let (whole, data) = record(dir.path(), &prog, &["0", "27", "nojmp"]);
    assert!(whole.status.success());
    let all = call_trace(&data).len();
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "4m") else {
        return;
    };
    std::fs::write(mnt.join("perf.data"), b"the previous recording").unwrap();
    // fib(27): about 950 thousand calls, 5 MB of trace, past what 4 MiB holds.
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
    assert_eq!(
        names,
        ["perf.data", "perf.data.old"],
        "the recordings and nothing else"
    );
    assert_eq!(
        std::fs::read(mnt.join("perf.data.old")).unwrap(),
        b"the previous recording"
    );

    let data = mnt.join("perf.data");
    let calls = call_trace(&data);
    // The program's calls from its start on, cut where the disk filled.
    assert_eq!(
        calls.first().map(String::as_str),
        Some("main"),
        "{:?}",
        calls.get(..3)
    );
    assert!(calls.len() > 100_000, "{} calls kept", calls.len());
    assert!(
        calls.len() < all,
        "{} calls of {all}: nothing was cut?",
        calls.len()
    );
    if perfaux_testutil::oracle("perf") {
        let events = perf_task_events(&data);
        assert!(events.contains("PERF_RECORD_COMM"), "{events}");
    }
}

/// The same when the records fill the disk (uevents only, no trace: the records' writer meets
/// the full disk, not the trace's): the records written before stay, perf reads them.
#[test]
fn a_disk_that_fills_with_records_keeps_them_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "6m") else {
        return;
    };
    let data = mnt.join("perf.data");
    let out = Command::new(PERFAUX)
        .args(["record", "-e", "uevent", "--requests", "100000", "-o"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("filled"), "{stderr}");
    let kept: u64 = stderr
        .split_once("MB")
        .and_then(|(_, r)| r.split_once(" records")?.0.rsplit_once('(')?.1.parse().ok())
        .unwrap_or_else(|| panic!("no record count in {stderr}"));
    let not: u64 = stderr
        .rsplit_once(" records after it")
        .and_then(|(l, _)| l.rsplit_once(' ')?.1.parse().ok())
        .unwrap_or_else(|| panic!("no lost count in {stderr}"));
    assert!(kept > 1000 && not > 0, "{stderr}");
    if perfaux_testutil::oracle("perf") {
        let home = tempfile::tempdir().unwrap();
        let r = perfaux_testutil::perf_on_file(&["report", "-D"], &data, false, home.path());
        assert_eq!(r.code, 0, "{}", r.stderr);
        // Every record written is read.
        let read = r
            .stdout
            .lines()
            .filter(|l| l.contains(" PERF_RECORD_"))
            .count() as u64;
        assert_eq!(read, kept, "perf reads every record written");
    }
}

/// The traced program goes on writing to the full disk after the trace filled it (here a
/// command after it, in the same shell, writes until the disk refuses): the room held for the
/// recording's end stays held until the end, so the recording is still written whole.
#[test]
fn the_program_filling_the_disk_leaves_the_room_for_the_end() {
    if !perfaux_testutil::oracle("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_fill");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let Some(_tmpfs) = Tmpfs::mount(&mnt, "8m") else {
        return;
    };
    let script = format!(
        "{} 0 27 nojmp; head -c 64M /dev/zero > {}",
        prog.display(),
        mnt.join("fill").display()
    );
    let out = Command::new(PERFAUX)
        .args(["record", "-o"])
        .arg(mnt.join("perf.data"))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("filled"), "{stderr}");
    let calls = call_trace(&mnt.join("perf.data"));
    assert_eq!(calls.first().map(String::as_str), Some("main"), "{stderr}");
    assert!(calls.len() > 100_000, "{} calls kept", calls.len());
}
