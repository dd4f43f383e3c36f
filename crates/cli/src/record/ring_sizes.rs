//! The built-in workload's default ring sizes for a user whom the kernel's locked-memory
//! limits bind: perfaux-core charges its buffers as `perf_mmap` does (perf_event_mlock_kb a
//! CPU, then RLIMIT_MEMLOCK, EPERM past both), and four threads' 4 MiB rings are more than an
//! ordinary user may have; perf shrinks its own default buffers for such a user the same way.

/// Ring sizes for `threads` rings (each a user page, a data area and an AUX area, charged as
/// perf_mmap charges them) that fit `limits`, as perf sizes its default buffers for a user
/// whom the limits bind: the sizes `chosen` left to the default (data, AUX) are halved
/// together, never below a page, until the rings fit. `None` when they fit as they are, when
/// the limits do not bind (`exempt`), or when nothing smaller fits either (the mapping's own
/// error then says what to change).
pub fn sizes_within_mlock(
    threads: u64,
    page: u64,
    defaults: (bool, bool),
    sizes: (u64, u64),
    limits: &perfaux_core::MlockLimits,
) -> Option<(u64, u64)> {
    if limits.exempt {
        return None;
    }
    let budget = limits.user_lock_limit.saturating_add(limits.lock_limit);
    let fits = |(d, a): (u64, u64)| threads.saturating_mul(1 + d / page + a / page) <= budget;
    if fits(sizes) {
        return None;
    }
    let (mut d, mut a) = sizes;
    loop {
        let shrink = |v: u64, default: bool| if default && v > page { v / 2 } else { v };
        let next = (shrink(d, defaults.0), shrink(a, defaults.1));
        if next == (d, a) {
            return None;
        }
        (d, a) = next;
        if fits((d, a)) {
            return Some((d, a));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfaux_core::MlockLimits;

    const PAGE: u64 = 4096;

    fn limits(user: u64, rlimit: u64, exempt: bool) -> MlockLimits {
        MlockLimits {
            user_lock_limit: user,
            lock_limit: rlimit,
            exempt,
        }
    }

    #[test]
    fn the_defaults_halve_together_until_the_rings_fit() {
        // 516 KiB a CPU on 2 CPUs (258 pages) and an 8 MiB RLIMIT_MEMLOCK (2048 pages).
        let l = limits(258, 2048, false);
        let four = 4 << 20;
        let got = sizes_within_mlock(3, PAGE, (true, true), (four, four), &l).unwrap();
        // 3 x (1 + 256 + 256) pages fit in 258 + 2048; 3 x (1 + 512 + 512) do not.
        assert_eq!(got, (1 << 20, 1 << 20));
        // One size given with -m stays as given.
        let got = sizes_within_mlock(3, PAGE, (true, false), (four, 64 << 10), &l).unwrap();
        assert_eq!(got, (2 << 20, 64 << 10));
    }

    #[test]
    fn nothing_changes_where_the_rings_fit_or_the_limits_do_not_bind() {
        let four = 4 << 20;
        let roomy = limits(258, u64::MAX, false);
        assert_eq!(
            sizes_within_mlock(3, PAGE, (true, true), (four, four), &roomy),
            None
        );
        let root = limits(258, 16, true);
        assert_eq!(
            sizes_within_mlock(3, PAGE, (true, true), (four, four), &root),
            None
        );
    }

    #[test]
    fn rings_that_fit_at_no_size_are_left_to_the_mappings_error() {
        let tiny = limits(2, 1, false);
        assert_eq!(
            sizes_within_mlock(3, PAGE, (true, true), (4 << 20, 4 << 20), &tiny),
            None
        );
        // Sizes the user gave are never changed.
        let l = limits(258, 2048, false);
        assert_eq!(
            sizes_within_mlock(3, PAGE, (false, false), (4 << 20, 4 << 20), &l),
            None
        );
    }
}
