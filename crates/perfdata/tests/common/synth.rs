//! A synthetic recording: two events (a cpu-clock sampler and a dummy
//! sideband event) and one record of every kind perf writes around AUX
//! tracing, built with perfaux-abi and written with perfaux's writers.

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::raw::RawData;
use perfaux_abi::records::{
    AuxRecord, CommRecord, EncodeRecord, ItraceStartRecord, LostRecord, MmapRecord,
};
use perfaux_abi::sample::SampleRecord;
use perfaux_abi::sample_id::{CpuRes, PidTid, SampleId};
use perfaux_abi::user::*;
use perfaux_perfdata::{HostInfo, PerfDataWriter, PerfPipeWriter, WriterEvent, WriterOptions};
use std::collections::BTreeMap;
use std::io::Cursor;

pub const PID: u32 = 4242;
pub const SAMPLES: u64 = 20;

pub fn events() -> Vec<WriterEvent> {
    let clock = PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period: 10000,
        sample_type: PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD,
        flags: AttrFlags::SAMPLE_ID_ALL | AttrFlags::DISABLED | AttrFlags::ENABLE_ON_EXEC,
        ..Default::default()
    };
    let dummy = PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_DUMMY,
        sample_period: 1,
        sample_type: PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU,
        flags: AttrFlags::SAMPLE_ID_ALL
            | AttrFlags::MMAP
            | AttrFlags::COMM
            | AttrFlags::TASK
            | AttrFlags::EXCLUDE_KERNEL,
        ..Default::default()
    };
    vec![
        WriterEvent {
            attr: clock,
            ids: vec![100, 101],
            name: "cpu-clock".into(),
        },
        WriterEvent {
            attr: dummy,
            ids: vec![200, 201],
            name: "dummy:u".into(),
        },
    ]
}

pub fn options(endian: Endianness) -> WriterOptions {
    let mut o = WriterOptions::new(HostInfo::fixed());
    o.endian = endian;
    o
}

/// One record to write: bytes and payload.
pub struct Rec {
    pub bytes: Vec<u8>,
    pub payload: Vec<u8>,
}

fn sid(id: u64, time: u64, cpu: u32) -> SampleId {
    SampleId {
        tid: Some(PidTid { pid: PID, tid: PID }),
        time: Some(time),
        cpu: Some(CpuRes { cpu, res: 0 }),
        identifier: Some(id),
        ..Default::default()
    }
}

/// The records of the recording, in file order; the AUXTRACE_INFO type is
/// a parameter (see the writer test for why).
pub fn records(e: Endianness, auxtrace_type: u32) -> Vec<Rec> {
    let evs = events();
    let clock = RecordParseInfo::new(&evs[0].attr);
    let dummy = RecordParseInfo::new(&evs[1].attr);
    let mut out = Vec::new();
    let mut push = |bytes: Vec<u8>| {
        out.push(Rec {
            bytes,
            payload: Vec::new(),
        })
    };
    let mut v = Vec::new();
    TimeConvRecord {
        time_shift: 10,
        time_mult: 1 << 10,
        time_zero: 0,
        ext: Some(TimeConvExt {
            time_cycles: 0,
            time_mask: 0,
            cap_user_time_zero: 1,
            cap_user_time_short: 0,
            reserved: [0; 6],
        }),
    }
    .write(&mut v, e);
    push(std::mem::take(&mut v));
    AuxtraceInfoRecord {
        type_: auxtrace_type,
        reserved: 0,
        priv_: vec![0; 4],
    }
    .write(&mut v, e)
    .unwrap();
    push(std::mem::take(&mut v));
    IdIndexRecord {
        entries: [(100, 0, 0), (101, 1, 1), (200, 0, 0), (201, 1, 1)]
            .iter()
            .map(|&(id, idx, cpu)| IdIndexEntry {
                id,
                idx,
                cpu,
                tid: u64::MAX,
                guest: None,
            })
            .collect(),
    }
    .write(&mut v, e)
    .unwrap();
    push(std::mem::take(&mut v));
    push(
        CommRecord {
            misc: 0,
            pid: PID,
            tid: PID,
            comm: RawData::new(b"perfaux-synth", &[]),
            sample_id: sid(200, 1000, 0),
        }
        .to_vec(&dummy, e)
        .unwrap(),
    );
    push(
        MmapRecord {
            misc: PERF_RECORD_MISC_USER,
            pid: PID,
            tid: PID,
            addr: 0x400000,
            len: 0x1000,
            pgoff: 0,
            filename: RawData::new(b"/perfaux/synth", &[]),
            sample_id: sid(200, 1100, 0),
        }
        .to_vec(&dummy, e)
        .unwrap(),
    );
    FinishedInitRecord.write(&mut v, e);
    push(std::mem::take(&mut v));
    push(
        ItraceStartRecord {
            misc: 0,
            pid: PID,
            tid: PID,
            sample_id: sid(100, 1200, 0),
        }
        .to_vec(&clock, e)
        .unwrap(),
    );
    for i in 0..SAMPLES {
        let s = SampleRecord {
            misc: PERF_RECORD_MISC_USER,
            identifier: Some(100 + i % 2),
            ip: Some(0x400100 + 8 * i),
            tid: Some(PidTid { pid: PID, tid: PID }),
            time: Some(2000 + 100 * i),
            cpu: Some(CpuRes {
                cpu: (i % 2) as u32,
                res: 0,
            }),
            period: Some(10000),
            ..Default::default()
        };
        push(s.to_vec(&clock, e).unwrap());
        if i == SAMPLES / 2 {
            FinishedRoundRecord.write(&mut v, e);
            push(std::mem::take(&mut v));
        }
    }
    push(
        AuxRecord {
            misc: 0,
            aux_offset: 0,
            aux_size: 64,
            flags: 0,
            sample_id: sid(100, 5000, 0),
        }
        .to_vec(&clock, e)
        .unwrap(),
    );
    push(
        LostRecord {
            misc: 0,
            id: 100,
            lost: 3,
            sample_id: sid(100, 5100, 0),
        }
        .to_vec(&clock, e)
        .unwrap(),
    );
    AuxtraceRecord::for_payload(64, 0, 5000, 0, PID, 0).write(&mut v, e);
    push(std::mem::take(&mut v));
    FinishedRoundRecord.write(&mut v, e);
    push(std::mem::take(&mut v));
    // The AUX data: 64 bytes, as the AUX record above announced.
    let aux = out
        .iter_mut()
        .find(|r| e.u32(r.bytes[..4].try_into().unwrap()) == PERF_RECORD_AUXTRACE);
    aux.unwrap().payload = (0..64u8).collect();
    out
}

pub fn counts(recs: &[Rec], e: Endianness) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for r in recs {
        let t = e.u32(r.bytes[..4].try_into().unwrap());
        *m.entry(t).or_insert(0) += 1;
    }
    m
}

pub fn write_file(e: Endianness, auxtrace_type: u32) -> Vec<u8> {
    let mut w = PerfDataWriter::new(Cursor::new(Vec::new()), events(), options(e)).unwrap();
    for r in records(e, auxtrace_type) {
        w.write_record_with_payload(&r.bytes, &r.payload).unwrap();
    }
    w.finish().unwrap().into_inner()
}

pub fn write_pipe(e: Endianness, auxtrace_type: u32) -> Vec<u8> {
    let mut w = PerfPipeWriter::new(Vec::new(), events(), options(e)).unwrap();
    for r in records(e, auxtrace_type) {
        w.write_record_with_payload(&r.bytes, &r.payload).unwrap();
    }
    w.finish().unwrap()
}
