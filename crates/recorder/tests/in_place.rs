//! The trace is written once, in place: its section (feature 250, chunks first) lies right
//! after the attrs, the data section right after it, and the file reads whole (perfaux's
//! reader and perf 6.1).

use perfaux_perfdata::record_attrs::base_attr;
use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_perfdata::{DataFormat, Feature, PerfDataReader};
use perfaux_recorder::{EventSpec, Output, Recorder, RecorderOptions, pmus};

fn work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("in_place_work");
    if n == 0 { 0 } else { 1 + work(n - 1) }
}

#[test]
fn the_trace_section_lies_between_the_attrs_and_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("in-place.data");
    let me = perfaux_core::thread::gettid();
    let trace = EventSpec::new("swtrace//", base_attr(pmus::SWTRACE_TYPE, 0), 0);
    let opts = RecorderOptions {
        data_size: 64 << 10,
        aux_size: 64 << 10,
        overwrite: false,
    };
    let mut rec = Recorder::new(vec![trace], opts, &[me], Output::File(out.clone())).unwrap();
    rec.enable().unwrap();
    // Several drains: several chunks, each written where the last ended.
    for _ in 0..20 {
        for _ in 0..200 {
            std::hint::black_box(work(std::hint::black_box(30)));
        }
        rec.drain().unwrap();
    }
    let s = rec.finish().unwrap();
    assert!(s.aux_bytes > 20 * 200 * 31 * 2, "{} bytes", s.aux_bytes);

    let mut reader = PerfDataReader::open(&out).unwrap();
    let DataFormat::File(h) = reader.metadata().format else {
        panic!("a file-mode perf.data");
    };
    let sec = reader
        .metadata()
        .features
        .location(Feature(PERFAUX_FEATURE_BIT))
        .expect("the trace section");
    assert_eq!(
        sec.offset,
        h.attrs.offset + h.attrs.size,
        "right after the attrs"
    );
    assert_eq!(
        h.data.offset,
        sec.offset + sec.size,
        "the data right after it"
    );
    assert_eq!(std::fs::metadata(&out).unwrap().len(), s.file_size);
    let section = reader.trace_section().expect("trace section").unwrap();
    let chunks: Vec<_> = section.chunks().map(Result::unwrap).collect();
    assert!(chunks.len() >= 20, "{} chunks", chunks.len());
    assert_eq!(chunks.iter().map(|c| c.size).sum::<u64>(), s.aux_bytes);
    // Each chunk continues the last one's stream.
    for w in chunks.windows(2) {
        assert_eq!(w[1].header.aux_offset, w[0].header.aux_offset + w[0].size);
    }
    assert!(section.probe_table().starts_with(b"SWTPROBE"));
    let mut records = 0;
    while let Some(r) = reader.next_record().unwrap() {
        assert!(r.location.file_offset >= h.data.offset);
        records += 1;
    }
    assert_eq!(records, s.records);
    perfaux_testutil::require_oracle!("perf");
    let o = std::process::Command::new("perf")
        .args(["report", "-D", "-i"])
        .arg(&out)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let aux = stdout
        .lines()
        .filter(|l| l.contains("PERF_RECORD_AUX "))
        .count();
    assert!(aux >= 20, "{aux} PERF_RECORD_AUX records");
}
