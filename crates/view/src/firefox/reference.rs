//! The Firefox export as fxprof-processed-profile builds it, in memory:
//! the oracle the streaming writer ([`super::FirefoxProfile`]) is compared
//! with (built for tests only, and for other crates' tests with the
//! `fxprof-oracle` feature). It is the exporter this crate had before the
//! streaming one.

use std::collections::HashMap;
use std::io::Write;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval,
    StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle,
    Timestamp,
};

use crate::event::{FuncId, Names, Sink, ViewEvent, uevent_label};
use crate::offcpu::ThreadSwitches;
use crate::perfetto::payload_text;

/// A call, as an interval marker named after the function.
struct CallMarker {
    name: StringHandle,
    category: CategoryHandle,
}

impl StaticSchemaMarker for CallMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "Call";
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.name
    }
    fn number_field_value(&self, _: u32) -> f64 {
        0.0
    }
}

/// A uevent, a loss or a pause/resume transition: a named marker with a
/// number and a text.
struct InfoMarker {
    name: StringHandle,
    category: CategoryHandle,
    number: f64,
    text: StringHandle,
}

impl StaticSchemaMarker for InfoMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "PerfauxEvent";
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.text}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "number",
            label: "Type or count",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "text",
            label: "Payload",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.text
    }
    fn number_field_value(&self, _: u32) -> f64 {
        self.number
    }
}

struct ThreadState {
    handle: ThreadHandle,
    /// Open calls: (function, stack handle, start).
    calls: Vec<(FuncId, Option<StackHandle>, u64)>,
    pause_start: Option<u64>,
}

/// Builds the profile with the crate as the pass hands events over.
pub struct ReferenceProfile {
    profile: Profile,
    trace_cat: CategoryHandle,
    marker_cat: CategoryHandle,
    processes: HashMap<u32, ProcessHandle>,
    threads: HashMap<u32, ThreadState>,
    comms: HashMap<u32, (u32, String)>,
    switches: ThreadSwitches,
}

fn ts(ns: u64) -> Timestamp {
    Timestamp::from_nanos_since_reference(ns)
}

impl ReferenceProfile {
    /// An empty profile of `product` (the recorded command).
    pub fn new(product: &str) -> Self {
        let mut profile = Profile::new(
            product,
            ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
            SamplingInterval::from_nanos(250_000),
        );
        let trace_cat = profile.add_category("Traced calls", CategoryColor::Blue);
        let marker_cat = profile.add_category("perfaux", CategoryColor::Orange);
        ReferenceProfile {
            profile,
            trace_cat,
            marker_cat,
            processes: HashMap::new(),
            threads: HashMap::new(),
            comms: HashMap::new(),
            switches: ThreadSwitches::default(),
        }
    }

    fn thread(&mut self, pid: u32, tid: u32, time: u64) -> &mut ThreadState {
        if !self.threads.contains_key(&tid) {
            let pname = self
                .comms
                .get(&pid)
                .map_or_else(|| format!("pid {pid}"), |c| c.1.clone());
            let process = *self
                .processes
                .entry(pid)
                .or_insert_with(|| self.profile.add_process(&pname, pid, ts(time)));
            let handle = self.profile.add_thread(process, tid, ts(time), tid == pid);
            if let Some((_, c)) = self.comms.get(&tid) {
                self.profile.set_thread_name(handle, c);
            }
            self.threads.insert(
                tid,
                ThreadState {
                    handle,
                    calls: Vec::new(),
                    pause_start: None,
                },
            );
        }
        self.threads.get_mut(&tid).expect("inserted above")
    }

    fn frame(&mut self, label: &str) -> FrameInfo {
        let s = self.profile.intern_string(label);
        FrameInfo {
            frame: Frame::Label(s),
            category_pair: self.trace_cat.into(),
            flags: FrameFlags::empty(),
        }
    }

    fn info(
        &mut self,
        pid: u32,
        tid: u32,
        timing: (u64, Option<u64>),
        name: &str,
        n: f64,
        text: &str,
    ) {
        let handle = self.thread(pid, tid, timing.0).handle;
        let m = InfoMarker {
            name: self.profile.intern_string(name),
            category: self.marker_cat,
            number: n,
            text: self.profile.intern_string(text),
        };
        let timing = match timing {
            (t, None) => MarkerTiming::Instant(ts(t)),
            (a, Some(b)) => MarkerTiming::Interval(ts(a), ts(b)),
        };
        self.profile.add_marker(handle, timing, m);
    }

    fn pid(&self, tid: u32) -> u32 {
        self.comms.get(&tid).map_or(tid, |c| c.0)
    }

    /// Writes the profile as JSON, with the threads' intervals off the CPU as markers.
    pub fn write(mut self, out: impl Write) -> std::io::Result<()> {
        for (pid, tid, start, end) in self.switches.take_intervals() {
            self.info(pid, tid, (start, Some(end)), "off-CPU", 0.0, "switched out");
        }
        serde_json::to_writer(out, &self.profile).map_err(std::io::Error::other)
    }
}

impl Sink for ReferenceProfile {
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { pid, tid, comm } => {
                self.comms.insert(tid, (pid, comm.to_owned()));
                if let Some(t) = self.threads.get(&tid) {
                    self.profile.set_thread_name(t.handle, comm);
                }
            }
            ViewEvent::Enter {
                pid,
                tid,
                time,
                func,
                ..
            } => {
                let handle = self.thread(pid, tid, time).handle;
                let parent = self.threads[&tid].calls.last().and_then(|c| c.1);
                let frame = self.frame(names.name(func));
                let f = self.profile.intern_frame(handle, frame);
                let stack = self.profile.intern_stack(handle, parent, f);
                self.threads
                    .get_mut(&tid)
                    .expect("made by thread()")
                    .calls
                    .push((func, Some(stack), time));
                self.profile
                    .add_sample(handle, ts(time), Some(stack), CpuDelta::ZERO, 1);
            }
            ViewEvent::Exit { pid, tid, time, .. } => {
                let t = self.thread(pid, tid, time);
                let handle = t.handle;
                if let Some((func, _, start)) = t.calls.pop() {
                    let parent = t.calls.last().and_then(|c| c.1);
                    let m = CallMarker {
                        name: self.profile.intern_string(names.name(func)),
                        category: self.trace_cat,
                    };
                    self.profile
                        .add_marker(handle, MarkerTiming::Interval(ts(start), ts(time)), m);
                    self.profile
                        .add_sample(handle, ts(time), parent, CpuDelta::ZERO, 1);
                }
            }
            ViewEvent::Sample {
                pid,
                tid,
                time,
                stack,
                ..
            } => {
                let handle = self.thread(pid, tid, time).handle;
                let mut parent = None;
                for &f in stack.iter().rev() {
                    let frame = self.frame(names.name(f));
                    let fh = self.profile.intern_frame(handle, frame);
                    parent = Some(self.profile.intern_stack(handle, parent, fh));
                }
                self.profile
                    .add_sample(handle, ts(time), parent, CpuDelta::ZERO, 1);
            }
            ViewEvent::Uevent {
                pid,
                tid,
                time,
                ty,
                type_name,
                payload,
            } => self.info(
                pid,
                tid,
                (time, None),
                &uevent_label(ty, type_name),
                f64::from(ty),
                &payload_text(payload),
            ),
            ViewEvent::PauseResume {
                tid,
                time,
                pause,
                dropped,
            } => {
                let pid = self.pid(tid);
                if dropped {
                    let n = if pause {
                        "dropped pause"
                    } else {
                        "dropped resume"
                    };
                    self.info(pid, tid, (time, None), n, 0.0, "");
                } else if pause {
                    self.thread(pid, tid, time).pause_start = Some(time);
                } else if let Some(start) = self.thread(pid, tid, time).pause_start.take() {
                    self.info(pid, tid, (start, Some(time)), "paused", 0.0, "");
                }
            }
            ViewEvent::Stopped { tid, time } => {
                let pid = self.pid(tid);
                self.info(pid, tid, (time, None), "trace stopped", 0.0, "");
            }
            ViewEvent::Snapshot {
                tid,
                begin,
                end,
                bytes,
                ..
            } => {
                let pid = self.pid(tid);
                self.info(pid, tid, (begin, Some(end)), "snapshot", bytes as f64, "");
            }
            ViewEvent::Lost {
                tid,
                time,
                kind,
                count,
            } => {
                let pid = self.pid(tid);
                self.info(pid, tid, (time, None), kind.name(), count as f64, "");
            }
            ViewEvent::Switch { .. } => self.switches.push_event(ev),
            ViewEvent::Tag { .. } => {}
        }
        Ok(())
    }
}
