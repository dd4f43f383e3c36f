//! Chains of runs (the runs a TNT's bits led through from a run, recorded the second time
//! and handed out whole after) print what a pass at a time prints: the same run reached
//! with other bits, a TIP or an overflow between a TNT's bits, a cache too small for the
//! trace's paths (chains evicting each other), and new code at the same addresses (a
//! chain of the old code must not be taken).

use perfaux_intelpt::events::Kind;
use perfaux_intelpt::flow::{Block, Flow};
use perfaux_intelpt::image::{Image, Section};
use perfaux_intelpt::ptxed;
use proptest::prelude::*;

const BASE: u64 = 0x1000;
/// `dec ecx; jnz BASE; jmp BASE`: from BASE a run of two instructions, from BASE + 4 one
/// of three, each ending in the same `jnz`.
const CODE: [u8; 6] = [0xff, 0xc9, 0x75, 0xfc, 0xeb, 0xfa];
/// Other code at the same addresses, of the same shape (`nop; nop; jnz BASE; jmp BASE`):
/// its runs are made in the same order and the same bits lead through them, so a chain
/// of [`CODE`]'s kept past a new image would be found under the same key.
const OTHER: [u8; 6] = [0x90, 0x90, 0x75, 0xfc, 0xeb, 0xfa];

fn image(code: &[u8]) -> Image {
    let mut image = Image::default();
    image.add(Section {
        base: BASE,
        bytes: code.to_vec(),
        name: "code".into(),
    });
    image
}

/// PSB, MODE.Exec 64-bit, PSBEND, TIP.PGE to BASE.
fn start() -> Vec<u8> {
    let mut t = perfaux_intelpt::decode::PSB.to_vec();
    t.extend_from_slice(&[0x99, 0x01, 0x02, 0x23, 0x71]);
    t.extend_from_slice(&BASE.to_le_bytes()[..6]);
    t
}

/// A long TNT of `n` (7 to 47) outcomes, the oldest in the top bit of `bits`.
fn long_tnt(t: &mut Vec<u8>, bits: u64, n: u32) {
    let payload = (1u64 << n) | (bits & ((1 << n) - 1));
    t.extend_from_slice(&[0x02, 0xa3]);
    t.extend_from_slice(&payload.to_le_bytes()[..6]);
}

/// A short TNT of `n` (1 to 6) outcomes.
fn short_tnt(t: &mut Vec<u8>, bits: u8, n: u32) {
    let payload = (1u8 << n) | (bits & ((1 << n) - 1));
    t.push(payload << 1);
}

/// A 6-byte IP packet (`op` with IPBytes 011) to `ip`.
fn ip_packet(t: &mut Vec<u8>, op: u8, ip: u64) {
    t.push(op | 0x60);
    t.extend_from_slice(&ip.to_le_bytes()[..6]);
}

/// ptxed's whole output (`[block]` before each, `--stat`), taking a pass at a time or
/// chaining runs through a cache of `2^log2` chains (0: the default).
fn ptxed_with(trace: &[u8], code: &[u8], pass_at_a_time: bool, log2: u8) -> String {
    let mut options = ptxed::Options {
        show_blocks: true,
        stat: true,
        ..ptxed::Options::default()
    };
    options.flow.pass_at_a_time = pass_at_a_time;
    options.flow.chain_slots_log2 = log2;
    let setup = ptxed::Setup {
        options,
        image: image(code),
        trace: trace.to_vec(),
        sideband: Default::default(),
    };
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The chained flow, with the default cache and with one of two chains, prints what a pass
/// at a time prints; the instructions it walked (a wrong successor walks others).
fn same_as_a_pass_at_a_time(trace: &[u8], code: &[u8]) -> usize {
    let want = ptxed_with(trace, code, true, 0);
    for log2 in [0, 1] {
        let got = ptxed_with(trace, code, false, log2);
        assert!(
            got == want,
            "chain cache 2^{log2}: differs from a pass at a time"
        );
    }
    want.lines().filter(|l| !l.starts_with('[')).count()
}

/// A pseudo-random sequence (xorshift), the same every run.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn the_same_run_reached_with_other_bits_takes_their_chain() {
    // Two payloads alike but for their last bits, and one their complement, each seen
    // several times from both runs (a TNT's first bit comes after either).
    let payloads = [
        0x5555_5555_5555u64,
        0x5555_5555_5554,
        0x5555_5555_5557,
        0x2aaa_aaaa_aaaa,
        0x0f0f_0f0f_0f0f,
    ];
    let mut t = start();
    let mut seed = 7;
    for _ in 0..400 {
        let p = payloads[(xorshift(&mut seed) % 5) as usize];
        long_tnt(&mut t, p, 47);
        short_tnt(&mut t, p as u8, 3);
    }
    assert!(same_as_a_pass_at_a_time(&t, &CODE) > 40_000);
}

#[test]
fn a_tip_between_tnts_ends_the_chain() {
    // `dec ecx; jnz BASE; jz BASE+2; jmp rax`: runs from BASE (`dec; jnz`), BASE + 2
    // (`jnz`) and BASE + 4 (`jz`), whose not-taken way is the indirect jump; its TIP comes
    // after each TNT and goes to one of the three, so the same run starts a TNT's bits from
    // other places, and the same bits come again from each (a few paths, repeated).
    let code = [0xff, 0xc9, 0x75, 0xfc, 0x74, 0xfc, 0xff, 0xe0];
    let starts = [BASE, BASE + 2, BASE + 4];
    let mut t = start();
    let (mut seed, mut at) = (11, 0);
    for _ in 0..3000 {
        let mut path = 1 + xorshift(&mut seed) % 4;
        let (mut bits, mut n) = (0u64, 0);
        for _ in 0..20 {
            // The `jz` taken (not into the `jmp rax` before the TNT's end).
            let taken = at == 2 || xorshift(&mut path) & 1 == 1;
            (bits, n) = (bits << 1 | u64::from(taken), n + 1);
            at = match (at, taken) {
                (2, _) => 1,
                (_, true) => 0,
                (_, false) => 2,
            };
        }
        // On to the `jz`, and past it, not taken, to the `jmp rax`.
        if at != 2 {
            (bits, n) = (bits << 1, n + 1);
        }
        long_tnt(&mut t, bits << 1, n + 1);
        at = (xorshift(&mut seed) % 3) as usize;
        ip_packet(&mut t, 0x0d, starts[at]);
    }
    assert!(same_as_a_pass_at_a_time(&t, &code) > 60_000);
}

#[test]
fn an_overflow_between_tnts_resumes_where_its_fup_says() {
    let mut t = start();
    let mut seed = 13;
    for i in 0..1000 {
        let p = [0x5555_5555_5555u64, 0x2aaa_aaaa_aaaa][(xorshift(&mut seed) % 2) as usize];
        long_tnt(&mut t, p, 40);
        if i % 5 == 4 {
            // OVF, then a FUP: tracing resumes at either run's start.
            t.extend_from_slice(&[0x02, 0xf3]);
            ip_packet(&mut t, 0x1d, if i % 2 == 0 { BASE } else { BASE + 4 });
        }
    }
    assert!(same_as_a_pass_at_a_time(&t, &CODE) > 40_000);
}

#[test]
fn paths_past_the_caches_size_evict_chains_and_decode_the_same() {
    // Thousands of payloads, each seen three times, each TNT three chains or more: far
    // past the default 4096 chains (and past two).
    let mut payloads = Vec::new();
    let mut seed = 17;
    for _ in 0..3000 {
        payloads.push(xorshift(&mut seed));
    }
    let mut t = start();
    // Where the flow stands: after a taken `jnz` at BASE, else at the `jmp` after it.
    let mut ip = BASE;
    for round in 0..3 {
        for (i, p) in payloads.iter().enumerate() {
            if (i + round) % 7 == 0 {
                // A PSB+ now and then: where the flow is, said again.
                t.extend_from_slice(&perfaux_intelpt::decode::PSB);
                t.extend_from_slice(&[0x99, 0x01]);
                ip_packet(&mut t, 0x1d, ip);
                t.extend_from_slice(&[0x02, 0x23]);
            }
            long_tnt(&mut t, *p, 47);
            ip = if p & 1 == 1 { BASE } else { BASE + 4 };
        }
    }
    assert!(same_as_a_pass_at_a_time(&t, &CODE) > 900_000);
}

/// The flow over `trace` as ptxed drives it, a pass at a time or chained: each block's
/// instructions and each event, and a new image at each paging event (`images` in turn),
/// as sideband gives one when a process switches.
fn with_image_switches(trace: &[u8], images: &[Image], pass_at_a_time: bool) -> String {
    let mut flow = Flow::new(trace, &images[0]);
    flow.config.pass_at_a_time = pass_at_a_time;
    let mut out = String::new();
    let mut switches = 0;
    let mut block = Block::default();
    let Ok(mut st) = flow.sync() else {
        return out;
    };
    loop {
        while st.pending {
            match flow.event() {
                Ok((e, _, s)) => {
                    out.push_str(&format!("[{:?}]\n", e.kind));
                    if matches!(e.kind, Kind::Paging { .. }) {
                        switches += 1;
                        flow.set_image(images[switches % images.len()].clone());
                    }
                    st = s;
                }
                Err(e) => {
                    out.push_str(&format!("[error {e:?}]\n"));
                    return out;
                }
            }
        }
        if st.eos {
            return out;
        }
        let r = flow.next(&mut block);
        for part in block.blocks() {
            out.push_str("[block]\n");
            for i in part {
                out.push_str(&format!("{:x}\n", i.ip));
            }
        }
        match r {
            Ok(s) => st = s,
            Err(e) => {
                out.push_str(&format!("[error {e:?}]\n"));
                return out;
            }
        }
    }
}

#[test]
fn new_code_at_the_same_addresses_takes_no_chain_of_the_old() {
    // The same TNTs over one code, then the other: disabled, a PIP (the process switched),
    // enabled again at BASE.
    let mut t = start();
    for round in 0..8u64 {
        for _ in 0..50 {
            long_tnt(&mut t, 0x5555_5555_5555, 47);
            long_tnt(&mut t, 0x2aaa_aaaa_aaaa, 46);
        }
        t.push(0x01);
        t.extend_from_slice(&[0x02, 0x43]);
        t.extend_from_slice(&((round + 1) << 12).to_le_bytes()[..6]);
        ip_packet(&mut t, 0x11, BASE);
    }
    let images = [image(&CODE), image(&OTHER)];
    let want = with_image_switches(&t, &images, true);
    let got = with_image_switches(&t, &images, false);
    assert!(want.matches("Paging").count() == 8, "{}", &want[..2000]);
    assert!(want.lines().count() > 20_000);
    assert!(got == want, "chained differs from a pass at a time");
}

/// Pieces of a trace from a few kinds, repeated: the same bits again and again (chains
/// recorded and taken), TIPs and overflows to instructions of the code (`starts`), PSB+.
fn repeating_trace(starts: Vec<u64>) -> impl Strategy<Value = Vec<u8>> {
    let to = prop::sample::select(starts);
    let piece = prop_oneof![
        6 => (any::<u64>(), 7u32..48).prop_map(|(b, n)| {
            let mut t = Vec::new();
            long_tnt(&mut t, b, n);
            t
        }),
        3 => (any::<u8>(), 1u32..7).prop_map(|(b, n)| {
            let mut t = Vec::new();
            short_tnt(&mut t, b, n);
            t
        }),
        1 => to.clone().prop_map(|ip| {
            let mut t = Vec::new();
            ip_packet(&mut t, 0x0d, ip);
            t
        }),
        1 => to.prop_map(|ip| {
            let mut t = vec![0x02, 0xf3];
            ip_packet(&mut t, 0x1d, ip);
            t
        }),
        1 => Just({
            let mut t = perfaux_intelpt::decode::PSB.to_vec();
            t.extend_from_slice(&[0x99, 0x01]);
            ip_packet(&mut t, 0x1d, BASE);
            t.extend_from_slice(&[0x02, 0x23]);
            t
        }),
    ];
    (
        prop::collection::vec(piece, 1..8),
        prop::collection::vec(any::<prop::sample::Index>(), 0..300),
    )
        .prop_map(|(pool, order)| {
            let mut t = start();
            for i in order {
                t.extend_from_slice(&pool[i.index(pool.len())]);
            }
            t
        })
}

/// An instruction of [`loopy_code`]: its kind, and a branch's target (an instruction's
/// index, modulo their count).
#[derive(Debug, Clone, Copy)]
enum Op {
    Nop,
    Dec,
    Jnz(usize),
    Jz(usize),
    /// A direct jump, forward only (no loop without trace).
    Jmp(usize),
    JmpRax,
    /// The last: a direct jump back to the start.
    Back,
}

/// Code of loops whose branches land on instructions: mostly conditional branches back and
/// forth, a direct jump forward now and then (to the last `jnz` at most: no loop without a
/// branch that takes trace), an indirect one (a TIP) rarely; a `jnz` back to the start and a
/// jump there last; with where its instructions start.
fn loopy_code() -> impl Strategy<Value = (Vec<u8>, Vec<u64>)> {
    let op = prop_oneof![
        3 => Just(Op::Nop),
        2 => Just(Op::Dec),
        6 => any::<usize>().prop_map(Op::Jnz),
        3 => any::<usize>().prop_map(Op::Jz),
        1 => any::<usize>().prop_map(Op::Jmp),
        1 => Just(Op::JmpRax),
    ];
    prop::collection::vec(op, 1..24).prop_map(|mut ops| {
        ops.push(Op::Jnz(0));
        ops.push(Op::Back);
        let n = ops.len();
        let len = |o: &Op| if matches!(o, Op::Nop) { 1 } else { 2 };
        let mut starts = vec![BASE];
        for o in &ops {
            starts.push(starts[starts.len() - 1] + len(o));
        }
        let mut code = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            let rel = |to: usize| (starts[to] as i64 - starts[i + 1] as i64) as u8;
            match *o {
                Op::Nop => code.push(0x90),
                Op::Dec => code.extend_from_slice(&[0xff, 0xc9]),
                Op::Jnz(to) => code.extend_from_slice(&[0x75, rel(to % n)]),
                Op::Jz(to) => code.extend_from_slice(&[0x74, rel(to % n)]),
                Op::Jmp(to) => code.extend_from_slice(&[0xeb, rel(i + 1 + to % (n - 2 - i))]),
                Op::JmpRax => code.extend_from_slice(&[0xff, 0xe0]),
                Op::Back => code.extend_from_slice(&[0xeb, rel(0)]),
            }
        }
        starts.pop();
        (code, starts)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whatever the code, a trace that repeats its pieces decodes through chains (a cache
    /// of 2, 8 or the default) as a pass at a time decodes it.
    #[test]
    fn chains_print_as_a_pass_at_a_time(
        (code, trace) in loopy_code().prop_flat_map(|(c, starts)| {
            (Just(c), repeating_trace(starts))
        }),
        log2 in prop_oneof![Just(0u8), Just(1), Just(3)],
    ) {
        let want = ptxed_with(&trace, &code, true, 0);
        let got = ptxed_with(&trace, &code, false, log2);
        prop_assert_eq!(got, want);
    }
}
