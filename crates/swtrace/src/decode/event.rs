//! What the decoder gives: events, and why bytes were skipped.

use crate::format::{LostKind, PacketError};

/// Why bytes were skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Stream positions missing between two chunks ([`super::decode_chunks`]): the data was lost
    /// (truncated AUX data) or never copied out.
    Gap,
    /// Before the first SYNC of the window.
    NoSync,
    /// A packet did not parse; decoding resumed at the next SYNC.
    Corrupt(PacketError),
    /// The window ends inside a packet.
    Truncated,
}

/// A decoded event. `offset` is the stream position of the packet's first byte (the window's
/// start position plus the index in the window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A SYNC: state is known from here.
    Sync {
        /// Stream position.
        offset: u64,
        /// Traced thread.
        tid: u32,
        /// Open traced calls.
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// A call began.
    Enter {
        /// Stream position.
        offset: u64,
        /// Probe id.
        id: u32,
        /// Open calls before this one.
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
        /// The writer did not time this packet (sparse timing): `time` is interpolated
        /// between the timed packets around it (format module doc, "Sparse timing").
        interpolated: bool,
    },
    /// A call returned.
    Exit {
        /// Stream position.
        offset: u64,
        /// Probe id, when the decoder knows which call this was.
        id: Option<u32>,
        /// Open calls besides this one (the depth of its ENTER).
        depth: u32,
        /// CLOCK_MONOTONIC ns.
        time: u64,
        /// As for [`Event::Enter`].
        interpolated: bool,
    },
    /// Tracing paused.
    Paused {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// Tracing resumed.
    Resumed {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// The writer was removed.
    Stopped {
        /// Stream position.
        offset: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// Probe events were not written.
    Lost {
        /// Stream position.
        offset: u64,
        /// Why.
        kind: LostKind,
        /// How many.
        count: u64,
        /// CLOCK_MONOTONIC ns.
        time: u64,
    },
    /// A value tied to an open call (a TAG packet: perfaux-tracing's span id).
    Tag {
        /// Stream position.
        offset: u64,
        /// The tagged call's depth (that of its ENTER): the innermost open call.
        depth: u32,
        /// The value.
        value: u64,
    },
    /// Bytes that were not decoded.
    Skipped {
        /// Stream position of the first skipped byte.
        offset: u64,
        /// How many.
        bytes: u64,
        /// Why.
        reason: SkipReason,
    },
}

impl Event {
    /// The stream position of the packet the event came from.
    pub fn offset(&self) -> u64 {
        match *self {
            Event::Sync { offset, .. }
            | Event::Enter { offset, .. }
            | Event::Exit { offset, .. }
            | Event::Paused { offset, .. }
            | Event::Resumed { offset, .. }
            | Event::Stopped { offset, .. }
            | Event::Lost { offset, .. }
            | Event::Tag { offset, .. }
            | Event::Skipped { offset, .. } => offset,
        }
    }

    /// The event's CLOCK_MONOTONIC time (`None` for [`Event::Skipped`] and [`Event::Tag`],
    /// which have none).
    pub fn time(&self) -> Option<u64> {
        match self {
            Event::Sync { time, .. }
            | Event::Enter { time, .. }
            | Event::Exit { time, .. }
            | Event::Paused { time, .. }
            | Event::Resumed { time, .. }
            | Event::Stopped { time, .. }
            | Event::Lost { time, .. } => Some(*time),
            Event::Skipped { .. } | Event::Tag { .. } => None,
        }
    }
}
