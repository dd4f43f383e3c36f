//! Any bytes through the whole path a perf.data takes in `perfaux`: the
//! reader (file and pipe mode), the trace-section parser, `script` with its
//! ordering and `--call-trace` decoding, and `report -D`, with the CLI's own
//! limits (ReaderOptions::default, the same 1 GiB payload cap `perfaux`
//! allows). Run with an RSS limit so memory is part of the check:
//!   cargo +nightly fuzz run whole_path seeds/ ../../../testdata/perf_data \
//!       ../../../testdata/intel_pt ../../../testdata/simpleperf_etm -- -rss_limit_mb=256
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use perfaux::progress::Progress;

fuzz_target!(|data: &[u8]| {
    // The CLI reads paths (and stdin); a file in memory-backed /dev/shm
    // gives it one without touching a disk.
    let mut f = tempfile::Builder::new()
        .suffix(".data")
        .tempfile_in("/dev/shm")
        .expect("temp file");
    f.write_all(data).expect("write");
    let path = f.path();
    let mut sink = std::io::sink();
    for call_trace in [false, true] {
        let _ = perfaux::script::script(path, call_trace, &mut sink, &mut Progress::quiet());
    }
    let _ = perfaux::dump::dump(path, "fuzz", &mut sink, &mut Progress::quiet());
});
