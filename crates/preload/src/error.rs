//! What can end the tracing of a program, with its cause kept as the error's source.

use std::path::PathBuf;

use perfaux_recorder::RecordError;

use crate::notice::Notice;

/// The message for a program that never called a hook.
pub const NO_HOOKS: &str = "it called no instrumentation hook: build it with -finstrument-functions \
     (gcc/clang), or -pg, or -pg -mfentry, so that perfaux can trace its functions";

/// An error of [`crate::TracedProgram`]. Each variant says what was being done and keeps the
/// underlying error as its `source()` ([`ProgramError::chain`] gives them all on one line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProgramError {
    /// The runtime to preload could not be made ready.
    #[error("the preload runtime")]
    Runtime(#[source] std::io::Error),
    /// The options cannot work (events, sizes).
    #[error("{0}")]
    Options(String),
    /// Creating the memory the program writes into (the error says which part).
    #[error("{0}")]
    Session(std::io::Error),
    /// Starting the program.
    #[error("cannot run '{prog}'")]
    Spawn {
        /// The program, as the command names it.
        prog: String,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the program.
    #[error("wait")]
    Wait(#[source] std::io::Error),
    /// The recording (its rings, its records, its output).
    #[error(transparent)]
    Recorder(#[from] RecordError),
    /// The program ended without a traced thread: no file is written (a previous one stays).
    #[error(
        "nothing traced in '{prog}'{}: {hint}",
        end.as_ref().map(|l| format!(" ({l})")).unwrap_or_default()
    )]
    NothingTraced {
        /// The program.
        prog: String,
        /// perf's line for the signal that ended it, if one did.
        end: Option<String>,
        /// Why, and what to do: [`NO_HOOKS`] and what `-P` would trace, or what `-P` did.
        hint: String,
    },
    /// The program ran and its recording is written, without something it was asked for (a
    /// `probe:FUNC` whose function no object had, a thread whose events could not be set up).
    #[error("{what}; the recording is written to {} without it", output.display())]
    Incomplete {
        /// What is missing.
        what: String,
        /// The recording.
        output: PathBuf,
        /// What the recording had to say besides (as [`crate::Finished::notices`]).
        notices: Vec<Notice>,
    },
}

impl ProgramError {
    /// The message and every cause after it, `a: b: c` on one line.
    pub fn chain(&self) -> String {
        if let ProgramError::Recorder(e) = self {
            return e.chain();
        }
        let mut s = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(e) = src {
            s.push_str(": ");
            s.push_str(&e.to_string());
            src = e.source();
        }
        s.replace('\n', " ")
    }
}
