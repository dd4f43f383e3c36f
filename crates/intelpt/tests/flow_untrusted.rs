//! Any trace and any code are safe input for the flow: random bytes for both, and traces
//! built from real packets over code built from real branches, decode to the end without a
//! panic, and the output stays bounded (the walk without trace has a limit).

use perfaux_intelpt::image::{Image, Section};
use perfaux_intelpt::ptxed;
use proptest::prelude::*;

fn trace() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(perfaux_intelpt::decode::PSB.to_vec()),
        Just(vec![0x02, 0x23]),
        Just(vec![0x02, 0xf3]),
        Just(vec![0x99, 0x01]),
        Just(vec![0x99, 0x21]),
        Just(vec![0x02, 0x43, 0x10, 0, 0, 0, 0, 0]),
        any::<u8>().prop_map(|b| vec![b & !1]),
        any::<[u8; 2]>().prop_map(|b| vec![0x3d, b[0], b[1]]),
        any::<[u8; 2]>().prop_map(|b| vec![0x2d, b[0], b[1]]),
        any::<[u8; 2]>().prop_map(|b| vec![0x31, b[0], b[1]]),
        any::<[u8; 2]>().prop_map(|b| vec![0x21, b[0], b[1]]),
        Just(vec![0x01]),
        Just(vec![0x7d, 0x00, 0x10, 0, 0, 0, 0]),
        any::<[u8; 4]>().prop_map(|b| vec![0x02, b[0] | 0x12, b[1], b[2], b[3], 0]),
        any::<[u8; 2]>().prop_map(|b| vec![0x02, 0x13, b[0], b[1]]),
        any::<u8>().prop_map(|t| vec![0x02, 0x53, t & 3, 1, 2, 3, 4, 0, 0, 0, 0]),
        Just(vec![0x02, 0xc2, 1, 0, 0, 0, 0, 0, 0, 0]),
        Just(vec![0x02, 0xe2]),
        any::<[u8; 3]>().prop_map(|b| vec![0xd9, b[0] & 0xe0, b[1], b[2] & 7, 0]),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(piece, 0..120).prop_map(|v| v.concat())
}

fn code() -> impl Strategy<Value = Vec<u8>> {
    let insn = prop_oneof![
        Just(vec![0x90]),
        Just(vec![0xc3]),
        Just(vec![0xff, 0xe0]),
        Just(vec![0xff, 0xd0]),
        any::<i8>().prop_map(|d| vec![0x74, d as u8]),
        any::<i8>().prop_map(|d| vec![0xeb, d as u8]),
        any::<i8>().prop_map(|d| vec![0xe8, d as u8, 0, 0, 0]),
        Just(vec![0x0f, 0x05]),
        Just(vec![0x48, 0xcf]),
        Just(vec![0x0f, 0x22, 0xd8]),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(insn, 1..200).prop_map(|v| v.concat())
}

fn run(trace: Vec<u8>, code: Vec<u8>, opts: ptxed::Options) -> Result<(), TestCaseError> {
    let mut image = Image::default();
    image.add(Section {
        base: 0x1000,
        bytes: code,
        name: "code".into(),
    });
    let setup = ptxed::Setup {
        options: opts,
        image,
        trace,
        sideband: Default::default(),
    };
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    // A walk without trace stops at 2^20 instructions; a trace of a few thousand bytes
    // has at most a few hundred PSBs to restart at.
    prop_assert!(out.len() < 1 << 30);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_traces_over_random_code_decode_to_the_end(
        trace in prop::collection::vec(any::<u8>(), 0..2048),
        code in prop::collection::vec(any::<u8>(), 1..512),
    ) {
        run(trace, code, ptxed::Options::default())?;
    }

    #[test]
    fn packet_traces_over_branchy_code_decode_to_the_end(
        trace in trace(),
        code in code(),
        event_ip in any::<bool>(),
        cpu in prop_oneof![Just(None), Just(Some((6u16, 142u8))), Just(Some((6, 92))), Just(Some((6, 61)))],
    ) {
        let opts = ptxed::Options {
            event_ip,
            cpu: cpu.map(|(family, model)| perfaux_intelpt::errata::Cpu { family, model, stepping: 0 }),
            ..ptxed::Options::default()
        };
        run(trace, code, opts)?;
    }
}

/// A jump to itself with a block option that ends a block after each jump: the walk without
/// trace still stops (the bound counts instructions since the last event, not per block).
#[test]
fn a_jump_to_itself_ends_whatever_ends_the_blocks() {
    let mut trace = perfaux_intelpt::decode::PSB.to_vec();
    trace.extend([0x7d, 0x00, 0x10, 0, 0, 0, 0, 0x02, 0x23, 0x06]);
    for opt in ["--block:end-on-jump", "--block:end-on-call"] {
        let code = if opt.ends_with("jump") {
            vec![0xeb, 0xfe]
        } else {
            vec![0xe8, 0xfb, 0xff, 0xff, 0xff]
        };
        let mut image = Image::default();
        image.add(Section {
            base: 0x1000,
            bytes: code,
            name: "code".into(),
        });
        let mut opts = ptxed::Options {
            quiet: true,
            ..ptxed::Options::default()
        };
        opts.flow.end_on_jump = opt.ends_with("jump");
        opts.flow.end_on_call = opt.ends_with("call");
        let setup = ptxed::Setup {
            options: opts,
            image,
            trace: trace.clone(),
            sideband: Default::default(),
        };
        let mut out = Vec::new();
        ptxed::run(&setup, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("error: internal error"), "{opt}: {out}");
    }
}

/// An instruction that ends at the top of the address space: its fall-through wraps as the
/// hardware's would, no overflow.
#[test]
fn code_at_the_top_of_the_address_space_decodes() {
    let mut trace = perfaux_intelpt::decode::PSB.to_vec();
    // FUP with a full IP of 0xffff_ffff_ffff_fffe, PSBEND, a TNT.
    trace.extend([
        0xdd, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x23, 0x06,
    ]);
    let mut image = Image::default();
    image.add(Section {
        base: 0xffff_ffff_ffff_fffe,
        bytes: vec![0x90, 0xe8],
        name: "code".into(),
    });
    let setup = ptxed::Setup {
        options: ptxed::Options::default(),
        image,
        trace,
        sideband: Default::default(),
    };
    let mut out = Vec::new();
    ptxed::run(&setup, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains("fffffffffffffffe"));
}
