//! `perf_event_open` in user space: the syscall body of kernel/events/core.c
//! with its checks in the kernel's order, so that when several rules fail
//! the errno that wins is the one Linux 6.18 returns (docs/KERNEL-RULES.md;
//! tests/kernel_differential.rs holds it to the running kernel).
//!
//! Order: open flags; `perf_copy_attr` (perfaux-abi); sample_freq /
//! sample_period; cgroup mode's pid and cpu; group_fd (EBADF); pid (ESRCH);
//! inherit vs the leader; `perf_event_alloc` (cpu, sigtrap, inherit +
//! SAMPLE_READ without SAMPLE_TID, the PMU lookup (`event_init`, extended
//! registers, NO_EXCLUDE), aux_output, aux_pause/aux_resume,
//! aux_start_paused, the cgroup fd, callchain depth); NO_INTERRUPT;
//! clockid; the group rules (the default clock is `local_clock`, unequal
//! to any use_clockid clock); `perf_event_set_output`; size (v6.7's
//! read_format rule); `perf_get_aux_event`; perfaux's
//! `PERF_FLAG_FD_SAMPLE` (seed 000's `can_sample_for`);
//! `exclusive_event_installable` (EBUSY).

use std::sync::atomic::AtomicI8;
use std::sync::{Arc, OnceLock};

use perfaux_abi::attr::{AttrFlags, AuxAction, PerfEventAttr};
use perfaux_abi::consts::{
    PERF_FLAG_ALL, PERF_FLAG_FD_NO_GROUP, PERF_FLAG_FD_OUTPUT, PERF_FLAG_PID_CGROUP,
    PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_READ, PERF_SAMPLE_TID, ext,
};
use perfaux_abi::errno;

use crate::clock::Clock;
use crate::control::EventFd;
use crate::error::{Error, Result, ebadf, einval, enoent, eopnotsupp};
use crate::event::{Event, EventCounters, EventState, Hw, Target, next_event_id};
use crate::fd;
use crate::pmu::{Pmu, PmuCaps};
use crate::rcu::RcuCell;
use crate::{control, registry, sample, thread};

/// `sysctl_perf_event_max_stack`'s default.
pub(crate) const MAX_STACK: u16 = 127;

/// `PERF_REG_EXTENDED_MASK`: the registers past the architecture's general
/// ones (x86: XMM0 onwards, bit 32 up; 0 where the kernel defines none).
/// The kernel refuses them on a PMU without `PERF_PMU_CAP_EXTENDED_REGS`
/// whatever sample_type says.
pub const PERF_REG_EXTENDED_MASK: u64 = if cfg!(target_arch = "x86_64") {
    !((1u64 << 32) - 1)
} else {
    0
};

/// The open flags perfaux accepts: mainline's and `PERF_FLAG_FD_SAMPLE`.
pub(crate) const OPEN_FLAGS_ALL: u64 = PERF_FLAG_ALL | ext::PERF_FLAG_FD_SAMPLE;

/// Opens an event: `perf_event_open(attr, pid, cpu, group_fd, flags)`.
///
/// `attr` is the caller's `struct perf_event_attr` bytes (any size the
/// kernel accepts); `target` is the thread to observe or every thread of the
/// process; `cpu` is -1 or a CPU as `sched_getcpu()` numbers it; `group_fd`
/// is -1 or an fd from this function. Returns the event's fd, or the errno
/// Linux returns for the same input. On E2BIG from the attr's size rules the
/// kernel's `sizeof(struct perf_event_attr)` is written into `attr.size`
/// (bytes 4..8), as `perf_copy_attr` writes it back to user space.
pub fn perf_event_open(
    attr: &mut [u8],
    target: Target,
    cpu: i32,
    group_fd: i32,
    flags: u64,
) -> Result<EventFd> {
    // for future expandability...
    if flags & !OPEN_FLAGS_ALL != 0 {
        return Err(einval("unknown perf_event_open flag"));
    }
    let decoded = match PerfEventAttr::copy_from_user(attr) {
        Ok(a) => a,
        Err(e) => {
            if let (Some(size), Some(field)) = (e.kernel_size, attr.get_mut(4..8)) {
                field.copy_from_slice(&size.to_ne_bytes());
            }
            return Err(e.into());
        }
    };
    open_attr(decoded, target, cpu, group_fd, flags)
}

/// [`perf_event_open`] with an attr that is already decoded (it goes
/// through the same `perf_copy_attr` rules again, from its own bytes).
pub fn perf_event_open_attr(
    attr: &PerfEventAttr,
    target: Target,
    cpu: i32,
    group_fd: i32,
    flags: u64,
) -> Result<EventFd> {
    let size = if attr.size == 0 {
        perfaux_abi::consts::PERF_ATTR_SIZE_LATEST
    } else {
        attr.size
    };
    let mut bytes = attr.to_bytes(size, perfaux_abi::Endianness::NATIVE);
    perf_event_open(&mut bytes, target, cpu, group_fd, flags)
}

fn open_attr(
    attr: PerfEventAttr,
    target: Target,
    cpu: i32,
    group_fd: i32,
    flags: u64,
) -> Result<EventFd> {
    let freq = attr.flags.contains(AttrFlags::FREQ);
    if freq {
        if attr.sample_freq() > crate::sample_rate::max_sample_rate() {
            return Err(einval(
                "attr.sample_freq above kernel.perf_event_max_sample_rate",
            ));
        }
    } else if attr.sample_period & (1 << 63) != 0 {
        return Err(einval("attr.sample_period has bit 63 set"));
    }

    // In cgroup mode, pid is a cgroup fd and cpu a CPU.
    if flags & PERF_FLAG_PID_CGROUP != 0 && (target == Target::AnyThread || cpu == -1) {
        return Err(einval(
            "PERF_FLAG_PID_CGROUP needs a pid (cgroup fd) and a cpu",
        ));
    }

    let mut group_leader = None;
    let mut output_event = None;
    let mut sample_event = None;
    if group_fd != -1 {
        let g = fd::lookup(group_fd)?;
        if flags & PERF_FLAG_FD_OUTPUT != 0 {
            output_event = Some(g.clone());
        }
        if flags & ext::PERF_FLAG_FD_SAMPLE != 0 {
            // Seed 000: the group_fd's event samples for this one. It stays
            // the group leader too unless FD_NO_GROUP says otherwise, so the
            // group rules and the inherit check still apply.
            sample_event = Some(g.clone());
        }
        if flags & PERF_FLAG_FD_NO_GROUP == 0 {
            group_leader = Some(g);
        }
    }

    // In cgroup mode the pid names no task: the event is a CPU event, and
    // its cgroup fd is looked at in perf_event_alloc.
    let cgroup = flags & PERF_FLAG_PID_CGROUP != 0;
    let (target, task) = match target {
        Target::Thread(tid) if !cgroup => {
            if !thread::thread_exists(tid) {
                return Err(Error::new(errno::ESRCH, "no such thread in this process"));
            }
            (target, true)
        }
        _ => (Target::AnyThread, false),
    };

    if task
        && let Some(l) = &group_leader
        && l.flag(AttrFlags::INHERIT) != attr.flags.contains(AttrFlags::INHERIT)
    {
        return Err(einval("attr.inherit differs from the group leader's"));
    }

    let event = perf_event_alloc(attr, target, cpu, task, cgroup)?;
    match install(
        event.clone(),
        attr,
        group_leader,
        output_event,
        sample_event,
    ) {
        Ok(fd) => Ok(fd),
        Err(e) => {
            // err_alloc: the event never became visible; undo its links.
            event.aux_event.replace(None);
            event.rb.store(None);
            event.pmu.destroy(&event);
            Err(e)
        }
    }
}

/// The rest of the syscall body, once the event exists.
fn install(
    event: Arc<Event>,
    attr: PerfEventAttr,
    group_leader: Option<Arc<Event>>,
    output_event: Option<Arc<Event>>,
    sample_event: Option<Arc<Event>>,
) -> Result<EventFd> {
    if event.is_sampling() && event.pmu_caps().contains(PmuCaps::NO_INTERRUPT) {
        return Err(eopnotsupp("sampling event on a PMU without interrupts"));
    }
    check_clock(&event)?;

    if let Some(leader) = &group_leader {
        let msg = group_rule(leader, &event, &attr);
        if let Some(msg) = msg {
            return Err(einval(msg));
        }
    }

    // perf_event_set_output, whole: its refusals come before the size,
    // AUX and exclusivity checks (the error path detaches the buffer).
    if let Some(out) = &output_event {
        control::set_output_rules(&event, out)?;
        control::attach_output(&event, out)?;
    }

    if !sample::validate_size(&event, group_leader.as_deref()) {
        return Err(Error::new(
            errno::E2BIG,
            "perf_event_validate_size: read/sample headers exceed 16 KiB",
        ));
    }

    // Where the AUX event comes from: the group leader (mainline) or the
    // PERF_FLAG_FD_SAMPLE event (seed 000).
    if let Some(s) = &sample_event
        && !can_sample_for(s, &event)
    {
        return Err(einval(
            "PERF_FLAG_FD_SAMPLE: sampler has no AUX area, is on another cpu, or is closed",
        ));
    }
    let aux_source = sample_event.as_ref().or(group_leader.as_ref());
    if perf_need_aux_event(&event) {
        let aux = perf_get_aux_event(&event, aux_source)?;
        event.aux_event.replace(Some(aux));
    }
    if let Some(s) = sample_event
        && !event.aux_event.is_some()
    {
        // Seed 000: the sampler is held (`sample_event`'s reference) even
        // without aux_sample_size.
        event.aux_event.replace(Some(s));
    }

    // Last, as the kernel asks it under the context's mutex just before
    // installing: every refusal above wins over EBUSY.
    if event.pmu_caps().contains(PmuCaps::EXCLUSIVE)
        && !event.pmu.exclusive_event_installable(&event)
    {
        return Err(Error::new(
            errno::EBUSY,
            "exclusive PMU: the context already has an event of it",
        ));
    }

    // Install: group membership, context lists.
    if let Some(leader) = &group_leader {
        control::attach_to_group(&event, leader);
    }
    thread::install(&event);
    let fd = fd::insert(event.clone());
    let handle = EventFd { fd, event };
    if !handle.event.flag(AttrFlags::DISABLED) {
        control::enable(&handle.event)?;
    }
    Ok(handle)
}

/// The group rules of the syscall body (all EINVAL); `None` if they pass.
fn group_rule(leader: &Arc<Event>, event: &Event, attr: &PerfEventAttr) -> Option<&'static str> {
    if !leader.is_group_leader() {
        return Some("group_fd's event is itself a group member");
    }
    if leader.state() == EventState::Dead {
        return Some("group_fd's event is closed");
    }
    if leader.clock != event.clock {
        return Some("group leader uses another clock");
    }
    if leader.cpu != event.cpu {
        return Some("group leader is bound to another cpu");
    }
    if leader.target != event.target {
        return Some("group leader observes another context (task or cpu)");
    }
    if attr
        .flags
        .intersects(AttrFlags::EXCLUSIVE | AttrFlags::PINNED)
    {
        return Some("only a group leader can be exclusive or pinned");
    }
    None
}

/// `perf_need_aux_event`: aux_output or an AUX action.
pub(crate) fn perf_need_aux_event(event: &Event) -> bool {
    event.flag(AttrFlags::AUX_OUTPUT) || has_aux_action(event)
}

/// `has_aux_action`: aux_sample_size, aux_pause or aux_resume.
pub(crate) fn has_aux_action(event: &Event) -> bool {
    event.attr.aux_sample_size != 0
        || event.aux_action(AuxAction::PAUSE)
        || event.aux_action(AuxAction::RESUME)
}

/// `perf_get_aux_event`: link `event` to the AUX event it needs, or EINVAL.
fn perf_get_aux_event(event: &Event, leader: Option<&Arc<Event>>) -> Result<Arc<Event>> {
    let Some(leader) = leader else {
        return Err(einval(
            "perf_get_aux_event: aux_output/aux_sample_size/aux_pause/aux_resume need an AUX group leader",
        ));
    };
    if event.flag(AttrFlags::AUX_OUTPUT) && event.attr.aux_sample_size != 0 {
        return Err(einval(
            "perf_get_aux_event: aux_output and aux_sample_size are mutually exclusive",
        ));
    }
    if event.flag(AttrFlags::AUX_OUTPUT) && !perf_aux_output_match(event, leader) {
        return Err(einval(
            "perf_get_aux_event: aux_output does not match the leader's PMU",
        ));
    }
    if (event.aux_action(AuxAction::PAUSE) || event.aux_action(AuxAction::RESUME))
        && !leader.pmu_caps().contains(PmuCaps::AUX_PAUSE)
    {
        return Err(einval(
            "perf_get_aux_event: aux_pause/aux_resume: leader's PMU lacks PERF_PMU_CAP_AUX_PAUSE (or is no AUX event)",
        ));
    }
    if event.attr.aux_sample_size != 0 && !leader.pmu.has_snapshot_aux() {
        return Err(einval(
            "perf_get_aux_event: aux_sample_size: leader's PMU has no snapshot_aux",
        ));
    }
    if leader.state() == EventState::Dead {
        return Err(einval("perf_get_aux_event: leader is closed"));
    }
    Ok(leader.clone())
}

/// `perf_aux_output_match`.
fn perf_aux_output_match(event: &Event, aux_event: &Event) -> bool {
    aux_event.has_aux() && event.pmu.aux_output_match(aux_event)
}

/// Seed 000's `can_sample_for`: the sampler has an AUX area, is on the same
/// cpu, and is alive.
fn can_sample_for(sample_event: &Event, event: &Event) -> bool {
    sample_event.has_aux()
        && sample_event.cpu == event.cpu
        && sample_event.state() != EventState::Dead
}

/// `perf_event_alloc`: the checks and the PMU lookup.
fn perf_event_alloc(
    attr: PerfEventAttr,
    target: Target,
    cpu: i32,
    task: bool,
    cgroup: bool,
) -> Result<Arc<Event>> {
    if (cpu < 0 || cpu >= thread::nr_cpu_ids()) && (!task || cpu != -1) {
        return Err(einval("cpu is not -1 with a thread, nor a valid cpu"));
    }
    if attr.flags.contains(AttrFlags::SIGTRAP) && !task {
        return Err(einval("attr.sigtrap needs a thread target"));
    }
    // Since v6.12 an inherited PERF_SAMPLE_READ reads per thread, which
    // the sample can only say with PERF_SAMPLE_TID.
    if attr.flags.contains(AttrFlags::INHERIT)
        && attr.sample_type & PERF_SAMPLE_READ != 0
        && attr.sample_type & PERF_SAMPLE_TID == 0
    {
        return Err(einval(
            "attr.inherit with PERF_SAMPLE_READ needs PERF_SAMPLE_TID",
        ));
    }

    let (pmu, event) = perf_init_event(attr, target, cpu)?;
    let caps = pmu.capabilities();
    let refuse = |e: Error| {
        pmu.destroy(&event);
        Err(e)
    };

    if attr.flags.contains(AttrFlags::AUX_OUTPUT)
        && (!caps.contains(PmuCaps::AUX_OUTPUT)
            || attr
                .aux_action
                .intersects(AuxAction::PAUSE | AuxAction::RESUME))
    {
        return refuse(eopnotsupp(
            "attr.aux_output: PMU lacks PERF_PMU_CAP_AUX_OUTPUT, or aux_pause/aux_resume also set",
        ));
    }
    if attr
        .aux_action
        .contains(AuxAction::PAUSE | AuxAction::RESUME)
    {
        return refuse(einval("attr.aux_pause and attr.aux_resume are both set"));
    }
    if attr.aux_action.contains(AuxAction::START_PAUSED) {
        if !caps.contains(PmuCaps::AUX_PAUSE) {
            return refuse(eopnotsupp(
                "attr.aux_start_paused: PMU lacks PERF_PMU_CAP_AUX_PAUSE",
            ));
        }
        event
            .hw
            .aux_paused
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if cgroup {
        // perf_cgroup_connect, where the kernel calls it: perfaux has no
        // cgroups, so no fd is a cgroup directory.
        return refuse(ebadf(
            "PERF_FLAG_PID_CGROUP: pid is not a cgroup fd (perfaux has no cgroups)",
        ));
    }
    if attr.sample_type & PERF_SAMPLE_CALLCHAIN != 0 && attr.sample_max_stack > MAX_STACK {
        return refuse(Error::new(
            errno::EOVERFLOW,
            "get_callchain_buffers: attr.sample_max_stack above kernel.perf_event_max_stack",
        ));
    }
    Ok(event)
}

/// `perf_init_event`: the PMU of `attr.type`, or every PMU in turn; ENOENT
/// when none takes the event. Returns the event with the PMU's state.
fn perf_init_event(
    attr: PerfEventAttr,
    target: Target,
    cpu: i32,
) -> Result<(Arc<dyn Pmu>, Arc<Event>)> {
    if let Some(pmu) = registry::pmu_by_type(attr.type_) {
        let ev = perf_try_init_event(&pmu, attr.type_, attr, target, cpu)?;
        return Ok((pmu, ev));
    }
    for (type_, pmu) in registry::all() {
        match perf_try_init_event(&pmu, type_, attr, target, cpu) {
            Ok(ev) => return Ok((pmu, ev)),
            Err(e) if e.errno == errno::ENOENT => continue,
            Err(e) => return Err(e),
        }
    }
    Err(enoent("no PMU of attr.type takes this event"))
}

fn perf_try_init_event(
    pmu: &Arc<dyn Pmu>,
    pmu_type: u32,
    attr: PerfEventAttr,
    target: Target,
    cpu: i32,
) -> Result<Arc<Event>> {
    let caps = pmu.capabilities();
    let clock = if attr.flags.contains(AttrFlags::USE_CLOCKID) {
        // The syscall body refuses a bad clockid later (`check_clock`),
        // after the NO_INTERRUPT check; until then any clock will do.
        Clock::for_clockid(attr.clockid, true).unwrap_or_default()
    } else {
        Clock::default()
    };
    let event = Arc::new_cyclic(|weak| Event {
        id: next_event_id(),
        attr,
        info: perfaux_abi::parse_info::RecordParseInfo::new(&attr),
        pmu: pmu.clone(),
        pmu_type,
        target,
        cpu,
        clock,
        state: AtomicI8::new(EventState::Off as i8),
        group_leader: RcuCell::default(),
        sibling_list: RcuCell::default(),
        aux_event: RcuCell::default(),
        rb: Default::default(),
        mmap_count: Default::default(),
        hw: Hw::default(),
        counters: EventCounters::default(),
        private: OnceLock::new(),
        weak_self: weak.clone(),
    });
    let private = pmu.event_init(&event)?;
    let _ = event.private.set(private);
    if !caps.contains(PmuCaps::EXTENDED_REGS)
        && (attr.sample_regs_user | attr.sample_regs_intr) & PERF_REG_EXTENDED_MASK != 0
    {
        pmu.destroy(&event);
        return Err(eopnotsupp(
            "extended registers in attr.sample_regs_user/intr: PMU lacks PERF_PMU_CAP_EXTENDED_REGS",
        ));
    }
    if caps.contains(PmuCaps::NO_EXCLUDE)
        && attr.flags.intersects(
            AttrFlags::EXCLUDE_USER
                | AttrFlags::EXCLUDE_KERNEL
                | AttrFlags::EXCLUDE_HV
                | AttrFlags::EXCLUDE_IDLE
                | AttrFlags::EXCLUDE_HOST
                | AttrFlags::EXCLUDE_GUEST,
        )
    {
        pmu.destroy(&event);
        return Err(einval(
            "PMU has PERF_PMU_CAP_NO_EXCLUDE and an exclude_* bit is set",
        ));
    }
    crate::overflow::init_period(&event);
    Ok(event)
}

/// The clock check of the syscall body (`perf_event_set_clock`), run after
/// the NO_INTERRUPT check as the kernel does.
pub(crate) fn check_clock(event: &Event) -> Result<()> {
    if event.flag(AttrFlags::USE_CLOCKID) {
        Clock::for_clockid(
            event.attr.clockid,
            event.pmu_caps().contains(PmuCaps::NO_NMI),
        )?;
    }
    Ok(())
}
