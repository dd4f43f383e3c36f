//! Round trips (parse ∘ write = id, in both byte orders) and layout checks
//! against the byte offsets of tools/lib/perf/include/perf/event.h.

use super::*;
use crate::attr::PerfEventAttr;
use crate::consts::*;
use crate::endian::Endianness;
use proptest::prelude::*;

const BOTH: [Endianness; 2] = [Endianness::Little, Endianness::Big];

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

#[test]
fn auxtrace_is_48_bytes_and_payload_is_outside_header_size() {
    let r = AuxtraceRecord::for_payload(13, 0x1000, 7, 2, 100, 3);
    assert_eq!(r.size, 16, "payload length padded to 8");
    let mut v = Vec::new();
    r.write_with_payload(&mut v, Endianness::Little, &[0xab; 13])
        .unwrap();
    assert_eq!(v.len(), 48 + 16);
    assert_eq!(le_u32(&v, 0), PERF_RECORD_AUXTRACE);
    assert_eq!(le_u16(&v, 6), 48, "header.size excludes the payload");
    assert_eq!(
        (le_u64(&v, 8), le_u64(&v, 16), le_u64(&v, 24)),
        (16, 0x1000, 7)
    );
    assert_eq!(
        (le_u32(&v, 32), le_u32(&v, 36), le_u32(&v, 40)),
        (2, 100, 3)
    );
    assert_eq!(&v[48..61], &[0xab; 13]);
    assert_eq!(&v[61..], &[0, 0, 0]);
    assert_eq!(
        AuxtraceRecord::parse(&v[..48], Endianness::Little).unwrap(),
        r
    );
    // A payload that size does not describe is refused.
    assert!(
        r.write_with_payload(&mut Vec::new(), Endianness::Little, &[0; 17])
            .is_err()
    );
    assert!(
        r.write_with_payload(&mut Vec::new(), Endianness::Little, &[0; 8])
            .is_err()
    );
}

#[test]
fn time_conv_reads_both_sizes() {
    let mut v = Vec::new();
    let old = TimeConvRecord {
        time_shift: 10,
        time_mult: 20,
        time_zero: 30,
        ext: None,
    };
    old.write(&mut v, Endianness::Little);
    assert_eq!(v.len(), 32);
    assert_eq!(le_u16(&v, 6), 32);
    assert_eq!(TimeConvRecord::parse(&v, Endianness::Little).unwrap(), old);
    let new = TimeConvRecord {
        ext: Some(TimeConvExt {
            time_cycles: 1,
            time_mask: 2,
            cap_user_time_zero: 1,
            cap_user_time_short: 0,
            reserved: [0; 6],
        }),
        ..old
    };
    v.clear();
    new.write(&mut v, Endianness::Little);
    assert_eq!(v.len(), 56);
    assert_eq!((le_u64(&v, 32), le_u64(&v, 40), v[48]), (1, 2, 1));
    assert_eq!(TimeConvRecord::parse(&v, Endianness::Little).unwrap(), new);
}

#[test]
fn compressed2_pads_to_8_and_keeps_data_size() {
    let data = [1u8, 2, 3, 4, 5];
    let r = Compressed2Record { data: &data };
    let mut v = Vec::new();
    r.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 24);
    assert_eq!((le_u16(&v, 6), le_u64(&v, 8)), (24, 5));
    assert_eq!(Compressed2Record::parse(&v, Endianness::Little).unwrap(), r);
    // data_size larger than the record: refused, not read past the end.
    v[8] = 200;
    assert!(matches!(
        Compressed2Record::parse(&v, Endianness::Little),
        Err(UserRecordError::Invalid { offset: 8, .. })
    ));
    // COMPRESSED (81) is not padded.
    let mut v = Vec::new();
    CompressedRecord { data: &data }
        .write(&mut v, Endianness::Little)
        .unwrap();
    assert_eq!((v.len(), le_u16(&v, 6)), (13, 13));
}

#[test]
fn cpu_map_packed_offsets() {
    // MASK with 64-bit words: 4 pad bytes, mask at data offset 10 (record 18).
    let r = CpuMapRecord {
        data: CpuMapData::Mask {
            long_size: 8,
            mask: vec![0b1011],
        },
    };
    let mut v = Vec::new();
    r.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 32, "8 + 10 + 8 padded to 8");
    assert_eq!((le_u16(&v, 8), le_u16(&v, 10), le_u16(&v, 12)), (1, 1, 8));
    assert_eq!(le_u64(&v, 18), 0b1011);
    assert_eq!(r.data.cpus(), vec![0, 1, 3]);
    assert_eq!(CpuMapRecord::parse(&v, Endianness::Little).unwrap(), r);
    // MASK with 32-bit words: mask right after long_size (record 14).
    let r32 = CpuMapRecord {
        data: CpuMapData::Mask {
            long_size: 4,
            mask: vec![0x1, 0x1],
        },
    };
    v.clear();
    r32.write(&mut v, Endianness::Little).unwrap();
    assert_eq!((le_u32(&v, 14), le_u32(&v, 18)), (1, 1));
    assert_eq!(r32.data.cpus(), vec![0, 32]);
    // CPUS with the any-CPU entry.
    let c = CpuMapData::Cpus(vec![u16::MAX, 1]);
    assert_eq!(c.cpus(), vec![-1, 1]);
    let range = CpuMapData::Range {
        any_cpu: true,
        start_cpu: 2,
        end_cpu: 4,
    };
    assert_eq!(range.cpus(), vec![-1, 2, 3, 4]);
    // An unknown type or long_size is an error naming the byte.
    v.clear();
    r.write(&mut v, Endianness::Little).unwrap();
    v[12] = 3;
    assert!(matches!(
        CpuMapRecord::parse(&v, Endianness::Little),
        Err(UserRecordError::Invalid { offset: 12, .. })
    ));
    v[8] = 9;
    assert!(matches!(
        CpuMapRecord::parse(&v, Endianness::Little),
        Err(UserRecordError::Invalid { offset: 8, .. })
    ));
}

#[test]
fn auxtrace_error_formats() {
    let e = AuxtraceErrorRecord {
        type_: 1,
        code: 2,
        cpu: 3,
        pid: 4,
        tid: 5,
        fmt: 1,
        ip: 0xffff,
        time: Some(99),
        msg: b"overflow".to_vec(),
        guest: Some(AuxtraceErrorGuest {
            machine_pid: 7,
            vcpu: 8,
        }),
    };
    let mut v = Vec::new();
    e.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 120);
    assert_eq!((le_u64(&v, 32), le_u64(&v, 40)), (0xffff, 99));
    assert_eq!(&v[48..56], b"overflow");
    assert_eq!((le_u32(&v, 112), le_u32(&v, 116)), (7, 8));
    assert_eq!(
        AuxtraceErrorRecord::parse(&v, Endianness::Little).unwrap(),
        e
    );
    // fmt 0: the message starts where time would be.
    let old = AuxtraceErrorRecord {
        fmt: 0,
        time: None,
        guest: None,
        ..e.clone()
    };
    v.clear();
    old.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 104);
    assert_eq!(&v[40..48], b"overflow");
    assert_eq!(
        AuxtraceErrorRecord::parse(&v, Endianness::Little).unwrap(),
        old
    );
}

#[test]
fn id_index_guest_array_follows_the_first() {
    let r = IdIndexRecord {
        entries: vec![
            IdIndexEntry {
                id: 10,
                idx: 0,
                cpu: 1,
                tid: 2,
                guest: Some(IdIndexGuest {
                    machine_pid: 5,
                    vcpu: 6,
                }),
            },
            IdIndexEntry {
                id: 11,
                idx: 1,
                cpu: 2,
                tid: 3,
                guest: Some(IdIndexGuest {
                    machine_pid: 7,
                    vcpu: 8,
                }),
            },
        ],
    };
    let mut v = Vec::new();
    r.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 16 + 2 * 48);
    assert_eq!((le_u64(&v, 16), le_u64(&v, 48)), (10, 11));
    assert_eq!((le_u64(&v, 80), le_u64(&v, 88), le_u64(&v, 96)), (5, 6, 7));
    assert_eq!(IdIndexRecord::parse(&v, Endianness::Little).unwrap(), r);
    // A huge nr is refused before anything is allocated.
    v[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        IdIndexRecord::parse(&v, Endianness::Little),
        Err(UserRecordError::Invalid { offset: 8, .. })
    ));
}

#[test]
fn header_checks() {
    let mut v = Vec::new();
    FinishedRoundRecord.write(&mut v, Endianness::Little);
    assert_eq!(v, [68, 0, 0, 0, 0, 0, 8, 0]);
    assert!(matches!(
        FinishedInitRecord::parse(&v, Endianness::Little),
        Err(UserRecordError::WrongType {
            expected: 82,
            found: 68,
            ..
        })
    ));
    assert!(matches!(
        FinishedRoundRecord::parse(&v[..7], Endianness::Little),
        Err(UserRecordError::TooShort { .. })
    ));
    let mut long = v.clone();
    long.extend_from_slice(&[0; 8]);
    assert!(matches!(
        FinishedRoundRecord::parse(&long, Endianness::Little),
        Err(UserRecordError::SizeMismatch {
            header_size: 8,
            len: 16,
            ..
        })
    ));
}

#[test]
fn header_attr_ids_follow_attr_size() {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        size: PERF_ATTR_SIZE_VER7,
        sample_type: PERF_SAMPLE_IP | PERF_SAMPLE_ID,
        ..Default::default()
    };
    let r = HeaderAttrRecord {
        attr,
        ids: vec![42, 43],
    };
    for e in BOTH {
        let mut v = Vec::new();
        r.write(&mut v, e).unwrap();
        assert_eq!(v.len(), 8 + 128 + 16);
        let id_at = 8 + 128;
        assert_eq!(e.u64(v[id_at..id_at + 8].try_into().unwrap()), 42);
        assert_eq!(HeaderAttrRecord::parse(&v, e).unwrap(), r);
    }
    // A VER0 attr (size 64) from an old perf.
    let old = HeaderAttrRecord {
        attr: PerfEventAttr {
            size: PERF_ATTR_SIZE_VER0,
            ..attr
        },
        ids: vec![1],
    };
    let mut v = Vec::new();
    old.write(&mut v, Endianness::Little).unwrap();
    assert_eq!(v.len(), 8 + 64 + 8);
    assert_eq!(
        HeaderAttrRecord::parse(&v, Endianness::Little).unwrap(),
        old
    );
}

#[test]
fn oversized_records_are_refused_not_truncated() {
    let r = AuxtraceInfoRecord {
        type_: 1,
        reserved: 0,
        priv_: vec![0; 9000],
    };
    assert!(matches!(
        r.write(&mut Vec::new(), Endianness::Little),
        Err(UserRecordError::TooLarge { .. })
    ));
}

fn cpu_map_data() -> impl Strategy<Value = CpuMapData> {
    prop_oneof![
        prop::collection::vec(any::<u16>(), 0..20).prop_map(CpuMapData::Cpus),
        prop::collection::vec(any::<u32>(), 0..6).prop_map(|m| CpuMapData::Mask {
            long_size: 4,
            mask: m.into_iter().map(u64::from).collect()
        }),
        prop::collection::vec(any::<u64>(), 0..6)
            .prop_map(|mask| CpuMapData::Mask { long_size: 8, mask }),
        (any::<bool>(), any::<u16>(), any::<u16>()).prop_map(|(any_cpu, start_cpu, end_cpu)| {
            CpuMapData::Range {
                any_cpu,
                start_cpu,
                end_cpu,
            }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trips(
        big in any::<bool>(),
        a in any::<u64>(), b in any::<u64>(), c in any::<u64>(),
        x in any::<u32>(), y in any::<u32>(), z in any::<u32>(),
        words in prop::collection::vec(any::<u64>(), 0..12),
        blob in prop::collection::vec(any::<u8>(), 0..64),
        cpus in cpu_map_data(),
        guest in any::<bool>(),
        ext in any::<bool>(),
    ) {
        let e = if big { Endianness::Big } else { Endianness::Little };
        let mut v = Vec::new();

        let info = AuxtraceInfoRecord { type_: x, reserved: y, priv_: words.clone() };
        info.write(&mut v, e).unwrap();
        prop_assert_eq!(v.len(), info.size());
        prop_assert_eq!(AuxtraceInfoRecord::parse(&v, e).unwrap(), info);

        v.clear();
        let at = AuxtraceRecord { size: a, offset: b, reference: c, idx: x, tid: y, cpu: z, reserved: 0 };
        at.write(&mut v, e);
        prop_assert_eq!(AuxtraceRecord::parse(&v, e).unwrap(), at);

        v.clear();
        let tc = TimeConvRecord {
            time_shift: a, time_mult: b, time_zero: c,
            ext: ext.then_some(TimeConvExt { time_cycles: b, time_mask: a, cap_user_time_zero: 1, cap_user_time_short: 1, reserved: [0; 6] }),
        };
        tc.write(&mut v, e);
        prop_assert_eq!(TimeConvRecord::parse(&v, e).unwrap(), tc);

        v.clear();
        let ids = IdIndexRecord { entries: words.iter().map(|&w| IdIndexEntry {
            id: w, idx: a, cpu: u64::from(x), tid: u64::from(y),
            guest: guest.then_some(IdIndexGuest { machine_pid: b, vcpu: c }),
        }).collect() };
        ids.write(&mut v, e).unwrap();
        prop_assert_eq!(v.len(), ids.size());
        prop_assert_eq!(IdIndexRecord::parse(&v, e).unwrap(), ids);

        v.clear();
        let tm = ThreadMapRecord { entries: words.iter().map(|&w| ThreadMapEntry { pid: w, comm: [b'x'; 16] }).collect() };
        tm.write(&mut v, e).unwrap();
        prop_assert_eq!(ThreadMapRecord::parse(&v, e).unwrap(), tm);

        v.clear();
        let cm = CpuMapRecord { data: cpus.clone() };
        cm.write(&mut v, e).unwrap();
        prop_assert_eq!(v.len() % 8, 0);
        prop_assert_eq!(CpuMapRecord::parse(&v, e).unwrap(), cm);

        v.clear();
        let eu = EventUpdateRecord { id: a, update: EventUpdate::Cpus(cpus) };
        eu.write(&mut v, e).unwrap();
        prop_assert_eq!(EventUpdateRecord::parse(&v, e).unwrap(), eu);
        let name: Vec<u8> = blob.iter().map(|&c| c.max(1)).collect();
        for upd in [EventUpdate::Name(name.clone()), EventUpdate::Unit(name), EventUpdate::Scale(a as f64)] {
            v.clear();
            let eu = EventUpdateRecord { id: b, update: upd };
            eu.write(&mut v, e).unwrap();
            prop_assert_eq!(v.len() % 8, 0);
            prop_assert_eq!(EventUpdateRecord::parse(&v, e).unwrap(), eu);
        }

        v.clear();
        let hf = HeaderFeatureRecord { feat_id: a, data: &blob };
        hf.write(&mut v, e).unwrap();
        prop_assert_eq!(HeaderFeatureRecord::parse(&v, e).unwrap(), hf);

        v.clear();
        let c1 = CompressedRecord { data: &blob };
        c1.write(&mut v, e).unwrap();
        prop_assert_eq!(CompressedRecord::parse(&v, e).unwrap(), c1);
        v.clear();
        let c2 = Compressed2Record { data: &blob };
        c2.write(&mut v, e).unwrap();
        prop_assert_eq!(Compressed2Record::parse(&v, e).unwrap(), c2);

        v.clear();
        let msg: Vec<u8> = blob.iter().take(63).map(|&c| c.max(1)).collect();
        let ae = AuxtraceErrorRecord {
            type_: x, code: y, cpu: z, pid: x, tid: y, fmt: if ext { 1 } else { 0 }, ip: a,
            time: ext.then_some(b), msg,
            guest: guest.then_some(AuxtraceErrorGuest { machine_pid: x, vcpu: z }),
        };
        ae.write(&mut v, e).unwrap();
        prop_assert_eq!(AuxtraceErrorRecord::parse(&v, e).unwrap(), ae);
    }

    /// Any bytes: parse errors or succeeds, never panics or over-allocates.
    #[test]
    fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 8..300), t in 64u32..84) {
        let n = bytes.len() as u16;
        bytes[0..4].copy_from_slice(&t.to_le_bytes());
        bytes[6..8].copy_from_slice(&n.to_le_bytes());
        let e = Endianness::Little;
        let _ = HeaderAttrRecord::parse(&bytes, e);
        let _ = IdIndexRecord::parse(&bytes, e);
        let _ = AuxtraceInfoRecord::parse(&bytes, e);
        let _ = AuxtraceRecord::parse(&bytes, e);
        let _ = AuxtraceErrorRecord::parse(&bytes, e);
        let _ = ThreadMapRecord::parse(&bytes, e);
        let _ = CpuMapRecord::parse(&bytes, e);
        let _ = EventUpdateRecord::parse(&bytes, e);
        let _ = TimeConvRecord::parse(&bytes, e);
        let _ = HeaderFeatureRecord::parse(&bytes, e);
        let _ = CompressedRecord::parse(&bytes, e);
        let _ = Compressed2Record::parse(&bytes, e);
        let _ = FinishedRoundRecord::parse(&bytes, e);
    }
}
