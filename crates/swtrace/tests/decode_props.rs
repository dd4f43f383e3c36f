//! The format and decoder under property tests: packet round trips, and arbitrary or damaged
//! bytes never panicking or looping (module doc of `decode`).

use perfaux_swtrace::decode::{Decoder, Event, SkipReason, decode};
use perfaux_swtrace::format::{
    self, LostKind, MAX_SYNC_FRAMES, Packet, SYNC_MAGIC, Sync, TimeConv, encode_packet,
    parse_packet,
};
use proptest::prelude::*;

fn sync_strategy() -> impl Strategy<Value = Sync> {
    (
        0u8..=1,
        any::<u32>(),
        prop::collection::vec(1u32.., 0..=MAX_SYNC_FRAMES),
        0u32..1000,
        any::<u64>(),
        (any::<u64>(), any::<u64>(), any::<u32>(), 0u8..=63),
    )
        .prop_map(
            |(flags, tid, frames, extra, ticks, (at, an, mult, shift))| {
                let first = extra / 2;
                let depth = first + frames.len() as u32 + (extra - first);
                Sync {
                    flags,
                    tid,
                    depth,
                    first,
                    frames,
                    ticks,
                    conv: TimeConv {
                        anchor_ticks: at,
                        anchor_ns: an,
                        mult,
                        shift,
                    },
                }
            },
        )
}

fn packet_strategy() -> impl Strategy<Value = Packet> {
    prop_oneof![
        Just(Packet::Pad),
        (1u32.., any::<u64>()).prop_map(|(id, delta)| Packet::Enter { id, delta }),
        (1u32..128, 0u64..1000).prop_map(|(id, delta)| Packet::Enter { id, delta }),
        any::<u64>().prop_map(|delta| Packet::Exit { delta }),
        any::<u64>().prop_map(|delta| Packet::Paused { delta }),
        any::<u64>().prop_map(|delta| Packet::Resumed { delta }),
        any::<u64>().prop_map(|delta| Packet::Stopped { delta }),
        (
            prop_oneof![Just(LostKind::Nested), Just(LostKind::Full)],
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(kind, count, delta)| Packet::Lost { kind, count, delta }),
        sync_strategy().prop_map(Packet::Sync),
    ]
}

/// Bytes that look like a stream often enough to reach every decoder path: valid packets,
/// bare magics, random runs.
fn streamish() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            packet_strategy().prop_map(|p| encode_packet(&p)),
            Just(SYNC_MAGIC.to_vec()),
            prop::collection::vec(any::<u8>(), 0..24),
        ],
        0..40,
    )
    .prop_map(|chunks| chunks.concat())
}

fn check_invariants(bytes: &[u8], events: &[Event]) {
    // Offsets never go back and stay inside the window; skipped bytes are within it.
    let mut last = 0u64;
    let mut skipped = 0u64;
    for e in events {
        let off = match e {
            Event::Sync { offset, .. }
            | Event::Enter { offset, .. }
            | Event::Exit { offset, .. }
            | Event::Paused { offset, .. }
            | Event::Resumed { offset, .. }
            | Event::Stopped { offset, .. }
            | Event::Lost { offset, .. } => *offset,
            Event::Skipped { offset, bytes, .. } => {
                skipped += bytes;
                assert!(*bytes > 0);
                *offset
            }
        };
        assert!(off >= last, "offset went back: {off} after {last}");
        assert!(off < bytes.len() as u64);
        last = off;
    }
    assert!(skipped <= bytes.len() as u64);
    // Each event takes at least one byte.
    assert!(events.len() <= bytes.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every packet parses back to itself, also in sequence (format doc, "Packets").
    #[test]
    fn packets_round_trip(packets in prop::collection::vec(packet_strategy(), 1..40)) {
        let bytes: Vec<u8> = packets.iter().flat_map(encode_packet).collect();
        let mut at = 0;
        for p in &packets {
            let (got, len) = parse_packet(&bytes[at..]).unwrap();
            prop_assert_eq!(&got, p);
            at += len;
        }
        prop_assert_eq!(at, bytes.len());
    }

    /// A stream starting with a SYNC decodes to one event per non-PAD packet, nothing skipped.
    #[test]
    fn streams_from_a_sync_decode_fully(
        sync in sync_strategy(),
        packets in prop::collection::vec(packet_strategy(), 0..40),
    ) {
        let mut all = vec![Packet::Sync(sync)];
        all.extend(packets);
        let bytes: Vec<u8> = all.iter().flat_map(encode_packet).collect();
        let events = decode(&bytes);
        let non_pad = all.iter().filter(|p| !matches!(p, Packet::Pad)).count();
        prop_assert_eq!(events.len(), non_pad);
        let clean = !events.iter().any(|e| matches!(e, Event::Skipped { .. }));
        prop_assert!(clean, "skips in {:?}", events);
    }

    /// Arbitrary bytes: no panic, no endless loop, sane offsets.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let events = decode(&bytes);
        check_invariants(&bytes, &events);
    }

    /// Stream-like bytes with damage: same guarantees, and every window too.
    #[test]
    fn damaged_streams_never_panic(bytes in streamish(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8)) {
        let mut bytes = bytes;
        for (at, x) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
        }
        let events = decode(&bytes);
        check_invariants(&bytes, &events);
        for s in (0..bytes.len()).step_by(7) {
            let w: Vec<Event> = Decoder::with_offset(&bytes[s..], 0).collect();
            check_invariants(&bytes[s..], &w);
        }
    }
}

#[test]
fn corruption_mid_stream_is_skipped_up_to_the_next_sync() {
    let sync = Sync {
        flags: 0,
        tid: 7,
        depth: 0,
        first: 0,
        frames: vec![],
        ticks: 1000,
        conv: TimeConv::IDENTITY,
    };
    let mut bytes = encode_packet(&Packet::Sync(sync.clone()));
    bytes.extend(encode_packet(&Packet::Enter { id: 3, delta: 5 }));
    let bad_at = bytes.len();
    bytes.extend([0x42, 0x13, 0x37]); // 0x42 is no packet header
    let sync2_at = bytes.len();
    bytes.extend(encode_packet(&Packet::Sync(Sync {
        depth: 1,
        frames: vec![3],
        ticks: 2000,
        ..sync
    })));
    bytes.extend(encode_packet(&Packet::Exit { delta: 10 }));
    let events = decode(&bytes);
    assert_eq!(
        events,
        [
            Event::Sync {
                offset: 0,
                tid: 7,
                depth: 0,
                time: 1000
            },
            Event::Enter {
                offset: 60,
                id: 3,
                depth: 0,
                time: 1005
            },
            Event::Skipped {
                offset: bad_at as u64,
                bytes: 3,
                reason: SkipReason::Corrupt(format::PacketError::BadHeader(0x42)),
            },
            Event::Sync {
                offset: sync2_at as u64,
                tid: 7,
                depth: 1,
                time: 2000
            },
            Event::Exit {
                offset: (sync2_at + 64) as u64,
                id: Some(3),
                depth: 0,
                time: 2010
            },
        ]
    );
    // A window ending inside a packet reports the cut.
    let cut = decode(&bytes[..bytes.len() - 1]);
    assert!(matches!(
        cut.last(),
        Some(Event::Skipped {
            reason: SkipReason::Truncated,
            bytes: 1,
            ..
        })
    ));
}

#[test]
fn tsc_times_convert_with_the_sync_anchor() {
    // ns = anchor_ns + ((ticks - anchor_ticks) * mult) >> shift (format doc, "Time").
    let sync = Sync {
        flags: format::SYNC_FLAG_TSC,
        tid: 1,
        depth: 0,
        first: 0,
        frames: vec![],
        ticks: 3_000,
        conv: TimeConv {
            anchor_ticks: 1_000,
            anchor_ns: 5_000_000_000,
            mult: 1 << 31,
            shift: 32,
        },
    };
    let mut bytes = encode_packet(&Packet::Sync(sync));
    bytes.extend(encode_packet(&Packet::Enter {
        id: 1,
        delta: 2_000,
    }));
    let events = decode(&bytes);
    assert_eq!(
        events[0],
        Event::Sync {
            offset: 0,
            tid: 1,
            depth: 0,
            time: 5_000_001_000
        }
    );
    assert!(matches!(
        events[1],
        Event::Enter {
            time: 5_000_002_000,
            ..
        }
    ));
}
