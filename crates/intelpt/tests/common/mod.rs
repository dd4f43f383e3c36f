//! What the tests against libipt's expectations share.

use std::path::Path;

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

/// The `--FORMAT:*` options libipt's test.bash derives from the sideband files pttc wrote
/// for test `name`: `NAME-[SRC-]FORMAT-PRIO,K=V,....sb` gives `--FORMAT:K V` for each setting,
/// then `--FORMAT:PRIO FILE`. pttc lists its files newest first (it prepends each file it
/// opens to a list), so the file whose `@sb` directive comes last in the .ptt comes first.
#[allow(dead_code, reason = "the tests without sideband share this module too")]
pub fn sideband_options(name: &str, ptt: &str, outs: &[String], dir: &Path) -> Vec<String> {
    // Where each `@sb primary(...)`/`@sb secondary(...)` directive first names a file.
    let mut opened: Vec<String> = Vec::new();
    for l in ptt.lines() {
        let l = l.trim_start_matches(';').trim();
        let Some(d) = l.strip_prefix("@sb ") else {
            continue;
        };
        for prio in ["primary", "secondary"] {
            let Some(payload) = d
                .strip_prefix(prio)
                .and_then(|r| r.trim().strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
            else {
                continue;
            };
            let mut words = payload.split([' ', ',']).filter(|w| !w.is_empty());
            let fmt = words.next().expect("@sb directive without a format");
            let file = match words.next() {
                Some(src) => format!("{name}-{src}-{fmt}-{prio}"),
                None => format!("{name}-{fmt}-{prio}"),
            };
            if !opened.contains(&file) {
                opened.push(file);
            }
        }
    }
    let mut args = Vec::new();
    for base in opened.iter().rev() {
        let Some(file) = outs.iter().find(|o| {
            o.ends_with(".sb")
                && o.strip_prefix(base.as_str())
                    .is_some_and(|r| r.starts_with(',') || r == ".sb")
        }) else {
            continue;
        };
        let part = &file[name.len() + 1..file.len() - ".sb".len()];
        let (prefix, settings) = part.split_once(',').unwrap_or((part, ""));
        let (rest, prio) = prefix.rsplit_once('-').unwrap();
        let format = rest.rsplit('-').next().unwrap();
        for kv in settings.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            args.push(format!("--{format}:{k}"));
            args.push(v.to_owned());
        }
        args.push(format!("--{format}:{prio}"));
        args.push(dir.join(file).display().to_string());
    }
    args
}
