//! Property tests: random interleavings of writes (nested ones too),
//! reads and wraps; AUX streams in full-trace and overwrite mode; and a
//! consumer fed corrupted memory (heads, tails and sizes it must not trust).

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{TEST_TYPE, lost_count, parse, record};
use perfaux_abi::ByteSink;
use perfaux_abi::consts::PERF_RECORD_LOST;
use perfaux_abi::mmap_page::offsets;
use perfaux_ring::aux::AuxBeginError;
use perfaux_ring::{
    AuxConfig, AuxMmap, DataConfig, LostInfo, PerfBuffer, PerfMmap, RingLayout, RingMemory,
};
use proptest::prelude::*;

const LOST: LostInfo<'static> = LostInfo {
    id: 7,
    sample_id: &[],
};

#[derive(Debug, Clone)]
enum Op {
    /// One record of `8 * units` bytes.
    Write(usize),
    /// A record interrupted after `split` bytes by a whole nested record.
    Nested {
        outer: usize,
        inner: usize,
        split: usize,
    },
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (3usize..=40).prop_map(Op::Write),
        2 => (3usize..=20, 3usize..=20, 0usize..=20).prop_map(|(outer, inner, split)| Op::Nested { outer, inner, split }),
        3 => Just(Op::Read),
    ]
}

/// Checks what a read returned against the records written so far.
struct Checker {
    written: Vec<u64>,
    next: usize,
    dropped: u64,
    reported: u64,
}

impl Checker {
    fn check(&mut self, md: &mut PerfMmap) {
        for r in md.read_records().unwrap() {
            let r = r.unwrap();
            assert_eq!(r.position % 8, 0);
            if r.header.type_ == PERF_RECORD_LOST {
                self.reported += lost_count(r.bytes);
                continue;
            }
            assert_eq!(r.header.type_, TEST_TYPE);
            let (_, seq) = parse(r.bytes);
            assert_eq!(
                Some(&seq),
                self.written.get(self.next),
                "records in reservation order, once"
            );
            self.next += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_record_arrives_once_in_order_or_is_counted_lost(ops in proptest::collection::vec(op(), 1..300)) {
        let mem = Arc::new(RingMemory::heap(RingLayout::new(1, 0).unwrap()).unwrap());
        let rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
        let mut md = PerfMmap::new(mem);
        let mut c = Checker { written: vec![], next: 0, dropped: 0, reported: 0 };
        let mut seq = 0u64;
        let mut last_head = 0;
        for op in ops {
            match op {
                Op::Write(units) => {
                    match rb.output_record(&record(0, seq, units * 8), &LOST) {
                        Ok(()) => c.written.push(seq),
                        Err(_) => c.dropped += 1,
                    }
                    seq += 1;
                }
                Op::Nested { outer, inner, split } => {
                    let outer_rec = record(1, seq, outer * 8);
                    let inner_rec = record(2, seq + 1, inner * 8);
                    match rb.output_begin(outer_rec.len(), &LOST) {
                        Ok(mut h) => {
                            c.written.push(seq);
                            let split = (split * 8).min(outer_rec.len());
                            h.put(&outer_rec[..split]);
                            match rb.output_record(&inner_rec, &LOST) {
                                Ok(()) => c.written.push(seq + 1),
                                Err(_) => c.dropped += 1,
                            }
                            // Nothing is published while the outer writer is in flight.
                            prop_assert_eq!(md.data_head(), last_head);
                            h.put(&outer_rec[split..]);
                        }
                        Err(_) => {
                            c.dropped += 1;
                            match rb.output_record(&inner_rec, &LOST) {
                                Ok(()) => c.written.push(seq + 1),
                                Err(_) => c.dropped += 1,
                            }
                        }
                    }
                    seq += 2;
                }
                Op::Read => c.check(&mut md),
            }
            let head = md.data_head();
            prop_assert!(head >= last_head, "data_head never goes back");
            last_head = head;
        }
        c.check(&mut md);
        // One more record carries the last count, if any.
        if rb.lost() != 0 {
            rb.output_record(&record(0, seq, 24), &LOST).unwrap();
            c.written.push(seq);
            c.check(&mut md);
        }
        prop_assert_eq!(c.next, c.written.len());
        prop_assert_eq!(c.reported, c.dropped);
    }
}

fn stream_byte(pos: u64) -> u8 {
    (pos.wrapping_mul(0x9e37_79b9) >> 11) as u8
}

#[derive(Debug, Clone)]
enum AuxOp {
    Write(u64),
    Skip(u64),
    Read,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn full_trace_aux_bytes_read_equal_bytes_written(
        ops in proptest::collection::vec(prop_oneof![
            5 => (1u64..3000).prop_map(AuxOp::Write),
            1 => (1u64..200).prop_map(AuxOp::Skip),
            3 => Just(AuxOp::Read),
        ], 1..120)
    ) {
        let mem = Arc::new(RingMemory::heap(RingLayout::new(1, 1).unwrap()).unwrap());
        let mut rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
        rb.rb_alloc_aux(AuxConfig::default()).unwrap();
        let aux = rb.aux().unwrap();
        let size = aux.aux_size();
        let mut mm = AuxMmap::new(mem).unwrap();
        // What each position should hold (None: skipped, unspecified).
        let mut expect: Vec<Option<u8>> = vec![];
        let mut read_to = 0u64;
        let read = |mm: &mut AuxMmap, expect: &[Option<u8>], read_to: &mut u64| {
            let r = mm.read().unwrap();
            assert_eq!(r.offset, *read_to);
            for (i, &b) in r.data.iter().enumerate() {
                if let Some(want) = expect[(r.offset as usize) + i] {
                    assert_eq!(b, want, "AUX byte at {}", r.offset as usize + i);
                }
            }
            *read_to += r.data.len() as u64;
        };
        for op in ops {
            match op {
                AuxOp::Write(n) | AuxOp::Skip(n) => {
                    let head = expect.len() as u64;
                    match aux.output_begin() {
                        Ok(mut h) => {
                            prop_assert_eq!(h.head(), head);
                            prop_assert_eq!(h.size(), size - 1 - (head - read_to));
                            let n = n.min(h.size());
                            if matches!(op, AuxOp::Write(_)) {
                                let bytes: Vec<u8> = (head..head + n).map(stream_byte).collect();
                                h.write_at(0, &bytes).unwrap();
                                expect.extend(bytes.into_iter().map(Some));
                                let end = h.end(n);
                                prop_assert_eq!(end.record.map(|r| (r.aux_offset, r.aux_size)), Some((head, n)));
                            } else {
                                h.skip(n).unwrap();
                                expect.extend(std::iter::repeat_n(None, n as usize));
                                prop_assert_eq!(h.end(0).record, None);
                            }
                        }
                        Err(AuxBeginError::Full) => prop_assert_eq!(head - read_to, size - 1),
                        Err(e) => prop_assert!(false, "{:?}", e),
                    }
                }
                AuxOp::Read => read(&mut mm, &expect, &mut read_to),
            }
        }
        read(&mut mm, &expect, &mut read_to);
        prop_assert_eq!(read_to, expect.len() as u64);
    }

    #[test]
    fn overwrite_aux_keeps_the_newest_bytes(
        writes in proptest::collection::vec(1u64..5000, 1..40)
    ) {
        let mem = Arc::new(RingMemory::heap(RingLayout::new(1, 1).unwrap()).unwrap());
        let mut rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
        rb.rb_alloc_aux(AuxConfig { writable: false, aux_watermark: 0 }).unwrap();
        let aux = rb.aux().unwrap();
        let size = aux.aux_size();
        let mut head = 0u64;
        for n in writes {
            let mut h = aux.output_begin().unwrap();
            // A PMU writes in chunks of at most the area.
            let mut left = n;
            while left > 0 {
                let k = left.min(size);
                let bytes: Vec<u8> = (head..head + k).map(stream_byte).collect();
                h.write_at(head - h.head(), &bytes).unwrap();
                head += k;
                left -= k;
            }
            h.set_head(head);
            h.end(n);
        }
        let mut mm = AuxMmap::new(mem).unwrap();
        let snap = mm.read_snapshot(0).unwrap();
        let kept = head.min(size);
        prop_assert_eq!(snap.wrapped, head >= size);
        prop_assert_eq!(snap.offset, head - kept);
        let want: Vec<u8> = (head - kept..head).map(stream_byte).collect();
        prop_assert_eq!(snap.data, want.as_slice());
    }
}

/// Heads near the tail (so the parser runs over garbage) or anywhere.
fn head_for(tail: u64, near: bool, delta: u64, far: u64) -> u64 {
    if near { tail.wrapping_add(delta) } else { far }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_consumer_of_corrupted_memory_returns_errors_and_never_crashes(
        blobs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..12), 0..60),
        tail in prop_oneof![any::<u64>(), 0u64..10_000],
        near in any::<bool>(),
        delta in 0u64..10_000,
        far in any::<u64>(),
        aux_head in any::<u64>(),
        aux_tail in any::<u64>(),
    ) {
        let mem = Arc::new(RingMemory::heap(RingLayout::new(1, 1).unwrap()).unwrap());
        // A hostile producer: random bytes (random record sizes included),
        // written through an overwrite ring so they land anywhere.
        let vandal = PerfBuffer::new(mem.clone(), DataConfig { writable: false, ..DataConfig::default() }).unwrap();
        for words in blobs {
            let bytes: Vec<u8> = words.iter().flat_map(|&b| [b, b ^ 0x5a, 0, 0, b, 0, b.rotate_left(3), 0]).collect();
            vandal.output_record(&bytes, &LOST).unwrap();
        }
        let o = Ordering::Relaxed;
        mem.user_word(offsets::DATA_TAIL).store(tail, o);
        mem.user_word(offsets::AUX_TAIL).store(aux_tail, o);
        let mut md = PerfMmap::new(mem.clone());
        mem.user_word(offsets::DATA_HEAD).store(head_for(tail, near, delta, far), o);
        mem.user_word(offsets::AUX_HEAD).store(aux_head, o);
        let size = mem.layout().data_size as u64;
        if let Ok(recs) = md.read_records() {
            let mut total = 0u64;
            for r in recs {
                match r {
                    Ok(r) => {
                        prop_assert!(r.header.size >= 8 && r.header.size % 8 == 0);
                        prop_assert_eq!(r.bytes.len(), usize::from(r.header.size));
                        total += u64::from(r.header.size);
                    }
                    Err(_) => break,
                }
            }
            prop_assert!(total <= size);
        }
        for backward in [false, true] {
            if let Ok(snap) = md.read_overwrite(backward) {
                prop_assert!(snap.records.bytes().len() as u64 <= size);
                for r in snap.records {
                    if r.is_err() {
                        break;
                    }
                }
            }
        }
        let mut mm = AuxMmap::new(mem.clone()).unwrap();
        if let Ok(r) = mm.read() {
            prop_assert!(r.data.len() as u64 <= mm.aux_size());
        }
        let snap = mm.read_snapshot(0).unwrap();
        prop_assert!(snap.data.len() as u64 <= mm.aux_size());
    }

    #[test]
    fn a_reader_of_a_corrupted_user_page_refuses_or_gets_a_layout_that_fits(
        data_offset in prop_oneof![Just(4096u64), any::<u64>()],
        data_size in prop_oneof![Just(8192u64), (0u64..64).prop_map(|p| p * 4096), any::<u64>()],
        aux_offset in prop_oneof![Just(3 * 4096u64), (0u64..64).prop_map(|p| p * 4096), any::<u64>()],
        aux_size in prop_oneof![Just(4096u64), (0u64..64).prop_map(|p| p * 4096), any::<u64>()],
    ) {
        let mem = RingMemory::shared(RingLayout::new(2, 1).unwrap()).unwrap();
        let file_len = mem.layout().total_len();
        let o = Ordering::Relaxed;
        mem.user_word(offsets::DATA_OFFSET).store(data_offset, o);
        mem.user_word(offsets::DATA_SIZE).store(data_size, o);
        mem.user_word(offsets::AUX_OFFSET).store(aux_offset, o);
        mem.user_word(offsets::AUX_SIZE).store(aux_size, o);
        let fd = mem.shared_fd().unwrap().try_clone_to_owned().unwrap();
        if let Ok(reader) = RingMemory::open_shared(fd) {
            let l = *reader.layout();
            prop_assert!(l.validate().is_ok());
            prop_assert!(l.total_len() <= file_len);
            let mut md = PerfMmap::new(Arc::new(reader));
            if let Ok(recs) = md.read_records() {
                for r in recs {
                    if r.is_err() {
                        break;
                    }
                }
            }
        }
    }
}
