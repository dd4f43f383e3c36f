//! The tracepoints' formats a file carries in HEADER_TRACING_DATA (perf's `tracing_data_get`
//! layout, version 0.6: see perfaux-recorder's `tracefs` for the writer), read to name and
//! print the fields of each tracepoint sample's raw record (`name=value`, after the common
//! fields), as perf prints them through libtraceevent.
//!
//! The feature is untrusted input: every size is checked against what is left, counts are
//! bounded by the bytes that would hold them, and a field that lies outside its record is
//! printed as `?`. Written by hand: the layout is perf's own and no crate reads it.

use std::collections::HashMap;

/// The magic the feature starts with.
const MAGIC: &[u8] = b"\x17\x08Dtracing";

/// One field of a tracepoint's record, as its `format` file lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its C declaration without the name (`char[16]`, `pid_t`, `__data_loc char[]`).
    pub ty: String,
    /// Its name.
    pub name: String,
    /// Bytes from the record's start.
    pub offset: usize,
    /// Bytes it takes.
    pub size: usize,
    /// Signed integer.
    pub signed: bool,
}

/// One tracepoint's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// Its system (`sched`).
    pub system: String,
    /// Its name (`sched_switch`).
    pub name: String,
    /// Its fields, the common ones (`common_type`, `common_pid`, ...) first.
    pub fields: Vec<Field>,
}

/// The formats of a file's tracepoints, by id (their attrs' `config`).
#[derive(Debug, Clone, Default)]
pub struct TracepointFormats {
    by_id: HashMap<u64, EventFormat>,
}

/// A cursor over the feature, each read checked.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    big: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(format!(
                "HEADER_TRACING_DATA: {what} ({n} bytes) past the section's end at {}",
                self.at
            ));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b: [u8; 4] = self.take(4, what)?.try_into().expect("4 bytes");
        Ok(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b: [u8; 8] = self.take(8, what)?.try_into().expect("8 bytes");
        Ok(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    fn cstr(&mut self, what: &str) -> Result<&'a str, String> {
        let rest = &self.b[self.at..];
        let n = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| format!("HEADER_TRACING_DATA: {what} without its NUL"))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| format!("HEADER_TRACING_DATA: {what} is not UTF-8"))?;
        self.at += n + 1;
        Ok(s)
    }

    /// A u64 size, then that many bytes.
    fn sized64(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.u64(what)?;
        let n = usize::try_from(n).map_err(|_| format!("HEADER_TRACING_DATA: {what}: size"))?;
        self.take(n, what)
    }

    /// A u32 size, then that many bytes.
    fn sized32(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
}

/// A `format` file's name, id and fields (`field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`).
fn parse_format(system: &str, text: &str) -> Option<(u64, EventFormat)> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(n) = l.strip_prefix("name:") {
            name = Some(n.trim().to_owned());
        } else if let Some(n) = l.strip_prefix("ID:") {
            id = n.trim().parse().ok();
        } else if let Some(decl) = l.strip_prefix("field:") {
            let mut parts = decl.split(';').map(str::trim);
            let decl = parts.next()?;
            let mut offset = None;
            let mut size = None;
            let mut signed = false;
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("signed:") {
                    signed = v == "1";
                }
            }
            // The name is the declaration's last word, an array's `[N]` moved to the type.
            let (ty, fname) = decl.rsplit_once(' ')?;
            let (fname, dims) = match fname.find('[') {
                Some(i) => (&fname[..i], &fname[i..]),
                None => (fname, ""),
            };
            fields.push(Field {
                ty: format!("{ty}{dims}"),
                name: fname.to_owned(),
                offset: offset?,
                size: size?,
                signed,
            });
        }
    }
    Some((
        id?,
        EventFormat {
            system: system.to_owned(),
            name: name?,
            fields,
        },
    ))
}

impl TracepointFormats {
    /// Reads the HEADER_TRACING_DATA feature `b`.
    pub fn parse(b: &[u8]) -> Result<TracepointFormats, String> {
        if !b.starts_with(MAGIC) {
            return Err("HEADER_TRACING_DATA: no tracing data magic".into());
        }
        let mut c = Cursor {
            b,
            at: MAGIC.len(),
            big: false,
        };
        let version = c.cstr("the version")?.to_owned();
        let flags = c.take(2, "the byte order and long size")?;
        c.big = flags[0] != 0;
        c.u32("the page size")?;
        for h in ["header_page", "header_event"] {
            if c.cstr(h)? != h {
                return Err(format!("HEADER_TRACING_DATA: no {h} where it belongs"));
            }
            c.sized64(h)?;
        }
        let n = c.u32("the ftrace formats' count")?;
        for _ in 0..n {
            c.sized64("an ftrace format")?;
        }
        let mut by_id = HashMap::new();
        let systems = c.u32("the systems' count")?;
        for _ in 0..systems {
            let system = c.cstr("a system's name")?.to_owned();
            let events = c.u32("a system's events' count")?;
            for _ in 0..events {
                let text = c.sized64("an event format")?;
                let text = String::from_utf8_lossy(text);
                if let Some((id, f)) = parse_format(&system, &text) {
                    by_id.insert(id, f);
                }
            }
        }
        // kallsyms, printk formats and (0.6) saved_cmdlines follow: not needed to print fields.
        c.sized32("kallsyms")?;
        c.sized32("the printk formats")?;
        if version.as_str() >= "0.6" {
            c.sized64("the saved cmdlines")?;
        }
        Ok(TracepointFormats { by_id })
    }

    /// The format of tracepoint `id`.
    pub fn get(&self, id: u64) -> Option<&EventFormat> {
        self.by_id.get(&id)
    }
}

impl EventFormat {
    /// The record's fields after the common ones, `name=value` each, space-separated: strings
    /// as text, pointers and unsigned longs in hex, other integers in decimal, arrays of other
    /// kinds as `[N bytes]`; a field outside `raw` as `?`.
    pub fn fields_text(&self, raw: &[u8]) -> String {
        let mut out = Vec::new();
        for f in self
            .fields
            .iter()
            .filter(|f| !f.name.starts_with("common_"))
        {
            out.push(format!("{}={}", f.name, field_value(f, raw)));
        }
        out.join(" ")
    }
}

/// A NUL-terminated (or whole) string of `b`, lossily.
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn field_value(f: &Field, raw: &[u8]) -> String {
    let Some(b) = f
        .offset
        .checked_add(f.size)
        .and_then(|end| raw.get(f.offset..end))
    else {
        return "?".into();
    };
    if f.ty.starts_with("__data_loc") || f.ty.starts_with("__rel_loc") {
        // u32: the data's offset (from the record, or for __rel_loc from after the field) in
        // the low half, its length in the high half.
        let Ok(w) = <[u8; 4]>::try_from(b) else {
            return "?".into();
        };
        let w = u32::from_ne_bytes(w);
        let mut off = (w & 0xffff) as usize;
        if f.ty.starts_with("__rel_loc") {
            off += f.offset + 4;
        }
        let len = (w >> 16) as usize;
        return match raw.get(off..off.saturating_add(len).min(raw.len())) {
            Some(s) if f.ty.contains("char") => text(s),
            Some(s) => format!("[{} bytes]", s.len()),
            None => "?".into(),
        };
    }
    if f.ty.contains('[') {
        return if f.ty.starts_with("char") {
            text(b)
        } else {
            format!("[{} bytes]", b.len())
        };
    }
    let v = match *b {
        [x] => u64::from(x),
        [a, b2] => u64::from(u16::from_ne_bytes([a, b2])),
        [a, b2, c, d] => u64::from(u32::from_ne_bytes([a, b2, c, d])),
        _ => match <[u8; 8]>::try_from(b) {
            Ok(w) => u64::from_ne_bytes(w),
            Err(_) => return format!("[{} bytes]", b.len()),
        },
    };
    if f.ty.contains('*') || (!f.signed && f.ty.contains("long")) {
        return format!("{v:#x}");
    }
    if f.signed {
        let shift = 64 - 8 * f.size as u32;
        return ((v << shift) as i64 >> shift).to_string();
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
        \tfield:const char * buf;\toffset:40;\tsize:8;\tsigned:0;\n\
        \tfield:__data_loc char[] name;\toffset:48;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"...\"\n";

    fn feature(formats: &[(&str, &str)]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(b"0.6\0");
        b.extend_from_slice(&[0, 8]);
        b.extend_from_slice(&4096u32.to_le_bytes());
        for h in ["header_page", "header_event"] {
            b.extend_from_slice(h.as_bytes());
            b.push(0);
            b.extend_from_slice(&3u64.to_le_bytes());
            b.extend_from_slice(b"x\n\n");
        }
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(formats.len() as u32).to_le_bytes());
        for (sys, f) in formats {
            b.extend_from_slice(sys.as_bytes());
            b.push(0);
            b.extend_from_slice(&1u32.to_le_bytes());
            b.extend_from_slice(&(f.len() as u64).to_le_bytes());
            b.extend_from_slice(f.as_bytes());
        }
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b
    }

    #[test]
    fn a_records_fields_print_by_their_format() {
        let t = TracepointFormats::parse(&feature(&[("sched", SWITCH)])).unwrap();
        let f = t.get(372).unwrap();
        assert_eq!(
            (f.system.as_str(), f.name.as_str()),
            ("sched", "sched_switch")
        );
        let mut raw = vec![0u8; 60];
        raw[8..14].copy_from_slice(b"writer");
        raw[24..28].copy_from_slice(&(-5i32).to_ne_bytes());
        raw[32..40].copy_from_slice(&1i64.to_ne_bytes());
        raw[40..48].copy_from_slice(&0xdead_beefu64.to_ne_bytes());
        raw[48..52].copy_from_slice(&((3u32 << 16) | 56).to_ne_bytes());
        raw[56..59].copy_from_slice(b"abc");
        assert_eq!(
            f.fields_text(&raw),
            "prev_comm=writer prev_pid=-5 prev_state=1 buf=0xdeadbeef name=abc"
        );
        // A record cut short: the fields past its end are `?`.
        assert_eq!(
            f.fields_text(&raw[..30]),
            "prev_comm=writer prev_pid=-5 prev_state=? buf=? name=?"
        );
    }

    #[test]
    fn a_damaged_feature_is_an_error_never_a_panic() {
        let good = feature(&[("sched", SWITCH)]);
        for cut in 0..good.len() {
            let _ = TracepointFormats::parse(&good[..cut]);
        }
        assert!(TracepointFormats::parse(&good[..good.len() - 1]).is_err());
        let mut huge = good.clone();
        // The first header's size, made enormous.
        let at = MAGIC.len() + 4 + 2 + 4 + "header_page\0".len();
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = TracepointFormats::parse(&huge).unwrap_err();
        assert!(e.contains("header_page"), "{e}");
    }
}
