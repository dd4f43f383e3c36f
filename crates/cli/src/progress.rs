//! Progress of long work on stderr: shown when stderr is a terminal or with
//! -v, at most a few times a second, and erased when the work is done.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    what: &'static str,
    enabled: bool,
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    /// Progress for `what`; shown if stderr is a terminal or `verbose`.
    /// A command whose output goes to stdout (`stdout_is_output`) shows no
    /// progress on a terminal that also shows that output.
    pub fn new(what: &'static str, verbose: bool, stdout_is_output: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        let clash = stdout_is_output && std::io::stdout().is_terminal();
        Progress {
            what,
            enabled: verbose || (tty && !clash),
            tty,
            last: None,
            shown: false,
        }
    }

    /// A progress that never prints (benches, tests).
    pub fn quiet() -> Self {
        Progress {
            what: "",
            enabled: false,
            tty: false,
            last: None,
            shown: false,
        }
    }

    /// Reports `done` of `total` bytes.
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(250))
        {
            return;
        }
        self.last = Some(now);
        let pct = if total == 0 {
            100.0
        } else {
            done as f64 * 100.0 / total as f64
        };
        let end = if self.tty { "\r" } else { "\n" };
        eprint!(
            "{}: {:5.1}% ({} of {} bytes){}",
            self.what,
            pct.min(100.0),
            done,
            total,
            end
        );
        self.shown = true;
    }

    /// Prints a status line (always with -v; on a terminal as progress).
    pub fn note(&mut self, msg: &str) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(250))
        {
            return;
        }
        if self.enabled {
            self.last = Some(now);
            let end = if self.tty { "\r" } else { "\n" };
            eprint!("{}: {msg}{end}", self.what);
            self.shown = true;
        }
    }

    /// Clears the progress line on a terminal.
    pub fn done(&mut self) {
        if self.shown && self.tty {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
        self.shown = false;
    }
}
