//! The data area, producer and consumer together: ordering, alignment,
//! wrap, LOST, pause, wakeups, nesting, overwrite and write_backward
//! (kernel/events/ring_buffer.c: perf_output_begin/end).

mod common;

use std::sync::Arc;

use common::{TEST_TYPE, lost_count, parse, record};
use perfaux_abi::ByteSink;
use perfaux_abi::consts::PERF_RECORD_LOST;
use perfaux_ring::{
    DataConfig, LostInfo, OutputError, PerfBuffer, PerfMmap, RingLayout, RingMemory,
};

const NO_LOST: LostInfo<'static> = LostInfo {
    id: 0,
    sample_id: &[],
};

fn ring(data_pages: usize, config: DataConfig) -> (PerfBuffer, PerfMmap) {
    let mem = Arc::new(RingMemory::heap(RingLayout::new(data_pages, 0).unwrap()).unwrap());
    (
        PerfBuffer::new(mem.clone(), config).unwrap(),
        PerfMmap::new(mem),
    )
}

fn drain(md: &mut PerfMmap) -> Vec<Vec<u8>> {
    md.read_records()
        .unwrap()
        .map(|r| r.unwrap().bytes.to_vec())
        .collect()
}

#[test]
fn records_arrive_in_order_at_8_aligned_positions() {
    let (rb, mut md) = ring(1, DataConfig::default());
    let sizes = [24, 32, 40, 64, 24, 128];
    for (seq, &size) in sizes.iter().enumerate() {
        rb.output_record(&record(0, seq as u64, size), &NO_LOST)
            .unwrap();
    }
    let recs = md.read_records().unwrap();
    let mut n = 0;
    for (seq, r) in recs.enumerate() {
        let r = r.unwrap();
        assert_eq!(r.position % 8, 0);
        assert_eq!(r.bytes, record(0, seq as u64, sizes[seq]).as_slice());
        n += 1;
    }
    assert_eq!(n, sizes.len());
    // The consumer gave the bytes back: data_tail == data_head.
    assert_eq!(md.tail(), md.data_head());
    assert_eq!(md.data_head(), sizes.iter().sum::<usize>() as u64);
}

#[test]
fn sizes_that_are_not_multiples_of_8_are_refused() {
    let (rb, _md) = ring(1, DataConfig::default());
    assert_eq!(
        rb.output_begin(20, &NO_LOST).err(),
        Some(OutputError::InvalidSize { size: 20 })
    );
    assert_eq!(
        rb.output_begin(0, &NO_LOST).err(),
        Some(OutputError::InvalidSize { size: 0 })
    );
    // A caller bug is not a lost record.
    assert_eq!(rb.lost(), 0);
}

#[test]
fn a_body_wraps_but_its_header_does_not() {
    let (rb, mut md) = ring(1, DataConfig::default());
    let page = rb.memory().layout().data_size;
    // Move the head to 16 bytes before the end of the area.
    let mut seq = 0;
    while (md.data_head() as usize) < page - 16 {
        let size = if page - 16 - md.data_head() as usize >= 64 {
            64
        } else {
            24
        };
        rb.output_record(&record(0, seq, size), &NO_LOST).unwrap();
        seq += 1;
        drain(&mut md);
    }
    assert_eq!(md.data_head() as usize, page - 16);
    let big = record(7, 99, 48);
    rb.output_record(&big, &NO_LOST).unwrap();
    let got = drain(&mut md);
    assert_eq!(got, vec![big.clone()]);
    assert_eq!(parse(&got[0]), (7, 99));
}

#[test]
fn a_full_ring_drops_and_the_next_record_carries_the_exact_lost_count() {
    // ring_buffer.c __perf_output_begin(): on fail local_inc(&rb->lost); the
    // next record that fits is preceded by PERF_RECORD_LOST{id, lost} and
    // its sample_id.
    let (rb, mut md) = ring(1, DataConfig::default());
    let mut written = 0;
    let mut dropped = 0;
    for seq in 0..300 {
        match rb.output_record(&record(0, seq, 64), &NO_LOST) {
            Ok(()) => written += 1,
            Err(OutputError::NoSpace) => dropped += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    // 4096 bytes keep one byte free: 63 records of 64 fit.
    assert_eq!(written, 4096 / 64 - 1);
    assert_eq!(dropped, 300 - written);
    assert_eq!(rb.lost(), dropped);
    assert_eq!(drain(&mut md).len() as u64, written);

    let sample_id = [0xabu8; 16];
    let lost = LostInfo {
        id: 0x1234,
        sample_id: &sample_id,
    };
    rb.output_record(&record(0, 1000, 32), &lost).unwrap();
    let got = drain(&mut md);
    assert_eq!(got.len(), 2);
    let l = &got[0];
    assert_eq!(
        u32::from_ne_bytes(l[0..4].try_into().unwrap()),
        PERF_RECORD_LOST
    );
    assert_eq!(u16::from_ne_bytes(l[6..8].try_into().unwrap()), 24 + 16);
    assert_eq!(u64::from_ne_bytes(l[8..16].try_into().unwrap()), 0x1234);
    assert_eq!(lost_count(l), dropped);
    assert_eq!(&l[24..], &sample_id);
    assert_eq!(parse(&got[1]), (0, 1000));
    // Reported once: the count is back to 0 and the next record comes alone.
    assert_eq!(rb.lost(), 0);
    rb.output_record(&record(0, 1001, 32), &lost).unwrap();
    assert_eq!(drain(&mut md).len(), 1);
}

#[test]
fn a_paused_ring_drops_and_counts() {
    // PERF_EVENT_IOC_PAUSE_OUTPUT: a paused buffer drops and counts.
    let (rb, mut md) = ring(1, DataConfig::default());
    rb.pause_output(true);
    for seq in 0..5 {
        assert_eq!(
            rb.output_record(&record(0, seq, 32), &NO_LOST),
            Err(OutputError::Paused)
        );
    }
    assert!(drain(&mut md).is_empty());
    rb.pause_output(false);
    rb.output_record(
        &record(0, 5, 32),
        &LostInfo {
            id: 9,
            sample_id: &[],
        },
    )
    .unwrap();
    let got = drain(&mut md);
    assert_eq!(lost_count(&got[0]), 5);
    assert_eq!(parse(&got[1]), (0, 5));
}

#[test]
fn watermark_wakeups_fire_when_the_head_passes_the_watermark() {
    // ring_buffer.c: `if (head - rb->wakeup > rb->watermark) rb->wakeup +=
    // watermark`, and perf_output_put_handle wakes if rb->wakeup moved.
    let config = DataConfig {
        wakeup_watermark: 1024,
        ..DataConfig::default()
    };
    let (rb, mut md) = ring(2, config);
    assert_eq!(rb.watermark(), 1024);
    let w = rb.wakeup().clone();
    for seq in 0..32 {
        rb.output_record(&record(0, seq, 32), &NO_LOST).unwrap();
    }
    // head == 1024: not past the watermark yet.
    assert_eq!((w.count(), w.poll()), (0, 0));
    rb.output_record(&record(0, 32, 32), &NO_LOST).unwrap();
    assert_eq!(w.count(), 1);
    assert_eq!(w.poll(), perfaux_ring::wakeup::POLLIN);
    drain(&mut md);
    for seq in 33..64 {
        rb.output_record(&record(0, seq, 32), &NO_LOST).unwrap();
    }
    // head == 2048: rb->wakeup == 1024, 1024 is not > 1024.
    assert_eq!(w.count(), 1);
    rb.output_record(&record(0, 64, 32), &NO_LOST).unwrap();
    assert_eq!(w.count(), 2);

    // The default watermark is half the area (ring_buffer_init()).
    let (rb, _md) = ring(2, DataConfig::default());
    assert_eq!(rb.watermark(), rb.memory().layout().data_size as u64 / 2);
}

#[test]
fn wakeup_events_wake_every_nth_sample() {
    // perf_output_sample(): every wakeup_events-th sample bumps rb->wakeup.
    let (rb, _md) = ring(4, DataConfig::default());
    let w = rb.wakeup().clone();
    for seq in 0..9 {
        let mut h = rb.output_begin(32, &NO_LOST).unwrap();
        h.put(&record(0, seq, 32));
        h.count_wakeup_event(3);
        h.end();
        assert_eq!(w.count() as u64, (seq + 1) / 3, "after sample {seq}");
    }
}

#[test]
fn only_the_outermost_writer_publishes_data_head() {
    // perf_output_put_handle(): a nested writer (an interrupt) leaves the
    // publishing to the writer it interrupted.
    let (rb, mut md) = ring(1, DataConfig::default());
    let mut outer = rb.output_begin(32, &NO_LOST).unwrap();
    outer.put(&record(1, 0, 32)[..16]);
    {
        let mut inner = rb.output_begin(40, &NO_LOST).unwrap();
        inner.put(&record(2, 0, 40));
        inner.end();
    }
    // The inner record is complete but sits after unfinished bytes.
    assert_eq!(md.data_head(), 0);
    outer.put(&record(1, 0, 32)[16..]);
    outer.end();
    assert_eq!(md.data_head(), 72);
    let got: Vec<_> = drain(&mut md).iter().map(|r| parse(r)).collect();
    assert_eq!(got, [(1, 0), (2, 0)]);
}

#[test]
fn write_backward_overwrite_snapshot_is_newest_first() {
    // write_backward with a read-only mapping: the head moves down, records
    // are read from data_head upwards, newest first; the oldest one cut by
    // the wrap is dropped (perf's overwrite_rb_find_range()).
    let config = DataConfig {
        writable: false,
        write_backward: true,
        wakeup_watermark: 0,
    };
    let (rb, mut md) = ring(1, config);
    for seq in 0..10 {
        rb.output_record(&record(0, seq, 40), &NO_LOST).unwrap();
    }
    rb.pause_output(true);
    // data_head is rb->head, moving down from 0.
    assert_eq!(md.data_head(), (10u64 * 40).wrapping_neg());
    let snap = md.read_overwrite(true).unwrap();
    assert!(!snap.wrapped && !snap.truncated);
    let seqs: Vec<u64> = snap.records.map(|r| parse(r.unwrap().bytes).1).collect();
    assert_eq!(seqs, (0..10).rev().collect::<Vec<_>>());
    rb.pause_output(false);

    // Now wrap the area several times: 4096 / 40 = 102.4 records fit.
    for seq in 10..1000 {
        rb.output_record(&record(0, seq, 40), &NO_LOST).unwrap();
    }
    rb.pause_output(true);
    let snap = md.read_overwrite(true).unwrap();
    assert!(snap.wrapped);
    assert!(
        snap.truncated,
        "4096 is not a multiple of 40: the oldest record is cut"
    );
    let seqs: Vec<u64> = snap.records.map(|r| parse(r.unwrap().bytes).1).collect();
    assert_eq!(seqs, (898..1000).rev().collect::<Vec<_>>());
    // Paused: nothing written, all counted.
    assert_eq!(
        rb.output_record(&record(0, 1000, 40), &NO_LOST),
        Err(OutputError::Paused)
    );
}

#[test]
fn forward_overwrite_ignores_data_tail_and_reads_until_lapped() {
    let config = DataConfig {
        writable: false,
        ..DataConfig::default()
    };
    let (rb, mut md) = ring(1, config);
    for seq in 0..50 {
        rb.output_record(&record(0, seq, 64), &NO_LOST).unwrap();
    }
    let seqs: Vec<u64> = md
        .read_overwrite(false)
        .unwrap()
        .records
        .map(|r| parse(r.unwrap().bytes).1)
        .collect();
    assert_eq!(seqs, (0..50).collect::<Vec<_>>());
    // Overwrite: no space check, 200 more records lap the consumer.
    for seq in 50..250 {
        rb.output_record(&record(0, seq, 64), &NO_LOST).unwrap();
    }
    assert!(matches!(
        md.read_overwrite(false),
        Err(perfaux_ring::RingError::HeadTooFarAhead { .. })
    ));
}

#[test]
fn threads_writing_one_ring_lose_nothing_unaccounted() {
    // Several writers on one ring, a consumer draining meanwhile: each
    // writer's records arrive once and in order, or are counted in LOST.
    let (rb, mut md) = ring(2, DataConfig::default());
    let rb = Arc::new(rb);
    const WRITERS: u64 = 3;
    const PER: u64 = 3000;
    const FLUSH: u64 = 99;
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let rb = rb.clone();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                for seq in 0..PER {
                    let size = 24 + 8 * ((seq + w) % 6) as usize;
                    if rb.output_record(&record(w, seq, size), &NO_LOST).is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let mut next = [0u64; WRITERS as usize];
    let mut seen = 0u64;
    let mut lost = 0u64;
    let mut check = |recs: perfaux_ring::Records<'_>| {
        for r in recs {
            let r = r.unwrap();
            if r.header.type_ == PERF_RECORD_LOST {
                lost += lost_count(r.bytes);
                continue;
            }
            assert_eq!(r.header.type_, TEST_TYPE);
            let (w, seq) = parse(r.bytes);
            if w == FLUSH {
                continue;
            }
            assert!(
                seq >= next[w as usize],
                "writer {w}: {seq} after {}",
                next[w as usize]
            );
            next[w as usize] = seq + 1;
            seen += 1;
        }
    };
    while !handles.iter().all(|h| h.is_finished()) {
        check(md.read_records().unwrap());
    }
    let ok: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    check(md.read_records().unwrap());
    // Flush the last drop count with one more record.
    if rb.lost() != 0 {
        rb.output_record(&record(FLUSH, 0, 24), &NO_LOST).unwrap();
        check(md.read_records().unwrap());
    }
    assert_eq!(seen, ok);
    assert_eq!(seen + lost, WRITERS * PER);
}

#[test]
fn bytes_reserved_but_not_written_are_published_as_zeros() {
    // A record that claims 32 bytes, of which the caller wrote 16: the rest
    // must not be an older record's bytes.
    let (rb, mut md) = ring(1, DataConfig::default());
    rb.output_record(&record(0, 0, 64), &NO_LOST).unwrap();
    drain(&mut md);
    let mut h = rb.output_begin(32, &NO_LOST).unwrap();
    h.put(&record(0, 1, 32)[..16]);
    drop(h);
    let got = drain(&mut md);
    assert_eq!(&got[0][..16], &record(0, 1, 32)[..16]);
    assert_eq!(&got[0][16..], &[0u8; 16]);
}

/// The count of records dropped last, with no record after them to carry it (the writers are
/// gone), is written on its own by `output_lost` once there is room: not counted again while
/// the ring is full, exact once written, and nothing when nothing was lost.
#[test]
fn output_lost_says_the_last_drops_on_their_own_once_there_is_room() {
    let (rb, mut md) = ring(1, DataConfig::default());
    let sample_id = [0xcdu8; 48];
    let lost = LostInfo {
        id: 0x77,
        sample_id: &sample_id,
    };
    assert_eq!(
        rb.output_lost(&lost),
        Ok(0),
        "nothing lost, nothing written"
    );
    let mut dropped = 0;
    for seq in 0..100 {
        if rb.output_record(&record(0, seq, 64), &NO_LOST).is_err() {
            dropped += 1;
        }
    }
    assert!(dropped > 0);
    // 63 records of 64 bytes leave 63 bytes: too few for LOST with its 48-byte sample_id.
    assert_eq!(rb.output_lost(&lost), Err(OutputError::NoSpace));
    assert_eq!(
        rb.lost(),
        dropped,
        "a LOST that did not fit is no further loss"
    );
    assert_eq!(drain(&mut md).len(), 63);
    assert_eq!(rb.output_lost(&lost), Ok(dropped));
    let got = drain(&mut md);
    assert_eq!(got.len(), 1);
    assert_eq!(
        u32::from_ne_bytes(got[0][0..4].try_into().unwrap()),
        PERF_RECORD_LOST
    );
    assert_eq!(u64::from_ne_bytes(got[0][8..16].try_into().unwrap()), 0x77);
    assert_eq!(lost_count(&got[0]), dropped);
    assert_eq!(&got[0][24..], &sample_id);
    assert_eq!(rb.lost(), 0);
    assert_eq!(rb.output_lost(&lost), Ok(0));
    assert!(drain(&mut md).is_empty());
}
