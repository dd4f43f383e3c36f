//! The syntax of `-e`: perf's event grammar (tools/perf/util/parse-events.y)
//! cut down to what perfaux records.
//!
//! ```text
//! list     := item (',' item)*
//! item     := '{' event (',' event)* '}' [':' mods] | event
//! event    := NAME [':' SUB] ['/' [term (',' term)*] '/' [mods]] [':' mods]
//! term     := KEY ['=' VALUE]
//! ```
//!
//! `NAME:SUB` is a tracepoint-like name (`probe:FUNC`, `uevent:TYPE`) when
//! NAME is one of [`SUBSYSTEMS`], and a kernel tracepoint (`sched:sched_switch`)
//! when SUB has a letter that is no modifier; otherwise the part after ':' is a
//! modifier string (`task-clock:u`), as perf decides between
//! `sched:sched_switch` and `cycles:u`. A PMU event is `pmu/terms/` (`swtrace//`, `swtrace/period=1/u`).
//!
//! Hand-written rather than generated: the grammar is small, and a recursive
//! descent parser reports the exact byte position of the bad token, which is
//! what the error message is for.

use std::fmt;

/// Names that take a `:SUB` part, like perf's tracepoint `sys:event` names.
pub const SUBSYSTEMS: &[&str] = &["probe", "uevent"];

/// Modifier letters perf accepts after ':' (tools/perf/util/parse-events.l `modifier_event`).
const MODIFIER_CHARS: &str = "ukhIGHpPSDWeb";

/// A syntax or meaning error in one `-e` argument, with the byte position of
/// the offending token in that argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    /// The whole `-e` argument.
    pub input: String,
    /// Byte offset of the bad token in `input`.
    pub pos: usize,
    /// The bad token itself (may be empty at end of input).
    pub token: String,
    /// What is wrong with it.
    pub msg: String,
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.token.is_empty() {
            write!(
                f,
                "event syntax error in '{}' at position {}: {}",
                self.input, self.pos, self.msg
            )
        } else {
            write!(
                f,
                "event syntax error in '{}' at position {} ('{}'): {}",
                self.input, self.pos, self.token, self.msg
            )
        }
    }
}

impl std::error::Error for EventError {}

/// The value of a term: perf takes numbers in decimal or 0x hex, and
/// strings for `name=` and `aux-action=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermValue {
    /// `key` alone (a boolean term such as `aux-output`).
    Flag,
    Num(u64),
    Str(String),
}

/// One `key=value` inside `/.../`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub key: String,
    pub value: TermValue,
    /// Byte offset of `key` in the `-e` argument.
    pub pos: usize,
}

/// The modifiers after ':' (`u`, `k`, `h`, `p`...), as letters; their meaning
/// is applied when the event is resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Modifiers {
    pub letters: String,
    /// Byte offset of the first letter.
    pub pos: usize,
}

impl Modifiers {
    pub fn has(&self, c: char) -> bool {
        self.letters.contains(c)
    }
}

/// One event as written, before its name is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The event or PMU name (`swtrace`, `task-clock`, `probe`, `uevent`).
    pub name: String,
    /// The part after ':' of a [`SUBSYSTEMS`] name (`probe:FUNC` -> `FUNC`).
    pub sub: Option<String>,
    /// Whether the event was written in PMU form, `name/terms/`.
    pub pmu_form: bool,
    pub terms: Vec<Term>,
    pub modifiers: Modifiers,
    /// The event's own text and its byte offset in the `-e` argument.
    pub text: String,
    pub pos: usize,
    /// Index (in the parsed list) of the group leader when the event was
    /// written inside `{...}`; the leader itself has `Some(own index)`.
    pub group: Option<usize>,
}

impl EventSpec {
    /// The term `key`, if written (the last one wins, as in perf).
    pub fn term(&self, key: &str) -> Option<&Term> {
        self.terms.iter().rev().find(|t| t.key == key)
    }
}

/// Parses one `-e` argument into events; `base` is the index the first event
/// will have in the caller's list (so group indices span several `-e`).
pub fn parse_events(input: &str, base: usize) -> Result<Vec<EventSpec>, EventError> {
    let mut p = Parser {
        s: input,
        b: input.as_bytes(),
        i: 0,
        out: Vec::new(),
        base,
    };
    p.list()?;
    Ok(p.out)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    out: Vec<EventSpec>,
    base: usize,
}

/// A tracepoint's system or name as perf's lexer takes it: letters, digits and '_' (so
/// `task-clock:q` is a bad modifier, not a tracepoint).
fn is_tracepoint_word(w: &[u8]) -> bool {
    !w.is_empty() && w.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

impl Parser<'_> {
    fn err(&self, pos: usize, len: usize, msg: impl Into<String>) -> EventError {
        let end = (pos + len).min(self.s.len());
        let token = self.s.get(pos..end).unwrap_or("").to_string();
        EventError {
            input: self.s.to_string(),
            pos,
            token,
            msg: msg.into(),
        }
    }

    /// The token at the cursor for an "unexpected" message: up to the next
    /// separator.
    fn unexpected(&self, what: &str) -> EventError {
        if self.i >= self.b.len() {
            return self.err(self.i, 0, format!("expected {what}, found end of input"));
        }
        let len = self.b[self.i..]
            .iter()
            .position(|&c| matches!(c, b',' | b'/' | b'{' | b'}' | b':' | b'='))
            .unwrap_or(self.b.len() - self.i)
            .max(1);
        // Keep the token on a char boundary.
        let mut end = self.i + len;
        while !self.s.is_char_boundary(end) {
            end += 1;
        }
        self.err(self.i, end - self.i, format!("expected {what}"))
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn list(&mut self) -> Result<(), EventError> {
        if self.b.is_empty() {
            return Err(self.err(0, 0, "empty event list"));
        }
        loop {
            self.item()?;
            if self.eat(b',') {
                continue;
            }
            if self.i == self.b.len() {
                return Ok(());
            }
            return Err(self.unexpected("',' or end of the event list"));
        }
    }

    fn item(&mut self) -> Result<(), EventError> {
        if !self.eat(b'{') {
            self.event(None)?;
            return Ok(());
        }
        let open = self.i - 1;
        let leader = self.base + self.out.len();
        let first = self.out.len();
        loop {
            self.event(Some(leader))?;
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                break;
            }
            if self.i == self.b.len() {
                return Err(self.err(open, 1, "group '{' is never closed"));
            }
            return Err(self.unexpected("',' or '}' in the group"));
        }
        if self.eat(b':') {
            // Group modifiers apply to every member, after the member's own.
            let m = self.modifiers()?;
            for e in &mut self.out[first..] {
                for c in m.letters.chars() {
                    if !e.modifiers.has(c) {
                        e.modifiers.letters.push(c);
                    }
                }
                if e.modifiers.letters.len() == m.letters.len() {
                    e.modifiers.pos = m.pos;
                }
            }
        }
        Ok(())
    }

    /// Whether the ':' at the cursor is followed by a name with a byte no modifier is.
    fn tracepoint_name_follows(&self) -> bool {
        let rest = &self.s.as_bytes()[self.i + 1..];
        let word: Vec<u8> = rest
            .iter()
            .copied()
            .take_while(|&c| is_name_byte(c))
            .collect();
        !word.is_empty()
            && word
                .iter()
                .any(|&c| !MODIFIER_CHARS.as_bytes().contains(&c))
    }

    fn name(&mut self, what: &str) -> Result<(String, usize), EventError> {
        let start = self.i;
        while self.peek().is_some_and(is_name_byte) {
            self.i += 1;
        }
        if self.i == start {
            return Err(self.unexpected(what));
        }
        Ok((self.s[start..self.i].to_string(), start))
    }

    fn event(&mut self, group: Option<usize>) -> Result<(), EventError> {
        let start = self.i;
        let (name, _) = self.name("an event name")?;
        let mut sub = None;
        let mut modifiers = Modifiers::default();
        let mut terms = Vec::new();
        let mut pmu_form = false;
        if SUBSYSTEMS.contains(&name.as_str()) && self.peek() == Some(b':') {
            self.i += 1;
            let (s, _) = self.name(&format!("a name after '{name}:'"))?;
            sub = Some(s);
        } else if self.peek() == Some(b':')
            && is_tracepoint_word(name.as_bytes())
            && self.tracepoint_name_follows()
        {
            // perf's choice between `sched:sched_switch` and `cycles:u`: a word after ':'
            // that is not all modifier letters names a tracepoint of system NAME.
            self.i += 1;
            let (s, _) = self.name(&format!("a tracepoint name after '{name}:'"))?;
            sub = Some(s);
        }
        if self.eat(b'/') {
            pmu_form = true;
            terms = self.terms()?;
            // perf takes modifiers right after the closing slash: `intel_pt//u`.
            if self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                modifiers = self.modifiers()?;
            }
        }
        if modifiers.letters.is_empty() && self.eat(b':') {
            modifiers = self.modifiers()?;
        }
        self.out.push(EventSpec {
            name,
            sub,
            pmu_form,
            terms,
            modifiers,
            text: self.s[start..self.i].to_string(),
            pos: start,
            group,
        });
        Ok(())
    }

    /// Terms up to and including the closing '/'.
    fn terms(&mut self) -> Result<Vec<Term>, EventError> {
        let open = self.i - 1;
        let mut terms = Vec::new();
        if self.eat(b'/') {
            return Ok(terms);
        }
        loop {
            let (key, pos) = self.name("a term name")?;
            let value = if self.eat(b'=') {
                self.value(&key)?
            } else {
                TermValue::Flag
            };
            terms.push(Term { key, value, pos });
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'/') {
                return Ok(terms);
            }
            if self.i == self.b.len() {
                return Err(self.err(open, 1, "term list '/' is never closed"));
            }
            return Err(self.unexpected("',' or '/' after a term"));
        }
    }

    fn value(&mut self, key: &str) -> Result<TermValue, EventError> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| !matches!(c, b',' | b'/' | b'{' | b'}'))
        {
            self.i += 1;
        }
        let text = &self.s[start..self.i];
        if text.is_empty() {
            return Err(self.err(start, 0, format!("term '{key}=' has no value")));
        }
        Ok(match parse_num(text) {
            Some(n) => TermValue::Num(n),
            None => TermValue::Str(text.to_string()),
        })
    }

    fn modifiers(&mut self) -> Result<Modifiers, EventError> {
        let pos = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.i += 1;
        }
        let letters = &self.s[pos..self.i];
        if letters.is_empty() {
            return Err(self.unexpected("modifiers after ':'"));
        }
        if let Some((k, c)) = letters
            .char_indices()
            .find(|&(_, c)| !MODIFIER_CHARS.contains(c))
        {
            return Err(self.err(
                pos + k,
                c.len_utf8(),
                format!("unknown modifier '{c}' (perf's modifiers: {MODIFIER_CHARS})"),
            ));
        }
        Ok(Modifiers {
            letters: letters.to_string(),
            pos,
        })
    }
}

/// A number as perf's lexer takes it: decimal, or hex with 0x.
pub fn parse_num(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}
