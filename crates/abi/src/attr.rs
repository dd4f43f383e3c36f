//! `struct perf_event_attr`: every field through `config4` (VER9, v6.19), the
//! flags word, `aux_action`, and the two ways an attr comes in:
//!
//! - [`PerfEventAttr::parse`]: from perf.data (either endianness, any size the
//!   file states between VER0 and a page);
//! - [`PerfEventAttr::copy_from_user`]: from a `perf_event_open` caller, with
//!   the checks of the kernel's `perf_copy_attr()` (kernel/events/core.c).
//!
//! The struct is decoded field by field rather than transmuted: the bit-field
//! word and the unions have no Rust layout, and perf.data may be foreign-endian.

mod builder;
pub use builder::AttrBuilder;

use crate::consts::{
    PERF_ATTR_SIZE_LATEST, PERF_ATTR_SIZE_VER0, PERF_FORMAT_MAX, PERF_SAMPLE_BRANCH_STACK,
    PERF_SAMPLE_MAX, PERF_SAMPLE_REGS_INTR, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER,
    PERF_SAMPLE_WEIGHT, PERF_SAMPLE_WEIGHT_STRUCT, ext,
};
use crate::endian::Endianness;
use crate::errno;
use crate::sink::ByteSink;

/// The largest attr size the kernel accepts (`size > PAGE_SIZE` is E2BIG).
pub const PERF_ATTR_SIZE_MAX: u32 = 4096;

/// `sysctl_perf_event_max_stack`'s default (`PERF_MAX_STACK_DEPTH`), which
/// `perf_copy_attr()` puts into a zero `sample_max_stack`.
pub const PERF_MAX_STACK_DEPTH: u16 = 127;

/// `perf_branch_sample_type` bits that select privilege levels.
pub const PERF_SAMPLE_BRANCH_USER: u64 = 1 << 0;
pub const PERF_SAMPLE_BRANCH_KERNEL: u64 = 1 << 1;
pub const PERF_SAMPLE_BRANCH_HV: u64 = 1 << 2;
/// `PERF_SAMPLE_BRANCH_PLM_ALL`: USER | KERNEL | HV.
pub const PERF_SAMPLE_BRANCH_PLM_ALL: u64 =
    PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_KERNEL | PERF_SAMPLE_BRANCH_HV;
/// Non-ABI: one past the highest branch_sample_type bit (COUNTERS is 19).
pub const PERF_SAMPLE_BRANCH_MAX: u64 = 1 << 20;

/// Byte offsets of the fields (UPSTREAM.md section 2).
pub mod offsets {
    pub const TYPE: usize = 0;
    pub const SIZE: usize = 4;
    pub const CONFIG: usize = 8;
    pub const SAMPLE_PERIOD: usize = 16;
    pub const SAMPLE_TYPE: usize = 24;
    pub const READ_FORMAT: usize = 32;
    pub const FLAGS: usize = 40;
    pub const WAKEUP_EVENTS: usize = 48;
    pub const BP_TYPE: usize = 52;
    pub const CONFIG1: usize = 56;
    pub const CONFIG2: usize = 64;
    pub const BRANCH_SAMPLE_TYPE: usize = 72;
    pub const SAMPLE_REGS_USER: usize = 80;
    pub const SAMPLE_STACK_USER: usize = 88;
    pub const CLOCKID: usize = 92;
    pub const SAMPLE_REGS_INTR: usize = 96;
    pub const AUX_WATERMARK: usize = 104;
    pub const SAMPLE_MAX_STACK: usize = 108;
    pub const RESERVED_2: usize = 110;
    pub const AUX_SAMPLE_SIZE: usize = 112;
    pub const AUX_ACTION: usize = 116;
    pub const SIG_DATA: usize = 120;
    pub const CONFIG3: usize = 128;
    pub const CONFIG4: usize = 136;
}

bitflags::bitflags! {
    /// The u64 bit-field word at offset 40, bit 0 = `disabled`.
    ///
    /// `precise_ip` is the 2-bit field at bits 15-16: read and set it with
    /// [`AttrFlags::precise_ip`] / [`AttrFlags::set_precise_ip`]. Bits 40..62
    /// are mainline's `__reserved_1`; bit 63 is perfaux's `uevents`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AttrFlags: u64 {
        const DISABLED = 1 << 0;
        const INHERIT = 1 << 1;
        const PINNED = 1 << 2;
        const EXCLUSIVE = 1 << 3;
        const EXCLUDE_USER = 1 << 4;
        const EXCLUDE_KERNEL = 1 << 5;
        const EXCLUDE_HV = 1 << 6;
        const EXCLUDE_IDLE = 1 << 7;
        const MMAP = 1 << 8;
        const COMM = 1 << 9;
        const FREQ = 1 << 10;
        const INHERIT_STAT = 1 << 11;
        const ENABLE_ON_EXEC = 1 << 12;
        const TASK = 1 << 13;
        const WATERMARK = 1 << 14;
        /// Low bit of `precise_ip`.
        const PRECISE_IP_BIT0 = 1 << 15;
        /// High bit of `precise_ip`.
        const PRECISE_IP_BIT1 = 1 << 16;
        const MMAP_DATA = 1 << 17;
        const SAMPLE_ID_ALL = 1 << 18;
        const EXCLUDE_HOST = 1 << 19;
        const EXCLUDE_GUEST = 1 << 20;
        const EXCLUDE_CALLCHAIN_KERNEL = 1 << 21;
        const EXCLUDE_CALLCHAIN_USER = 1 << 22;
        const MMAP2 = 1 << 23;
        const COMM_EXEC = 1 << 24;
        const USE_CLOCKID = 1 << 25;
        const CONTEXT_SWITCH = 1 << 26;
        const WRITE_BACKWARD = 1 << 27;
        const NAMESPACES = 1 << 28;
        const KSYMBOL = 1 << 29;
        const BPF_EVENT = 1 << 30;
        const AUX_OUTPUT = 1 << 31;
        const CGROUP = 1 << 32;
        const TEXT_POKE = 1 << 33;
        const BUILD_ID = 1 << 34;
        const INHERIT_THREAD = 1 << 35;
        const REMOVE_ON_EXEC = 1 << 36;
        const SIGTRAP = 1 << 37;
        const DEFER_CALLCHAIN = 1 << 38;
        const DEFER_OUTPUT = 1 << 39;
        /// perfaux extension (seed 002): the event accepts uevents.
        const UEVENTS = 1 << ext::ATTR_FLAG_UEVENTS_BIT;
    }
}

impl AttrFlags {
    /// The `precise_ip` field mask (bits 15-16).
    pub const PRECISE_IP_MASK: u64 = 3 << 15;
    /// Mainline's `__reserved_1`: bits 40..63, less perfaux's `uevents` bit.
    pub const RESERVED_1_MASK: u64 = !((1u64 << 40) - 1) & !(1u64 << ext::ATTR_FLAG_UEVENTS_BIT);

    /// `precise_ip` (0..=3): the skid constraint.
    pub fn precise_ip(self) -> u8 {
        ((self.bits() & Self::PRECISE_IP_MASK) >> 15) as u8
    }

    /// Sets `precise_ip`; only the low two bits of `v` are kept, as the C
    /// bit-field assignment would.
    pub fn set_precise_ip(&mut self, v: u8) {
        let bits = (self.bits() & !Self::PRECISE_IP_MASK) | ((u64::from(v) & 3) << 15);
        *self = Self::from_bits_retain(bits);
    }

    /// The `__reserved_1` bits that are set.
    pub fn reserved_1(self) -> u64 {
        self.bits() & Self::RESERVED_1_MASK
    }
}

bitflags::bitflags! {
    /// `aux_action` (u32 at offset 116): bits 3..31 are `__reserved_3`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AuxAction: u32 {
        const START_PAUSED = 1 << 0;
        const PAUSE = 1 << 1;
        const RESUME = 1 << 2;
    }
}

impl AuxAction {
    /// `__reserved_3`: bits 3..31.
    pub const RESERVED_3_MASK: u32 = !7;

    /// The `__reserved_3` bits that are set.
    pub fn reserved_3(self) -> u32 {
        self.bits() & Self::RESERVED_3_MASK
    }
}

/// `struct perf_event_attr`, decoded. Unions are stored under one member's
/// name and read under the others' through accessors (`sample_freq()`,
/// `wakeup_watermark()`, `bp_addr()`, `kprobe_func()`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PerfEventAttr {
    pub type_: u32,
    /// As stated by the producer (or as set by [`PerfEventAttr::to_bytes`]).
    pub size: u32,
    pub config: u64,
    /// Union `{ sample_period; sample_freq; }`.
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: AttrFlags,
    /// Union `{ wakeup_events; wakeup_watermark; }`.
    pub wakeup_events: u32,
    pub bp_type: u32,
    /// Union `{ bp_addr; kprobe_func; uprobe_path; config1; }`.
    pub config1: u64,
    /// Union `{ bp_len; kprobe_addr; probe_offset; config2; }`.
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    /// `__reserved_2`; kept so that a file's bytes round-trip.
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    /// Union `{ aux_action; { aux_start_paused:1, aux_pause:1, aux_resume:1, __reserved_3:29 } }`.
    pub aux_action: AuxAction,
    pub sig_data: u64,
    pub config3: u64,
    pub config4: u64,
}

/// Why [`PerfEventAttr::parse`] refused an attr from perf.data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttrError {
    #[error("perf_event_attr: need 8 bytes to read its size, have {len}")]
    NoSize { len: usize },
    #[error("perf_event_attr: size {size} is outside {min}..={max}", min = PERF_ATTR_SIZE_VER0, max = PERF_ATTR_SIZE_MAX)]
    BadSize { size: u32 },
    #[error("perf_event_attr: size {size} but only {len} bytes available")]
    Truncated { size: u32, len: usize },
}

/// Why [`PerfEventAttr::copy_from_user`] refused an attr, as the kernel would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("perf_copy_attr: {} ({reason})", errno::name(*errno))]
pub struct AttrCopyError {
    /// Positive Linux errno (the syscall returns its negation).
    pub errno: i32,
    /// Which rule refused the attr.
    pub reason: &'static str,
    /// The size the kernel writes back into `uattr->size` (E2BIG only).
    pub kernel_size: Option<u32>,
}

impl AttrCopyError {
    fn new(errno: i32, reason: &'static str) -> Self {
        Self {
            errno,
            reason,
            kernel_size: None,
        }
    }

    fn e2big(reason: &'static str) -> Self {
        Self {
            errno: errno::E2BIG,
            reason,
            kernel_size: Some(PERF_ATTR_SIZE_LATEST),
        }
    }
}

const LATEST: usize = PERF_ATTR_SIZE_LATEST as usize;

impl PerfEventAttr {
    /// `sample_freq`, the other name of `sample_period` (meant when FREQ is set).
    pub fn sample_freq(&self) -> u64 {
        self.sample_period
    }
    pub fn set_sample_freq(&mut self, v: u64) {
        self.sample_period = v;
    }
    /// `wakeup_watermark`, the other name of `wakeup_events` (meant when WATERMARK is set).
    pub fn wakeup_watermark(&self) -> u32 {
        self.wakeup_events
    }
    pub fn set_wakeup_watermark(&mut self, v: u32) {
        self.wakeup_events = v;
    }
    /// `bp_addr` (breakpoints), stored in `config1`.
    pub fn bp_addr(&self) -> u64 {
        self.config1
    }
    pub fn set_bp_addr(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `kprobe_func` (kprobe PMU: user pointer to the function name), stored in `config1`.
    pub fn kprobe_func(&self) -> u64 {
        self.config1
    }
    pub fn set_kprobe_func(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `uprobe_path` (uprobe PMU: user pointer to the path), stored in `config1`.
    pub fn uprobe_path(&self) -> u64 {
        self.config1
    }
    pub fn set_uprobe_path(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `bp_len` (breakpoints), stored in `config2`.
    pub fn bp_len(&self) -> u64 {
        self.config2
    }
    pub fn set_bp_len(&mut self, v: u64) {
        self.config2 = v;
    }
    /// `kprobe_addr`, stored in `config2`.
    pub fn kprobe_addr(&self) -> u64 {
        self.config2
    }
    pub fn set_kprobe_addr(&mut self, v: u64) {
        self.config2 = v;
    }
    /// `probe_offset` (k/uprobe offset), stored in `config2`.
    pub fn probe_offset(&self) -> u64 {
        self.config2
    }
    pub fn set_probe_offset(&mut self, v: u64) {
        self.config2 = v;
    }

    /// Whether records of this event carry a `sample_id` trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags.contains(AttrFlags::SAMPLE_ID_ALL)
    }

    /// Decodes the whole VER9 struct from `b`.
    fn decode(b: &[u8; LATEST], e: Endianness) -> Self {
        use offsets as o;
        let u16_at = |off: usize| e.u16([b[off], b[off + 1]]);
        let u32_at = |off: usize| e.u32([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        let u64_at = |off: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[off..off + 8]);
            e.u64(a)
        };
        Self {
            type_: u32_at(o::TYPE),
            size: u32_at(o::SIZE),
            config: u64_at(o::CONFIG),
            sample_period: u64_at(o::SAMPLE_PERIOD),
            sample_type: u64_at(o::SAMPLE_TYPE),
            read_format: u64_at(o::READ_FORMAT),
            flags: AttrFlags::from_bits_retain(u64_at(o::FLAGS)),
            wakeup_events: u32_at(o::WAKEUP_EVENTS),
            bp_type: u32_at(o::BP_TYPE),
            config1: u64_at(o::CONFIG1),
            config2: u64_at(o::CONFIG2),
            branch_sample_type: u64_at(o::BRANCH_SAMPLE_TYPE),
            sample_regs_user: u64_at(o::SAMPLE_REGS_USER),
            sample_stack_user: u32_at(o::SAMPLE_STACK_USER),
            clockid: u32_at(o::CLOCKID) as i32,
            sample_regs_intr: u64_at(o::SAMPLE_REGS_INTR),
            aux_watermark: u32_at(o::AUX_WATERMARK),
            sample_max_stack: u16_at(o::SAMPLE_MAX_STACK),
            reserved_2: u16_at(o::RESERVED_2),
            aux_sample_size: u32_at(o::AUX_SAMPLE_SIZE),
            aux_action: AuxAction::from_bits_retain(u32_at(o::AUX_ACTION)),
            sig_data: u64_at(o::SIG_DATA),
            config3: u64_at(o::CONFIG3),
            config4: u64_at(o::CONFIG4),
        }
    }

    /// Encodes the whole VER9 struct, with `size` in the size field.
    fn encode(&self, size: u32, e: Endianness) -> [u8; LATEST] {
        use offsets as o;
        let mut b = [0u8; LATEST];
        let mut put = |off: usize, bytes: &[u8]| b[off..off + bytes.len()].copy_from_slice(bytes);
        put(o::TYPE, &e.u32_bytes(self.type_));
        put(o::SIZE, &e.u32_bytes(size));
        put(o::CONFIG, &e.u64_bytes(self.config));
        put(o::SAMPLE_PERIOD, &e.u64_bytes(self.sample_period));
        put(o::SAMPLE_TYPE, &e.u64_bytes(self.sample_type));
        put(o::READ_FORMAT, &e.u64_bytes(self.read_format));
        put(o::FLAGS, &e.u64_bytes(self.flags.bits()));
        put(o::WAKEUP_EVENTS, &e.u32_bytes(self.wakeup_events));
        put(o::BP_TYPE, &e.u32_bytes(self.bp_type));
        put(o::CONFIG1, &e.u64_bytes(self.config1));
        put(o::CONFIG2, &e.u64_bytes(self.config2));
        put(o::BRANCH_SAMPLE_TYPE, &e.u64_bytes(self.branch_sample_type));
        put(o::SAMPLE_REGS_USER, &e.u64_bytes(self.sample_regs_user));
        put(o::SAMPLE_STACK_USER, &e.u32_bytes(self.sample_stack_user));
        put(o::CLOCKID, &e.u32_bytes(self.clockid as u32));
        put(o::SAMPLE_REGS_INTR, &e.u64_bytes(self.sample_regs_intr));
        put(o::AUX_WATERMARK, &e.u32_bytes(self.aux_watermark));
        put(o::SAMPLE_MAX_STACK, &e.u16_bytes(self.sample_max_stack));
        put(o::RESERVED_2, &e.u16_bytes(self.reserved_2));
        put(o::AUX_SAMPLE_SIZE, &e.u32_bytes(self.aux_sample_size));
        put(o::AUX_ACTION, &e.u32_bytes(self.aux_action.bits()));
        put(o::SIG_DATA, &e.u64_bytes(self.sig_data));
        put(o::CONFIG3, &e.u64_bytes(self.config3));
        put(o::CONFIG4, &e.u64_bytes(self.config4));
        b
    }

    /// Decodes an attr from perf.data, where the attr states its own size.
    ///
    /// Returns the attr and its size in bytes (a stated size of 0 means
    /// VER0, as perf's `read_attr()` and the kernel read it). Fields past the
    /// stated size are zero; bytes past VER9 (a newer producer) are ignored,
    /// since perf.data attrs carry no promise that such tails are zero.
    pub fn parse(bytes: &[u8], endian: Endianness) -> Result<(Self, usize), AttrError> {
        if bytes.len() < 8 {
            return Err(AttrError::NoSize { len: bytes.len() });
        }
        let stated = endian.u32([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let size = if stated == 0 {
            PERF_ATTR_SIZE_VER0
        } else {
            stated
        };
        if !(PERF_ATTR_SIZE_VER0..=PERF_ATTR_SIZE_MAX).contains(&size) {
            return Err(AttrError::BadSize { size });
        }
        if bytes.len() < size as usize {
            return Err(AttrError::Truncated {
                size,
                len: bytes.len(),
            });
        }
        let mut buf = [0u8; LATEST];
        let n = (size as usize).min(LATEST);
        buf[..n].copy_from_slice(&bytes[..n]);
        let mut attr = Self::decode(&buf, endian);
        attr.size = size;
        Ok((attr, size as usize))
    }

    /// The kernel's `perf_copy_attr()`: reads an attr from a caller's memory
    /// (`bytes` = everything readable from `uattr` on), native endian.
    ///
    /// Checks, in the kernel's order (each error's `reason` names its rule):
    /// 1. `get_user(size)`: fewer than 8 readable bytes → EFAULT.
    /// 2. size 0 means `PERF_ATTR_SIZE_VER0` (ABI compatibility quirk).
    /// 3. size < VER0 or > PAGE_SIZE → E2BIG, sizeof written back.
    /// 4. `copy_struct_from_user`: size past the readable bytes → EFAULT;
    ///    non-zero bytes between sizeof (VER9) and size → E2BIG, sizeof
    ///    written back; a short attr is zero-extended.
    /// 5. `__reserved_1` (flag bits 40..62; bit 63 is perfaux's `uevents`),
    ///    `__reserved_2`, `__reserved_3` (aux_action bits 3..31) → EINVAL.
    /// 6. sample_type bits at or above `PERF_SAMPLE_MAX` → EINVAL.
    /// 7. read_format bits at or above `PERF_FORMAT_MAX` → EINVAL.
    /// 8. With PERF_SAMPLE_BRANCH_STACK: branch_sample_type bits at or above
    ///    `PERF_SAMPLE_BRANCH_MAX` → EINVAL; no branch-type bit beyond the
    ///    privilege levels → EINVAL; no privilege level → the levels not
    ///    excluded by exclude_kernel/user/hv are filled in. (The kernel's
    ///    `perf_allow_kernel()` privilege check is the caller's: it depends
    ///    on credentials, not bytes.)
    /// 9. With PERF_SAMPLE_REGS_USER: `perf_reg_validate(sample_regs_user)`.
    /// 10. With PERF_SAMPLE_STACK_USER: sample_stack_user >= USHRT_MAX → EINVAL;
    ///     not a multiple of 8 → EINVAL.
    /// 11. sample_max_stack 0 → `sysctl_perf_event_max_stack` (default 127).
    /// 12. With PERF_SAMPLE_REGS_INTR: `perf_reg_validate(sample_regs_intr)`;
    ///     like the kernel, this error is kept and returned only if no later
    ///     rule fails first.
    /// 13. PERF_SAMPLE_CGROUP needs CONFIG_CGROUP_PERF (perfaux has it: accepted).
    /// 14. PERF_SAMPLE_WEIGHT together with PERF_SAMPLE_WEIGHT_STRUCT → EINVAL.
    /// 15. inherit_thread without inherit → EINVAL.
    /// 16. remove_on_exec with enable_on_exec → EINVAL.
    /// 17. sigtrap without remove_on_exec → EINVAL.
    ///
    /// `perf_copy_attr()` has no clockid rule: clockid is only looked at
    /// when use_clockid is set, by `perf_event_set_clock()` at open time.
    pub fn copy_from_user(bytes: &[u8]) -> Result<Self, AttrCopyError> {
        let e = Endianness::NATIVE;
        // Rule 1.
        if bytes.len() < 8 {
            return Err(AttrCopyError::new(errno::EFAULT, "cannot read attr->size"));
        }
        let mut size = e.u32([bytes[4], bytes[5], bytes[6], bytes[7]]);
        // Rule 2.
        if size == 0 {
            size = PERF_ATTR_SIZE_VER0;
        }
        // Rule 3.
        if !(PERF_ATTR_SIZE_VER0..=PERF_ATTR_SIZE_MAX).contains(&size) {
            return Err(AttrCopyError::e2big(
                "attr->size is below PERF_ATTR_SIZE_VER0 or above PAGE_SIZE",
            ));
        }
        // Rule 4.
        let usize_ = size as usize;
        if bytes.len() < usize_ {
            return Err(AttrCopyError::new(
                errno::EFAULT,
                "attr->size reaches past readable memory",
            ));
        }
        if usize_ > LATEST && bytes[LATEST..usize_].iter().any(|&b| b != 0) {
            return Err(AttrCopyError::e2big(
                "non-zero bytes past the kernel's sizeof(struct perf_event_attr)",
            ));
        }
        let mut buf = [0u8; LATEST];
        let n = usize_.min(LATEST);
        buf[..n].copy_from_slice(&bytes[..n]);
        let mut attr = Self::decode(&buf, e);
        attr.size = size;
        attr.check_copy_rules()?;
        Ok(attr)
    }

    /// Rules 5..17 of [`PerfEventAttr::copy_from_user`] (they may adjust
    /// branch_sample_type and sample_max_stack, as the kernel does).
    fn check_copy_rules(&mut self) -> Result<(), AttrCopyError> {
        let einval = |reason| Err(AttrCopyError::new(errno::EINVAL, reason));
        // Rule 5.
        if self.flags.reserved_1() != 0 {
            return einval("__reserved_1 flag bits (40..62) set");
        }
        if self.reserved_2 != 0 {
            return einval("__reserved_2 set");
        }
        if self.aux_action.reserved_3() != 0 {
            return einval("__reserved_3 aux_action bits (3..31) set");
        }
        // Rules 6, 7.
        if self.sample_type & !(PERF_SAMPLE_MAX - 1) != 0 {
            return einval("sample_type has bits at or above PERF_SAMPLE_MAX");
        }
        if self.read_format & !(PERF_FORMAT_MAX - 1) != 0 {
            return einval("read_format has bits at or above PERF_FORMAT_MAX");
        }
        // Rule 8.
        if self.sample_type & PERF_SAMPLE_BRANCH_STACK != 0 {
            let mut mask = self.branch_sample_type;
            if mask & !(PERF_SAMPLE_BRANCH_MAX - 1) != 0 {
                return einval("branch_sample_type has bits at or above PERF_SAMPLE_BRANCH_MAX");
            }
            if mask & !PERF_SAMPLE_BRANCH_PLM_ALL == 0 {
                return einval("branch_sample_type selects no branch type");
            }
            if mask & PERF_SAMPLE_BRANCH_PLM_ALL == 0 {
                if !self.flags.contains(AttrFlags::EXCLUDE_KERNEL) {
                    mask |= PERF_SAMPLE_BRANCH_KERNEL;
                }
                if !self.flags.contains(AttrFlags::EXCLUDE_USER) {
                    mask |= PERF_SAMPLE_BRANCH_USER;
                }
                if !self.flags.contains(AttrFlags::EXCLUDE_HV) {
                    mask |= PERF_SAMPLE_BRANCH_HV;
                }
                self.branch_sample_type = mask;
            }
        }
        // Rule 9.
        if self.sample_type & PERF_SAMPLE_REGS_USER != 0 {
            perf_reg_validate(self.sample_regs_user, "sample_regs_user")?;
        }
        // Rule 10.
        if self.sample_type & PERF_SAMPLE_STACK_USER != 0 {
            if self.sample_stack_user >= u32::from(u16::MAX) {
                return einval("sample_stack_user >= USHRT_MAX");
            }
            if !self.sample_stack_user.is_multiple_of(8) {
                return einval("sample_stack_user not a multiple of 8");
            }
        }
        // Rule 11.
        if self.sample_max_stack == 0 {
            self.sample_max_stack = PERF_MAX_STACK_DEPTH;
        }
        // Rule 12: kept, returned at the end like the kernel's `ret`.
        let regs_intr = if self.sample_type & PERF_SAMPLE_REGS_INTR != 0 {
            perf_reg_validate(self.sample_regs_intr, "sample_regs_intr")
        } else {
            Ok(())
        };
        // Rule 13: CONFIG_CGROUP_PERF=y, so PERF_SAMPLE_CGROUP passes.
        // Rule 14.
        if self.sample_type & PERF_SAMPLE_WEIGHT != 0
            && self.sample_type & PERF_SAMPLE_WEIGHT_STRUCT != 0
        {
            return einval("PERF_SAMPLE_WEIGHT together with PERF_SAMPLE_WEIGHT_STRUCT");
        }
        // Rules 15..17.
        let f = self.flags;
        if !f.contains(AttrFlags::INHERIT) && f.contains(AttrFlags::INHERIT_THREAD) {
            return einval("inherit_thread without inherit");
        }
        if f.contains(AttrFlags::REMOVE_ON_EXEC) && f.contains(AttrFlags::ENABLE_ON_EXEC) {
            return einval("remove_on_exec together with enable_on_exec");
        }
        if f.contains(AttrFlags::SIGTRAP) && !f.contains(AttrFlags::REMOVE_ON_EXEC) {
            return einval("sigtrap without remove_on_exec");
        }
        regs_intr
    }

    /// The first `size` bytes of the attr with the size field set to `size`;
    /// past VER9 the bytes are zero.
    pub fn to_bytes(&self, size: u32, endian: Endianness) -> Vec<u8> {
        let mut v = Vec::with_capacity(size as usize);
        self.write(size, endian, &mut v);
        v
    }

    /// Writes what [`PerfEventAttr::to_bytes`] returns into `sink`.
    pub fn write(&self, size: u32, endian: Endianness, sink: &mut impl ByteSink) {
        let buf = self.encode(size, endian);
        let n = (size as usize).min(LATEST);
        sink.put(&buf[..n]);
        if size as usize > LATEST {
            sink.put_zeros(size as usize - LATEST);
        }
    }
}

/// The architecture's `perf_reg_validate()` (arch/*/kernel/perf_regs.c).
///
/// x86_64: the mask must be non-zero and leave out DS, ES, FS, GS (12..15)
/// and the gap 24..31 between R15 and XMM0. arm64: non-zero and below
/// `PERF_REG_ARM64_MAX` (33) apart from VG (46), which the kernel accepts
/// only with SVE; perfaux has no SVE state, so VG is refused. Elsewhere
/// perfaux implements no register sampling: any mask is EINVAL.
fn perf_reg_validate(mask: u64, what: &'static str) -> Result<(), AttrCopyError> {
    let bad = if cfg!(target_arch = "x86_64") {
        const REG_NOSUPPORT: u64 = 0xf << 12;
        const RESERVED: u64 = 0xff << 24;
        mask & (REG_NOSUPPORT | RESERVED) != 0
    } else if cfg!(target_arch = "aarch64") {
        mask & !((1u64 << 33) - 1) != 0
    } else {
        true
    };
    if mask == 0 || bad {
        let reason = if what == "sample_regs_user" {
            "sample_regs_user empty or names registers the arch cannot sample"
        } else {
            "sample_regs_intr empty or names registers the arch cannot sample"
        };
        return Err(AttrCopyError::new(errno::EINVAL, reason));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
