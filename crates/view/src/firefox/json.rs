//! Values formatted as serde_json formats them (fxprof-processed-profile
//! serializes with serde_json: the same formatter gives the same bytes).

use serde_json::ser::{CompactFormatter, Formatter};

/// Nanoseconds as the format's float milliseconds.
#[inline]
pub(super) fn f64_ms(buf: &mut Vec<u8>, ns: u64) {
    f64_elem(buf, ns as f64 / 1_000_000.0);
}

/// A float (finite: non-finite ones would be `null`, as serde_json writes
/// them).
#[inline]
pub(super) fn f64_elem(buf: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        CompactFormatter
            .write_f64(buf, v)
            .expect("a Vec takes every write");
    } else {
        buf.extend_from_slice(b"null");
    }
}

/// An unsigned integer.
#[inline]
pub(super) fn u32_elem(buf: &mut Vec<u8>, v: u32) {
    CompactFormatter
        .write_u32(buf, v)
        .expect("a Vec takes every write");
}

/// A JSON string.
pub(super) fn str_elem(buf: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(buf, s).expect("a Vec takes every write");
}

/// An optional index: the index or `null`.
pub(super) fn opt_elem(buf: &mut Vec<u8>, v: Option<u32>) {
    match v {
        Some(v) => u32_elem(buf, v),
        None => buf.extend_from_slice(b"null"),
    }
}

/// A JSON array of the elements `f` writes, one per item.
pub(super) fn array<T>(
    buf: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut f: impl FnMut(&mut Vec<u8>, T),
) {
    buf.push(b'[');
    for (i, it) in items.into_iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        f(buf, it);
    }
    buf.push(b']');
}
