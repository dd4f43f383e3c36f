//! From written events ([`EventSpec`]) to what `record` opens ([`Event`]):
//! names looked up, terms checked and applied, groups formed, and perf's
//! aux-action rules enforced (tools/perf/util/auxtrace.c,
//! `auxtrace_parse_aux_action` and `auxtrace_parse_sample_options`).

use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_swtrace::Timing;

use super::parse::{EventError, EventSpec, Term, TermValue, parse_events};

/// The name of the software trace PMU in `-e` (`swtrace//`), like `intel_pt//`.
pub const SWTRACE_PMU: &str = "swtrace";
/// The AUX PMU that logs uevents into its AUX area (`uevent_aux//`): no
/// pause/resume and no AUX sampling, so it is where perf's refusals show.
pub const UEVENT_AUX_PMU: &str = "uevent_aux";

/// Software events by perf's names (tools/perf/util/parse-events.c
/// `event_symbols_sw`) that perfaux's core counts per thread.
pub const SOFTWARE_EVENTS: &[(&str, u64)] = &[
    ("task-clock", PERF_COUNT_SW_TASK_CLOCK),
    ("cpu-clock", PERF_COUNT_SW_CPU_CLOCK),
    ("page-faults", PERF_COUNT_SW_PAGE_FAULTS),
    ("faults", PERF_COUNT_SW_PAGE_FAULTS),
    ("minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN),
    ("major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    ("context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cs", PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS),
    ("migrations", PERF_COUNT_SW_CPU_MIGRATIONS),
    ("alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS),
    ("emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS),
    ("bpf-output", PERF_COUNT_SW_BPF_OUTPUT),
    ("dummy", PERF_COUNT_SW_DUMMY),
];

/// Terms perfaux knows, with what their value must be.
const TERMS: &[&str] = &[
    "period",
    "freq",
    "config",
    "name",
    "aux-sample-size",
    "aux-action",
    "aux-output",
    "track-paused",
    "timing",
    "call-graph",
];

/// What an event counts or traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// The software trace PMU: the AUX event, one per traced thread.
    SwTrace,
    /// The uevent-logging AUX PMU.
    UeventAux,
    /// The uevent stream (`uevent`) or the count of one uevent type (`uevent:TYPE`).
    Uevent { type_: Option<String> },
    /// The probe-count event of an instrumented function, `probe:FUNC`.
    Probe { func: String },
    /// A perf software event (`task-clock`, ...), `config` from `perf_sw_ids`.
    Software { config: u64 },
    /// A kernel tracepoint `system:name` (or a uprobe tracefs lists), `id` its tracefs id.
    Tracepoint {
        system: String,
        name: String,
        id: u64,
    },
}

impl EventKind {
    /// Whether the event owns an AUX area (perf's `evsel__is_aux_event`).
    pub fn is_aux(&self) -> bool {
        matches!(self, EventKind::SwTrace | EventKind::UeventAux)
    }
}

/// One event ready to be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The name perf shows (EVENT_DESC): `name=` if given, else the text.
    pub name: String,
    pub config: Option<u64>,
    pub period: Option<u64>,
    pub freq: Option<u64>,
    pub aux_sample_size: u32,
    pub aux_action: AuxAction,
    pub aux_output: bool,
    /// Samples carry the traced thread's call chain (PERF_SAMPLE_CALLCHAIN, from its shadow
    /// stack): `call-graph=` or record's `-g`.
    pub callchain: bool,
    /// A tracepoint asked for with `:u` alone (it then fires for uprobes only).
    pub user_only: bool,
    /// `--call-graph dwarf[,SIZE]`: the bytes of user stack a kernel sampler copies with the
    /// user registers, for the reader to unwind (the program's own samplers keep the
    /// shadow stack's chain, which needs no unwinding).
    pub dwarf_stack: Option<u32>,
    /// Index of the group leader in the list (its own index for a leader).
    pub leader: usize,
    /// The event's text, for messages.
    pub text: String,
}

impl Event {
    pub fn is_leader(&self, idx: usize) -> bool {
        self.leader == idx
    }
}

/// Parses every `-e` argument, resolves the names, and applies perf's
/// grouping rules; `aux_sample` is `--aux-sample`'s size if given.
pub fn resolve_events(args: &[String], aux_sample: Option<u32>) -> Result<Vec<Event>, String> {
    let mut specs: Vec<(usize, EventSpec)> = Vec::new();
    for (a, arg) in args.iter().enumerate() {
        for s in parse_events(arg, specs.len()).map_err(|e| e.to_string())? {
            specs.push((a, s));
        }
    }
    let mut events = Vec::with_capacity(specs.len());
    for (idx, (a, spec)) in specs.iter().enumerate() {
        events.push(resolve_one(&args[*a], spec, idx).map_err(|e| e.to_string())?);
    }
    apply_aux_rules(&mut events, aux_sample)?;
    Ok(events)
}

/// A `--call-graph`/`call-graph=` mode perf takes: `fp`, `dwarf` (with a stack size
/// after a comma on the command line), `lbr`.
pub fn call_graph_mode(s: &str) -> bool {
    let mode = s.split(',').next().unwrap_or("");
    matches!(mode, "fp" | "dwarf" | "lbr")
}

/// perf's default stack dump of `--call-graph dwarf`, and the most a sample can hold (its
/// size field is a u16, rounded down to whole u64s).
pub const DWARF_STACK_DEFAULT: u32 = 8192;
pub const DWARF_STACK_MAX: u32 = 65528;

/// The stack dump size of a `--call-graph` mode: `None` for fp and lbr, perf's
/// [`DWARF_STACK_DEFAULT`] for `dwarf`, SIZE bytes rounded up to 8 for `dwarf,SIZE` (perf's
/// `parse_callchain_record`: 1 to [`DWARF_STACK_MAX`], a number in decimal or 0x hex).
pub fn dwarf_stack_size(mode: &str) -> Result<Option<u32>, String> {
    let mut parts = mode.splitn(2, ',');
    if parts.next() != Some("dwarf") {
        return Ok(None);
    }
    let Some(size) = parts.next() else {
        return Ok(Some(DWARF_STACK_DEFAULT));
    };
    // perf reads it with strtoul(.., 0): decimal, or hex after 0x.
    let n = match size.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => size.parse(),
    };
    match n {
        Ok(n) if n > 0 && n.div_ceil(8) * 8 <= u64::from(DWARF_STACK_MAX) => {
            Ok(Some((n.div_ceil(8) * 8) as u32))
        }
        _ => Err(format!(
            "--call-graph {mode}: the stack dump size is 1 to {DWARF_STACK_MAX} bytes"
        )),
    }
}

/// Record's sampler options (perf's `-g`/`--call-graph`, `-F`, `-c`), for the events that
/// sample: `probe:FUNC` and the software events but dummy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerOptions {
    /// `-g`: samples carry the call chain.
    pub callchain: bool,
    /// `--call-graph dwarf[,SIZE]`: the stack dump of the kernel's samplers.
    pub dwarf_stack: Option<u32>,
    /// `-F`: the clock samplers' frequency, in Hz.
    pub freq: Option<u64>,
    /// `-c`: every sampler's period.
    pub period: Option<u64>,
}

impl SamplerOptions {
    /// Whether any option was given.
    pub fn any(&self) -> bool {
        self.callchain || self.freq.is_some() || self.period.is_some()
    }
}

/// Applies record's sampler options to `events`, as perf's to its own: `-F` and `-c` to
/// the samplers without a `freq=` or `period=` of their own (`-F` to the clocks alone: a
/// probe's period counts calls, not time), `-g` to every sampler. An option no event can
/// take is an error saying which events can.
pub fn apply_sampler_options(events: &mut [Event], o: &SamplerOptions) -> Result<(), String> {
    if !o.any() {
        return Ok(());
    }
    let mut took = false;
    for ev in events.iter_mut() {
        let clock = matches!(
            ev.kind,
            EventKind::Software {
                config: PERF_COUNT_SW_TASK_CLOCK | PERF_COUNT_SW_CPU_CLOCK
            }
        );
        let sampler = clock
            || matches!(
                ev.kind,
                EventKind::Probe { .. } | EventKind::Tracepoint { .. }
            )
            || matches!(ev.kind, EventKind::Software { config } if config != PERF_COUNT_SW_DUMMY);
        if !sampler {
            continue;
        }
        took = true;
        ev.callchain |= o.callchain;
        if ev.dwarf_stack.is_none() {
            ev.dwarf_stack = o.dwarf_stack;
        }
        if ev.period.is_none() && ev.freq.is_none() {
            if let Some(p) = o.period {
                ev.period = Some(p);
            } else if clock {
                ev.freq = o.freq;
            }
        }
    }
    if took {
        Ok(())
    } else {
        Err(
            "-g, --call-graph, -F and -c set perfaux's samplers, and no event samples: add \
             one, e.g. -e task-clock or -e probe:FUNC"
                .into(),
        )
    }
}

fn term_err(input: &str, t: &Term, msg: impl Into<String>) -> EventError {
    EventError {
        input: input.to_string(),
        pos: t.pos,
        token: t.key.clone(),
        msg: msg.into(),
    }
}

fn resolve_one(input: &str, spec: &EventSpec, idx: usize) -> Result<Event, EventError> {
    let name_err = |msg: String| EventError {
        input: input.to_string(),
        pos: spec.pos,
        token: spec.name.clone(),
        msg,
    };
    let kind = match (spec.name.as_str(), &spec.sub) {
        (SWTRACE_PMU, None) if spec.pmu_form => EventKind::SwTrace,
        (UEVENT_AUX_PMU, None) if spec.pmu_form => EventKind::UeventAux,
        (SWTRACE_PMU, None) => {
            return Err(name_err(format!(
                "the trace PMU is written '{SWTRACE_PMU}//' (with terms between the slashes)"
            )));
        }
        ("uevent", sub) => EventKind::Uevent { type_: sub.clone() },
        ("probe", Some(func)) => EventKind::Probe { func: func.clone() },
        ("probe", None) => return Err(name_err("'probe' needs a function: probe:FUNC".into())),
        (n, None) => match SOFTWARE_EVENTS.iter().find(|(s, _)| *s == n) {
            Some(&(_, config)) => EventKind::Software { config },
            // A kernel PMU's name (intel_pt//, cs_etm//, ...): say whether this machine has it.
            None if spec.pmu_form => {
                return Err(name_err(crate::events::aux_pmu::refusal(
                    n,
                    std::path::Path::new(crate::events::aux_pmu::PMU_DIR),
                )));
            }
            None => {
                let known: Vec<&str> = SOFTWARE_EVENTS.iter().map(|(s, _)| *s).collect();
                return Err(name_err(format!(
                    "unknown event (known: {SWTRACE_PMU}//, {UEVENT_AUX_PMU}//, uevent, uevent:TYPE, probe:FUNC, {})",
                    known.join(", ")
                )));
            }
        },
        (system, Some(name)) => {
            let id = perfaux_recorder::tracefs::tracepoint_id(system, name)
                .map_err(|e| name_err(format!("tracepoint '{system}:{name}': {e}")))?;
            EventKind::Tracepoint {
                system: system.to_owned(),
                name: name.clone(),
                id,
            }
        }
    };
    let mut ev = Event {
        kind,
        name: spec.text.clone(),
        config: None,
        period: None,
        freq: None,
        aux_sample_size: 0,
        aux_action: AuxAction::empty(),
        aux_output: false,
        callchain: false,
        user_only: false,
        dwarf_stack: None,
        leader: spec.group.unwrap_or(idx),
        text: spec.text.clone(),
    };
    let mut track_paused = None;
    let mut timing = None;
    for t in &spec.terms {
        let num = || match t.value {
            TermValue::Num(n) => Ok(n),
            _ => Err(term_err(
                input,
                t,
                format!("term '{}' takes a number", t.key),
            )),
        };
        match t.key.as_str() {
            "period" => ev.period = Some(num()?),
            "freq" => ev.freq = Some(num()?),
            "config" => ev.config = Some(num()?),
            "aux-sample-size" => {
                let n = num()?;
                // The sample's record size is a u16 (struct perf_event_header).
                if n > u64::from(u16::MAX) {
                    return Err(term_err(input, t, "aux-sample-size must be below 64 KiB"));
                }
                ev.aux_sample_size = n as u32;
            }
            // perf's term: every way of unwinding it names gets the same exact chain here,
            // the shadow stack's (nothing to unwind).
            "call-graph" => {
                ev.callchain = match &t.value {
                    TermValue::Str(s) if s == "no" => false,
                    TermValue::Str(s) if call_graph_mode(s) => {
                        ev.dwarf_stack = (s == "dwarf").then_some(DWARF_STACK_DEFAULT);
                        true
                    }
                    _ => {
                        return Err(term_err(input, t, "call-graph takes fp, dwarf, lbr or no"));
                    }
                }
            }
            "name" => match &t.value {
                TermValue::Str(s) => ev.name = s.clone(),
                TermValue::Num(n) => ev.name = n.to_string(),
                TermValue::Flag => return Err(term_err(input, t, "term 'name' takes a value")),
            },
            "aux-action" => {
                ev.aux_action = match &t.value {
                    TermValue::Str(s) if s == "start-paused" => AuxAction::START_PAUSED,
                    TermValue::Str(s) if s == "pause" => AuxAction::PAUSE,
                    TermValue::Str(s) if s == "resume" => AuxAction::RESUME,
                    _ => {
                        return Err(term_err(
                            input,
                            t,
                            "aux-action takes start-paused, pause or resume",
                        ));
                    }
                }
            }
            "aux-output" => {
                ev.aux_output = match t.value {
                    TermValue::Flag | TermValue::Num(1) => true,
                    TermValue::Num(0) => false,
                    _ => return Err(term_err(input, t, "aux-output takes no value, 0 or 1")),
                }
            }
            // A named bit of the trace PMU's config, as perf's PMU format
            // terms (`intel_pt/cyc/`) are.
            "track-paused" => {
                if ev.kind != EventKind::SwTrace {
                    return Err(term_err(
                        input,
                        t,
                        format!("track-paused is a term of {SWTRACE_PMU}//"),
                    ));
                }
                track_paused = match t.value {
                    TermValue::Flag | TermValue::Num(1) => Some(true),
                    TermValue::Num(0) => Some(false),
                    _ => return Err(term_err(input, t, "track-paused takes no value, 0 or 1")),
                }
            }
            // The trace PMU's timing field (config bits 1-2 and 32-63), as
            // `intel_pt/mtc_period=N/` sets a field of PT's config.
            "timing" => {
                if ev.kind != EventKind::SwTrace {
                    return Err(term_err(
                        input,
                        t,
                        format!("timing is a term of {SWTRACE_PMU}//"),
                    ));
                }
                let parsed = match &t.value {
                    TermValue::Str(s) => Timing::parse(s),
                    _ => None,
                };
                timing = Some(parsed.ok_or_else(|| {
                    term_err(
                        input,
                        t,
                        "timing takes full, entry or periodic:N (N >= 1 packets per timestamp)",
                    )
                })?);
            }
            other => {
                return Err(term_err(
                    input,
                    t,
                    format!("unknown term '{other}' (known: {})", TERMS.join(", ")),
                ));
            }
        }
    }
    if let Some(on) = track_paused {
        let bit = perfaux_pmus::swtrace::CONFIG_TRACK_PAUSED;
        let config = ev.config.unwrap_or(0) & !bit;
        ev.config = Some(if on { config | bit } else { config });
    }
    if let Some(timing) = timing {
        use perfaux_pmus::swtrace::{CONFIG_TIMING_FIELDS, timing_config};
        ev.config = Some(ev.config.unwrap_or(0) & !CONFIG_TIMING_FIELDS | timing_config(timing));
    }
    if ev.period.is_some() && ev.freq.is_some() {
        let t = spec.term("freq").map_or(spec.pos, |t| t.pos);
        return Err(EventError {
            input: input.to_string(),
            pos: t,
            token: "freq".into(),
            msg: "period= and freq= exclude each other".into(),
        });
    }
    let m = &spec.modifiers;
    // perf: u alone excludes kernel and hv; k or h without u excludes user. A tracepoint is
    // the kernel's own: it fires in kernel mode (`:u` keeps only uprobes').
    if let EventKind::Tracepoint { .. } = ev.kind {
        ev.user_only = m.has('u') && !m.has('k');
    } else if (m.has('k') || m.has('h')) && !m.has('u') {
        return Err(EventError {
            input: input.to_string(),
            pos: m.pos,
            token: m.letters.clone(),
            msg: "perfaux traces user space only: a kernel- or hypervisor-only event records nothing (use :u)".into(),
        });
    }
    Ok(ev)
}

/// perf's rules for events that need the AUX event as their group leader.
fn apply_aux_rules(events: &mut [Event], aux_sample: Option<u32>) -> Result<(), String> {
    let mut last_aux: Option<usize> = None;
    for i in 0..events.len() {
        let is_aux = events[i].kind.is_aux();
        if is_aux {
            last_aux = Some(i);
        }
        let act = events[i].aux_action;
        if act.contains(AuxAction::START_PAUSED) && !is_aux {
            return Err(format!(
                "event '{}': Only AUX area event can have aux-action=start-paused",
                events[i].text
            ));
        }
        let needs_leader = act.intersects(AuxAction::PAUSE | AuxAction::RESUME);
        if needs_leader && is_aux {
            return Err(format!(
                "event '{}': an AUX area event cannot have aux-action=pause or resume",
                events[i].text
            ));
        }
        if needs_leader && events[i].leader == i {
            // Auto-grouping: perf puts an aux-action event that is not in an
            // explicit group behind the AUX event before it.
            if let Some(a) = last_aux {
                events[i].leader = events[a].leader;
            }
        }
        let leader = events[i].leader;
        if needs_leader && (leader == i || !events[leader].kind.is_aux()) {
            return Err(format!(
                "event '{}': Events with aux-action must have AUX area event group leader",
                events[i].text
            ));
        }
        if events[i].aux_sample_size != 0 && (leader == i || !events[leader].kind.is_aux()) {
            return Err(format!(
                "event '{}': Cannot add AUX area sampling because group leader is not an AUX area event",
                events[i].text
            ));
        }
    }
    if let Some(size) = aux_sample {
        let mut any = false;
        for i in 0..events.len() {
            let leader = events[i].leader;
            if leader != i && events[leader].kind.is_aux() {
                if events[i].aux_sample_size == 0 {
                    events[i].aux_sample_size = size;
                }
                any = true;
            }
        }
        if !any {
            return Err("--aux-sample needs an event grouped behind an AUX area event, e.g. -e '{swtrace//,uevent}'".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
