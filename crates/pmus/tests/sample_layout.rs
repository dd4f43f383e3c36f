//! PERF_RECORD_SAMPLE field order and contents for every sample_type bit
//! the software PMUs fill (perf_output_sample()'s order, as
//! include/uapi/linux/perf_event.h lists it), including READ with
//! PERF_FORMAT_GROUP and TIME from the attr's clock (use_clockid).

mod common;

use common::*;
use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::*;
use perfaux_core::{Prot, Target, perf_event_open_attr, perf_uevent};
use perfaux_pmus::UEVENT_TYPE;

#[test]
fn every_field_in_the_kernels_order() {
    perfaux_pmus::register();
    let me = Target::current();
    let mut leader = attr(UEVENT_TYPE, 300);
    leader.flags |= AttrFlags::USE_CLOCKID;
    leader.clockid = libc::CLOCK_MONOTONIC_RAW;
    let l = perf_event_open_attr(&leader, me, -1, -1, 0).unwrap();
    let mut s = sampling(UEVENT_TYPE, 301, 1);
    s.flags |= AttrFlags::USE_CLOCKID;
    s.clockid = libc::CLOCK_MONOTONIC_RAW;
    s.sample_type = PERF_SAMPLE_IDENTIFIER
        | PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ADDR
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_STREAM_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_PERIOD
        | PERF_SAMPLE_READ
        | PERF_SAMPLE_RAW;
    s.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED;
    let sm = perf_event_open_attr(&s, me, -1, l.as_raw(), 0).unwrap();
    let mut m = sm.mmap(0, 1 + 2, Prot::READ_WRITE).unwrap();
    l.enable(PERF_IOC_FLAG_GROUP).unwrap();
    perf_uevent(300, b"lead", 0).unwrap();
    perf_uevent(300, b"lead", 0).unwrap();
    let raw_ts = |c| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer.
        unsafe { libc::clock_gettime(c, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let before = raw_ts(libc::CLOCK_MONOTONIC_RAW);
    perf_uevent(301, b"abcdefghij", 0).unwrap();
    let after = raw_ts(libc::CLOCK_MONOTONIC_RAW);
    let recs = records(&mut m);
    assert_eq!(recs.len(), 1);
    let (h, b) = &recs[0];
    assert_eq!(h.type_, PERF_RECORD_SAMPLE);
    assert_eq!(h.misc, PERF_RECORD_MISC_USER);
    assert_eq!(h.size as usize, b.len());
    let id = sm.id();
    let mut at = 8;
    let mut next = || {
        let v = u64_at(b, at);
        at += 8;
        v
    };
    assert_eq!(next(), id, "IDENTIFIER first");
    assert_eq!(next(), 0, "IP: a uevent has no code address");
    let pidtid = next();
    assert_eq!(pidtid as u32, std::process::id());
    assert_eq!((pidtid >> 32) as i32, perfaux_core::gettid());
    let t = next();
    assert!(before <= t && t <= after, "TIME from CLOCK_MONOTONIC_RAW");
    assert_eq!(next(), 0, "ADDR");
    assert_eq!(next(), id, "ID");
    assert_eq!(next(), id, "STREAM_ID");
    let cpu = next();
    assert!((cpu as u32 as i32) < perfaux_core::nr_cpu_ids());
    assert_eq!(next(), 1, "PERIOD");
    // READ, GROUP: nr, time_enabled, {value, id} x nr
    assert_eq!(next(), 2, "nr: leader and member");
    let _enabled = next();
    assert_eq!(next(), 2, "leader's count");
    assert_eq!(next(), l.id());
    assert_eq!(next(), 1, "member's count");
    assert_eq!(next(), id);
    // RAW: u32 size (padded so that 4 + size is a multiple of 8), data, pad.
    let raw_size = u32_at(b, at) as usize;
    assert_eq!(raw_size, 12);
    assert_eq!(&b[at + 4..at + 14], b"abcdefghij");
    assert_eq!(&b[at + 14..at + 16], &[0, 0]);
    assert_eq!(at + 4 + raw_size, b.len());

    // perfaux-abi reads the same record the same way.
    let info = perfaux_abi::parse_info::RecordParseInfo::new(sm.event().attr());
    let body = perfaux_abi::raw::RawData::new(&b[8..], &[]);
    let r = perfaux_abi::sample::SampleRecord::parse(
        h.misc,
        body,
        &info,
        perfaux_abi::Endianness::NATIVE,
    )
    .unwrap();
    assert_eq!(r.identifier, Some(id));
    assert_eq!(r.time, Some(t));
    assert_eq!(r.period, Some(1));
    let read = r.read.unwrap();
    let values: Vec<(u64, Option<u64>)> = read.iter().map(|v| (v.value, v.id)).collect();
    assert_eq!(values, vec![(2, Some(l.id())), (1, Some(id))]);
    assert_eq!(r.raw.unwrap().to_vec()[..10], *b"abcdefghij");
}
