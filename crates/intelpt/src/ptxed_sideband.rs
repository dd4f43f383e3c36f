//! ptxed's perf_event sideband: each file's records printed and applied once the decoder's
//! time passes them, so the code the decoder reads is that of the process the trace was in.
//!
//! The records build one image per process (a context): MMAP and MMAP2 add files' code to
//! their process's image, COMM.EXEC gives a process a fresh image, FORK gives the child a copy
//! of its parent's. ITRACE_START, SWITCH and SWITCH_CPU_WIDE in a primary file (the trace's
//! cpu's) say which process runs next. A switch takes effect where the trace is, or is likely
//! to be, in the kernel (the decoder cannot be in the middle of user code of the process it
//! leaves), or where the position is unknown, as at the start of tracing; until then the old
//! image stays. Each file tracks that position itself from the decoder's events.
//!
//! These are libipt's sideband semantics, record for record, so output matches ptxed's. The
//! records are untrusted input: a bad record ends its file with a positioned error, mapped
//! files are read once each and only if they are regular files (so a name such as /dev/zero
//! costs nothing), and the images of all processes together hold at most [`PIECES_MAX`]
//! pieces, beyond which a record that would grow them is refused ("out of memory", as libipt
//! says when its allocations fail).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use crate::events::{Event, Kind};
use crate::image::Image;
use crate::pevent::{self, Body, Record};
use crate::ptdump_sideband::{PeventFile, SidebandFlags, SidebandOptions, print_record};

/// ptxed's sideband options.
#[derive(Debug, Clone, Default)]
pub struct Sideband {
    /// The files, how their records are shown (`--sb:*`) and `--sb:warn`.
    pub options: SidebandOptions,
    /// `--sb:switch`: a `[context: NAME]` line where the decoder takes up a process's image.
    pub switch: bool,
    /// The kernel's code (`--pevent:kcore`): where every process image starts.
    pub kernel: Image,
}

/// The most pieces of sections the process images hold together (about 40 bytes each).
pub const PIECES_MAX: usize = 1 << 22;

/// `perf_event_header.misc`: where the record's event happened.
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;

/// What a process's ELF files are built for, which picks its `[vdso]` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abi {
    X64,
    X32,
    Ia32,
}

/// A process and its image.
#[derive(Debug)]
struct Context {
    pid: u32,
    image: Image,
    /// Known once one of its mapped files was an x86 ELF file.
    abi: Option<Abi>,
}

type Ctx = Rc<RefCell<Context>>;

/// Where the trace is, as the events say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Location {
    Unknown,
    User,
    Kernel,
    LikelyUser,
    LikelyKernel,
}

impl Location {
    /// Where a pending context switch may take effect.
    fn may_switch(self) -> bool {
        matches!(
            self,
            Location::Unknown | Location::Kernel | Location::LikelyKernel
        )
    }

    fn of_ip(ip: u64, kernel_start: u64) -> Location {
        if ip < kernel_start {
            Location::User
        } else {
            Location::Kernel
        }
    }

    /// Tracing stopped without saying where: on the other side of the last known place,
    /// since that is what mostly stops it (a system call, an interrupt, a return to user).
    fn across(self) -> Location {
        match self {
            Location::Kernel | Location::LikelyKernel => Location::LikelyUser,
            Location::User | Location::LikelyUser => Location::LikelyKernel,
            Location::Unknown => Location::Unknown,
        }
    }

    /// Where event `e` puts the trace, `self` being where it was.
    fn after(self, e: &Event, kernel_start: u64) -> Location {
        let of = |ip| Location::of_ip(ip, kernel_start);
        match e.kind {
            Kind::Enabled => of(e.ip.unwrap_or(0)),
            Kind::Disabled => e.ip.map_or(self.across(), of),
            Kind::AsyncDisabled { at } => e.ip.map_or(of(at).across(), of),
            // An interrupt's target without an IP is 0 to libipt.
            Kind::AsyncBranch { to } => of(to.unwrap_or(0)),
            Kind::AsyncPaging { .. } => e.ip.map_or(Location::LikelyKernel, of),
            // Only the kernel writes CR3.
            Kind::Paging { .. } => Location::LikelyKernel,
            Kind::Overflow
            | Kind::ExecMode(_)
            | Kind::Tsx { .. }
            | Kind::Exstop
            | Kind::Mwait { .. }
            | Kind::Ptwrite { .. }
            | Kind::Tick
            | Kind::Iflags { .. }
            | Kind::Interrupt { .. }
            | Kind::Iret
            | Kind::Smi
            | Kind::Rsm
            | Kind::Init
            | Kind::Vmentry
            | Kind::Vmexit { .. }
            | Kind::Shutdown
            | Kind::Uintr { .. }
            | Kind::Uiret => e.ip.map_or(Location::Unknown, of),
            _ => Location::Unknown,
        }
    }
}

/// What applying a record ran into: an error, always reported, or a warning (`--sb:warn`).
enum Problem {
    Error(&'static str),
    Warning(&'static str),
}

const NOMEM: Problem = Problem::Error("out of memory");

/// One file's records and what it knows of the trace.
struct Channel<'a> {
    file: &'a PeventFile,
    records: pevent::Reader<'a, 'a>,
    /// The record read last and not yet applied; `None` at the end of the file.
    record: Option<Record<'a>>,
    /// Its TSC (0 without a time: due at once).
    due: u64,
    location: Location,
    /// The context this file switched to last, and the one it will switch to.
    context: Option<Ctx>,
    next_context: Option<Ctx>,
}

/// How reading a file's next record went.
enum Fetch {
    Record,
    End,
    /// Reported; the rest of the file cannot be found.
    Failed,
}

/// The sideband files while the trace is decoded.
pub struct Session<'a> {
    show: SidebandFlags,
    warn: bool,
    switch: bool,
    kernel: &'a Image,
    channels: Vec<Channel<'a>>,
    /// Channels with a record, by its TSC; a channel goes in before those with an equal one,
    /// so at equal times the files given first come first.
    queue: Vec<usize>,
    /// Channels at their file's end with a context switch still to place, newest first.
    retired: Vec<usize>,
    /// Each process's current context (an exec or a fork replaces it).
    contexts: HashMap<u32, Ctx>,
    /// Pieces of sections in the images of `contexts`.
    pieces: usize,
    /// Mapped files by name, read once: `None` for those that could not be.
    files: HashMap<Vec<u8>, Option<Arc<[u8]>>>,
    /// The context whose image the decoder has (none: the command line's image), and
    /// whether the decoder's copy is out of date.
    installed: Option<Ctx>,
    image_changed: bool,
}

impl<'a> Session<'a> {
    pub fn new(sb: &'a Sideband) -> Self {
        Session {
            show: sb.options.show,
            warn: sb.options.warn,
            switch: sb.switch,
            kernel: &sb.kernel,
            channels: sb
                .options
                .files
                .iter()
                .map(|file| Channel {
                    file,
                    records: pevent::Reader::new(&file.bytes, &file.config),
                    record: None,
                    due: 0,
                    location: Location::Unknown,
                    context: None,
                    next_context: None,
                })
                .collect(),
            queue: Vec::new(),
            retired: Vec::new(),
            contexts: HashMap::new(),
            pieces: 0,
            files: HashMap::new(),
            installed: None,
            image_changed: false,
        }
    }

    /// Reads each file's first record; a file without one takes no further part.
    pub fn start(&mut self, out: &mut impl Write) -> io::Result<()> {
        for i in (0..self.channels.len()).rev() {
            if let Fetch::Record = self.fetch(i, out)? {
                self.enqueue(i);
            }
        }
        Ok(())
    }

    /// Handles a decoder event (printed or not): prints and applies the records its time has
    /// reached, then lets every file place a pending context switch. The image the decoder
    /// must go on with, if it changed.
    pub fn on_event(&mut self, e: &Event, out: &mut impl Write) -> io::Result<Option<Image>> {
        let tsc = e.tsc.unwrap_or(0);
        while let Some(&i) = self.queue.first() {
            if tsc < self.channels[i].due {
                break;
            }
            self.queue.remove(0);
            let ch = &self.channels[i];
            if let Some(r) = ch.record {
                print_record(out, self.show, &ch.file.path, &r)?;
                if let Err(p) = self.apply(i, &r, out)? {
                    self.report(out, i, r.offset, p)?;
                }
            }
            match self.fetch(i, out)? {
                Fetch::Record => self.enqueue(i),
                Fetch::End => self.retired.insert(0, i),
                Fetch::Failed => {}
            }
        }
        for k in 0..self.queue.len() {
            self.place_switch(self.queue[k], e, out)?;
        }
        let mut k = 0;
        while k < self.retired.len() {
            if self.place_switch(self.retired[k], e, out)? {
                k += 1;
            } else {
                self.retired.remove(k);
            }
        }
        if !std::mem::take(&mut self.image_changed) {
            return Ok(None);
        }
        Ok(self.installed.as_ref().map(|c| c.borrow().image.clone()))
    }

    fn fetch(&mut self, i: usize, out: &mut impl Write) -> io::Result<Fetch> {
        let ch = &mut self.channels[i];
        ch.record = None;
        match ch.records.next() {
            Some(Ok(r)) => {
                ch.due = r.tsc.unwrap_or(0);
                ch.record = Some(r);
                Ok(Fetch::Record)
            }
            None => {
                if let Some(at) = ch.records.cut_short() {
                    // libipt ends the file here without a word; records were lost.
                    self.report(out, i, at, Problem::Warning("truncated record"))?;
                }
                Ok(Fetch::End)
            }
            Some(Err(e)) => {
                let p = Problem::Error(e.kind.libipt_str());
                self.report(out, i, e.offset, p)?;
                Ok(Fetch::Failed)
            }
        }
    }

    fn enqueue(&mut self, i: usize) {
        let due = self.channels[i].due;
        let at = self
            .queue
            .iter()
            .position(|&j| due <= self.channels[j].due)
            .unwrap_or(self.queue.len());
        self.queue.insert(at, i);
    }

    fn report(&self, out: &mut impl Write, i: usize, offset: usize, p: Problem) -> io::Result<()> {
        let (severity, what) = match p {
            Problem::Error(w) => ("error", w),
            Problem::Warning(_) if !self.warn => return Ok(()),
            Problem::Warning(w) => ("warning", w),
        };
        let path = &self.channels[i].file.path;
        writeln!(out, "[{path}:{offset:016x} sideband {severity}: {what}]")
    }

    /// Where the trace is after `e`, for channel `i`, and its pending switch made there if it
    /// may be. False for a channel at its end with nothing left to do.
    fn place_switch(&mut self, i: usize, e: &Event, out: &mut impl Write) -> io::Result<bool> {
        let ch = &mut self.channels[i];
        let before = ch.location;
        ch.location = before.after(e, ch.file.process.kernel_start);
        if ch.next_context.is_none() {
            return Ok(ch.record.is_some());
        }
        if before.may_switch() || ch.location.may_switch() {
            self.switch_contexts(i, out)?;
        }
        Ok(true)
    }

    fn switch_contexts(&mut self, i: usize, out: &mut impl Write) -> io::Result<()> {
        let ch = &mut self.channels[i];
        let Some(next) = ch.next_context.take() else {
            return Ok(());
        };
        if self.switch {
            writeln!(out, "[context: pid-{:x}]", next.borrow().pid)?;
        }
        ch.context = Some(next.clone());
        self.installed = Some(next);
        self.image_changed = true;
        Ok(())
    }

    /// Channel `i` is to switch to `ctx` at the next place that allows it, instead of any
    /// switch it had pending (timing is imprecise; a later record knows better).
    fn prepare_switch(&mut self, i: usize, ctx: Ctx) {
        let ch = &mut self.channels[i];
        if ch
            .next_context
            .as_ref()
            .is_some_and(|c| Rc::ptr_eq(c, &ctx))
        {
            return;
        }
        ch.next_context = None;
        if ch.context.as_ref().is_some_and(|c| Rc::ptr_eq(c, &ctx)) {
            return;
        }
        ch.next_context = Some(ctx);
    }

    fn prepare_switch_to_pid(&mut self, i: usize, pid: u32) -> Result<(), Problem> {
        let ctx = self.context(pid)?;
        self.prepare_switch(i, ctx);
        Ok(())
    }

    /// The context of `pid`, made (with the kernel's code) if there is none.
    fn context(&mut self, pid: u32) -> Result<Ctx, Problem> {
        if let Some(c) = self.contexts.get(&pid) {
            return Ok(c.clone());
        }
        self.new_context(pid)
    }

    fn new_context(&mut self, pid: u32) -> Result<Ctx, Problem> {
        self.remove_context(pid);
        let n = self.kernel.len();
        if self.pieces + n > PIECES_MAX {
            return Err(NOMEM);
        }
        self.pieces += n;
        let c = Rc::new(RefCell::new(Context {
            pid,
            image: self.kernel.clone(),
            abi: None,
        }));
        self.contexts.insert(pid, c.clone());
        Ok(c)
    }

    /// Forgets `pid`'s context; whoever uses it keeps it until they switch away.
    fn remove_context(&mut self, pid: u32) {
        if let Some(c) = self.contexts.remove(&pid) {
            self.pieces -= c.borrow().image.len();
        }
    }

    /// Applies record `r` of channel `i`: what it could not do is the inner error.
    fn apply(
        &mut self,
        i: usize,
        r: &Record<'_>,
        out: &mut impl Write,
    ) -> io::Result<Result<(), Problem>> {
        if let Body::ItraceStart { pid, .. } = r.body
            && self.channels[i].file.primary
        {
            if let Err(p) = self.prepare_switch_to_pid(i, pid) {
                return Ok(Err(p));
            }
            // Tracing just started: no need to wait for the kernel.
            self.switch_contexts(i, out)?;
            return Ok(Ok(()));
        }
        Ok(self.apply_quietly(i, r))
    }

    /// Applies a record that prints nothing.
    fn apply_quietly(&mut self, i: usize, r: &Record<'_>) -> Result<(), Problem> {
        let primary = self.channels[i].file.primary;
        let switch_out = r.misc & pevent::MISC_SWITCH_OUT != 0;
        let sample_pid = r.samples.pid_tid.map(|(pid, _)| pid);
        match r.body {
            Body::Fork(t) => self.fork(t),
            Body::Comm { pid, .. } if r.misc & pevent::MISC_COMM_EXEC != 0 => {
                // A fresh image, filled by the MMAPs that follow; the old one stays with
                // whoever uses it until the switch, which the trace has not reached yet.
                let ctx = self.new_context(pid)?;
                if primary {
                    self.prepare_switch(i, ctx);
                }
                Ok(())
            }
            // A switch-in says who runs; a switch-out is followed by one.
            Body::Switch if primary && !switch_out => {
                let pid = sample_pid.ok_or(Problem::Error("bad configuration"))?;
                self.prepare_switch_to_pid(i, pid)
            }
            Body::SwitchCpuWide { pid, .. } if primary => match (switch_out, sample_pid) {
                (true, _) => self.prepare_switch_to_pid(i, pid),
                (false, Some(pid)) => self.prepare_switch_to_pid(i, pid),
                (false, None) => Ok(()),
            },
            // The kernel's code on disk is not what runs: it comes from --pevent:kcore.
            Body::Mmap { .. } | Body::Mmap2 { .. } if r.misc & MISC_CPUMODE_MASK == MISC_KERNEL => {
                Ok(())
            }
            Body::Mmap {
                pid,
                addr,
                len,
                pgoff,
                filename,
                ..
            }
            | Body::Mmap2 {
                pid,
                addr,
                len,
                pgoff,
                filename,
                ..
            } => self.map(i, pid, filename, pgoff, len, addr),
            Body::Lost { .. } => Err(Problem::Warning("sideband lost")),
            Body::Aux { flags, .. } if primary && flags & pevent::AUX_FLAG_TRUNCATED != 0 => {
                Err(Problem::Warning("trace lost"))
            }
            _ => Ok(()),
        }
    }

    fn fork(&mut self, t: pevent::Task) -> Result<(), Problem> {
        // A new thread: its process has its context already.
        if t.pid == t.ppid {
            return Ok(());
        }
        // A new process's first thread has the process's id.
        if t.pid != t.tid {
            return Err(Problem::Error("internal error"));
        }
        let child = self.new_context(t.pid)?;
        let Some(parent) = self.contexts.get(&t.ppid).cloned() else {
            return Ok(());
        };
        // libipt adds the parent's sections over the child's kernel code. The parent's image
        // started from the same kernel code and sections only ever cover more, so that is
        // the parent's image.
        let image = parent.borrow().image.clone();
        let (old, new) = (child.borrow().image.len(), image.len());
        if self.pieces - old + new > PIECES_MAX {
            return Err(NOMEM);
        }
        self.pieces = self.pieces - old + new;
        child.borrow_mut().image = image;
        Ok(())
    }

    fn map(
        &mut self,
        i: usize,
        pid: u32,
        filename: &[u8],
        pgoff: u64,
        len: u64,
        addr: u64,
    ) -> Result<(), Problem> {
        let ctx = self.context(pid)?;
        let file: &'a PeventFile = self.channels[i].file;
        let process = &file.process;
        let lost = Problem::Warning("image section lost");
        let name: Vec<u8> = if filename.first() == Some(&b'[') {
            if filename != b"[vdso]" {
                return Err(lost);
            }
            let vdso = match ctx.borrow().abi {
                Some(Abi::X64) => process.vdso_x64.as_ref(),
                Some(Abi::X32) => process.vdso_x32.as_ref(),
                Some(Abi::Ia32) => process.vdso_ia32.as_ref(),
                None => None,
            };
            vdso.ok_or(Problem::Error("bad configuration"))?
                .as_bytes()
                .to_vec()
        } else if filename == b"//anon" || contains(filename, b" (deleted)") {
            // JIT code and files deleted since: nothing on disk is what ran.
            return Err(lost);
        } else {
            let root = process.sysroot.as_deref().unwrap_or("").as_bytes();
            [root, filename].concat()
        };
        let data = self.file(&name);
        if ctx.borrow().abi.is_none() {
            ctx.borrow_mut().abi = data.as_deref().and_then(elf_abi);
        }
        let data = data.ok_or(Problem::Error("bad file"))?;
        let offset = usize::try_from(pgoff)
            .ok()
            .filter(|&o| o < data.len())
            .ok_or(Problem::Error("invalid argument"))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let mut c = ctx.borrow_mut();
        let before = c.image.len();
        // A section splits at most one piece in two.
        if self.pieces + 2 > PIECES_MAX {
            return Err(NOMEM);
        }
        c.image.map(addr, data, offset, len);
        self.pieces = self.pieces + c.image.len() - before;
        drop(c);
        if self.installed.as_ref().is_some_and(|c| Rc::ptr_eq(c, &ctx)) {
            self.image_changed = true;
        }
        Ok(())
    }

    /// A mapped file's bytes, read the first time it is asked for; only regular files, and
    /// no more than their size when asked.
    fn file(&mut self, name: &[u8]) -> Option<Arc<[u8]>> {
        if let Some(f) = self.files.get(name) {
            return f.clone();
        }
        let read = || -> io::Result<Arc<[u8]>> {
            use std::io::Read;
            let f = std::fs::File::open(path_of(name))?;
            let meta = f.metadata()?;
            if !meta.is_file() {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            let mut buf = Vec::new();
            f.take(meta.len()).read_to_end(&mut buf)?;
            Ok(Arc::from(buf))
        };
        let data = read().ok();
        self.files.insert(name.to_vec(), data.clone());
        data
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A file name as the record holds it: bytes, which on Unix are the name itself.
fn path_of(name: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(name))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(name).into_owned())
    }
}

/// The ABI of an x86 ELF file: its class, and for 32-bit files the machine.
fn elf_abi(data: &[u8]) -> Option<Abi> {
    const EI_CLASS: usize = 4;
    const EI_VERSION: usize = 6;
    const E_MACHINE: usize = 18;
    const ELF32_EHDR: usize = 52;
    if data.get(..4)? != b"\x7fELF" || *data.get(EI_VERSION)? != 1 {
        return None;
    }
    match data.get(EI_CLASS)? {
        2 => Some(Abi::X64),
        1 if data.len() >= ELF32_EHDR => {
            match u16::from_le_bytes([data[E_MACHINE], data[E_MACHINE + 1]]) {
                3 => Some(Abi::Ia32),
                62 => Some(Abi::X32),
                _ => None,
            }
        }
        _ => None,
    }
}
