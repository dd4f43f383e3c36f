//! Linux errno values, for the error paths that must match the kernel's.
//!
//! abi depends on no crate, so the numbers are spelled out here (they are the
//! asm-generic values, the same on x86_64 and arm64).

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const ESRCH: i32 = 3;
pub const EINTR: i32 = 4;
pub const E2BIG: i32 = 7;
pub const EBADF: i32 = 9;
pub const EAGAIN: i32 = 11;
pub const ENOMEM: i32 = 12;
pub const EACCES: i32 = 13;
pub const EFAULT: i32 = 14;
pub const EBUSY: i32 = 16;
pub const EEXIST: i32 = 17;
pub const ENODEV: i32 = 19;
pub const EINVAL: i32 = 22;
pub const EMFILE: i32 = 24;
pub const ENOSPC: i32 = 28;
pub const ERANGE: i32 = 34;
pub const ENOSYS: i32 = 38;
pub const EOVERFLOW: i32 = 75;
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
