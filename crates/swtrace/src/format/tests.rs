//! The packet format's own unit tests.

use super::*;

// Each test checks a packet's bytes against the table in the module doc.

#[test]
fn enter_short_and_long_layout() {
    // Short form: header 0x80 | id, then uleb delta (300 = 0xAC 0x02).
    assert_eq!(
        encode_packet(&Packet::Enter { id: 5, delta: 300 }),
        [0x85, 0xAC, 0x02]
    );
    assert_eq!(
        encode_packet(&Packet::Enter { id: 127, delta: 0 }),
        [0xFF, 0x00]
    );
    // Long form from id 128: 0x02, uleb id (128 = 0x80 0x01), uleb delta.
    assert_eq!(
        encode_packet(&Packet::Enter { id: 128, delta: 1 }),
        [0x02, 0x80, 0x01, 0x01]
    );
    let max = encode_packet(&Packet::Enter {
        id: u32::MAX,
        delta: u64::MAX,
    });
    assert_eq!(max.len(), MAX_EVENT);
    assert_eq!(&max[..6], [0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
    assert_eq!(max[15], 0x01);
}

#[test]
fn packed_events_are_the_encoded_bytes() {
    for id in [0u32, 1, 5, 127, 128, 300, 1 << 20, u32::MAX] {
        for delta in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let (v, n) = pack_event(id, delta);
            let want = if id == 0 {
                encode_packet(&Packet::Exit { delta })
            } else {
                encode_packet(&Packet::Enter { id, delta })
            };
            assert_eq!(&v.to_le_bytes()[..n], &want[..], "id {id} delta {delta}");
            assert!(v.to_le_bytes()[n..].iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn exit_boundary_lost_layout() {
    assert_eq!(encode_packet(&Packet::Exit { delta: 127 }), [0x01, 0x7F]);
    assert_eq!(
        encode_packet(&Packet::Exit { delta: 128 }),
        [0x01, 0x80, 0x01]
    );
    assert_eq!(encode_packet(&Packet::Paused { delta: 2 }), [0x03, 0x02]);
    assert_eq!(encode_packet(&Packet::Resumed { delta: 3 }), [0x04, 0x03]);
    assert_eq!(encode_packet(&Packet::Stopped { delta: 4 }), [0x05, 0x04]);
    assert_eq!(
        encode_packet(&Packet::Lost {
            kind: LostKind::Full,
            count: 200,
            delta: 9
        }),
        [0x06, 0x02, 0xC8, 0x01, 0x09]
    );
    assert_eq!(encode_packet(&Packet::Pad), [0x00]);
}

fn sample_sync() -> Sync {
    Sync {
        flags: SYNC_FLAG_TSC,
        tid: 0x0102_0304,
        depth: 20,
        first: 18,
        frames: vec![7, 0x0A0B_0C0D],
        ticks: 0x1122_3344_5566_7788,
        conv: TimeConv {
            anchor_ticks: 0x99,
            anchor_ns: 0x1_0000_0000,
            mult: 0xABCD,
            shift: 31,
        },
    }
}

#[test]
fn sync_layout() {
    let b = encode_packet(&Packet::Sync(sample_sync()));
    assert_eq!(b.len(), 60 + 4 * 2);
    assert_eq!(b[..8], SYNC_MAGIC);
    assert_eq!(b[8], 1, "version");
    assert_eq!(b[9], 1, "flags: TSC");
    assert_eq!(b[10], 2, "n");
    assert_eq!(b[11], 0);
    assert_eq!(b[12..16], [0x04, 0x03, 0x02, 0x01], "tid LE");
    assert_eq!(b[16..20], 20u32.to_le_bytes(), "depth");
    assert_eq!(b[20..24], 18u32.to_le_bytes(), "first");
    assert_eq!(b[24..32], 0x1122_3344_5566_7788u64.to_le_bytes(), "ticks");
    assert_eq!(b[32..40], 0x99u64.to_le_bytes(), "anchor_ticks");
    assert_eq!(b[40..48], 0x1_0000_0000u64.to_le_bytes(), "anchor_ns");
    assert_eq!(b[48..52], 0xABCDu32.to_le_bytes(), "mult");
    assert_eq!(b[52], 31, "shift");
    assert_eq!(b[53..56], [0, 0, 0]);
    assert_eq!(b[56..60], 7u32.to_le_bytes());
    assert_eq!(b[60..64], 0x0A0B_0C0Du32.to_le_bytes());
    // The checksum as the module doc defines it, computed independently here.
    let mut h: u32 = 0x811C_9DC5;
    for w in b[..64].chunks(4) {
        let w = u32::from_le_bytes(w.try_into().unwrap());
        h = (h ^ w).wrapping_mul(0x9E37_79B1).rotate_left(15);
    }
    assert_eq!(b[64..68], h.to_le_bytes());
    assert_eq!(parse_packet(&b), Ok((Packet::Sync(sample_sync()), 68)));
}

#[test]
fn sync_validation_rejects_each_broken_constraint() {
    let good = encode_packet(&Packet::Sync(sample_sync()));
    let reseal = |mut b: Vec<u8>| {
        let end = b.len() - 4;
        let sum = sync_checksum(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
        b
    };
    let mut bad_sum = good.clone();
    bad_sum[30] ^= 1;
    assert_eq!(
        parse_sync(&bad_sum),
        Err(PacketError::BadSync("checksum mismatch"))
    );
    let mut v = good.clone();
    v[8] = 2;
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("version is not 1"))
    );
    let mut v = good.clone();
    v[9] = 0x81;
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("unknown flag bits"))
    );
    let mut v = good.clone();
    v[20..24].copy_from_slice(&19u32.to_le_bytes());
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("first + n exceeds depth"))
    );
    let mut v = good.clone();
    v[52] = 64;
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("shift above 63"))
    );
    let mut v = good.clone();
    v[54] = 1;
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("reserved bytes not zero"))
    );
    let mut v = good.clone();
    v[56..60].fill(0);
    assert_eq!(
        parse_sync(&reseal(v)),
        Err(PacketError::BadSync("frame with probe id 0"))
    );
    let mut v = good.clone();
    v[10] = 17;
    assert_eq!(
        parse_sync(&v),
        Err(PacketError::BadSync("more than 16 frames"))
    );
    assert_eq!(
        parse_sync(&good[..40]),
        Err(PacketError::Truncated { available: 40 })
    );
    assert_eq!(
        parse_sync(&good[..60]),
        Err(PacketError::Truncated { available: 60 })
    );
}

#[test]
fn invalid_headers_and_ulebs() {
    for h in [0x08u8, 0x09, 0x0B, 0x42, 0x7F, 0x80] {
        assert_eq!(parse_packet(&[h, 0, 0]), Err(PacketError::BadHeader(h)));
    }
    // 11-byte delta: longer than a u64 uleb may be.
    let mut long = vec![EXIT];
    long.extend([0x80; 10]);
    long.push(0);
    assert_eq!(parse_packet(&long), Err(PacketError::BadUleb("delta")));
    // 10th byte carrying more than the u64's last bit overflows.
    let mut over = vec![EXIT];
    over.extend([0xFF; 9]);
    over.push(0x02);
    assert_eq!(parse_packet(&over), Err(PacketError::BadUleb("delta")));
    // Id above u32.
    assert_eq!(
        parse_packet(&[ENTER, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0]),
        Err(PacketError::BadUleb("id"))
    );
    assert_eq!(parse_packet(&[ENTER, 0x00, 0x00]), Err(PacketError::ZeroId));
    assert_eq!(
        parse_packet(&[LOST, 3, 1, 1]),
        Err(PacketError::BadLostKind(3))
    );
    assert_eq!(
        parse_packet(&[0x85, 0x80]),
        Err(PacketError::Truncated { available: 2 })
    );
    assert_eq!(
        parse_packet(&[]),
        Err(PacketError::Truncated { available: 0 })
    );
}
