//! What went wrong in a perf.data file, and where.

use std::io;

/// An error reading or writing perf.data. Every variant that comes from the
/// file's bytes names the file offset it was found at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the file failed.
    #[error("perf.data: I/O error at file offset {offset:#x}: {source}")]
    Io {
        /// Where in the file.
        offset: u64,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The file ends inside a structure it began.
    #[error("perf.data: truncated at file offset {offset:#x}: {what}")]
    Truncated {
        /// Where the missing bytes begin.
        offset: u64,
        /// Which structure.
        what: String,
    },
    /// A structure's bytes contradict its rules (sizes, counts, offsets).
    #[error("perf.data: corrupt at file offset {offset:#x}: {what}")]
    Corrupt {
        /// Where the structure starts.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    /// A well-formed file this reader does not take (a format or version).
    #[error("perf.data: unsupported: {what}")]
    Unsupported {
        /// What it is.
        what: String,
    },
    /// The writer was asked for something a perf.data cannot hold.
    #[error("perf.data writer: {what}")]
    Write {
        /// What it was.
        what: String,
    },
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

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
