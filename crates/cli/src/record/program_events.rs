//! The `-e` events of `perfaux record -- ./prog`: what every traced thread of the program
//! opens (perfaux-preload's event table) and what the recorder files them as.
//!
//! Each thread opens the events in order as `perf record` does: the `swtrace//` event owns
//! the thread's buffer, an event grouped behind it (perf's aux-action and AUX sampling rules,
//! [`crate::events::resolve_events`]) is opened with it as group leader, and every event
//! writes into its buffer. A `probe:FUNC` names a function of the program by its ELF symbol
//! name: only the program knows where its objects are loaded, so the runtime finds FUNC in
//! each object it loads (also by `dlopen`) and fills in the probe's `config` (0 here).
//!
//! The kernel's software events (page-faults, context-switches, cpu-migrations, ...) are the
//! running kernel's to count: no thread opens them; the recorder opens each on every CPU for
//! the program's threads and processes (perfaux-preload's `kernel_events`), so each stands
//! alone, outside the trace's group.

use perfaux_perfdata::record_attrs::uevent_stream_attr;
use perfaux_perfdata::uevent_sample::UEVENT_EVENT_NAME;
use perfaux_preload::host::ProgramEvent;
use perfaux_recorder::EventSpec;

use perfaux_abi::attr::AttrFlags;
use perfaux_abi::consts::{
    PERF_COUNT_SW_BPF_OUTPUT, PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_CLOCK,
    PERF_COUNT_SW_CPU_MIGRATIONS, PERF_COUNT_SW_DUMMY, PERF_COUNT_SW_TASK_CLOCK,
};

use super::attrs::attrs_with;
use crate::error::CliError;
use crate::events::resolve::{SWTRACE_PMU, UEVENT_AUX_PMU};
use crate::events::{Event, EventKind};

/// Whether `ev` is one of the kernel's events perfaux's perf core cannot see happen: its
/// software events but the clocks, the dummy event and bpf-output (which carries uevents).
fn is_kernel_counter(ev: &Event) -> bool {
    if let EventKind::Tracepoint { .. } = ev.kind {
        return true;
    }
    matches!(ev.kind, EventKind::Software { config } if !matches!(
        config,
        PERF_COUNT_SW_TASK_CLOCK
            | PERF_COUNT_SW_CPU_CLOCK
            | PERF_COUNT_SW_DUMMY
            | PERF_COUNT_SW_BPF_OUTPUT
    ))
}

/// Whether `ev` is a clock sampler (task-clock, cpu-clock).
fn is_clock(ev: &Event) -> bool {
    matches!(
        ev.kind,
        EventKind::Software {
            config: PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK
        }
    )
}

/// HEADER_TRACING_DATA for the tracepoints among `events`, if any (perf prints their fields
/// from it).
pub fn tracing_data(events: &[Event]) -> Result<Option<Vec<u8>>, CliError> {
    let tps: Vec<(String, String)> = events
        .iter()
        .enumerate()
        .filter(|&(i, _)| is_kernel_event(events, i))
        .filter_map(|(_, e)| match &e.kind {
            EventKind::Tracepoint { system, name, .. } => Some((system.clone(), name.clone())),
            _ => None,
        })
        .collect();
    if tps.is_empty() {
        return Ok(None);
    }
    perfaux_recorder::tracefs::tracing_data(&tps)
        .map(Some)
        .map_err(|e| CliError::msg(format!("record: the tracepoints' formats: {e}")))
}

/// Whether `events[i]` is in a group (a member, or a leader with members).
fn grouped(events: &[Event], i: usize) -> bool {
    events[i].leader != i
        || events
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && o.leader == i)
}

/// Whether `events[i]` stands alone: outside a group, no aux-action, no AUX sample.
fn alone(events: &[Event], i: usize) -> bool {
    !grouped(events, i)
        && events[i].aux_action == Default::default()
        && events[i].aux_sample_size == 0
}

/// Whether `events[i]` is opened by the running kernel rather than by the program's threads:
/// its software counters and tracepoints, and a clock sampler, each standing alone. The
/// kernel's clock samples the program wherever it runs (libraries, code nothing traces) with
/// the real instruction pointer and the user call chain as perf's `-g` walks it; a clock
/// grouped behind the trace stays the threads' own, whose samples can carry the trace and the
/// shadow stack's chain.
pub fn is_kernel_event(events: &[Event], i: usize) -> bool {
    (is_kernel_counter(&events[i]) || is_clock(&events[i])) && alone(events, i)
}

/// Whether `events[i]` is a kernel event the trace's group takes as a trigger (a software
/// counter or tracepoint with an aux-action, an AUX sample, or in the group): each thread
/// opens it as a `ktrigger` event of perfaux's core (perfaux-pmus' `kernel_trigger`), whose
/// kernel side signals the thread at each hit (sigtrap), so that the core pauses, resumes or
/// samples the trace there.
fn is_kernel_trigger(events: &[Event], i: usize) -> bool {
    is_kernel_counter(&events[i]) && !alone(events, i)
}

/// The `ktrigger` attr for a kernel event's `kernel` attr: its type in `config1`, its config,
/// kernel mode in `config2`; the hit carries no raw record (user space has none).
fn trigger_attr(kernel: &perfaux_abi::attr::PerfEventAttr) -> perfaux_abi::attr::PerfEventAttr {
    use perfaux_pmus::kernel_trigger::CONFIG2_KERNEL_MODE;
    let mut a = *kernel;
    a.type_ = perfaux_pmus::KTRIGGER_TYPE;
    a.config1 = u64::from(kernel.type_);
    a.config2 = if kernel.flags.contains(AttrFlags::EXCLUDE_KERNEL) {
        0
    } else {
        CONFIG2_KERNEL_MODE
    };
    a.sample_type &= !perfaux_abi::consts::PERF_SAMPLE_RAW;
    a.flags |= AttrFlags::EXCLUDE_KERNEL;
    a
}

/// The program's events for `events`: the recorder's specs and the program's event table, in
/// the same order (the uevent stream is added if no `-e uevent` asked for it: a program's
/// `perfaux_uevent` calls are always recorded, as without -e), and the kernel's events.
pub struct ProgramEvents {
    pub specs: Vec<EventSpec>,
    pub table: Vec<ProgramEvent>,
    pub kernel: Vec<EventSpec>,
}

/// Splits `events` into the program's and the kernel's ([`ProgramEvents`]).
pub fn program_events(events: &[Event]) -> Result<ProgramEvents, CliError> {
    let kernel = kernel_specs(events)?;
    let (events, leaders) = without_kernel_events(events);
    let (specs, table) = traced_events(&events, &leaders)?;
    Ok(ProgramEvents {
        specs,
        table,
        kernel,
    })
}

/// The specs of the kernel's events among `events` ([`is_kernel_event`]), each alone.
pub fn kernel_specs(events: &[Event]) -> Result<Vec<EventSpec>, CliError> {
    let mut kernel = Vec::new();
    for (i, ev) in events.iter().enumerate() {
        if !is_kernel_event(events, i) {
            continue;
        }
        let mut a = attrs_with(ev, &|_| Ok(0)).map_err(CliError::msg)?;
        if matches!(
            ev.kind,
            EventKind::Software {
                config: PERF_COUNT_SW_CONTEXT_SWITCHES | PERF_COUNT_SW_CPU_MIGRATIONS
            }
        ) {
            // The scheduler counts these with its own, kernel registers: excluding the
            // kernel would count none (perf's `cs:u` is always 0). Kernel mode needs
            // perf_event_paranoid 1 or lower, or CAP_PERFMON; the refusal says so.
            a.open.flags.remove(AttrFlags::EXCLUDE_KERNEL);
        }
        if ev.callchain
            && let Some(size) = ev.dwarf_stack
        {
            with_user_stack(&mut a.open, size);
        }
        kernel.push(EventSpec::new(a.name, a.open, 0));
    }
    Ok(kernel)
}

/// perf's x86_64 `PERF_REGS_MASK`: AX to R15 less the segment registers DS, ES, FS and GS
/// (the kernel samples none of them), the registers `--call-graph dwarf` copies.
pub const X86_64_USER_REGS: u64 = 0x00ff_0fff;

/// `--call-graph dwarf,SIZE` on a kernel sampler, as perf's `evsel__config_callchain` asks
/// it: the user registers and SIZE bytes of user stack from the stack pointer up, for the
/// reader to unwind with the objects' CFI, and no user chain of the kernel's (it walks frame
/// pointers, which an -O2 build does not keep).
fn with_user_stack(a: &mut perfaux_abi::attr::PerfEventAttr, size: u32) {
    use perfaux_abi::consts::{PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER};
    a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a.sample_regs_user = X86_64_USER_REGS;
    a.sample_stack_user = size;
    a.flags |= AttrFlags::EXCLUDE_CALLCHAIN_USER;
}

/// `events` without the kernel's, and each one's leader's index among those kept.
fn without_kernel_events(events: &[Event]) -> (Vec<Event>, Vec<usize>) {
    let kept: Vec<usize> = (0..events.len())
        .filter(|&i| !is_kernel_event(events, i))
        .collect();
    let new_index = |old: usize| kept.iter().position(|&k| k == old).unwrap_or(old);
    let leaders: Vec<usize> = kept.iter().map(|&i| new_index(events[i].leader)).collect();
    // Each kept event's leader by its new index too: the group is read again from them.
    let kept_events = kept
        .iter()
        .zip(&leaders)
        .map(|(&i, &leader)| Event {
            leader,
            ..events[i].clone()
        })
        .collect();
    (kept_events, leaders)
}

/// The specs and table of the events the program's threads open.
fn traced_events(
    events: &[Event],
    leaders: &[usize],
) -> Result<(Vec<EventSpec>, Vec<ProgramEvent>), CliError> {
    let traces = events
        .iter()
        .filter(|e| e.kind == EventKind::SwTrace)
        .count();
    if traces != 1 {
        return Err(CliError::msg(format!(
            "record: a program is traced by exactly one {SWTRACE_PMU}// event, which owns each \
             thread's buffer ({traces} given): e.g. -e {SWTRACE_PMU}// -e probe:FUNC -- ./prog"
        )));
    }
    if let Some(e) = events.iter().find(|e| e.kind == EventKind::UeventAux) {
        return Err(CliError::msg(format!(
            "record: event '{}': {UEVENT_AUX_PMU}// is a second AUX area event; a program's \
             threads have one AUX area, {SWTRACE_PMU}//'s",
            e.text
        )));
    }
    let mut specs = Vec::with_capacity(events.len() + 1);
    let mut table = Vec::with_capacity(events.len() + 1);
    for (i, ev) in events.iter().enumerate() {
        // The runtime fills in a probe's config (the probe PMU's value for FUNC).
        let mut a = attrs_with(ev, &|_| Ok(0)).map_err(CliError::msg)?;
        if is_kernel_trigger(events, i) {
            a.open = trigger_attr(&a.open);
            a.file = perfaux_perfdata::record_attrs::file_attr(&a.open, false);
        }
        let mut s = EventSpec::new(a.name, a.open, i);
        s.leader = leaders[i];
        s.uevent_stream = a.uevent_stream;
        specs.push(s);
        table.push(ProgramEvent {
            attr: a.open,
            leader: leaders[i],
            func: match &ev.kind {
                EventKind::Probe { func } => Some(func.clone()),
                _ => None,
            },
        });
    }
    if !specs.iter().any(|s| s.uevent_stream) {
        let i = specs.len();
        let mut s = EventSpec::new(UEVENT_EVENT_NAME, uevent_stream_attr(), i);
        s.uevent_stream = true;
        specs.push(s);
        table.push(ProgramEvent {
            attr: uevent_stream_attr(),
            leader: i,
            func: None,
        });
    }
    Ok((specs, table))
}
