//! The AUX area: perf_aux_output_begin/end/skip/flag, record emission,
//! wakeups, aux_nest, overwrite mode, and copies across the wrap
//! (kernel/events/ring_buffer.c: perf_aux_output_begin/end/skip).

use std::sync::Arc;

use perfaux_abi::consts::{
    PERF_AUX_FLAG_COLLISION, PERF_AUX_FLAG_OVERWRITE, PERF_AUX_FLAG_PARTIAL,
    PERF_AUX_FLAG_TRUNCATED,
};
use perfaux_ring::aux::{AuxBeginError, AuxEnd, NoSpace};
use perfaux_ring::{
    AuxConfig, AuxMmap, AuxRecord, DataConfig, PerfBuffer, RingError, RingLayout, RingMemory,
};

const PAGE: u64 = 4096;

fn ring(aux_pages: usize, aux: AuxConfig) -> (PerfBuffer, AuxMmap) {
    let mem = Arc::new(RingMemory::heap(RingLayout::new(1, aux_pages).unwrap()).unwrap());
    let mut rb = PerfBuffer::new(mem.clone(), DataConfig::default()).unwrap();
    rb.rb_alloc_aux(aux).unwrap();
    (rb, AuxMmap::new(mem).unwrap())
}

/// The byte at AUX stream position `pos` in these tests.
fn stream_byte(pos: u64) -> u8 {
    (pos.wrapping_mul(31) >> 3) as u8 ^ pos as u8
}

fn stream(from: u64, to: u64) -> Vec<u8> {
    (from..to).map(stream_byte).collect()
}

#[test]
fn full_trace_begin_gives_the_free_space_and_end_emits_the_aux_record() {
    let (rb, mut mm) = ring(1, AuxConfig::default());
    let aux = rb.aux().unwrap();
    let h = aux.output_begin().unwrap();
    // CIRC_SPACE keeps one byte free.
    assert_eq!((h.head(), h.size()), (0, PAGE - 1));
    h.write_at(0, &stream(0, 100)).unwrap();
    let end = h.end(100);
    assert_eq!(
        end.record,
        Some(AuxRecord {
            aux_offset: 0,
            aux_size: 100,
            flags: 0
        })
    );
    assert_eq!(mm.aux_head(), 100);
    let read = mm.read().unwrap();
    assert_eq!((read.offset, read.data), (0, stream(0, 100).as_slice()));

    // The second record starts at the old head.
    let h = aux.output_begin().unwrap();
    assert_eq!(h.head(), 100);
    h.write_at(0, &stream(100, 150)).unwrap();
    assert_eq!(h.end(50).record.unwrap().aux_offset, 100);
}

#[test]
fn an_aux_record_is_emitted_only_with_data_or_a_flag_besides_overwrite() {
    // perf_aux_output_end(): `if (size || (handle->aux_flags & ~OVERWRITE))`.
    let (rb, _mm) = ring(1, AuxConfig::default());
    let aux = rb.aux().unwrap();
    assert_eq!(aux.output_begin().unwrap().end(0).record, None);
    let mut h = aux.output_begin().unwrap();
    h.flag(PERF_AUX_FLAG_PARTIAL | PERF_AUX_FLAG_COLLISION)
        .unwrap();
    assert_eq!(
        h.end(0).record,
        Some(AuxRecord {
            aux_offset: 0,
            aux_size: 0,
            flags: PERF_AUX_FLAG_PARTIAL | PERF_AUX_FLAG_COLLISION
        })
    );
    // OVERWRITE is set only by the core: refused, nothing set.
    let mut h = aux.output_begin().unwrap();
    assert!(h.flag(PERF_AUX_FLAG_OVERWRITE).is_err());
    assert_eq!(h.aux_flags(), 0);
}

#[test]
fn skip_moves_aux_head_within_the_handle_only() {
    // perf_aux_output_skip(): -ENOSPC if size > handle->size.
    let (rb, mm) = ring(1, AuxConfig::default());
    let aux = rb.aux().unwrap();
    let mut h = aux.output_begin().unwrap();
    assert_eq!(h.skip(PAGE), Err(NoSpace));
    assert_eq!(NoSpace.errno(), perfaux_abi::errno::ENOSPC);
    h.skip(64).unwrap();
    assert_eq!((h.head(), h.size()), (64, PAGE - 1 - 64));
    assert_eq!(mm.aux_head(), 64);
    let end = h.end(16);
    assert_eq!(end.record.unwrap().aux_offset, 64);
    assert_eq!(mm.aux_head(), 80);
}

#[test]
fn a_full_area_refuses_begin_wakes_the_consumer_and_asks_for_disable() {
    let (rb, mut mm) = ring(1, AuxConfig::default());
    let aux = rb.aux().unwrap();
    let h = aux.output_begin().unwrap();
    let n = h.size();
    h.write_at(0, &stream(0, n)).unwrap();
    h.end(n);
    let woken = rb.wakeup().count();
    assert!(matches!(aux.output_begin(), Err(AuxBeginError::Full)));
    assert_eq!(rb.wakeup().count(), woken + 1);
    // The consumer frees the space: begin works again.
    assert_eq!(mm.read().unwrap().data, stream(0, n).as_slice());
    assert_eq!(aux.output_begin().unwrap().size(), PAGE - 1);
}

#[test]
fn one_writer_at_a_time() {
    // aux_nest: a nested perf_aux_output_begin gets nothing.
    let (rb, _mm) = ring(1, AuxConfig::default());
    let aux = rb.aux().unwrap();
    let h = aux.output_begin().unwrap();
    assert!(matches!(aux.output_begin(), Err(AuxBeginError::Nested)));
    h.end(0);
    assert!(aux.output_begin().is_ok());
}

#[test]
fn watermark_wakeups_round_down_aux_wakeup() {
    // rb_need_aux_wakeup(): aux_head - aux_wakeup >= aux_watermark, then
    // aux_wakeup = rounddown(aux_head, aux_watermark).
    let (rb, mut mm) = ring(4, AuxConfig::default());
    let aux = rb.aux().unwrap();
    assert_eq!(aux.aux_watermark(), 2 * PAGE);
    let h = aux.output_begin().unwrap();
    assert_eq!(h.wakeup(), 2 * PAGE);
    assert!(!h.end(2 * PAGE - 8).wakeup);
    let h = aux.output_begin().unwrap();
    let end: AuxEnd = h.end(100);
    assert!(end.wakeup && !end.disable);
    mm.read().unwrap();
    // aux_wakeup is now 2 pages: the handle's wakeup mark is 4 pages.
    assert_eq!(aux.output_begin().unwrap().wakeup(), 4 * PAGE);

    let (rb, _mm) = ring(
        4,
        AuxConfig {
            writable: true,
            aux_watermark: 1000,
        },
    );
    assert_eq!(rb.aux().unwrap().aux_watermark(), 1000);
}

#[test]
fn truncated_wakes_and_asks_for_disable() {
    let (rb, _mm) = ring(4, AuxConfig::default());
    let mut h = rb.aux().unwrap().output_begin().unwrap();
    h.flag(PERF_AUX_FLAG_TRUNCATED).unwrap();
    let end = h.end(8);
    assert!(end.wakeup && end.disable);
    assert_eq!(end.record.unwrap().flags, PERF_AUX_FLAG_TRUNCATED);
}

#[test]
fn overwrite_mode_takes_the_drivers_head_and_never_wakes() {
    // rb_alloc_aux without RING_BUFFER_WRITABLE: aux_overwrite, watermark 0;
    // perf_aux_output_end: flags |= OVERWRITE, aux_head = handle->head.
    let (rb, mut mm) = ring(
        1,
        AuxConfig {
            writable: false,
            aux_watermark: 0,
        },
    );
    let aux = rb.aux().unwrap();
    assert!(aux.aux_overwrite());
    assert_eq!(aux.aux_watermark(), 0);
    let mut h = aux.output_begin().unwrap();
    assert_eq!(h.size(), 0);
    // The PMU writes 2.5 areas' worth, wrapping.
    let total = PAGE * 5 / 2;
    for pos in (0..total).step_by(16) {
        h.write_at(pos, &stream(pos, pos + 16)).unwrap();
    }
    h.set_head(total);
    let end = h.end(total);
    assert!(!end.wakeup);
    assert_eq!(
        end.record,
        Some(AuxRecord {
            aux_offset: total,
            aux_size: total,
            flags: PERF_AUX_FLAG_OVERWRITE
        })
    );
    // OVERWRITE alone says nothing new: no record.
    let mut h = aux.output_begin().unwrap();
    h.set_head(total);
    assert_eq!(h.end(0).record, None);
    assert_eq!(rb.wakeup().count(), 0);

    // Read after stop: the last aux_size bytes, oldest first, wrapped.
    let snap = mm.read_snapshot(0).unwrap();
    assert!(snap.wrapped);
    assert_eq!(snap.offset, total - PAGE);
    assert_eq!(snap.data, stream(total - PAGE, total).as_slice());
    // perf's snapshot size limit keeps the newest bytes.
    let snap = mm.read_snapshot(100).unwrap();
    assert_eq!(snap.data, stream(total - 100, total).as_slice());
}

#[test]
fn an_overwrite_area_that_did_not_wrap_reads_from_its_start() {
    let (rb, mut mm) = ring(
        1,
        AuxConfig {
            writable: false,
            aux_watermark: 0,
        },
    );
    let mut h = rb.aux().unwrap().output_begin().unwrap();
    h.write_at(0, &stream(0, 1000)).unwrap();
    h.set_head(1000);
    h.end(1000);
    let snap = mm.read_snapshot(0).unwrap();
    assert!(!snap.wrapped);
    assert_eq!((snap.offset, snap.data), (0, stream(0, 1000).as_slice()));
}

#[test]
fn copies_cross_the_wrap_and_refuse_ranges_longer_than_the_area() {
    // rb_output_aux / perf_output_copy_aux: any range [from, to) across the wrap.
    let (rb, mm) = ring(
        2,
        AuxConfig {
            writable: false,
            aux_watermark: 0,
        },
    );
    let aux = rb.aux().unwrap();
    let size = aux.aux_size();
    let h = aux.output_begin().unwrap();
    // Positions size..2*size: the area holds stream(size, 2*size).
    for pos in (size..2 * size).step_by(64) {
        h.write_at(pos, &stream(pos, pos + 64)).unwrap();
    }
    drop(h);
    for (from, to) in [
        (size, 2 * size),
        (2 * size - 100, 2 * size),
        (size + 5, size + 5),
        (size + 3000, size + 3000 + size / 2 + 7),
        (2 * size - 1, 2 * size),
    ] {
        let want = stream(from, to);
        let mut v = Vec::new();
        assert_eq!(aux.copy_aux(from, to, &mut v).unwrap(), to - from);
        assert_eq!(v, want, "[{from}, {to})");
        let mut s = vec![0u8; (to - from) as usize];
        aux.copy_aux_to_slice(from, to, &mut s).unwrap();
        assert_eq!(s, want);
        let mut c = Vec::new();
        mm.copy(from, to, &mut c).unwrap();
        assert_eq!(c, want);
    }
    // [5, size + 6): longer than the area.
    assert_eq!(
        aux.copy_aux(5, size + 6, &mut Vec::new()),
        Err(RingError::AuxRange {
            from: 5,
            to: size + 6,
            size
        })
    );
}

#[test]
fn bad_aux_heads_are_errors() {
    let (rb, mut mm) = ring(1, AuxConfig::default());
    let aux_head = rb
        .memory()
        .user_word(perfaux_abi::mmap_page::offsets::AUX_HEAD);
    aux_head.store(PAGE + 8, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        mm.read(),
        Err(RingError::AuxHeadTooFarAhead { .. })
    ));
    aux_head.store(u64::MAX - 3, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        mm.read(),
        Err(RingError::AuxHeadBehindTail { .. })
    ));
}
