//! A feature section whose room the writer leaves for the caller (`FeatureBody::Reserved`,
//! filled after `finish_reserving` at the offset it returns) makes the same file, byte for
//! byte, as the same section streamed through the writer (`FeatureBody::Stream`).

mod common;

use std::os::unix::fs::FileExt;

use common::synth;
use perfaux_abi::Endianness;
use perfaux_perfdata::{Feature, FeatureBody, PerfDataWriter};

const AUXTRACE_TYPE: u32 = 0x1234;

fn writer(e: Endianness) -> PerfDataWriter<std::io::Cursor<Vec<u8>>> {
    let mut w = PerfDataWriter::new(
        std::io::Cursor::new(Vec::new()),
        synth::events(),
        synth::options(e),
    )
    .unwrap();
    for r in synth::records(e, AUXTRACE_TYPE) {
        w.write_record_with_payload(&r.bytes, &r.payload).unwrap();
    }
    w
}

#[test]
fn a_reserved_section_filled_later_makes_the_streamed_file() {
    let head = b"head of the section".to_vec();
    let tail: Vec<u8> = (0..300_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let feature = Feature(60);
    for e in [Endianness::Little, Endianness::Big] {
        let streamed = writer(e)
            .finish_with(vec![(
                feature,
                FeatureBody::Stream {
                    head: head.clone(),
                    tail: &mut &tail[..],
                    tail_len: tail.len() as u64,
                },
            )])
            .unwrap()
            .into_inner();
        let (out, reserved) = writer(e)
            .finish_reserving(vec![(
                feature,
                FeatureBody::Reserved {
                    head: head.clone(),
                    len: tail.len() as u64,
                },
            )])
            .unwrap();
        assert_eq!(reserved.len(), 1);
        assert_eq!(reserved[0].0, feature);
        let at = reserved[0].1 as usize;
        assert_eq!(
            &streamed[at - head.len()..at],
            &head[..],
            "{e:?}: the head before the room"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reserved.data");
        std::fs::write(&path, out.into_inner()).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&tail, at as u64).unwrap();
        drop(f);
        assert!(std::fs::read(&path).unwrap() == streamed, "{e:?}");
    }
}
