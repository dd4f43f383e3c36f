//! Any bytes as a perf.data file (seekable) and as a pipe (a stream): the
//! reader must return records or an error, never panic, loop or allocate
//! from an unchecked size field. Every record is also parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfaux_perfdata::{PerfDataReader, ReaderOptions};
use std::io::{Cursor, Read};

fn drain<R: Read>(mut r: PerfDataReader<R>) {
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                let _ = rec.parse();
                let _ = rec.user_record();
            }
            Ok(None) | Err(_) => break,
        }
    }
    let m = r.metadata();
    let f = &m.features;
    let _ = (
        f.event_desc(),
        f.cmdline(),
        f.auxtrace_index(),
        f.group_desc(),
        f.pmu_mappings(),
    );
}

fuzz_target!(|data: &[u8]| {
    // The limits `perfaux` itself reads with (a 1 GiB payload cap): the
    // reader must stay bounded by its own checks, not by a smaller cap here.
    let opts = ReaderOptions::default();
    if let Ok(r) = PerfDataReader::with_options(Cursor::new(data), opts) {
        drain(r);
    }
    if let Ok(r) = PerfDataReader::from_stream(data, opts) {
        drain(r);
    }
});
