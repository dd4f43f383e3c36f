//! One row per validation rule of the seeds and mainline, each with the
//! errno Linux (>= 6.13) returns for it, plus rows where several rules fail
//! at once and the kernel's check order decides which errno wins.
//!
//! A failing row prints its rule.

use std::sync::Arc;

use perfaux_abi::Endianness;
use perfaux_abi::attr::{AttrBuilder, AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::*;
use perfaux_abi::errno::*;
use perfaux_core::driver::{Pmu, perf_pmu_register};
use perfaux_core::{
    Event, EventFd, PmuCaps, Prot, Result, Target, page_size, perf_event_open,
    perf_event_open_attr, perf_uevent, perfaux_uevent,
};
use perfaux_pmus::{PROBE_TYPE, SWTRACE_TYPE, UEVENT_AUX_TYPE, UEVENT_TYPE};

fn attr(type_: u32, config: u64) -> PerfEventAttr {
    AttrBuilder::new(type_, config).build()
}

fn me() -> Target {
    Target::current()
}

fn open(a: &PerfEventAttr) -> Result<EventFd> {
    perf_event_open_attr(a, me(), -1, -1, 0)
}

fn open_in(a: &PerfEventAttr, leader: &EventFd) -> Result<EventFd> {
    perf_event_open_attr(a, me(), -1, leader.as_raw(), 0)
}

fn dummy() -> PerfEventAttr {
    attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY)
}

fn sampling(type_: u32, config: u64) -> PerfEventAttr {
    let mut a = attr(type_, config);
    a.sample_period = 1;
    a
}

fn probe_cfg() -> u64 {
    fn here() {
        let _g = perfaux_swtrace::probe!("vt_probe");
    }
    here();
    perfaux_pmus::probe::resolve_probe("vt_probe")
}

fn uevent_aux_leader() -> EventFd {
    open(&attr(UEVENT_AUX_TYPE, 0)).unwrap()
}

/// A PMU whose events may carry `aux_output` (`config` 1: matches any AUX
/// leader, 0: matches none), or that has no interrupt (`config` 2) and an
/// AUX area whose `setup_aux` always fails.
struct TestPmu {
    caps: PmuCaps,
}

impl Pmu for TestPmu {
    fn name(&self) -> &'static str {
        if self.caps.contains(PmuCaps::NO_INTERRUPT) {
            "vt_noint"
        } else {
            "vt_auxout"
        }
    }
    fn capabilities(&self) -> PmuCaps {
        self.caps
    }
    fn event_init(&self, event: &Event) -> Result<perfaux_core::driver::PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(perfaux_core::Error::new(ENOENT, "not mine"));
        }
        Ok(Box::new(event.attr().config))
    }
    fn start(&self, _: &Event, _: u32) {}
    fn stop(&self, _: &Event, _: u32) {}
    fn aux_output_match(&self, _aux_event: &Event) -> bool {
        true
    }
    /// Refuses every AUX area (the kernel's setup_aux returning NULL).
    fn setup_aux(
        &self,
        _: &Event,
        _: &perfaux_core::driver::AuxArea,
        _: bool,
    ) -> Result<perfaux_core::driver::PmuPrivate> {
        Err(perfaux_core::Error::new(
            EINVAL,
            "vt_noint refuses AUX areas",
        ))
    }
}

fn test_pmus() -> (u32, u32) {
    static T: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        (
            perf_pmu_register(Arc::new(TestPmu {
                caps: PmuCaps::AUX_OUTPUT,
            })),
            perf_pmu_register(Arc::new(TestPmu {
                caps: PmuCaps::NO_INTERRUPT | PmuCaps::AUX,
            })),
        )
    })
}

/// The trace leader of this thread, mapped so that AUX links work.
fn trace_leader(aux: bool) -> (EventFd, Vec<perfaux_core::Mmap>) {
    let ev = open(&attr(SWTRACE_TYPE, 0)).unwrap();
    let mut maps = vec![ev.mmap(0, 1 + 1, Prot::READ_WRITE).unwrap()];
    if aux {
        let off = 2 * page_size() as u64;
        maps[0].set_aux_area(off, page_size() as u64).unwrap();
        maps.push(ev.mmap(2, 1, Prot::READ_ONLY).unwrap());
    }
    (ev, maps)
}

/// An AUX sampler with `flags` opened with FD_SAMPLE (and no FD_NO_GROUP)
/// on this thread's trace leader: it joins the leader's group.
fn fd_sample_member(flags: AttrFlags) -> i32 {
    let (s, _m) = trace_leader(false);
    let mut a = sampling(UEVENT_TYPE, 1);
    a.sample_type = PERF_SAMPLE_AUX;
    a.aux_sample_size = 64;
    a.flags |= flags;
    errno_of(perf_event_open_attr(
        &a,
        me(),
        -1,
        s.as_raw(),
        PERF_FLAG_FD_SAMPLE_EXT,
    ))
}

fn errno_of<T>(r: Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.errno,
    }
}

#[path = "validation_table/later_rows.rs"]
mod later_rows;
#[path = "validation_table/linux_6_18_rows.rs"]
mod linux_6_18_rows;

type RowFn = fn() -> i32;

/// (rule, expected errno, case)
fn rows() -> Vec<(&'static str, i32, RowFn)> {
    let rows: Vec<(&'static str, i32, RowFn)> = vec![
        // --- syscall body: flags and perf_copy_attr ---
        ("flags & ~PERF_FLAG_ALL -> EINVAL", EINVAL, || {
            errno_of(perf_event_open_attr(&dummy(), me(), -1, -1, 1 << 5))
        }),
        ("attr.size > PAGE_SIZE -> E2BIG", E2BIG, || {
            let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::NATIVE);
            b.resize(4200, 0);
            b[4..8].copy_from_slice(&4097u32.to_ne_bytes());
            errno_of(perf_event_open(&mut b, me(), -1, -1, 0))
        }),
        (
            "attr.size > PAGE_SIZE: E2BIG writes the kernel's sizeof into attr.size",
            E2BIG,
            || {
                let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::NATIVE);
                b.resize(4200, 0);
                b[4..8].copy_from_slice(&4097u32.to_ne_bytes());
                let errno = errno_of(perf_event_open(&mut b, me(), -1, -1, 0));
                let size = u32::from_ne_bytes(b[4..8].try_into().unwrap());
                assert_eq!(size, PERF_ATTR_SIZE_LATEST, "attr.size after E2BIG");
                errno
            },
        ),
        ("attr.size < PERF_ATTR_SIZE_VER0 -> E2BIG", E2BIG, || {
            let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER8, Endianness::NATIVE);
            b[4..8].copy_from_slice(&60u32.to_ne_bytes());
            errno_of(perf_event_open(&mut b, me(), -1, -1, 0))
        }),
        ("non-zero bytes past sizeof(attr) -> E2BIG", E2BIG, || {
            let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER9, Endianness::NATIVE);
            b.resize(160, 0);
            b[4..8].copy_from_slice(&160u32.to_ne_bytes());
            b[150] = 1;
            errno_of(perf_event_open(&mut b, me(), -1, -1, 0))
        }),
        ("__reserved_1 bit set -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.flags |= AttrFlags::from_bits_retain(1 << 45);
            errno_of(open(&a))
        }),
        ("__reserved_2 non-zero -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.reserved_2 = 1;
            errno_of(open(&a))
        }),
        (
            "aux_action __reserved_3 bits -> EINVAL (perf_copy_attr)",
            EINVAL,
            || {
                let mut a = dummy();
                a.aux_action = AuxAction::from_bits_retain(1 << 3);
                errno_of(open(&a))
            },
        ),
        ("sample_type >= PERF_SAMPLE_MAX -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.sample_type = PERF_SAMPLE_MAX;
            errno_of(open(&a))
        }),
        ("read_format >= PERF_FORMAT_MAX -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.read_format = PERF_FORMAT_MAX;
            errno_of(open(&a))
        }),
        (
            "freq && sample_freq > max_sample_rate -> EINVAL",
            EINVAL,
            || {
                let mut a = dummy();
                a.flags |= AttrFlags::FREQ;
                a.sample_period = 100_001;
                errno_of(open(&a))
            },
        ),
        ("sample_period bit 63 -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.sample_period = 1 << 63;
            errno_of(open(&a))
        }),
        ("PERF_FLAG_PID_CGROUP with cpu -1 -> EINVAL", EINVAL, || {
            errno_of(perf_event_open_attr(
                &dummy(),
                me(),
                -1,
                -1,
                PERF_FLAG_PID_CGROUP,
            ))
        }),
        // perf_cgroup_connect runs inside perf_event_alloc, after the PMU
        // lookup and the aux checks: those errnos win over its EBADF.
        (
            "PERF_FLAG_PID_CGROUP, pid no cgroup fd -> EBADF",
            EBADF,
            || {
                errno_of(perf_event_open_attr(
                    &dummy(),
                    me(),
                    0,
                    -1,
                    PERF_FLAG_PID_CGROUP,
                ))
            },
        ),
        (
            "PERF_FLAG_PID_CGROUP with an unknown type: PMU lookup first -> ENOENT",
            ENOENT,
            || {
                errno_of(perf_event_open_attr(
                    &attr(0x7fff_0000, 0),
                    me(),
                    0,
                    -1,
                    PERF_FLAG_PID_CGROUP,
                ))
            },
        ),
        (
            "PERF_FLAG_PID_CGROUP with cpu out of range: perf_event_alloc's cpu check first -> EINVAL",
            EINVAL,
            || {
                errno_of(perf_event_open_attr(
                    &dummy(),
                    me(),
                    4096,
                    -1,
                    PERF_FLAG_PID_CGROUP,
                ))
            },
        ),
        (
            "PERF_FLAG_PID_CGROUP with aux_pause and aux_resume: aux checks first -> EINVAL",
            EINVAL,
            || {
                let mut a = dummy();
                a.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
                errno_of(perf_event_open_attr(&a, me(), 0, -1, PERF_FLAG_PID_CGROUP))
            },
        ),
        // --- group_fd and pid ---
        (
            "group_fd is not a perf event (stdin) -> EBADF",
            EBADF,
            || errno_of(perf_event_open_attr(&dummy(), me(), -1, 0, 0)),
        ),
        ("group_fd was closed -> EBADF", EBADF, || {
            let l = open(&dummy()).unwrap();
            let fd = l.as_raw();
            drop(l);
            errno_of(perf_event_open_attr(&dummy(), me(), -1, fd, 0))
        }),
        ("pid names no thread of the process -> ESRCH", ESRCH, || {
            errno_of(perf_event_open_attr(
                &dummy(),
                Target::Thread(i32::MAX - 7),
                -1,
                -1,
                0,
            ))
        }),
        (
            "task event, inherit differs from the leader -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                let mut a = dummy();
                a.flags |= AttrFlags::INHERIT;
                errno_of(open_in(&a, &l))
            },
        ),
        // --- perf_event_alloc ---
        ("pid -1 and cpu -1 -> EINVAL", EINVAL, || {
            errno_of(perf_event_open_attr(&dummy(), Target::AnyThread, -1, -1, 0))
        }),
        ("cpu >= nr_cpu_ids -> EINVAL", EINVAL, || {
            errno_of(perf_event_open_attr(&dummy(), me(), 4096, -1, 0))
        }),
        ("sigtrap without a task -> EINVAL", EINVAL, || {
            let mut a = dummy();
            a.flags |= AttrFlags::SIGTRAP | AttrFlags::REMOVE_ON_EXEC;
            errno_of(perf_event_open_attr(&a, Target::AnyThread, 0, -1, 0))
        }),
        ("unknown attr.type -> ENOENT", ENOENT, || {
            errno_of(open(&attr(0x7777, 0)))
        }),
        (
            "software config beyond PERF_COUNT_SW_MAX -> ENOENT",
            ENOENT,
            || errno_of(open(&attr(PERF_TYPE_SOFTWARE, 99))),
        ),
        ("probe config naming no probe -> ENOENT", ENOENT, || {
            errno_of(open(&attr(PROBE_TYPE, 0xfff_0000)))
        }),
        (
            "aux_output on a PMU without CAP_AUX_OUTPUT -> EOPNOTSUPP",
            EOPNOTSUPP,
            || {
                let mut a = sampling(UEVENT_TYPE, 1);
                a.flags |= AttrFlags::AUX_OUTPUT;
                errno_of(open(&a))
            },
        ),
        (
            "aux_output with aux_pause -> EOPNOTSUPP",
            EOPNOTSUPP,
            || {
                let mut a = sampling(test_pmus().0, 1);
                a.flags |= AttrFlags::AUX_OUTPUT;
                a.aux_action = AuxAction::PAUSE;
                errno_of(open(&a))
            },
        ),
        ("aux_pause && aux_resume -> EINVAL", EINVAL, || {
            let mut a = sampling(UEVENT_TYPE, 1);
            a.aux_action = AuxAction::PAUSE | AuxAction::RESUME;
            errno_of(open(&a))
        }),
        (
            "aux_start_paused on a PMU without CAP_AUX_PAUSE -> EOPNOTSUPP",
            EOPNOTSUPP,
            || {
                let mut a = attr(UEVENT_AUX_TYPE, 0);
                a.aux_action = AuxAction::START_PAUSED;
                errno_of(open(&a))
            },
        ),
        (
            "sample_max_stack > perf_event_max_stack with CALLCHAIN -> EOVERFLOW",
            EOVERFLOW,
            || {
                let mut a = sampling(UEVENT_TYPE, 1);
                a.sample_type = PERF_SAMPLE_CALLCHAIN;
                a.sample_max_stack = 200;
                errno_of(open(&a))
            },
        ),
        (
            "sampling event on a PMU with NO_INTERRUPT -> EOPNOTSUPP",
            EOPNOTSUPP,
            || errno_of(open(&sampling(test_pmus().1, 0))),
        ),
        (
            "use_clockid with an unknown clock -> EINVAL",
            EINVAL,
            || {
                let mut a = dummy();
                a.flags |= AttrFlags::USE_CLOCKID;
                a.clockid = 99;
                errno_of(open(&a))
            },
        ),
        (
            "non-NMI-safe clock on a PMU without NO_NMI -> EINVAL",
            EINVAL,
            || {
                let mut a = attr(SWTRACE_TYPE, 0);
                a.flags |= AttrFlags::USE_CLOCKID;
                a.clockid = libc::CLOCK_REALTIME;
                errno_of(open(&a))
            },
        ),
        // --- group rules (all EINVAL) ---
        ("group leader is itself a member -> EINVAL", EINVAL, || {
            let l = open(&dummy()).unwrap();
            let m = open_in(&dummy(), &l).unwrap();
            errno_of(open_in(&dummy(), &m))
        }),
        ("group leader on another cpu -> EINVAL", EINVAL, || {
            let l = perf_event_open_attr(&dummy(), me(), 0, -1, 0).unwrap();
            errno_of(open_in(&dummy(), &l))
        }),
        (
            "group leader in another context (thread) -> EINVAL",
            EINVAL,
            || {
                let l = perf_event_open_attr(&dummy(), Target::AnyThread, 0, -1, 0).unwrap();
                errno_of(perf_event_open_attr(&dummy(), me(), 0, l.as_raw(), 0))
            },
        ),
        ("group leader with another clock -> EINVAL", EINVAL, || {
            let l = open(&dummy()).unwrap();
            let mut a = dummy();
            a.flags |= AttrFlags::USE_CLOCKID;
            a.clockid = libc::CLOCK_MONOTONIC_RAW;
            errno_of(open_in(&a, &l))
        }),
        ("pinned group member -> EINVAL", EINVAL, || {
            let l = open(&dummy()).unwrap();
            let mut a = dummy();
            a.flags |= AttrFlags::PINNED;
            errno_of(open_in(&a, &l))
        }),
        // --- perf_event_set_output via PERF_FLAG_FD_OUTPUT ---
        (
            "FD_OUTPUT to an event without a buffer -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                errno_of(perf_event_open_attr(
                    &dummy(),
                    me(),
                    -1,
                    l.as_raw(),
                    PERF_FLAG_FD_OUTPUT,
                ))
            },
        ),
        (
            "FD_OUTPUT with differing write_backward -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                let _m = l.mmap(0, 2, Prot::READ_WRITE).unwrap();
                let mut a = dummy();
                a.flags |= AttrFlags::WRITE_BACKWARD;
                errno_of(perf_event_open_attr(
                    &a,
                    me(),
                    -1,
                    l.as_raw(),
                    PERF_FLAG_FD_OUTPUT,
                ))
            },
        ),
        // --- perf_get_aux_event (all EINVAL) ---
        ("aux_pause without a group leader -> EINVAL", EINVAL, || {
            let mut a = sampling(UEVENT_TYPE, 1);
            a.aux_action = AuxAction::PAUSE;
            errno_of(open(&a))
        }),
        (
            "aux_resume, leader's PMU lacks CAP_AUX_PAUSE -> EINVAL",
            EINVAL,
            || {
                let l = uevent_aux_leader();
                let mut a = sampling(UEVENT_TYPE, 1);
                a.aux_action = AuxAction::RESUME;
                errno_of(open_in(&a, &l))
            },
        ),
        (
            "aux_pause, leader is not an AUX event -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                let mut a = sampling(UEVENT_TYPE, 1);
                a.aux_action = AuxAction::PAUSE;
                errno_of(open_in(&a, &l))
            },
        ),
        (
            "aux_sample_size without a group leader -> EINVAL",
            EINVAL,
            || {
                let mut a = sampling(UEVENT_TYPE, 1);
                a.sample_type = PERF_SAMPLE_AUX;
                a.aux_sample_size = 4096;
                errno_of(open(&a))
            },
        ),
        (
            "aux_sample_size, leader's PMU has no snapshot_aux -> EINVAL",
            EINVAL,
            || {
                let l = uevent_aux_leader();
                let mut a = sampling(UEVENT_TYPE, 1);
                a.sample_type = PERF_SAMPLE_AUX;
                a.aux_sample_size = 4096;
                errno_of(open_in(&a, &l))
            },
        ),
        ("aux_output && aux_sample_size -> EINVAL", EINVAL, || {
            let (l, _m) = trace_leader(false);
            let mut a = sampling(test_pmus().0, 1);
            a.flags |= AttrFlags::AUX_OUTPUT;
            a.aux_sample_size = 4096;
            errno_of(open_in(&a, &l))
        }),
        (
            "aux_output, leader is no AUX event (no match) -> EINVAL",
            EINVAL,
            || {
                let l = open(&dummy()).unwrap();
                let mut a = sampling(test_pmus().0, 1);
                a.flags |= AttrFlags::AUX_OUTPUT;
                errno_of(open_in(&a, &l))
            },
        ),
    ];
    rows.into_iter()
        .chain(linux_6_18_rows::rows())
        .chain(later_rows::rows())
        .collect()
}

const PERF_FLAG_FD_SAMPLE_EXT: u64 = ext::PERF_FLAG_FD_SAMPLE;

fn c_uevent(type_: u32, size: u32, null: bool, flags: u64) -> i32 {
    let buf = [7u8; 8];
    let p = if null {
        std::ptr::null()
    } else {
        buf.as_ptr().cast()
    };
    let size = if !null { size.min(8) } else { size };
    // SAFETY: `p` is null or points to 8 readable bytes and size <= 8 then.
    let r = unsafe { perfaux_uevent(type_, size, p, flags) };
    if r == 0 {
        0
    } else {
        assert_eq!(r, -1, "the C entry returns -1 on error");
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }
}

#[test]
fn every_rule_gives_the_kernels_errno() {
    perfaux_pmus::register();
    let mut failures = Vec::new();
    let rows = rows();
    for (rule, want, case) in &rows {
        let got = case();
        if got != *want {
            failures.push(format!(
                "rule `{rule}`: want {}, got {}",
                perfaux_abi::errno::name(*want),
                if got == 0 {
                    "success"
                } else {
                    perfaux_abi::errno::name(got)
                }
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn valid_configurations_open() {
    perfaux_pmus::register();
    // The positive counterparts of the rows above: each opens.
    let (l, _m) = trace_leader(true);
    let mut pause = sampling(PROBE_TYPE, probe_cfg());
    pause.aux_action = AuxAction::PAUSE;
    let p = open_in(&pause, &l).unwrap();
    let mut sampler = sampling(PROBE_TYPE, probe_cfg());
    sampler.sample_type = PERF_SAMPLE_AUX;
    sampler.aux_sample_size = 4096;
    let s = open_in(&sampler, &l).unwrap();
    assert_eq!(p.event().aux_event().unwrap().id(), l.id());
    assert_eq!(s.event().aux_event().unwrap().id(), l.id());
    let mut start_paused = attr(SWTRACE_TYPE, 0);
    start_paused.aux_action = AuxAction::START_PAUSED;
    drop((p, s, l, _m));
    let sp = open(&start_paused).unwrap();
    assert!(
        sp.event().aux_paused(),
        "aux_start_paused sets hw.aux_paused at alloc"
    );
    drop(sp);
    open(&attr(
        SWTRACE_TYPE,
        perfaux_pmus::swtrace::CONFIG_TRACK_PAUSED,
    ))
    .unwrap();
    // Each timing mode the trace PMU's config names opens.
    for timing in [
        perfaux_swtrace::Timing::EntryOnly,
        perfaux_swtrace::Timing::Periodic { every: 16 },
    ] {
        let config = perfaux_pmus::swtrace::timing_config(timing);
        open(&attr(SWTRACE_TYPE, config)).unwrap();
    }

    // attr.size 0 is PERF_ATTR_SIZE_VER0 (perf_copy_attr).
    let mut b = dummy().to_bytes(PERF_ATTR_SIZE_VER0, Endianness::NATIVE);
    b[4..8].copy_from_slice(&0u32.to_ne_bytes());
    let v0 = perf_event_open(&mut b, me(), -1, -1, 0).unwrap();
    assert_eq!(v0.event().attr().size, PERF_ATTR_SIZE_VER0);

    // A second AUX mapping with the same offset and size shares the area.
    let e = open(&attr(UEVENT_AUX_TYPE, 0)).unwrap();
    let m = e.mmap(0, 3, Prot::READ_WRITE).unwrap();
    m.set_aux_area(3 * page_size() as u64, page_size() as u64)
        .unwrap();
    let a1 = e.mmap(3, 1, Prot::READ_WRITE).unwrap();
    let a2 = e.mmap(3, 1, Prot::READ_WRITE).unwrap();
    assert!(a1.buffer().aux().is_some());
    drop(a1);
    assert!(
        a2.buffer().aux().is_some(),
        "the area lives while a2 maps it"
    );
    drop(a2);
    assert!(m.buffer().aux().is_none(), "the last AUX unmap frees it");
}
