//! What the recorder's integration tests share: a recording of the calling thread's swtrace
//! probes, and perf 6.1's reading of the file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use perfaux_perfdata::record_attrs::base_attr;
use perfaux_recorder::{EventSpec, Output, Recorder, RecorderOptions, pmus};

/// A recording of this thread's swtrace probes into `dir/name`, with `aux_size` bytes of AUX
/// area (64 KiB of data area), not yet enabled.
pub fn swtrace_recorder(dir: &Path, name: &str, aux_size: u64) -> (PathBuf, Recorder) {
    swtrace_recorder_with(dir, name, aux_size, false)
}

/// [`swtrace_recorder`], the AUX area in overwrite mode (a flight recorder) if `overwrite`.
pub fn swtrace_recorder_with(
    dir: &Path,
    name: &str,
    aux_size: u64,
    overwrite: bool,
) -> (PathBuf, Recorder) {
    let out = dir.join(name);
    let me = perfaux_core::gettid();
    let trace = EventSpec::new("swtrace//", base_attr(pmus::SWTRACE_TYPE, 0), 0);
    let opts = RecorderOptions {
        data_size: 64 << 10,
        aux_size,
        overwrite,
    };
    let rec = Recorder::new(vec![trace], opts, &[me], Output::File(out.clone())).unwrap();
    (out, rec)
}

/// `perf report -D` of `file`, which must succeed and say nothing on stderr; its stdout.
pub fn perf_report_d(file: &Path, home: &Path) -> String {
    let o = std::process::Command::new("perf")
        .args(["report", "-D", "-i"])
        .arg(file)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `work` on a new thread added to `rec` (its events opened before it runs), waits for
/// it to exit, and returns its tid.
pub fn thread_that_exits(rec: &mut Recorder, work: impl FnOnce() + Send + 'static) -> i32 {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        tid_tx.send(perfaux_core::gettid()).unwrap();
        go_rx.recv().unwrap();
        work();
    });
    let tid = tid_rx.recv().unwrap();
    rec.add_thread(tid).unwrap();
    go_tx.send(()).unwrap();
    t.join().unwrap();
    tid
}

/// Each decode window of the trace section of `file`: its thread and its events.
pub fn windows_by_thread(file: &Path) -> Vec<(u32, Vec<perfaux_swtrace::Event>)> {
    use std::io::Read;
    let reader = perfaux_perfdata::PerfDataReader::open(file).unwrap();
    let section = reader.trace_section().expect("trace section").unwrap();
    section
        .windows()
        .map(|w| {
            let w = w.unwrap();
            let mut bytes = Vec::new();
            section.window_bytes(&w).read_to_end(&mut bytes).unwrap();
            (w.first.header.tid, perfaux_swtrace::decode(&bytes))
        })
        .collect()
}
