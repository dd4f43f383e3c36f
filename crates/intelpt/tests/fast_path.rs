//! `Packets::for_each_packet` (the fast path: one-byte and TIP-family packets inline) gives
//! exactly what `decode` gives packet by packet, the error and its offset included, in every
//! dialect and whatever the bytes.

use perfaux_intelpt::decode::{Context, DecodeError, Dialect, Located, Packets, decode};
use proptest::prelude::*;

fn slow(buf: &[u8], dialect: Dialect) -> (Vec<Located>, Option<(usize, DecodeError)>) {
    let mut ctx = Context::new(dialect);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match decode(&buf[pos..], &mut ctx) {
            Ok((packet, len)) => {
                out.push(Located {
                    offset: pos,
                    len,
                    packet,
                });
                pos += len;
            }
            Err(e) => return (out, Some((pos, e))),
        }
    }
    (out, None)
}

fn fast(buf: &[u8], dialect: Dialect) -> (Vec<Located>, Option<(usize, DecodeError)>) {
    let mut out = Vec::new();
    let r = Packets::new(buf, 0, dialect).for_each_packet(|p| out.push(p));
    (out, r.err())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_fast_path_decodes_as_decode_does(
        bytes in prop::collection::vec(
            prop_oneof![
                Just(0u8), Just(0x02), Just(0x63), Just(0x80), Just(0x0c), Just(0x4d),
                Just(0x1d), Just(0xfd), any::<u8>()
            ],
            0..512,
        )
    ) {
        for dialect in [Dialect::Sdm, Dialect::Libipt, Dialect::Perf] {
            prop_assert_eq!(fast(&bytes, dialect), slow(&bytes, dialect));
        }
    }
}
