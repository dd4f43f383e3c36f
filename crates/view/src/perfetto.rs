//! `perfaux export --format perfetto`: Perfetto's trace format (a `Trace`
//! protobuf: a stream of `TracePacket`s), written packet by packet.
//!
//! The messages are hand-written prost structs holding only the fields
//! perfaux fills, with the field numbers of Perfetto's
//! protos/perfetto/trace/ (trace_packet.proto, track_event/*.proto): the
//! official Rust bindings are generated with protoc at build time, which a
//! build here does not have, and carry thousands of messages this writer
//! never uses. The tests decode the output with the official protos (the
//! PyPI `perfetto` package).
//!
//! Tracks: one per process and, under it, per thread: the thread's calls
//! as slices, then its samples (instants with the callchain), uevents
//! (instants with type and payload), pause/resume windows (slices) and
//! trace data (snapshots as slices, TRUNCATED/lost as instants), each on
//! its own track so that slices nest.

// Looked up per call: FxHash, not SipHash.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::io::Write;

use prost::Message;

use crate::event::{Call, Names, Sink, ViewEvent, sample_label, uevent_label};
use crate::offcpu::ThreadSwitches;

/// `perfetto.protos.TracePacket` (the fields perfaux writes).
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// Field 8.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// Field 10.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// Field 11.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Field 60.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    /// Field 1.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Field 2.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Field 3.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// Field 4.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// Field 5.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    /// Field 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Field 6.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    /// Field 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Field 2.
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    /// Field 5.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.TrackEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// Field 4.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// Field 9: 1 SLICE_BEGIN, 2 SLICE_END, 3 INSTANT.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Field 11.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// Field 22.
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// Field 23.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// Field 47, unpacked as the proto2 original declares it (protozero's decoder reads the
    /// declared form).
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
}

/// `perfetto.protos.DebugAnnotation`.
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    /// Field 3.
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// Field 6.
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    /// Field 10.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
const INSTANT: i32 = 3;
const SEQUENCE: u32 = 1;

/// The tracks of a thread, besides the thread's own.
#[derive(Clone, Copy)]
enum Track {
    Process = 1,
    Thread = 2,
    Samples = 3,
    Uevents = 4,
    PauseResume = 5,
    TraceData = 6,
    OffCpu = 7,
}

fn uuid(kind: Track, id: u32) -> u64 {
    ((kind as u64) << 40) | u64::from(id)
}

/// A string annotation.
fn text(name: &str, v: String) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        string_value: Some(v),
        uint_value: None,
    }
}

/// A payload as text when it is printable, else as hex bytes.
pub fn payload_text(d: &[u8]) -> String {
    if d.iter().all(|&c| (0x20..0x7f).contains(&c)) {
        String::from_utf8_lossy(d).into_owned()
    } else {
        d.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Writes Perfetto packets as the pass hands events over.
pub struct PerfettoWriter<W: Write> {
    out: W,
    /// Packets not yet handed to `out`, written in [`FLUSH_AT`]-sized blocks.
    buf: Vec<u8>,
    known: HashSet<u64>,
    /// tid -> (pid, comm).
    threads: HashMap<u32, (u32, String)>,
    /// Each function's `TrackEvent.name` field (key, length, bytes), made
    /// once: calls are most of the packets and are encoded by hand.
    name_fields: Vec<Option<Vec<u8>>>,
    /// The threads' context switches, drawn as slices off the CPU at the end.
    switches: ThreadSwitches,
    /// The last call begun, and where its packet lies in `buf` (`at..end`): a TAG that
    /// follows it rewrites the packet with the span's flow.
    last_begin: Option<(Call, usize, usize)>,
    /// Bytes the buffer handed to the output so far: with the buffer's length, where the
    /// stream ends (the last begin is the last packet only if the stream still ends after it).
    flushed: u64,
}

/// The buffered packets' size at which they go to the output.
const FLUSH_AT: usize = 64 * 1024;

impl<W: Write> PerfettoWriter<W> {
    /// A writer into `out`.
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            known: HashSet::default(),
            threads: HashMap::default(),
            name_fields: Vec::new(),
            switches: ThreadSwitches::default(),
            last_begin: None,
            flushed: 0,
        }
    }

    /// Writes each thread's time off the CPU (a slice per interval, on a track of its own),
    /// flushes and hands the output back.
    pub fn finish(mut self) -> std::io::Result<W> {
        for (pid, tid, start, end) in self.switches.take_intervals() {
            let key = (Track::OffCpu, pid, tid);
            self.emit(key, start, SLICE_BEGIN, Some("off-CPU".into()), Vec::new())?;
            self.emit(key, end, SLICE_END, None, Vec::new())?;
        }
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(self.out)
    }

    /// Hands the buffered packets to the output once there is a block.
    #[inline]
    fn spill(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.flushed += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    fn packet(&mut self, p: &TracePacket) -> std::io::Result<()> {
        // Trace.packet is field 1, length-delimited: the Trace message is
        // the concatenation of these.
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut self.buf);
        prost::encoding::encode_varint(p.encoded_len() as u64, &mut self.buf);
        p.encode(&mut self.buf).map_err(std::io::Error::other)?;
        self.spill()
    }

    /// A call's SLICE_BEGIN (with the function's name) or SLICE_END on the
    /// thread's track, encoded by hand as prost encodes the same
    /// [`TracePacket`] (fields in tag order, optional fields present):
    /// building the message, its name `String` and its lengths per call
    /// cost more than the rest of the export. `None` when the thread's
    /// track is not yet described (the caller goes the general way).
    #[inline(always)]
    fn call(&mut self, names: &Names, c: Call, begin: bool) -> Option<std::io::Result<()>> {
        use prost::encoding::{encode_varint, encoded_len_varint};
        let track = uuid(Track::Thread, c.tid);
        if !self.known.contains(&track) {
            return None;
        }
        let name: &[u8] = if begin {
            let i = c.func.0 as usize;
            if self.name_fields.len() <= i {
                self.name_fields.resize(i + 1, None);
            }
            self.name_fields[i].get_or_insert_with(|| {
                let n = names.name(c.func).as_bytes();
                let mut f = Vec::with_capacity(n.len() + 12);
                // TrackEvent.name: field 23, length-delimited.
                prost::encoding::encode_key(23, prost::encoding::WireType::LengthDelimited, &mut f);
                encode_varint(n.len() as u64, &mut f);
                f.extend_from_slice(n);
                f
            })
        } else {
            &[]
        };
        let ty = if begin { SLICE_BEGIN } else { SLICE_END } as u64;
        // TrackEvent: type (field 9, varint), track_uuid (11, varint), name.
        let event_len = 1 + 1 + 1 + encoded_len_varint(track) + name.len();
        // TracePacket: timestamp (8), trusted_packet_sequence_id (10),
        // track_event (11, length-delimited).
        let packet_len = 1
            + encoded_len_varint(c.time)
            + 2
            + 1
            + encoded_len_varint(event_len as u64)
            + event_len;
        let b = &mut self.buf;
        b.push(0x0a); // Trace.packet: field 1, length-delimited.
        encode_varint(packet_len as u64, b);
        b.push(8 << 3);
        encode_varint(c.time, b);
        b.extend_from_slice(&[10 << 3, SEQUENCE as u8, (11 << 3) | 2]);
        encode_varint(event_len as u64, b);
        b.extend_from_slice(&[9 << 3, ty as u8, 11 << 3]);
        encode_varint(track, b);
        b.extend_from_slice(name);
        // A begin stays in the buffer until the next packet: a TAG after it rewrites it.
        Some(if begin { Ok(()) } else { self.spill() })
    }

    /// The call just begun, tagged `value` (perfaux-tracing's span id): its SLICE_BEGIN
    /// again, with the span's flow, so that Perfetto draws each poll of one async span
    /// linked to the next. Nothing when another packet came between.
    fn tag_last_begin(
        &mut self,
        names: &Names,
        tid: u32,
        depth: u32,
        value: u64,
    ) -> std::io::Result<()> {
        let Some((c, at, end)) = self.last_begin.take() else {
            return Ok(());
        };
        // `at` and `end` are stream offsets: a spill between moved the buffer's start.
        let stream_end = self.flushed + self.buf.len() as u64;
        if c.tid != tid
            || c.depth != depth
            || stream_end != end as u64
            || (at as u64) < self.flushed
        {
            return Ok(());
        }
        let at = (at as u64 - self.flushed) as usize;
        self.buf.truncate(at);
        let track = self.track(Track::Thread, c.pid, c.tid)?;
        self.packet(&TracePacket {
            timestamp: Some(c.time),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(TrackEvent {
                debug_annotations: Vec::new(),
                r#type: Some(SLICE_BEGIN),
                track_uuid: Some(track),
                categories: Vec::new(),
                name: Some(names.name(c.func).to_owned()),
                flow_ids: vec![flow_id(c.pid, value)],
            }),
            track_descriptor: None,
        })
    }

    fn comm(&self, tid: u32) -> Option<String> {
        self.threads.get(&tid).map(|t| t.1.clone())
    }

    fn descriptor(&mut self, d: TrackDescriptor) -> std::io::Result<()> {
        self.packet(&TracePacket {
            timestamp: None,
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: None,
            track_descriptor: Some(d),
        })
    }

    /// The uuid of `kind`'s track of `tid`, described on first use.
    fn track(&mut self, kind: Track, pid: u32, tid: u32) -> std::io::Result<u64> {
        let u = uuid(kind, tid);
        if self.known.contains(&u) {
            return Ok(u);
        }
        let pu = uuid(Track::Process, pid);
        if self.known.insert(pu) {
            self.descriptor(TrackDescriptor {
                uuid: Some(pu),
                name: None,
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: self.comm(pid),
                }),
                thread: None,
                parent_uuid: None,
            })?;
        }
        let tu = uuid(Track::Thread, tid);
        if self.known.insert(tu) {
            self.descriptor(TrackDescriptor {
                uuid: Some(tu),
                name: None,
                process: None,
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: self.comm(tid),
                }),
                parent_uuid: None,
            })?;
        }
        if self.known.insert(u) {
            let what = match kind {
                Track::Samples => "samples",
                Track::Uevents => "uevents",
                Track::PauseResume => "pause/resume",
                Track::OffCpu => "off-CPU (switched out)",
                _ => "trace data (snapshots, lost)",
            };
            let name = format!("{} {tid}: {what}", self.comm(tid).unwrap_or_default());
            self.descriptor(TrackDescriptor {
                uuid: Some(u),
                name: Some(name),
                process: None,
                thread: None,
                parent_uuid: Some(pu),
            })?;
        }
        Ok(u)
    }

    fn emit(
        &mut self,
        (kind, pid, tid): (Track, u32, u32),
        time: u64,
        ty: i32,
        name: Option<String>,
        args: Vec<DebugAnnotation>,
    ) -> std::io::Result<()> {
        let track = self.track(kind, pid, tid)?;
        self.packet(&TracePacket {
            timestamp: Some(time),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(TrackEvent {
                debug_annotations: args,
                r#type: Some(ty),
                track_uuid: Some(track),
                categories: Vec::new(),
                name,
                flow_ids: Vec::new(),
            }),
            track_descriptor: None,
        })
    }

    fn pid(&self, tid: u32) -> u32 {
        self.threads.get(&tid).map_or(tid, |t| t.0)
    }
}

impl<W: Write> Sink for PerfettoWriter<W> {
    fn event(&mut self, names: &Names, ev: &ViewEvent<'_>) -> std::io::Result<()> {
        match *ev {
            ViewEvent::Comm { pid, tid, comm } => {
                self.threads.insert(tid, (pid, comm.to_owned()));
                Ok(())
            }
            ViewEvent::Enter {
                pid,
                tid,
                time,
                func,
                ..
            } => self.emit(
                (Track::Thread, pid, tid),
                time,
                SLICE_BEGIN,
                Some(names.name(func).to_owned()),
                Vec::new(),
            ),
            ViewEvent::Exit {
                pid,
                tid,
                time,
                closed,
                ..
            } => {
                let args = if closed {
                    vec![text("return", "not in the trace".into())]
                } else {
                    Vec::new()
                };
                self.emit((Track::Thread, pid, tid), time, SLICE_END, None, args)
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
                let args = vec![
                    text("callchain", chain.join(" <- ")),
                    DebugAnnotation {
                        name: Some("period".into()),
                        string_value: None,
                        uint_value: Some(period),
                    },
                ];
                self.emit((Track::Samples, pid, tid), time, INSTANT, Some(name), args)
            }
            ViewEvent::Uevent {
                pid,
                tid,
                time,
                ty,
                type_name,
                payload,
            } => {
                let name = uevent_label(ty, type_name);
                let mut args = vec![
                    DebugAnnotation {
                        name: Some("type".into()),
                        string_value: None,
                        uint_value: Some(u64::from(ty)),
                    },
                    text("payload", payload_text(payload)),
                ];
                // `key=value` text (perfaux-tracing's events): each field an argument too,
                // under `fields` (Perfetto nests a dotted name).
                for (k, v) in crate::key_values::fields(payload).into_iter().flatten() {
                    args.push(text(&format!("fields.{k}"), v));
                }
                self.emit((Track::Uevents, pid, tid), time, INSTANT, Some(name), args)
            }
            ViewEvent::PauseResume {
                tid,
                time,
                pause,
                dropped,
            } => {
                let pid = self.pid(tid);
                let key = (Track::PauseResume, pid, tid);
                match (pause, dropped) {
                    (true, false) => {
                        self.emit(key, time, SLICE_BEGIN, Some("paused".into()), Vec::new())
                    }
                    (false, false) => self.emit(key, time, SLICE_END, None, Vec::new()),
                    (p, true) => {
                        let n = if p { "dropped pause" } else { "dropped resume" };
                        self.emit(key, time, INSTANT, Some(n.into()), Vec::new())
                    }
                }
            }
            ViewEvent::Stopped { tid, time } => {
                // On the thread's own track: every trace ends with a stop,
                // and a pause/resume track for it alone was an empty track
                // per thread of a plain full trace.
                let pid = self.pid(tid);
                let key = (Track::Thread, pid, tid);
                self.emit(key, time, INSTANT, Some("trace stopped".into()), Vec::new())
            }
            ViewEvent::Snapshot {
                tid,
                begin,
                end,
                bytes,
                ..
            } => {
                let pid = self.pid(tid);
                let key = (Track::TraceData, pid, tid);
                let args = vec![DebugAnnotation {
                    name: Some("bytes".into()),
                    string_value: None,
                    uint_value: Some(bytes),
                }];
                self.emit(key, begin, SLICE_BEGIN, Some("snapshot".into()), args)?;
                self.emit(key, end, SLICE_END, None, Vec::new())
            }
            ViewEvent::Lost {
                tid,
                time,
                kind,
                count,
            } => {
                let pid = self.pid(tid);
                let args = vec![DebugAnnotation {
                    name: Some("count".into()),
                    string_value: None,
                    uint_value: Some(count),
                }];
                let key = (Track::TraceData, pid, tid);
                self.emit(key, time, INSTANT, Some(kind.name().into()), args)
            }
            ViewEvent::Tag {
                tid, depth, value, ..
            } => self.tag_last_begin(names, tid, depth, value),
            ViewEvent::Switch { .. } => {
                self.switches.push_event(ev);
                Ok(())
            }
        }
    }

    #[inline(always)]
    fn enter(&mut self, names: &Names, c: Call) -> std::io::Result<()> {
        // The begin before this one stayed for a tag that did not come: out with it now, so
        // that a run of entries does not grow the buffer.
        self.spill()?;
        let at = self.buf.len();
        if self.call(names, c, true).is_none() {
            // The thread's first call: its tracks described first, then the call's packet
            // by hand as every other.
            self.track(Track::Thread, c.pid, c.tid)?;
            return self.enter(names, c);
        }
        let base = self.flushed as usize;
        self.last_begin = Some((c, base + at, base + self.buf.len()));
        Ok(())
    }

    #[inline(always)]
    fn exit(&mut self, names: &Names, c: Call, closed: bool) -> std::io::Result<()> {
        // A closed call's end carries an annotation: the general way.
        let fast = if closed {
            None
        } else {
            self.call(names, c, false)
        };
        match fast {
            Some(r) => r,
            None => self.event(names, &c.exited(closed)),
        }
    }
}

/// The flow id of span `value` of process `pid` (a span's id is its process's registry's):
/// Perfetto's flow ids are global to the trace.
pub fn flow_id(pid: u32, value: u64) -> u64 {
    value.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of two threads' calls, with times, ids and a name long
    /// enough for multi-byte varints.
    fn calls(names: &mut Names) -> Vec<(Call, Option<bool>)> {
        let long = "n".repeat(300);
        let f = [
            names.intern("short", "[swtrace]"),
            names.intern(&long, "[swtrace]"),
        ];
        let mut v = Vec::new();
        for (i, time) in [0u64, 127, 128, 16_383, 16_384, 1 << 40, u64::MAX]
            .into_iter()
            .enumerate()
        {
            let tid = [1, 300, 70_000][i % 3];
            let c = Call {
                pid: 7,
                tid,
                time,
                func: f[i % 2],
                depth: 0,
            };
            // Enter, then exit (closed every other time).
            v.push((c, None));
            v.push((c, Some(i % 2 == 0)));
        }
        v
    }

    #[test]
    fn hand_encoded_call_packets_are_prosts() {
        let mut names = Names::default();
        let evs = calls(&mut names);
        // The general way: every call as a ViewEvent, encoded by prost.
        let mut general = PerfettoWriter::new(Vec::new());
        // The fast way: Sink::enter/exit.
        let mut fast = PerfettoWriter::new(Vec::new());
        for w in [&mut general, &mut fast] {
            w.event(
                &names,
                &ViewEvent::Comm {
                    pid: 7,
                    tid: 300,
                    comm: "worker",
                },
            )
            .unwrap();
        }
        for &(c, exit) in &evs {
            let ev = match exit {
                None => c.entered(),
                Some(closed) => c.exited(closed),
            };
            general.event(&names, &ev).unwrap();
            match exit {
                None => fast.enter(&names, c).unwrap(),
                Some(closed) => fast.exit(&names, c, closed).unwrap(),
            }
        }
        let (g, f) = (general.finish().unwrap(), fast.finish().unwrap());
        assert!(!g.is_empty());
        assert_eq!(f, g);
        // A thread's first call describes its tracks (the general way);
        // the hand encoding is for the calls after it.
        let mut w = PerfettoWriter::new(Vec::new());
        assert!(w.call(&names, evs[0].0, true).is_none());
        w.enter(&names, evs[0].0).unwrap();
        assert!(w.call(&names, evs[0].0, true).is_some());
    }

    /// The packets of an export, decoded with this module's messages.
    fn packets(bytes: &[u8]) -> Vec<TracePacket> {
        let mut out = Vec::new();
        let mut b = bytes;
        while !b.is_empty() {
            let (tag, wire) = prost::encoding::decode_key(&mut b).unwrap();
            assert_eq!((tag, wire), (1, prost::encoding::WireType::LengthDelimited));
            let len = prost::encoding::decode_varint(&mut b).unwrap() as usize;
            out.push(TracePacket::decode(&b[..len]).unwrap());
            b = &b[len..];
        }
        out
    }

    /// A tag right after a call's entry makes its begin carry the span's flow; one after
    /// another packet (or for another call) changes nothing.
    #[test]
    fn a_tagged_call_begins_with_its_flow() {
        let mut names = Names::default();
        let f = names.intern("poll", "[swtrace]");
        let call = |time, depth| Call {
            pid: 7,
            tid: 9,
            time,
            func: f,
            depth,
        };
        let tag = |depth, value| ViewEvent::Tag {
            pid: 7,
            tid: 9,
            time: 0,
            depth,
            value,
        };
        let mut w = PerfettoWriter::new(Vec::new());
        w.enter(&names, call(10, 0)).unwrap();
        w.event(&names, &tag(0, 42)).unwrap();
        w.exit(&names, call(20, 0), false).unwrap();
        w.enter(&names, call(30, 0)).unwrap();
        w.event(&names, &tag(0, 42)).unwrap();
        // Late: another packet came between.
        w.exit(&names, call(40, 0), false).unwrap();
        w.event(&names, &tag(0, 43)).unwrap();
        let begins: Vec<(u64, Vec<u64>)> = packets(&w.finish().unwrap())
            .into_iter()
            .filter_map(|p| {
                let e = p.track_event?;
                (e.r#type == Some(SLICE_BEGIN)).then(|| (p.timestamp.unwrap(), e.flow_ids))
            })
            .collect();
        let flow = flow_id(7, 42);
        assert_eq!(begins, [(10, vec![flow]), (30, vec![flow])]);
    }

    /// Entries without returns (a deep recursion) do not pile up in the buffer while each
    /// waits for a tag.
    #[test]
    fn a_run_of_entries_keeps_the_buffer_bounded() {
        let mut names = Names::default();
        let f = names.intern("deep", "[swtrace]");
        let mut w = PerfettoWriter::new(std::io::sink());
        for i in 0..200_000u32 {
            let c = Call {
                pid: 1,
                tid: 1,
                time: u64::from(i),
                func: f,
                depth: i,
            };
            w.enter(&names, c).unwrap();
            assert!(w.buf.len() < FLUSH_AT + 4096, "{} bytes", w.buf.len());
        }
    }
}
