//! Linux errno values, for the error paths that must match the kernel's.
//!
//! abi depends on no crate, so the numbers are spelled out here (they are the
//! asm-generic values, the same on x86_64 and arm64).

/// Operation not permitted (e.g. `perf_event_paranoid` refuses the open).
pub const EPERM: i32 = 1;
/// No such entry (e.g. an unknown PMU type or event config).
pub const ENOENT: i32 = 2;
/// No such process (the target pid does not exist).
pub const ESRCH: i32 = 3;
/// Interrupted system call.
pub const EINTR: i32 = 4;
/// Argument list too long (an attr larger than the kernel knows, with
/// non-zero bytes past its size).
pub const E2BIG: i32 = 7;
/// Bad file descriptor (e.g. an invalid `group_fd`).
pub const EBADF: i32 = 9;
/// Try again (resource temporarily unavailable).
pub const EAGAIN: i32 = 11;
/// Out of memory.
pub const ENOMEM: i32 = 12;
/// Permission denied (e.g. a capability the event needs is missing).
pub const EACCES: i32 = 13;
/// Bad address (a user pointer could not be read or written).
pub const EFAULT: i32 = 14;
/// Device or resource busy (e.g. an exclusive PMU is in use).
pub const EBUSY: i32 = 16;
/// File exists (e.g. a ring buffer is already set).
pub const EEXIST: i32 = 17;
/// No such device (the PMU does not support the request).
pub const ENODEV: i32 = 19;
/// Invalid argument (an attr or flag the kernel refuses).
pub const EINVAL: i32 = 22;
/// Too many open files.
pub const EMFILE: i32 = 24;
/// No space left on device (e.g. no free breakpoint slot).
pub const ENOSPC: i32 = 28;
/// Result out of range.
pub const ERANGE: i32 = 34;
/// Function not implemented.
pub const ENOSYS: i32 = 38;
/// Value too large for defined data type (e.g. `sample_max_stack` above
/// `sysctl_perf_event_max_stack`, a period with the top bit set).
pub const EOVERFLOW: i32 = 75;
/// Operation not supported (e.g. sampling on a PMU that cannot interrupt).
pub const EOPNOTSUPP: i32 = 95;
/// Connection timed out (here: a remote call the target thread never ran).
pub const ETIMEDOUT: i32 = 110;

/// The symbolic name of an errno value, for messages and test tables.
pub fn name(errno: i32) -> &'static str {
    match errno {
        EPERM => "EPERM",
        ENOENT => "ENOENT",
        ESRCH => "ESRCH",
        EINTR => "EINTR",
        E2BIG => "E2BIG",
        EBADF => "EBADF",
        EAGAIN => "EAGAIN",
        ENOMEM => "ENOMEM",
        EACCES => "EACCES",
        EFAULT => "EFAULT",
        EBUSY => "EBUSY",
        EEXIST => "EEXIST",
        ENODEV => "ENODEV",
        EINVAL => "EINVAL",
        EMFILE => "EMFILE",
        ENOSPC => "ENOSPC",
        ERANGE => "ERANGE",
        ENOSYS => "ENOSYS",
        EOVERFLOW => "EOVERFLOW",
        EOPNOTSUPP => "EOPNOTSUPP",
        ETIMEDOUT => "ETIMEDOUT",
        _ => "E?",
    }
}
