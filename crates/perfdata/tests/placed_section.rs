//! A section the caller writes in place while recording (`FeatureBody::Placed`, in the room
//! `finish_around` leaves between the attrs and the data): the final file (the writer's
//! output with the section put at its data offset) reads as the same recording written with
//! the section through the writer, for perfaux's reader and for perf 6.1, late ids and the
//! AUXTRACE index included.

mod common;

use std::io::Cursor;

use common::{have_perf, parse_perf_stats, perf_report_d, read_all_from, run_perf, synth};
use perfaux_abi::Endianness;
use perfaux_perfdata::trace_section::{AuxChunk, AuxData, ChunkKind, PERFAUX_FEATURE_BIT};
use perfaux_perfdata::{Feature, FeatureBody, PerfDataReader, PerfDataWriter};

/// A type perf 6.1 takes without its tracer's private data (writer_perf.rs says which).
const AUXTRACE_TYPE: u32 = perfaux_abi::consts::PERF_AUXTRACE_HISI_PTT;
const LATE_ID: u64 = 102;

fn writer(e: Endianness) -> PerfDataWriter<Cursor<Vec<u8>>> {
    let mut w =
        PerfDataWriter::new(Cursor::new(Vec::new()), synth::events(), synth::options(e)).unwrap();
    // An id added after the data began: its array goes after the features.
    w.add_ids(0, &[LATE_ID]).unwrap();
    for r in synth::records(e, AUXTRACE_TYPE) {
        w.write_record_with_payload(&r.bytes, &r.payload).unwrap();
    }
    w
}

fn section() -> Vec<u8> {
    AuxData {
        probe_table: b"SWTPROBE\x01\0\0\0\0".to_vec(),
        chunks: vec![AuxChunk {
            event_id: 100,
            cpu: u32::MAX,
            tid: synth::PID,
            aux_offset: 0,
            kind: ChunkKind::Trace,
            flags: 0,
            bytes: (0..100_003u32).map(|i| (i * 31 % 253) as u8).collect(),
        }],
    }
    .to_bytes_chunks_first()
}

/// The final file: the writer's output around the section placed at its data offset.
fn placed(e: Endianness) -> Vec<u8> {
    let sec = section();
    let w = writer(e);
    let at = w.data_offset();
    let room = sec.len() as u64;
    let body = FeatureBody::Placed {
        offset: at,
        len: room,
    };
    let out = w
        .finish_around(vec![(Feature(PERFAUX_FEATURE_BIT), body)], room)
        .unwrap()
        .into_inner();
    let at = at as usize;
    [&out[..at], &sec[..], &out[at..]].concat()
}

/// The same recording with the section written through the writer.
fn through_the_writer(e: Endianness) -> Vec<u8> {
    writer(e)
        .finish_with(vec![(
            Feature(PERFAUX_FEATURE_BIT),
            FeatureBody::Bytes(section()),
        )])
        .unwrap()
        .into_inner()
}

#[test]
fn a_placed_section_reads_as_the_section_written_through_the_writer() {
    for e in [Endianness::Little, Endianness::Big] {
        let (got, want) = (placed(e), through_the_writer(e));
        let read = |b: Vec<u8>| {
            let r = PerfDataReader::new(Cursor::new(b)).unwrap();
            let sec = r.metadata().features.location(Feature(PERFAUX_FEATURE_BIT));
            (read_all_from(r), sec)
        };
        let (got_all, got_sec) = read(got.clone());
        let (want_all, _) = read(want);
        assert!(got_all.error.is_none(), "{e:?}: {:?}", got_all.error);
        // The records and AUXTRACE payloads are the same, each `room` bytes further.
        let room = section().len() as u64;
        assert_eq!(got_all.counts, want_all.counts, "{e:?}");
        assert_eq!(
            got_all.auxtrace_payloads, want_all.auxtrace_payloads,
            "{e:?}"
        );
        let types = |a: &common::ReadAll| a.records.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>();
        assert_eq!(types(&got_all), types(&want_all), "{e:?}");
        let start = |a: &common::ReadAll| a.records[0].0;
        assert_eq!(
            start(&got_all),
            start(&want_all) + room,
            "{e:?}: the data's first record, after the section"
        );
        // The event ids, the late one included, as the attrs name them.
        let ids: Vec<Vec<u64>> = got_all.meta.attrs.iter().map(|a| a.ids.clone()).collect();
        let want_ids: Vec<Vec<u64>> = want_all.meta.attrs.iter().map(|a| a.ids.clone()).collect();
        assert_eq!(ids, want_ids, "{e:?}");
        assert!(ids[0].contains(&LATE_ID), "{e:?}: {ids:?}");
        // The section is where it was placed, and reads whole.
        let sec = got_sec.expect("the placed section's location");
        assert_eq!(sec.size, room, "{e:?}");
        assert_eq!(
            &got[sec.offset as usize..(sec.offset + sec.size) as usize],
            &section()[..]
        );
        let parsed = AuxData::parse(&section(), sec.offset).unwrap();
        assert_eq!(parsed.chunks[0].bytes.len(), 100_003);
    }
}

#[test]
fn perf_reads_a_file_with_a_placed_section() {
    if !have_perf() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for e in [Endianness::Little, Endianness::Big] {
        let path = dir.path().join(format!("placed-{e:?}.data"));
        std::fs::write(&path, placed(e)).unwrap();
        let want_path = dir.path().join(format!("through-{e:?}.data"));
        std::fs::write(&want_path, through_the_writer(e)).unwrap();
        let (ok, out, err) = perf_report_d(&path, false);
        assert!(ok, "{e:?}: perf report -D failed: {err}");
        assert_eq!(
            common::unexpected_stderr(&err),
            Vec::<String>::new(),
            "{e:?}"
        );
        let (_, want_out, _) = perf_report_d(&want_path, false);
        assert_eq!(
            parse_perf_stats(&out),
            parse_perf_stats(&want_out),
            "{e:?}: perf report -D counts"
        );
        // perf reads the data section where the header says, and finds each AUXTRACE
        // through the index at its moved offset.
        let room = section().len() as u64;
        let auxtrace = common::perf_auxtrace_lines(&out);
        let mut want = common::perf_auxtrace_lines(&want_out);
        for l in &mut want {
            l.0 += room;
        }
        assert_eq!(auxtrace, want, "{e:?}: AUXTRACE records at their offsets");
        assert!(!auxtrace.is_empty(), "{e:?}");
        let (ok, header, err) = run_perf(&["report", "--header-only"], &path, false);
        assert!(ok, "{e:?}: {err}");
        assert!(
            header.contains(&format!("id = {{ 100, 101, {LATE_ID} }}")),
            "{e:?}: the late id from its moved array:\n{header}"
        );
    }
}
