//! A span's or an event's fields as `key=value` text, the uevent payload the views print.
//!
//! Strings and the message are quoted (Rust's `{:?}`), other values are their `Debug` text.
//! The payload is cut at a character boundary to the seed's uevent limit (4096 bytes).

use std::fmt::{Debug, Write};

use tracing_core::field::{Field, Visit};

/// The most payload bytes a uevent carries (the seed's limit).
pub(crate) const MAX_PAYLOAD: usize = 4096;

/// Appends each field visited as ` key=value` (no leading space for the first).
pub(crate) struct KeyValues<'a>(pub(crate) &'a mut String);

impl KeyValues<'_> {
    fn key(&mut self, field: &Field) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        self.0.push_str(field.name());
        self.0.push('=');
    }
}

impl Visit for KeyValues<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.key(field);
        if field.name() == "message" {
            // `format_args!` text: quoted, as a string field is.
            let text = format!("{value:?}");
            let _ = write!(self.0, "{text:?}");
        } else {
            let _ = write!(self.0, "{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        let _ = write!(self.0, "{value:?}");
    }
}

/// `text` cut to at most [`MAX_PAYLOAD`] bytes, at a character boundary.
pub(crate) fn payload(text: &str) -> &[u8] {
    let mut end = text.len().min(MAX_PAYLOAD);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text.as_bytes()[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_payload_is_cut_at_a_character_boundary() {
        let text = "é".repeat(3000);
        let p = payload(&text);
        assert!(p.len() <= MAX_PAYLOAD && p.len() >= MAX_PAYLOAD - 1);
        assert!(std::str::from_utf8(p).is_ok());
    }
}
