//! What tracing a program has to tell its user besides its result, as values: the caller
//! decides where they go (`perfaux record` prints them on stderr).

use std::fmt;
use std::path::PathBuf;

use crate::host::RingDamage;
use crate::shared::{MAX_OBJECTS, OBJECT_WAIT, STACK_DEPTH};

/// One thing to tell. `Display` gives the sentence without a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// `probe:FUNC` events whose function was in no object the program loaded at its start (a
    /// dlopen may still bring it; the recording fails at the end if none does).
    FunctionsMissingAtStart {
        /// The functions.
        functions: Vec<String>,
        /// The program.
        prog: String,
    },
    /// Threads that started while every slot was held, and went untraced.
    ThreadsWithoutSlot {
        /// How many.
        threads: u64,
        /// The most slots the recording had.
        slots: usize,
        /// Why it could not make more (a ring the recorder could not make), if that was the
        /// limit rather than `--max-threads`.
        why: Option<String>,
        /// The slots the recorder made; fewer than `slots` without `why`: the threads gave up
        /// waiting for it to make theirs.
        made: usize,
    },
    /// Threads whose process could not open the recorder's ring memfds (inherited ones it
    /// closed, and `/proc/RECORDER/fd` refused): untraced.
    RingsUnreachable {
        /// How many.
        threads: u64,
        /// Why (the last failure's errno).
        errno: i32,
    },
    /// Calls made inside signal handlers that interrupted the runtime's hooks: not traced (the
    /// thread's writer may have been mid-packet), counted at their entries.
    CallsInHandlers {
        /// How many.
        calls: u64,
    },
    /// Calls made deeper than a thread's return stack holds: not traced, nor their exits,
    /// counted at their entries.
    CallsPastDepth {
        /// How many.
        calls: u64,
    },
    /// `-P`: functions a pattern named whose entries could not be patched safely: untouched,
    /// so not traced.
    FunctionsRefused {
        /// How many were refused.
        refused: u64,
        /// How many were patched.
        patched: u64,
    },
    /// A thread's ring whose memory the program wrote over (a wild pointer, or a deliberate
    /// write): its trace ends with what was taken before; the other threads' are whole.
    RingDamaged(RingDamage),
    /// The program wrote over the control area it shares with the recorder (its magic and
    /// version): no slot was made for what it asked after that, and what it said there (counts
    /// of untraced calls and threads) may be noise.
    ControlAreaDamaged,
    /// The kernel's events of the program (its context switches, the `-e` events of the
    /// kernel) are not in the recording: they could not be opened (the kernel's words), or the
    /// program started before they were. An error when `-e` asked for some.
    KernelEventsNotRecorded {
        /// Their names.
        events: Vec<String>,
        /// Whether `-e` asked for some (else: the switches, recorded by default).
        asked: bool,
        /// Why.
        why: String,
    },
    /// An event of a process recorded with `-p` that the kernel refused (the others are
    /// recorded): an error when `-e` asked for it (the switches are recorded by default).
    AttachedEventRefused {
        /// The event.
        event: String,
        /// The process.
        pid: u32,
        /// The kernel's answer, with what would allow it.
        why: String,
        /// Whether `-e` asked for it.
        asked: bool,
    },
    /// No thread of the program called a hook, and the kernel's events `-e` asked for are
    /// recorded: the recording holds those alone (as `perf record` would), not the trace.
    OnlyKernelEvents {
        /// The program.
        prog: String,
        /// Why nothing was traced, and what would trace it.
        hint: String,
    },
    /// Objects the program's processes loaded whose MMAP2 and symbols are missing.
    ObjectsLost {
        /// How many (the program's count).
        objects: u64,
    },
    /// The disk holding the output filled: the recording is written with everything before.
    DiskFilled {
        /// The output.
        output: PathBuf,
        /// Bytes of trace not written.
        trace_bytes: u64,
        /// Records not written.
        records: u64,
    },
}

impl Notice {
    /// Whether the notice is a failure of the recording (the file is still written whole): a
    /// tool exits with an error for it.
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            Notice::DiskFilled { .. }
                | Notice::KernelEventsNotRecorded { asked: true, .. }
                | Notice::AttachedEventRefused { asked: true, .. }
        )
    }

    /// The disk-full notice of a recording's summary, if its disk filled.
    pub fn disk_filled(
        output: &std::path::Path,
        s: &perfaux_recorder::RecordSummary,
    ) -> Option<Notice> {
        s.disk_full.then(|| Notice::DiskFilled {
            output: output.to_path_buf(),
            trace_bytes: s.trace_lost_to_full_disk,
            records: s.records_lost_to_full_disk,
        })
    }
}

/// The line naming the functions of `funcs` missing in `prog` and what it loaded `when`.
pub fn functions_missing(funcs: &[String], prog: &str, when: &str) -> String {
    let each: Vec<String> = funcs
        .iter()
        .map(|f| format!("probe:{f}: no function '{f}'"))
        .collect();
    format!(
        "{} in {prog} or the libraries it loaded{when} (a probe names a function by its ELF \
         symbol name)",
        each.join(", ")
    )
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::FunctionsMissingAtStart { functions, prog } => write!(
                f,
                "{}; the recording fails unless a dlopen brings it",
                functions_missing(functions, prog, " at its start")
            ),
            Notice::ThreadsWithoutSlot {
                threads,
                slots,
                why: None,
                made,
            } if made < slots => write!(
                f,
                "{threads} thread(s) of the program's processes were not traced: each waited \
                 {} s for the recorder to make a ring for it, in vain (it had made {made} of \
                 the {slots} --max-threads allows): the recorder fell behind the threads' \
                 start, as on a loaded machine",
                perfaux_preload_abi::SLOT_GROW_WAIT.as_secs()
            ),
            Notice::ThreadsWithoutSlot {
                threads,
                slots,
                why,
                ..
            } => {
                write!(
                    f,
                    "{threads} thread(s) of the program's processes were not traced: they \
                     started while {slots} threads were traced at once, "
                )?;
                match why {
                    Some(why) => write!(f, "the most the recorder could make rings for ({why})")?,
                    None => write!(f, "the most --max-threads allows")?,
                }
                write!(
                    f,
                    " (a slot goes to another thread once its thread ended, its process \
                     exec'd, or its process ended, this last seen only in perfaux's pid \
                     namespace)"
                )
            }
            Notice::RingsUnreachable { threads, errno } => write!(
                f,
                "{threads} thread(s) of the program's processes were not traced: their process \
                 could not open the recorder's ring memory ({}: the inherited descriptors were \
                 closed, and perfaux's /proc/PID/fd refused them, as it does to a process \
                 that changed its user or runs in a pid and mount namespace of its own)",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Notice::CallsInHandlers { calls } => write!(
                f,
                "{calls} call(s) made in signal handlers that interrupted the runtime's hooks \
                 were not traced (the thread's trace was mid-write; the handlers' other calls \
                 are in the trace)"
            ),
            Notice::CallsPastDepth { calls } => write!(
                f,
                "{calls} call(s) made deeper than {STACK_DEPTH} open calls in a thread were not \
                 traced (the runtime's depth limit; the calls around them are in the trace)"
            ),
            Notice::FunctionsRefused { refused, patched } => write!(
                f,
                "{refused} function(s) that -P named were left unpatched, so untraced (their \
                 first instructions cannot move safely; -v lists each with its reason); \
                 {patched} were patched"
            ),
            Notice::RingDamaged(d) => write!(
                f,
                "thread {}: the program wrote over its trace ring's memory ({}): the thread's \
                 trace ends with the {} bytes taken before; the other threads' traces are \
                 whole",
                d.tid, d.what, d.trace_bytes_kept
            ),
            Notice::ControlAreaDamaged => write!(
                f,
                "the program wrote over the memory it shares with the recorder (the control \
                 area's magic and version): threads that started after were traced only in the \
                 slots made before, and its counts of untraced calls and threads may be noise"
            ),
            Notice::KernelEventsNotRecorded {
                events,
                asked: false,
                why,
            } if events
                .iter()
                .all(|e| e == crate::kernel_events::SWITCH_EVENT_NAME) =>
            {
                write!(
                    f,
                    "the program's context switches are not in the recording ({why}): its calls' \
                 times cannot be told apart into running and waiting; --no-switch-events says \
                 this is wanted"
                )
            }
            Notice::KernelEventsNotRecorded { events, why, .. } => write!(
                f,
                "record: the kernel's event(s) {} of the program are not in the recording \
                 ({why}); the trace is recorded all the same",
                events.join(", ")
            ),
            Notice::AttachedEventRefused {
                event, pid, why, ..
            } => write!(
                f,
                "the kernel's event '{event}' of process {pid} is not in the recording ({why})"
            ),
            Notice::OnlyKernelEvents { prog, hint } => write!(
                f,
                "no call of '{prog}' is traced ({hint}); the recording holds the kernel's events \
                 of it alone"
            ),
            Notice::ObjectsLost { objects } => write!(
                f,
                "{objects} object(s) the program's processes loaded were not recorded (the ring \
                 of {MAX_OBJECTS} loaded objects stayed full for {} ms, or a process loaded \
                 more than 1024): their functions are named by address",
                OBJECT_WAIT.as_millis()
            ),
            Notice::DiskFilled {
                output,
                trace_bytes,
                records,
            } => write!(
                f,
                "record: the disk holding {} filled: the recording is written with everything \
                 before; {trace_bytes} bytes of trace and {records} records after it were not",
                output.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads that went untraced are said with their true cause: the limit reached, or the
    /// recorder slower than their start (fewer rings made than the limit, no error).
    #[test]
    fn threads_without_a_slot_are_said_with_their_cause() {
        let at_limit = Notice::ThreadsWithoutSlot {
            threads: 3,
            slots: 64,
            why: None,
            made: 64,
        }
        .to_string();
        assert!(at_limit.contains("64 threads were traced at once, the most --max-threads"));
        let behind = Notice::ThreadsWithoutSlot {
            threads: 79,
            slots: 8192,
            why: None,
            made: 1255,
        }
        .to_string();
        assert!(
            behind.contains("waited 3 s for the recorder") && behind.contains("made 1255 of"),
            "{behind}"
        );
        assert!(!behind.contains("traced at once"), "{behind}");
        let refused = Notice::ThreadsWithoutSlot {
            threads: 2,
            slots: 500,
            why: Some("EMFILE".into()),
            made: 500,
        }
        .to_string();
        assert!(
            refused.contains("could make rings for (EMFILE)"),
            "{refused}"
        );
    }
}
