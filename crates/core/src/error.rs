//! The error every core entry point returns: a Linux errno and the rule that
//! produced it.
//!
//! The errno is what the kernel returns for the same input (kernel/events/
//! core.c), so callers and tests can compare numbers; the reason names the
//! rule in words, so a refusal says what went wrong and where.

use perfaux_abi::errno;

/// A refusal: the Linux errno the kernel would return, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    /// Positive Linux errno value (`perfaux_abi::errno::*`).
    pub errno: i32,
    /// The rule that refused, in words.
    pub reason: &'static str,
}

impl Error {
    /// An error with `errno` for the rule `reason`.
    pub const fn new(errno: i32, reason: &'static str) -> Self {
        Self { errno, reason }
    }

    /// The errno's symbolic name ("EINVAL", ...).
    pub fn name(&self) -> &'static str {
        errno::name(self.errno)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", errno::name(self.errno), self.reason)
    }
}

impl std::error::Error for Error {}

impl From<perfaux_abi::attr::AttrCopyError> for Error {
    fn from(e: perfaux_abi::attr::AttrCopyError) -> Self {
        Self::new(e.errno, e.reason)
    }
}

/// The result type of the core's entry points.
pub type Result<T> = std::result::Result<T, Error>;

/// `EINVAL` for the rule `reason`.
pub fn einval(reason: &'static str) -> Error {
    Error::new(errno::EINVAL, reason)
}
/// `EOPNOTSUPP` for the rule `reason`.
pub fn eopnotsupp(reason: &'static str) -> Error {
    Error::new(errno::EOPNOTSUPP, reason)
}
/// `ENOENT` ("not this PMU's event" in `event_init`) for the rule `reason`.
pub fn enoent(reason: &'static str) -> Error {
    Error::new(errno::ENOENT, reason)
}
pub(crate) fn ebadf(reason: &'static str) -> Error {
    Error::new(errno::EBADF, reason)
}
