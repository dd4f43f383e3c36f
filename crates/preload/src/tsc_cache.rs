//! The TSC rate kept from one recording to the next.
//!
//! A traced program's clock needs the TSC's rate against CLOCK_MONOTONIC, which a kernel
//! does not always give to user space (no `cap_user_time` in the perf user page, no frequency
//! leaf in CPUID), so `perfaux record` measures it: two tight clock pairs 10 ms apart
//! (perfaux-swtrace `clock::tsc_calibration`). The program's first traced call waits for it,
//! which made every recording of a short program 10 ms long at the least.
//!
//! The first pair of such a measurement stays valid for as long as the machine runs without a
//! suspend (the TSC is invariant, the clock's premise; CLOCK_MONOTONIC stops in a suspend, the
//! TSC may not), so it is kept in the user's cache directory with the rate, the boot and the
//! time the machine had spent suspended (CLOCK_BOOTTIME less CLOCK_MONOTONIC). The next
//! recording of the same boot, with no suspend since, reads one tight pair now and measures
//! the rate from the kept pair: over minutes or hours instead of 10 ms, at no wait. What is
//! left in that rate is how CLOCK_MONOTONIC's own rate was slewed (NTP, a few ppm) on average
//! since the kept pair rather than now, at most [`AGREE`]: the rate from the kept pair and the
//! kept measurement must agree that closely (a migrated VM or a changed TSC would not).
//! The file must be a regular file of the user's own, in a directory only the user writes,
//! and parse whole; anything else measures afresh (and keeps the new pair if it can).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use perfaux_swtrace::clock::{self, ClockPair, TscCalibration, TscRate};

/// How far the rate measured from the kept pair may be from the kept rate (relative): the kept
/// rate was measured over 10 ms or more, between pairs bracketed within about 1 us.
const AGREE: f64 = 1e-4;
/// The first word of the file, which says its form.
const MAGIC: &str = "perfaux-tsc-rate-2";
/// A kept file is at most this long (it is one short line).
const MAX_LEN: u64 = 512;
/// How much more suspended time than the kept pair's is taken for a suspend (two clock reads
/// apart; a suspend lasts far longer).
const SUSPEND_NS: u64 = 1_000_000;

/// The calibration from the kept pair, if there is a valid one: a file read and a clock pair,
/// no wait (a recording without one measures, [`measured`], on a thread of its own).
pub fn kept() -> Option<TscCalibration> {
    let (p, b, s) = (cache_path()?, boot_id()?, suspended_ns()?);
    load(&p, &b, s, clock::read_pair())
}

/// The calibration measured now (10 ms), kept for the next recordings.
pub fn measured() -> TscCalibration {
    let c = clock::tsc_calibration();
    if let (Some(p), Some(b), Some(s)) = (cache_path(), boot_id(), suspended_ns()) {
        // Best effort: a recording does not fail for a cache it could not write.
        let _ = save(&p, &b, s, &c);
    }
    c
}

/// `$XDG_CACHE_HOME/perfaux/tsc-rate`, or `$HOME/.cache/perfaux/tsc-rate`, under a directory
/// that exists (a HOME that does not is not made, even where root could).
fn cache_path() -> Option<PathBuf> {
    Some(cache_dir()?.join("tsc-rate"))
}

/// `$XDG_CACHE_HOME/perfaux`, or `$HOME/.cache/perfaux`, under a directory that exists (made
/// by whoever writes there first, mode 0700).
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let existing = |d: &std::ffi::OsStr| Path::new(d).is_absolute() && Path::new(d).is_dir();
    let dir = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| existing(d))
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| existing(d))
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(dir.join("perfaux"))
}

/// This boot's id (a kept pair is of one boot's clocks).
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_owned())
}

/// Time the machine has spent suspended: CLOCK_BOOTTIME less CLOCK_MONOTONIC.
fn suspended_ns() -> Option<u64> {
    let ns = |id| {
        let t = rustix::time::clock_gettime(id);
        u64::try_from(t.tv_sec)
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(u64::try_from(t.tv_nsec).ok()?)
    };
    let mono = ns(rustix::time::ClockId::Monotonic)?;
    let boot = ns(rustix::time::ClockId::Boottime)?;
    Some(boot.saturating_sub(mono))
}

/// Whether `dir` is this user's alone (not a place another user could put files in).
pub(crate) fn own_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        // SAFETY: geteuid has no preconditions.
        m.is_dir() && m.uid() == unsafe { libc::geteuid() } && m.mode() & 0o022 == 0
    })
}

/// The kept calibration at `path`, carried to `now` (a pair read now): `None` unless the file
/// is a regular file of this user's in a directory of this user's alone, of boot `boot` with
/// the `suspended` ns of suspend it was kept with, parses whole, and [`carry`] takes it.
fn load(path: &Path, boot: &str, suspended: u64, now: ClockPair) -> Option<TscCalibration> {
    if !own_dir(path.parent()?) {
        return None;
    }
    // Not following a link, not waiting on a FIFO put there.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } || !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(MAX_LEN).read_to_string(&mut text).ok()?;
    let (kept, kept_suspended) = parse(&text, boot)?;
    if suspended.abs_diff(kept_suspended) > SUSPEND_NS {
        return None;
    }
    carry(kept, now)
}

/// The calibration in `text` and the suspended time it was kept with, if it is of boot
/// `boot`.
fn parse(text: &str, boot: &str) -> Option<(TscCalibration, u64)> {
    let mut w = text.split_ascii_whitespace();
    if w.next()? != MAGIC || w.next()? != boot {
        return None;
    }
    let mut n = || w.next()?.parse::<u64>().ok();
    let (suspended, base_ticks, base_ns) = (n()?, n()?, n()?);
    let (span, mult, shift) = (n()?, n()?, n()?);
    let c = TscCalibration {
        base_ticks,
        base_ns,
        span,
        rate: TscRate {
            mult: u32::try_from(mult).ok()?,
            shift: u8::try_from(shift).ok().filter(|&s| s <= 32)?,
        },
    };
    (w.next().is_none() && c.span > 0 && c.rate.mult > 0).then_some((c, suspended))
}

/// `kept`, its rate measured again from its pair to `now` if that agrees with the kept rate
/// (the longer baseline is the better rate); the kept rate as it is while `now` is less than
/// twice the kept baseline past the pair (as swtrace's own refinement waits). `None` for a
/// loose `now` (a thread pre-empted between its reads, on a loaded machine), whose rate could
/// be off by more than the check allows.
fn carry(kept: TscCalibration, now: ClockPair) -> Option<TscCalibration> {
    if now.bracket > clock::TIGHT_TICKS {
        return None;
    }
    let dticks = now.ticks.checked_sub(kept.base_ticks).filter(|&d| d > 0)?;
    let dns = now.ns.checked_sub(kept.base_ns).filter(|&d| d > 0)?;
    let kept_rate = f64::from(kept.rate.mult) / 2f64.powi(i32::from(kept.rate.shift));
    let measured = dns as f64 / dticks as f64;
    let agrees = (measured - kept_rate).abs() <= AGREE * kept_rate;
    if !agrees {
        return None;
    }
    if dns < clock::CALIBRATION_NS || dticks < kept.span.saturating_mul(2) {
        return Some(kept);
    }
    Some(TscCalibration {
        span: dticks,
        rate: clock::rate_from(dticks, dns),
        ..kept
    })
}

/// Keeps `c` (of boot `boot`, `suspended` ns of suspend then) at `path`: written to a new file
/// beside it, then renamed over it, in a directory of this user's alone.
fn save(path: &Path, boot: &str, suspended: u64, c: &TscCalibration) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if !own_dir(dir) {
        return Err(std::io::Error::other(
            "not a directory of this user's alone",
        ));
    }
    let line = format!(
        "{MAGIC} {boot} {suspended} {} {} {} {} {}\n",
        c.base_ticks, c.base_ns, c.span, c.rate.mult, c.rate.shift
    );
    let tmp = dir.join(format!(
        ".tsc-rate.{}.{}",
        std::process::id(),
        clock::monotonic_ns()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

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

    /// A tight pair `ns` after the kept one on the same 3 GHz clock, `ppm` off.
    fn later(ns: u64, ppm: f64) -> ClockPair {
        let ticks = (ns as f64 * 3.0 * (1.0 + ppm * 1e-6)) as u64;
        ClockPair {
            ticks: kept().base_ticks + ticks,
            ns: kept().base_ns + ns,
            bracket: 100,
        }
    }

    const MINUTE: u64 = 60_000_000_000;

    /// What is kept is read back for the same boot with no suspend since, with the rate
    /// measured over the longer baseline from its pair; not for another boot, after a suspend,
    /// or from a directory others may write in.
    #[test]
    fn a_kept_pair_gives_the_rate_over_the_time_since() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perfaux").join("tsc-rate");
        save(&path, BOOT, 7_000, &kept()).unwrap();
        let parent = path.parent().unwrap();
        let mode = std::fs::metadata(parent).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the directory is the user's alone");
        let left: Vec<_> = std::fs::read_dir(parent).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
        let c = load(&path, BOOT, 7_500, later(MINUTE, 2.0)).expect("a minute later");
        assert_eq!(
            (c.base_ticks, c.base_ns),
            (kept().base_ticks, kept().base_ns)
        );
        assert_eq!(c.span, later(MINUTE, 2.0).ticks - kept().base_ticks);
        assert_eq!(c.rate, clock::rate_from(c.span, MINUTE));
        assert_ne!(c.rate, kept().rate, "measured anew over the minute");
        assert_eq!(load(&path, "another-boot", 7_000, later(MINUTE, 0.0)), None);
        // A suspend since (CLOCK_MONOTONIC stopped, the TSC maybe not).
        assert_eq!(load(&path, BOOT, 2_000_000_000, later(MINUTE, 0.0)), None);
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(load(&path, BOOT, 7_000, later(MINUTE, 0.0)), None);
        assert!(save(&path, BOOT, 7_000, &kept()).is_err());
    }

    /// A kept rate that the clocks now contradict (a migrated VM), a loose pair now, a pair
    /// not in the past; a pair too recent to improve on the kept rate keeps it.
    #[test]
    fn a_kept_pair_the_clocks_contradict_is_not_used() {
        assert_eq!(carry(kept(), later(MINUTE, 500.0)), None, "500 ppm off");
        assert!(carry(kept(), later(MINUTE, 50.0)).is_some(), "50 ppm");
        let mut loose = later(MINUTE, 0.0);
        loose.bracket = clock::TIGHT_TICKS + 1;
        assert_eq!(carry(kept(), loose), None, "a loose pair now");
        let mut before = later(0, 0.0);
        before.ticks -= 1;
        assert_eq!(carry(kept(), before), None, "in the future");
        assert_eq!(
            carry(kept(), later(15_000_000, 0.0)),
            Some(kept()),
            "15 ms later: the kept 10 ms rate stays"
        );
    }

    /// Anything but one whole line of the form, for this boot, is not used; nor what is not a
    /// regular file.
    #[test]
    fn a_file_that_does_not_parse_whole_is_not_used() {
        let good = format!("{MAGIC} {BOOT} 0 1000 500 3000 1431655765 32\n");
        assert!(parse(&good, BOOT).is_some(), "{good}");
        for bad in [
            String::new(),
            format!("{MAGIC} {BOOT} 0 1000 500 3000 1431655765"),
            format!("{MAGIC} {BOOT} 0 1000 500 3000 1431655765 33"),
            format!("{MAGIC} {BOOT} 0 1000 500 0 1431655765 32"),
            format!("{MAGIC} {BOOT} 0 1000 500 3000 0 32"),
            format!("{MAGIC} {BOOT} 0 1000 500 3000 4294967296 32"),
            format!("{MAGIC} {BOOT} 0 1000 500 3000 1431655765 32 extra"),
            format!("{MAGIC} {BOOT} 0 -1000 500 3000 1431655765 32"),
            format!("perfaux-tsc-rate-1 {BOOT} 1000 500 3000 1431655765 32"),
        ] {
            assert_eq!(parse(&bad, BOOT), None, "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // Read no further than MAX_LEN: a line past it is not seen.
        let path = dir.path().join("tsc-rate");
        let long = format!("{}{good}", " ".repeat(MAX_LEN as usize));
        std::fs::write(&path, long).unwrap();
        assert!(load(&path, BOOT, 0, later(MINUTE, 0.0)).is_none());
        save(&path, BOOT, 0, &kept()).unwrap();
        assert!(load(&path, BOOT, 0, later(MINUTE, 0.0)).is_some());
        // A FIFO or a link where the file was: refused, without waiting for a writer.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(load(&fifo, BOOT, 0, later(MINUTE, 0.0)).is_none());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(load(&link, BOOT, 0, later(MINUTE, 0.0)).is_none());
    }
}
