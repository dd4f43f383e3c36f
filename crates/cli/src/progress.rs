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

    /// Whether a status line given now would be shown (enabled, and the last one a quarter of
    /// a second old): a caller whose line costs something to make asks first.
    pub fn due(&self) -> bool {
        self.enabled
            && self
                .last
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(250))
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

/// Bytes written through a [`Counted`] writer so far, shared with a [`Watched`] sink.
pub type Written = std::rc::Rc<std::cell::Cell<u64>>;

/// A writer that counts the bytes it passes on (an export's size as it grows).
pub struct Counted<W> {
    inner: W,
    written: Written,
}

impl<W: Write> Counted<W> {
    /// `inner`, counting into `written`.
    pub fn new(inner: W, written: Written) -> Self {
        Counted { inner, written }
    }
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.set(self.written.get() + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Calls between two looks at the clock for progress.
const CALLS_PER_LOOK: u64 = 1 << 16;

/// A view sink that passes every event to `inner` and shows the work's progress: the traced
/// calls read so far, and with `written` the bytes of output (the input's size says nothing of
/// how far a decode is: the trace is read by windows, not in file order).
pub struct Watched<'p, S> {
    inner: S,
    progress: &'p mut Progress,
    written: Option<Written>,
    calls: u64,
    start: Instant,
}

impl<'p, S> Watched<'p, S> {
    /// `inner`, its progress shown through `progress`.
    pub fn new(inner: S, progress: &'p mut Progress, written: Option<Written>) -> Self {
        Watched {
            inner,
            progress,
            written,
            calls: 0,
            start: Instant::now(),
        }
    }

    fn counted(&mut self) {
        self.calls += 1;
        if self.calls.is_multiple_of(CALLS_PER_LOOK) {
            let mut msg = format!(
                "{:.1} M calls read, {:.1} s",
                self.calls as f64 / 1e6,
                self.start.elapsed().as_secs_f64()
            );
            if let Some(w) = &self.written {
                msg.push_str(&format!(", {} written", human_bytes(w.get())));
            }
            self.progress.note(&msg);
        }
    }
}

impl<S: perfaux_view::Sink> perfaux_view::Sink for Watched<'_, S> {
    fn event(
        &mut self,
        names: &perfaux_view::event::Names,
        ev: &perfaux_view::event::ViewEvent<'_>,
    ) -> std::io::Result<()> {
        self.inner.event(names, ev)
    }

    #[inline(always)]
    fn enter(
        &mut self,
        names: &perfaux_view::event::Names,
        c: perfaux_view::event::Call,
    ) -> std::io::Result<()> {
        self.counted();
        self.inner.enter(names, c)
    }

    #[inline(always)]
    fn exit(
        &mut self,
        names: &perfaux_view::event::Names,
        c: perfaux_view::event::Call,
        closed: bool,
    ) -> std::io::Result<()> {
        self.inner.exit(names, c, closed)
    }
}

/// `n` bytes as people read them: `512 B`, `3.4 MB`, `1.18 GB` (powers of 1000, as `ls -h
/// --si` and the issue's figures).
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.2} GB", n as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 kB");
        assert_eq!(human_bytes(3_400_000), "3.4 MB");
        assert_eq!(human_bytes(1_180_000_000), "1.18 GB");
    }

    #[test]
    fn a_counted_writer_counts_what_it_passed_on() {
        let written = Written::default();
        let mut w = Counted::new(Vec::new(), written.clone());
        w.write_all(b"hello").unwrap();
        w.write_all(&[0; 4096]).unwrap();
        assert_eq!(written.get(), 4101);
        assert_eq!(w.inner.len(), 4101);
    }
}
