//! The rows of the validation table for the rules read from the running
//! kernel (Linux 6.18, docs/KERNEL-RULES.md): extended registers, local_clock against
//! use_clockid, inherit with PERF_SAMPLE_READ, branch stacks on software
//! events, perf_event_validate_size's v6.7 formula.

use super::*;

/// (rule, expected errno, case)
pub(super) fn rows() -> Vec<(&'static str, i32, RowFn)> {
    vec![
        // --- rules read from Linux 6.18 ---
        // perf_event_alloc, after sigtrap and before the PMU lookup.
        (
            "inherit + PERF_SAMPLE_READ without PERF_SAMPLE_TID -> EINVAL",
            EINVAL,
            || {
                let mut a = dummy();
                a.flags |= AttrFlags::INHERIT;
                a.sample_type = PERF_SAMPLE_READ;
                errno_of(open(&a))
            },
        ),
        (
            "inherit + PERF_SAMPLE_READ + PERF_SAMPLE_TID opens",
            0,
            || {
                let mut a = dummy();
                a.flags |= AttrFlags::INHERIT;
                a.sample_type = PERF_SAMPLE_READ | PERF_SAMPLE_TID;
                errno_of(open(&a))
            },
        ),
        (
            "order: inherit + SAMPLE_READ EINVAL before the PMU lookup's ENOENT",
            EINVAL,
            || {
                let mut a = attr(PERF_TYPE_SOFTWARE, 100);
                a.flags |= AttrFlags::INHERIT;
                a.sample_type = PERF_SAMPLE_READ;
                errno_of(open(&a))
            },
        ),
        // perf_try_init_event, after event_init.
        (
            "sample_regs_user bit 32 (XMM0) on software, no REGS_USER -> EOPNOTSUPP",
            if cfg!(target_arch = "x86_64") {
                EOPNOTSUPP
            } else {
                0
            },
            || {
                let mut a = dummy();
                a.sample_regs_user = 1 << 32;
                errno_of(open(&a))
            },
        ),
        (
            "sample_regs_intr bit 63 on task-clock -> EOPNOTSUPP",
            if cfg!(target_arch = "x86_64") {
                EOPNOTSUPP
            } else {
                0
            },
            || {
                let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
                a.sample_regs_intr = 1 << 63;
                errno_of(open(&a))
            },
        ),
        (
            "order: event_init's ENOENT before the extended-register EOPNOTSUPP",
            ENOENT,
            || {
                let mut a = attr(PERF_TYPE_SOFTWARE, 100);
                a.sample_regs_user = 1 << 40;
                errno_of(open(&a))
            },
        ),
        (
            "order: extended-register EOPNOTSUPP before a bad clock EINVAL",
            if cfg!(target_arch = "x86_64") {
                EOPNOTSUPP
            } else {
                EINVAL
            },
            || {
                let mut a = dummy();
                a.sample_regs_user = 1 << 40;
                a.flags |= AttrFlags::USE_CLOCKID;
                a.clockid = 99;
                errno_of(open(&a))
            },
        ),
        // perf_swevent_init / task_clock_event_init.
        (
            "PERF_SAMPLE_BRANCH_STACK on dummy -> EOPNOTSUPP",
            EOPNOTSUPP,
            || errno_of(open(&branch_stack(PERF_COUNT_SW_DUMMY))),
        ),
        (
            "PERF_SAMPLE_BRANCH_STACK on task-clock -> EOPNOTSUPP",
            EOPNOTSUPP,
            || errno_of(open(&branch_stack(PERF_COUNT_SW_TASK_CLOCK))),
        ),
        // The default clock is local_clock: no use_clockid clock equals it.
        (
            "use_clockid CLOCK_MONOTONIC member of a default-clock leader -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                errno_of(open_in(&monotonic(dummy()), &l))
            },
        ),
        (
            "default-clock member of a use_clockid CLOCK_MONOTONIC leader -> EINVAL",
            EINVAL,
            || {
                let l = open(&monotonic(dummy())).unwrap();
                errno_of(open_in(&dummy(), &l))
            },
        ),
        (
            "use_clockid CLOCK_MONOTONIC member of a CLOCK_MONOTONIC leader opens",
            0,
            || {
                let l = open(&monotonic(dummy())).unwrap();
                errno_of(open_in(&monotonic(dummy()), &l))
            },
        ),
        (
            "FD_OUTPUT from use_clockid CLOCK_MONOTONIC to a default clock -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                let _m = l.mmap(0, 2, Prot::READ_WRITE).unwrap();
                errno_of(perf_event_open_attr(
                    &monotonic(dummy()),
                    me(),
                    -1,
                    l.as_raw(),
                    PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP,
                ))
            },
        ),
        // perf_event_validate_size (v6.7+): read_format sizes only.
        (
            "group of read_format 0x1f dummies, no SAMPLE_READ: member 681 -> E2BIG",
            E2BIG,
            || grow_until_refused(0x1f, 0x1f, 0x1f),
        ),
        (
            "a sibling's read_format 0x1f passes 16 KiB at member 681 -> E2BIG",
            E2BIG,
            || grow_until_refused(0, 0x1f, 0),
        ),
    ]
}

/// A dummy or task-clock attr sampling the user-level branch stack.
fn branch_stack(config: u64) -> PerfEventAttr {
    let mut a = attr(PERF_TYPE_SOFTWARE, config);
    a.sample_type = PERF_SAMPLE_BRANCH_STACK;
    a.branch_sample_type = perfaux_abi::attr::PERF_SAMPLE_BRANCH_USER | (1 << 3);
    a.flags |= AttrFlags::EXCLUDE_KERNEL | AttrFlags::EXCLUDE_HV;
    a
}

/// `a` with `use_clockid` CLOCK_MONOTONIC.
fn monotonic(mut a: PerfEventAttr) -> PerfEventAttr {
    a.flags |= AttrFlags::USE_CLOCKID;
    a.clockid = libc::CLOCK_MONOTONIC;
    a
}

/// Grows a dummy group (the leader's, the first member's and the later
/// members' read_format as given) until an open fails; returns its errno
/// after checking that member 681 was the one refused (the kernel's
/// 24 + 682 * 24 > 16 KiB for 0x1f).
fn grow_until_refused(leader_rf: u64, first_rf: u64, rest_rf: u64) -> i32 {
    let mut l = dummy();
    l.read_format = leader_rf;
    let leader = open(&l).unwrap();
    let mut members = Vec::new();
    loop {
        let mut m = dummy();
        m.read_format = if members.is_empty() {
            first_rf
        } else {
            rest_rf
        };
        match open_in(&m, &leader) {
            Ok(fd) => members.push(fd),
            Err(e) => {
                assert_eq!(members.len() + 1, 681, "the member refused");
                return e.errno;
            }
        }
        assert!(members.len() <= 1000, "group grew past 1000 members");
    }
}
