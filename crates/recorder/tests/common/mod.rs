//! What the recorder's integration tests share: a recording of the calling thread's swtrace
//! probes, and perf 6.1's reading of the file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use perfaux_perfdata::record_attrs::base_attr;
use perfaux_recorder::{EventSpec, Output, Recorder, RecorderOptions, pmus};

/// A recording of this thread's swtrace probes into `dir/name`, with `aux_size` bytes of AUX
/// area (64 KiB of data area), not yet enabled.
pub fn swtrace_recorder(dir: &Path, name: &str, aux_size: u64) -> (PathBuf, Recorder) {
    let out = dir.join(name);
    let me = perfaux_core::gettid();
    let trace = EventSpec::new("swtrace//", base_attr(pmus::SWTRACE_TYPE, 0), 0);
    let opts = RecorderOptions {
        data_size: 64 << 10,
        aux_size,
        overwrite: false,
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
