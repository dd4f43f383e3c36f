//! `perfaux export --format chrome`: Chrome's trace-event JSON (the
//! "JSON Array/Object Format" chrome://tracing, Perfetto and speedscope
//! read), written event by event: calls as `B`/`E` pairs, samples, uevents,
//! losses and snapshots as instants (`i`), pause windows as `B`/`E` on a
//! track of their own, thread names as `M` metadata.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use crate::event::{FuncId, Names, Sink, ViewEvent, sample_label, uevent_label};
use crate::perfetto::payload_text;

/// Writes the JSON as the pass hands events over.
pub struct ChromeWriter<W: Write> {
    out: W,
    first: bool,
    /// Each function's name as a JSON string, made once: calls are most of
    /// the events and are written without building a JSON value.
    quoted: Vec<Option<String>>,
    /// tid -> pid, for the marker track.
    pids: HashMap<u32, u32>,
}

/// Microseconds, the format's unit, from nanoseconds (kept exact).
fn us(ns: u64) -> serde_json::Value {
    json!(ns as f64 / 1000.0)
}

/// The pseudo thread id of a thread's pause/resume and trace-data track,
/// so that its slices do not nest with the calls.
fn marker_tid(tid: u32) -> u64 {
    (1u64 << 32) | u64::from(tid)
}

impl<W: Write> ChromeWriter<W> {
    /// Starts the JSON object in `out`.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(ChromeWriter {
            out,
            first: true,
            quoted: Vec::new(),
            pids: HashMap::new(),
        })
    }

    fn put(&mut self, v: serde_json::Value) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, &v).map_err(std::io::Error::other)
    }

    fn call(
        &mut self,
        ph: char,
        names: &Names,
        call: (u32, u32, u64, FuncId),
    ) -> std::io::Result<()> {
        let (pid, tid, time, func) = call;
        let i = func.0 as usize;
        if self.quoted.len() <= i {
            self.quoted.resize(i + 1, None);
        }
        let name = self.quoted[i].get_or_insert_with(|| json!(names.name(func)).to_string());
        let sep = if self.first { "" } else { ",\n" };
        self.first = false;
        write!(
            self.out,
            "{sep}{{\"ph\":\"{ph}\",\"name\":{name},\"pid\":{pid},\"tid\":{tid},\"ts\":{}.{:03}}}",
            time / 1000,
            time % 1000
        )
    }

    /// Closes the JSON and hands the output back.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Sink for ChromeWriter<W> {
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        let v = match *ev {
            ViewEvent::Comm { pid, tid, comm } => {
                self.pids.insert(tid, pid);
                self.put(
                    json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": comm}}),
                )?;
                json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": marker_tid(tid),
                    "args": {"name": format!("{comm} {tid}: pause/resume, trace data")}})
            }
            ViewEvent::Enter {
                pid,
                tid,
                time,
                func,
                ..
            } => return self.call('B', names, (pid, tid, time, func)),
            ViewEvent::Exit {
                pid,
                tid,
                time,
                func,
                ..
            } => return self.call('E', names, (pid, tid, time, func)),
            ViewEvent::Sample {
                pid,
                tid,
                time,
                event,
                period,
                stack,
            } => {
                let (name, chain) = sample_label(names, event, stack);
                json!({"ph": "i", "s": "t", "name": name, "pid": pid, "tid": tid,
                    "ts": us(time), "args": {"callchain": chain, "period": period}})
            }
            ViewEvent::Uevent {
                pid,
                tid,
                time,
                ty,
                type_name,
                payload,
            } => json!({"ph": "i", "s": "t",
                "name": uevent_label(ty, type_name),
                "pid": pid, "tid": tid, "ts": us(time),
                "args": {"type": ty, "payload": payload_text(payload)}}),
            ViewEvent::PauseResume {
                tid,
                time,
                pause,
                dropped,
            } => {
                let ph = match (pause, dropped) {
                    (_, true) => "i",
                    (true, false) => "B",
                    (false, false) => "E",
                };
                let name = match (pause, dropped) {
                    (true, true) => "dropped pause",
                    (false, true) => "dropped resume",
                    _ => "paused",
                };
                json!({"ph": ph, "s": "t", "name": name, "pid": self.pids.get(&tid).copied().unwrap_or(tid), "tid": marker_tid(tid),
                    "ts": us(time)})
            }
            ViewEvent::Stopped { tid, time } => {
                json!({"ph": "i", "s": "t", "name": "trace stopped", "pid": self.pids.get(&tid).copied().unwrap_or(tid),
                    "tid": marker_tid(tid), "ts": us(time)})
            }
            ViewEvent::Snapshot {
                tid,
                begin,
                end,
                bytes,
            } => {
                json!({"ph": "X", "name": "snapshot", "pid": self.pids.get(&tid).copied().unwrap_or(tid), "tid": marker_tid(tid),
                "ts": us(begin), "dur": us(end - begin), "args": {"bytes": bytes}})
            }
            ViewEvent::Lost {
                tid,
                time,
                kind,
                count,
            } => {
                json!({"ph": "i", "s": "t", "name": kind.name(), "pid": self.pids.get(&tid).copied().unwrap_or(tid),
                "tid": marker_tid(tid), "ts": us(time), "args": {"count": count}})
            }
        };
        self.put(v)
    }
}
