//! Reading back what the layer recorded, with perfaux's own readers (the decoder of the
//! trace, the perf.data reader), and a layer that counts what it sees beside it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use perfaux_abi::records::Record;
use perfaux_perfdata::PerfDataReader;
use perfaux_perfdata::uevent_sample::uevent_from_raw;
use perfaux_swtrace::Event;
use perfaux_swtrace::table::ProbeTable;
use tracing_core::span::{Attributes, Id};
use tracing_core::{Event as TracingEvent, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Recordings are one at a time per process: the tests of a binary take turns.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a recording holds: calls entered and returned per probe name, and uevents (type,
/// payload text) in file order.
#[derive(Debug, Default)]
pub struct Recorded {
    pub enters: BTreeMap<String, u64>,
    pub exits: BTreeMap<String, u64>,
    pub uevents: Vec<(u32, String)>,
    /// The threads whose trace has calls of each name.
    pub threads: BTreeMap<String, std::collections::BTreeSet<u32>>,
}

pub fn read(file: &Path) -> Recorded {
    let mut out = Recorded::default();
    let reader = PerfDataReader::open(file).unwrap();
    let section = reader.trace_section().expect("a trace section").unwrap();
    let table = ProbeTable::from_bytes(section.probe_table()).unwrap();
    for w in section.windows() {
        let w = w.unwrap();
        let mut bytes = Vec::new();
        section.window_bytes(&w).read_to_end(&mut bytes).unwrap();
        let tid = w.first.header.tid;
        let mut open: Vec<String> = Vec::new();
        for e in perfaux_swtrace::decode(&bytes) {
            match e {
                Event::Enter { id, .. } => {
                    let name = table.get(id).map_or(format!("#{id}"), |p| p.name.clone());
                    *out.enters.entry(name.clone()).or_default() += 1;
                    out.threads.entry(name.clone()).or_default().insert(tid);
                    open.push(name);
                }
                Event::Exit { .. } => {
                    if let Some(name) = open.pop() {
                        *out.exits.entry(name).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
    }
    let mut reader = PerfDataReader::open(file).unwrap();
    while let Some(rec) = reader.next_record().unwrap() {
        if let Some(Ok(Record::Sample(s))) = rec.parse()
            && let Some((ty, data)) = s.raw.as_ref().and_then(uevent_from_raw)
        {
            out.uevents.push((ty, String::from_utf8(data).unwrap()));
        }
    }
    out
}

impl Recorded {
    /// The payloads of the uevents of type `ty`, in file order.
    pub fn payloads(&self, ty: u32) -> Vec<&str> {
        self.uevents
            .iter()
            .filter(|(t, _)| *t == ty)
            .map(|(_, p)| p.as_str())
            .collect()
    }
}

/// perf 6.1's `perf script` of `file`, which must succeed and warn of nothing; its output.
pub fn perf_script(file: &Path, home: &Path) -> String {
    let o = perfaux_testutil::perf_command(&["script", "-i", file.to_str().unwrap()], home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "", "perf warned");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Snapshots in the file: the chunks that begin one.
pub fn snapshots(file: &Path) -> usize {
    let reader = PerfDataReader::open(file).unwrap();
    let section = reader.trace_section().expect("a trace section").unwrap();
    section
        .chunks()
        .map(Result::unwrap)
        .filter(|c| c.header.flags & perfaux_perfdata::trace_section::SNAPSHOT_BEGIN != 0)
        .count()
}

/// Counts span entries by `target::name` and events by message, as the layer beside it
/// sees them.
#[derive(Clone, Default)]
pub struct Counting {
    pub enters: Arc<Mutex<BTreeMap<String, u64>>>,
    pub events: Arc<Mutex<u64>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Counting {
    fn on_new_span(&self, _: &Attributes<'_>, _: &Id, _: Context<'_, S>) {}

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let name = format!("{}::{}", span.metadata().target(), span.name());
        *self.enters.lock().unwrap().entry(name).or_default() += 1;
    }

    fn on_event(&self, _: &TracingEvent<'_>, _: Context<'_, S>) {
        *self.events.lock().unwrap() += 1;
    }
}
