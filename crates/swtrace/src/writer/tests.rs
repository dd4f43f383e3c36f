//! The writer's own unit tests.

use super::lifetime::existing;
use super::*;
use crate::decode::{Event, decode};
use crate::format::LostKind;
use crate::probe::Probe;
use crate::shadow::ShadowStack;

/// The layout the hot path relies on (ThreadTrace's doc): its fields in the first cache
/// line, the shadow stack's depth at the start of the second.
#[test]
fn hot_fields_share_one_cache_line() {
    use std::mem::offset_of;
    assert_eq!(std::mem::align_of::<ThreadTrace>(), 64);
    assert!(offset_of!(ThreadTrace, last_ticks) + 8 <= 64);
    assert_eq!(offset_of!(ThreadTrace, shadow), 64);
    assert_eq!(offset_of!(ShadowStack, depth), 0);
}

static WRAP: Probe = Probe::new("writer_wrap");

/// Packets that straddle the end of an overwrite region (format doc: byte `p` of the
/// stream is at `base[p & (size - 1)]`) decode as the same events wherever they land,
/// including the two-byte fast path's last byte (offset size - 1).
#[test]
fn packets_across_the_region_end_decode_at_every_offset() {
    WRAP.id().unwrap();
    for start in 120..200u64 {
        let mut aux = vec![0u8; MIN_REGION];
        // SAFETY: `aux` outlives the writer, uninstalled below.
        let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
        let mut cfg = WriterConfig::overwrite(region);
        cfg.aux_head = start;
        // Every packet carries delta 0 after the first: two-byte ENTER/EXIT.
        cfg.timing = Timing::Periodic { every: 1000 };
        install(cfg).unwrap();
        for _ in 0..20 {
            let _g = WRAP.enter();
        }
        let end = uninstall().unwrap().aux_head;
        assert!(
            end - start < MIN_REGION as u64,
            "the stream fits the region"
        );
        let stream: Vec<u8> = (start..end)
            .map(|p| aux[(p & (MIN_REGION as u64 - 1)) as usize])
            .collect();
        let events = decode(&stream);
        let id = WRAP.id().unwrap().0;
        let calls = events
            .iter()
            .filter(|e| matches!(e, Event::Enter { id: i, .. } if *i == id))
            .count();
        let exits = events
            .iter()
            .filter(|e| matches!(e, Event::Exit { id: Some(i), .. } if *i == id))
            .count();
        assert_eq!((calls, exits), (20, 20), "start {start}: {events:?}");
        assert!(matches!(events.last(), Some(Event::Stopped { .. })));
    }
}

#[test]
fn uninstall_reports_unreported_drops_before_stopped() {
    let mut aux = vec![0u8; 1024];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    install(WriterConfig::full_trace(region, None)).unwrap();
    let tt = existing().unwrap();
    // As a signal handler hitting a busy writer three times would.
    for _ in 0..3 {
        tt.count_lost_nested();
    }
    let end = uninstall().unwrap().aux_head as usize;
    let events = decode(&aux[..end]);
    assert!(matches!(events[0], Event::Sync { .. }));
    assert!(matches!(
        events[1],
        Event::Lost {
            kind: LostKind::Nested,
            count: 3,
            ..
        }
    ));
    assert!(matches!(events[2], Event::Stopped { .. }));
    assert_eq!(events.len(), 3);
}

static FORK_OUTER: Probe = Probe::new("writer_fork_outer");
static FORK_INNER: Probe = Probe::new("writer_fork_inner");

/// What a forked child's fork handler does ([`forget_after_fork`], then
/// `ProbeGuard::forget_call` on the calls open at the fork): from then on nothing reaches the
/// old region (its memory is the parent's), neither a probe's entry nor the return of a call
/// opened before; the next install makes a state of its own, whose trace holds only its own
/// calls.
#[test]
fn forget_after_fork_writes_nothing_more_into_the_old_region() {
    FORK_OUTER.id().unwrap();
    FORK_INNER.id().unwrap();
    let mut old = vec![0u8; MIN_REGION];
    // SAFETY: `old` outlives every write through the region: nothing writes after the forget.
    let region = unsafe { AuxRegion::new(old.as_mut_ptr(), old.len()) }.unwrap();
    install(WriterConfig::full_trace(region, None)).unwrap();
    let mut open = FORK_OUTER.enter();
    let head = aux_head().unwrap() as usize;
    forget_after_fork();
    assert!(existing().is_none(), "the state is forgotten");
    open.forget_call();
    {
        let _g = FORK_INNER.enter();
    }
    drop(open);
    let mut new = vec![0u8; MIN_REGION];
    // SAFETY: `new` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(new.as_mut_ptr(), new.len()) }.unwrap();
    install(WriterConfig::full_trace(region, None)).unwrap();
    {
        let _g = FORK_INNER.enter();
    }
    let end = uninstall().unwrap().aux_head as usize;
    assert!(
        old[head..].iter().all(|&b| b == 0),
        "nothing written into the old region after the forget"
    );
    let inner = FORK_INNER.id().unwrap().0;
    let events = decode(&new[..end]);
    let calls: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Enter { .. } | Event::Exit { .. }))
        .collect();
    assert_eq!(calls.len(), 2, "{events:?}");
    assert!(matches!(calls[0], Event::Enter { id, .. } if *id == inner));
    assert!(matches!(calls[1], Event::Exit { id: Some(id), .. } if *id == inner));
}

static TAGGED: Probe = Probe::new("writer_tagged");
static INNER: Probe = Probe::new("writer_tag_inner");

/// A tag after an entry decodes as a TAG of that call, at its depth, in stream order; also
/// where a SYNC fell due between the entry and the tag (the SYNC lists the call), and among
/// untimed packets (sparse timing holds them back together, in order).
#[test]
fn a_tag_belongs_to_the_call_just_entered() {
    let id = TAGGED.id().unwrap().0;
    INNER.id().unwrap();
    for timing in [Timing::Full, Timing::Periodic { every: 3 }] {
        let mut aux = vec![0u8; 64 << 10];
        // SAFETY: `aux` outlives the writer, uninstalled below.
        let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
        let mut cfg = WriterConfig::full_trace(region, None);
        cfg.timing = timing;
        // A SYNC is due every 128 bytes: some tags come right after one.
        cfg.sync_period = 128;
        install(cfg).unwrap();
        for n in 0..200u64 {
            let outer = TAGGED.enter();
            outer.tag(n << 40 | 1);
            let inner = INNER.enter();
            inner.tag(n);
            drop(inner);
            drop(outer);
        }
        let end = uninstall().unwrap().aux_head as usize;
        let events = decode(&aux[..end]);
        let mut open: Vec<u32> = Vec::new();
        let (mut outer_tags, mut inner_tags) = (Vec::new(), Vec::new());
        let mut syncs_before_a_tag = 0;
        for (i, e) in events.iter().enumerate() {
            match *e {
                Event::Enter { id, .. } => open.push(id),
                Event::Exit { .. } => {
                    open.pop();
                }
                Event::Tag { depth, value, .. } => {
                    assert_eq!(depth as usize, open.len() - 1, "{timing:?} {e:?}");
                    if matches!(events[i - 1], Event::Sync { .. }) {
                        syncs_before_a_tag += 1;
                    }
                    if *open.last().unwrap() == id {
                        outer_tags.push(value);
                    } else {
                        inner_tags.push(value);
                    }
                }
                _ => {}
            }
        }
        let want: Vec<u64> = (0..200).collect();
        assert_eq!(inner_tags, want, "{timing:?}");
        let want: Vec<u64> = (0..200).map(|n| n << 40 | 1).collect();
        assert_eq!(outer_tags, want, "{timing:?}");
        assert!(
            syncs_before_a_tag > 0,
            "{timing:?}: no tag after a due SYNC"
        );
    }
}

static MIRRORED: Probe = Probe::new("writer_mirrored");

/// A head mirror holds the head after every packet; cleared, it is left as it was.
#[test]
fn the_head_mirror_follows_every_packet_until_cleared() {
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::Relaxed;
    MIRRORED.id().unwrap();
    let mut aux = vec![0u8; 1 << 16];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    install(WriterConfig::full_trace(region, None)).unwrap();
    let word = Box::new(AtomicU64::new(u64::MAX));
    // SAFETY: `word` lives until the mirror is cleared below.
    assert!(unsafe { set_head_mirror(&*word) });
    let head = || existing().unwrap().head.load(Relaxed);
    assert_eq!(word.load(Relaxed), head(), "stored at once");
    for _ in 0..5 {
        let _g = MIRRORED.enter();
        assert_eq!(word.load(Relaxed), head());
    }
    assert_eq!(word.load(Relaxed), head());
    // SAFETY: null stops the mirror.
    assert!(unsafe { set_head_mirror(std::ptr::null()) });
    let at = word.load(Relaxed);
    {
        let _g = MIRRORED.enter();
    }
    assert!(head() > at);
    assert_eq!(word.load(Relaxed), at, "cleared: no more stores");
    uninstall().unwrap();
}
