//! What can go wrong, with what and where.
//!
//! The consumer half reads memory a producer it does not trust writes: every
//! head, tail, size and offset it finds there is checked, and a bad one is a
//! [`RingError`] naming the field and the position, never a panic.

use thiserror::Error;

/// An error of the ring: bad memory layout, a producer that broke the
/// protocol, or a failed system call.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RingError {
    /// A layout (page counts, offsets, sizes) that no perf buffer can have.
    #[error("bad ring layout: {what} = {value:#x}")]
    Layout {
        /// What it is (a field, an operation).
        what: &'static str,
        /// The value found.
        value: u64,
    },

    /// A field of the user page disagrees with the mapping the consumer holds.
    #[error("user page field {field} = {found:#x}, but the mapping has {expected:#x}")]
    UserPage {
        /// The user page field.
        field: &'static str,
        /// What the user page says.
        found: u64,
        /// What the mapping has.
        expected: u64,
    },

    /// `data_head` is behind the consumer's tail.
    #[error("data_head {head:#x} is behind data_tail {tail:#x}")]
    HeadBehindTail {
        /// The head read.
        head: u64,
        /// The tail it is compared with.
        tail: u64,
    },

    /// `data_head` is more than the whole data area ahead of the tail.
    #[error("data_head {head:#x} is more than data_size {size:#x} ahead of data_tail {tail:#x}")]
    HeadTooFarAhead {
        /// The head read.
        head: u64,
        /// The tail it is compared with.
        tail: u64,
        /// The size it is bounded by.
        size: u64,
    },

    /// `data_head` is not 8-byte aligned: records are.
    #[error("data_head {head:#x} is not 8-byte aligned")]
    UnalignedHead {
        /// The head read.
        head: u64,
    },

    /// A record header with size 0 (would never advance).
    #[error("record at ring position {at:#x} has size 0")]
    RecordSizeZero {
        /// Ring position of the record.
        at: u64,
    },

    /// A record size that is not a multiple of 8.
    #[error("record at ring position {at:#x} has size {size}, not a multiple of 8")]
    RecordUnaligned {
        /// Ring position of the record.
        at: u64,
        /// The size its header states.
        size: u16,
    },

    /// A record longer than the bytes that were published after it started.
    #[error(
        "record at ring position {at:#x} has size {size}, but only {available} bytes were published"
    )]
    RecordTruncated {
        /// Ring position of the record.
        at: u64,
        /// The size its header states.
        size: u16,
        /// Bytes published after it started.
        available: u64,
    },

    /// `aux_head` is behind `aux_tail`.
    #[error("aux_head {head:#x} is behind aux_tail {tail:#x}")]
    AuxHeadBehindTail {
        /// The head read.
        head: u64,
        /// The tail it is compared with.
        tail: u64,
    },

    /// `aux_head` is more than the whole AUX area ahead of `aux_tail`.
    #[error("aux_head {head:#x} is more than aux_size {size:#x} ahead of aux_tail {tail:#x}")]
    AuxHeadTooFarAhead {
        /// The head read.
        head: u64,
        /// The tail it is compared with.
        tail: u64,
        /// The size it is bounded by.
        size: u64,
    },

    /// A byte range of the AUX area that is not inside `[0, aux_size]` once
    /// unwrapped, or is longer than the area.
    #[error("AUX range [{from:#x}, {to:#x}) is longer than aux_size {size:#x}")]
    AuxRange {
        /// Start of the range.
        from: u64,
        /// End of the range.
        to: u64,
        /// The size it is bounded by.
        size: u64,
    },

    /// The ring has no AUX area.
    #[error("the ring has no AUX area")]
    NoAux,

    /// The operation needs write access the mapping does not have.
    #[error("{what} needs a writable mapping")]
    ReadOnly {
        /// What it is (a field, an operation).
        what: &'static str,
    },

    /// A system call failed.
    #[error("{what}: {}", perfaux_abi::errno::name(*errno))]
    Os {
        /// What it is (a field, an operation).
        what: &'static str,
        /// The errno.
        errno: i32,
    },
}

impl RingError {
    /// Wraps an I/O error from a system call.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn os(what: &'static str, err: impl Into<std::io::Error>) -> Self {
        let err: std::io::Error = err.into();
        RingError::Os {
            what,
            errno: err.raw_os_error().unwrap_or(perfaux_abi::errno::EINVAL),
        }
    }
}
