//! A uevent payload of `key=value` text split into its fields, for the exports' arguments:
//! perfaux-tracing writes each `tracing` event and span's fields so
//! (`level=INFO target=svc message="done" status=200`), strings quoted with Rust's escapes,
//! other values as their `Debug` text.
//!
//! A field starts at a key (letters, digits, `_`, `.`; not a digit first) followed by `=`, at
//! the payload's start or after a space; a quoted value ends at its closing quote, any other
//! at the next field's start or the payload's end (so a `Debug` value may hold spaces). A
//! payload that is not text of that shape has no fields: the exports keep it whole, as before.
//! Written by hand: the format is perfaux-tracing's own, a few lines, and no crate parses it.

/// The fields of `payload`, in order, quoted values unquoted; `None` when it is not
/// `key=value` text.
pub fn fields(payload: &[u8]) -> Option<Vec<(&str, String)>> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = key_at(rest)?;
        let (value, next) = if after.starts_with('"') {
            quoted(after)?
        } else {
            let end = next_field(after).unwrap_or(after.len());
            (after[..end].trim_end().to_string(), &after[end..])
        };
        out.push((key, value));
        rest = next.strip_prefix(' ').unwrap_or(next);
        if !next.is_empty() && !next.starts_with(' ') {
            return None;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The key at the start of `s` and what follows its `=`.
fn key_at(s: &str) -> Option<(&str, &str)> {
    let eq = s.find('=')?;
    let key = &s[..eq];
    is_key(key).then(|| (key, &s[eq + 1..]))
}

fn is_key(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Where the next field starts in an unquoted value: the space before `key=`.
fn next_field(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(' ') {
        let at = from + i;
        if key_at(&s[at + 1..]).is_some() {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// A quoted value at the start of `s` (Rust's `{:?}` of a string), unescaped, and what
/// follows its closing quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[1 + i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '"' | '\'' => out.push(e),
                    'u' => {
                        // \u{XXXX}
                        let (_, open) = chars.next()?;
                        if open != '{' {
                            return None;
                        }
                        let mut hex = String::new();
                        loop {
                            let (_, h) = chars.next()?;
                            if h == '}' {
                                break;
                            }
                            if hex.len() >= 6 {
                                return None;
                            }
                            hex.push(h);
                        }
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_fields_are_split_and_unquoted() {
        let p = br#"level=INFO target=svc::http message="request \"done\"\n" status=200 peer=Some(10.0.0.1:80) http.method="GET""#;
        let f = fields(p).unwrap();
        assert_eq!(
            f,
            [
                ("level", "INFO".to_string()),
                ("target", "svc::http".to_string()),
                ("message", "request \"done\"\n".to_string()),
                ("status", "200".to_string()),
                ("peer", "Some(10.0.0.1:80)".to_string()),
                ("http.method", "GET".to_string()),
            ]
        );
    }

    #[test]
    fn a_debug_value_with_spaces_runs_to_the_next_field() {
        let f = fields(b"span=conn peer=Peer { id: 3, up: true } n=1").unwrap();
        assert_eq!(f[1], ("peer", "Peer { id: 3, up: true }".to_string()));
        assert_eq!(f[2], ("n", "1".to_string()));
        let f = fields("m=\"\\u{1f600} ok\"".as_bytes()).unwrap();
        assert_eq!(f[0].1, "\u{1f600} ok");
    }

    #[test]
    fn text_of_another_shape_has_no_fields() {
        for p in [
            &b"hello world"[..],
            b"",
            b"=x",
            b"1a=2",
            b"k=\"unterminated",
            b"k=\"a\"b=c",
            b"k=\"\\q\"",
            &[0xff, 0x3d, 0x31],
        ] {
            assert_eq!(fields(p), None, "{:?}", String::from_utf8_lossy(p));
        }
    }
}
