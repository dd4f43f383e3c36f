//! The side-band records of a traced program: what the kernel would have written about its
//! tasks and mappings (COMM, FORK, EXIT, MMAP2) and perf needs to name its threads and
//! addresses, made here from what the runtime reported, since /proc/PID/maps is gone once a
//! crashed program is reaped and no kernel sees these tasks' perf events.
//!
//! Each pass of the recording loop ([`Sideband::add_new`]) hands the recording the ring of
//! every thread that appeared and writes its COMM (a forked child's first thread its
//! PERF_RECORD_FORK before), the MMAP2 of every object reported since, and the EXIT of every
//! thread that ended; it marks the rings of threads an exec or a process's end took without
//! their destructors. The program's memory, the recording and the pidfds are reached through
//! [`Session`], [`Recording`] and [`ProcessWatch`], so that this logic is tested against fakes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use perfaux_abi::parse_info::RecordParseInfo;
use perfaux_abi::records::TaskKind;
use perfaux_recorder::synth::{FileMapping, comm_record, mmap2_record, sample_id, task_record};
use perfaux_recorder::{RecordError, Result};

use crate::host::{LoadedObject, ProgramSession, TracedThread};
use crate::process_ends::{ProcessEnds, ProcessKey};
use crate::slot_ring;

/// What the side band reads of the program's memory ([`ProgramSession`]).
pub(crate) trait Session {
    /// Slots there are.
    fn slot_count(&self) -> usize;
    /// The threads that claimed a slot and opened their event.
    fn threads(&self) -> Vec<TracedThread>;
    /// Takes the objects the program reported since the last call; returns every object
    /// taken so far from index `from` on.
    fn objects_from(&mut self, from: usize) -> Vec<LoadedObject>;
}

impl Session for ProgramSession {
    fn slot_count(&self) -> usize {
        ProgramSession::slot_count(self)
    }

    fn threads(&self) -> Vec<TracedThread> {
        ProgramSession::threads(self)
    }

    fn objects_from(&mut self, from: usize) -> Vec<LoadedObject> {
        self.take_objects();
        self.objects().get(from..).unwrap_or_default().to_vec()
    }
}

/// Where the side band goes (the [`perfaux_recorder::Recorder`]).
pub(crate) trait Recording {
    /// The layout of the records' sample_id.
    fn file_info(&self) -> RecordParseInfo;
    /// Writes one record.
    fn write_record(&mut self, record: &[u8]) -> Result<()>;
    /// Takes the ring of thread `t`, which reads `retiring` ([`slot_ring::RUNNING`] ...).
    fn add_ring(&mut self, t: &TracedThread, retiring: Arc<AtomicU8>) -> Result<()>;
}

/// The ends of the program's processes ([`ProcessEnds`]).
pub(crate) trait ProcessWatch {
    /// Watches `key` from now on.
    fn watch(&mut self, key: ProcessKey);
    /// The watched processes that ended since the last call.
    fn take_ended(&mut self) -> Vec<ProcessKey>;
    /// Stops watching what `keep` refuses.
    fn retain(&mut self, keep: &mut dyn FnMut(&ProcessKey) -> bool);
}

impl ProcessWatch for ProcessEnds {
    fn watch(&mut self, key: ProcessKey) {
        ProcessEnds::watch(self, key);
    }

    fn take_ended(&mut self) -> Vec<ProcessKey> {
        ProcessEnds::take_ended(self)
    }

    fn retain(&mut self, keep: &mut dyn FnMut(&ProcessKey) -> bool) {
        ProcessEnds::retain(self, keep);
    }
}

/// The threads and objects already in the recording.
pub(crate) struct Sideband<W: ProcessWatch = ProcessEnds> {
    /// When the program was started (the time of its threads' COMM records).
    start_ns: u64,
    /// The program's pid (for an object that names no process).
    pid: u32,
    /// The program's name (for a thread that reported none).
    comm: String,
    /// The recorder's pid: the parent of the program's process.
    recorder_pid: u32,
    /// Per slot, the thread whose ring the recording has (`None`: none yet).
    slots: Vec<Option<Registered>>,
    /// Threads traced so far.
    traced: usize,
    /// The session's objects whose MMAP2 is written.
    objects: usize,
    /// Whether the first report of objects is written (those are dated at the start).
    first_objects_written: bool,
    /// (pid, tid, fork time) of every traced thread seen: the same in a new slot is an image
    /// the thread exec'd; a child's FORK is written with its first.
    tasks: Vec<(u32, u32, Option<u64>)>,
    /// The processes (pid, fork time) whose main thread's PERF_RECORD_EXIT is written.
    main_exited: Vec<(u32, Option<u64>)>,
    /// The processes with a registered thread, watched for an end that ran no destructors.
    ends: W,
}

/// A thread whose ring the recording has, in its slot (see [`TracedThread`] for the fields
/// it keeps).
struct Registered {
    generation: u64,
    pid: u32,
    tid: u32,
    fork: Option<(u32, u32, u64)>,
    image_time: u64,
    pid_ns: u64,
    /// Its ring's retiring word ([`slot_ring::SlotRing`]): set once the thread ended.
    retiring: Arc<AtomicU8>,
    /// Its PERF_RECORD_EXIT is written.
    exited: bool,
}

impl Registered {
    /// Whether it is a thread of `t`'s process (the same pid namespace, pid and fork).
    fn of_process_of(&self, t: &TracedThread) -> bool {
        self.process() == process_of(t)
    }

    /// Marks its thread gone without a word ([`slot_ring::GONE`]) if it was running;
    /// whether it was.
    fn mark_gone(&self) -> bool {
        self.retiring
            .compare_exchange(
                slot_ring::RUNNING,
                slot_ring::GONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Whether its thread is not known to have ended.
    fn running(&self) -> bool {
        self.retiring.load(Ordering::Acquire) == slot_ring::RUNNING
    }

    fn process(&self) -> ProcessKey {
        (self.pid, self.fork.map(|f| f.2), self.pid_ns)
    }
}

/// The process of thread `t`, as [`ProcessEnds`] knows it.
fn process_of(t: &TracedThread) -> ProcessKey {
    (t.pid, t.fork.map(|f| f.2), t.pid_ns)
}

/// The time of a record written now (within a pass of what it stands for).
fn now() -> u64 {
    perfaux_swtrace::clock::monotonic_ns()
}

impl<W: ProcessWatch> Sideband<W> {
    /// The side band of program `pid` named `comm`, started at `start_ns`, whose processes'
    /// ends `ends` watches.
    pub(crate) fn new(start_ns: u64, pid: u32, comm: String, ends: W) -> Self {
        Sideband {
            start_ns,
            pid,
            comm,
            recorder_pid: std::process::id(),
            slots: Vec::new(),
            traced: 0,
            objects: 0,
            first_objects_written: false,
            tasks: Vec::new(),
            main_exited: Vec::new(),
            ends,
        }
    }

    /// Threads traced so far.
    pub(crate) fn traced(&self) -> usize {
        self.traced
    }

    /// Hands the recording the rings of threads that appeared, and writes COMM for each and
    /// MMAP2 for every object the runtime reported since the last call. A forked child's first
    /// thread brings its PERF_RECORD_FORK (at the fork's time, before the child's COMM and
    /// samples), from which perf gives the child its parent's maps.
    pub(crate) fn add_new(
        &mut self,
        rec: &mut impl Recording,
        session: &mut impl Session,
    ) -> Result<()> {
        self.slots.resize_with(session.slot_count(), || None);
        self.write_objects(rec, session)?;
        let mut threads = session.threads();
        // In the order the threads began, not of their slots (recycled, a later thread's may
        // come first): of a task seen twice in one pass, the first is the image it exec'd
        // from. (The program's words: they only order what is registered.)
        threads.sort_by_key(|t| t.open_time);
        let info = rec.file_info();
        let mut news = Vec::new();
        for t in &threads {
            let Some(place) = self.slots.get(t.slot) else {
                continue;
            };
            if place.as_ref().is_some_and(|r| r.generation == t.generation) {
                continue;
            }
            self.traced += 1;
            // The program's first thread is named from its start (its first pass writes it);
            // any other thread from when it began, before its first event: a later thread
            // named at the program's start is a record perf finds behind rounds it has
            // already flushed ("out of order events"), and its tid may be one the kernel gave
            // another thread before.
            let first_thread = t.pid == self.pid && t.tid == t.pid && t.fork.is_none();
            let mut comm_ns = if t.open_time != 0 && !(first_thread && t.generation == 0) {
                t.open_time
            } else {
                self.start_ns
            };
            if let Some((ppid, ptid, time)) = t.fork {
                comm_ns = time;
                // The child's first thread (none of its process, by pid and fork time, seen
                // before: a pid the kernel gave again to a later child is another process):
                // tid = pid.
                if !self
                    .tasks
                    .iter()
                    .any(|&(p, _, f)| p == t.pid && f == Some(time))
                {
                    let r = task_record(&info, TaskKind::Fork, (t.pid, ppid, t.pid, ptid, time))?;
                    rec.write_record(&r)?;
                }
            }
            // An exec'd image: its thread's name changed at the exec (COMM_EXEC, as the
            // kernel's perf_event_comm), before its first traced call. It is a thread seen
            // before in another slot: the same pid and tid (exec makes the calling thread its
            // process's leader, tid = pid) and the same fork (an exec'd child's image carries
            // its fork; a later child given the same pid does not).
            let task = (t.pid, t.tid, t.fork.map(|f| f.2));
            let exec = t.tid == t.pid && self.tasks.contains(&task);
            if exec && t.open_time != 0 {
                comm_ns = t.open_time;
            }
            news.push(t);
            self.tasks.push(task);
            // The thread's COMM, timed at the program's start: the runtime reports the thread
            // only after its first events, and perf names a sample's thread from the COMM
            // that comes before it in time. It names the trace event's id, as the kernel
            // writes a thread's COMM into each of its events' buffers with that event's id.
            let name = t.comm.as_deref().unwrap_or(&self.comm);
            let sid = sample_id(t.pid, t.tid, comm_ns, t.event_id);
            let r = comm_record(&info, (t.pid, t.tid), name, exec, sid)?;
            rec.write_record(&r)?;
            let retiring = Arc::new(AtomicU8::new(slot_ring::RUNNING));
            rec.add_ring(t, retiring.clone())?;
            self.slots[t.slot] = Some(Registered {
                generation: t.generation,
                pid: t.pid,
                tid: t.tid,
                fork: t.fork,
                image_time: t.image_time,
                pid_ns: t.pid_ns,
                retiring,
                exited: false,
            });
        }
        // After every new thread is in: the old image's may have come in this same pass.
        for t in news {
            self.gone_with_old_image(rec, t)?;
        }
        let ended: Vec<_> = threads.iter().filter(|t| t.ended).collect();
        self.write_exits(rec, &ended)?;
        // The ended threads' rings take their last bytes at the next drain, which then gives
        // their slots to the threads that come.
        for t in ended {
            if let Some(Some(r)) = self.slots.get(t.slot) {
                r.retiring.store(slot_ring::ENDED, Ordering::Release);
            }
        }
        self.gone_with_process(rec)
    }

    /// The threads of every process that ended since the last pass without their destructors
    /// (`_exit`, a crash, SIGKILL, `exit` with other threads running: their slots still
    /// TRACING): as for an exec, their rings take their last bytes, past the last published
    /// head too, at the next drain, and their slots go to the next threads; each gets its
    /// PERF_RECORD_EXIT now (within a pass of the end). The threads that ended cleanly were
    /// retired above.
    fn gone_with_process(&mut self, rec: &mut impl Recording) -> Result<()> {
        for r in self.slots.iter().flatten().filter(|r| r.running()) {
            self.ends.watch(r.process());
        }
        let ended = self.ends.take_ended();
        if !ended.is_empty() {
            let time = now();
            for r in self.slots.iter_mut().flatten() {
                if !ended.contains(&r.process()) {
                    continue;
                }
                if r.mark_gone() {
                    exit_once(rec, r, &mut self.main_exited, self.recorder_pid, time)?;
                }
            }
        }
        // Only processes that hold a slot stay watched: the list is as short as the slots.
        let slots = &self.slots;
        self.ends.retain(&mut |p| {
            slots
                .iter()
                .flatten()
                .any(|r| r.running() && r.process() == *p)
        });
        Ok(())
    }

    /// The threads of `t`'s process (the same pid namespace, pid and fork) that ran in an
    /// image older than the newest of the process's registered threads (`t` among them, which
    /// may be the old one when the recorder saw the new image first): the process exec'd
    /// since, which ended them all (its main thread lives on in the new image) without their
    /// destructors. Their rings take their last bytes, past the last published head too, at
    /// the next drain, and their slots go to the next threads; the threads other than the
    /// main one get their PERF_RECORD_EXIT, at the new image's start (the exec was before).
    fn gone_with_old_image(&mut self, rec: &mut impl Recording, t: &TracedThread) -> Result<()> {
        let newest = self
            .slots
            .iter()
            .flatten()
            .filter(|r| r.of_process_of(t))
            .map(|r| r.image_time)
            .max()
            .unwrap_or(0);
        for r in self.slots.iter_mut().flatten() {
            if !r.of_process_of(t) || r.image_time == 0 || r.image_time >= newest {
                continue;
            }
            if r.mark_gone() && r.tid != r.pid && !r.exited {
                r.exited = true;
                write_exit(rec, (r.pid, r.tid), r.fork, self.recorder_pid, newest)?;
            }
        }
        Ok(())
    }

    /// Takes the objects the program's processes reported since the last call and writes
    /// their MMAP2 records (the program's pid for an entry that names no process).
    pub(crate) fn write_objects(
        &mut self,
        rec: &mut impl Recording,
        session: &mut impl Session,
    ) -> Result<()> {
        let info = rec.file_info();
        for mut o in session.objects_from(self.objects) {
            let pid = if o.pid != 0 { o.pid } else { self.pid };
            // The objects the program's first process had at its first report were mapped
            // since its exec: dated at its start, as the kernel's own MMAP records are, so
            // that the kernel's samples from the loader's time (page faults) find them.
            if pid == self.pid && !self.first_objects_written {
                o.time = self.start_ns;
            }
            let r = object_mmap2(&info, pid, &o)?;
            rec.write_record(&r)?;
            self.objects += 1;
        }
        if self.objects > 0 {
            self.first_objects_written = true;
        }
        Ok(())
    }

    /// PERF_RECORD_EXIT for each of `threads` not yet given one, timed now (within a drain
    /// pass of the thread's end): the kernel writes it when a task exits, and perf ends the
    /// thread's life there. The parent named is the thread's process's parent, as the
    /// kernel's `real_parent` (a thread's is its process's): the child's forker, or the
    /// recorder.
    pub(crate) fn write_exits(
        &mut self,
        rec: &mut impl Recording,
        threads: &[&TracedThread],
    ) -> Result<()> {
        for t in threads {
            let Some(r) = self.slots.get_mut(t.slot).and_then(Option::as_mut) else {
                continue;
            };
            if r.generation == t.generation {
                exit_once(rec, r, &mut self.main_exited, self.recorder_pid, now())?;
            }
        }
        Ok(())
    }
}

/// The PERF_RECORD_EXIT of `r`'s thread at `time`, unless it has one. A process's main thread
/// lives on through its execs (one task, each image a slot of its own): it exits once, which
/// `main_exited` (pid, fork time) remembers.
fn exit_once(
    rec: &mut impl Recording,
    r: &mut Registered,
    main_exited: &mut Vec<(u32, Option<u64>)>,
    recorder_pid: u32,
    time: u64,
) -> Result<()> {
    if r.exited {
        return Ok(());
    }
    r.exited = true;
    if r.tid == r.pid {
        let process = (r.pid, r.fork.map(|f| f.2));
        if main_exited.contains(&process) {
            return Ok(());
        }
        main_exited.push(process);
    }
    write_exit(rec, (r.pid, r.tid), r.fork, recorder_pid, time)
}

/// Writes a PERF_RECORD_EXIT of thread `tid` of process `pid` at `time`; the parent named is
/// the process's (as the kernel's `real_parent`): its forker in `fork`, or the recorder.
fn write_exit(
    rec: &mut impl Recording,
    (pid, tid): (u32, u32),
    fork: Option<(u32, u32, u64)>,
    recorder_pid: u32,
    time: u64,
) -> Result<()> {
    let (ppid, ptid) = fork.map_or((recorder_pid, recorder_pid), |(ppid, ptid, _)| (ppid, ptid));
    let r = task_record(
        &rec.file_info(),
        TaskKind::Exit,
        (pid, ppid, tid, ptid, time),
    )?;
    rec.write_record(&r)
}

/// The MMAP2 of object `o` in process `pid`, timed when the runtime found it (before the
/// samples in it).
fn object_mmap2(
    info: &RecordParseInfo,
    pid: u32,
    o: &LoadedObject,
) -> std::result::Result<Vec<u8>, RecordError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let dev_ino = std::fs::metadata(&o.path)
        .map(|m| (libc::major(m.dev()), libc::minor(m.dev()), m.ino()))
        .unwrap_or((0, 0, 0));
    let m = FileMapping {
        addr: o.start,
        len: o.len,
        pgoff: o.pgoff,
        dev_ino,
        // PROT_READ | PROT_EXEC, MAP_PRIVATE: an object's code.
        prot: 5,
        flags: 2,
        path: o.path.as_os_str().as_bytes(),
    };
    let time = if o.time != 0 { o.time } else { now() };
    mmap2_record(info, pid, &m, sample_id(pid, pid, time, 0))
}

#[cfg(test)]
mod tests {
    //! The side band against a fake program, recording and pidfds: each test reads back the
    //! records the recording was given, parsed as perf would parse them.

    use std::path::PathBuf;

    use perfaux_abi::Endianness;
    use perfaux_abi::consts::PERF_RECORD_MISC_COMM_EXEC;
    use perfaux_abi::raw::RawData;
    use perfaux_abi::records::Record;
    use perfaux_perfdata::record_attrs::base_attr;

    use super::*;

    /// The program's memory as a test sets it.
    struct FakeSession {
        slots: usize,
        threads: Vec<TracedThread>,
        objects: Vec<LoadedObject>,
    }

    impl Session for FakeSession {
        fn slot_count(&self) -> usize {
            self.slots
        }

        fn threads(&self) -> Vec<TracedThread> {
            self.threads.clone()
        }

        fn objects_from(&mut self, from: usize) -> Vec<LoadedObject> {
            self.objects.get(from..).unwrap_or_default().to_vec()
        }
    }

    /// A recording that keeps the records and rings it is given.
    struct FakeRecording {
        info: RecordParseInfo,
        records: Vec<Vec<u8>>,
        /// (slot, tid, retiring word) of each ring added.
        rings: Vec<(usize, u32, Arc<AtomicU8>)>,
    }

    impl Recording for FakeRecording {
        fn file_info(&self) -> RecordParseInfo {
            self.info
        }

        fn write_record(&mut self, record: &[u8]) -> Result<()> {
            self.records.push(record.to_vec());
            Ok(())
        }

        fn add_ring(&mut self, t: &TracedThread, retiring: Arc<AtomicU8>) -> Result<()> {
            self.rings.push((t.slot, t.tid, retiring));
            Ok(())
        }
    }

    /// Process ends as a test says them: a process in `ended` is seen ended once watched.
    #[derive(Default)]
    struct FakeEnds {
        watched: Vec<ProcessKey>,
        ended: Vec<ProcessKey>,
    }

    impl ProcessWatch for FakeEnds {
        fn watch(&mut self, key: ProcessKey) {
            if !self.watched.contains(&key) {
                self.watched.push(key);
            }
        }

        fn take_ended(&mut self) -> Vec<ProcessKey> {
            let ended: Vec<_> = self
                .watched
                .iter()
                .copied()
                .filter(|k| self.ended.contains(k))
                .collect();
            self.watched.retain(|k| !ended.contains(k));
            ended
        }

        fn retain(&mut self, keep: &mut dyn FnMut(&ProcessKey) -> bool) {
            self.watched.retain(|k| keep(k));
        }
    }

    /// A record as the test compares it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Seen {
        Comm {
            pid: u32,
            tid: u32,
            name: String,
            exec: bool,
            time: u64,
            id: u64,
        },
        Fork {
            pid: u32,
            ppid: u32,
            tid: u32,
            ptid: u32,
            time: u64,
        },
        Exit {
            pid: u32,
            ppid: u32,
            tid: u32,
        },
        Mmap2 {
            pid: u32,
            addr: u64,
            path: String,
        },
    }

    const START: u64 = 1_000;
    const PID: u32 = 500;
    const NS: u64 = 4_026_531_836;

    fn setup() -> (Sideband<FakeEnds>, FakeSession, FakeRecording) {
        let sb = Sideband::new(START, PID, "prog".into(), FakeEnds::default());
        let session = FakeSession {
            slots: 8,
            threads: Vec::new(),
            objects: Vec::new(),
        };
        let rec = FakeRecording {
            info: RecordParseInfo::new(&base_attr(0x100, 0)),
            records: Vec::new(),
            rings: Vec::new(),
        };
        (sb, session, rec)
    }

    /// Thread `tid` of process `pid` in `slot`, of the image begun at `image_time`.
    fn thread(slot: usize, pid: u32, tid: u32, image_time: u64) -> TracedThread {
        TracedThread {
            slot,
            pid,
            tid,
            fork: None,
            event_id: 100 + slot as u64,
            ids: vec![100 + slot as u64],
            ended: false,
            comm: None,
            open_time: image_time + u64::from(tid),
            image_time,
            pid_ns: NS,
            generation: 0,
        }
    }

    /// The records written since the last call, parsed.
    fn take(rec: &mut FakeRecording) -> Vec<Seen> {
        let info = rec.info;
        rec.records
            .drain(..)
            .map(|b| {
                let type_ = u32::from_ne_bytes(b[..4].try_into().unwrap());
                let misc = u16::from_ne_bytes(b[4..6].try_into().unwrap());
                let size = u16::from_ne_bytes(b[6..8].try_into().unwrap());
                assert_eq!(usize::from(size), b.len(), "the header's size");
                let body = RawData::new(&b[8..], &[]);
                match Record::parse(type_, misc, body, &info, Endianness::NATIVE).unwrap() {
                    Record::Comm(c) => Seen::Comm {
                        pid: c.pid,
                        tid: c.tid,
                        name: String::from_utf8(c.comm.to_vec()).unwrap(),
                        exec: c.misc & PERF_RECORD_MISC_COMM_EXEC != 0,
                        time: c.sample_id.time.unwrap(),
                        id: c.sample_id.identifier.unwrap(),
                    },
                    Record::Task(t) if t.kind == TaskKind::Fork => Seen::Fork {
                        pid: t.pid,
                        ppid: t.ppid,
                        tid: t.tid,
                        ptid: t.ptid,
                        time: t.time,
                    },
                    Record::Task(t) => Seen::Exit {
                        pid: t.pid,
                        ppid: t.ppid,
                        tid: t.tid,
                    },
                    Record::Mmap2(m) => Seen::Mmap2 {
                        pid: m.pid,
                        addr: m.addr,
                        path: String::from_utf8(m.filename.to_vec()).unwrap(),
                    },
                    other => panic!("an unexpected record: {other:?}"),
                }
            })
            .collect()
    }

    fn retiring_of(rec: &FakeRecording, slot: usize) -> u8 {
        let (_, _, w) = rec.rings.iter().rev().find(|r| r.0 == slot).unwrap();
        w.load(Ordering::Acquire)
    }

    fn exits(seen: &[Seen]) -> Vec<u32> {
        seen.iter()
            .filter_map(|s| match s {
                Seen::Exit { tid, .. } => Some(*tid),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_thread_that_appears_gets_its_comm_and_its_ring_once() {
        let (mut sb, mut session, mut rec) = setup();
        session.objects.push(LoadedObject {
            base: 0,
            start: 0x40_1000,
            len: 0x2000,
            pgoff: 0x1000,
            time: 900,
            pid: 0,
            path: PathBuf::from("/nonexistent/prog"),
        });
        let mut named = thread(1, PID, PID + 1, 0);
        named.comm = Some("worker".into());
        named.open_time = START + 200;
        session.threads = vec![thread(0, PID, PID, 0), named];
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        assert_eq!(
            seen,
            vec![
                Seen::Mmap2 {
                    pid: PID,
                    addr: 0x40_1000,
                    path: "/nonexistent/prog".into()
                },
                Seen::Comm {
                    pid: PID,
                    tid: PID,
                    name: "prog".into(),
                    exec: false,
                    time: START,
                    id: 100
                },
                // The program's first thread is named from the program's start; another
                // from when it opened its events (a COMM at the start would be behind what
                // perf has flushed by the time a late thread is seen).
                Seen::Comm {
                    pid: PID,
                    tid: PID + 1,
                    name: "worker".into(),
                    exec: false,
                    time: START + 200,
                    id: 101
                },
            ]
        );
        let rings: Vec<_> = rec.rings.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(rings, vec![(0, PID), (1, PID + 1)]);
        assert_eq!(sb.traced(), 2);
        // The next pass finds nothing new.
        sb.add_new(&mut rec, &mut session).unwrap();
        assert!(take(&mut rec).is_empty());
        assert_eq!(rec.rings.len(), 2);
        assert_eq!(retiring_of(&rec, 0), slot_ring::RUNNING);
    }

    #[test]
    fn a_forked_childs_first_thread_brings_fork_before_its_comm() {
        let (mut sb, mut session, mut rec) = setup();
        let child = PID + 10;
        let fork_time = 5_000;
        let mut first = thread(1, child, child, 0);
        first.fork = Some((PID, PID + 1, fork_time));
        session.threads = vec![thread(0, PID, PID, 0), first.clone()];
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(
            seen[1],
            Seen::Fork {
                pid: child,
                ppid: PID,
                tid: child,
                ptid: PID + 1,
                time: fork_time
            }
        );
        assert!(
            matches!(seen[2], Seen::Comm { pid, tid, time, .. } if pid == child && tid == child && time == fork_time),
            "{seen:?}"
        );
        // The child's second thread: no second FORK.
        let mut second = thread(2, child, child + 1, 0);
        second.fork = first.fork;
        session.threads.push(second);
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        assert!(
            matches!(seen[..], [Seen::Comm { tid, .. }] if tid == child + 1),
            "{seen:?}"
        );
    }

    #[test]
    fn an_execd_image_gets_comm_exec_and_ends_the_old_images_threads() {
        let (mut sb, mut session, mut rec) = setup();
        session.threads = vec![thread(0, PID, PID, 10), thread(1, PID, PID + 1, 10)];
        sb.add_new(&mut rec, &mut session).unwrap();
        take(&mut rec);
        // The exec: the main thread goes on in the new image, in a slot of its own.
        let mut image = thread(2, PID, PID, 20);
        image.comm = Some("next".into());
        let open = image.open_time;
        session.threads.push(image);
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        assert_eq!(
            seen,
            vec![
                Seen::Comm {
                    pid: PID,
                    tid: PID,
                    name: "next".into(),
                    exec: true,
                    time: open,
                    id: 102
                },
                // The old image's other thread ended with it, at the new image's start; its
                // main thread lives on, without an EXIT.
                Seen::Exit {
                    pid: PID,
                    ppid: std::process::id(),
                    tid: PID + 1
                },
            ]
        );
        assert_eq!(retiring_of(&rec, 0), slot_ring::GONE);
        assert_eq!(retiring_of(&rec, 1), slot_ring::GONE);
        assert_eq!(retiring_of(&rec, 2), slot_ring::RUNNING);
    }

    #[test]
    fn an_ended_thread_gets_one_exit_and_its_ring_retires() {
        let (mut sb, mut session, mut rec) = setup();
        session.threads = vec![thread(0, PID, PID, 0), thread(1, PID, PID + 1, 0)];
        sb.add_new(&mut rec, &mut session).unwrap();
        take(&mut rec);
        session.threads[1].ended = true;
        sb.add_new(&mut rec, &mut session).unwrap();
        assert_eq!(exits(&take(&mut rec)), vec![PID + 1]);
        assert_eq!(retiring_of(&rec, 1), slot_ring::ENDED);
        assert_eq!(retiring_of(&rec, 0), slot_ring::RUNNING);
        // Seen ended again before its slot is recycled: no second EXIT, no second ring.
        sb.add_new(&mut rec, &mut session).unwrap();
        assert!(take(&mut rec).is_empty());
        assert_eq!(rec.rings.len(), 2);
        // Its slot recycled to the next thread: that one is new.
        let mut next = thread(1, PID, PID + 2, 0);
        next.generation = 1;
        session.threads[1] = next;
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        assert!(
            matches!(seen[..], [Seen::Comm { tid, .. }] if tid == PID + 2),
            "{seen:?}"
        );
    }

    #[test]
    fn a_process_gone_without_destructors_gets_its_threads_exits() {
        let (mut sb, mut session, mut rec) = setup();
        let child = PID + 10;
        let mut c0 = thread(2, child, child, 0);
        c0.fork = Some((PID, PID, 7_000));
        let mut c1 = thread(3, child, child + 1, 0);
        c1.fork = c0.fork;
        session.threads = vec![thread(0, PID, PID, 0), c0, c1];
        sb.add_new(&mut rec, &mut session).unwrap();
        take(&mut rec);
        let key = (child, Some(7_000), NS);
        assert!(sb.ends.watched.contains(&key));
        // The child was killed: its slots stay TRACING, its pidfd says it ended.
        sb.ends.ended.push(key);
        sb.add_new(&mut rec, &mut session).unwrap();
        let seen = take(&mut rec);
        let mut tids = exits(&seen);
        tids.sort();
        assert_eq!(tids, vec![child, child + 1]);
        assert!(
            seen.iter()
                .all(|s| matches!(s, Seen::Exit { ppid, .. } if *ppid == PID))
        );
        assert_eq!(retiring_of(&rec, 2), slot_ring::GONE);
        assert_eq!(retiring_of(&rec, 3), slot_ring::GONE);
        assert_eq!(retiring_of(&rec, 0), slot_ring::RUNNING);
        // Watched no more; the program still is.
        assert_eq!(sb.ends.watched, vec![(PID, None, NS)]);
        sb.add_new(&mut rec, &mut session).unwrap();
        assert!(take(&mut rec).is_empty());
    }

    #[test]
    fn the_main_threads_exit_is_written_once_across_execs() {
        let (mut sb, mut session, mut rec) = setup();
        session.threads = vec![thread(0, PID, PID, 10)];
        sb.add_new(&mut rec, &mut session).unwrap();
        session.threads.push(thread(1, PID, PID, 20));
        sb.add_new(&mut rec, &mut session).unwrap();
        session.threads.push(thread(2, PID, PID, 30));
        sb.add_new(&mut rec, &mut session).unwrap();
        // The last image's main thread ends; then the process is seen gone, and the end of
        // the recording writes the program's threads' EXITs: one in all.
        session.threads[2].ended = true;
        sb.add_new(&mut rec, &mut session).unwrap();
        sb.ends.ended.push((PID, None, NS));
        sb.add_new(&mut rec, &mut session).unwrap();
        let all = session.threads.clone();
        let gone: Vec<_> = all.iter().collect();
        sb.write_exits(&mut rec, &gone).unwrap();
        let seen = take(&mut rec);
        assert_eq!(exits(&seen), vec![PID], "{seen:?}");
        let execs = seen
            .iter()
            .filter(|s| matches!(s, Seen::Comm { exec: true, .. }))
            .count();
        assert_eq!(execs, 2);
    }
}
