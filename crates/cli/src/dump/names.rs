//! Record type names as perf prints them (tools/perf/util/event.c
//! `perf_event__names`): `PERF_RECORD_<name>` in the dump, `<name> events`
//! in the stats table.

use perfaux_abi::consts::ext::PERF_RECORD_UEVENT;

/// perf's name for record type `t`; `UNKNOWN` where perf 6.1 has none.
pub fn record_name(t: u32) -> &'static str {
    match t {
        0 => "TOTAL",
        1 => "MMAP",
        2 => "LOST",
        3 => "COMM",
        4 => "EXIT",
        5 => "THROTTLE",
        6 => "UNTHROTTLE",
        7 => "FORK",
        8 => "READ",
        9 => "SAMPLE",
        10 => "MMAP2",
        11 => "AUX",
        12 => "ITRACE_START",
        13 => "LOST_SAMPLES",
        14 => "SWITCH",
        15 => "SWITCH_CPU_WIDE",
        16 => "NAMESPACES",
        17 => "KSYMBOL",
        18 => "BPF_EVENT",
        19 => "CGROUP",
        20 => "TEXT_POKE",
        21 => "AUX_OUTPUT_HW_ID",
        64 => "ATTR",
        65 => "EVENT_TYPE",
        66 => "TRACING_DATA",
        67 => "BUILD_ID",
        68 => "FINISHED_ROUND",
        69 => "ID_INDEX",
        70 => "AUXTRACE_INFO",
        71 => "AUXTRACE",
        72 => "AUXTRACE_ERROR",
        73 => "THREAD_MAP",
        74 => "CPU_MAP",
        75 => "STAT_CONFIG",
        76 => "STAT",
        77 => "STAT_ROUND",
        78 => "EVENT_UPDATE",
        79 => "TIME_CONV",
        80 => "FEATURE",
        81 => "COMPRESSED",
        82 => "FINISHED_INIT",
        // perfaux's extension record (seed 002); perf 6.1 has no name for it.
        PERF_RECORD_UEVENT => "UEVENT",
        _ => "UNKNOWN",
    }
}

/// The slot of type `t` in the stats table (perf's `nr_events[]` runs to
/// `PERF_RECORD_HEADER_MAX`); perfaux's uevent gets the slot after it.
pub fn stats_slot(t: u32) -> usize {
    match t {
        0..=82 => t as usize,
        PERF_RECORD_UEVENT => STATS_SLOTS - 1,
        _ => STATS_SLOTS - 2,
    }
}

/// Number of stats slots: perf's 83 types, one for unknown types, one for uevents.
pub const STATS_SLOTS: usize = 85;

/// The record type a stats slot stands for (inverse of [`stats_slot`]).
pub fn slot_type(slot: usize) -> u32 {
    match slot {
        s if s == STATS_SLOTS - 1 => PERF_RECORD_UEVENT,
        s if s == STATS_SLOTS - 2 => u32::MAX,
        s => s as u32,
    }
}
