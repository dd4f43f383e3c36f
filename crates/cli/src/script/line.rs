//! A script line whose command-name columns are filled in when it is
//! printed, not when it is read.
//!
//! A COMM record and the samples it names can sit in the file out of time
//! order (each CPU's buffer is written in its own turn, and a thread that
//! exec'd on one CPU and moved to another has its later samples written
//! before its COMM). perf queues COMM records with the samples and names a
//! sample by the COMM applied when the sample comes out of the queue in
//! time order (tools/perf/util/ordered-events.c, machine__process_comm_event);
//! a name looked up while reading would be the file order's.

use std::io::Write;

/// Text with the places where the thread's name goes, each printed as
/// perf's `%16s`.
#[derive(Debug, Default)]
pub(super) struct Line {
    tid: i64,
    text: String,
    /// Byte offsets in `text` where the name goes, rising.
    slots: Vec<usize>,
}

impl Line {
    pub(super) fn new(tid: i64) -> Line {
        Line {
            tid,
            ..Line::default()
        }
    }

    /// The thread the name is of.
    pub(super) fn tid(&self) -> i64 {
        self.tid
    }

    /// perf script's leading columns, `%16s %5d [%03d] %5lu.%06lu: `, the
    /// first one filled in when the line is printed.
    pub(super) fn push_prefix(&mut self, cpu: Option<u32>, time: u64) {
        use std::fmt::Write;
        self.slots.push(self.text.len());
        let _ = write!(self.text, " {:>5}", self.tid);
        if let Some(c) = cpu {
            let _ = write!(self.text, " [{c:03}]");
        }
        let _ = write!(
            self.text,
            " {:>5}.{:06}: ",
            time / 1_000_000_000,
            (time % 1_000_000_000) / 1000
        );
    }

    /// Text with a name column made for `comm` already in it at byte
    /// `at` of `text` (`%16s` of it): the column becomes a slot.
    pub(super) fn push_named(&mut self, text: &str, comm: &str, at: usize) {
        let width = format!("{comm:>16}").len();
        match text.get(at..at + width) {
            Some(_) => {
                self.text.push_str(&text[..at]);
                self.slots.push(self.text.len());
                self.text.push_str(&text[at + width..]);
            }
            None => self.text.push_str(text),
        }
    }

    pub(super) fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
    }

    pub(super) fn pop(&mut self) -> Option<char> {
        self.text.pop()
    }

    /// Bytes held, for the queue's budget.
    pub(super) fn cost(&self) -> usize {
        self.text.capacity() + self.slots.capacity() * size_of::<usize>()
    }

    /// The line with `comm` in each of its name columns.
    pub(super) fn write_to(&self, comm: &str, out: &mut impl Write) -> std::io::Result<()> {
        let mut from = 0;
        for &at in &self.slots {
            out.write_all(&self.text.as_bytes()[from..at])?;
            write!(out, "{comm:>16}")?;
            from = at;
        }
        out.write_all(&self.text.as_bytes()[from..])
    }

    #[cfg(test)]
    pub(super) fn text(comm: &str, line: &Line) -> String {
        let mut v = Vec::new();
        line.write_to(comm, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_goes_where_perf_prints_it() {
        let mut l = Line::new(42);
        l.push_prefix(Some(1), 3_000_123_456);
        l.push_str("x\n");
        assert_eq!(
            Line::text("sh", &l),
            format!("{:>16}    42 [001]     3.000123: x\n", "sh")
        );
        let long = "a-name-longer-than-16";
        assert!(Line::text(long, &l).starts_with("a-name-longer-than-16    42 "));
    }

    #[test]
    fn a_column_made_for_another_name_becomes_a_slot() {
        let mut l = Line::new(7);
        l.push_str("    ");
        l.push_named(&format!("{:>16} 7 rest\n", ""), "", 0);
        assert_eq!(
            Line::text("bash", &l),
            format!("    {:>16} 7 rest\n", "bash")
        );
    }
}
