//! What the tests against libipt's expectations share.

/// `diff -b`: runs of blanks compare equal, blanks at a line's end do not count.
pub fn diff_b(s: &str) -> Vec<String> {
    s.lines()
        .map(|l| {
            let mut out = String::new();
            let mut blank = false;
            for c in l.chars() {
                if c == ' ' || c == '\t' {
                    blank = true;
                } else {
                    if blank {
                        out.push(' ');
                    }
                    blank = false;
                    out.push(c);
                }
            }
            out
        })
        .collect()
}
