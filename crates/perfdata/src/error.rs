//! What went wrong in a perf.data file, and where.

use std::io;

/// An error reading or writing perf.data. Every variant that comes from the
/// file's bytes names the file offset it was found at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("perf.data: I/O error at file offset {offset:#x}: {source}")]
    Io {
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error("perf.data: truncated at file offset {offset:#x}: {what}")]
    Truncated { offset: u64, what: String },
    #[error("perf.data: corrupt at file offset {offset:#x}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error("perf.data: unsupported: {what}")]
    Unsupported { what: String },
    #[error("perf.data writer: {what}")]
    Write { what: String },
}

impl Error {
    pub(crate) fn corrupt(offset: u64, what: impl Into<String>) -> Self {
        Self::Corrupt {
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn truncated(offset: u64, what: impl Into<String>) -> Self {
        Self::Truncated {
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn io(offset: u64, source: io::Error) -> Self {
        Self::Io { offset, source }
    }

    pub(crate) fn write(what: impl Into<String>) -> Self {
        Self::Write { what: what.into() }
    }

    /// The file offset the error names, if it came from the file's bytes.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Self::Io { offset, .. }
            | Self::Truncated { offset, .. }
            | Self::Corrupt { offset, .. } => Some(*offset),
            Self::Unsupported { .. } | Self::Write { .. } => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
