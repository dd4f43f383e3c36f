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
mod flags;
pub use builder::AttrBuilder;
pub use flags::{AttrFlags, AuxAction};

use crate::consts::{
    PERF_ATTR_SIZE_LATEST, PERF_ATTR_SIZE_VER0, PERF_FORMAT_MAX, PERF_SAMPLE_BRANCH_STACK,
    PERF_SAMPLE_MAX, PERF_SAMPLE_REGS_INTR, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER,
    PERF_SAMPLE_WEIGHT, PERF_SAMPLE_WEIGHT_STRUCT,
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
/// `PERF_SAMPLE_BRANCH_USER`: record branches whose target is in user space.
pub const PERF_SAMPLE_BRANCH_USER: u64 = 1 << 0;
/// `PERF_SAMPLE_BRANCH_KERNEL`: record branches whose target is in the kernel.
pub const PERF_SAMPLE_BRANCH_KERNEL: u64 = 1 << 1;
/// `PERF_SAMPLE_BRANCH_HV`: record branches whose target is in the hypervisor.
pub const PERF_SAMPLE_BRANCH_HV: u64 = 1 << 2;
/// `PERF_SAMPLE_BRANCH_PLM_ALL`: USER | KERNEL | HV.
pub const PERF_SAMPLE_BRANCH_PLM_ALL: u64 =
    PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_KERNEL | PERF_SAMPLE_BRANCH_HV;
/// Non-ABI: one past the highest branch_sample_type bit (COUNTERS is 19).
pub const PERF_SAMPLE_BRANCH_MAX: u64 = 1 << 20;

/// Byte offsets of the fields (include/uapi/linux/perf_event.h).
pub mod offsets {
    /// `perf_event_attr.type`.
    pub const TYPE: usize = 0;
    /// `perf_event_attr.size`.
    pub const SIZE: usize = 4;
    /// `perf_event_attr.config`.
    pub const CONFIG: usize = 8;
    /// `perf_event_attr.sample_period` / `sample_freq`.
    pub const SAMPLE_PERIOD: usize = 16;
    /// `perf_event_attr.sample_type`.
    pub const SAMPLE_TYPE: usize = 24;
    /// `perf_event_attr.read_format`.
    pub const READ_FORMAT: usize = 32;
    /// The bit-field word, `perf_event_attr.disabled` .. `__reserved_1`.
    pub const FLAGS: usize = 40;
    /// `perf_event_attr.wakeup_events` / `wakeup_watermark`.
    pub const WAKEUP_EVENTS: usize = 48;
    /// `perf_event_attr.bp_type`.
    pub const BP_TYPE: usize = 52;
    /// `perf_event_attr.config1` / `bp_addr` / `kprobe_func` / `uprobe_path`.
    pub const CONFIG1: usize = 56;
    /// `perf_event_attr.config2` / `bp_len` / `kprobe_addr` / `probe_offset`
    /// (VER1).
    pub const CONFIG2: usize = 64;
    /// `perf_event_attr.branch_sample_type` (VER2).
    pub const BRANCH_SAMPLE_TYPE: usize = 72;
    /// `perf_event_attr.sample_regs_user` (VER3).
    pub const SAMPLE_REGS_USER: usize = 80;
    /// `perf_event_attr.sample_stack_user` (VER3).
    pub const SAMPLE_STACK_USER: usize = 88;
    /// `perf_event_attr.clockid` (in VER3's padding, v4.1).
    pub const CLOCKID: usize = 92;
    /// `perf_event_attr.sample_regs_intr` (VER4).
    pub const SAMPLE_REGS_INTR: usize = 96;
    /// `perf_event_attr.aux_watermark` (VER5).
    pub const AUX_WATERMARK: usize = 104;
    /// `perf_event_attr.sample_max_stack` (in VER5's padding, v4.8).
    pub const SAMPLE_MAX_STACK: usize = 108;
    /// `perf_event_attr.__reserved_2`, which must be zero.
    pub const RESERVED_2: usize = 110;
    /// `perf_event_attr.aux_sample_size` (VER6).
    pub const AUX_SAMPLE_SIZE: usize = 112;
    /// `perf_event_attr.aux_action` (in VER6's padding, v6.13).
    pub const AUX_ACTION: usize = 116;
    /// `perf_event_attr.sig_data` (VER7).
    pub const SIG_DATA: usize = 120;
    /// `perf_event_attr.config3` (VER8).
    pub const CONFIG3: usize = 128;
    /// `perf_event_attr.config4` (VER9).
    pub const CONFIG4: usize = 136;
}

/// `struct perf_event_attr`, decoded. Unions are stored under one member's
/// name and read under the others' through accessors (`sample_freq()`,
/// `wakeup_watermark()`, `bp_addr()`, `kprobe_func()`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PerfEventAttr {
    /// `type`: the PMU: a `PERF_TYPE_*` value or a dynamic PMU's number from
    /// /sys/bus/event_source/devices/*/type.
    pub type_: u32,
    /// As stated by the producer (or as set by [`PerfEventAttr::to_bytes`]).
    pub size: u32,
    /// The type-specific event selector (`PERF_COUNT_*`, raw code, tracepoint id).
    pub config: u64,
    /// Union `{ sample_period; sample_freq; }`.
    /// Events between two samples, or (with FREQ) the samples per second wanted.
    pub sample_period: u64,
    /// `PERF_SAMPLE_*` bits: the fields of PERF_RECORD_SAMPLE (and of the
    /// `sample_id` trailer).
    pub sample_type: u64,
    /// `PERF_FORMAT_*` bits: the layout of read() and of PERF_SAMPLE_READ.
    pub read_format: u64,
    /// The bit-field word from `disabled` to `__reserved_1`.
    pub flags: AttrFlags,
    /// Union `{ wakeup_events; wakeup_watermark; }`.
    /// Wake the reader every n samples, or (with WATERMARK) when n bytes are in
    /// the ring.
    pub wakeup_events: u32,
    /// `HW_BREAKPOINT_R` / `W` / `X` bits of a breakpoint event.
    pub bp_type: u32,
    /// Union `{ bp_addr; kprobe_func; uprobe_path; config1; }`.
    pub config1: u64,
    /// Union `{ bp_len; kprobe_addr; probe_offset; config2; }`.
    pub config2: u64,
    /// `PERF_SAMPLE_BRANCH_*` bits: which branches PERF_SAMPLE_BRANCH_STACK
    /// records (VER2, v3.4).
    pub branch_sample_type: u64,
    /// Bit mask (arch `perf_regs.h` order) of the user registers
    /// PERF_SAMPLE_REGS_USER dumps (VER3, v3.7).
    pub sample_regs_user: u64,
    /// Bytes of user stack PERF_SAMPLE_STACK_USER dumps, a multiple of 8 (VER3,
    /// v3.7).
    pub sample_stack_user: u32,
    /// The POSIX clock (`CLOCK_MONOTONIC`, ...) of time fields when `use_clockid`
    /// is set (v4.1).
    pub clockid: i32,
    /// Bit mask of the interrupted registers PERF_SAMPLE_REGS_INTR dumps (VER4,
    /// v3.19).
    pub sample_regs_intr: u64,
    /// Bytes of new AUX data that wake the reader; 0 means half the AUX area
    /// (VER5, v4.1).
    pub aux_watermark: u32,
    /// Most frames a callchain holds; 0 means `sysctl_perf_event_max_stack`
    /// (v4.8).
    pub sample_max_stack: u16,
    /// `__reserved_2`; kept so that a file's bytes round-trip.
    pub reserved_2: u16,
    /// Most bytes of AUX data a PERF_SAMPLE_AUX sample copies (VER6, v5.5).
    pub aux_sample_size: u32,
    /// Union `{ aux_action; { aux_start_paused:1, aux_pause:1, aux_resume:1, __reserved_3:29 } }`.
    pub aux_action: AuxAction,
    /// The value the SIGTRAP of a `sigtrap` event carries in `si_perf_data`
    /// (VER7, v5.13).
    pub sig_data: u64,
    /// A further PMU-specific config word (VER8, v6.3).
    pub config3: u64,
    /// A further PMU-specific config word (VER9, v6.19).
    pub config4: u64,
}

/// Why [`PerfEventAttr::parse`] refused an attr from perf.data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttrError {
    #[error("perf_event_attr: need 8 bytes to read its size, have {len}")]
    /// Fewer than 8 bytes: `type` and `size` cannot be read.
    NoSize {
        /// The bytes there are.
        len: usize,
    },
    #[error("perf_event_attr: size {size} is outside {min}..={max}", min = PERF_ATTR_SIZE_VER0, max = PERF_ATTR_SIZE_MAX)]
    /// `size` (0 meaning VER0) is below VER0 or above a page.
    BadSize {
        /// `attr.size` as stated.
        size: u32,
    },
    #[error("perf_event_attr: size {size} but only {len} bytes available")]
    /// `size` is more than the bytes there are.
    Truncated {
        /// `attr.size` as stated.
        size: u32,
        /// The bytes there are.
        len: usize,
    },
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
    /// Sets `sample_freq` (samples per second, with FREQ).
    pub fn set_sample_freq(&mut self, v: u64) {
        self.sample_period = v;
    }
    /// `wakeup_watermark`, the other name of `wakeup_events` (meant when WATERMARK is set).
    pub fn wakeup_watermark(&self) -> u32 {
        self.wakeup_events
    }
    /// Sets `wakeup_watermark` (bytes, with WATERMARK).
    pub fn set_wakeup_watermark(&mut self, v: u32) {
        self.wakeup_events = v;
    }
    /// `bp_addr` (breakpoints), stored in `config1`.
    pub fn bp_addr(&self) -> u64 {
        self.config1
    }
    /// Sets `bp_addr`, the breakpoint's address.
    pub fn set_bp_addr(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `kprobe_func` (kprobe PMU: user pointer to the function name), stored in `config1`.
    pub fn kprobe_func(&self) -> u64 {
        self.config1
    }
    /// Sets `kprobe_func`, a user pointer to the probed function's name.
    pub fn set_kprobe_func(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `uprobe_path` (uprobe PMU: user pointer to the path), stored in `config1`.
    pub fn uprobe_path(&self) -> u64 {
        self.config1
    }
    /// Sets `uprobe_path`, a user pointer to the probed file's path.
    pub fn set_uprobe_path(&mut self, v: u64) {
        self.config1 = v;
    }
    /// `bp_len` (breakpoints), stored in `config2`.
    pub fn bp_len(&self) -> u64 {
        self.config2
    }
    /// Sets `bp_len`, the breakpoint's length in bytes (`HW_BREAKPOINT_LEN_*`).
    pub fn set_bp_len(&mut self, v: u64) {
        self.config2 = v;
    }
    /// `kprobe_addr`, stored in `config2`.
    pub fn kprobe_addr(&self) -> u64 {
        self.config2
    }
    /// Sets `kprobe_addr`, the probed kernel address (with `kprobe_func` 0).
    pub fn set_kprobe_addr(&mut self, v: u64) {
        self.config2 = v;
    }
    /// `probe_offset` (k/uprobe offset), stored in `config2`.
    pub fn probe_offset(&self) -> u64 {
        self.config2
    }
    /// Sets `probe_offset`, the offset from `kprobe_func` or into `uprobe_path`.
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
