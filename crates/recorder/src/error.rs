//! What can end a recording, with its cause kept as the error's source.

use std::path::PathBuf;

/// An error of the [`crate::Recorder`]. Each variant says what was being
/// done and keeps the underlying error as its `source()`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// An option that cannot work (sizes, event groups).
    #[error("{0}")]
    Config(String),
    /// perf_event_open, mmap, ioctl of one event on one thread.
    #[error("event '{event}' on thread {tid}: {what}")]
    Event {
        /// The event's name.
        event: String,
        /// The thread it was opened on.
        tid: i32,
        /// What was being done.
        what: String,
        /// The perf core's refusal (errno and reason).
        #[source]
        source: perfaux_core::Error,
    },
    /// A ring's producer-written contents were inconsistent.
    #[error("thread {tid}: {what}")]
    Ring {
        /// The thread whose ring it is.
        tid: i32,
        /// Which area.
        what: &'static str,
        /// What the ring consumer found.
        #[source]
        source: perfaux_ring::RingError,
    },
    /// A record from a ring that perf 6.1 could not read.
    #[error("thread {tid}: {what}")]
    Record {
        /// The thread whose ring held it.
        tid: i32,
        /// What is wrong with it.
        what: String,
    },
    /// Encoding a synthesized or converted record.
    #[error("{what}")]
    Encode {
        /// Which record.
        what: String,
        /// The encoder's error.
        #[source]
        source: perfaux_abi::error::EncodeError,
    },
    /// Creating, writing or renaming the output (the user's path).
    #[error("{}: {what}", path.display())]
    Output {
        /// The output path the user gave.
        path: PathBuf,
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The recording is whole but could not take the output's name: it is kept under
    /// another, beside it.
    #[error("{}: the recording is kept as {}: {what}", path.display(), kept.display())]
    Kept {
        /// The output path the user gave.
        path: PathBuf,
        /// Where the recording is.
        kept: PathBuf,
        /// What could not be done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing perf.data's structure to the output (the user's path).
    #[error("{}: {what}", path.display())]
    PerfData {
        /// The output path the user gave.
        path: PathBuf,
        /// What was being written.
        what: &'static str,
        /// The writer's error (names the file offset).
        #[source]
        source: perfaux_perfdata::Error,
    },
}

/// Result of the recorder.
pub type Result<T, E = RecordError> = std::result::Result<T, E>;

impl RecordError {
    /// The message and every cause after it, `a: b: c` on one line.
    pub fn chain(&self) -> String {
        let mut s = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(e) = src {
            s.push_str(": ");
            s.push_str(&e.to_string());
            src = e.source();
        }
        s.replace('\n', " ")
    }

    /// The I/O error at the bottom of the chain, if any (a closed pipe,
    /// a full disk).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        let mut src: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = src {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                return Some(io.kind());
            }
            src = e.source();
        }
        None
    }
}
