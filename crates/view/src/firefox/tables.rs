//! A thread's string, frame, function and stack tables, numbered as
//! fxprof-processed-profile numbers them (in the order of first use).
//!
//! What they hold grows with the program's shape: function names, distinct
//! call paths. Two things a file could make grow with its length are
//! bounded, for all threads together: the marker strings (names and texts:
//! uevent payloads) remembered for reuse ([`STRING_BYTES`]; when they reach
//! it, all threads forget them and start again, so that a string seen again
//! soon is still found; one seen again later is written again, which the
//! format allows: the crate, which remembers every string, writes it once),
//! and the call paths ([`MAX_STACKS`]; past it, a call on a new path is
//! shown in a frame of its own, [`PAST_MAX_STACKS`], under the part of its
//! path the table holds).

use std::collections::HashMap;
use std::io;

use rustc_hash::FxHashMap;

use super::json::{array, opt_elem, str_elem, u32_elem};
use super::spool::{Spool, Stream};
use crate::event::FuncId;

/// The most bytes of marker strings all threads' tables remember for
/// reuse, counting each string's index entry as [`STRING_ENTRY`] bytes
/// more.
pub(super) const STRING_BYTES: usize = 1 << 20;

/// What a remembered string costs besides its bytes: its index entry (a
/// boxed string and its number, in a table at most half empty) and the
/// allocation's rounding.
const STRING_ENTRY: usize = 64;

/// The most call paths (stack table rows) of all threads together: about
/// 40 bytes each with their index.
pub(super) const MAX_STACKS: usize = 1 << 19;

/// The frame of a call whose path the stack table had no room for.
pub(super) const PAST_MAX_STACKS: &str = "[call paths past perfaux's limit]";

/// What all threads' tables share: the bounds and their use so far.
pub(super) struct Shared {
    pub(super) string_bytes: usize,
    stacks: usize,
    /// [`STRING_BYTES`] and [`MAX_STACKS`] (smaller in tests).
    pub(super) max_string_bytes: usize,
    pub(super) max_stacks: usize,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            string_bytes: 0,
            stacks: 0,
            max_string_bytes: STRING_BYTES,
            max_stacks: MAX_STACKS,
        }
    }
}

/// One thread's tables.
#[derive(Default)]
pub(super) struct Tables {
    /// The string array, spooled: JSON strings, each followed by a comma.
    pub(super) strings: Stream,
    string_count: u32,
    /// Function names' strings (as many as the functions).
    name_index: HashMap<Box<str>, u32>,
    /// Marker strings' (within [`STRING_BYTES`]).
    text_index: HashMap<Box<str>, u32>,
    /// A function's name's string, by [`FuncId`] (a map, not a vector by
    /// id: a thread of a few functions of a large program holds a few).
    func_string: FxHashMap<u32, u32>,
    /// String -> frame (frames and functions are one to one here: every
    /// frame is a label of the one category).
    frame_of_string: FxHashMap<u32, u32>,
    /// Each frame's (and function's) name.
    frame_names: Vec<u32>,
    stack_prefix: Vec<u32>,
    stack_frame: Vec<u32>,
    stack_index: FxHashMap<(u32, u32), u32>,
    /// The [`PAST_MAX_STACKS`] frame, once used.
    past_frame: Option<u32>,
}

/// No prefix: a root stack.
const ROOT: u32 = u32::MAX;

impl Tables {
    /// The index of a marker string (a name or text) in the thread's string
    /// array.
    pub(super) fn string(
        &mut self,
        spool: &mut Spool,
        shared: &mut Shared,
        s: &str,
    ) -> io::Result<u32> {
        if let Some(i) = self.find(s) {
            return Ok(i);
        }
        let i = self.add(spool, s)?;
        shared.string_bytes += s.len() + STRING_ENTRY;
        self.text_index.insert(s.into(), i);
        Ok(i)
    }

    /// The index of a function's name (or a frame's) in the string array.
    fn name_string(&mut self, spool: &mut Spool, s: &str) -> io::Result<u32> {
        let i = match self.find(s) {
            Some(i) => i,
            None => self.add(spool, s)?,
        };
        self.name_index.insert(s.into(), i);
        Ok(i)
    }

    fn find(&self, s: &str) -> Option<u32> {
        self.name_index
            .get(s)
            .or_else(|| self.text_index.get(s))
            .copied()
    }

    fn add(&mut self, spool: &mut Spool, s: &str) -> io::Result<u32> {
        let i = self.string_count;
        self.string_count = i
            .checked_add(1)
            .ok_or_else(|| io::Error::other("more than 2^32 strings in a thread's profile"))?;
        let mut b = Vec::with_capacity(s.len() + 3);
        str_elem(&mut b, s);
        b.push(b',');
        spool.put(&mut self.strings, &b)?;
        Ok(i)
    }

    /// Forgets the marker strings (the caller makes the count start again).
    pub(super) fn forget_strings(&mut self) {
        self.text_index = HashMap::new();
    }

    /// The string of a function's name.
    #[inline]
    pub(super) fn func_string(
        &mut self,
        spool: &mut Spool,
        func: FuncId,
        name: &str,
    ) -> io::Result<u32> {
        if let Some(&s) = self.func_string.get(&func.0) {
            return Ok(s);
        }
        let s = self.name_string(spool, name)?;
        self.func_string.insert(func.0, s);
        Ok(s)
    }

    /// The frame of a function's name (its string).
    #[inline]
    pub(super) fn frame(&mut self, name: u32) -> u32 {
        let names = &mut self.frame_names;
        *self.frame_of_string.entry(name).or_insert_with(|| {
            names.push(name);
            names.len() as u32 - 1
        })
    }

    /// The stack of `frame` called from `prefix`.
    pub(super) fn stack(
        &mut self,
        spool: &mut Spool,
        shared: &mut Shared,
        prefix: Option<u32>,
        frame: u32,
    ) -> io::Result<u32> {
        let p = prefix.unwrap_or(ROOT);
        if let Some(&s) = self.stack_index.get(&(p, frame)) {
            return Ok(s);
        }
        if shared.stacks < shared.max_stacks {
            shared.stacks += 1;
            return Ok(self.new_stack(p, frame));
        }
        // Past the bound: the path goes on in one frame of its own under
        // the prefix (one such row per prefix the table holds: at most
        // doubles it).
        let past = match self.past_frame {
            Some(f) => f,
            None => {
                let s = self.name_string(spool, PAST_MAX_STACKS)?;
                let f = self.frame(s);
                self.past_frame = Some(f);
                f
            }
        };
        if p != ROOT && self.stack_frame[p as usize] == past {
            return Ok(p);
        }
        if let Some(&s) = self.stack_index.get(&(p, past)) {
            return Ok(s);
        }
        Ok(self.new_stack(p, past))
    }

    fn new_stack(&mut self, prefix: u32, frame: u32) -> u32 {
        let s = self.stack_prefix.len() as u32;
        self.stack_prefix.push(prefix);
        self.stack_frame.push(frame);
        self.stack_index.insert((prefix, frame), s);
        s
    }

    /// The frame, function and stack tables, each as `"key":{...},`
    /// preceded by its key (`frameTable`, `funcTable`) or, for the stack
    /// table, by `stackTable`.
    pub(super) fn frame_and_func_tables(&self, b: &mut Vec<u8>, category: u16) {
        let n = self.frame_names.len();
        b.extend_from_slice(format!("\"frameTable\":{{\"length\":{n},\"address\":").as_bytes());
        repeat(b, b"-1", n);
        b.extend_from_slice(b",\"inlineDepth\":");
        repeat(b, b"0", n);
        b.extend_from_slice(b",\"category\":");
        repeat(b, category.to_string().as_bytes(), n);
        b.extend_from_slice(b",\"subcategory\":");
        repeat(b, b"0", n);
        b.extend_from_slice(b",\"func\":");
        array(b, 0..n as u32, u32_elem);
        b.extend_from_slice(b",\"nativeSymbol\":");
        repeat(b, b"null", n);
        b.extend_from_slice(b",\"innerWindowID\":");
        repeat(b, b"0", n);
        b.extend_from_slice(b",\"line\":");
        repeat(b, b"null", n);
        b.extend_from_slice(b",\"column\":");
        repeat(b, b"null", n);
        b.extend_from_slice(format!("}},\"funcTable\":{{\"length\":{n},\"name\":").as_bytes());
        array(b, self.frame_names.iter().copied(), u32_elem);
        b.extend_from_slice(b",\"isJS\":");
        repeat(b, b"false", n);
        b.extend_from_slice(b",\"relevantForJS\":");
        repeat(b, b"false", n);
        b.extend_from_slice(b",\"resource\":");
        repeat(b, b"-1", n);
        b.extend_from_slice(b",\"fileName\":");
        repeat(b, b"null", n);
        b.extend_from_slice(b",\"lineNumber\":");
        repeat(b, b"null", n);
        b.extend_from_slice(b",\"columnNumber\":");
        repeat(b, b"null", n);
        b.push(b'}');
    }

    /// `"stackTable":{...}`.
    pub(super) fn stack_table(&self, b: &mut Vec<u8>) {
        let n = self.stack_prefix.len();
        b.extend_from_slice(format!("\"stackTable\":{{\"length\":{n},\"prefix\":").as_bytes());
        array(b, self.stack_prefix.iter(), |b, &p| {
            opt_elem(b, (p != ROOT).then_some(p))
        });
        b.extend_from_slice(b",\"frame\":");
        array(b, self.stack_frame.iter().copied(), u32_elem);
        b.push(b'}');
    }
}

/// A JSON array of `n` times `v`, in memory (the tables' columns are as
/// long as the table).
fn repeat(b: &mut Vec<u8>, v: &[u8], n: usize) {
    array(b, 0..n, |b, _| b.extend_from_slice(v));
}
