//! `perfaux export --format chrome`: Chrome's trace-event JSON (the
//! "JSON Array/Object Format" chrome://tracing, Perfetto and speedscope
//! read), written event by event: calls as `B`/`E` pairs, samples, uevents,
//! losses and snapshots as instants (`i`), pause windows as `B`/`E` on a
//! track of their own, thread names as `M` metadata.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use serde_json::json;

use crate::event::{Call, Names, Sink, ViewEvent, sample_label, uevent_label};
use crate::offcpu::ThreadSwitches;
use crate::perfetto::payload_text;

/// Writes the JSON as the pass hands events over.
pub struct ChromeWriter<W: Write> {
    out: W,
    /// The JSON not yet handed to `out` is `buf[..pos]`; the rest is room.
    /// Events are written here and go out in [`FLUSH_AT`]-sized blocks, not
    /// a `write` per field. A call's line is put together from pieces
    /// padded to [`CHUNK`] bytes and copied a whole chunk at a time (a
    /// fixed-size copy is two moves; a copy of a piece's exact length was a
    /// `memmove` call each, a quarter of the export): what a chunk writes
    /// past its piece's end lies in the room and is overwritten next.
    buf: Vec<u8>,
    pos: usize,
    first: bool,
    /// Each function's `","name":"..."` (its name as a JSON string), made
    /// once and padded: calls are most of the events.
    names: Vec<Option<Padded>>,
    /// The last call's thread: its pid and tid, and its
    /// `,"pid":P,"tid":T,"ts":` padded.
    thread: Option<(u32, u32, Padded)>,
    /// The last call time's microseconds but their last 4 digits (what the
    /// calls of one 10 ms stretch share; 0: none) and their digits, made
    /// when it changes: most calls' times write 4 digits, not all 10 or so.
    ts_hi: u64,
    ts_hi_digits: ([u8; 32], usize),
    /// tid -> pid, for the marker track.
    pids: HashMap<u32, u32>,
    /// The spans (pid, tag) whose flow has started, at most [`MAX_FLOWS`] (then forgotten at
    /// once: a span polled across the reset starts a second flow, memory stays bounded).
    flows: HashSet<(u32, u64)>,
    /// A non-call event's JSON, before it goes into `buf`.
    scratch: Vec<u8>,
    /// The threads' context switches, drawn as spans off the CPU at the end.
    switches: ThreadSwitches,
}

/// Bytes a piece of a call's line is copied in.
const CHUNK: usize = 16;

/// A piece of a call's line: its length and its bytes, padded with zeros
/// to a whole number of [`CHUNK`]s.
struct Padded {
    len: usize,
    bytes: Vec<u8>,
}

impl Padded {
    fn new(s: &[u8]) -> Padded {
        let mut bytes = s.to_vec();
        bytes.resize(s.len().div_ceil(CHUNK) * CHUNK, 0);
        Padded {
            len: s.len(),
            bytes,
        }
    }
}

/// Copies `p` to `buf[at..]` chunk by chunk; returns the position after
/// its last byte. `buf` has room for the padding.
#[inline(always)]
fn put_padded(buf: &mut [u8], at: usize, p: &Padded) -> usize {
    for (i, c) in p.bytes.chunks_exact(CHUNK).enumerate() {
        let to = at + i * CHUNK;
        buf[to..to + CHUNK].copy_from_slice(c);
    }
    at + p.len
}

/// A `key=value` payload's fields ([`crate::key_values`]) sorted by key, a repeated key
/// keeping its last value: as a JSON object prints them.
fn uevent_fields(payload: &[u8]) -> Option<Vec<(&str, String)>> {
    let mut f = crate::key_values::fields(payload)?;
    f.reverse();
    f.sort_by(|a, b| a.0.cmp(b.0));
    f.dedup_by(|a, b| a.0 == b.0);
    Some(f)
}

/// Most spans whose flows [`ChromeWriter`] keeps track of at once.
const MAX_FLOWS: usize = 1 << 20;

/// The buffered JSON's size at which it goes to the output.
const FLUSH_AT: usize = 64 * 1024;

/// A call's line besides its name and thread pieces, padding included:
/// `,\n{"ph":"B"`, the time's digits (at most 20, copied as 32) and
/// `.nnn}`.
const CALL_REST: usize = 16 + 32 + 8;

/// Microseconds, the format's unit, from nanoseconds (kept exact).
fn us(ns: u64) -> serde_json::Value {
    json!(ns as f64 / 1000.0)
}

/// The pseudo thread id of a thread's pause/resume and trace-data track,
/// so that its slices do not nest with the calls.
fn marker_tid(tid: u32) -> u64 {
    (1u64 << 32) | u64::from(tid)
}

/// The track of a thread's time off the CPU.
fn off_cpu_tid(tid: u32) -> u64 {
    (2u64 << 32) | u64::from(tid)
}

/// "00" to "99": two digits a lookup (a division by 100, not two by 10).
const PAIRS: [u8; 200] = {
    let mut p = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        p[2 * i] = b'0' + (i / 10) as u8;
        p[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    p
};

/// `v` in decimal (what `{}` prints), left-aligned in the array, and its
/// number of digits.
#[inline(always)]
fn decimal(mut v: u64) -> ([u8; 32], usize) {
    let mut d = [0u8; 32];
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    for i in (0..n).rev() {
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    (d, n)
}

impl<W: Write> ChromeWriter<W> {
    /// Starts the JSON object in `out`.
    pub fn new(out: W) -> std::io::Result<Self> {
        let mut w = ChromeWriter {
            out,
            buf: vec![0; FLUSH_AT + 4096],
            pos: 0,
            first: true,
            names: Vec::new(),
            thread: None,
            ts_hi: 0,
            ts_hi_digits: ([0; 32], 0),
            pids: HashMap::new(),
            flows: HashSet::new(),
            scratch: Vec::new(),
            switches: ThreadSwitches::default(),
        };
        w.append(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(w)
    }

    /// Makes room for `n` more bytes in `buf`: hands what it holds to the
    /// output, and grows it for a line longer than its room.
    #[cold]
    fn make_room(&mut self, n: usize) -> std::io::Result<()> {
        self.out.write_all(&self.buf[..self.pos])?;
        self.pos = 0;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        Ok(())
    }

    /// Hands the buffered JSON to the output once there is a block of it.
    #[inline(always)]
    fn spill(&mut self) -> std::io::Result<()> {
        if self.pos >= FLUSH_AT {
            self.make_room(0)?;
        }
        Ok(())
    }

    fn append(&mut self, b: &[u8]) -> std::io::Result<()> {
        if self.pos + b.len() > self.buf.len() {
            self.make_room(b.len())?;
        }
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
        self.spill()
    }

    fn put(&mut self, v: serde_json::Value) -> std::io::Result<()> {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        if !self.first {
            s.extend_from_slice(b",\n");
        }
        self.first = false;
        serde_json::to_writer(&mut s, &v).map_err(std::io::Error::other)?;
        let r = self.append(&s);
        self.scratch = s;
        r
    }

    /// Whether the flow of span `value` of `pid` has started; if not, it has now.
    fn flow_started(&mut self, pid: u32, value: u64) -> bool {
        if self.flows.len() >= MAX_FLOWS {
            self.flows.clear();
        }
        !self.flows.insert((pid, value))
    }

    /// The call's name piece.
    #[cold]
    fn name_piece(&mut self, names: &Names, c: Call) {
        let i = c.func.0 as usize;
        if self.names.len() <= i {
            self.names.resize_with(i + 1, || None);
        }
        let q = json!(names.name(c.func)).to_string();
        self.names[i] = Some(Padded::new(format!("\",\"name\":{q}").as_bytes()));
    }

    /// The thread piece of a call of a thread other than the last call's.
    #[cold]
    fn thread_piece(&mut self, c: Call) {
        let s = format!(",\"pid\":{},\"tid\":{},\"ts\":", c.pid, c.tid);
        self.thread = Some((c.pid, c.tid, Padded::new(s.as_bytes())));
    }

    /// A call's line: `{"ph":"B","name":"f","pid":1,"tid":2,"ts":3.004}`.
    #[inline(always)]
    fn call(&mut self, ph: u8, names: &Names, c: Call) -> std::io::Result<()> {
        let i = c.func.0 as usize;
        if self.names.get(i).is_none_or(Option::is_none) {
            self.name_piece(names, c);
        }
        if !matches!(self.thread, Some((p, t, _)) if p == c.pid && t == c.tid) {
            self.thread_piece(c);
        }
        let piece = |p: Option<&Padded>| p.map_or(0, |p| p.bytes.len());
        let need =
            CALL_REST + piece(self.names[i].as_ref()) + piece(self.thread.as_ref().map(|t| &t.2));
        if self.pos + need > self.buf.len() {
            self.make_room(need)?;
        }
        let us = c.time / 1000;
        let (hi, lo) = (us / 10_000, (us % 10_000) as u32);
        if hi != self.ts_hi && hi != 0 {
            self.ts_hi = hi;
            self.ts_hi_digits = decimal(hi);
        }
        let (Some(name), Some((_, _, thread))) = (&self.names[i], &self.thread) else {
            unreachable!("both pieces are made above")
        };
        let b = &mut self.buf[..];
        let mut at = self.pos;
        let sep: &[u8; 16] = if self.first {
            b"{\"ph\":\"B\0\0\0\0\0\0\0\0"
        } else {
            b",\n{\"ph\":\"B\0\0\0\0\0\0"
        };
        b[at..at + 16].copy_from_slice(sep);
        at += if self.first { 8 } else { 10 };
        b[at - 1] = ph;
        self.first = false;
        at = put_padded(b, at, name);
        at = put_padded(b, at, thread);
        // The microseconds. The digits go straight into the buffer: made in
        // an array and copied in, they were read back with wider loads than
        // their one-byte stores, a store-forwarding stall per line.
        if hi == 0 {
            let n = u64::from(lo).checked_ilog10().map_or(1, |l| l as usize + 1);
            let mut v = lo;
            for k in (at..at + n).rev() {
                b[k] = b'0' + (v % 10) as u8;
                v /= 10;
            }
            at += n;
        } else {
            let (d, n) = &self.ts_hi_digits;
            b[at..at + 32].copy_from_slice(d);
            at += n;
            // The last 4 digits, zero-padded, two at a time.
            let (h, l) = ((lo / 100) as usize, (lo % 100) as usize);
            b[at..at + 2].copy_from_slice(&PAIRS[2 * h..2 * h + 2]);
            b[at + 2..at + 4].copy_from_slice(&PAIRS[2 * l..2 * l + 2]);
            at += 4;
        }
        // The nanoseconds, three digits (`{:03}`).
        let ns = (c.time % 1000) as u32;
        let l = (ns % 100) as usize;
        b[at..at + 2].copy_from_slice(&[b'.', b'0' + (ns / 100) as u8]);
        b[at + 2..at + 4].copy_from_slice(&PAIRS[2 * l..2 * l + 2]);
        b[at + 4] = b'}';
        self.pos = at + 5;
        self.spill()
    }

    /// Writes each thread's time off the CPU (a span per interval, on a track of its own),
    /// closes the JSON and hands the output back.
    pub fn finish(mut self) -> std::io::Result<W> {
        let mut named = None;
        for (pid, tid, start, end) in self.switches.take_intervals() {
            if named != Some(tid) {
                named = Some(tid);
                self.put(json!({"ph": "M", "name": "thread_name", "pid": pid,
                    "tid": off_cpu_tid(tid), "args": {"name": format!("{tid}: off-CPU (switched out)")}}))?;
            }
            self.put(
                json!({"ph": "X", "name": "off-CPU", "pid": pid, "tid": off_cpu_tid(tid),
                "ts": us(start), "dur": us(end - start)}),
            )?;
        }
        self.append(b"\n]}\n")?;
        self.make_room(0)?;
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
            ViewEvent::Enter { .. } => {
                return ev.call().map_or(Ok(()), |c| self.call(b'B', names, c));
            }
            ViewEvent::Exit { .. } => {
                return ev.call().map_or(Ok(()), |c| self.call(b'E', names, c));
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
            } => {
                // Written field by field, not as a json! value (a BTreeMap
                // per uevent: a sixth of the export), in the order the
                // value printed its keys (sorted) and with serde_json's
                // own string and number formatting.
                let mut s = std::mem::take(&mut self.scratch);
                s.clear();
                if !self.first {
                    s.extend_from_slice(b",\n");
                }
                self.first = false;
                s.extend_from_slice(b"{\"args\":{");
                // `key=value` text (perfaux-tracing's events): its fields as arguments too.
                if let Some(fields) = uevent_fields(payload) {
                    s.extend_from_slice(b"\"fields\":{");
                    for (i, (k, v)) in fields.iter().enumerate() {
                        if i > 0 {
                            s.push(b',');
                        }
                        serde_json::to_writer(&mut s, k).map_err(std::io::Error::other)?;
                        s.push(b':');
                        serde_json::to_writer(&mut s, v).map_err(std::io::Error::other)?;
                    }
                    s.extend_from_slice(b"},");
                }
                s.extend_from_slice(b"\"payload\":");
                serde_json::to_writer(&mut s, &payload_text(payload))
                    .map_err(std::io::Error::other)?;
                s.extend_from_slice(b",\"type\":");
                serde_json::to_writer(&mut s, &ty).map_err(std::io::Error::other)?;
                s.extend_from_slice(b"},\"name\":");
                serde_json::to_writer(&mut s, &uevent_label(ty, type_name))
                    .map_err(std::io::Error::other)?;
                s.extend_from_slice(b",\"ph\":\"i\",\"pid\":");
                serde_json::to_writer(&mut s, &pid).map_err(std::io::Error::other)?;
                s.extend_from_slice(b",\"s\":\"t\",\"tid\":");
                serde_json::to_writer(&mut s, &tid).map_err(std::io::Error::other)?;
                s.extend_from_slice(b",\"ts\":");
                serde_json::to_writer(&mut s, &(time as f64 / 1000.0))
                    .map_err(std::io::Error::other)?;
                s.push(b'}');
                let r = self.append(&s);
                self.scratch = s;
                return r;
            }
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
                ..
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
            ViewEvent::Tag {
                pid,
                tid,
                time,
                value,
                ..
            } => {
                // A flow through the span's polls: it starts at the first, steps at each
                // other; each binds to the slice around its time, the poll just begun.
                let ph = if self.flow_started(pid, value) {
                    "t"
                } else {
                    "s"
                };
                json!({"ph": ph, "cat": "span", "name": "span", "pid": pid, "tid": tid,
                    "ts": us(time), "id": crate::perfetto::flow_id(pid, value)})
            }
            ViewEvent::Switch { .. } => {
                self.switches.push_event(ev);
                return Ok(());
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
            let (d, n) = decimal(v);
            assert_eq!(std::str::from_utf8(&d[..n]).unwrap(), v.to_string());
        }
    }

    #[test]
    fn call_lines_are_the_formatted_lines() {
        let mut names = Names::default();
        let f = names.intern("a \"quoted\" \\ name", "[swtrace]");
        let mut w = ChromeWriter::new(Vec::new()).unwrap();
        // Across the 10 ms stretches whose leading digits the writer keeps.
        let times = [
            0,
            5,
            999,
            1_000,
            1_001,
            9_999_999,
            10_000_000,
            10_000_001,
            10_009_999,
            19_999_999_999,
            20_000_000_000,
            20_000_000_001,
            123_456_789_012,
            123_456_789_013,
            5_000,
            u64::MAX,
        ];
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
    fn uevent_lines_are_the_json_values_lines() {
        let names = Names::default();
        let mut w = ChromeWriter::new(Vec::new()).unwrap();
        let mut want = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        let cases: [(u32, Option<&str>, &[u8], u64); 3] = [
            (
                1,
                Some("request_start"),
                b"worker=0 req=0",
                5_069_652_032_005,
            ),
            (7, None, b"\x00\x01\xff \"q\"", 0),
            (u32::MAX, Some("a \"b\" \\ c"), b"tab\there", u64::MAX),
        ];
        for (i, &(ty, type_name, payload, time)) in cases.iter().enumerate() {
            let (pid, tid) = (10 + i as u32, 20 + i as u32);
            w.event(
                &names,
                &ViewEvent::Uevent {
                    pid,
                    tid,
                    time,
                    ty,
                    type_name,
                    payload,
                },
            )
            .unwrap();
            if i > 0 {
                want.push_str(",\n");
            }
            let mut args = json!({"type": ty, "payload": payload_text(payload)});
            if let Some(f) = crate::key_values::fields(payload) {
                let map: serde_json::Map<String, serde_json::Value> = f
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                args["fields"] = serde_json::Value::Object(map);
            }
            want.push_str(
                &json!({"ph": "i", "s": "t",
                    "name": uevent_label(ty, type_name),
                    "pid": pid, "tid": tid, "ts": us(time),
                    "args": args})
                .to_string(),
            );
        }
        want.push_str("\n]}\n");
        assert_eq!(String::from_utf8(w.finish().unwrap()).unwrap(), want);
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
        // A name longer than the buffer's room.
        let huge = names.intern(&"h".repeat(2 * FLUSH_AT), "[swtrace]");
        let c = Call {
            pid: 1,
            tid: 2,
            time: n as u64 * 1000,
            func: huge,
            depth: 0,
        };
        w.exit(&names, c, false).unwrap();
        let got = w.finish().unwrap();
        assert!(got.len() > 4 * FLUSH_AT);
        let v: serde_json::Value = serde_json::from_slice(&got).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev.len(), n + 1);
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["ts"].as_f64().unwrap(), i as f64);
        }
        assert_eq!(ev[n]["name"].as_str().unwrap().len(), 2 * FLUSH_AT);
    }
}
