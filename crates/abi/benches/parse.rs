//! Parsing a buffer of PERF_RECORD_SAMPLE records (IP|TID|TIME|ID|CPU|PERIOD,
//! the shape of `perf record` samples), against:
//! - a baseline of plain u64 loads of the same bytes (the floor: what any
//!   parser must at least read), and
//! - the peer, linux-perf-event-reader (the parser under linux-perf-data).
//!
//! Every variant folds the same six fields into a checksum, so none can skip
//! work the others do.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use linux_perf_data::linux_perf_event_reader as peer;
use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{EncodeRecord, Record};
use perfaux_abi::sample::SampleRecord;
use perfaux_abi::sample_id::{CpuRes, PidTid};
use perfaux_abi::{Endianness, PerfEventHeader};

const SAMPLE_TYPE: u64 = PERF_SAMPLE_IP
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_ID
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_PERIOD;
const RECORDS: usize = 16 * 1024;

fn attr() -> PerfEventAttr {
    PerfEventAttr {
        sample_type: SAMPLE_TYPE,
        ..Default::default()
    }
}

fn buffer(info: &RecordParseInfo) -> Vec<u8> {
    let mut buf = Vec::new();
    for i in 0..RECORDS as u64 {
        let s = SampleRecord {
            misc: PERF_RECORD_MISC_USER,
            ip: Some(0x40_0000 + i * 4),
            tid: Some(PidTid {
                pid: 100,
                tid: 100 + (i as u32 & 3),
            }),
            time: Some(1_000_000 + i * 1000),
            id: Some(7),
            cpu: Some(CpuRes {
                cpu: (i & 1) as u32,
                res: 0,
            }),
            period: Some(4000),
            ..Default::default()
        };
        s.write(info, Endianness::Little, &mut buf).expect("fits");
    }
    buf
}

/// The six fields as (ip, pid, tid, time, id, cpu, period).
type Fields = (u64, u32, u32, u64, u64, u32, u64);

#[inline]
fn fold(acc: u64, (ip, pid, tid, time, id, cpu, period): Fields) -> u64 {
    acc.wrapping_mul(31)
        .wrapping_add(ip ^ time ^ id ^ period)
        .wrapping_add(u64::from(pid) ^ u64::from(tid) ^ u64::from(cpu))
}

fn u64_loads(buf: &[u8]) -> u64 {
    let word = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap());
    let (mut off, mut acc) = (0, 0u64);
    while off + 8 <= buf.len() {
        let size = usize::from(u16::from_le_bytes([buf[off + 6], buf[off + 7]]));
        let b = off + 8;
        let pidtid = word(b + 8);
        let cpu = word(b + 32);
        let fields = (
            word(b),
            pidtid as u32,
            (pidtid >> 32) as u32,
            word(b + 16),
            word(b + 24),
            cpu as u32,
            word(b + 40),
        );
        acc = fold(acc, fields);
        off += size;
    }
    acc
}

fn fold_sample(acc: u64, s: &SampleRecord<'_>) -> u64 {
    let t = s.tid.unwrap_or_default();
    fold(
        acc,
        (
            s.ip.unwrap_or(0),
            t.pid,
            t.tid,
            s.time.unwrap_or(0),
            s.id.unwrap_or(0),
            s.cpu.unwrap_or_default().cpu,
            s.period.unwrap_or(0),
        ),
    )
}

fn perfaux_records(data: RawData<'_>, info: &RecordParseInfo) -> u64 {
    let (mut rest, mut acc) = (data, 0u64);
    while !rest.is_empty() {
        let Ok((h, body, next)) = Record::split_record(rest, Endianness::Little) else {
            break;
        };
        let rec = Record::parse(h.type_, h.misc, body, info, Endianness::Little);
        if let Ok(Record::Sample(s)) = &rec {
            acc = fold_sample(acc, s);
        }
        rest = next;
    }
    acc
}

fn perfaux_records_headers(buf: &[u8], info: &RecordParseInfo) -> u64 {
    let (mut off, mut acc) = (0, 0u64);
    while off + 8 <= buf.len() {
        let h = PerfEventHeader::parse(buf[off..off + 8].try_into().unwrap(), Endianness::Little);
        let end = off + usize::from(h.size);
        let body = RawData::Single(&buf[off + 8..end]);
        let rec = Record::parse(h.type_, h.misc, body, info, Endianness::Little);
        if let Ok(Record::Sample(s)) = &rec {
            acc = fold_sample(acc, s);
        }
        off = end;
    }
    acc
}

fn perfaux_samples(buf: &[u8], info: &RecordParseInfo) -> u64 {
    let (mut off, mut acc) = (0, 0u64);
    while off + 8 <= buf.len() {
        let h = PerfEventHeader::parse(buf[off..off + 8].try_into().unwrap(), Endianness::Little);
        let end = off + usize::from(h.size);
        let body = RawData::Single(&buf[off + 8..end]);
        let s = SampleRecord::parse(h.misc, body, info, Endianness::Little).expect("valid");
        acc = fold_sample(acc, &s);
        off = end;
    }
    acc
}

fn peer_samples(buf: &[u8], info: &peer::RecordParseInfo) -> u64 {
    let (mut off, mut acc) = (0, 0u64);
    while off + 8 <= buf.len() {
        let misc = u16::from_le_bytes([buf[off + 4], buf[off + 5]]);
        let end = off + usize::from(u16::from_le_bytes([buf[off + 6], buf[off + 7]]));
        let body = peer::RawData::from(&buf[off + 8..end]);
        let raw = peer::RawEventRecord::new(peer::RecordType::SAMPLE, misc, body, *info);
        if let Ok(peer::EventRecord::Sample(s)) = raw.parse() {
            acc = fold(
                acc,
                (
                    s.ip.unwrap_or(0),
                    s.pid.unwrap_or(0) as u32,
                    s.tid.unwrap_or(0) as u32,
                    s.timestamp.unwrap_or(0),
                    s.id.unwrap_or(0),
                    s.cpu.unwrap_or(0),
                    s.period.unwrap_or(0),
                ),
            );
        }
        off = end;
    }
    acc
}

fn peer_info() -> peer::RecordParseInfo {
    let bytes = attr().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::Little);
    let (attr, _) =
        peer::PerfEventAttr::parse::<_, byteorder::LittleEndian>(&bytes[..]).expect("attr");
    peer::RecordParseInfo::new(&attr, peer::Endianness::LittleEndian)
}

fn bench(c: &mut Criterion) {
    let info = RecordParseInfo::new(&attr());
    let buf = buffer(&info);
    let pinfo = peer_info();
    let want = u64_loads(&buf);
    assert_eq!(perfaux_samples(&buf, &info), want);
    assert_eq!(perfaux_records(RawData::Single(&buf), &info), want);
    assert_eq!(peer_samples(&buf, &pinfo), want);
    assert_eq!(perfaux_records_headers(&buf, &info), want);
    // Split where a ring wraps: mid-record, at an odd byte.
    let mid = buf.len() / 2 + 13;
    let split = RawData::new(&buf[..mid], &buf[mid..]);
    assert_eq!(perfaux_records(split, &info), want);

    let mut g = c.benchmark_group("parse_16k_samples");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    g.bench_function("baseline_u64_loads", |b| {
        b.iter(|| u64_loads(black_box(&buf)))
    });
    g.bench_function("perfaux_sample_parse", |b| {
        b.iter(|| perfaux_samples(black_box(&buf), &info))
    });
    g.bench_function("perfaux_record_parse", |b| {
        b.iter(|| perfaux_records(black_box(RawData::Single(&buf)), &info))
    });
    g.bench_function("perfaux_record_parse_from_header", |b| {
        b.iter(|| perfaux_records_headers(black_box(&buf), &info))
    });
    g.bench_function("perfaux_record_parse_split", |b| {
        b.iter(|| perfaux_records(black_box(split), &info))
    });
    g.bench_function("peer_linux_perf_event_reader", |b| {
        b.iter(|| peer_samples(black_box(&buf), &pinfo))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
