//! The packets of Intel PT (Intel SDM vol. 3, chapter "Intel Processor Trace", section "Packet
//! Descriptions"), as plain values: what a packet's bytes say, before any state (last IP, time)
//! is applied to them.

/// How a TIP-family packet's IP payload relates to the last IP (the IPBytes field).
///
/// The value is the field itself, so a dump can print it as the SDM and ptdump number it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpCompression(pub u8);

impl IpCompression {
    /// No payload: the IP is suppressed (out of context, or the packet has none).
    pub const SUPPRESSED: Self = Self(0);
    /// 16 bits, the rest from the last IP.
    pub const UPDATE_16: Self = Self(1);
    /// 32 bits, the rest from the last IP.
    pub const UPDATE_32: Self = Self(2);
    /// 48 bits, sign-extended.
    pub const SEXT_48: Self = Self(3);
    /// 48 bits, the top 16 from the last IP.
    pub const UPDATE_48: Self = Self(4);
    /// 64 bits, the full IP.
    pub const FULL: Self = Self(6);

    /// The payload's length in bytes, or `None` for the reserved encodings 5 and 7.
    pub const fn payload_len(self) -> Option<usize> {
        match self.0 {
            0 => Some(0),
            1 => Some(2),
            2 => Some(4),
            3 | 4 => Some(6),
            6 => Some(8),
            _ => None,
        }
    }
}

/// An IP as a packet carries it: the compression and the raw payload bytes (zero-extended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketIp {
    pub compression: IpCompression,
    pub payload: u64,
}

/// Which of the four packets that share the TIP layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TipKind {
    /// Target IP of an indirect branch, a far transfer or a compressed return.
    Tip,
    /// Packet generation enabled, at this IP.
    TipPge,
    /// Packet generation disabled.
    TipPgd,
    /// Flow update: the source IP of an asynchronous event.
    Fup,
}

/// A taken/not-taken packet: `count` branch outcomes, the oldest in the highest bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tnt {
    /// Bit `count - 1` is the oldest branch; a set bit is taken.
    pub bits: u64,
    pub count: u8,
    /// The 8-byte long form (TNT.64), not the 1-byte short form (TNT.8).
    pub long: bool,
}

impl Tnt {
    /// The outcomes, oldest first.
    pub fn taken(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.count).rev().map(move |i| self.bits >> i & 1 == 1)
    }
}

/// PTWRITE's payload: 4 or 8 bytes, and whether a FUP with the PTWRITE's IP follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptw {
    /// The PayloadBytes field: 0 for 4 bytes, 1 for 8.
    pub size_code: u8,
    pub payload: u64,
    pub ip: bool,
}

/// One Intel PT packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    /// Padding, one byte.
    Pad,
    /// Packet stream boundary: the sync point, 16 bytes.
    Psb,
    /// The end of a PSB+ header.
    PsbEnd,
    /// Internal buffer overflow: packets were lost.
    Ovf,
    Tnt(Tnt),
    Tip {
        kind: TipKind,
        ip: PacketIp,
    },
    /// MODE.Exec: the code size and, since the event-trace extension, the interrupt flag.
    ModeExec {
        csl: bool,
        csd: bool,
        iflag: bool,
    },
    /// MODE.TSX: in a transaction, or aborting one.
    ModeTsx {
        intx: bool,
        abort: bool,
    },
    /// Paging information: CR3 (bits 51:5) and whether the guest is non-root.
    Pip {
        cr3: u64,
        nr: bool,
    },
    /// The time-stamp counter's low 56 bits.
    Tsc(u64),
    /// Mini time counter: bits of the crystal clock counter, 8 of them.
    Mtc(u8),
    /// TSC/MTC alignment: the CTC's low 16 bits and the fast counter (9 bits) at the last TSC.
    /// `reserved`: whether the packet's reserved bits are set (libipt refuses such a packet,
    /// perf ignores the bits).
    Tma {
        ctc: u16,
        fc: u16,
        reserved: bool,
    },
    /// Cycle count since the last CYC (or since tracing began).
    Cyc(u64),
    /// Core:bus ratio (the low byte) and the reserved byte after it, which perf prints.
    Cbr(u16),
    /// The VMCS pointer (bits 51:12).
    Vmcs(u64),
    /// Maintenance: a model-specific 64-bit payload.
    Mnt(u64),
    /// TraceStop: tracing stopped on a filter range or a full output region.
    Stop,
    Ptw(Ptw),
    /// Execution stopped (C-state entry, for example); `ip`: a FUP follows.
    Exstop {
        ip: bool,
    },
    /// MWAIT's hints and extensions.
    Mwait {
        hints: u32,
        ext: u32,
    },
    /// Power entry: its two payload bytes (the C-state requested, as MWAIT's hint fields, and
    /// whether hardware chose it). Kept raw: libipt and perf read the hardware bit from
    /// different places, and each dump follows its tool.
    Pwre {
        payload: u16,
    },
    /// Power exit: its five payload bytes (the last and deepest core C-states and the wake
    /// reason bits), raw for the same reason.
    Pwrx {
        payload: u64,
    },
    /// Block begin (PEBS via PT): the size of the items that follow (4 or 8 bytes) and the
    /// block's type.
    Bbp {
        sz8: bool,
        typ: u8,
    },
    /// Block item: an id and its 4 or 8 bytes (sized by the BBP before it).
    Bip {
        id: u8,
        payload: u64,
        sz8: bool,
    },
    /// Block end; `ip`: a FUP follows.
    Bep {
        ip: bool,
    },
    /// Control flow event (event trace): its type (bits 4:0), vector and whether a FUP
    /// follows.
    Cfe {
        typ: u8,
        vector: u8,
        ip: bool,
    },
    /// Event data (event trace): its type byte, raw (libipt reads 5 bits of it, perf 6), and
    /// 64-bit payload.
    Evd {
        typ: u8,
        payload: u64,
    },
    /// Trigger (trigger tracing): the trigger bit vector, an instruction count when given,
    /// whether several triggers fired, and whether an IP follows.
    Trig {
        trbv: u8,
        icnt: Option<u16>,
        mult: bool,
        ip: bool,
    },
}

/// PWRE's fields as libipt reads its two payload bytes: the C-state and sub-state requested
/// (MWAIT's hint fields, one less than the state's number) and whether hardware chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pwre {
    pub state: u8,
    pub sub_state: u8,
    pub hw: bool,
}

impl Pwre {
    pub fn from_payload(payload: u16) -> Self {
        let (b2, b3) = (payload as u8, (payload >> 8) as u8);
        Pwre {
            state: b3 >> 4,
            sub_state: b3 & 0xf,
            hw: b2 & 0x08 != 0,
        }
    }
}

/// PWRX's fields as libipt reads them: the last and deepest core C-states (hint fields) and
/// the wake reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pwrx {
    pub last: u8,
    pub deepest: u8,
    pub interrupt: bool,
    pub store: bool,
    pub hw: bool,
}

impl Pwrx {
    pub fn from_payload(payload: u64) -> Self {
        let (b2, b3) = (payload as u8, (payload >> 8) as u8);
        Pwrx {
            last: b2 >> 4,
            deepest: b2 & 0xf,
            interrupt: b3 & 1 != 0,
            store: b3 & 4 != 0,
            hw: b3 & 8 != 0,
        }
    }
}

/// A C-state's number from its hint field, as libipt prints it (`c1` for field 0).
pub fn cstate(field: u8) -> u8 {
    (field + 1) & 0xf
}
