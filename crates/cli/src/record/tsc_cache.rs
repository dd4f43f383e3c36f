//! The TSC rate kept from one recording to the next.
//!
//! A traced program's clock needs the TSC's rate against CLOCK_MONOTONIC, which this VM's
//! kernel does not give to user space (no `cap_user_time` in the perf user page, no frequency
//! leaf in CPUID), so `perfaux record` measures it: two tight clock pairs 10 ms apart
//! (perfaux-swtrace `clock::tsc_calibration`). The program's first traced call waits for it,
//! which made every recording of a short program 10 ms long at the least.
//!
//! The first pair of such a measurement stays valid for as long as the machine runs (the TSC
//! is invariant, the clock's premise), so it is kept in the user's cache directory with the
//! rate and the boot it was taken in. The next recording of the same boot reads one pair now
//! and measures the rate from the kept pair: over minutes or hours instead of 10 ms, a better
//! rate at no wait. A kept pair is used only if the rate it gives agrees with the kept rate
//! within [`AGREE`] (a suspend, a migrated VM or a changed TSC would not), the file is the
//! user's own and parses whole; anything else measures afresh and keeps the new pair.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use perfaux_swtrace::clock::{self, ClockPair, TscCalibration, TscRate};

/// How far the rate measured from the kept pair may be from the kept rate (relative): the kept
/// rate was measured over 10 ms or more, between pairs bracketed within about 1 us.
const AGREE: f64 = 1e-4;
/// The first word of the file, which says its form.
const MAGIC: &str = "perfaux-tsc-rate-1";
/// A kept file is at most this long (it is one short line).
const MAX_LEN: u64 = 512;

/// The calibration for this recording: from the kept pair if there is a valid one, else
/// measured (10 ms) and kept for the next recordings.
pub fn calibration() -> TscCalibration {
    let path = cache_path();
    let boot = boot_id();
    if let (Some(p), Some(b)) = (&path, &boot)
        && let Some(c) = load(p, b, clock::read_pair())
    {
        let _ = clock::adopt_tsc_calibration(c);
        return c;
    }
    let c = clock::tsc_calibration();
    if let (Some(p), Some(b)) = (&path, &boot) {
        // Best effort: a recording does not fail for a cache it could not write.
        let _ = save(p, b, &c);
    }
    c
}

/// `$XDG_CACHE_HOME/perfaux/tsc-rate`, or `$HOME/.cache/perfaux/tsc-rate`.
fn cache_path() -> Option<PathBuf> {
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| Path::new(d).is_absolute())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(dir.join("perfaux").join("tsc-rate"))
}

/// This boot's id (a kept pair is of one boot's clocks).
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_owned())
}

/// The kept calibration at `path`, carried to `now` (a pair read now): `None` unless the file
/// is this user's, of boot `boot`, parses whole, its pair lies before `now` and the rate from
/// it to `now` agrees with the kept one.
fn load(path: &Path, boot: &str, now: ClockPair) -> Option<TscCalibration> {
    let f = File::open(path).ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } || !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(MAX_LEN).read_to_string(&mut text).ok()?;
    let kept = parse(&text, boot)?;
    carry(kept, now)
}

/// The calibration in `text` if it is of boot `boot`.
fn parse(text: &str, boot: &str) -> Option<TscCalibration> {
    let mut w = text.split_ascii_whitespace();
    if w.next()? != MAGIC || w.next()? != boot {
        return None;
    }
    let mut n = || w.next()?.parse::<u64>().ok();
    let (base_ticks, base_ns, span, mult, shift) = (n()?, n()?, n()?, n()?, n()?);
    let c = TscCalibration {
        base_ticks,
        base_ns,
        span,
        rate: TscRate {
            mult: u32::try_from(mult).ok()?,
            shift: u8::try_from(shift).ok().filter(|&s| s <= 32)?,
        },
    };
    (w.next().is_none() && c.span > 0 && c.rate.mult > 0).then_some(c)
}

/// `kept`, its rate measured again from its pair to `now` if that agrees with the kept rate
/// (the longer baseline is the better rate); the kept rate as it is while `now` is less than
/// a calibration's baseline past the pair.
fn carry(kept: TscCalibration, now: ClockPair) -> Option<TscCalibration> {
    let dticks = now.ticks.checked_sub(kept.base_ticks).filter(|&d| d > 0)?;
    let dns = now.ns.checked_sub(kept.base_ns).filter(|&d| d > 0)?;
    let kept_rate = f64::from(kept.rate.mult) / 2f64.powi(i32::from(kept.rate.shift));
    let measured = dns as f64 / dticks as f64;
    let agrees = (measured - kept_rate).abs() <= AGREE * kept_rate;
    if !agrees {
        return None;
    }
    if dns < clock::CALIBRATION_NS || dticks <= kept.span {
        return Some(kept);
    }
    Some(TscCalibration {
        span: dticks,
        rate: clock::rate_from(dticks, dns),
        ..kept
    })
}

/// Keeps `c` (of boot `boot`) at `path`: written beside it, then renamed over it.
fn save(path: &Path, boot: &str, c: &TscCalibration) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(".tsc-rate.{}", std::process::id()));
    let line = format!(
        "{MAGIC} {boot} {} {} {} {} {}\n",
        c.base_ticks, c.base_ns, c.span, c.rate.mult, c.rate.shift
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(line.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "0b7e3f2a-6d1c-4c55-9a57-2f1d0c8e4b11";

    /// A 3 GHz TSC measured over 10 ms, its first pair at (1e9 ticks, 5e8 ns).
    fn kept() -> TscCalibration {
        TscCalibration {
            base_ticks: 1_000_000_000,
            base_ns: 500_000_000,
            span: 30_000_000,
            rate: clock::rate_from(30_000_000, 10_000_000),
        }
    }

    /// A pair `ns` after the kept one on the same 3 GHz clock, `ppm` off.
    fn later(ns: u64, ppm: f64) -> ClockPair {
        let ticks = (ns as f64 * 3.0 * (1.0 + ppm * 1e-6)) as u64;
        ClockPair {
            ticks: kept().base_ticks + ticks,
            ns: kept().base_ns + ns,
            bracket: 100,
        }
    }

    /// What is kept is read back for the same boot, with the rate measured over the longer
    /// baseline from its pair; not for another boot.
    #[test]
    fn a_kept_pair_gives_the_rate_over_the_time_since() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perfaux").join("tsc-rate");
        save(&path, BOOT, &kept()).unwrap();
        let mode = std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the directory is the user's alone");
        let c = load(&path, BOOT, later(60_000_000_000, 2.0)).expect("a minute later");
        assert_eq!(
            (c.base_ticks, c.base_ns),
            (kept().base_ticks, kept().base_ns)
        );
        assert_eq!(c.span, later(60_000_000_000, 2.0).ticks - kept().base_ticks);
        assert_eq!(c.rate, clock::rate_from(c.span, 60_000_000_000));
        assert_ne!(c.rate, kept().rate, "measured anew over the minute");
        assert_eq!(
            load(&path, "another-boot", later(60_000_000_000, 0.0)),
            None
        );
    }

    /// A kept rate that the clocks now contradict (a suspend, a migrated VM), a pair not in
    /// the past, or a pair too recent to improve on the kept rate.
    #[test]
    fn a_kept_pair_the_clocks_contradict_is_not_used() {
        assert_eq!(
            carry(kept(), later(60_000_000_000, 500.0)),
            None,
            "500 ppm off"
        );
        assert!(
            carry(kept(), later(60_000_000_000, 50.0)).is_some(),
            "50 ppm"
        );
        let mut before = later(0, 0.0);
        before.ticks -= 1;
        assert_eq!(carry(kept(), before), None, "in the future");
        assert_eq!(
            carry(kept(), later(5_000_000, 0.0)),
            Some(kept()),
            "5 ms later: the kept 10 ms rate stays"
        );
    }

    /// Anything but one whole line of the form, for this boot, is not used.
    #[test]
    fn a_file_that_does_not_parse_whole_is_not_used() {
        let good = format!("{MAGIC} {BOOT} 1000 500 3000 1431655765 32\n");
        assert!(parse(&good, BOOT).is_some(), "{good}");
        for bad in [
            String::new(),
            format!("{MAGIC} {BOOT} 1000 500 3000 1431655765"),
            format!("{MAGIC} {BOOT} 1000 500 3000 1431655765 33"),
            format!("{MAGIC} {BOOT} 1000 500 0 1431655765 32"),
            format!("{MAGIC} {BOOT} 1000 500 3000 0 32"),
            format!("{MAGIC} {BOOT} 1000 500 3000 4294967296 32"),
            format!("{MAGIC} {BOOT} 1000 500 3000 1431655765 32 extra"),
            format!("{MAGIC} {BOOT} -1000 500 3000 1431655765 32"),
            format!("perfaux-tsc-rate-0 {BOOT} 1000 500 3000 1431655765 32"),
        ] {
            assert_eq!(parse(&bad, BOOT), None, "{bad:?}");
        }
        // Read no further than MAX_LEN: a line past it is not seen.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tsc-rate");
        let long = format!("{}{good}", " ".repeat(MAX_LEN as usize));
        std::fs::write(&path, long).unwrap();
        assert!(load(&path, BOOT, later(60_000_000_000, 0.0)).is_none());
    }
}
