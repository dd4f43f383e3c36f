//! Flow decoding speed: the instructions of a trace reconstructed from its packets and the
//! code, by perfaux's decoders (ptxed's block and instruction decoders, `--quiet`) and by
//! libipt's (its block and instruction decoders, the ones its ptxed runs; Debian's libipt2
//! loaded at run time: benches/common/libipt.rs), in the same run, on the same trace and
//! code file.
//!
//! The trace is a loop of two instructions (`dec ecx; jnz` back), taken 9.4 million times:
//! long TNTs of 47 taken branches each, a PSB+ every 512 of them, 18.8 million instructions,
//! 1.6 MB of trace. Before timing, the bench checks that every decoder counts the same
//! instructions.
//!
//! The second trace (`*_two_runs`) is the same loop with a `jmp` back after it, its outcomes
//! alternating (not taken, taken, ...): the flow goes from one run of instructions to the
//! other at every outcome (`dec; jnz` from the head, `jmp; dec; jnz` after it), so no pass
//! repeats the one before. 23.6 M instructions.
//!
//! The third (`*_random`) is the same code with random outcomes: paths that seldom come again
//! (what chains of runs do not help), 23.5 M instructions.
//!
//! cargo bench -p perfaux-intelpt --bench flow

#[path = "common/libipt.rs"]
mod libipt;

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux_intelpt::ptxed;

/// Where the loop's code is.
const BASE: u64 = 0x1000;
/// `dec ecx; jnz BASE` (`jmp BASE` after it, for the second trace).
const CODE: [u8; 6] = [0xff, 0xc9, 0x75, 0xfc, 0xeb, 0xfa];
/// The loop's two runs: from its head, and from the `jmp` after it.
const HEAD_RUN: u64 = 2;
const JMP_RUN: u64 = 3;
/// Long TNTs in the trace, and between two PSB+.
const TNTS: usize = 200_000;
const PSB_EVERY: usize = 512;
/// A long TNT's outcomes.
const PER_TNT: u64 = 47;

/// PSB+ with `fup` as the IP (when tracing is on), 64-bit mode.
fn psb_plus(out: &mut Vec<u8>, fup: Option<u64>) {
    for _ in 0..8 {
        out.extend_from_slice(&[0x02, 0x82]);
    }
    // MODE.Exec: CS.L, 64-bit code.
    out.extend_from_slice(&[0x99, 0x01]);
    if let Some(ip) = fup {
        // FUP, IPBytes 011: a 6-byte sign-extended IP.
        out.push(0x7d);
        out.extend_from_slice(&ip.to_le_bytes()[..6]);
    }
    out.extend_from_slice(&[0x02, 0x23]);
}

/// The long TNTs' payloads (47 outcomes under the stop bit), the `i`th by `payload(i)`; a
/// PSB+ says where the flow stands after the last (at the head after a taken `jnz`, else at
/// the `jmp`).
fn loop_trace(payload: impl Fn(usize) -> u64) -> Vec<u8> {
    let mut t = Vec::with_capacity(TNTS * 8 + TNTS / PSB_EVERY * 32 + 64);
    psb_plus(&mut t, None);
    // TIP.PGE to the loop's head, IPBytes 011.
    t.push(0x71);
    t.extend_from_slice(&BASE.to_le_bytes()[..6]);
    let mut after = BASE;
    for i in 0..TNTS {
        if i > 0 && i % PSB_EVERY == 0 {
            psb_plus(&mut t, Some(after));
        }
        // Long TNT: 6 payload bytes.
        let p = payload(i);
        t.extend_from_slice(&[0x02, 0xa3]);
        t.extend_from_slice(&p.to_le_bytes()[..6]);
        after = if p & 1 == 1 { BASE } else { BASE + 4 };
    }
    t
}

/// All 47 outcomes taken.
const ALL_TAKEN: u64 = (1 << 48) - 1;
/// Not taken, taken, ..., not taken (the oldest in bit 46).
const ALTERNATING: u64 = (1 << 47) | 0x2aaa_aaaa_aaaa;

/// Random payloads (xorshift, the same every run).
fn random(i: usize) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (1 << 47) | (x & ((1 << 47) - 1))
}

/// The instructions the flow walks over [`loop_trace`]`(payload)`: a run at each outcome,
/// from the head or from the `jmp`.
fn loop_insns(payload: impl Fn(usize) -> u64) -> u64 {
    let (mut at_head, mut n) = (true, 0);
    for t in 0..TNTS {
        let p = payload(t);
        for i in (0..PER_TNT).rev() {
            n += if at_head { HEAD_RUN } else { JMP_RUN };
            at_head = p >> i & 1 == 1;
        }
    }
    n
}

/// perfaux's ptxed on `pt` and `code`, `--quiet`, with its decoder (`--insn-decoder` or the
/// block decoder): its setup, made outside the timed loop.
fn perfaux_setup(pt: &Path, code: &Path, insn: bool) -> ptxed::Setup {
    let mut args = vec![
        "--raw".to_string(),
        format!("{}:{BASE:#x}", code.display()),
        "--pt".into(),
        pt.display().to_string(),
        "--quiet".into(),
        "--stat:insn".into(),
    ];
    if insn {
        args.push("--insn-decoder".into());
    }
    ptxed::parse_args(&args).unwrap()
}

/// The instructions ptxed's `--stat:insn` counts.
fn perfaux_insns(setup: &ptxed::Setup) -> u64 {
    let mut out = Vec::new();
    ptxed::run(setup, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("insn: "))
        .and_then(|n| n.trim().trim_end_matches(".").parse().ok())
        .unwrap_or_else(|| panic!("no instruction count: {text}"))
}

/// libipt's instruction (`BLOCKS` false) or block decoder over `trace`, the code file at
/// [`BASE`], as its ptxed loops (events taken as they come, resync after an error): the
/// instructions decoded.
fn libipt_insns<const BLOCKS: bool>(lib: &libipt::Libipt, trace: &[u8], code: &Path) -> u64 {
    use libipt::*;
    let mut dec = Session::new(if BLOCKS { lib.blocks } else { lib.insns }, trace);
    let added = dec.add_file(lib, code, CODE.len() as u64, BASE);
    assert!(added >= 0, "pt_image_add_file: {added}");
    let mut insns = 0u64;
    // A prefix of `struct pt_insn` (its IP) or of `struct pt_block` (its IPs, isid, mode,
    // class and instruction count), and of `struct pt_event`: libipt copies what fits.
    let mut item = [0u64; 4];
    let mut event = [0u64; 2];
    let mut st = dec.sync_forward();
    while st >= 0 {
        loop {
            while st >= 0 && st & PTS_EVENT_PENDING != 0 {
                st = dec.event(&mut event);
            }
            if st < 0 || st & PTS_EOS != 0 {
                break;
            }
            st = dec.next(&mut item);
            if st < 0 {
                break;
            }
            insns += if BLOCKS {
                // `ninsn`, a u16 at byte 28.
                (item[3] >> 32) & 0xffff
            } else {
                black_box(item[0]);
                1
            };
        }
        // The end, or an error: resync after it, as ptxed does.
        if st >= 0 || st == PTE_EOS {
            break;
        }
        st = dec.sync_forward();
    }
    insns
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (pt, code) = (dir.path().join("loop.pt"), dir.path().join("loop.bin"));
    let trace = loop_trace(|_| ALL_TAKEN);
    std::fs::write(&pt, &trace).unwrap();
    let pt2 = dir.path().join("two_runs.pt");
    let trace2 = loop_trace(|_| ALTERNATING);
    std::fs::write(&pt2, &trace2).unwrap();
    let pt3 = dir.path().join("random.pt");
    let trace3 = loop_trace(random);
    std::fs::write(&pt3, &trace3).unwrap();
    std::fs::write(&code, CODE).unwrap();
    let want = TNTS as u64 * PER_TNT * 2;
    let block = perfaux_setup(&pt, &code, false);
    let insn = perfaux_setup(&pt, &code, true);
    let counts = [perfaux_insns(&block), perfaux_insns(&insn)];
    eprintln!("instructions: perfaux block, insn {counts:?}");
    let block2 = perfaux_setup(&pt2, &code, false);
    let counts2 = [perfaux_insns(&block2)];
    eprintln!("instructions, two runs: perfaux block {counts2:?}");
    assert_eq!(counts2, [loop_insns(|_| ALTERNATING)]);
    let block3 = perfaux_setup(&pt3, &code, false);
    let counts3 = [perfaux_insns(&block3)];
    eprintln!("instructions, random: perfaux block {counts3:?}");
    assert_eq!(counts3, [loop_insns(random)]);
    let lib = libipt::Libipt::load()
        .inspect_err(|e| eprintln!("skipped: the libipt peer: {e}"))
        .ok();
    if let Some(lib) = &lib {
        let theirs = [
            libipt_insns::<true>(lib, &trace, &code),
            libipt_insns::<false>(lib, &trace, &code),
        ];
        eprintln!("instructions: libipt block, insn {theirs:?}");
        assert_eq!(
            theirs, counts,
            "libipt and perfaux decode the same instructions"
        );
        let theirs2 = [libipt_insns::<true>(lib, &trace2, &code)];
        eprintln!("instructions, two runs: libipt block {theirs2:?}");
        assert_eq!(theirs2, counts2, "the same, two runs");
        let theirs3 = [libipt_insns::<true>(lib, &trace3, &code)];
        eprintln!("instructions, random: libipt block {theirs3:?}");
        assert_eq!(theirs3, counts3, "the same, random");
    }
    // The last TNT's outcomes leave the loop's head where the trace ends: every outcome is a
    // `jnz`, each after a `dec`; the decoders may count the `dec` after the last one too.
    assert!(
        counts.iter().all(|&n| n == want || n == want + 1),
        "{counts:?} for {want}"
    );
    let mut g = c.benchmark_group("intel_pt_flow");
    g.sample_size(10);
    g.bench_function("perfaux_block", |b| {
        b.iter(|| ptxed::run(black_box(&block), std::io::sink()).unwrap())
    });
    g.bench_function("perfaux_insn", |b| {
        b.iter(|| ptxed::run(black_box(&insn), std::io::sink()).unwrap())
    });
    g.bench_function("perfaux_block_two_runs", |b| {
        b.iter(|| ptxed::run(black_box(&block2), std::io::sink()).unwrap())
    });
    g.bench_function("perfaux_block_random", |b| {
        b.iter(|| ptxed::run(black_box(&block3), std::io::sink()).unwrap())
    });
    if let Some(lib) = &lib {
        g.bench_function("libipt_2_0_5_block_two_runs", |b| {
            b.iter(|| libipt_insns::<true>(lib, black_box(&trace2), &code))
        });
        g.bench_function("libipt_2_0_5_block_random", |b| {
            b.iter(|| libipt_insns::<true>(lib, black_box(&trace3), &code))
        });
        g.bench_function("libipt_2_0_5_block", |b| {
            b.iter(|| libipt_insns::<true>(lib, black_box(&trace), &code))
        });
        g.bench_function("libipt_2_0_5_insn", |b| {
            b.iter(|| libipt_insns::<false>(lib, black_box(&trace), &code))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
