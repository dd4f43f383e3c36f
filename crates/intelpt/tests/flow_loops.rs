//! A loop's passes taken from a TNT at once (the flow hands them out as one block of a run,
//! a pass each) print as a pass at a time would: every instruction, a `[block]` before each
//! pass, the same counts. The loop leaves and comes back both ways (a taken branch back to
//! its start, a not-taken one into a jump back), over any outcomes, short and long TNTs and
//! PSB+ between them.

use perfaux_intelpt::image::{Image, Section};
use perfaux_intelpt::ptxed;
use proptest::prelude::*;

const BASE: u64 = 0x1000;
/// `dec ecx; jnz BASE; jmp BASE`: a taken `jnz` runs the loop again from BASE, a not-taken
/// one the jump first (a run from BASE + 4 whose not-taken `jnz` leads back to BASE + 4).
const CODE: [u8; 6] = [0xff, 0xc9, 0x75, 0xfc, 0xeb, 0xfa];

fn psb_plus(out: &mut Vec<u8>, at: u64) {
    out.extend_from_slice(&perfaux_intelpt::decode::PSB);
    // MODE.Exec: 64-bit; FUP at the flow's IP; PSBEND.
    out.extend_from_slice(&[0x99, 0x01, 0x7d]);
    out.extend_from_slice(&at.to_le_bytes()[..6]);
    out.extend_from_slice(&[0x02, 0x23]);
}

/// The trace of `outcomes` (oldest first) in TNTs of `sizes` (short up to 6, long up to 47,
/// cycled), a PSB+ before every `psb_every`th TNT; and ptxed's lines for it.
fn trace_and_lines(outcomes: &[bool], sizes: &[usize], psb_every: usize) -> (Vec<u8>, String) {
    let mut t = perfaux_intelpt::decode::PSB.to_vec();
    t.extend_from_slice(&[0x99, 0x01, 0x02, 0x23, 0x71]);
    t.extend_from_slice(&BASE.to_le_bytes()[..6]);
    let mut lines = String::from("[enabled]\n");
    let mut ip = BASE;
    let (mut at, mut k) = (0, 0);
    while at < outcomes.len() {
        let n = sizes[k % sizes.len()].min(outcomes.len() - at);
        if k > 0 && k % psb_every == 0 {
            psb_plus(&mut t, ip);
        }
        k += 1;
        let mut payload = 1u64 << n;
        for (i, &b) in outcomes[at..at + n].iter().enumerate() {
            payload |= u64::from(b) << (n - 1 - i);
            lines.push_str("[block]\n");
            if ip != BASE {
                lines.push_str(&format!("{:016x}\n", BASE + 4));
            }
            lines.push_str(&format!("{BASE:016x}\n{:016x}\n", BASE + 2));
            ip = if b { BASE } else { BASE + 4 };
        }
        if n <= 6 {
            t.push((payload << 1) as u8);
        } else {
            t.extend_from_slice(&[0x02, 0xa3]);
            t.extend_from_slice(&payload.to_le_bytes()[..6]);
        }
        at += n;
    }
    (t, lines)
}

fn ptxed(trace: Vec<u8>, quiet: bool, insn_decoder: bool) -> String {
    let mut image = Image::default();
    image.add(Section {
        base: BASE,
        bytes: CODE.to_vec(),
        name: "code".into(),
    });
    let options = ptxed::Options {
        quiet,
        insn_decoder,
        show_blocks: true,
        stat: true,
        ..ptxed::Options::default()
    };
    let setup = ptxed::Setup {
        options,
        image,
        trace,
        sideband: Default::default(),
    };
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn check(outcomes: &[bool], sizes: &[usize], psb_every: usize) -> Result<(), TestCaseError> {
    let (trace, lines) = trace_and_lines(outcomes, sizes, psb_every);
    let insns = lines.lines().filter(|l| !l.starts_with('[')).count();
    let blocks = outcomes.len();
    let out = ptxed(trace.clone(), false, false);
    let flow: String = out
        .lines()
        .filter(|l| !l.starts_with("insn:") && !l.starts_with("blocks:"))
        .filter(|l| *l != "[end of trace]")
        .map(|l| format!("{l}\n"))
        .collect();
    prop_assert_eq!(&flow, &lines);
    let stat = format!("insn: {insns}.\nblocks:\t{blocks}.\n");
    prop_assert!(out.ends_with(&stat), "{out}");
    prop_assert_eq!(ptxed(trace.clone(), true, false), stat.clone());
    // The instruction decoder: the same instructions, no `[block]`.
    let out = ptxed(trace, false, true);
    let want: String = lines
        .lines()
        .filter(|l| *l != "[block]")
        .map(|l| format!("{l}\n"))
        .collect();
    prop_assert!(out.starts_with(&want), "{out}");
    Ok(())
}

#[test]
fn a_loop_taken_every_time_prints_every_pass() {
    check(&[true; 4000], &[47, 6, 47, 3], 7).unwrap();
}

#[test]
fn a_loop_left_every_time_prints_every_pass() {
    check(&[false; 4000], &[47, 1, 47], 5).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_loop_over_any_outcomes_prints_every_pass(
        outcomes in prop::collection::vec(prop_oneof![3 => Just(true), 1 => Just(false), 1 => any::<bool>()], 1..600),
        sizes in prop::collection::vec(prop_oneof![1usize..=6, 7usize..=47], 1..5),
        psb_every in 1usize..20,
    ) {
        check(&outcomes, &sizes, psb_every)?;
    }
}

/// Pieces of a trace that keep the flow going: TNTs most, TIPs, a PSB+ now and then, a
/// disable and an enable.
fn branchy_trace() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => any::<u8>().prop_map(|b| vec![(b | 0x80) & !1]),
        8 => any::<[u8; 6]>().prop_map(|b| {
            let mut v = vec![0x02, 0xa3];
            v.extend_from_slice(&b[..5]);
            v.push(b[5] | 0x80);
            v
        }),
        2 => any::<u8>().prop_map(|b| vec![0x0d, b & 0x7f, 0x10, 0, 0, 0, 0]),
        1 => Just({
            let mut v = perfaux_intelpt::decode::PSB.to_vec();
            v.extend_from_slice(&[0x99, 0x01, 0x7d, 0x00, 0x10, 0, 0, 0, 0, 0x02, 0x23]);
            v
        }),
        1 => Just(vec![0x01]),
        1 => any::<u8>().prop_map(|b| vec![0x11, b & 0x7f, 0x10]),
        1 => any::<u8>().prop_map(|b| vec![0x31, b & 0x7f, 0x10]),
    ];
    prop::collection::vec(piece, 0..150).prop_map(|v| {
        let mut t = perfaux_intelpt::decode::PSB.to_vec();
        t.extend_from_slice(&[0x99, 0x01, 0x02, 0x23, 0x71, 0x00, 0x10, 0, 0, 0, 0]);
        t.extend(v.concat());
        t
    })
}

/// Code of loops: conditional branches back and forth, calls, returns, indirect branches.
fn loopy_code() -> impl Strategy<Value = Vec<u8>> {
    let insn = prop_oneof![
        4 => Just(vec![0x90]),
        2 => Just(vec![0xff, 0xc9]),
        6 => (-40i8..8).prop_map(|d| vec![0x75, d as u8]),
        2 => (-40i8..8).prop_map(|d| vec![0x74, d as u8]),
        1 => (-40i8..8).prop_map(|d| vec![0xeb, d as u8]),
        1 => (-40i32..40).prop_map(|d| {
            let mut v = vec![0xe8];
            v.extend_from_slice(&d.to_le_bytes());
            v
        }),
        1 => Just(vec![0xc3]),
        1 => Just(vec![0xff, 0xe0]),
        1 => Just(vec![0xff, 0xd0]),
    ];
    prop::collection::vec(insn, 1..40).prop_map(|v| v.concat())
}

fn ptxed_with(
    trace: Vec<u8>,
    code: Vec<u8>,
    pass_at_a_time: bool,
    opts: (bool, bool, bool),
) -> String {
    let mut image = Image::default();
    image.add(Section {
        base: BASE,
        bytes: code,
        name: "code".into(),
    });
    let (end_on_call, end_on_jump, resync) = opts;
    let mut options = ptxed::Options {
        show_blocks: true,
        stat: true,
        resync_on_error: resync,
        ..ptxed::Options::default()
    };
    options.flow.end_on_call = end_on_call;
    options.flow.end_on_jump = end_on_jump;
    options.flow.pass_at_a_time = pass_at_a_time;
    let setup = ptxed::Setup {
        options,
        image,
        trace,
        sideband: Default::default(),
    };
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Whatever the code and the trace, the flow that takes passes and runs at once prints
    /// what the flow that takes a pass at a time prints (errors and all).
    #[test]
    fn runs_taken_at_once_print_as_a_pass_at_a_time(
        trace in branchy_trace(),
        code in loopy_code(),
        opts in any::<(bool, bool, bool)>(),
    ) {
        let want = ptxed_with(trace.clone(), code.clone(), true, opts);
        let got = ptxed_with(trace, code, false, opts);
        prop_assert_eq!(got, want);
    }
}
