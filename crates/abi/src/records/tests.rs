//! Record-level behaviour: dispatch, unknown types, header checks, size limit.

use super::testutil::*;
use super::*;

#[test]
fn unknown_types_pass_through() {
    // A perf tool type (FINISHED_ROUND) and a future kernel type.
    for ty in [PERF_RECORD_FINISHED_ROUND, PERF_RECORD_MAX] {
        let body = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let rec = Record::Unknown {
            type_: ty,
            misc: 3,
            data: RawData::Single(&body),
        };
        let want = Le::new().bytes(&body).with_header(ty, 3);
        check_layout(&rec, &sid_info(), &want);
    }
}

#[test]
fn header_size_is_checked() {
    let info = RecordParseInfo::default();
    // size 4 < 8.
    let bad = Le::new().u32(PERF_RECORD_LOST).u16(0).u16(4).0;
    let err = Record::parse_record(RawData::Single(&bad), &info, Endianness::Little).unwrap_err();
    assert_eq!(
        (err.what, err.record_type),
        ("header.size", Some(PERF_RECORD_LOST))
    );
    // size past the data.
    let short = Le::new().u32(PERF_RECORD_LOST).u16(0).u16(24).u64(1).0;
    let err = Record::parse_record(RawData::Single(&short), &info, Endianness::Little).unwrap_err();
    assert_eq!(err.what, "record body");
    // Fewer than 8 bytes.
    assert!(Record::parse_record(RawData::Single(&[1, 0, 0]), &info, Endianness::Little).is_err());
}

#[test]
fn sample_id_longer_than_the_body_is_an_error() {
    let body = Le::new().u64(1).0;
    let err = Record::parse(
        PERF_RECORD_LOST_SAMPLES,
        0,
        RawData::Single(&body),
        &sid_info(),
        Endianness::Little,
    )
    .unwrap_err();
    assert_eq!(err.what, "sample_id");
    // And a body too short for the fields before it.
    let body = Le::new().sid().0;
    let err = Record::parse(
        PERF_RECORD_LOST_SAMPLES,
        0,
        RawData::Single(&body),
        &sid_info(),
        Endianness::Little,
    )
    .unwrap_err();
    assert_eq!(err.what, "lost");
}

#[test]
fn records_over_64k_are_refused_before_writing() {
    let big = vec![0u8; 70_000];
    let rec = Record::Uevent(UeventRecord {
        data: RawData::Single(&big),
        ..Default::default()
    });
    let mut sink = Vec::new();
    let err = rec
        .write(&RecordParseInfo::default(), Endianness::Little, &mut sink)
        .unwrap_err();
    assert!(matches!(
        err,
        EncodeError::TooLarge {
            record_type: ext::PERF_RECORD_UEVENT,
            ..
        }
    ));
    assert!(sink.is_empty());
}

#[test]
fn record_id_finds_the_trailer_id() {
    let info = RecordParseInfo {
        sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_ID | PERF_SAMPLE_CPU,
        sample_id_all: true,
        ..Default::default()
    };
    let sid = SampleId {
        tid: Some(Default::default()),
        id: Some(0x1d),
        cpu: Some(Default::default()),
        ..Default::default()
    };
    let rec = Record::Comm(CommRecord {
        comm: RawData::Single(b"x"),
        sample_id: sid,
        ..Default::default()
    });
    let bytes = rec.to_vec(&info, Endianness::Big).unwrap();
    let body = RawData::Single(&bytes[8..]);
    assert_eq!(
        info.record_id(PERF_RECORD_COMM, body, Endianness::Big),
        Some(0x1d)
    );
    assert_eq!(
        Record::parse_record(RawData::Single(&bytes), &info, Endianness::Big)
            .unwrap()
            .0
            .sample_id(),
        Some(&sid)
    );
}
