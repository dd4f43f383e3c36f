//! Hand-rolled formatting for `report -D`: perf's hex dump lines and the
//! number forms of C's printf that perf uses (`%#x`, `%#lx`, `%u`, `%5d`).
//!
//! `write!` through `std::fmt` costs a virtual call and a format-string walk
//! per argument; a dump is mostly hex bytes, so the hot paths here append to
//! a byte buffer from lookup tables instead. The buffer goes to a
//! `BufWriter` in large pieces.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the C `%#x` form of `v`: `0` for zero, else `0x` and lower hex.
pub fn hash_x(out: &mut Vec<u8>, v: u64) {
    if v == 0 {
        out.push(b'0');
        return;
    }
    out.extend_from_slice(b"0x");
    hex(out, v);
}

/// Appends `v` in lower hex without prefix or padding.
pub fn hex(out: &mut Vec<u8>, v: u64) {
    let digits = (64 - v.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (i * 4)) & 0xf) as usize]);
    }
}

/// Appends `v` in decimal.
pub fn dec(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends a signed decimal (C `%d` of an `int`).
pub fn sdec(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
        dec(out, v.unsigned_abs());
    } else {
        dec(out, v as u64);
    }
}

/// Appends `v` right-aligned in `width` columns (C `%5d`).
pub fn sdec_right(out: &mut Vec<u8>, v: i64, width: usize) {
    let start = out.len();
    sdec(out, v);
    let n = out.len() - start;
    if n < width {
        out.splice(start..start, std::iter::repeat_n(b' ', width - n));
    }
}

/// Appends `v` left-aligned in `width` columns (C `%-5d`).
pub fn sdec_left(out: &mut Vec<u8>, v: i64, width: usize) {
    let start = out.len();
    sdec(out, v);
    let n = out.len() - start;
    out.extend(std::iter::repeat_n(b' ', width.saturating_sub(n)));
}

/// perf's `isprint(ch) && isascii(ch) ? ch : '.'`.
#[inline]
fn printable(c: u8) -> u8 {
    if (0x20..0x7f).contains(&c) { c } else { b'.' }
}

/// Appends perf's hex dump of `data` (tools/perf/util/debug.c
/// `trace_event_printer` over `binary__fprintf`, 16 bytes a line):
///
/// ```text
/// .  0000:  4f 00 00 00 00 00 20 00 1f 00 00 00 00 00 00 00  O..... .........
/// ```
///
/// A short last line pads the missing bytes with three spaces each and the
/// missing characters with one.
pub fn hex_lines(out: &mut Vec<u8>, data: &[u8]) {
    hex_lines_at(out, data, 0);
}

/// [`hex_lines`] for the part of a longer run of bytes that starts `at`
/// bytes into it (a multiple of 16): the lines are numbered from there.
pub fn hex_lines_at(out: &mut Vec<u8>, data: &[u8], at: usize) {
    // 8 + 48 + 2 + 16 + 1 bytes per full line.
    out.reserve(data.len().div_ceil(16) * 75);
    for (n, line) in data.chunks(16).enumerate() {
        let addr = at + n * 16;
        out.extend_from_slice(b".  ");
        if addr < 0x10000 {
            let a = addr as u32;
            out.extend_from_slice(&[
                HEX[(a >> 12) as usize & 0xf],
                HEX[(a >> 8) as usize & 0xf],
                HEX[(a >> 4) as usize & 0xf],
                HEX[a as usize & 0xf],
            ]);
        } else {
            hex(out, addr as u64);
        }
        out.extend_from_slice(b": ");
        for &b in line {
            out.extend_from_slice(&[b' ', HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]]);
        }
        for _ in line.len()..16 {
            out.extend_from_slice(b"   ");
        }
        out.extend_from_slice(b"  ");
        out.extend(line.iter().map(|&c| printable(c)));
        for _ in line.len()..16 {
            out.push(b' ');
        }
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_number_forms() {
        let mut o = Vec::new();
        hash_x(&mut o, 0);
        o.push(b' ');
        hash_x(&mut o, 0x2e8);
        o.push(b' ');
        dec(&mut o, 18446744041015200657);
        o.push(b' ');
        sdec(&mut o, -1);
        o.push(b'|');
        sdec_right(&mut o, 1760, 5);
        o.push(b'/');
        sdec_left(&mut o, 0, 5);
        o.push(b'|');
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "0 0x2e8 18446744041015200657 -1| 1760/0    |"
        );
    }

    #[test]
    fn hex_dump_matches_perfs_lines() {
        // Lines taken from `perf report -D` of the intel_pt fixture (TIME_CONV
        // at 0x2e8, and the short last line of AUXTRACE_INFO at 0x308).
        let mut o = Vec::new();
        let rec = [
            0x4f, 0, 0, 0, 0, 0, 0x20, 0, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xaa, 0xaa, 0x6a, 0, 0,
            0, 0, 0x91, 0xcb, 0x43, 0x63, 0xf8, 0xff, 0xff, 0xff,
        ];
        hex_lines(&mut o, &rec);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            ".  0000:  4f 00 00 00 00 00 20 00 1f 00 00 00 00 00 00 00  O..... .........\n\
             .  0010:  aa aa aa 6a 00 00 00 00 91 cb 43 63 f8 ff ff ff  ...j......Cc....\n"
        );
        let mut o = Vec::new();
        hex_lines(&mut o, &[0; 8]);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            ".  0000:  00 00 00 00 00 00 00 00                          ........        \n"
        );
    }
}
