//! The Intel PT packet encoder: the byte layouts of the Intel SDM vol. 3, chapter "Intel
//! Processor Trace", section "Packet Descriptions" (the same layouts perf's
//! intel-pt-pkt-decoder.c and libipt read, and perfaux-intelpt's packet.rs decodes).
//!
//! It keeps what the hardware keeps between packets: the pending TNT bits (flushed before
//! any other packet, so that decoders see the branches in order) and the last IP, against
//! which TIP/FUP targets are compressed.

/// Packets in the order written, with the state the hardware keeps.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    /// The packet stream.
    pub(crate) buf: Vec<u8>,
    /// The last IP (SDM "IP Compression"): reset to 0 by PSB, set by every FUP/TIP* whose
    /// IP is not suppressed.
    last_ip: u64,
    /// Pending TNT bits, the oldest in the highest bit of the `tnt_n` used.
    tnt: u64,
    tnt_n: u32,
    /// `buf.len()` at the last PSB.
    pub(crate) last_psb: usize,
    /// Counts, for the report.
    pub(crate) psbs: u64,
    pub(crate) tips: u64,
    pub(crate) tnt_packets: u64,
}

/// Header bytes of the IP packets (bits 4:0; bits 7:5 are IPBytes).
const TIP: u8 = 0x0d;
const TIP_PGE: u8 = 0x11;
const TIP_PGD: u8 = 0x01;
const FUP: u8 = 0x1d;

/// The most TNT bits one long TNT carries.
const LONG_TNT_BITS: u32 = 47;
/// The most TNT bits one short TNT carries.
const SHORT_TNT_BITS: u32 = 6;

impl Encoder {
    /// One conditional branch: taken or not.
    pub(crate) fn tnt(&mut self, taken: bool) {
        self.tnt = (self.tnt << 1) | u64::from(taken);
        self.tnt_n += 1;
        if self.tnt_n == LONG_TNT_BITS {
            self.flush_tnt();
        }
    }

    /// Writes the pending TNT bits: a short TNT for up to 6, a long TNT for more.
    pub(crate) fn flush_tnt(&mut self) {
        let n = self.tnt_n;
        if n == 0 {
            return;
        }
        // Both forms: the stop bit (1) just above the bits, the oldest bit right below it.
        if n <= SHORT_TNT_BITS {
            // Short TNT: bit 0 is 0, the bits and the stop bit above it.
            self.buf.push((((1u64 << n) | self.tnt) << 1) as u8);
        } else {
            // Long TNT: 02 a3, then 6 bytes holding the bits and the stop bit.
            let payload = (1u64 << n) | self.tnt;
            self.buf.extend_from_slice(&[0x02, 0xa3]);
            self.buf.extend_from_slice(&payload.to_le_bytes()[..6]);
        }
        self.tnt_packets += 1;
        self.tnt = 0;
        self.tnt_n = 0;
    }

    /// An IP packet (`header` one of TIP, TIP.PGE, TIP.PGD, FUP) with `ip` compressed
    /// against the last IP (`compress`) or written whole (48 bits sign-extended, or 64).
    fn ip_packet(&mut self, header: u8, ip: u64, compress: bool) {
        self.flush_tnt();
        let last = self.last_ip;
        // IPBytes: 001 = 16 bits, upper 48 from the last IP; 010 = 32 bits, upper 32 from
        // the last IP; 011 = 48 bits sign-extended; 110 = 64 bits.
        let sext48 = ((ip << 16) as i64 >> 16) as u64 == ip;
        let (ipbytes, n) = if compress && ip >> 16 == last >> 16 {
            (1u8, 2usize)
        } else if compress && ip >> 32 == last >> 32 {
            (2, 4)
        } else if sext48 {
            (3, 6)
        } else {
            (6, 8)
        };
        self.buf.push((ipbytes << 5) | header);
        self.buf.extend_from_slice(&ip.to_le_bytes()[..n]);
        self.last_ip = ip;
    }

    /// TIP: the target of an indirect branch or a return.
    pub(crate) fn tip(&mut self, ip: u64) {
        self.ip_packet(TIP, ip, true);
        self.tips += 1;
    }

    /// TIP.PGE: tracing (PacketEn) turns on at `ip`.
    pub(crate) fn tip_pge(&mut self, ip: u64) {
        self.ip_packet(TIP_PGE, ip, false);
    }

    /// TIP.PGD with the IP suppressed: tracing turns off because the branch goes where
    /// it is filtered out (the kernel, for a user-only trace). The last IP stays.
    pub(crate) fn tip_pgd_noip(&mut self) {
        self.flush_tnt();
        self.buf.push(TIP_PGD);
    }

    /// FUP: the IP where the PSB+ (or an asynchronous event) happened.
    pub(crate) fn fup(&mut self, ip: u64) {
        self.ip_packet(FUP, ip, false);
    }

    /// TSC: the low 56 bits of the time stamp counter.
    pub(crate) fn tsc(&mut self, tsc: u64) {
        self.flush_tnt();
        self.buf.push(0x19);
        self.buf.extend_from_slice(&tsc.to_le_bytes()[..7]);
    }

    /// MODE.Exec for 64-bit code (CS.L = 1, CS.D = 0; IF not reported).
    pub(crate) fn mode_exec_64(&mut self) {
        self.flush_tnt();
        self.buf.extend_from_slice(&[0x99, 0x01]);
    }

    /// PSB: the 16-byte synchronisation pattern; it resets the last IP.
    pub(crate) fn psb(&mut self) {
        self.flush_tnt();
        for _ in 0..8 {
            self.buf.extend_from_slice(&[0x02, 0x82]);
        }
        self.last_ip = 0;
        self.last_psb = self.buf.len();
        self.psbs += 1;
    }

    /// PSBEND: the end of the PSB+ status packets.
    pub(crate) fn psbend(&mut self) {
        self.buf.extend_from_slice(&[0x02, 0x23]);
    }

    /// Bytes written since the last PSB.
    pub(crate) fn since_psb(&self) -> usize {
        self.buf.len() - self.last_psb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tnt_bits_oldest_first() {
        let mut e = Encoder::default();
        for t in [true, true, false] {
            e.tnt(t);
        }
        e.flush_tnt();
        // stop bit at 4, T T N at 3..1, bit 0 = 0: 0b1_110_0.
        assert_eq!(e.buf, [0b11100]);
        let mut e = Encoder::default();
        for i in 0..8 {
            e.tnt(i % 2 == 0);
        }
        e.flush_tnt();
        // T N T N T N T N, stop bit at 8: 0b1_1010_1010.
        assert_eq!(e.buf, [0x02, 0xa3, 0xaa, 0x01, 0, 0, 0, 0]);
    }

    #[test]
    fn ip_compression() {
        let mut e = Encoder::default();
        e.psb();
        e.buf.clear();
        e.tip_pge(0x7f12_3456_789a);
        assert_eq!(e.buf, [0x71, 0x9a, 0x78, 0x56, 0x34, 0x12, 0x7f]);
        e.buf.clear();
        e.tip(0x7f12_3456_0011);
        assert_eq!(e.buf, [0x2d, 0x11, 0x00]);
        e.buf.clear();
        e.tip(0x7f12_0000_0022);
        assert_eq!(e.buf, [0x4d, 0x22, 0, 0, 0]);
        e.buf.clear();
        e.tip(0x5555_0000_0022);
        assert_eq!(e.buf, [0x6d, 0x22, 0, 0, 0, 0x55, 0x55]);
    }
}
