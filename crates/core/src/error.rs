//! The error every core entry point returns: a Linux errno and the rule that
//! produced it.
//!
//! The errno is what the kernel returns for the same input (kernel/events/
//! core.c), so callers and tests can compare numbers; the reason names the
//! rule in words, so a refusal says what went wrong and where.

use perfaux_abi::errno;

/// What caused an [`Error`], kept for its source chain.
pub type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A refusal: the Linux errno the kernel would return, why, and the error
/// underneath it if another layer (the ring, the OS, a PMU) refused first.
#[derive(Debug, Clone)]
pub struct Error {
    /// Positive Linux errno value (`perfaux_abi::errno::*`).
    pub errno: i32,
    /// The rule that refused, in words.
    pub reason: &'static str,
    cause: Option<Cause>,
}

impl Error {
    /// An error with `errno` for the rule `reason`.
    pub const fn new(errno: i32, reason: &'static str) -> Self {
        Self {
            errno,
            reason,
            cause: None,
        }
    }

    /// An error with `errno` for the rule `reason`, caused by `cause`
    /// (returned by [`std::error::Error::source`]).
    pub fn with_cause(
        errno: i32,
        reason: &'static str,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            errno,
            reason,
            cause: Some(std::sync::Arc::new(cause)),
        }
    }

    /// The errno's symbolic name ("EINVAL", ...).
    pub fn name(&self) -> &'static str {
        errno::name(self.errno)
    }
}

/// Two errors are equal when errno and rule are: the cause is context.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.errno == other.errno && self.reason == other.reason
    }
}

impl Eq for Error {}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", errno::name(self.errno), self.reason)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn the_cause_is_the_source_and_not_part_of_equality() {
        let os = std::io::Error::from_raw_os_error(errno::ENOMEM);
        let e = Error::with_cause(errno::ENOMEM, "buffer", os);
        let src = e.source().expect("the cause is kept");
        assert_eq!(
            src.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::raw_os_error),
            Some(errno::ENOMEM)
        );
        assert_eq!(e, Error::new(errno::ENOMEM, "buffer"));
        assert!(Error::new(errno::ETIMEDOUT, "x").source().is_none());
        assert_eq!(Error::new(errno::ETIMEDOUT, "x").name(), "ETIMEDOUT");
    }
}
