//! `perfaux report` once showed "Min total 0 ns" for `fib`, calls whose ENTER and EXIT
//! decoded to the same ns though the writer read the TSC for both. Cause: the SYNC between
//! them carried a refreshed clock anchor that maps ticks about 350 ns earlier than the
//! previous one (anchor and rate errors, see swtrace's clock module), and the decoder
//! switched conversions there, so the EXIT converted to a time before the ENTER and the view
//! clamped the duration to 0. The packet sequence below is the one recorded
//! (`report -D` of a recording under 4 busy loops): fib calls open across a re-anchoring SYNC.

use perfaux_swtrace::decode::{Event, decode};
use perfaux_swtrace::format::{Packet, SYNC_FLAG_TSC, Sync, TimeConv, encode_packet};

/// The recorded TSC rate: 2.6 GHz, about 0.385 ns per tick.
const MULT: u32 = 1_651_913_857;
const SHIFT: u8 = 32;
const FIB: u32 = 6;

fn sync(ticks: u64, depth: u32, conv: TimeConv) -> Packet {
    Packet::Sync(Sync {
        flags: SYNC_FLAG_TSC,
        tid: 28667,
        depth,
        first: 0,
        frames: vec![FIB; depth as usize],
        ticks,
        conv,
    })
}

fn ticks_to_ns(ticks: u64) -> u64 {
    ((u128::from(ticks) * u128::from(MULT)) >> SHIFT) as u64
}

/// The stream: two fib calls open when a SYNC re-anchors 349 ns earlier, then a third call
/// and the returns; and a last call long after, when the new anchor holds alone.
fn stream(step_ns: i64) -> (Vec<u8>, TimeConv) {
    let t0 = 8_000_000_000u64;
    let old = TimeConv {
        anchor_ticks: t0 - 85_373_240,
        anchor_ns: 3_222_000_000_000,
        mult: MULT,
        shift: SHIFT,
    };
    // The writer's SYNC reading comes 88 ticks after the second ENTER; the ENTER after it
    // repeats its time (delta 0), as the writer's general path does.
    let t_sync = t0 + 30 + 31 + 88;
    let new = TimeConv {
        anchor_ticks: t_sync,
        anchor_ns: old.to_ns(t_sync).saturating_add_signed(step_ns),
        mult: MULT,
        shift: SHIFT,
    };
    let packets = [
        sync(t0, 0, old),
        Packet::Enter { id: FIB, delta: 30 },
        Packet::Enter { id: FIB, delta: 31 },
        sync(t_sync, 2, new),
        Packet::Enter { id: FIB, delta: 0 },
        Packet::Exit { delta: 32 },
        Packet::Exit { delta: 30 },
        Packet::Exit { delta: 33 },
        // 10 ms later: past any slew of the step.
        Packet::Enter {
            id: FIB,
            delta: 26_000_000,
        },
        Packet::Exit { delta: 29 },
    ];
    let bytes = packets.iter().flat_map(encode_packet).collect();
    (bytes, new)
}

/// (entry time, exit time) of each call, in the order they return.
fn calls(events: &[Event]) -> Vec<(u64, u64)> {
    let mut open = Vec::new();
    let mut done = Vec::new();
    for e in events {
        match *e {
            Event::Enter { time, .. } => open.push(time),
            Event::Exit { time, .. } => done.push((open.pop().expect("ENTER"), time)),
            _ => {}
        }
    }
    done
}

#[test]
fn a_call_open_across_a_reanchoring_sync_keeps_its_duration() {
    for step in [-349i64, -5_000, 120] {
        let (bytes, new) = stream(step);
        let events = decode(&bytes);
        let times: Vec<u64> = events.iter().filter_map(Event::time).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "step {step}: times go back: {times:?}"
        );
        let got = calls(&events);
        // Ticks from each ENTER to its EXIT, innermost first (the packets above).
        let ticks = [32, 88 + 32 + 30, 31 + 88 + 32 + 30 + 33, 29];
        assert_eq!(got.len(), ticks.len(), "step {step}: {events:?}");
        for ((entry, exit), t) in got.iter().zip(ticks) {
            let d = exit.checked_sub(*entry).unwrap_or_else(|| {
                panic!("step {step}: exit {exit} before entry {entry}: {events:?}")
            });
            // The slew moves a duration by at most 0.1% (plus rounding of both ends).
            let want = ticks_to_ns(t);
            assert!(
                d.abs_diff(want) <= 1 + want / 1000,
                "step {step}: call of {t} ticks lasted {d} ns, not {want}"
            );
        }
        // Once the step is absorbed the new anchor's conversion holds exactly.
        let last_exit = got.last().unwrap().1;
        let last_ticks = 8_000_000_000u64 + 30 + 31 + 88 + 32 + 30 + 33 + 26_000_000 + 29;
        assert_eq!(last_exit, new.to_ns(last_ticks), "step {step}");
    }
}
