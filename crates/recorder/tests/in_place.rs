//! The trace is written once, in place: its section (feature 250, chunks first) lies right
//! after the attrs, the data section right after it, and the file reads whole (perfaux's
//! reader and perf 6.1).

mod common;

use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_perfdata::{DataFormat, Feature, PerfDataReader};

fn work(n: u32) -> u32 {
    let _probe = perfaux_swtrace::probe!("in_place_work");
    if n == 0 { 0 } else { 1 + work(n - 1) }
}

#[test]
fn the_trace_section_lies_between_the_attrs_and_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let (out, mut rec) = common::swtrace_recorder(dir.path(), "in-place.data", 64 << 10);
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
    let stdout = common::perf_report_d(&out, dir.path());
    let aux = stdout
        .lines()
        .filter(|l| l.contains("PERF_RECORD_AUX "))
        .count();
    assert!(aux >= 20, "{aux} PERF_RECORD_AUX records");
}
