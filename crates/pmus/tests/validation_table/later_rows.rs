//! The rows of the validation table after the group and AUX-event rules:
//! PERF_FLAG_FD_SAMPLE, the trace PMU, mmap, ioctls, uevents, and which
//! errno wins when several rules fail.

use super::*;

/// (rule, expected errno, case)
pub(super) fn rows() -> Vec<(&'static str, i32, RowFn)> {
    vec![
        // --- PERF_FLAG_FD_SAMPLE (seed 000, can_sample_for) ---
        (
            "FD_SAMPLE: sampler has no AUX area -> EINVAL",
            EINVAL,
            || {
                let s = open(&dummy()).unwrap();
                let mut a = sampling(UEVENT_TYPE, 1);
                a.sample_type = PERF_SAMPLE_AUX;
                a.aux_sample_size = 64;
                errno_of(perf_event_open_attr(
                    &a,
                    me(),
                    -1,
                    s.as_raw(),
                    PERF_FLAG_FD_SAMPLE_EXT | PERF_FLAG_FD_NO_GROUP,
                ))
            },
        ),
        (
            "FD_SAMPLE: sampler on another cpu -> EINVAL",
            EINVAL,
            || {
                let (s, _m) = trace_leader(false);
                let mut a = sampling(UEVENT_TYPE, 1);
                a.sample_type = PERF_SAMPLE_AUX;
                a.aux_sample_size = 64;
                errno_of(perf_event_open_attr(
                    &a,
                    me(),
                    0,
                    s.as_raw(),
                    PERF_FLAG_FD_SAMPLE_EXT | PERF_FLAG_FD_NO_GROUP,
                ))
            },
        ),
        (
            "FD_SAMPLE without FD_NO_GROUP joins the group: a pinned member -> EINVAL",
            EINVAL,
            || fd_sample_member(AttrFlags::PINNED),
        ),
        (
            "FD_SAMPLE without FD_NO_GROUP: inherit differs from the leader's -> EINVAL",
            EINVAL,
            || fd_sample_member(AttrFlags::INHERIT),
        ),
        // --- the trace PMU ---
        ("swtrace needs a thread target -> EINVAL", EINVAL, || {
            errno_of(perf_event_open_attr(
                &attr(SWTRACE_TYPE, 0),
                Target::AnyThread,
                0,
                -1,
                0,
            ))
        }),
        (
            "swtrace: config bit other than track-paused and timing -> EINVAL",
            EINVAL,
            || errno_of(open(&attr(SWTRACE_TYPE, 1 << 3))),
        ),
        (
            "swtrace: timing mode 3 (config bits 1-2) -> EINVAL",
            EINVAL,
            || errno_of(open(&attr(SWTRACE_TYPE, 3 << 1))),
        ),
        (
            "swtrace: periodic timing with 0 packets per timestamp -> EINVAL",
            EINVAL,
            || errno_of(open(&attr(SWTRACE_TYPE, 2 << 1))),
        ),
        (
            "swtrace: packets per timestamp without periodic timing -> EINVAL",
            EINVAL,
            || errno_of(open(&attr(SWTRACE_TYPE, 1 << 1 | 16 << 32))),
        ),
        (
            "swtrace: second trace event of a thread -> EBUSY",
            EBUSY,
            || {
                let _a = open(&attr(SWTRACE_TYPE, 0)).unwrap();
                errno_of(open(&attr(SWTRACE_TYPE, 0)))
            },
        ),
        // exclusive_event_installable is the syscall's last check.
        (
            "swtrace: second trace event with aux_pause and aux_resume: EINVAL before EBUSY",
            EINVAL,
            || {
                let _a = open(&attr(SWTRACE_TYPE, 0)).unwrap();
                let mut b = attr(SWTRACE_TYPE, 0);
                b.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
                errno_of(open(&b))
            },
        ),
        (
            "swtrace: second trace event with an unknown clockid: EINVAL before EBUSY",
            EINVAL,
            || {
                let _a = open(&attr(SWTRACE_TYPE, 0)).unwrap();
                let mut b = attr(SWTRACE_TYPE, 0);
                b.flags |= AttrFlags::USE_CLOCKID;
                b.clockid = 1234;
                errno_of(open(&b))
            },
        ),
        (
            "swtrace: second trace event with FD_OUTPUT to an unmapped event: set_output's EINVAL before EBUSY",
            EINVAL,
            || {
                let _a = open(&attr(SWTRACE_TYPE, 0)).unwrap();
                let unmapped = open(&dummy()).unwrap();
                errno_of(perf_event_open_attr(
                    &attr(SWTRACE_TYPE, 0),
                    me(),
                    -1,
                    unmapped.as_raw(),
                    PERF_FLAG_FD_OUTPUT | PERF_FLAG_FD_NO_GROUP,
                ))
            },
        ),
        (
            "swtrace: a refused second event leaves the first one's claim -> EBUSY again",
            EBUSY,
            || {
                let _a = open(&attr(SWTRACE_TYPE, 0)).unwrap();
                let mut b = attr(SWTRACE_TYPE, 0);
                b.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
                assert_eq!(errno_of(open(&b)), EINVAL);
                assert_eq!(errno_of(open(&attr(SWTRACE_TYPE, 0))), EBUSY);
                drop(_a);
                let c = open(&attr(SWTRACE_TYPE, 0));
                assert!(c.is_ok(), "the claim went with the first event");
                drop(c);
                errno_of(open(&attr(SWTRACE_TYPE, 0)).and_then(|_x| open(&attr(SWTRACE_TYPE, 0))))
            },
        ),
        // --- mmap (perf_mmap's rules) ---
        ("mmap not MAP_SHARED -> EINVAL", EINVAL, || {
            let e = open(&dummy()).unwrap();
            errno_of(e.mmap(
                0,
                2,
                Prot {
                    write: true,
                    shared: false,
                },
            ))
        }),
        ("data mmap of 1 + 3 pages -> EINVAL", EINVAL, || {
            let e = open(&dummy()).unwrap();
            errno_of(e.mmap(0, 4, Prot::READ_WRITE))
        }),
        (
            "mmap of a per-task inherited event -> EINVAL",
            EINVAL,
            || {
                let mut a = dummy();
                a.flags |= AttrFlags::INHERIT;
                let e = open(&a).unwrap();
                errno_of(e.mmap(0, 2, Prot::READ_WRITE))
            },
        ),
        (
            "second data mmap with another size -> EINVAL",
            EINVAL,
            || {
                let e = open(&dummy()).unwrap();
                let _m = e.mmap(0, 2, Prot::READ_WRITE).unwrap();
                errno_of(e.mmap(0, 3, Prot::READ_WRITE))
            },
        ),
        ("AUX mmap before the data area -> EINVAL", EINVAL, || {
            let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
            errno_of(e.mmap(2, 1, Prot::READ_WRITE))
        }),
        (
            "AUX: aux_offset inside the data area -> EINVAL",
            EINVAL,
            || {
                let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
                let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
                m.set_aux_area(page_size() as u64, page_size() as u64)
                    .unwrap();
                errno_of(e.mmap(1, 1, Prot::READ_WRITE))
            },
        ),
        (
            "AUX: pgoff differs from aux_offset -> EINVAL",
            EINVAL,
            || {
                let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
                let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
                m.set_aux_area(3 * page_size() as u64, page_size() as u64)
                    .unwrap();
                errno_of(e.mmap(4, 1, Prot::READ_WRITE))
            },
        ),
        (
            "AUX: length differs from aux_size -> EINVAL",
            EINVAL,
            || {
                let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
                let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
                m.set_aux_area(3 * page_size() as u64, 2 * page_size() as u64)
                    .unwrap();
                errno_of(e.mmap(3, 1, Prot::READ_WRITE))
            },
        ),
        ("AUX: 3 pages (not 2^n) -> EINVAL", EINVAL, || {
            let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
            let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
            m.set_aux_area(3 * page_size() as u64, 3 * page_size() as u64)
                .unwrap();
            errno_of(e.mmap(3, 3, Prot::READ_WRITE))
        }),
        (
            "second AUX mmap with another offset/size -> EINVAL",
            EINVAL,
            || {
                let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
                let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
                m.set_aux_area(3 * page_size() as u64, page_size() as u64)
                    .unwrap();
                let _a = e.mmap(3, 1, Prot::READ_WRITE).unwrap();
                m.set_aux_area(3 * page_size() as u64, 2 * page_size() as u64)
                    .unwrap();
                errno_of(e.mmap(3, 2, Prot::READ_WRITE))
            },
        ),
        ("AUX mmap of 0 pages -> EINVAL", EINVAL, || {
            let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
            let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
            m.set_aux_area(3 * page_size() as u64, 0).unwrap();
            errno_of(e.mmap(3, 0, Prot::READ_WRITE))
        }),
        // The AUX page array over one MAX_PAGE_ORDER allocation (ENOMEM)
        // is in tests/mlock.rs: the locked-memory check comes first, so
        // the errno depends on the caller's privileges.
        ("AUX mmap whose setup_aux fails -> ENOMEM", ENOMEM, || {
            let e = open(&attr(test_pmus().1, 0)).unwrap();
            let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
            m.set_aux_area(3 * page_size() as u64, page_size() as u64)
                .unwrap();
            errno_of(e.mmap(3, 1, Prot::READ_WRITE))
        }),
        (
            "AUX mmap on a PMU without setup_aux -> EOPNOTSUPP",
            EOPNOTSUPP,
            || {
                let e = open(&dummy()).unwrap();
                let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
                m.set_aux_area(3 * page_size() as u64, page_size() as u64)
                    .unwrap();
                errno_of(e.mmap(3, 1, Prot::READ_WRITE))
            },
        ),
        (
            "aux_offset stored through a read-only user page -> EACCES",
            EACCES,
            || {
                let e = open(&dummy()).unwrap();
                let m = e.mmap(0, 3, Prot::READ_ONLY).unwrap();
                errno_of(m.set_aux_area(3 * page_size() as u64, page_size() as u64))
            },
        ),
        // --- ioctls ---
        (
            "SET_OUTPUT while the event is mapped -> EINVAL",
            EINVAL,
            || {
                let a = open(&dummy()).unwrap();
                let b = open(&dummy()).unwrap();
                let _ma = a.mmap(0, 2, Prot::READ_WRITE).unwrap();
                let _mb = b.mmap(0, 2, Prot::READ_WRITE).unwrap();
                errno_of(a.set_output(b.as_raw()))
            },
        ),
        ("SET_OUTPUT into itself -> EINVAL", EINVAL, || {
            let a = open(&dummy()).unwrap();
            errno_of(a.set_output(a.as_raw()))
        }),
        ("SET_OUTPUT across cpus -> EINVAL", EINVAL, || {
            let a = open(&dummy()).unwrap();
            let b = perf_event_open_attr(&dummy(), me(), 0, -1, 0).unwrap();
            let _mb = b.mmap(0, 2, Prot::READ_WRITE).unwrap();
            errno_of(a.set_output(b.as_raw()))
        }),
        ("SET_OUTPUT to a non-event fd -> EBADF", EBADF, || {
            let a = open(&dummy()).unwrap();
            errno_of(a.set_output(1))
        }),
        (
            "SET_OUTPUT, AUX events of different PMUs -> EINVAL",
            EINVAL,
            || {
                let (l, _m) = trace_leader(false);
                let b = perf_event_open_attr(&attr(UEVENT_AUX_TYPE, 0), me(), -1, -1, 0).unwrap();
                errno_of(b.set_output(l.as_raw()))
            },
        ),
        ("REFRESH on a non-sampling event -> EINVAL", EINVAL, || {
            errno_of(open(&dummy()).unwrap().refresh(1))
        }),
        ("PERIOD on a non-sampling event -> EINVAL", EINVAL, || {
            errno_of(open(&dummy()).unwrap().period(10))
        }),
        ("PERIOD 0 -> EINVAL", EINVAL, || {
            errno_of(open(&sampling(UEVENT_TYPE, 1)).unwrap().period(0))
        }),
        ("PERIOD with bit 63 -> EINVAL", EINVAL, || {
            errno_of(open(&sampling(UEVENT_TYPE, 1)).unwrap().period(1 << 63))
        }),
        ("PAUSE_OUTPUT without a buffer -> EINVAL", EINVAL, || {
            errno_of(open(&dummy()).unwrap().pause_output(true))
        }),
        (
            "PAUSE_OUTPUT on a buffer of the user page alone -> EINVAL",
            EINVAL,
            || {
                let e = open(&dummy()).unwrap();
                let _m = e.mmap(0, 1, Prot::READ_WRITE).unwrap();
                errno_of(e.pause_output(true))
            },
        ),
        ("close of a closed fd -> EBADF", EBADF, || {
            let e = open(&dummy()).unwrap();
            let fd = e.as_raw();
            drop(e);
            errno_of(perfaux_core::close(fd))
        }),
        // --- uevents (seed 002) ---
        ("uevent flags != 0 -> EINVAL", EINVAL, || {
            errno_of(perf_uevent(1, b"x", 1))
        }),
        ("uevent above 4096 bytes -> E2BIG", E2BIG, || {
            errno_of(perf_uevent(1, &[0; 4097], 0))
        }),
        (
            "uevent: flags checked before size -> EINVAL",
            EINVAL,
            || errno_of(perf_uevent(1, &[0; 4097], 1)),
        ),
        ("C uevent: null data with a size -> EFAULT", EFAULT, || {
            c_uevent(1, 8, true, 0)
        }),
        ("C uevent: size above 4096 -> E2BIG", E2BIG, || {
            c_uevent(1, 5000, true, 0)
        }),
        ("C uevent: flags -> EINVAL", EINVAL, || {
            c_uevent(1, 8, false, 3)
        }),
        // --- which errno wins when several rules fail (kernel check order) ---
        ("order: unknown flag before a bad attr size", EINVAL, || {
            let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::NATIVE);
            b[4..8].copy_from_slice(&60u32.to_ne_bytes());
            errno_of(perf_event_open(&mut b, me(), -1, -1, 1 << 7))
        }),
        ("order: bad attr size before a bad group_fd", E2BIG, || {
            let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::NATIVE);
            b[4..8].copy_from_slice(&60u32.to_ne_bytes());
            errno_of(perf_event_open(&mut b, me(), -1, 0, 0))
        }),
        ("order: sample_freq check before group_fd", EINVAL, || {
            let mut a = dummy();
            a.flags |= AttrFlags::FREQ;
            a.sample_period = 1 << 40;
            errno_of(perf_event_open_attr(&a, me(), -1, 0, 0))
        }),
        ("order: bad group_fd before a missing thread", EBADF, || {
            errno_of(perf_event_open_attr(
                &dummy(),
                Target::Thread(i32::MAX - 7),
                -1,
                0,
                0,
            ))
        }),
        (
            "order: missing thread before an unknown type",
            ESRCH,
            || {
                errno_of(perf_event_open_attr(
                    &attr(0x7777, 0),
                    Target::Thread(i32::MAX - 7),
                    -1,
                    -1,
                    0,
                ))
            },
        ),
        (
            "order: unknown type before aux_pause && aux_resume",
            ENOENT,
            || {
                let mut a = sampling(0x7777, 0);
                a.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
                errno_of(open(&a))
            },
        ),
        (
            "order: aux_output EOPNOTSUPP before aux_pause && aux_resume EINVAL",
            EOPNOTSUPP,
            || {
                let mut a = sampling(UEVENT_TYPE, 1);
                a.flags |= AttrFlags::AUX_OUTPUT;
                a.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
                errno_of(open(&a))
            },
        ),
        (
            "order: aux_pause && aux_resume EINVAL before start_paused EOPNOTSUPP",
            EINVAL,
            || {
                let mut a = sampling(UEVENT_TYPE, 1);
                a.aux_action = AuxAction::PAUSE | AuxAction::RESUME | AuxAction::START_PAUSED;
                errno_of(open(&a))
            },
        ),
        (
            "order: NO_INTERRUPT EOPNOTSUPP before a bad clock EINVAL",
            EOPNOTSUPP,
            || {
                let mut a = sampling(test_pmus().1, 0);
                a.flags |= AttrFlags::USE_CLOCKID;
                a.clockid = 99;
                errno_of(open(&a))
            },
        ),
        (
            "order: start_paused EOPNOTSUPP before a missing AUX leader EINVAL",
            EOPNOTSUPP,
            || {
                let mut a = attr(UEVENT_AUX_TYPE, 0);
                a.aux_action = AuxAction::START_PAUSED;
                a.aux_sample_size = 64;
                errno_of(open(&a))
            },
        ),
    ]
}
