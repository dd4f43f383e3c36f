//! Parser and resolver tests: the grammar of perf's `-e` (perf-record.txt,
//! perf-list.txt) and the aux-action rules of perf_event_open (kernel/events/core.c).

use super::*;
use crate::events::parse::{TermValue, parse_events};

fn one(s: &str) -> EventSpec {
    let mut v = parse_events(s, 0).unwrap();
    assert_eq!(v.len(), 1, "{s}");
    v.remove(0)
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn pmu_form_with_terms_and_modifiers() {
    let e = one("swtrace/period=0x10,name=tr,aux-output/u");
    assert_eq!(e.name, "swtrace");
    assert!(e.pmu_form);
    assert_eq!(e.terms.len(), 3);
    assert_eq!(e.terms[0].value, TermValue::Num(16));
    assert_eq!(e.terms[1].value, TermValue::Str("tr".into()));
    assert_eq!(e.terms[2].value, TermValue::Flag);
    assert_eq!(e.terms[2].pos, "swtrace/period=0x10,name=tr,".len());
    assert_eq!(e.modifiers.letters, "u");
}

#[test]
fn empty_pmu_terms() {
    let e = one("swtrace//");
    assert!(e.pmu_form && e.terms.is_empty() && e.sub.is_none());
}

/// perf's choice between a tracepoint and modifiers: a word after ':' with a letter no
/// modifier is names a tracepoint of that system; one of modifier letters alone modifies.
#[test]
fn tracepoint_names_versus_modifiers() {
    for (text, name, sub, mods) in [
        ("sched:sched_switch", "sched", Some("sched_switch"), ""),
        (
            "syscalls:sys_enter_write:u",
            "syscalls",
            Some("sys_enter_write"),
            "u",
        ),
        ("probe_libc:malloc", "probe_libc", Some("malloc"), ""),
        ("task-clock:u", "task-clock", None, "u"),
        ("cpu-clock:ukhp", "cpu-clock", None, "ukhp"),
    ] {
        let e = one(text);
        assert_eq!(e.name, name, "{text}");
        assert_eq!(e.sub.as_deref(), sub, "{text}");
        assert_eq!(e.modifiers.letters, mods, "{text}");
    }
}

#[test]
fn subsystem_names_versus_modifiers() {
    // `probe:FUNC` is a name like a tracepoint; `task-clock:u` is a modifier.
    let e = one("probe:fib:u");
    assert_eq!(
        (
            e.name.as_str(),
            e.sub.as_deref(),
            e.modifiers.letters.as_str()
        ),
        ("probe", Some("fib"), "u")
    );
    let e = one("task-clock:u");
    assert_eq!((e.sub, e.modifiers.letters.as_str()), (None, "u"));
    let e = one("uevent:7");
    assert_eq!(e.sub.as_deref(), Some("7"));
}

#[test]
fn groups_and_lists_span_several_arguments() {
    let v = parse_events("{swtrace//,uevent},task-clock", 0).unwrap();
    assert_eq!(
        v.iter().map(|e| e.group).collect::<Vec<_>>(),
        [Some(0), Some(0), None]
    );
    // A second -e continues the numbering.
    let v = parse_events("{swtrace//,probe:a}", 5).unwrap();
    assert_eq!(v[1].group, Some(5));
    let v = parse_events("{swtrace//,uevent}:u", 0).unwrap();
    assert!(v.iter().all(|e| e.modifiers.has('u')));
}

#[test]
fn syntax_errors_name_the_token_and_position() {
    let e = parse_events("swtrace/period=1", 0).unwrap_err();
    assert_eq!(e.pos, 7, "{e}");
    let e = parse_events("task-clock,,uevent", 0).unwrap_err();
    assert_eq!(e.pos, 11, "{e}");
    let e = parse_events("task-clock:q", 0).unwrap_err();
    assert_eq!((e.pos, e.token.as_str()), (11, "q"));
    let e = parse_events("{swtrace//,uevent", 0).unwrap_err();
    assert_eq!(e.pos, 0);
    let e = parse_events("", 0).unwrap_err();
    assert_eq!(e.pos, 0);
    let e = parse_events("swtrace/period=/", 0).unwrap_err();
    assert_eq!(e.pos, 15, "{e}");
    assert!(e.to_string().contains("position 15"));
}

#[test]
fn unknown_event_and_term_are_one_line_errors_with_position() {
    let e = resolve_events(&args(&["task-clock,bogus"]), None).unwrap_err();
    assert!(
        e.contains("position 11") && e.contains("'bogus'") && e.contains("unknown event"),
        "{e}"
    );
    assert!(!e.contains('\n'));
    let e = resolve_events(&args(&["swtrace/frobnicate=3/"]), None).unwrap_err();
    assert!(
        e.contains("position 8") && e.contains("'frobnicate'") && e.contains("unknown term"),
        "{e}"
    );
    let e = resolve_events(&args(&["swtrace/aux-action=sometimes/"]), None).unwrap_err();
    assert!(e.contains("aux-action"), "{e}");
    let e = resolve_events(&args(&["swtrace/period=abc/"]), None).unwrap_err();
    assert!(e.contains("takes a number"), "{e}");
    let e = resolve_events(&args(&["task-clock:k"]), None).unwrap_err();
    assert!(e.contains("user space"), "{e}");
}

#[test]
fn names_resolve_to_kinds_and_terms_apply() {
    let v = resolve_events(
        &args(&[
            "swtrace/aux-action=start-paused/",
            "probe:fib/period=3,name=fibs/",
            "uevent:2",
            "task-clock",
        ]),
        None,
    )
    .unwrap();
    assert_eq!(v[0].kind, EventKind::SwTrace);
    let u = resolve_events(&args(&["uevent_aux//"]), None).unwrap();
    assert!(u[0].kind.is_aux());
    assert_eq!(v[0].aux_action, AuxAction::START_PAUSED);
    assert_eq!(v[1].kind, EventKind::Probe { func: "fib".into() });
    assert_eq!((v[1].period, v[1].name.as_str()), (Some(3), "fibs"));
    assert_eq!(
        v[2].kind,
        EventKind::Uevent {
            type_: Some("2".into())
        }
    );
    assert_eq!(
        v[3].kind,
        EventKind::Software {
            config: PERF_COUNT_SW_TASK_CLOCK
        }
    );
}

#[test]
fn aux_action_events_are_auto_grouped_behind_the_preceding_aux_event() {
    // perf-record.txt: "-e intel_pt/aux-action=start-paused/k -e
    // syscalls:sys_enter_newuname/aux-action=resume/ ...": no braces needed.
    let v = resolve_events(
        &args(&[
            "swtrace/aux-action=start-paused/",
            "probe:a/aux-action=resume/",
            "probe:b/aux-action=pause/",
        ]),
        None,
    )
    .unwrap();
    assert_eq!(v.iter().map(|e| e.leader).collect::<Vec<_>>(), [0, 0, 0]);
    assert_eq!(v[1].aux_action, AuxAction::RESUME);
}

#[test]
fn aux_action_without_aux_leader_is_perfs_error() {
    let e = resolve_events(&args(&["probe:a/aux-action=pause/,swtrace//"]), None).unwrap_err();
    assert!(
        e.contains("Events with aux-action must have AUX area event group leader"),
        "{e}"
    );
    // In an explicit group led by a non-AUX event there is no auto-grouping.
    let e = resolve_events(
        &args(&["swtrace//", "{task-clock,probe:a/aux-action=pause/}"]),
        None,
    )
    .unwrap_err();
    assert!(
        e.contains("Events with aux-action must have AUX area event group leader"),
        "{e}"
    );
    let e = resolve_events(&args(&["task-clock/aux-action=start-paused/"]), None).unwrap_err();
    assert!(
        e.contains("Only AUX area event can have aux-action=start-paused"),
        "{e}"
    );
}

#[test]
fn aux_sample_size_goes_to_members_of_aux_led_groups() {
    let v = resolve_events(
        &args(&["{swtrace//,uevent,task-clock}", "probe:x"]),
        Some(4096),
    )
    .unwrap();
    assert_eq!(
        v.iter().map(|e| e.aux_sample_size).collect::<Vec<_>>(),
        [0, 4096, 4096, 0]
    );
    let v = resolve_events(&args(&["{swtrace//,uevent/aux-sample-size=64/}"]), None).unwrap();
    assert_eq!(v[1].aux_sample_size, 64);
    let e = resolve_events(&args(&["uevent/aux-sample-size=64/"]), None).unwrap_err();
    assert!(e.contains("group leader is not an AUX area event"), "{e}");
    let e = resolve_events(&args(&["swtrace//,uevent"]), Some(4096)).unwrap_err();
    assert!(e.contains("--aux-sample"), "{e}");
}

#[test]
fn track_paused_sets_the_trace_pmus_config_bit() {
    let bit = perfaux_pmus::swtrace::CONFIG_TRACK_PAUSED;
    let v = resolve_events(&args(&["swtrace/track-paused/"]), None).unwrap();
    assert_eq!(v[0].config, Some(bit));
    // Whichever term comes first, the named bit applies over config=.
    let v = resolve_events(&args(&["swtrace/track-paused,config=0x4/"]), None).unwrap();
    assert_eq!(v[0].config, Some(0x4 | bit));
    let v = resolve_events(&args(&["swtrace/config=0x5,track-paused=0/"]), None).unwrap();
    assert_eq!(v[0].config, Some(0x4));
    let v = resolve_events(&args(&["swtrace//"]), None).unwrap();
    assert_eq!(v[0].config, None);
    let e = resolve_events(&args(&["probe:fib/track-paused/"]), None).unwrap_err();
    assert!(e.contains("track-paused is a term of swtrace//"), "{e}");
    let e = resolve_events(&args(&["swtrace/track-paused=2/"]), None).unwrap_err();
    assert!(e.contains("takes no value, 0 or 1"), "{e}");
}

#[test]
fn timing_sets_the_trace_pmus_timing_fields() {
    use perfaux_pmus::swtrace::{CONFIG_TRACK_PAUSED, config_timing, timing_config};
    use perfaux_swtrace::Timing;
    let v = resolve_events(&args(&["swtrace/timing=entry/"]), None).unwrap();
    assert_eq!(
        config_timing(v[0].config.unwrap()).unwrap(),
        Timing::EntryOnly
    );
    let v = resolve_events(&args(&["swtrace/timing=periodic:16,track-paused/"]), None).unwrap();
    let config = v[0].config.unwrap();
    assert_eq!(
        config_timing(config).unwrap(),
        Timing::Periodic { every: 16 }
    );
    assert_eq!(config & CONFIG_TRACK_PAUSED, CONFIG_TRACK_PAUSED);
    // The term replaces the timing fields a config= set, and keeps the other bits.
    let raw = timing_config(Timing::Periodic { every: 3 }) | CONFIG_TRACK_PAUSED;
    let v = resolve_events(
        &args(&[&format!("swtrace/config={raw:#x},timing=full/")]),
        None,
    )
    .unwrap();
    assert_eq!(v[0].config, Some(CONFIG_TRACK_PAUSED));
    for bad in [
        "swtrace/timing=periodic:0/",
        "swtrace/timing=sometimes/",
        "swtrace/timing/",
    ] {
        let e = resolve_events(&args(&[bad]), None).unwrap_err();
        assert!(
            e.contains("timing takes full, entry or periodic:N"),
            "{bad}: {e}"
        );
    }
    let e = resolve_events(&args(&["probe:fib/timing=entry/"]), None).unwrap_err();
    assert!(e.contains("timing is a term of swtrace//"), "{e}");
}

/// record's -g, -F and -c reach the events that sample, as perf's reach its own: -g every
/// sampler, -F the clocks, -c every sampler; an event's own freq= or period= stays.
#[test]
fn sampler_options_reach_the_samplers_only() {
    let mut v = resolve_events(
        &args(&[
            "{swtrace//,probe:f}",
            "task-clock",
            "cpu-clock/period=5/",
            "uevent",
        ]),
        None,
    )
    .unwrap();
    let o = SamplerOptions {
        callchain: true,
        freq: Some(999),
        period: None,
        dwarf_stack: Some(4096),
    };
    apply_sampler_options(&mut v, &o).unwrap();
    let got: Vec<_> = v.iter().map(|e| (e.callchain, e.freq, e.period)).collect();
    assert_eq!(
        got,
        [
            (false, None, None),
            (true, None, None),
            (true, Some(999), None),
            (true, None, Some(5)),
            (false, None, None),
        ]
    );
    // `--call-graph dwarf,4096` goes with -g to every sampler.
    let stacks: Vec<_> = v.iter().map(|e| e.dwarf_stack).collect();
    assert_eq!(stacks, [None, Some(4096), Some(4096), Some(4096), None]);
    let mut v = resolve_events(&args(&["{swtrace//,probe:f}", "task-clock"]), None).unwrap();
    let o = SamplerOptions {
        callchain: false,
        freq: None,
        period: Some(10),
        dwarf_stack: None,
    };
    apply_sampler_options(&mut v, &o).unwrap();
    let got: Vec<_> = v.iter().map(|e| (e.callchain, e.period)).collect();
    assert_eq!(got, [(false, None), (false, Some(10)), (false, Some(10))]);
    let mut v = resolve_events(&args(&["swtrace//", "uevent"]), None).unwrap();
    let e = apply_sampler_options(
        &mut v,
        &SamplerOptions {
            callchain: true,
            ..SamplerOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.contains("-e task-clock"), "{e}");
}

/// `--call-graph dwarf[,SIZE]`'s stack dump: perf's 8192 by default, SIZE rounded up to 8
/// bytes, 1 to 65528; fp and lbr copy none.
#[test]
fn a_dwarf_call_graph_copies_perfs_stack_sizes() {
    assert_eq!(dwarf_stack_size("fp"), Ok(None));
    assert_eq!(dwarf_stack_size("lbr"), Ok(None));
    assert_eq!(dwarf_stack_size("dwarf"), Ok(Some(8192)));
    assert_eq!(dwarf_stack_size("dwarf,100"), Ok(Some(104)));
    assert_eq!(dwarf_stack_size("dwarf,0x4000"), Ok(Some(16384)));
    assert_eq!(dwarf_stack_size("dwarf,65528"), Ok(Some(65528)));
    for bad in ["dwarf,0", "dwarf,65529", "dwarf,16K", "dwarf,"] {
        let e = dwarf_stack_size(bad).unwrap_err();
        assert!(e.contains("1 to 65528"), "{bad}: {e}");
    }
}

/// perf's call-graph term: fp, dwarf and lbr ask for the chain, no for none; others are an
/// error naming the term.
#[test]
fn the_call_graph_term_takes_perfs_modes() {
    for (mode, on) in [("fp", true), ("dwarf", true), ("lbr", true), ("no", false)] {
        let v = resolve_events(&args(&[&format!("task-clock/call-graph={mode}/")]), None).unwrap();
        assert_eq!(v[0].callchain, on, "{mode}");
    }
    let e = resolve_events(&args(&["task-clock/call-graph=stack/"]), None).unwrap_err();
    assert!(e.contains("call-graph takes fp, dwarf, lbr or no"), "{e}");
}
