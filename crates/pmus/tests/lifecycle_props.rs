//! Property tests: any sequence of open / close / enable / disable /
//! pause / resume / overflow keeps the invariants:
//!
//! - no leak: once everything is closed, no event object is left;
//! - no use after close: a closed fd is EBADF everywhere;
//! - groups: a member's leader is its leader until the leader closes, then
//!   it is a singleton (perf_group_detach);
//! - the AUX event's paused state is the one the last pause or resume that
//!   actually ran left (a trigger runs when it is scheduled in: enabled,
//!   and its leader enabled, and still linked to the AUX event);
//! - counts: a probe event counts exactly the probe hits while it was
//!   scheduled in.

mod common;

use common::*;
use perfaux_abi::attr::AuxAction;
use perfaux_abi::consts::*;
use perfaux_abi::errno::{EBADF, EBUSY};
use perfaux_core::{EventFd, EventState, Mmap, Target, WeakEvent, perf_event_open_attr};
use perfaux_pmus::PROBE_TYPE;
use perfaux_pmus::probe::resolve_probe;
use proptest::prelude::*;

fn hit_pause() {
    let _g = perfaux_swtrace::probe!("lp_pause");
}
fn hit_resume() {
    let _g = perfaux_swtrace::probe!("lp_resume");
}

#[derive(Debug, Clone)]
enum Op {
    OpenTrace { start_paused: bool },
    OpenTrigger { pause: bool, grouped: bool },
    Close(usize),
    Enable(usize, bool),
    Disable(usize, bool),
    Fire { pause: bool },
    CloseRawTwice(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<bool>().prop_map(|start_paused| Op::OpenTrace { start_paused }),
        (any::<bool>(), any::<bool>())
            .prop_map(|(pause, grouped)| Op::OpenTrigger { pause, grouped }),
        (0usize..8).prop_map(Op::Close),
        (0usize..8, any::<bool>()).prop_map(|(i, g)| Op::Enable(i, g)),
        (0usize..8, any::<bool>()).prop_map(|(i, g)| Op::Disable(i, g)),
        any::<bool>().prop_map(|pause| Op::Fire { pause }),
        (0usize..8).prop_map(Op::CloseRawTwice),
    ]
}

struct Live {
    fd: EventFd,
    _maps: Vec<Mmap>,
    /// Model: the trace event, or a trigger (pause?).
    trigger: Option<bool>,
    enabled: bool,
    /// Model: index (in `live`) identity of the leader, by event id.
    leader: Option<u64>,
    /// Model: still linked to its AUX event.
    linked: bool,
    count: u64,
}

struct World {
    live: Vec<Live>,
    weak: Vec<WeakEvent>,
    /// Model of the trace event's hw.aux_paused, per trace event id.
    paused: Option<(u64, bool)>,
}

impl World {
    fn trace(&self) -> Option<&Live> {
        self.live.iter().find(|l| l.trigger.is_none())
    }

    fn active(&self, l: &Live) -> bool {
        if !l.enabled {
            return false;
        }
        match l.leader {
            None => true,
            Some(id) => self.live.iter().any(|x| x.fd.id() == id && x.enabled),
        }
    }

    fn group_of(&self, i: usize) -> Vec<usize> {
        let l = &self.live[i];
        let leader_id = l.leader.unwrap_or(l.fd.id());
        (0..self.live.len())
            .filter(|&j| {
                let x = &self.live[j];
                x.fd.id() == leader_id || x.leader == Some(leader_id)
            })
            .collect()
    }
}

fn apply(w: &mut World, op: &Op) -> Result<(), TestCaseError> {
    match *op {
        Op::OpenTrace { start_paused } => {
            let mut a = trace_attr();
            if start_paused {
                a.aux_action = AuxAction::START_PAUSED;
            }
            let r = perf_event_open_attr(&a, Target::current(), -1, -1, 0);
            if w.trace().is_some() {
                prop_assert_eq!(r.unwrap_err().errno, EBUSY);
                return Ok(());
            }
            let t = map_trace(r.unwrap(), 1, true);
            w.weak.push(t.ev.downgrade());
            w.paused = Some((t.ev.id(), start_paused));
            w.live.push(Live {
                fd: t.ev,
                _maps: vec![t.data, t.aux],
                trigger: None,
                enabled: false,
                leader: None,
                linked: false,
                count: 0,
            });
        }
        Op::OpenTrigger { pause, grouped } => {
            let name = if pause { "lp_pause" } else { "lp_resume" };
            let mut a = sampling(PROBE_TYPE, resolve_probe(name), 1);
            let leader = w
                .trace()
                .filter(|_| grouped)
                .map(|t| (t.fd.as_raw(), t.fd.id()));
            if leader.is_some() {
                a.aux_action = if pause {
                    AuxAction::PAUSE
                } else {
                    AuxAction::RESUME
                };
            }
            let fd = perf_event_open_attr(&a, Target::current(), -1, leader.map_or(-1, |l| l.0), 0)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            w.weak.push(fd.downgrade());
            w.live.push(Live {
                fd,
                _maps: vec![],
                trigger: Some(pause),
                enabled: false,
                leader: leader.map(|l| l.1),
                linked: leader.is_some(),
                count: 0,
            });
        }
        Op::Close(i) | Op::CloseRawTwice(i) if i >= w.live.len() => {}
        Op::Close(i) => {
            let gone = w.live.remove(i);
            let id = gone.fd.id();
            drop(gone);
            for l in &mut w.live {
                if l.leader == Some(id) {
                    l.leader = None;
                    l.linked = false;
                }
            }
            if w.paused.is_some_and(|(t, _)| t == id) {
                w.paused = None;
            }
        }
        Op::CloseRawTwice(i) => {
            let raw = w.live[i].fd.as_raw();
            let gone = w.live.remove(i);
            let id = gone.fd.id();
            // close(2) on the number; the handle's own drop then finds
            // nothing to close.
            prop_assert!(perfaux_core::close(raw).is_ok());
            prop_assert_eq!(perfaux_core::close(raw).unwrap_err().errno, EBADF);
            prop_assert_eq!(
                perf_event_open_attr(
                    &attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY),
                    Target::current(),
                    -1,
                    raw,
                    0
                )
                .unwrap_err()
                .errno,
                EBADF
            );
            drop(gone);
            for l in &mut w.live {
                if l.leader == Some(id) {
                    l.leader = None;
                    l.linked = false;
                }
            }
            if w.paused.is_some_and(|(t, _)| t == id) {
                w.paused = None;
            }
        }
        Op::Enable(i, _) | Op::Disable(i, _) if i >= w.live.len() => {}
        Op::Enable(i, group) | Op::Disable(i, group) => {
            let on = matches!(op, Op::Enable(..));
            let fl = if group { PERF_IOC_FLAG_GROUP } else { 0 };
            if on {
                w.live[i].fd.enable(fl).unwrap();
            } else {
                w.live[i].fd.disable(fl).unwrap();
            }
            let targets = if group { w.group_of(i) } else { vec![i] };
            for j in targets {
                w.live[j].enabled = on;
            }
        }
        Op::Fire { pause } => {
            for k in 0..w.live.len() {
                if w.live[k].trigger == Some(pause) && w.active(&w.live[k]) {
                    w.live[k].count += 1;
                    if w.live[k].linked
                        && let Some((t, _)) = w.paused
                    {
                        w.paused = Some((t, pause));
                    }
                }
            }
            if pause {
                hit_pause();
            } else {
                hit_resume();
            }
        }
    }
    check(w)
}

fn check(w: &World) -> Result<(), TestCaseError> {
    for l in &w.live {
        let ev = l.fd.event();
        let want = if w.active(l) {
            EventState::Active
        } else if l.enabled {
            EventState::Inactive
        } else {
            EventState::Off
        };
        prop_assert_eq!(ev.state(), want, "state of {:?}", ev);
        match l.leader {
            Some(id) => prop_assert_eq!(ev.group_leader().id(), id),
            None => prop_assert!(ev.is_group_leader()),
        }
        prop_assert_eq!(ev.aux_event().is_some(), l.linked);
        if l.trigger.is_some() {
            prop_assert_eq!(ev.count(), l.count);
        }
    }
    if let (Some((id, paused)), Some(t)) = (w.paused, w.trace()) {
        prop_assert_eq!(t.fd.id(), id);
        prop_assert_eq!(t.fd.event().aux_paused(), paused);
        prop_assert_eq!(t.fd.event().counters().dropped_pause, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn lifecycle_keeps_the_invariants(ops in proptest::collection::vec(op(), 1..40)) {
        perfaux_pmus::register();
        let mut w = World { live: Vec::new(), weak: Vec::new(), paused: None };
        for op in &ops {
            apply(&mut w, op)?;
        }
        w.live.clear();
        for (i, weak) in w.weak.iter().enumerate() {
            prop_assert!(!weak.is_alive(), "event {} leaked after close", i);
        }
    }
}
