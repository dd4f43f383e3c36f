//! SAMPLE layouts written against the PERF_RECORD_SAMPLE body order of
//! include/uapi/linux/perf_event.h: the expected bytes are built by hand, field by field.

use super::*;
use crate::read_format::{ReadValue, ReadValues};
use crate::records::Record;
use crate::records::testutil::{Le, check_layout, round_trip};

fn info(sample_type: u64) -> RecordParseInfo {
    RecordParseInfo {
        sample_type,
        ..Default::default()
    }
}

#[test]
fn common_sample_layout() {
    let st = PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_PERIOD;
    let s = SampleRecord {
        misc: PERF_RECORD_MISC_USER | PERF_RECORD_MISC_EXACT_IP,
        ip: Some(0x40_1000),
        tid: Some(PidTid { pid: 10, tid: 11 }),
        time: Some(123_456),
        id: Some(42),
        cpu: Some(CpuRes { cpu: 1, res: 0 }),
        period: Some(4000),
        ..Default::default()
    };
    let want = Le::new()
        .u64(0x40_1000)
        .u32(10)
        .u32(11)
        .u64(123_456)
        .u64(42)
        .u32(1)
        .u32(0)
        .u64(4000)
        .with_header(PERF_RECORD_SAMPLE, s.misc);
    assert_eq!(want.len(), 56);
    check_layout(&Record::Sample(s), &info(st), &want);
    // The id is where perf's id_pos says.
    let body = RawData::Single(&want[8..]);
    assert_eq!(
        info(st).record_id(PERF_RECORD_SAMPLE, body, Endianness::Little),
        Some(42)
    );
}

#[test]
fn every_field_in_kernel_order() {
    let st = (PERF_SAMPLE_MAX - 1) & !PERF_SAMPLE_WEIGHT;
    let mut info = info(st);
    info.read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_ID | PERF_FORMAT_LOST;
    info.branch_sample_type = PERF_SAMPLE_BRANCH_HW_INDEX | PERF_SAMPLE_BRANCH_COUNTERS | 1 << 3;
    info.regs_user_count = 2;
    info.regs_intr_count = 1;

    let group = [
        ReadValue {
            value: 100,
            id: Some(1),
            lost: Some(0),
        },
        ReadValue {
            value: 200,
            id: Some(2),
            lost: Some(5),
        },
    ];
    let ips = [PERF_CONTEXT_USER, 0x1000, 0x2000];
    let raw = [0xaa, 0xbb, 0xcc, 0xdd]; // size 4: 4 + 4 is already a multiple of 8
    let branches = [BranchEntry {
        from: 0x10,
        to: 0x20,
        flags: 1,
    }];
    let counters = [3u64];
    let regs_user = [0x1111, 0x2222];
    let regs_intr = [0x3333];
    let stack = [7u8; 16];
    let aux = [9u8; 8];
    let s = SampleRecord {
        misc: PERF_RECORD_MISC_KERNEL,
        identifier: Some(42),
        ip: Some(0xffff_0000),
        tid: Some(PidTid { pid: 1, tid: 2 }),
        time: Some(3),
        addr: Some(4),
        id: Some(42),
        stream_id: Some(43),
        cpu: Some(CpuRes { cpu: 5, res: 0 }),
        period: Some(6),
        read: Some(ReadFormat {
            time_enabled: Some(7),
            time_running: None,
            values: ReadValues::Group(Array::Items(&group)),
        }),
        callchain: Some(Array::Items(&ips)),
        raw: Some(RawData::Single(&raw)),
        branch_stack: Some(BranchStack {
            hw_idx: Some(8),
            entries: Array::Items(&branches),
            counters: Some(Array::Items(&counters)),
        }),
        regs_user: Some(Regs {
            abi: 2,
            regs: Array::Items(&regs_user),
        }),
        stack_user: Some(StackUser {
            data: RawData::Single(&stack),
            dyn_size: 12,
        }),
        weight: Some(0x0001_0002_0003_0004),
        data_src: Some(10),
        transaction: Some(11),
        regs_intr: Some(Regs {
            abi: 2,
            regs: Array::Items(&regs_intr),
        }),
        phys_addr: Some(12),
        cgroup: Some(13),
        data_page_size: Some(4096),
        code_page_size: Some(2 << 20),
        aux: Some(RawData::Single(&aux)),
    };
    let want = Le::new()
        .u64(42) // IDENTIFIER
        .u64(0xffff_0000) // IP
        .u32(1)
        .u32(2) // TID
        .u64(3) // TIME
        .u64(4) // ADDR
        .u64(42) // ID
        .u64(43) // STREAM_ID
        .u32(5)
        .u32(0) // CPU
        .u64(6) // PERIOD
        .u64(2)
        .u64(7)
        .u64(100)
        .u64(1)
        .u64(0)
        .u64(200)
        .u64(2)
        .u64(5) // READ: nr, enabled, {value,id,lost}x2
        .u64(3)
        .u64(PERF_CONTEXT_USER)
        .u64(0x1000)
        .u64(0x2000) // CALLCHAIN
        .u32(4)
        .bytes(&raw) // RAW
        .u64(1)
        .u64(8)
        .u64(0x10)
        .u64(0x20)
        .u64(1)
        .u64(3) // BRANCH_STACK: nr, hw_idx, entry, counters
        .u64(2)
        .u64(0x1111)
        .u64(0x2222) // REGS_USER
        .u64(16)
        .bytes(&stack)
        .u64(12) // STACK_USER
        .u64(0x0001_0002_0003_0004) // WEIGHT_STRUCT
        .u64(10) // DATA_SRC
        .u64(11) // TRANSACTION
        .u64(2)
        .u64(0x3333) // REGS_INTR
        .u64(12) // PHYS_ADDR
        .u64(13) // CGROUP
        .u64(4096) // DATA_PAGE_SIZE
        .u64(2 << 20) // CODE_PAGE_SIZE
        .u64(8)
        .bytes(&aux) // AUX
        .with_header(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
    check_layout(&Record::Sample(s), &info, &want);
}

#[test]
fn empty_variable_parts() {
    // abi 0: no registers; stack size 0: no dyn_size; aux size 0; empty callchain.
    let st =
        PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_AUX;
    let mut info = info(st);
    info.regs_user_count = 3;
    let s = SampleRecord {
        callchain: Some(Array::Items(&[])),
        regs_user: Some(Regs {
            abi: 0,
            regs: Array::Items(&[]),
        }),
        stack_user: Some(StackUser {
            data: RawData::Single(&[]),
            dyn_size: 0,
        }),
        aux: Some(RawData::Single(&[])),
        ..Default::default()
    };
    let want = Le::new()
        .u64(0)
        .u64(0)
        .u64(0)
        .u64(0)
        .with_header(PERF_RECORD_SAMPLE, 0);
    check_layout(&Record::Sample(s), &info, &want);
}

#[test]
fn writer_pads_like_the_kernel() {
    // RAW of 5 bytes: size field 12 (12 + 4 = 16), 7 zero bytes of padding.
    let info = info(PERF_SAMPLE_RAW | PERF_SAMPLE_AUX);
    let s = SampleRecord {
        raw: Some(RawData::Single(b"hello")),
        aux: Some(RawData::Single(b"abc")),
        ..Default::default()
    };
    let got = s.to_vec(&info, Endianness::Little).unwrap();
    let want = Le::new()
        .u32(12)
        .bytes(b"hello")
        .zeros(7)
        .u64(8)
        .bytes(b"abc")
        .zeros(5)
        .with_header(PERF_RECORD_SAMPLE, 0);
    assert_eq!(got, want);
    assert_eq!(got.len(), s.encoded_len(&info));
    // No RAW at all (bit set, field None): the kernel's `{ size = 4, data = 0 }`.
    let none = SampleRecord::default();
    let got = none
        .to_vec(
            &crate::sample::tests::info(PERF_SAMPLE_RAW),
            Endianness::Little,
        )
        .unwrap();
    assert_eq!(
        got,
        Le::new().u32(4).u32(0).with_header(PERF_RECORD_SAMPLE, 0)
    );
}

#[test]
fn mask_decides_the_register_count() {
    let mut info = info(PERF_SAMPLE_REGS_INTR);
    info.regs_intr_count = 2;
    let three = [1u64, 2, 3];
    let s = SampleRecord {
        regs_intr: Some(Regs {
            abi: 2,
            regs: Array::Items(&three),
        }),
        ..Default::default()
    };
    let got = s.to_vec(&info, Endianness::Little).unwrap();
    assert_eq!(
        got,
        Le::new()
            .u64(2)
            .u64(1)
            .u64(2)
            .with_header(PERF_RECORD_SAMPLE, 0)
    );
    let one = [1u64];
    let s = SampleRecord {
        regs_intr: Some(Regs {
            abi: 2,
            regs: Array::Items(&one),
        }),
        ..Default::default()
    };
    let got = s.to_vec(&info, Endianness::Little).unwrap();
    assert_eq!(
        got,
        Le::new()
            .u64(2)
            .u64(1)
            .u64(0)
            .with_header(PERF_RECORD_SAMPLE, 0)
    );
}

#[test]
fn truncated_samples_are_errors_naming_the_field() {
    let st = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN;
    let body = Le::new().u64(1).u64(5).u64(0x10).0;
    let err = Record::parse(
        PERF_RECORD_SAMPLE,
        0,
        RawData::Single(&body),
        &info(st),
        Endianness::Little,
    )
    .unwrap_err();
    assert_eq!(
        (err.record_type, err.what, err.offset),
        (Some(PERF_RECORD_SAMPLE), "callchain ips", 16)
    );
    let body = Le::new().u32(1).0;
    let err = Record::parse(
        PERF_RECORD_SAMPLE,
        0,
        RawData::Single(&body),
        &info(PERF_SAMPLE_IP),
        Endianness::Little,
    )
    .unwrap_err();
    assert_eq!(err.what, "ip");
    assert!(err.to_string().contains("ip at body byte 0"), "{err}");
    // A RAW size past the end.
    let body = Le::new().u32(1000).u32(0).0;
    assert!(
        Record::parse(
            PERF_RECORD_SAMPLE,
            0,
            RawData::Single(&body),
            &info(PERF_SAMPLE_RAW),
            Endianness::Little
        )
        .is_err()
    );
}

#[test]
fn big_endian_sample() {
    let st = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
    let s = SampleRecord {
        ip: Some(0x0102_0304_0506_0708),
        tid: Some(PidTid { pid: 1, tid: 2 }),
        ..Default::default()
    };
    let got = s.to_vec(&info(st), Endianness::Big).unwrap();
    assert_eq!(&got[..8], &[0, 0, 0, 9, 0, 0, 0, 24]);
    assert_eq!(&got[8..16], &0x0102_0304_0506_0708u64.to_be_bytes());
    assert_eq!(&got[16..24], &[0, 0, 0, 1, 0, 0, 0, 2]);
    round_trip(&Record::Sample(s), &info(st));
}
