//! The processor errata that change how a trace reads, by family and model, as libipt names
//! them (its tests are named after them). A cpu not in the table is unknown: libipt's tools
//! say so and decode with no errata.

/// Which errata apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Errata {
    /// BDM70: a TIP.PGE/PSB+ order after tracing is re-enabled.
    pub bdm70: bool,
    /// BDM64: TSX abort packets can be wrong.
    pub bdm64: bool,
    /// SKD007: an OVF's first byte can be swallowed by a CYC before it.
    pub skd007: bool,
    /// SKD022: VM entry can lose a TIP.PGE.
    pub skd022: bool,
    /// SKD010: a FUP after a PSB can be wrong.
    pub skd010: bool,
    /// SKL014: filtering can lose a TIP.PGD.
    pub skl014: bool,
    /// SKL168: the first MTC after a PSB can be wrong; calibrating on it is checked.
    pub skl168: bool,
    /// SKZ84: a TMA with its reserved bits set is an invalid 8-byte packet.
    pub skz84: bool,
    /// APL11: an OVF can follow a TIP.PGD with no FUP.
    pub apl11: bool,
    /// APL12: a PSB+ can carry a stale IP.
    pub apl12: bool,
}

/// A cpu as `--cpu F/M[/S]` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    pub family: u16,
    pub model: u8,
    pub stepping: u8,
}

impl Errata {
    /// The errata of `cpu`, or `None` for a cpu the table does not know.
    pub fn of(cpu: Cpu) -> Option<Errata> {
        let e = Errata::default();
        let e = match (cpu.family, cpu.model) {
            (6, 0x3d | 0x47 | 0x4f | 0x56) => Errata {
                bdm70: true,
                bdm64: true,
                ..e
            },
            (6, 0x4e | 0x5e | 0x8e | 0x9e | 0xa5 | 0xa6) => Errata {
                bdm70: true,
                skd007: true,
                skd022: true,
                skd010: true,
                skl014: true,
                skl168: true,
                ..e
            },
            (6, 0x55 | 0x6a | 0x6c) => Errata {
                bdm70: true,
                skl014: true,
                skd022: true,
                skz84: true,
                ..e
            },
            (6, 0x8f | 0xcf | 0xad | 0xae) | (0x13, 0x01) => Errata {
                bdm70: true,
                skd022: true,
                skz84: true,
                ..e
            },
            (6, 0x66 | 0x7d | 0x7e | 0x8c | 0x8d | 0xa7 | 0xa8) => Errata {
                bdm70: true,
                skl014: true,
                skd022: true,
                ..e
            },
            (
                6,
                0x97 | 0x9a | 0xba | 0xb7 | 0xbf | 0xc5 | 0xc6 | 0xb5 | 0xaa | 0xac | 0xbd | 0xcc
                | 0xd5,
            )
            | (0x12, 0x01 | 0x03) => Errata {
                bdm70: true,
                skd022: true,
                apl11: true,
                ..e
            },
            (6, 0x5c | 0x5f) => Errata {
                apl12: true,
                apl11: true,
                ..e
            },
            (6, 0x7a | 0x86 | 0x96 | 0x9c | 0xb6 | 0xaf | 0xdd) => Errata { apl11: true, ..e },
            _ => return None,
        };
        Some(e)
    }
}
