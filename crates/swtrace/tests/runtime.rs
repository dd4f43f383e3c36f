//! The instrumentation runtime and writer, end to end: probes -> AUX bytes -> decoder.

mod common;

use common::*;
use perfaux_swtrace::decode::{Decoder, Event, SkipReason, decode};
use perfaux_swtrace::format;
use perfaux_swtrace::writer::{self, Frame};
use perfaux_swtrace::{AuxMode, AuxRegion, Probe, ProbeId, WriterConfig, WriterError};
use proptest::prelude::*;

static A: Probe = Probe::new("rt_a");
static B: Probe = Probe::new("rt_b");
static C: Probe = Probe::new("rt_c");

fn id(p: &'static Probe) -> u32 {
    p.id().unwrap().0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random call trees -> writer -> decoder gives exactly the calls and returns, with their
    /// depths (format doc: ENTER at depth d is matched by EXIT at depth d).
    #[test]
    fn call_trees_round_trip(calls in tree_strategy(6)) {
        register_pool();
        let stream = trace_full(1 << 20, 512, || run(&calls));
        let events = decode(&stream);
        let mut want = Vec::new();
        expected(&calls, 0, &mut want);
        prop_assert_eq!(steps(&events), want);
        let starts_with_sync = matches!(events[0], Event::Sync { offset: 0, depth: 0, .. });
        prop_assert!(starts_with_sync, "first event {:?}", events[0]);
        let ends_stopped = matches!(events.last(), Some(Event::Stopped { .. }));
        prop_assert!(ends_stopped, "last event {:?}", events.last());
        let clean = !events.iter().any(|e| matches!(e, Event::Skipped { .. } | Event::Lost { .. }));
        prop_assert!(clean, "skips or losses in {:?}", events);
        assert_times_monotonic(&events);
    }

    /// Every suffix window of a stream decodes on its own after a short resync, and from its
    /// first SYNC on equals the tail of the full decode (format doc, "SYNC": a window decodes
    /// from its first SYNC, at most about sync_period bytes in).
    #[test]
    fn every_suffix_window_matches_the_full_decode(calls in tree_strategy(5)) {
        register_pool();
        let period = 128u32;
        let stream = trace_full(1 << 20, period, || run(&calls));
        let full = decode(&stream);
        let max_skip = period as u64 + (format::MAX_SYNC + format::MAX_EVENT + 2 * format::MAX_LOST) as u64;
        for s in 0..stream.len() {
            let window: Vec<Event> = Decoder::with_offset(&stream[s..], s as u64).collect();
            let Some(first_sync) = window.iter().position(|e| matches!(e, Event::Sync { .. })) else {
                // No SYNC in the tail: all of it is skipped, and it is short.
                prop_assert!((stream.len() - s) as u64 <= max_skip);
                continue;
            };
            let Event::Sync { offset, .. } = window[first_sync] else { unreachable!() };
            prop_assert!(offset - s as u64 <= max_skip, "resync after {} bytes", offset - s as u64);
            let tail_start = full.iter().position(|e| matches!(e, Event::Sync { offset: o, .. } if *o == offset)).unwrap();
            prop_assert_eq!(&window[first_sync..], &full[tail_start..]);
            if first_sync > 0 {
                prop_assert_eq!(&window[0], &Event::Skipped { offset: s as u64, bytes: offset - s as u64, reason: SkipReason::NoSync });
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Overwrite mode with any region size: the snapshot (the `size` bytes before the head,
    /// oldest first, starting mid-packet) decodes to the newest calls and returns exactly
    /// (packets and SYNCs straddle the region's end at every possible point).
    #[test]
    fn overwrite_snapshots_decode_to_the_newest_calls(
        calls in tree_strategy(5),
        repeat in 1usize..20,
        size_log2 in 9u32..13,
        period in prop_oneof![Just(128u32), Just(512u32)],
    ) {
        register_pool();
        let size = 1usize << size_log2;
        let mut aux = vec![0u8; size];
        // SAFETY: `aux` outlives the writer, uninstalled below.
        let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), size) }.unwrap();
        let mut cfg = WriterConfig::overwrite(region);
        cfg.sync_period = period;
        writer::install(cfg).unwrap();
        for _ in 0..repeat {
            run(&calls);
        }
        let head = writer::aux_head().unwrap();
        writer::uninstall().unwrap();
        let mut want = Vec::new();
        for _ in 0..repeat {
            expected(&calls, 0, &mut want);
        }
        let start = head.saturating_sub(size as u64);
        let snap: Vec<u8> = (start..head).map(|p| aux[(p as usize) & (size - 1)]).collect();
        let events: Vec<Event> = Decoder::with_offset(&snap, start).collect();
        let got = steps(&events);
        prop_assert!(got.len() <= want.len());
        prop_assert_eq!(&got[..], &want[want.len() - got.len()..]);
        if head > size as u64 {
            // Bytes before the first SYNC are skipped; the rest decodes cleanly.
            let corrupt = events.iter().any(|e| matches!(e, Event::Skipped { reason: SkipReason::Corrupt(_), .. }));
            prop_assert!(!corrupt, "corrupt packets in {:?}", events);
        }
    }
}

#[test]
fn long_ids_use_the_long_enter_form() {
    register_pool();
    let big = POOL
        .iter()
        .find(|p| p.id().unwrap().0 >= 128)
        .expect("pool registers ids >= 128");
    let small = POOL.iter().find(|p| p.id().unwrap().0 < 128);
    let stream = trace_full(4096, 512, || {
        let _g = big.enter();
        if let Some(s) = small {
            let _h = s.enter();
        }
    });
    let events = decode(&stream);
    let Event::Enter { offset, id, .. } = events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(id, big.id().unwrap().0);
    assert_eq!(
        stream[offset as usize],
        format::ENTER,
        "ids >= 128 use header 0x02"
    );
    if small.is_some() {
        let Event::Enter { offset, .. } = events[2] else {
            panic!()
        };
        assert!(
            stream[offset as usize] >= 0x81,
            "ids < 128 use the short header"
        );
    }
}

#[test]
fn traced_call_costs_few_bytes() {
    // The budget: entry + exit of a traced call ~8-16 bytes. A leaf call with a short id: 2 x 3-ish.
    let stream = trace_full(1 << 16, 4096, || {
        for _ in 0..100 {
            let _g = A.enter();
        }
    });
    let events = decode(&stream);
    let first = events.iter().find_map(|e| match e {
        Event::Enter { offset, .. } => Some(*offset),
        _ => None,
    });
    let stopped = events.iter().find_map(|e| match e {
        Event::Stopped { offset, .. } => Some(*offset),
        _ => None,
    });
    let per_call = (stopped.unwrap() - first.unwrap()) as f64 / 100.0;
    assert!(per_call <= 16.0, "{per_call} bytes per traced call");
}

#[test]
fn overwrite_snapshot_decodes_the_newest_calls() {
    register_pool();
    let calls: Vec<Call> = (0..2000)
        .map(|i| Call {
            probe: i % 7,
            children: vec![Call {
                probe: 7 + i % 5,
                children: vec![],
            }],
        })
        .collect();
    let mut want = Vec::new();
    expected(&calls, 0, &mut want);
    let size = 1024usize;
    let mut aux = vec![0u8; size];
    // SAFETY: `aux` outlives the writer, uninstalled before the snapshot is read.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), size) }.unwrap();
    writer::install(WriterConfig::overwrite(region)).unwrap();
    run(&calls);
    let head = writer::aux_head().unwrap();
    let status = writer::uninstall().unwrap();
    assert!(head > 4 * size as u64, "the area wrapped several times");
    // The snapshot: the `size` bytes before the head at snapshot time, oldest first.
    let start = head - size as u64;
    let snap: Vec<u8> = (start..head)
        .map(|p| aux[(p as usize) & (size - 1)])
        .collect();
    let events: Vec<Event> = Decoder::with_offset(&snap, start).collect();
    assert!(
        matches!(
            events[0],
            Event::Skipped {
                reason: SkipReason::NoSync,
                ..
            }
        ),
        "{:?}",
        events[0]
    );
    let got = steps(&events);
    assert!(got.len() > 50, "{} steps", got.len());
    assert_eq!(
        got[..],
        want[want.len() - got.len()..],
        "the snapshot holds the newest calls"
    );
    assert!(
        status.aux_head > head,
        "STOPPED was written after the snapshot point"
    );
}

/// A opened while tracing, B while paused, C after the resume inside B: the stream and its
/// events as `kind{id}@depth` strings.
fn pause_inside_a_resume_inside_b(track_paused: bool) -> (Vec<u8>, Vec<Event>, Vec<String>) {
    let stream = trace_full_with(
        4096,
        |cfg| {
            cfg.sync_period = 512;
            cfg.track_paused = track_paused;
        },
        || {
            let _ga = A.enter();
            assert!(writer::pause());
            assert!(!writer::pause(), "already paused");
            let _gb = B.enter();
            assert!(writer::resume());
            let _gc = C.enter();
        },
    );
    let events = decode(&stream);
    let kinds = events
        .iter()
        .map(|e| match e {
            Event::Sync { depth, .. } => format!("sync{depth}"),
            Event::Enter { id, depth, .. } => format!("enter{id}@{depth}"),
            Event::Exit { id, depth, .. } => format!("exit{}@{depth}", id.unwrap_or(0)),
            Event::Paused { .. } => "paused".into(),
            Event::Resumed { .. } => "resumed".into(),
            Event::Stopped { .. } => "stopped".into(),
            other => format!("{other:?}"),
        })
        .collect();
    (stream, events, kinds)
}

/// The steps of the window that starts at the first SYNC of `depth`.
fn window_from_sync(stream: &[u8], events: &[Event], depth: u32) -> Vec<common::Step> {
    let Some(Event::Sync { offset, .. }) = events
        .iter()
        .find(|e| matches!(e, Event::Sync { depth: d, .. } if *d == depth))
    else {
        panic!("no SYNC at depth {depth}: {events:?}")
    };
    steps(&decode(&stream[*offset as usize..]))
}

/// By default a paused thread is not observed (Intel PT's view: nothing of what ran while
/// tracing was off): B, opened while paused, is in neither the SYNC at resume nor the stream,
/// and C shows inside A, the call that was open at the pause.
#[test]
fn pause_and_resume_mark_boundaries_and_resync_with_the_calls_open_at_the_pause() {
    let (a, c) = (id(&A), id(&C));
    let (stream, events, kinds) = pause_inside_a_resume_inside_b(false);
    assert_eq!(
        kinds,
        [
            "sync0".to_string(),
            format!("enter{a}@0"),
            "paused".into(),
            "sync1".into(),
            "resumed".into(),
            format!("enter{c}@1"),
            format!("exit{c}@1"),
            format!("exit{a}@0"),
            "stopped".into(),
        ]
    );
    assert_eq!(
        window_from_sync(&stream, &events, 1),
        [
            common::Step::Enter(c, 1),
            common::Step::Exit(c, 1),
            common::Step::Exit(a, 0)
        ]
    );
}

/// With `track_paused` the shadow stack follows calls while paused: the SYNC at resume names
/// B, so C shows inside B and B's return is in the stream.
#[test]
fn track_paused_resyncs_with_the_calls_opened_while_paused() {
    let (a, b, c) = (id(&A), id(&B), id(&C));
    let (stream, events, kinds) = pause_inside_a_resume_inside_b(true);
    assert_eq!(
        kinds,
        [
            "sync0".to_string(),
            format!("enter{a}@0"),
            "paused".into(),
            "sync2".into(),
            "resumed".into(),
            format!("enter{c}@2"),
            format!("exit{c}@2"),
            format!("exit{b}@1"),
            format!("exit{a}@0"),
            "stopped".into(),
        ]
    );
    // A window starting at the SYNC after RESUMED names the calls opened while paused.
    assert_eq!(
        window_from_sync(&stream, &events, 2),
        [
            common::Step::Enter(c, 2),
            common::Step::Exit(c, 2),
            common::Step::Exit(b, 1),
            common::Step::Exit(a, 0)
        ]
    );
}

#[test]
fn start_paused_writes_nothing_until_resume() {
    let mut aux = vec![0u8; 4096];
    // SAFETY: `aux` outlives the writer.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
    let mut cfg = WriterConfig::full_trace(region, None);
    cfg.start_paused = true;
    writer::install(cfg).unwrap();
    {
        let _g = A.enter();
    }
    assert_eq!(
        writer::aux_head(),
        Some(0),
        "aux_start_paused: nothing written"
    );
    assert!(writer::resume());
    {
        let _g = B.enter();
    }
    let end = writer::uninstall().unwrap().aux_head as usize;
    let events = decode(&aux[..end]);
    assert!(
        matches!(
            events[0],
            Event::Sync {
                offset: 0,
                depth: 0,
                ..
            }
        ),
        "{events:?}"
    );
    assert!(matches!(events[1], Event::Resumed { .. }), "{events:?}");
    assert_eq!(
        steps(&events),
        [
            common::Step::Enter(id(&B), 0),
            common::Step::Exit(id(&B), 0)
        ]
    );
}
#[test]
fn install_checks_its_arguments() {
    let mut aux = vec![0u8; 1024];
    // SAFETY: the regions below are never installed or are uninstalled before `aux` drops.
    let e = unsafe { AuxRegion::new(aux.as_mut_ptr(), 1000) }.unwrap_err();
    assert_eq!(e, WriterError::BadRegionSize(1000));
    // SAFETY: as above.
    let e = unsafe { AuxRegion::new(aux.as_mut_ptr(), 128) }.unwrap_err();
    assert_eq!(e, WriterError::BadRegionSize(128));
    // SAFETY: as above.
    let e = unsafe { AuxRegion::new(std::ptr::null_mut(), 1024) }.unwrap_err();
    assert_eq!(e, WriterError::NullRegion);
    // SAFETY: as above.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 1024) }.unwrap();
    let mut cfg = WriterConfig::overwrite(region);
    cfg.mode = AuxMode::FullTrace { limit: 2048 };
    assert!(matches!(
        writer::install(cfg),
        Err(WriterError::BadLimit { .. })
    ));
    // SAFETY: as above.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 1024) }.unwrap();
    let mut cfg = WriterConfig::overwrite(region);
    cfg.sync_period = 64;
    assert_eq!(writer::install(cfg), Err(WriterError::BadSyncPeriod(64)));
    assert_eq!(writer::uninstall(), Err(WriterError::NotInstalled));
    // SAFETY: as above.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 1024) }.unwrap();
    writer::install(WriterConfig::overwrite(region)).unwrap();
    // SAFETY: as above.
    let again = unsafe { AuxRegion::new(aux.as_mut_ptr(), 1024) }.unwrap();
    assert_eq!(
        writer::install(WriterConfig::overwrite(again)),
        Err(WriterError::AlreadyInstalled)
    );
    writer::uninstall().unwrap();
    assert_eq!(writer::aux_head(), None);
}

#[test]
fn calls_open_across_reinstall_do_not_leak_into_the_next_stream() {
    let (b, c) = (id(&B), id(&C));
    let outer = A.enter(); // no writer yet: not observed
    let mut aux1 = vec![0u8; 4096];
    let mut aux2 = vec![0u8; 4096];
    // SAFETY: both buffers outlive their writers, uninstalled below.
    let r1 = unsafe { AuxRegion::new(aux1.as_mut_ptr(), 4096) }.unwrap();
    // SAFETY: as above.
    let r2 = unsafe { AuxRegion::new(aux2.as_mut_ptr(), 4096) }.unwrap();
    writer::install(WriterConfig::full_trace(r1, None)).unwrap();
    let gb = B.enter();
    let end1 = writer::uninstall().unwrap().aux_head as usize;
    writer::install(WriterConfig::full_trace(r2, None)).unwrap();
    drop(gb); // B's return belongs to the first stream: nothing in the second
    {
        let _gc = C.enter();
    }
    drop(outer); // never observed
    let end2 = writer::uninstall().unwrap().aux_head as usize;
    assert_eq!(steps(&decode(&aux1[..end1])), [common::Step::Enter(b, 0)]);
    assert_eq!(
        steps(&decode(&aux2[..end2])),
        [common::Step::Enter(c, 0), common::Step::Exit(c, 0)]
    );
}

#[test]
fn callchain_comes_from_the_shadow_stack_innermost_first() {
    let (a, b, c) = (id(&A), id(&B), id(&C));
    let mut out = [Frame {
        id: ProbeId(0),
        addr: 0,
    }; 8];
    let mut info = writer::Callchain::default();
    trace_full(4096, 512, || {
        let _ga = A.enter();
        let _gb = B.enter();
        let _gc = C.enter();
        info = writer::callchain(&mut out);
    });
    assert_eq!(info.depth, 3);
    assert_eq!(info.written, 3);
    assert_eq!(
        out[..3].iter().map(|f| f.id.0).collect::<Vec<_>>(),
        [c, b, a]
    );
    if cfg!(target_arch = "x86_64") {
        assert!(
            out[..3].iter().all(|f| f.addr != 0),
            "entry addresses captured"
        );
    }
    // Without a writer or shadow-stack user nothing is observed.
    let _ga = A.enter();
    assert_eq!(writer::callchain(&mut out).depth, 0);
    writer::enable_shadow_stack();
    {
        let _gb = B.enter();
        let ch = writer::callchain(&mut out);
        assert_eq!((ch.depth, out[0].id.0), (1, b));
    }
    writer::disable_shadow_stack();
}

static DEEP: Probe = Probe::new("rt_deep");

fn recurse(n: u32, at_bottom: &mut dyn FnMut()) {
    let _g = DEEP.enter();
    if n > 1 {
        recurse(n - 1, at_bottom);
    } else {
        at_bottom();
    }
}

#[test]
fn shadow_stack_overflow_is_counted_and_the_trace_stays_consistent() {
    let deep = id(&DEEP);
    let mut out = vec![
        Frame {
            id: ProbeId(0),
            addr: 0
        };
        300
    ];
    let mut info = writer::Callchain::default();
    let stream = trace_full(1 << 16, 128, || {
        recurse(200, &mut || info = writer::callchain(&mut out));
    });
    assert_eq!(info.depth, 200);
    assert_eq!(info.written, writer::SHADOW_DEPTH);
    assert_eq!(info.overflows, 200 - writer::SHADOW_DEPTH as u64);
    let events = decode(&stream);
    let st = steps(&events);
    assert_eq!(st.len(), 400);
    for (i, s) in st.iter().enumerate() {
        let want = if i < 200 {
            common::Step::Enter(deep, i as u32)
        } else {
            common::Step::Exit(deep, (399 - i) as u32)
        };
        assert_eq!(*s, want);
    }
    // A window starting at a SYNC taken deep in the recursion knows the depth; the frames
    // beyond the shadow stack's bound exit with unknown ids but at the right depths.
    let deep_sync = events
        .iter()
        .find_map(|e| match e {
            Event::Sync { offset, depth, .. } if *depth > writer::SHADOW_DEPTH as u32 => {
                Some(*offset)
            }
            _ => None,
        })
        .expect("a SYNC beyond the shadow stack's bound");
    let window = decode(&stream[deep_sync as usize..]);
    let exits: Vec<u32> = steps(&window)
        .iter()
        .filter_map(|s| match s {
            common::Step::Exit(_, d) => Some(*d),
            _ => None,
        })
        .collect();
    assert_eq!(exits.last(), Some(&0));
    assert!(exits.windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn threads_write_their_own_streams_without_interference() {
    register_pool();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let calls: Vec<Call> = (0..500)
                    .map(|i| Call {
                        probe: (t * 37 + i) % POOL.len(),
                        children: vec![Call {
                            probe: (t + i * 3) % POOL.len(),
                            children: vec![],
                        }],
                    })
                    .collect();
                let stream = trace_full(1 << 18, 512, || run(&calls));
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() } as u32;
                (calls, stream, tid)
            })
        })
        .collect();
    for h in handles {
        let (calls, stream, tid) = h.join().unwrap();
        let events = decode(&stream);
        let mut want = Vec::new();
        expected(&calls, 0, &mut want);
        assert_eq!(steps(&events), want);
        assert!(
            events
                .iter()
                .all(|e| !matches!(e, Event::Sync { tid: t, .. } if *t != tid))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::Skipped { .. } | Event::Lost { .. }))
        );
    }
}

#[test]
fn probes_without_a_writer_write_nothing_and_unwinding_closes_calls() {
    // No writer: nothing observed.
    {
        let _g = A.enter();
    }
    assert_eq!(writer::aux_head(), None);
    // A panic unwinding through a traced call writes its EXIT.
    let (a, b) = (id(&A), id(&B));
    let stream = trace_full(4096, 512, || {
        let r = std::panic::catch_unwind(|| {
            let _ga = A.enter();
            let _gb = B.enter();
            panic!("unwind through two traced calls");
        });
        assert!(r.is_err());
    });
    assert_eq!(
        steps(&decode(&stream)),
        [
            common::Step::Enter(a, 0),
            common::Step::Enter(b, 1),
            common::Step::Exit(b, 1),
            common::Step::Exit(a, 0)
        ]
    );
}

#[test]
fn a_thread_exiting_with_its_writer_installed_frees_it_cleanly() {
    let a = id(&A);
    let mut aux = vec![0u8; 4096];
    let base = aux.as_mut_ptr() as usize;
    std::thread::spawn(move || {
        // SAFETY: the buffer outlives this thread (joined below before `aux` is read or freed).
        let region = unsafe { AuxRegion::new(base as *mut u8, 4096) }.unwrap();
        writer::install(WriterConfig::full_trace(region, None)).unwrap();
        let _g = A.enter();
        // The thread ends with the writer installed: its thread-local owner frees the state.
    })
    .join()
    .unwrap();
    // No STOPPED (never uninstalled); the untouched rest of the buffer is zeros = PAD.
    let events = decode(&aux);
    assert_eq!(
        steps(&events),
        [common::Step::Enter(a, 0), common::Step::Exit(a, 0)]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::Stopped { .. } | Event::Skipped { .. }))
    );
}

#[test]
fn chunks_of_one_stream_decode_as_one_and_gaps_are_reported() {
    register_pool();
    let calls: Vec<Call> = (0..200)
        .map(|i| Call {
            probe: i % 9,
            children: vec![],
        })
        .collect();
    let mut want = Vec::new();
    expected(&calls, 0, &mut want);
    let stream = trace_full(1 << 16, 128, || run(&calls));
    // Cut at arbitrary points, also inside packets and SYNCs: the same events as one window.
    let cuts = [0usize, 1, 7, 61, 300, 301, 777, stream.len()];
    let chunks: Vec<(u64, &[u8])> = cuts
        .windows(2)
        .map(|w| (w[0] as u64, &stream[w[0]..w[1]]))
        .collect();
    assert_eq!(
        perfaux_swtrace::decode_chunks(chunks.iter().copied()),
        decode(&stream)
    );
    // Drop one chunk: a Gap, then a resync.
    let mut gapped = chunks.clone();
    gapped.remove(4);
    let events = perfaux_swtrace::decode_chunks(gapped.iter().copied());
    let gap = events
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::Skipped {
                    offset: 300,
                    bytes: 1,
                    reason: SkipReason::Gap
                }
            )
        })
        .expect("gap reported");
    assert!(matches!(
        events[gap + 1],
        Event::Skipped {
            reason: SkipReason::NoSync,
            ..
        }
    ));
    let tail = steps(&events[gap..]);
    assert_eq!(tail[..], want[want.len() - tail.len()..]);
}

#[test]
fn probes_are_found_by_id_without_the_lock() {
    register_pool();
    for p in &POOL {
        let found = perfaux_swtrace::probe_by_id(p.id().unwrap()).unwrap();
        assert!(std::ptr::eq(found, p));
    }
    assert!(perfaux_swtrace::probe_by_id(ProbeId(0)).is_none());
    assert!(perfaux_swtrace::probe_by_id(ProbeId(u32::MAX)).is_none());
}
