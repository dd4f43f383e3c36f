//! A thread's markers: each column of the marker table a spooled stream of
//! JSON elements, in the order the markers came (the format does not want
//! them sorted; fxprof-processed-profile writes them as added).

use std::io::{self, Write};

use super::json::{f64_elem, f64_ms, u32_elem};
use super::spool::{Spool, Stream};

/// The category of the call markers (and of the frames), and of the others.
pub(super) const TRACE_CATEGORY: u16 = 1;
/// The category of uevent, loss, pause and snapshot markers.
pub(super) const MARKER_CATEGORY: u16 = 2;

/// What a marker carries besides its name and time.
pub(super) enum Data {
    /// A call: no fields.
    Call,
    /// A uevent, loss, pause window or snapshot: a number and a text
    /// (its string's index).
    Info { number: f64, text: u32 },
}

/// A thread's marker table, column by column.
#[derive(Default)]
pub(super) struct Markers {
    count: u64,
    category: Stream,
    data: Stream,
    end: Stream,
    name: Stream,
    phase: Stream,
    start: Stream,
}

impl Markers {
    /// Adds a marker: an instant at `start`, or an interval to `end`.
    pub(super) fn add(
        &mut self,
        spool: &mut Spool,
        name: u32,
        start: u64,
        end: Option<u64>,
        data: Data,
    ) -> io::Result<()> {
        self.count += 1;
        let category = match data {
            Data::Call => TRACE_CATEGORY,
            Data::Info { .. } => MARKER_CATEGORY,
        };
        spool.put_with(&mut self.category, |e| {
            u32_elem(e, u32::from(category));
            e.push(b',');
        })?;
        spool.put_with(&mut self.data, |e| match data {
            Data::Call => e.extend_from_slice(b"{\"type\":\"Call\"},"),
            Data::Info { number, text } => {
                e.extend_from_slice(b"{\"type\":\"PerfauxEvent\",\"number\":");
                f64_elem(e, number);
                e.extend_from_slice(b",\"text\":");
                u32_elem(e, text);
                e.extend_from_slice(b"},");
            }
        })?;
        spool.put_with(&mut self.end, |e| {
            match end {
                Some(t) => f64_ms(e, t),
                None => e.extend_from_slice(b"0.0"),
            }
            e.push(b',');
        })?;
        spool.put_with(&mut self.name, |e| {
            u32_elem(e, name);
            e.push(b',');
        })?;
        spool.put(&mut self.phase, if end.is_some() { b"1," } else { b"0," })?;
        spool.put_with(&mut self.start, |e| {
            f64_ms(e, start);
            e.push(b',');
        })
    }

    /// The streams, for the spool's budget.
    pub(super) fn streams(&mut self) -> [&mut Stream; 6] {
        [
            &mut self.category,
            &mut self.data,
            &mut self.end,
            &mut self.name,
            &mut self.phase,
            &mut self.start,
        ]
    }

    /// Writes the marker table (`"markers":` is the caller's).
    pub(super) fn write(&self, spool: &Spool, out: &mut impl Write) -> io::Result<()> {
        write!(out, "{{\"length\":{}", self.count)?;
        for (key, s) in [
            ("category", &self.category),
            ("data", &self.data),
            ("endTime", &self.end),
            ("name", &self.name),
            ("phase", &self.phase),
            ("startTime", &self.start),
        ] {
            write!(out, ",\"{key}\":[")?;
            // Each element ends in a comma: all but the last one's.
            spool.copy(s, 1, out)?;
            out.write_all(b"]")?;
        }
        out.write_all(b"}")
    }
}
