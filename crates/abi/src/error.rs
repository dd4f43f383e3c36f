//! Errors of record parsing and encoding.
//!
//! A parse error says which record type, which field, and at which byte of
//! the record body it went wrong, so a reader can report a damaged file or
//! ring position precisely.

use core::fmt;

/// Why a record body could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    /// The header type of the record, once known.
    pub record_type: Option<u32>,
    /// The field being read.
    pub what: &'static str,
    /// Byte offset of that field from the start of the body (after the header).
    pub offset: usize,
    /// What was wrong with the field.
    pub kind: ParseErrorKind,
}

/// What was wrong with the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The body ends before the field does.
    Truncated {
        /// Bytes the field needs.
        need: usize,
        /// Bytes left in the body.
        have: usize,
    },
    /// The field holds a value the layout cannot have.
    Invalid {
        /// The value read.
        value: u64,
        /// Why it cannot be.
        why: &'static str,
    },
}

impl ParseError {
    pub(crate) fn truncated(what: &'static str, offset: usize, need: usize, have: usize) -> Self {
        Self {
            record_type: None,
            what,
            offset,
            kind: ParseErrorKind::Truncated { need, have },
        }
    }

    pub(crate) fn invalid(
        what: &'static str,
        offset: usize,
        value: u64,
        why: &'static str,
    ) -> Self {
        Self {
            record_type: None,
            what,
            offset,
            kind: ParseErrorKind::Invalid { value, why },
        }
    }

    /// The same error, attributed to records of type `ty`.
    pub fn in_record(mut self, ty: u32) -> Self {
        self.record_type = Some(ty);
        self
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.record_type {
            Some(t) => write!(f, "record type {t}: ")?,
            None => f.write_str("record: ")?,
        }
        write!(f, "{} at body byte {}: ", self.what, self.offset)?;
        match self.kind {
            ParseErrorKind::Truncated { need, have } => {
                write!(f, "needs {need} bytes, only {have} left")
            }
            ParseErrorKind::Invalid { value, why } => write!(f, "value {value:#x}: {why}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Why a record could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// `header.size` is 16 bits: the kernel never emits a longer record.
    #[error("record type {record_type}: {len} bytes do not fit the 16-bit header.size")]
    TooLarge {
        /// The record's `header.type`.
        record_type: u32,
        /// The bytes the record would take.
        len: usize,
    },
}
