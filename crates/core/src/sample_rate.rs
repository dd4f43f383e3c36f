//! `kernel.perf_event_max_sample_rate` (`sysctl_perf_event_sample_rate`): the highest
//! `sample_freq` an event may ask for, read from the running kernel at each use.
//!
//! Why read it and not keep the default: the kernel lowers this sysctl on its own when its
//! sampling interrupts take too long ("perf: interrupt took too long ... lowering
//! kernel.perf_event_max_sample_rate to N"), which happens on busy virtual machines, and an
//! administrator may set it. A user-space core with the boot default would then accept a
//! `sample_freq` that the kernel beside it refuses with EINVAL, and perf's own tools, which
//! read the sysctl, would choose rates this core does not.

/// The sysctl's default (`DEFAULT_MAX_SAMPLE_RATE` in kernel/events/core.c), used where the
/// sysctl cannot be read (no /proc, a sandbox).
pub const MAX_SAMPLE_RATE: u64 = 100_000;

/// Where the running kernel keeps the sysctl.
const SYSCTL: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

/// The running kernel's `perf_event_max_sample_rate`, or [`MAX_SAMPLE_RATE`] where it cannot
/// be read or does not parse as a positive number (the kernel keeps it at least 1).
pub fn max_sample_rate() -> u64 {
    std::fs::read_to_string(SYSCTL)
        .ok()
        .and_then(|s| parse(&s))
        .unwrap_or(MAX_SAMPLE_RATE)
}

/// The sysctl's text as a rate: one decimal number, with or without its newline.
fn parse(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sysctls_text_parses_and_nonsense_does_not() {
        assert_eq!(parse("100000\n"), Some(100_000));
        assert_eq!(parse("3250"), Some(3250));
        assert_eq!(parse("0\n"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("-5"), None);
        assert_eq!(parse("12k"), None);
    }

    #[test]
    fn the_rate_is_the_running_kernels_where_it_is_readable() {
        match std::fs::read_to_string(SYSCTL) {
            Ok(text) => assert_eq!(Some(max_sample_rate()), parse(&text)),
            Err(_) => assert_eq!(max_sample_rate(), MAX_SAMPLE_RATE),
        }
    }
}
