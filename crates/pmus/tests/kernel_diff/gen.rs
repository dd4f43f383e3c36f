//! The cases of the differential test: attrs as a base event plus a list
//! of mutations, each mutation one field set or one bit flipped, so that a
//! failing case can be shrunk by dropping mutations and printed by name.

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;

/// The attr fields and the open flags, by their kernel names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Type,
    Size,
    Config,
    SamplePeriod,
    SampleType,
    ReadFormat,
    Flags,
    WakeupEvents,
    BpType,
    Config1,
    Config2,
    BranchSampleType,
    SampleRegsUser,
    SampleStackUser,
    Clockid,
    SampleRegsIntr,
    AuxWatermark,
    SampleMaxStack,
    Reserved2,
    AuxSampleSize,
    AuxAction,
    SigData,
    Config3,
    Config4,
    /// perf_event_open's `flags` argument.
    OpenFlags,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Type => "type",
            Field::Size => "size",
            Field::Config => "config",
            Field::SamplePeriod => "sample_period",
            Field::SampleType => "sample_type",
            Field::ReadFormat => "read_format",
            Field::Flags => "flags",
            Field::WakeupEvents => "wakeup_events",
            Field::BpType => "bp_type",
            Field::Config1 => "config1",
            Field::Config2 => "config2",
            Field::BranchSampleType => "branch_sample_type",
            Field::SampleRegsUser => "sample_regs_user",
            Field::SampleStackUser => "sample_stack_user",
            Field::Clockid => "clockid",
            Field::SampleRegsIntr => "sample_regs_intr",
            Field::AuxWatermark => "aux_watermark",
            Field::SampleMaxStack => "sample_max_stack",
            Field::Reserved2 => "__reserved_2",
            Field::AuxSampleSize => "aux_sample_size",
            Field::AuxAction => "aux_action",
            Field::SigData => "sig_data",
            Field::Config3 => "config3",
            Field::Config4 => "config4",
            Field::OpenFlags => "open flags",
        }
    }

    /// The fields whose every bit is a case of its own.
    pub const BITWISE: [Field; 14] = [
        Field::Config,
        Field::SamplePeriod,
        Field::SampleType,
        Field::ReadFormat,
        Field::Flags,
        Field::Config1,
        Field::Config2,
        Field::BranchSampleType,
        Field::SampleRegsUser,
        Field::SampleRegsIntr,
        Field::SigData,
        Field::Config3,
        Field::Config4,
        Field::OpenFlags,
    ];
}

/// One change to the base attr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// `field = value`.
    Set(Field, u64),
    /// `field ^= value`.
    Xor(Field, u64),
}

impl std::fmt::Display for Mutation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Mutation::Set(field, v) => write!(f, "{} = {v:#x}", field.name()),
            Mutation::Xor(Field::Flags, v) if v.is_power_of_two() => {
                write!(
                    f,
                    "flags ^= bit {} ({})",
                    v.trailing_zeros(),
                    flag_name(v.trailing_zeros())
                )
            }
            Mutation::Xor(field, v) => write!(f, "{} ^= {v:#x}", field.name()),
        }
    }
}

fn flag_name(bit: u32) -> &'static str {
    const NAMES: [&str; 40] = [
        "disabled",
        "inherit",
        "pinned",
        "exclusive",
        "exclude_user",
        "exclude_kernel",
        "exclude_hv",
        "exclude_idle",
        "mmap",
        "comm",
        "freq",
        "inherit_stat",
        "enable_on_exec",
        "task",
        "watermark",
        "precise_ip bit 0",
        "precise_ip bit 1",
        "mmap_data",
        "sample_id_all",
        "exclude_host",
        "exclude_guest",
        "exclude_callchain_kernel",
        "exclude_callchain_user",
        "mmap2",
        "comm_exec",
        "use_clockid",
        "context_switch",
        "write_backward",
        "namespaces",
        "ksymbol",
        "bpf_event",
        "aux_output",
        "cgroup",
        "text_poke",
        "build_id",
        "inherit_thread",
        "remove_on_exec",
        "sigtrap",
        "defer_callchain",
        "defer_output",
    ];
    match bit {
        63 => "uevents (perfaux)",
        b if (b as usize) < NAMES.len() => NAMES[b as usize],
        _ => "__reserved_1",
    }
}

/// The events the cases start from: the two both sides have had from the
/// start, and any other software config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Dummy,
    TaskClock,
    Software(u64),
}

/// The software events the random and group families start from.
pub const SOFTWARE_BASES: [Base; 11] = [
    Base::Dummy,
    Base::TaskClock,
    Base::Software(PERF_COUNT_SW_CPU_CLOCK),
    Base::Software(PERF_COUNT_SW_PAGE_FAULTS),
    Base::Software(PERF_COUNT_SW_CONTEXT_SWITCHES),
    Base::Software(PERF_COUNT_SW_CPU_MIGRATIONS),
    Base::Software(PERF_COUNT_SW_PAGE_FAULTS_MIN),
    Base::Software(PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    Base::Software(PERF_COUNT_SW_ALIGNMENT_FAULTS),
    Base::Software(PERF_COUNT_SW_EMULATION_FAULTS),
    Base::Software(PERF_COUNT_SW_BPF_OUTPUT),
];

/// A generated open: base event, mutations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub base: Base,
    pub muts: Vec<Mutation>,
}

/// The open flags every case starts from.
pub const BASE_OPEN_FLAGS: u64 = PERF_FLAG_FD_CLOEXEC;

impl Case {
    pub fn new(base: Base, muts: &[Mutation]) -> Self {
        Self {
            base,
            muts: muts.to_vec(),
        }
    }

    /// The attr (with `size` as the kernel's sizeof unless a mutation
    /// sets it) and the open flags.
    pub fn build(&self, kernel_size: u32) -> (PerfEventAttr, u64) {
        let config = match self.base {
            Base::Dummy => PERF_COUNT_SW_DUMMY,
            Base::TaskClock => PERF_COUNT_SW_TASK_CLOCK,
            Base::Software(c) => c,
        };
        let mut a = PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: kernel_size,
            config,
            flags: AttrFlags::DISABLED | AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV,
            ..Default::default()
        };
        let mut open_flags = BASE_OPEN_FLAGS;
        for m in &self.muts {
            apply(&mut a, &mut open_flags, *m);
        }
        (a, open_flags)
    }

    /// The bytes passed to both sides: the attr's encoding, zeros up to a
    /// page and a little more, and `attr.size` as stated.
    pub fn bytes(attr: &PerfEventAttr) -> Vec<u8> {
        let mut b = attr.to_bytes(PERF_ATTR_SIZE_LATEST, Endianness::NATIVE);
        b.resize(4096 + 64, 0);
        b[4..8].copy_from_slice(&attr.size.to_ne_bytes());
        b
    }

    /// The case's mutations, one per line.
    pub fn describe(&self) -> String {
        let mut s = format!("base {:?}", self.base);
        for m in &self.muts {
            s.push_str(&format!("; {m}"));
        }
        s
    }
}

fn apply(a: &mut PerfEventAttr, open_flags: &mut u64, m: Mutation) {
    let (field, set, v) = match m {
        Mutation::Set(f, v) => (f, true, v),
        Mutation::Xor(f, v) => (f, false, v),
    };
    macro_rules! upd {
        ($place:expr, $t:ty) => {{
            let cur = $place as u64;
            $place = (if set { v } else { cur ^ v }) as $t;
        }};
    }
    match field {
        Field::Type => upd!(a.type_, u32),
        Field::Size => upd!(a.size, u32),
        Field::Config => upd!(a.config, u64),
        Field::SamplePeriod => upd!(a.sample_period, u64),
        Field::SampleType => upd!(a.sample_type, u64),
        Field::ReadFormat => upd!(a.read_format, u64),
        Field::Flags => {
            let mut bits = a.flags.bits();
            upd!(bits, u64);
            a.flags = AttrFlags::from_bits_retain(bits);
        }
        Field::WakeupEvents => upd!(a.wakeup_events, u32),
        Field::BpType => upd!(a.bp_type, u32),
        Field::Config1 => upd!(a.config1, u64),
        Field::Config2 => upd!(a.config2, u64),
        Field::BranchSampleType => upd!(a.branch_sample_type, u64),
        Field::SampleRegsUser => upd!(a.sample_regs_user, u64),
        Field::SampleStackUser => upd!(a.sample_stack_user, u32),
        Field::Clockid => {
            let mut c = a.clockid as u32;
            upd!(c, u32);
            a.clockid = c as i32;
        }
        Field::SampleRegsIntr => upd!(a.sample_regs_intr, u64),
        Field::AuxWatermark => upd!(a.aux_watermark, u32),
        Field::SampleMaxStack => upd!(a.sample_max_stack, u16),
        Field::Reserved2 => upd!(a.reserved_2, u16),
        Field::AuxSampleSize => upd!(a.aux_sample_size, u32),
        Field::AuxAction => {
            let mut bits = a.aux_action.bits();
            upd!(bits, u32);
            a.aux_action = AuxAction::from_bits_retain(bits);
        }
        Field::SigData => upd!(a.sig_data, u64),
        Field::Config3 => upd!(a.config3, u64),
        Field::Config4 => upd!(a.config4, u64),
        Field::OpenFlags => upd!(*open_flags, u64),
    }
}

use Field as F;
use Mutation::{Set, Xor};

fn flag(bit: u32) -> Mutation {
    Xor(F::Flags, 1 << bit)
}

/// Family 1: every bit of every bitwise field flipped alone, and a list of
/// values for each other field (with the companion bit that makes the
/// field count: use_clockid for clockid, CALLCHAIN for sample_max_stack,
/// ...), on both bases.
pub fn single_rules() -> Vec<Case> {
    let mut muts: Vec<Vec<Mutation>> = Vec::new();
    for f in Field::BITWISE {
        for bit in 0..64 {
            muts.push(vec![Xor(f, 1 << bit)]);
        }
    }
    // Bits that only count with a sample_type bit.
    let with =
        |st: u64, f: Field| (0..64).map(move |bit| vec![Xor(F::SampleType, st), Xor(f, 1 << bit)]);
    muts.extend(with(PERF_SAMPLE_BRANCH_STACK, F::BranchSampleType));
    muts.extend(with(PERF_SAMPLE_REGS_USER, F::SampleRegsUser));
    muts.extend(with(PERF_SAMPLE_REGS_INTR, F::SampleRegsIntr));
    // A sampling task-clock for the sample_type bits.
    muts.extend((0..64).map(|bit| {
        vec![
            Set(F::SamplePeriod, 1_000_000),
            Xor(F::SampleType, 1 << bit),
        ]
    }));
    let values: &[(Field, &[u64])] = &[
        (
            F::Type,
            &[0, 2, 3, 4, 5, 6, 7, 8, 16, 100, 0x7fff_ffff, 0xffff_ffff],
        ),
        (
            F::Size,
            &[
                0,
                1,
                8,
                63,
                64,
                65,
                72,
                80,
                96,
                100,
                104,
                112,
                120,
                128,
                136,
                144,
                152,
                160,
                4095,
                4096,
                4097,
                8192,
                0xffff_ffff,
            ],
        ),
        (
            F::Config,
            &[
                0,
                1,
                2,
                3,
                4,
                5,
                6,
                7,
                8,
                9,
                10,
                11,
                12,
                13,
                16,
                1 << 32,
                u64::MAX,
            ],
        ),
        (
            F::SamplePeriod,
            &[1, 2, 1000, 1 << 62, (1 << 63) - 1, 1 << 63, u64::MAX],
        ),
        (F::WakeupEvents, &[1, 2, 0xffff_ffff]),
        (F::BpType, &[1, 2, 4, 7, 0xffff_ffff]),
        (F::SampleStackUser, &[1, 8, 65528, 65536, 0xffff_ffff]),
        (F::AuxWatermark, &[1, 4096, 0xffff_ffff]),
        (F::AuxSampleSize, &[1, 8, 4096, 0xffff_ffff]),
        (F::Reserved2, &[1, 0x8000, 0xffff]),
        (F::SampleMaxStack, &[1, 127, 128, 0xffff]),
    ];
    for (f, vs) in values {
        for v in *vs {
            muts.push(vec![Set(*f, *v)]);
        }
    }
    // The running kernel's perf_event_max_sample_rate, which it lowers by itself on a host
    // whose sampling interrupts are slow: the core reads it as the kernel does.
    let max_rate = perfaux_core::max_sample_rate();
    for v in [
        1u64,
        2,
        1000,
        100_000,
        100_001,
        1 << 32,
        u64::MAX,
        max_rate,
        max_rate + 1,
    ] {
        muts.push(vec![flag(10), Set(F::SamplePeriod, v)]);
    }
    for v in [1u64, 8, 65528, 65536] {
        muts.push(vec![
            Xor(F::SampleType, PERF_SAMPLE_STACK_USER),
            Set(F::SampleStackUser, v),
        ]);
    }
    for v in [0u64, 1, 127, 128, 0xffff] {
        muts.push(vec![
            Xor(F::SampleType, PERF_SAMPLE_CALLCHAIN),
            Set(F::SampleMaxStack, v),
        ]);
    }
    for c in (0u64..16).chain([99, 0xffff_ffff, 0x8000_0000]) {
        muts.push(vec![flag(25), Set(F::Clockid, c)]);
    }
    for v in 0u64..8 {
        muts.push(vec![Set(F::AuxAction, v)]);
    }
    let mut cases = Vec::new();
    for base in [Base::Dummy, Base::TaskClock] {
        for m in &muts {
            cases.push(Case::new(base, m));
        }
    }
    cases
}

/// The violations paired with each other (family 2): each refused alone,
/// with errnos from every stage of the syscall.
pub fn violations() -> Vec<Vec<Mutation>> {
    vec![
        vec![Xor(F::OpenFlags, 1 << 5)],
        vec![Set(F::Size, 4097)],
        vec![Set(F::Size, 60)],
        vec![flag(45)],
        vec![Set(F::Reserved2, 1)],
        vec![Set(F::AuxAction, 1 << 3)],
        vec![Set(F::SampleType, PERF_SAMPLE_MAX)],
        vec![Set(F::ReadFormat, PERF_FORMAT_MAX)],
        vec![flag(10), Set(F::SamplePeriod, 100_001)],
        vec![Set(F::SamplePeriod, 1 << 63)],
        vec![Xor(F::OpenFlags, PERF_FLAG_PID_CGROUP)],
        vec![Set(F::Type, 100)],
        vec![Set(F::Config, 100)],
        vec![Set(F::Config, 12)],
        vec![flag(31)],
        vec![Set(F::AuxAction, 6)],
        vec![Set(F::AuxAction, 1)],
        vec![Set(F::AuxAction, 2)],
        vec![Set(F::AuxSampleSize, 4096)],
        vec![flag(25), Set(F::Clockid, 99)],
        vec![flag(37)],
        vec![flag(37), flag(36), Set(F::OpenFlags, 0)],
        vec![flag(1), Xor(F::SampleType, PERF_SAMPLE_READ)],
        vec![Set(F::SampleRegsUser, 1 << 32)],
        vec![Set(F::SampleRegsIntr, 1 << 40)],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_BRANCH_STACK),
            Set(F::BranchSampleType, 1 << 3 | 1),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_BRANCH_STACK),
            Set(F::BranchSampleType, 1),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_BRANCH_STACK),
            Set(F::BranchSampleType, 1 << 20),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_REGS_USER),
            Set(F::SampleRegsUser, 1 << 12),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_REGS_USER),
            Set(F::SampleRegsUser, 0),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_STACK_USER),
            Set(F::SampleStackUser, 65536),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_STACK_USER),
            Set(F::SampleStackUser, 12),
        ],
        vec![
            Xor(F::SampleType, PERF_SAMPLE_CALLCHAIN),
            Set(F::SampleMaxStack, 128),
        ],
        vec![flag(36), flag(1)],
        vec![flag(35)],
        vec![Set(F::Size, 0xffff_ffff)],
    ]
}

/// Family 2: every unordered pair of [`violations`], on both bases.
pub fn pairs() -> Vec<Case> {
    let v = violations();
    let mut cases = Vec::new();
    for base in [Base::Dummy, Base::TaskClock] {
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                let mut m = v[i].clone();
                m.extend_from_slice(&v[j]);
                cases.push(Case::new(base, &m));
            }
        }
    }
    cases
}

/// splitmix64: a fixed seed gives the same cases on every run and with
/// every version of every crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, s: &[T]) -> T {
        s[self.below(s.len() as u64) as usize]
    }
}

/// One near-valid mutation: mostly valid bits and values, now and then a
/// violation.
fn near_valid(rng: &mut Rng, violations: &[Vec<Mutation>]) -> Vec<Mutation> {
    match rng.below(12) {
        0 => violations[rng.below(violations.len() as u64) as usize].clone(),
        1 | 2 => vec![flag(rng.below(38) as u32)],
        3 | 4 => vec![Xor(F::SampleType, 1 << rng.below(27))],
        5 => vec![Xor(F::ReadFormat, 1 << rng.below(5))],
        6 => vec![Set(
            F::SamplePeriod,
            rng.pick(&[0, 1, 1000, 1_000_000, 100_000, 100_001]),
        )],
        7 => vec![flag(25), Set(F::Clockid, rng.pick(&[0, 1, 4, 7, 11, 99]))],
        8 => vec![Set(F::SampleRegsUser, 1 << rng.below(64))],
        9 => vec![Set(
            F::Size,
            rng.pick(&[64, 72, 80, 96, 104, 112, 120, 128, 136, 144]),
        )],
        10 => vec![Set(F::AuxAction, rng.below(8))],
        _ => vec![Xor(
            F::OpenFlags,
            rng.pick(&[PERF_FLAG_FD_NO_GROUP, PERF_FLAG_FD_OUTPUT, 1 << 4, 1 << 63]),
        )],
    }
}

/// Family 3: `n` seeded random near-valid attrs of one to five mutations.
pub fn random(seed: u64, n: usize) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let violations = violations();
    (0..n)
        .map(|_| {
            let base = rng.pick(&SOFTWARE_BASES);
            let k = 1 + rng.below(5);
            let muts = (0..k)
                .flat_map(|_| near_valid(&mut rng, &violations))
                .collect::<Vec<_>>();
            Case { base, muts }
        })
        .collect()
}

/// Group leaders and members (family 4): the rules that compare a member
/// with its leader (inherit, clock, pinned/exclusive, read_format) and the
/// buffer FD_OUTPUT needs.
pub fn group_specs() -> Vec<Case> {
    let specs: Vec<(Base, Vec<Mutation>)> = vec![
        (Base::Dummy, vec![]),
        (Base::TaskClock, vec![]),
        (Base::Dummy, vec![flag(1)]),
        (Base::TaskClock, vec![flag(1), Set(F::ReadFormat, 0x1f)]),
        (Base::Dummy, vec![flag(25), Set(F::Clockid, 1)]),
        (Base::TaskClock, vec![flag(25), Set(F::Clockid, 4)]),
        (Base::Dummy, vec![flag(25), Set(F::Clockid, 7)]),
        (Base::Dummy, vec![flag(2)]),
        (Base::TaskClock, vec![flag(3)]),
        (Base::Dummy, vec![flag(27)]),
        (
            Base::TaskClock,
            vec![
                Set(F::SamplePeriod, 1_000_000),
                Set(F::SampleType, PERF_SAMPLE_READ | PERF_SAMPLE_TID),
            ],
        ),
        (Base::Dummy, vec![flag(31)]),
        (Base::Software(PERF_COUNT_SW_PAGE_FAULTS), vec![]),
        (
            Base::Software(PERF_COUNT_SW_CPU_CLOCK),
            vec![flag(25), Set(F::Clockid, 1)],
        ),
        (
            Base::Software(PERF_COUNT_SW_CONTEXT_SWITCHES),
            vec![Set(F::SamplePeriod, 1), Set(F::ReadFormat, 0xf)],
        ),
    ];
    specs.into_iter().map(|(b, m)| Case::new(b, &m)).collect()
}

/// The open flags of a group member.
pub const MEMBER_FLAGS: [u64; 5] = [
    0,
    PERF_FLAG_FD_NO_GROUP,
    PERF_FLAG_FD_OUTPUT,
    PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP,
    ext::PERF_FLAG_FD_SAMPLE,
];
