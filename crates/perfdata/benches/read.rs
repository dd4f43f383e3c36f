//! Reading every record of a perf.data file: perfaux's reader against the
//! linux-perf-data crate, same bytes, same run.
//!
//! The file is recorded by perf on the machine running the bench, in a temporary directory
//! (`perf record -e cpu-clock -F 10000 -g` over a busy shell loop); without
//! perf, one of similar shape is written with perfaux's writer. Both
//! readers get the bytes from memory (a `Cursor`), so the figures are
//! parsing, not I/O.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfaux_perfdata::PerfDataReader;
use std::hint::black_box;
use std::io::Cursor;
use std::process::{Command, Stdio};

fn perf_recorded() -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().ok()?;
    let out = dir.path().join("bench.data");
    let ok = Command::new("perf")
        .args(["record", "-e", "cpu-clock", "-F", "10000", "-g", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    std::fs::read(out).ok()
}

/// Without perf: 200k samples with 16-deep callchains, written by perfaux.
fn synthesized() -> Vec<u8> {
    use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
    use perfaux_abi::consts::*;
    use perfaux_abi::parse_info::RecordParseInfo;
    use perfaux_abi::records::EncodeRecord;
    use perfaux_abi::sample::SampleRecord;
    use perfaux_abi::sample_id::{CpuRes, PidTid};
    use perfaux_perfdata::{HostInfo, PerfDataWriter, WriterEvent, WriterOptions};
    let attr = PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period: 10000,
        sample_type: PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD,
        flags: AttrFlags::SAMPLE_ID_ALL,
        ..Default::default()
    };
    let info = RecordParseInfo::new(&attr);
    let ev = WriterEvent {
        attr,
        ids: vec![1, 2],
        name: "cpu-clock".into(),
    };
    let mut w = PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![ev],
        WriterOptions::new(HostInfo::fixed()),
    )
    .unwrap();
    for i in 0..200_000u64 {
        let s = SampleRecord {
            identifier: Some(1 + i % 2),
            ip: Some(0x400000 + i),
            tid: Some(PidTid { pid: 1, tid: 1 }),
            time: Some(i * 100),
            cpu: Some(CpuRes {
                cpu: (i % 2) as u32,
                res: 0,
            }),
            period: Some(10000),
            ..Default::default()
        };
        w.write_record(&s.to_vec(&info, w.endian()).unwrap())
            .unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn perfaux_read_all(bytes: &[u8]) -> (u64, u64) {
    let mut r = PerfDataReader::new(Cursor::new(bytes)).unwrap();
    let (mut n, mut sum) = (0u64, 0u64);
    while let Some(rec) = r.next_record().unwrap() {
        n += 1;
        sum += u64::from(rec.header.type_) + rec.attr_index.unwrap_or(0) as u64;
    }
    (n, sum)
}

fn linux_perf_data_read_all(bytes: &[u8]) -> (u64, u64) {
    use linux_perf_data::{PerfFileReader, PerfFileRecord};
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(Cursor::new(bytes)).unwrap();
    let (mut n, mut sum) = (0u64, 0u64);
    while let Some(rec) = record_iter.next_record(&mut perf_file).unwrap() {
        n += 1;
        sum += match rec {
            PerfFileRecord::EventRecord { attr_index, record } => {
                u64::from(record.record_type.0) + attr_index as u64
            }
            PerfFileRecord::UserRecord(u) => u64::from(
                linux_perf_data::linux_perf_event_reader::RecordType::from(u.record_type).0,
            ),
        };
    }
    (n, sum)
}

fn bench(c: &mut Criterion) {
    let (bytes, source) = match perf_recorded() {
        Some(b) => (b, "perf record -e cpu-clock -F 10000 -g"),
        None => (synthesized(), "synthesized by perfaux's writer"),
    };
    let (ours, theirs) = (perfaux_read_all(&bytes), linux_perf_data_read_all(&bytes));
    // linux-perf-data keeps FINISHED_ROUND to itself; every other record is in both.
    eprintln!(
        "bench file: {} bytes ({source}); records: perfaux {}, linux-perf-data {}",
        bytes.len(),
        ours.0,
        theirs.0
    );
    let mut g = c.benchmark_group("read_all_records");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("perfaux", |b| {
        b.iter(|| black_box(perfaux_read_all(black_box(&bytes))))
    });
    g.bench_function("linux-perf-data", |b| {
        b.iter(|| black_box(linux_perf_data_read_all(black_box(&bytes))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
