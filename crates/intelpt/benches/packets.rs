//! Packet decoding speed: every packet of real Intel PT streams (the Skylake recording's two
//! AUXTRACE payloads, repeated to 128 MiB, as the issue measured its peers), counted by
//! perfaux's decoder, by iptr-decoder 0.1.3 (a pure-Rust packet decoder) and by libipt's
//! packet decoder (Intel's reference, Debian's libipt2 loaded at run time:
//! benches/common/libipt.rs), in the same run.

#[path = "common/libipt.rs"]
mod libipt;

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iptr_decoder::packet_handler::packet_counter::PacketCounter;
use iptr_decoder::{DecoderContext, HandlePacket, IpReconstructionPattern};
use perfaux_intelpt::{Dialect, Packet, Packets, next_psb};

fn stream() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/intel_pt");
    let mut one = Vec::new();
    for i in 0..2 {
        one.extend(
            std::fs::read(dir.join(format!("quipper_intel_pt-4.14.auxtrace{i}.bin"))).unwrap(),
        );
    }
    let mut buf = Vec::with_capacity(128 << 20);
    while buf.len() + one.len() <= 128 << 20 {
        buf.extend_from_slice(&one);
    }
    buf
}

/// perfaux: every packet from the first PSB, resyncing at the next PSB after an error;
/// `READ`: each packet's fields are read (kept from the optimizer), not only counted.
fn perfaux_count<const READ: bool>(buf: &[u8]) -> usize {
    let mut n = 0;
    let Some(start) = next_psb(buf, 0) else {
        return 0;
    };
    let mut packets = Packets::new(buf, start, Dialect::Sdm);
    while let Err((at, _)) = packets.for_each_packet(|p| {
        if READ {
            black_box(&p.packet);
        }
        n += 1;
    }) {
        match next_psb(buf, at + 1) {
            Some(p) => packets.seek(p),
            None => break,
        }
    }
    n
}

/// What a flow decoder takes from the packets: the branch outcomes (counted) and the IP
/// payloads (summed), by both decoders, so neither's fields can be left uncomputed.
#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
struct Flow {
    outcomes: u64,
    ips: u64,
}

fn perfaux_flow(buf: &[u8]) -> Flow {
    let mut flow = Flow::default();
    let Some(start) = next_psb(buf, 0) else {
        return flow;
    };
    let mut packets = Packets::new(buf, start, Dialect::Sdm);
    while let Err((at, _)) = packets.for_each_packet(|p| match p.packet {
        Packet::Tnt(t) => flow.outcomes += u64::from(t.count),
        Packet::Tip { ip, .. } => flow.ips = flow.ips.wrapping_add(ip.payload),
        _ => {}
    }) {
        match next_psb(buf, at + 1) {
            Some(p) => packets.seek(p),
            None => break,
        }
    }
    flow
}

impl HandlePacket for Flow {
    type Error = std::convert::Infallible;

    fn at_decode_begin(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    fn on_short_tnt_packet(
        &mut self,
        _: &DecoderContext,
        _: std::num::NonZero<u8>,
        highest_bit: u32,
    ) -> Result<(), Self::Error> {
        self.outcomes += u64::from(highest_bit);
        Ok(())
    }

    fn on_long_tnt_packet(
        &mut self,
        _: &DecoderContext,
        _: std::num::NonZero<u64>,
        highest_bit: u32,
    ) -> Result<(), Self::Error> {
        self.outcomes += u64::from(highest_bit);
        Ok(())
    }

    fn on_tip_packet(
        &mut self,
        _: &DecoderContext,
        ip: IpReconstructionPattern,
    ) -> Result<(), Self::Error> {
        self.add_ip(ip);
        Ok(())
    }

    fn on_tip_pge_packet(
        &mut self,
        _: &DecoderContext,
        ip: IpReconstructionPattern,
    ) -> Result<(), Self::Error> {
        self.add_ip(ip);
        Ok(())
    }

    fn on_tip_pgd_packet(
        &mut self,
        _: &DecoderContext,
        ip: IpReconstructionPattern,
    ) -> Result<(), Self::Error> {
        self.add_ip(ip);
        Ok(())
    }

    fn on_fup_packet(
        &mut self,
        _: &DecoderContext,
        ip: IpReconstructionPattern,
    ) -> Result<(), Self::Error> {
        self.add_ip(ip);
        Ok(())
    }
}

impl Flow {
    fn add_ip(&mut self, ip: IpReconstructionPattern) {
        let v = match ip {
            IpReconstructionPattern::OutOfContext => 0,
            IpReconstructionPattern::TwoBytesWithLastIp(v) => u64::from(v),
            IpReconstructionPattern::FourBytesWithLastIp(v) => u64::from(v),
            IpReconstructionPattern::SixBytesExtended(v)
            | IpReconstructionPattern::SixBytesWithLastIp(v)
            | IpReconstructionPattern::EightBytes(v) => v,
        };
        self.ips = self.ips.wrapping_add(v);
    }
}

fn iptr_flow(buf: &[u8]) -> Flow {
    let mut flow = Flow::default();
    iptr_decoder::decode(buf, iptr_decoder::DecodeOptions::default(), &mut flow).unwrap();
    flow
}

fn iptr_count(buf: &[u8]) -> usize {
    let mut counter = PacketCounter::new();
    iptr_decoder::decode(buf, iptr_decoder::DecodeOptions::default(), &mut counter).unwrap();
    counter.packet_count()
}

/// libipt: every packet from the first PSB, resyncing at the next PSB after an error (as
/// ptdump does); `FLOW`: the branch outcomes and IP payloads taken, as [`perfaux_flow`].
fn libipt_walk<const FLOW: bool>(lib: &libipt::Libipt, buf: &[u8]) -> (usize, Flow) {
    use libipt::*;
    let mut dec = Session::new(lib.packets, buf);
    let (mut n, mut flow) = (0, Flow::default());
    let mut p = Packet::default();
    let mut st = dec.sync_forward();
    while st >= 0 {
        let r = dec.next(&mut p);
        if r < 0 {
            if r == PTE_EOS {
                break;
            }
            st = dec.sync_forward();
            continue;
        }
        n += 1;
        if FLOW {
            match p.kind {
                // bit_size, the first payload byte.
                PPT_TNT_8 | PPT_TNT_64 => flow.outcomes += p.payload[0] & 0xff,
                PPT_TIP | PPT_TIP_PGE | PPT_TIP_PGD | PPT_FUP => {
                    flow.ips = flow.ips.wrapping_add(p.payload[1])
                }
                _ => {}
            }
        }
    }
    (n, flow)
}

fn bench(c: &mut Criterion) {
    let buf = stream();
    let lib = libipt::Libipt::load()
        .inspect_err(|e| eprintln!("skipped: the libipt peer: {e}"))
        .ok();
    if let Some(lib) = &lib {
        let (n, _) = libipt_walk::<false>(lib, &buf);
        let (_, flow) = libipt_walk::<true>(lib, &buf);
        eprintln!("packets: libipt {n}; flow: libipt {flow:?}");
        assert_eq!(n, perfaux_count::<false>(&buf));
        assert_eq!(flow, perfaux_flow(&buf));
    }
    let (ours, theirs) = (perfaux_count::<false>(&buf), iptr_count(&buf));
    eprintln!("packets: perfaux {ours}, iptr-decoder {theirs}");
    let (ours_flow, theirs_flow) = (perfaux_flow(&buf), iptr_flow(&buf));
    eprintln!("flow: perfaux {ours_flow:?}, iptr-decoder {theirs_flow:?}");
    assert_eq!(ours, theirs);
    assert_eq!(ours_flow, theirs_flow);
    let mut g = c.benchmark_group("intel_pt_packets");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    g.sample_size(10);
    g.bench_function("perfaux", |b| {
        b.iter(|| perfaux_count::<false>(black_box(&buf)))
    });
    g.bench_function("perfaux_fields_read", |b| {
        b.iter(|| perfaux_count::<true>(black_box(&buf)))
    });
    g.bench_function("iptr_decoder_0_1_3", |b| {
        b.iter(|| iptr_count(black_box(&buf)))
    });
    g.bench_function("perfaux_flow", |b| b.iter(|| perfaux_flow(black_box(&buf))));
    g.bench_function("iptr_decoder_0_1_3_flow", |b| {
        b.iter(|| iptr_flow(black_box(&buf)))
    });
    if let Some(lib) = &lib {
        g.bench_function("libipt_2_0_5", |b| {
            b.iter(|| libipt_walk::<false>(lib, black_box(&buf)))
        });
        g.bench_function("libipt_2_0_5_flow", |b| {
            b.iter(|| libipt_walk::<true>(lib, black_box(&buf)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
