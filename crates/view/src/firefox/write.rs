//! The profile's JSON, key for key as fxprof-processed-profile 0.8
//! serializes its `Profile` (profile.rs, thread.rs and the table modules
//! of that crate): the meta (version fields, categories, marker schemas),
//! then the threads, processes ordered by start time and pid, threads by
//! main first, start time, name and tid. The spooled columns are copied
//! from the spool where they go.

use std::io::{self, BufWriter, Write};

use super::json::{f64_elem, f64_ms, str_elem};
use super::markers::TRACE_CATEGORY;
use super::{FirefoxProfile, Process, Thread};

/// The sampling interval the profile declares (a traced thread's samples
/// are at stack changes, not at an interval; the crate needs one).
const INTERVAL_NS: u64 = 250_000;

/// The categories: the crate's "Other", then the exporter's two.
const CATEGORIES: &str = r#"[{"name":"Other","color":"grey","subcategories":["Other"]},{"name":"Traced calls","color":"blue","subcategories":["Other"]},{"name":"perfaux","color":"orange","subcategories":["Other"]}]"#;

/// The call marker's schema.
const CALL_SCHEMA: &str = r#"{"name":"Call","display":["marker-chart","marker-table"],"chartLabel":"{marker.name}","fields":[]}"#;

/// The schema of uevent, loss, pause and snapshot markers.
const INFO_SCHEMA: &str = r#"{"name":"PerfauxEvent","display":["marker-chart","marker-table"],"chartLabel":"{marker.name}","tableLabel":"{marker.name} {marker.data.text}","fields":[{"key":"number","label":"Type or count","format":"integer"},{"key":"text","label":"Payload","format":"unique-string","searchable":true}]}"#;

/// Writes `p` to `out`.
pub(super) fn profile(mut p: FirefoxProfile, out: impl Write) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(64 * 1024, out);
    let mut b = Vec::new();
    b.extend_from_slice(b"{\"meta\":");
    meta(&p, &mut b);
    b.extend_from_slice(b",\"libs\":[],\"threads\":[");
    out.write_all(&b)?;
    let order = thread_order(&p.processes, &p.threads);
    let mut threads: Vec<Option<Thread>> = std::mem::take(&mut p.threads)
        .into_iter()
        .map(Some)
        .collect();
    for (n, i) in order.into_iter().enumerate() {
        if n > 0 {
            out.write_all(b",")?;
        }
        let t = threads[i].take().expect("each thread once");
        thread(&mut p, t, &mut out)?;
    }
    out.write_all(b"],\"pages\":[],\"profilerOverhead\":[],\"counters\":[]}")?;
    out.flush()
}

fn meta(p: &FirefoxProfile, b: &mut Vec<u8>) {
    b.extend_from_slice(b"{\"categories\":");
    b.extend_from_slice(CATEGORIES.as_bytes());
    b.extend_from_slice(
        br#","debug":false,"extensions":{"baseURL":[],"id":[],"length":0,"name":[]},"interval":"#,
    );
    // As the crate computes it: seconds, then milliseconds.
    f64_elem(b, INTERVAL_NS as f64 / 1_000_000_000.0 * 1000.0);
    b.extend_from_slice(br#","preprocessedProfileVersion":55,"processType":0,"product":"#);
    str_elem(b, &p.product);
    b.extend_from_slice(
        r#","sampleUnits":{"eventDelay":"ms","threadCPUDelta":"µs","time":"ms"},"startTime":0.0,"symbolicated":false,"pausedRanges":[],"version":24,"usesOnlyOneStackType":true,"sourceCodeIsNotOnSearchfox":true,"markerSchema":["#
            .as_bytes(),
    );
    // Sorted by type name, as the crate sorts them.
    let schemas: Vec<&str> = [(p.used_call, CALL_SCHEMA), (p.used_info, INFO_SCHEMA)]
        .into_iter()
        .filter_map(|(used, s)| used.then_some(s))
        .collect();
    b.extend_from_slice(schemas.join(",").as_bytes());
    b.extend_from_slice(b"]}");
}

/// The threads' order in the JSON.
fn thread_order(processes: &[Process], threads: &[Thread]) -> Vec<usize> {
    let mut procs: Vec<usize> = (0..processes.len()).collect();
    procs.sort_by(|&a, &b| {
        let (a, b) = (&processes[a], &processes[b]);
        a.start
            .cmp(&b.start)
            .then_with(|| a.pid.to_string().cmp(&b.pid.to_string()))
    });
    let mut of_process: Vec<Vec<usize>> = vec![Vec::new(); processes.len()];
    for (i, t) in threads.iter().enumerate() {
        of_process[t.process].push(i);
    }
    let mut order = Vec::with_capacity(threads.len());
    for p in procs {
        let mut ts = std::mem::take(&mut of_process[p]);
        ts.sort_by(|&a, &b| {
            let (a, b) = (&threads[a], &threads[b]);
            (!a.is_main)
                .cmp(&!b.is_main)
                .then(a.start.cmp(&b.start))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.tid.to_string().cmp(&b.tid.to_string()))
        });
        order.extend(ts);
    }
    order
}

/// One thread's object.
fn thread(p: &mut FirefoxProfile, t: Thread, out: &mut impl Write) -> io::Result<()> {
    let process = &p.processes[t.process];
    let mut b = Vec::new();
    b.push(b'{');
    t.tables.frame_and_func_tables(&mut b, TRACE_CATEGORY);
    b.extend_from_slice(b",\"markers\":");
    out.write_all(&b)?;
    t.markers.write(&p.spool, out)?;
    b.clear();
    b.extend_from_slice(b",\"name\":");
    match (&t.name, t.is_main) {
        (_, true) => str_elem(&mut b, &process.name),
        (Some(n), false) => str_elem(&mut b, n),
        (None, false) => str_elem(&mut b, &format!("Thread <{}>", t.tid)),
    }
    b.extend_from_slice(
        format!(
            r#","isMainThread":{},"nativeSymbols":{{"length":0,"address":[],"functionSize":[],"libIndex":[],"name":[]}},"pausedRanges":[],"pid":"{}","processName":"#,
            t.is_main, process.pid
        )
        .as_bytes(),
    );
    str_elem(&mut b, &process.name);
    b.extend_from_slice(br#","processShutdownTime":null,"processStartupTime":"#);
    f64_ms(&mut b, process.start);
    b.extend_from_slice(br#","processType":"default","registerTime":"#);
    f64_ms(&mut b, t.start);
    b.extend_from_slice(
        br#","resourceTable":{"length":0,"lib":[],"name":[],"host":[],"type":[]},"samples":"#,
    );
    out.write_all(&b)?;
    t.samples.write(&mut p.spool, out)?;
    b.clear();
    b.push(b',');
    t.tables.stack_table(&mut b);
    b.extend_from_slice(b",\"stringArray\":[");
    out.write_all(&b)?;
    p.spool.copy(&t.tables.strings, 1, out)?;
    write!(
        out,
        r#"],"tid":"{}","unregisterTime":null,"showMarkersInTimeline":false}}"#,
        t.tid
    )
}
