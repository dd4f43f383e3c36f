//! Values formatted as serde_json formats them (fxprof-processed-profile
//! serializes with serde_json: the same formatter gives the same bytes).

use serde_json::ser::{CompactFormatter, Formatter};

/// Nanoseconds as the format's float milliseconds, as serde_json prints
/// `ns as f64 / 1e6`: its shortest digits that read back as the same float.
/// For 10 ns to 10^15 ns (15 digits or fewer) those are the exact decimal
/// `ns / 10^6`, trailing zeros dropped (two different decimals of 15
/// digits are further apart than a float's rounding, so no shorter one
/// reads back the same), in plain notation: written here without the
/// float's formatting, a fifth of the export's time (the unit test checks
/// it against serde_json's over the range). The rest goes to serde_json.
#[inline]
pub(super) fn f64_ms(buf: &mut Vec<u8>, ns: u64) {
    if !(10..1_000_000_000_000_000).contains(&ns) {
        f64_elem(buf, ns as f64 / 1_000_000.0);
        return;
    }
    let (ms, mut frac) = (ns / 1_000_000, ns % 1_000_000);
    CompactFormatter
        .write_u64(buf, ms)
        .expect("a Vec takes every write");
    buf.push(b'.');
    if frac == 0 {
        buf.push(b'0');
        return;
    }
    let mut digits = 6;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    let mut d = [b'0'; 6];
    for i in (0..digits).rev() {
        d[i] = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    buf.extend_from_slice(&d[..digits]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn serde(ns: u64) -> String {
        let mut b = Vec::new();
        f64_elem(&mut b, ns as f64 / 1_000_000.0);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn milliseconds_are_printed_as_serde_json_prints_them() {
        let mut values: Vec<u64> = (0..200_000).collect();
        // Every power of ten and its neighbours, and a spread of others
        // (a multiplicative sequence through the range and past it).
        let mut p = 1u64;
        while p < u64::MAX / 10 {
            values.extend([p - 1, p, p + 1, p * 3 + 7, p * 9 + 999_999]);
            p *= 10;
        }
        let mut x = 1u64;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            values.extend([x >> 4, x >> 14, x >> 24, x >> 34]);
        }
        for ns in values {
            let mut b = Vec::new();
            f64_ms(&mut b, ns);
            assert_eq!(String::from_utf8(b).unwrap(), serde(ns), "{ns} ns");
        }
    }
}
