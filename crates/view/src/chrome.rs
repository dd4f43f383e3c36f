//! `perfaux export --format chrome`: Chrome's trace-event JSON (the
//! "JSON Array/Object Format" chrome://tracing, Perfetto and speedscope
//! read), written event by event: calls as `B`/`E` pairs, samples, uevents,
//! losses and snapshots as instants (`i`), pause windows as `B`/`E` on a
//! track of their own, thread names as `M` metadata.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use crate::event::{Call, Names, Sink, ViewEvent, sample_label, uevent_label};
use crate::perfetto::payload_text;

/// Writes the JSON as the pass hands events over.
pub struct ChromeWriter<W: Write> {
    out: W,
    /// The JSON not yet handed to `out`: events are appended here and
    /// written in [`FLUSH_AT`]-sized blocks, not a `write` per field.
    buf: Vec<u8>,
    first: bool,
    /// Each function's name as a JSON string, made once: calls are most of
    /// the events and are written without building a JSON value.
    quoted: Vec<Option<String>>,
    /// tid -> pid, for the marker track.
    pids: HashMap<u32, u32>,
}

/// The buffered JSON's size at which it goes to the output.
const FLUSH_AT: usize = 64 * 1024;

/// Microseconds, the format's unit, from nanoseconds (kept exact).
fn us(ns: u64) -> serde_json::Value {
    json!(ns as f64 / 1000.0)
}

/// The pseudo thread id of a thread's pause/resume and trace-data track,
/// so that its slices do not nest with the calls.
fn marker_tid(tid: u32) -> u64 {
    (1u64 << 32) | u64::from(tid)
}

/// Appends `v` in decimal (what `{}` prints), without the formatting
/// machinery: a call's line has four numbers.
#[inline]
fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&d[i..]);
}

impl<W: Write> ChromeWriter<W> {
    /// Starts the JSON object in `out`.
    pub fn new(out: W) -> std::io::Result<Self> {
        let mut buf = Vec::with_capacity(FLUSH_AT + 4096);
        buf.extend_from_slice(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        Ok(ChromeWriter {
            out,
            buf,
            first: true,
            quoted: Vec::new(),
            pids: HashMap::new(),
        })
    }

    /// Hands the buffered JSON to the output once there is a block of it.
    #[inline]
    fn spill(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn put(&mut self, v: serde_json::Value) -> std::io::Result<()> {
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
        serde_json::to_writer(&mut self.buf, &v).map_err(std::io::Error::other)?;
        self.spill()
    }

    #[inline(always)]
    fn call(&mut self, ph: u8, names: &Names, c: Call) -> std::io::Result<()> {
        let i = c.func.0 as usize;
        if self.quoted.len() <= i {
            self.quoted.resize(i + 1, None);
        }
        let name = self.quoted[i].get_or_insert_with(|| json!(names.name(c.func)).to_string());
        let b = &mut self.buf;
        if !self.first {
            b.extend_from_slice(b",\n");
        }
        self.first = false;
        // {"ph":"B","name":"f","pid":1,"tid":2,"ts":3.004}
        b.extend_from_slice(b"{\"ph\":\"");
        b.push(ph);
        b.extend_from_slice(b"\",\"name\":");
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(b",\"pid\":");
        put_u64(b, u64::from(c.pid));
        b.extend_from_slice(b",\"tid\":");
        put_u64(b, u64::from(c.tid));
        b.extend_from_slice(b",\"ts\":");
        put_u64(b, c.time / 1000);
        // The nanoseconds, three digits (`{:03}`).
        let ns = (c.time % 1000) as u32;
        b.extend_from_slice(&[
            b'.',
            b'0' + (ns / 100) as u8,
            b'0' + (ns / 10 % 10) as u8,
            b'0' + (ns % 10) as u8,
            b'}',
        ]);
        self.spill()
    }

    /// Closes the JSON and hands the output back.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.buf.extend_from_slice(b"\n]}\n");
        self.out.write_all(&self.buf)?;
        self.buf.clear();
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
                depth,
            } => {
                let c = Call {
                    pid,
                    tid,
                    time,
                    func,
                    depth,
                };
                return self.call(b'B', names, c);
            }
            ViewEvent::Exit {
                pid,
                tid,
                time,
                func,
                depth,
                ..
            } => {
                let c = Call {
                    pid,
                    tid,
                    time,
                    func,
                    depth,
                };
                return self.call(b'E', names, c);
            }
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

    #[inline(always)]
    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        self.call(b'B', names, c)
    }

    #[inline(always)]
    fn exit(&mut self, names: &Names, c: Call, _closed: bool) -> std::io::Result<()> {
        self.call(b'E', names, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_display_writes_them() {
        for v in [
            0,
            7,
            9,
            10,
            99,
            100,
            12_345,
            1 << 32,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_u64(&mut b, v);
            assert_eq!(String::from_utf8(b).unwrap(), v.to_string());
        }
    }

    #[test]
    fn call_lines_are_the_formatted_lines() {
        let mut names = Names::default();
        let f = names.intern("a \"quoted\" \\ name", "[swtrace]");
        let mut w = ChromeWriter::new(Vec::new()).unwrap();
        let times = [0, 5, 999, 1_000, 1_001, 123_456_789_012, u64::MAX];
        let mut want = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        for (i, &time) in times.iter().enumerate() {
            let (pid, tid) = (i as u32 * 1000, u32::MAX - i as u32);
            let c = Call {
                pid,
                tid,
                time,
                func: f,
                depth: 0,
            };
            // Through the fast path and through the event, alternately.
            if i % 2 == 0 {
                w.enter(&names, c).unwrap();
            } else {
                w.event(
                    &names,
                    &ViewEvent::Enter {
                        pid,
                        tid,
                        time,
                        func: f,
                        depth: 0,
                    },
                )
                .unwrap();
            }
            w.exit(&names, c, i % 3 == 0).unwrap();
            for ph in ['B', 'E'] {
                if want.len() > 40 {
                    want.push_str(",\n");
                }
                want.push_str(&format!(
                    "{{\"ph\":\"{ph}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{}.{:03}}}",
                    json!(names.name(f)),
                    time / 1000,
                    time % 1000
                ));
            }
        }
        want.push_str("\n]}\n");
        let got = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(got, want);
        // And it is JSON.
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["traceEvents"].as_array().unwrap().len(), 2 * times.len());
    }

    #[test]
    fn output_larger_than_the_buffer_arrives_whole_and_in_order() {
        let mut names = Names::default();
        let f = names.intern("f", "[swtrace]");
        let mut w = ChromeWriter::new(Vec::new()).unwrap();
        let n = 3 * FLUSH_AT / 40;
        for i in 0..n as u64 {
            let c = Call {
                pid: 1,
                tid: 2,
                time: i * 1000,
                func: f,
                depth: 0,
            };
            w.enter(&names, c).unwrap();
        }
        let got = w.finish().unwrap();
        assert!(got.len() > 2 * FLUSH_AT);
        let v: serde_json::Value = serde_json::from_slice(&got).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev.len(), n);
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["ts"].as_f64().unwrap(), i as f64);
        }
    }
}
