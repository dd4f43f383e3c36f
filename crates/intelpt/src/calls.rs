//! Calls and returns from the instruction flow: what a view of the calls needs from a trace
//! (perf's `--itrace=cr`, its thread-stack), without the instructions in between.
//!
//! [`walk_calls`] drives a [`Flow`] from the trace's first PSB to its end and hands on, in
//! trace order, each near call and near return with the instruction it went to, the time of
//! its branch, and what interrupts the flow: tracing turned off and on, a change of address
//! space (PIP), and a stretch of trace that could not be decoded (the decode goes on at the
//! next PSB, as perf's decoder does). A call's destination is the first instruction the trace
//! shows after it, so direct and indirect calls are told the same way; a call or return
//! after which tracing stopped goes where the disable says, or nowhere known.

use std::ops::ControlFlow;

use crate::events::{Event, Kind};
use crate::flow::{Block, Config, Error, Flow, Resync, Status};
use crate::image::Image;
use crate::insn::{Class, Insn};
use crate::timing::ClockConfig;

/// What happened, in trace order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A near call at `at` (its return address `ret`) to `to` (0: not known, tracing stopped
    /// at the call).
    Call { at: u64, ret: u64, to: u64 },
    /// A near return at `at` to `to` (0: not known).
    Return { at: u64, to: u64 },
    /// Tracing turned on at `ip`.
    Enabled { ip: u64 },
    /// The decode found its place at a PSB (the trace's first, or the next after a gap),
    /// tracing on at `ip` (0: off): the code decoded next may be another thread's.
    Synced { ip: u64 },
    /// Tracing turned off: the flow goes on where the trace does not follow it.
    Disabled,
    /// The flow went to `ip` in the kernel, traced but its code not at hand (a recording
    /// without `--kcore`): the trace is passed over to where the flow comes back to code at
    /// hand (an [`CallKind::Enabled`] there), the calls open before staying open, as around
    /// a system call in a user-only trace.
    KernelPassed { ip: u64 },
    /// The address space changed (PIP: CR3 loaded): another process's code from here.
    Paging { cr3: u64 },
    /// The trace could not be followed from `offset` (an error, or an overflow: the
    /// processor's own loss of trace); it resumes at `resumed` (the next PSB, or the
    /// overflow's end), the calls open before it unknown.
    Gap {
        offset: usize,
        resumed: usize,
        error: Option<Error>,
    },
}

/// One thing that happened and the TSC of the branch it happened at (the last time the
/// trace gave before it; `None` before the trace gave one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallEvent {
    pub kind: CallKind,
    pub tsc: Option<u64>,
}

/// How the trace was recorded: its clocks and errata.
#[derive(Debug, Clone, Copy, Default)]
pub struct Setup {
    pub clock: ClockConfig,
    pub filters: [(u8, u64, u64); 4],
}

/// What a walk saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked {
    pub insns: u64,
    pub calls: u64,
    pub returns: u64,
    /// Stretches that could not be decoded, and the trace bytes they held.
    pub gaps: u64,
    pub gap_bytes: u64,
}

/// A call or return waiting for the instruction it went to.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Call { at: u64, ret: u64 },
    Return { at: u64 },
}

struct Walker<'f, F> {
    f: &'f mut F,
    /// The code to decode from now on, as the caller asked after an event.
    switch: Option<Image>,
    /// The caller asked to stop (its output failed).
    stopped: bool,
    tsc: Option<u64>,
    pending: Option<(Pending, Option<u64>)>,
    walked: Walked,
}

impl<F: FnMut(&CallEvent) -> ControlFlow<(), Option<Image>>> Walker<'_, F> {
    fn emit(&mut self, kind: CallKind, tsc: Option<u64>) {
        if self.stopped {
            return;
        }
        match (self.f)(&CallEvent { kind, tsc }) {
            ControlFlow::Continue(Some(im)) => self.switch = Some(im),
            ControlFlow::Continue(None) => {}
            ControlFlow::Break(()) => self.stopped = true,
        }
    }

    /// The pending call or return went to `to`.
    fn land(&mut self, to: u64) {
        if let Some((p, tsc)) = self.pending.take() {
            let kind = match p {
                Pending::Call { at, ret } => CallKind::Call { at, ret, to },
                Pending::Return { at } => CallKind::Return { at, to },
            };
            self.emit(kind, tsc);
        }
    }

    fn insns(&mut self, insns: &[Insn]) {
        self.walked.insns += insns.len() as u64;
        for i in insns {
            if self.pending.is_some() {
                self.land(i.ip);
            }
            let next = i.ip.wrapping_add(u64::from(i.len));
            match i.class {
                // `call` to the next instruction reads the IP; nothing returns from it.
                Class::Call { target } if target == next => {}
                Class::Call { .. } | Class::IndirectCall => {
                    self.walked.calls += 1;
                    self.pending = Some((
                        Pending::Call {
                            at: i.ip,
                            ret: next,
                        },
                        self.tsc,
                    ));
                }
                Class::Return => {
                    self.walked.returns += 1;
                    self.pending = Some((Pending::Return { at: i.ip }, self.tsc));
                }
                _ => {}
            }
        }
    }

    fn event(&mut self, e: &Event) {
        if e.tsc.is_some() {
            self.tsc = e.tsc;
        }
        match e.kind {
            Kind::Enabled => {
                let ip = e.ip.unwrap_or(0);
                // A call or return tracing stopped at lands where tracing resumes only if it
                // resumes there at once (a call into code the filters leave out lands later,
                // at its return: not its destination).
                self.pending = None;
                self.emit(CallKind::Enabled { ip }, self.tsc);
            }
            Kind::Disabled => {
                if self.pending.is_some() {
                    self.land(e.ip.unwrap_or(0));
                }
                self.emit(CallKind::Disabled, self.tsc);
            }
            // Tracing stopped before the instruction at `at` ran (an interrupt, or the
            // trace paused: FUP + TIP.PGD): a call or return just walked went there, not to
            // the TIP.PGD's target (the handler's, suppressed when filtered out).
            Kind::AsyncDisabled { at } => {
                if self.pending.is_some() {
                    self.land(at);
                }
                self.emit(CallKind::Disabled, self.tsc);
            }
            Kind::Paging { cr3, .. } | Kind::AsyncPaging { cr3, .. } => {
                self.emit(CallKind::Paging { cr3 }, self.tsc);
            }
            // An interrupt or exception into traced code (FUP + TIP): it came before the
            // instruction at the FUP's IP ran, so a call or return just walked went there,
            // not into the handler.
            Kind::AsyncBranch { to } if self.pending.is_some() => {
                self.land(e.ip.or(to).unwrap_or(0))
            }
            _ => {}
        }
    }

    fn synced(&mut self, ip: u64) {
        self.emit(CallKind::Synced { ip }, self.tsc);
    }

    fn gap(&mut self, offset: usize, resumed: usize, error: Option<Error>) {
        self.pending = None;
        self.walked.gaps += 1;
        self.walked.gap_bytes += resumed.saturating_sub(offset) as u64;
        self.emit(
            CallKind::Gap {
                offset,
                resumed,
                error,
            },
            self.tsc,
        );
    }
}

/// Whether `ip` is in the upper half of the address space: the kernel's.
fn is_kernel(ip: u64) -> bool {
    ip >> 63 == 1
}

/// How a passage through kernel code not at hand ended ([`pass_kernel`]).
enum Passage {
    /// Back in code at hand, or tracing off: the status there.
    Back(Status),
    /// The trace ended in the kernel.
    Ended,
    /// The flow could not be followed out (an overflow, a resync that did not move on).
    Lost,
}

/// After the flow went into kernel code that is not at hand: resyncs at the next IP the
/// trace gives, and takes the events pending there (an interrupt's FUP and TIP within the
/// kernel, a mode or paging change), until the IP is code at hand or tracing is off.
/// However long the passage (a system call may branch through the kernel for megabytes of
/// trace), each resync moves past at least one packet and each event is taken once, so
/// the trace bounds the loop.
fn pass_kernel(flow: &mut Flow<'_>) -> Passage {
    let mut last = flow.offset();
    loop {
        let mut st = match flow.resync() {
            Ok(Resync::Status(st)) => st,
            // A PTWRITE without IP: nothing of the program's; the resync goes on.
            Ok(Resync::EventIgnored) => match flow.event() {
                Ok(_) => continue,
                Err(Error::Event(crate::events::Error::Eos)) => return Passage::Ended,
                Err(_) => return Passage::Lost,
            },
            Err(Error::Event(crate::events::Error::Eos)) => return Passage::Ended,
            Err(_) => return Passage::Lost,
        };
        // The events where the resync stands, taken while the flow stays in the kernel (an
        // asynchronous branch moves it to its target).
        while st.pending && !st.suppressed && is_kernel(flow.ip()) {
            match flow.event() {
                Ok((e, _, _)) if e.kind == Kind::Overflow => return Passage::Lost,
                Ok((_, _, s)) => st = s,
                Err(Error::Event(crate::events::Error::Eos)) => return Passage::Ended,
                Err(_) => return Passage::Lost,
            }
        }
        if st.suppressed || !is_kernel(flow.ip()) {
            return Passage::Back(st);
        }
        // Still in the kernel: decoding there fails again, which this resync passes over;
        // one that stands still would come back here for ever.
        if flow.offset() <= last {
            return Passage::Lost;
        }
        last = flow.offset();
    }
}

/// Walks `trace` over the code of `image`, handing each call, return and interruption to
/// `f` in trace order. Where `f` gives an image (at an enable: another thread of another
/// process runs from there), the code is that image's from then on; where it breaks, the
/// walk ends there.
pub fn walk_calls(
    trace: &[u8],
    image: &Image,
    setup: &Setup,
    mut f: impl FnMut(&CallEvent) -> ControlFlow<(), Option<Image>>,
) -> Walked {
    let mut flow = Flow::new(trace, image);
    flow.config = Config {
        ticks: true,
        filters: setup.filters,
        ..Config::default()
    };
    flow.set_clock(setup.clock, false);
    let mut w = Walker {
        f: &mut f,
        switch: None,
        stopped: false,
        tsc: None,
        pending: None,
        walked: Walked::default(),
    };
    let mut block = Block::default();
    // Where the decode last lost the trace: bytes from there to the next sync are a gap.
    let mut lost_at: Option<(usize, Option<Error>)> = None;
    let mut first = true;
    loop {
        let before = flow.offset();
        let mut st: Status = match flow.sync() {
            Ok(st) => st,
            Err(Error::Event(crate::events::Error::Eos)) => {
                if let Some((at, e)) = lost_at {
                    w.gap(at, trace.len(), e);
                } else if first && !trace.is_empty() {
                    // No PSB at all: nothing of it can be decoded.
                    w.gap(0, trace.len(), None);
                }
                break;
            }
            Err(e) => {
                let from = lost_at.map_or(before, |l| l.0);
                // A PSB whose header does not read: go on at the next (as ptxed does), the
                // bytes from where the flow was lost counted as one gap; the rest is lost only
                // where the search stands still.
                if flow.offset() <= before {
                    w.gap(from, trace.len(), Some(e));
                    break;
                }
                lost_at = Some((from, Some(e)));
                continue;
            }
        };
        // The PSB the sync found (the flow stands past its header).
        let synced_at = crate::decode::next_psb(trace, lost_at.map_or(before, |l| l.0))
            .unwrap_or(before)
            .min(flow.offset());
        if let Some((at, e)) = lost_at.take() {
            w.gap(at, synced_at, e);
        } else if first && synced_at > 0 {
            // The bytes before the first PSB: a buffer that begins mid-trace.
            w.gap(0, synced_at, None);
        }
        first = false;
        let mut synced = true;
        let failed = 'decode: loop {
            let failed = loop {
                let mut err = None;
                while st.pending {
                    match flow.event() {
                        Ok((e, _, s)) => {
                            if e.kind == Kind::Overflow {
                                // The processor lost trace: the calls open are not known.
                                let at = flow.offset();
                                w.gap(at, at, None);
                            }
                            if !e.status_update {
                                if synced {
                                    synced = false;
                                    w.synced(if st.suppressed { 0 } else { flow.ip() });
                                }
                                w.event(&e);
                            } else if e.tsc.is_some() {
                                w.tsc = e.tsc;
                            }
                            if let Some(im) = w.switch.take() {
                                flow.set_image(im);
                            }
                            st = s;
                        }
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                if let Some(e) = err {
                    break e;
                }
                if synced {
                    synced = false;
                    w.synced(if st.suppressed { 0 } else { flow.ip() });
                    if let Some(im) = w.switch.take() {
                        flow.set_image(im);
                    }
                }
                if st.eos {
                    w.land(0);
                    return w.walked;
                }
                if w.stopped {
                    return w.walked;
                }
                let r = flow.next(&mut block);
                // A block may hold a loop's passes: none counted past a stop.
                for part in block.blocks() {
                    if w.stopped {
                        return w.walked;
                    }
                    w.insns(part);
                }
                match r {
                    Ok(s) => st = s,
                    Err(e) => break e,
                }
            };
            // The flow went into the kernel, whose code is not at hand: go on where it comes
            // back (the next IP the trace gives that is code at hand), as perf does; the calls
            // open stay open. Else, and if that fails, the next PSB.
            if failed == Error::Nomap && is_kernel(flow.ip()) {
                let at = flow.ip();
                let passage = pass_kernel(&mut flow);
                if !matches!(passage, Passage::Lost) {
                    w.pending = None;
                    w.emit(CallKind::KernelPassed { ip: at }, w.tsc);
                }
                match passage {
                    Passage::Back(s) => {
                        // The way back (a sysret's TIP, an iret's) may carry the time: the kernel's
                        // time is the passage's, not the calls' after it.
                        w.tsc = flow.last_tsc().or(w.tsc);
                        if !s.suppressed {
                            w.emit(CallKind::Enabled { ip: flow.ip() }, w.tsc);
                        }
                        // Another thread's code from here (a switch inside the kernel).
                        if let Some(im) = w.switch.take() {
                            flow.set_image(im);
                        }
                        st = s;
                        continue 'decode;
                    }
                    Passage::Ended => break Error::Event(crate::events::Error::Eos),
                    Passage::Lost => {}
                }
            }
            break failed;
        };
        if failed == Error::Event(crate::events::Error::Eos) {
            w.land(0);
            break;
        }
        lost_at = Some((flow.offset(), Some(failed)));
        w.pending = None;
    }
    w.walked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Section;

    /// What a walk of `trace` over `image` hands out, and its totals.
    fn walked(trace: &[u8], image: &Image) -> (Vec<CallKind>, Walked) {
        let mut got = Vec::new();
        let walked = walk_calls(trace, image, &Setup::default(), |e| {
            got.push(e.kind);
            ControlFlow::Continue(None)
        });
        (got, walked)
    }

    /// PSB, PSBEND.
    fn psb() -> Vec<u8> {
        let mut v = Vec::new();
        for _ in 0..8 {
            v.extend_from_slice(&[0x02, 0x82]);
        }
        v.extend_from_slice(&[0x02, 0x23]);
        v
    }

    /// MODE.Exec 64-bit, then TIP.PGE to `ip` (six IP bytes, sign-extended: IPBytes 3).
    fn enable(ip: u64) -> Vec<u8> {
        let mut v = vec![0x99, 0x01, 0x71];
        v.extend_from_slice(&ip.to_le_bytes()[..6]);
        v
    }

    /// TIP to `ip` (IPBytes 3).
    fn tip(ip: u64) -> Vec<u8> {
        let mut v = vec![0x6d];
        v.extend_from_slice(&ip.to_le_bytes()[..6]);
        v
    }

    /// FUP at `ip` (IPBytes 3).
    fn fup(ip: u64) -> Vec<u8> {
        let mut v = vec![0x7d];
        v.extend_from_slice(&ip.to_le_bytes()[..6]);
        v
    }

    /// TIP.PGD, IP suppressed.
    const PGD: u8 = 0x01;

    fn image(code: &[u8], base: u64) -> Image {
        let mut im = Image::default();
        im.add(Section {
            base,
            bytes: code.to_vec(),
            name: "code".into(),
        });
        im
    }

    /// main: call f; call *%rax; jmp *%rax (tracing stops there).
    /// f: ret.  f2 (through rax): ret.
    #[test]
    fn direct_and_indirect_calls_and_their_returns_in_order() {
        let base = 0x1000u64;
        // 0x1000: e8 0b 00 00 00   call 0x1010
        // 0x1005: ff d0            call *%rax
        // 0x1007: ff e0            jmp *%rax (where tracing stops)
        // 0x1010: c3               ret
        // 0x1020: c3               ret
        let mut code = vec![0x90u8; 0x30];
        code[..5].copy_from_slice(&[0xe8, 0x0b, 0, 0, 0]);
        code[5..7].copy_from_slice(&[0xff, 0xd0]);
        code[7..9].copy_from_slice(&[0xff, 0xe0]);
        code[0x10] = 0xc3;
        code[0x20] = 0xc3;
        let mut t = psb();
        t.extend(enable(0x1000));
        t.extend(tip(0x1005)); // f's ret (no return compression)
        t.extend(tip(0x1020)); // call *%rax
        t.extend(tip(0x1007)); // f2's ret
        t.push(PGD);
        let (got, walked) = walked(&t, &image(&code, base));
        assert_eq!(
            got,
            vec![
                CallKind::Synced { ip: 0 },
                CallKind::Enabled { ip: 0x1000 },
                CallKind::Call {
                    at: 0x1000,
                    ret: 0x1005,
                    to: 0x1010
                },
                CallKind::Return {
                    at: 0x1010,
                    to: 0x1005
                },
                CallKind::Call {
                    at: 0x1005,
                    ret: 0x1007,
                    to: 0x1020
                },
                CallKind::Return {
                    at: 0x1020,
                    to: 0x1007
                },
                CallKind::Disabled,
            ]
        );
        assert_eq!((walked.calls, walked.returns, walked.gaps), (2, 2, 0));
    }

    /// An interrupt (or a pause of the trace) right after a call: FUP at the call's target,
    /// TIP.PGD with the IP suppressed. The call went to the FUP's IP, which had not run yet.
    #[test]
    fn a_call_just_before_an_asynchronous_disable_lands_at_the_fups_ip() {
        // 0x1000: e8 0b 00 00 00   call 0x1010
        // 0x1010: 90               nop (interrupted before it ran)
        let mut code = vec![0x90u8; 0x20];
        code[..5].copy_from_slice(&[0xe8, 0x0b, 0, 0, 0]);
        let mut t = psb();
        t.extend(enable(0x1000));
        // FUP 0x1010, TIP.PGD without IP.
        t.extend(fup(0x1010));
        t.push(PGD);
        let (got, walked) = walked(&t, &image(&code, 0x1000));
        assert_eq!(
            got,
            vec![
                CallKind::Synced { ip: 0 },
                CallKind::Enabled { ip: 0x1000 },
                CallKind::Call {
                    at: 0x1000,
                    ret: 0x1005,
                    to: 0x1010
                },
                CallKind::Disabled,
            ]
        );
        assert_eq!((walked.calls, walked.gaps), (1, 0));
    }

    /// An asynchronous branch into traced code (FUP + TIP: an interrupt, a signal's handler)
    /// right after a call: the call went to the FUP's IP, the instruction the branch came
    /// before, not to the handler.
    #[test]
    fn a_call_just_before_an_asynchronous_branch_lands_at_the_fups_ip() {
        // 0x1000: e8 0b 00 00 00   call 0x1010
        // 0x1010: 90               nop (interrupted before it ran)
        // 0x1020: ff e0            jmp *%rax (the handler; tracing stops there)
        let mut code = vec![0x90u8; 0x30];
        code[..5].copy_from_slice(&[0xe8, 0x0b, 0, 0, 0]);
        code[0x20..0x22].copy_from_slice(&[0xff, 0xe0]);
        let mut t = psb();
        t.extend(enable(0x1000));
        t.extend(fup(0x1010));
        t.extend(tip(0x1020));
        t.push(PGD);
        let (got, _) = walked(&t, &image(&code, 0x1000));
        assert!(
            got.contains(&CallKind::Call {
                at: 0x1000,
                ret: 0x1005,
                to: 0x1010
            }),
            "{got:?}"
        );
    }

    /// A trace whose code is not in the image: the decode says where it lost the flow and
    /// goes on at the next PSB.
    #[test]
    fn code_missing_from_the_image_is_a_gap_up_to_the_next_psb() {
        let code = [0xc3u8; 16];
        let mut t = psb();
        t.extend(enable(0x9000)); // nothing mapped there
        t.extend(tip(0x9010));
        let second = t.len();
        t.extend(psb());
        t.extend(enable(0x1000));
        t.push(PGD);
        let (got, walked) = walked(&t, &image(&code, 0x1000));
        assert_eq!(walked.gaps, 1, "{got:?}");
        let gap = got
            .iter()
            .find_map(|k| match k {
                CallKind::Gap { resumed, error, .. } => Some((*resumed, *error)),
                _ => None,
            })
            .expect("a gap");
        assert_eq!(gap, (second, Some(Error::Nomap)));
        assert!(got.contains(&CallKind::Enabled { ip: 0x1000 }), "{got:?}");
    }

    /// A PSB whose header does not read is passed over: the decode goes on at the next PSB
    /// (as ptxed does), not giving up on the rest of the buffer.
    #[test]
    fn a_psb_header_that_does_not_read_is_passed_over() {
        let mut code = vec![0x90u8; 0x20];
        code[..5].copy_from_slice(&[0xe8, 0x0b, 0, 0, 0]);
        code[0x10..0x12].copy_from_slice(&[0xff, 0xe0]);
        let mut t = psb();
        // In the header: an opcode no packet has.
        t.truncate(16);
        t.extend_from_slice(&[0x02, 0x00, 0x02, 0x00]);
        t.extend(psb());
        t.extend(enable(0x1000));
        t.push(PGD);
        let (got, walked) = walked(&t, &image(&code, 0x1000));
        assert_eq!(walked.calls, 1, "{got:?}");
        assert_eq!(walked.gaps, 1, "{got:?}");
    }

    /// Bytes that are no trace at all give one gap over all of them, never a panic.
    #[test]
    fn a_buffer_without_a_psb_is_one_gap() {
        let junk = vec![0xffu8; 100];
        let (got, walked) = walked(&junk, &Image::default());
        assert_eq!(walked.gap_bytes, 100, "{got:?}");
    }
}
