//! The last IP: what TIP-family packets compress their IPs against (SDM "IP Compression").

use crate::packet::PacketIp;

/// Why there is no IP to give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoIp {
    /// No packet has given an IP yet.
    None,
    /// The last packet suppressed its IP.
    Suppressed,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastIp {
    ip: u64,
    have_ip: bool,
    suppressed: bool,
}

/// Bits 47:0 of an IP sign-extended to 64, as a canonical address.
pub fn sext48(v: u64) -> u64 {
    (((v << 16) as i64) >> 16) as u64
}

impl LastIp {
    /// Applies a packet's IP. The decoder has already refused the reserved compressions.
    pub fn update(&mut self, p: PacketIp) {
        let v = p.payload;
        self.ip = match p.compression.0 {
            0 => {
                self.suppressed = true;
                return;
            }
            1 => (self.ip & !0xffff) | (v & 0xffff),
            2 => (self.ip & !0xffff_ffff) | (v & 0xffff_ffff),
            3 => sext48(v),
            4 => (self.ip & !0xffff_ffff_ffff) | (v & 0xffff_ffff_ffff),
            _ => v,
        };
        self.have_ip = true;
        self.suppressed = false;
    }

    pub fn query(&self) -> Result<u64, NoIp> {
        if !self.have_ip {
            Err(NoIp::None)
        } else if self.suppressed {
            Err(NoIp::Suppressed)
        } else {
            Ok(self.ip)
        }
    }
}
