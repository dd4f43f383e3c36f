//! The command-line pieces the dumps share: numbers as C's `strtoull(s, 0)` reads them and
//! `FILE[:FROM[-TO]]` ranges, cpus and clocks, as libipt's tools take them.

use crate::errata::Cpu;
use crate::timing::ClockConfig;

/// The trace file and the part of it to read (`FILE[:FROM[-TO]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: String,
    pub from: u64,
    pub to: Option<u64>,
}

/// A number as C's `strtoull(s, 0)` reads it: decimal, `0x` hex or `0` octal.
pub fn parse_c_number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

impl Input {
    /// `FILE[:FROM[-TO]]`; a suffix that is not a range is part of the name.
    pub fn parse(arg: &str) -> Result<Input, String> {
        let whole = Input {
            path: arg.to_owned(),
            from: 0,
            to: None,
        };
        let Some((path, range)) = arg.rsplit_once(':') else {
            return Ok(whole);
        };
        let (from, to) = match range.split_once('-') {
            None => match parse_c_number(range) {
                Some(f) => (f, None),
                None => return Ok(whole),
            },
            Some((a, b)) => match (parse_c_number(a), parse_c_number(b)) {
                (Some(a), Some(b)) => (a, Some(b)),
                _ => return Ok(whole),
            },
        };
        if to.is_some_and(|to| to <= from) {
            return Err(format!(
                "bad range in {arg}: the end is not after the start"
            ));
        }
        Ok(Input {
            path: path.to_owned(),
            from,
            to,
        })
    }

    /// The bytes of the range, read without holding more than the range.
    pub fn load(&self) -> Result<Vec<u8>, String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&self.path)
            .map_err(|e| format!("failed to open {}: {e}", self.path))?;
        let size = f
            .metadata()
            .map_err(|e| format!("failed to determine size of {}: {e}", self.path))?
            .len();
        if self.from >= size {
            return Err(format!("bad offset {:#x} into {}", self.from, self.path));
        }
        let end = match self.to {
            Some(to) if to > size => {
                return Err(format!("bad range {to:#x} in {}", self.path));
            }
            Some(to) => to,
            None => size,
        };
        f.seek(SeekFrom::Start(self.from))
            .map_err(|e| format!("failed to load {}: {e}", self.path))?;
        let mut buf = Vec::new();
        f.take(end - self.from)
            .read_to_end(&mut buf)
            .map_err(|e| format!("failed to load {}: {e}", self.path))?;
        Ok(buf)
    }
}

pub(crate) fn number<T: TryFrom<u64>>(opt: &str, v: Option<&String>) -> Result<T, String> {
    v.and_then(|v| parse_c_number(v))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("{opt}: missing or bad argument"))
}

/// `--cpu none|F/M[/S]`: the cpu whose errata apply (`None`: none).
pub fn parse_cpu(s: &str) -> Result<Option<Cpu>, String> {
    if s == "none" {
        return Ok(None);
    }
    let bad = || "cpu must be specified as f/m[/s]".to_owned();
    let mut parts = s.split('/');
    let family = parts.next().and_then(parse_c_number).ok_or_else(bad)?;
    let model = parts.next().and_then(parse_c_number).ok_or_else(bad)?;
    let stepping = match parts.next() {
        Some(p) => parse_c_number(p).ok_or_else(bad)?,
        None => 0,
    };
    if parts.next().is_some() || family > 0xffff || model > 0xff || stepping > 0xff {
        return Err(bad());
    }
    Ok(Some(Cpu {
        family: family as u16,
        model: model as u8,
        stepping: stepping as u8,
    }))
}

/// The clock options both tools take (`--mtc-freq`, `--nom-freq`, `--cpuid-0x15.eax`,
/// `--cpuid-0x15.ebx`): whether `opt` was one, its value taken from `rest`.
pub fn clock_option<'a>(
    opt: &str,
    rest: &mut impl Iterator<Item = &'a String>,
    clock: &mut ClockConfig,
) -> Result<bool, String> {
    match opt {
        "--mtc-freq" => {
            clock.mtc_freq = number(opt, rest.next())?;
            // IA32_RTIT_CTL.MTCFreq is four bits.
            if clock.mtc_freq > 15 {
                return Err("--mtc-freq: at most 15 (IA32_RTIT_CTL.MTCFreq)".into());
            }
        }
        "--nom-freq" => clock.nom_freq = number(opt, rest.next())?,
        "--cpuid-0x15.eax" => clock.cpuid_0x15_eax = number(opt, rest.next())?,
        "--cpuid-0x15.ebx" => clock.cpuid_0x15_ebx = number(opt, rest.next())?,
        _ => return Ok(false),
    }
    Ok(true)
}
