//! The decoder's state stays bounded whatever the stream says: a
//! crafted window of nothing but ENTERs (two bytes a call) or of untimed
//! events does not grow its frame stack or its held events with the window;
//! depths stay exact and the forgotten frames are said with a Lost note.

use perfaux_swtrace::decode::{Decoder, Event, MAX_FRAMES};
use perfaux_swtrace::format::{
    self, LostKind, SYNC_FLAG_UNTIMED, SyncHeader, TimeConv, encode_enter, encode_exit, encode_sync,
};
use perfaux_testutil::CountingAlloc;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// A SYNC (with `flags`) followed by `enters` ENTERs of probe 5 and then
/// `exits` EXITs, each `delta` ticks after the one before; `pairs`: each
/// ENTER followed by its EXIT instead.
fn stream(flags: u8, enters: usize, exits: usize, delta: u64, pairs: bool) -> Vec<u8> {
    let mut buf = vec![0u8; format::MAX_SYNC + 4 * enters + 2 * exits];
    let h = SyncHeader {
        flags,
        tid: 42,
        depth: 0,
        first: 0,
        ticks: 1000,
        conv: TimeConv::IDENTITY,
    };
    let mut n = encode_sync(&mut buf, &h, &[]);
    for _ in 0..enters {
        n += encode_enter(&mut buf[n..], 5, delta);
        if pairs {
            n += encode_exit(&mut buf[n..], delta);
        }
    }
    for _ in 0..exits {
        n += encode_exit(&mut buf[n..], delta);
    }
    buf.truncate(n);
    buf
}

/// The most bytes `f` had allocated at once.
fn peak(f: impl FnOnce()) -> usize {
    let level = CountingAlloc::reset_peak();
    f();
    CountingAlloc::peak_since(level)
}

#[test]
fn a_window_of_only_enters_keeps_a_bounded_frame_stack_and_says_what_it_forgot() {
    // One million open calls (2 MB of ENTERs), then every one returns.
    const CALLS: usize = 1 << 20;
    let bytes = stream(0, CALLS, CALLS, 1, false);
    let (mut forgotten, mut lost_notes, mut deepest) = (0u64, 0, 0u32);
    let (mut named_exits, mut unnamed_exits, mut events) = (0usize, 0usize, 0usize);
    let mut depth_ok = true;
    let used = peak(|| {
        let mut expect = 0u32;
        for e in Decoder::new(&bytes) {
            events += 1;
            match e {
                Event::Enter { depth, .. } => {
                    depth_ok &= depth == expect;
                    expect += 1;
                    deepest = deepest.max(depth);
                }
                Event::Exit { depth, id, .. } => {
                    expect -= 1;
                    depth_ok &= depth == expect;
                    match id {
                        Some(_) => named_exits += 1,
                        None => unnamed_exits += 1,
                    }
                }
                Event::Lost {
                    kind: LostKind::Depth,
                    count,
                    ..
                } => {
                    lost_notes += 1;
                    forgotten += count;
                }
                _ => {}
            }
        }
    });
    assert!(depth_ok, "every depth is exact");
    assert_eq!(deepest as usize, CALLS - 1);
    assert_eq!(named_exits + unnamed_exits, CALLS);
    // Frames are 8 bytes; the stack holds at most MAX_FRAMES of them.
    assert!(
        used <= 16 * MAX_FRAMES,
        "{used} bytes at once decoding {CALLS} open calls"
    );
    assert!(lost_notes > 0, "the forgotten frames are said");
    assert_eq!(
        forgotten as usize, unnamed_exits,
        "each forgotten frame is one return with no id"
    );
    assert!(
        named_exits >= MAX_FRAMES / 2,
        "the innermost calls keep their ids"
    );
    assert!(events > 2 * CALLS);
}

#[test]
fn a_limited_decoder_holds_at_most_its_share_of_untimed_events() {
    // Sparse timing: every call untimed (delta 0), held for a next timed
    // packet that never comes. Alone, a decoder holds up to MAX_HELD; given
    // a share of a merge's budget, no more than that share.
    const CALLS: usize = 1 << 16;
    let bytes = stream(SYNC_FLAG_UNTIMED, CALLS, 0, 0, true);
    let count = |limit: Option<usize>| {
        let mut n = 0;
        let used = peak(|| {
            let mut d = Decoder::new(&bytes);
            if let Some(held) = limit {
                d.limit(MAX_FRAMES, held);
            }
            for e in d {
                n += usize::from(matches!(e, Event::Enter { .. }));
            }
        });
        (n, used)
    };
    let (n, whole) = count(None);
    assert_eq!(n, CALLS);
    let (n, limited) = count(Some(16));
    assert_eq!(n, CALLS, "every event still goes out");
    assert!(
        limited < whole / 16,
        "16 held: {limited} bytes at once, against {whole} with the default bound"
    );
}

#[test]
fn try_each_past_the_frame_bound_gives_the_iterators_events() {
    // Deeper than the kept frames: the common ENTER path reaches the bound
    // (a Lost note queued) several times, in memory and read in pieces.
    const CALLS: usize = 3 * MAX_FRAMES + 7;
    let bytes = stream(0, CALLS, CALLS, 1, false);
    let whole: Vec<Event> = Decoder::new(&bytes).collect();
    assert!(whole.iter().any(|e| matches!(
        e,
        Event::Lost {
            kind: LostKind::Depth,
            ..
        }
    )));
    for piece in [None, Some(0), Some(4096)] {
        let mut d = match piece {
            None => Decoder::new(&bytes),
            Some(p) => Decoder::from_reader(&bytes[..], 0, p),
        };
        let mut each = Vec::new();
        let done: Result<(), ()> = d.try_each(|e| {
            each.push(e);
            Ok(())
        });
        assert!(done.is_ok());
        assert!(each == whole, "pieces {piece:?}");
    }
}
